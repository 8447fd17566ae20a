import Foundation

/// The parser's scalars: strings with their escapes, and numbers.
extension JSONReader.Parser {

    /// A string, from its opening quote; escapes decoded, UTF-8 checked.
    mutating func string() throws(JSONReader.SyntaxError) -> String {
        let start = i
        i += 1  // "
        var ascii = true
        // Fast path: no escapes.
        while i < bytes.count {
            let b = bytes[i]
            if b == UInt8(ascii: "\"") {
                let slice = UnsafeBufferPointer(rebasing: bytes[(start + 1)..<i])
                i += 1
                if ascii { return String(decoding: slice, as: UTF8.self) }
                guard let s = String(validating: slice, as: UTF8.self) else {
                    throw fail("string is not valid UTF-8", at: start)
                }
                return s
            }
            if b == UInt8(ascii: "\\") { break }
            if b < 0x20 { throw fail("control character in string") }
            if b >= 0x80 { ascii = false }
            i += 1
        }
        guard i < bytes.count else { throw fail("unterminated string", at: start) }
        // Slow path: copy what came before the first escape, then decode.
        var out = Array(UnsafeBufferPointer(rebasing: bytes[(start + 1)..<i]))
        while i < bytes.count {
            let b = bytes[i]
            switch b {
            case UInt8(ascii: "\""):
                i += 1
                guard let s = String(validating: out, as: UTF8.self) else {
                    throw fail("string is not valid UTF-8", at: start)
                }
                return s
            case UInt8(ascii: "\\"):
                try escape(into: &out)
            case 0..<0x20:
                throw fail("control character in string")
            default:
                out.append(b)
                i += 1
            }
        }
        throw fail("unterminated string", at: start)
    }

    /// One escape sequence, from its backslash, appended as UTF-8.
    mutating func escape(into out: inout [UInt8]) throws(JSONReader.SyntaxError) {
        guard i + 1 < bytes.count else { throw fail("unterminated escape") }
        let c = bytes[i + 1]
        i += 2
        switch c {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(c)
        case UInt8(ascii: "b"): out.append(0x08)
        case UInt8(ascii: "f"): out.append(0x0C)
        case UInt8(ascii: "n"): out.append(0x0A)
        case UInt8(ascii: "r"): out.append(0x0D)
        case UInt8(ascii: "t"): out.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = try hex4()
            if (0xD800...0xDBFF).contains(scalar) {
                guard i + 1 < bytes.count, bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u") else {
                    throw fail("unpaired surrogate in \\u escape")
                }
                i += 2
                let low = try hex4()
                guard (0xDC00...0xDFFF).contains(low) else { throw fail("unpaired surrogate in \\u escape") }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            } else if (0xDC00...0xDFFF).contains(scalar) {
                throw fail("unpaired surrogate in \\u escape")
            }
            out.append(contentsOf: String(Character(Unicode.Scalar(scalar)!)).utf8)
        default:
            throw fail("invalid escape \\\(Self.show(c))", at: i - 2)
        }
    }

    mutating func hex4() throws(JSONReader.SyntaxError) -> UInt32 {
        guard i + 4 <= bytes.count else { throw fail("\\u escape needs four hex digits") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let b = bytes[i]
            let d: UInt8
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): d = b - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d = b - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): d = b - UInt8(ascii: "A") + 10
            default: throw fail("\\u escape needs four hex digits")
            }
            v = v << 4 | UInt32(d)
            i += 1
        }
        return v
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`: an
    /// integer that fits in Int64 stays one; anything else is a Double.
    mutating func number() throws(JSONReader.SyntaxError) -> JSONValue {
        let start = i
        if bytes[i] == UInt8(ascii: "-") { i += 1 }
        let intStart = i
        guard digits() > 0 else { throw fail("invalid number", at: start) }
        if bytes[intStart] == UInt8(ascii: "0"), i - intStart > 1 { throw fail("number with a leading zero", at: start) }
        var integral = true
        var fraction = 0
        if i < bytes.count, bytes[i] == UInt8(ascii: ".") {
            i += 1
            integral = false
            fraction = digits()
            guard fraction > 0 else { throw fail("invalid number: digits must follow '.'", at: start) }
        }
        var exponent = false
        if i < bytes.count, bytes[i] | 0x20 == UInt8(ascii: "e") {
            i += 1
            integral = false
            exponent = true
            if i < bytes.count, bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") { i += 1 }
            guard digits() > 0 else { throw fail("invalid number: digits must follow the exponent", at: start) }
        }
        // Fast path, with no text made: up to 15 digits and no exponent.
        // Such a significand is exact in a Double, and so is a power of
        // ten up to 10^22, so one division rounds correctly (Clinger).
        let count = i - intStart - (fraction > 0 ? 1 : 0)
        if !exponent, count <= 15 {
            var significand: Int64 = 0
            for k in intStart..<i where bytes[k] != UInt8(ascii: ".") {
                significand = significand * 10 + Int64(bytes[k] &- UInt8(ascii: "0"))
            }
            let negative = bytes[start] == UInt8(ascii: "-")
            if integral { return .int(negative ? -significand : significand) }
            let magnitude = Double(significand) / Self.powersOfTen[fraction]
            return .double(negative ? -magnitude : magnitude)
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<i]), as: UTF8.self)
        if integral, let n = Int64(text) { return .int(n) }
        guard let d = Double(text), d.isFinite else { throw fail("number out of range", at: start) }
        return .double(d)
    }

    /// 10^0 through 10^15, each exact in a Double.
    static let powersOfTen: [Double] = (0...15).map { k in (0..<k).reduce(1.0) { x, _ in x * 10 } }

    /// Skips digits; returns how many.
    mutating func digits() -> Int {
        let start = i
        while i < bytes.count, bytes[i] >= UInt8(ascii: "0"), bytes[i] <= UInt8(ascii: "9") { i += 1 }
        return i - start
    }

    static func show(_ b: UInt8) -> String {
        (0x21..<0x7F).contains(b) ? "'\(Character(Unicode.Scalar(b)))'" : "byte 0x\(String(b, radix: 16))"
    }
}
