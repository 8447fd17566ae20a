import Foundation

#if canImport(Glibc)
    import Glibc
#endif

extension JSONReader {
    /// One pass over the bytes: the tree reader and the cursor both read through it.
    struct Parser {
        let bytes: UnsafeBufferPointer<UInt8>
        var i = 0
        var depth = 0
        var refuseDuplicates = true

        init(bytes: UnsafeBufferPointer<UInt8>) {
            self.bytes = bytes
            // A UTF-8 byte order mark is tolerated, as editors write one.
            if bytes.count >= 3, bytes[0] == 0xEF, bytes[1] == 0xBB, bytes[2] == 0xBF { i = 3 }
        }

        func fail(_ message: String, at offset: Int? = nil) -> SyntaxError {
            SyntaxError(message: message, offset: offset ?? i)
        }

        mutating func document() throws(SyntaxError) -> JSONValue {
            let v = try value()
            skipWhitespace()
            guard i == bytes.count else { throw fail("unexpected text after the JSON value") }
            return v
        }

        mutating func skipWhitespace() {
            while i < bytes.count {
                switch bytes[i] {
                case 0x20, 0x0A, 0x0D, 0x09: i += 1
                default: return
                }
            }
        }

        mutating func value() throws(SyntaxError) -> JSONValue {
            skipWhitespace()
            guard i < bytes.count else { throw fail("unexpected end of input") }
            switch bytes[i] {
            case UInt8(ascii: "{"): return try object()
            case UInt8(ascii: "["): return try array()
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"):
                try literal("true")
                return .bool(true)
            case UInt8(ascii: "f"):
                try literal("false")
                return .bool(false)
            case UInt8(ascii: "n"):
                try literal("null")
                return .null
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
            default: throw fail("unexpected character \(Self.show(bytes[i]))")
            }
        }

        mutating func literal(_ word: StaticString) throws(SyntaxError) {
            let n = word.utf8CodeUnitCount
            guard i + n <= bytes.count, (0..<n).allSatisfy({ bytes[i + $0] == word.utf8Start[$0] }) else {
                throw fail("invalid literal; expected \(word)")
            }
            i += n
        }

        mutating func array() throws(SyntaxError) -> JSONValue {
            var items: [JSONValue] = []
            try elements(closing: "]", in: "array") { (p: inout Parser) throws(SyntaxError) in items.append(try p.value()) }
            return .array(items)
        }

        /// The byte at the read position, if any.
        var peek: UInt8? { i < bytes.count ? bytes[i] : nil }

        mutating func object() throws(SyntaxError) -> JSONValue {
            var read: [(String, JSONValue)] = []
            try members { (key: JSONKey, p: inout Parser) throws(SyntaxError) in
                read.append((String(decoding: key.bytes, as: UTF8.self), try p.value()))
            }
            return .object(read)
        }

        /// An object read straight into a `T`: each member's name is compared
        /// in place (no `String` unless it has escapes or non-ASCII bytes).
        mutating func object<T: JSONObjectInput>(_: T.Type) throws(SyntaxError) -> T {
            var input = T()
            try members { (key: JSONKey, p: inout Parser) throws(SyntaxError) in
                // A plain string is offered in place first: no `String` unless the input wants one.
                p.skipWhitespace()
                if p.peek == UInt8(ascii: "\""), let text = p.plainText() {
                    if !input.take(key, text: text) { input.take(key, .string(String(decoding: text, as: UTF8.self))) }
                } else {
                    input.take(key, try p.value())
                }
            }
            return input
        }

        /// The members of an object, from its opening brace: each name (in
        /// place when plain) and its colon are read here, a name given
        /// twice is refused, and `member` reads the value.
        mutating func members(_ member: (JSONKey, inout Parser) throws(SyntaxError) -> Void) throws(SyntaxError) {
            var seen = SeenNames()
            try elements(closing: "}", in: "object") { (p: inout Parser) throws(SyntaxError) in
                p.skipWhitespace()
                guard p.peek == UInt8(ascii: "\"") else { throw p.fail("expected a member name in quotes") }
                let start = p.i
                if let name = p.plainText() {
                    try p.colon()
                    if p.refuseDuplicates, !seen.insert(name, text: p.bytes, inText: true) {
                        throw p.duplicate(name, at: start)
                    }
                    try member(JSONKey(bytes: name), &p)
                    return
                }
                var name = try p.string()
                try p.colon()
                var failure: SyntaxError?
                name.withUTF8 { bytes in
                    do throws(SyntaxError) {
                        if p.refuseDuplicates, !seen.insert(bytes, text: p.bytes, inText: false) {
                            throw p.duplicate(bytes, at: start)
                        }
                        try member(JSONKey(bytes: bytes), &p)
                    } catch {
                        failure = error
                    }
                }
                if let failure { throw failure }
            }
        }

        func duplicate(_ name: UnsafeBufferPointer<UInt8>, at offset: Int) -> SyntaxError {
            fail("key \"\(String(decoding: name.prefix(64), as: UTF8.self))\" is given twice", at: offset)
        }

        mutating func colon() throws(SyntaxError) {
            skipWhitespace()
            guard peek == UInt8(ascii: ":") else { throw fail("expected ':' after member name") }
            i += 1
        }

        /// A string of printable ASCII without escapes (a member name, or a
        /// value read in place), from its opening quote, without its quotes;
        /// nil (nothing read) for any other string.
        mutating func plainText() -> UnsafeBufferPointer<UInt8>? {
            var j = i + 1
            while j < bytes.count {
                let b = bytes[j]
                if b == UInt8(ascii: "\"") {
                    let name = UnsafeBufferPointer(rebasing: bytes[(i + 1)..<j])
                    i = j + 1
                    return name
                }
                guard b >= 0x20, b < 0x80, b != UInt8(ascii: "\\") else { return nil }
                j += 1
            }
            return nil
        }

        /// The elements of an array or object, from its opening bracket to
        /// `closing`, separated by commas, each read by `element`; nesting
        /// deeper than `maxDepth` is refused.
        mutating func elements(
            closing: Unicode.Scalar, in what: String, _ element: (inout Parser) throws(SyntaxError) -> Void
        ) throws(SyntaxError) {
            depth += 1
            guard depth <= JSONReader.maxDepth else { throw fail("nested deeper than \(JSONReader.maxDepth) levels") }
            defer { depth -= 1 }
            let close = UInt8(ascii: closing)
            i += 1  // the opening bracket
            skipWhitespace()
            if i < bytes.count, bytes[i] == close {
                i += 1
                return
            }
            while true {
                try element(&self)
                skipWhitespace()
                guard i < bytes.count else { throw fail("unterminated \(what)") }
                switch bytes[i] {
                case UInt8(ascii: ","): i += 1
                case close:
                    i += 1
                    return
                default: throw fail("expected ',' or '\(closing)' in \(what), found \(Self.show(bytes[i]))")
                }
            }
        }
    }
}

/// The member names of one object read so far, to refuse one given twice:
/// the first names in the input are kept as ranges of it, inline (nothing
/// allocated for the few names of a bus object); past those, in an array;
/// past 32 names, a set, so a hostile object of many keys costs no more
/// than reading it.
private struct SeenNames {
    /// The first names that lie in the text, as ranges of it.
    private var first = InlineArray<8, Range<Int>>(repeating: 0..<0)
    private var firstCount = 0
    /// Later names that lie in the text.
    private var ranges: [Range<Int>] = []
    /// Names decoded from escapes.
    private var copies: [[UInt8]] = []
    private var large: Set<[UInt8]>?

    /// Adds `name`; false when it was there already. `inText`: `name` lies
    /// in `text` (remembered as a range) rather than in a decoded copy.
    mutating func insert(_ name: UnsafeBufferPointer<UInt8>, text: UnsafeBufferPointer<UInt8>, inText: Bool) -> Bool {
        if large != nil { return large!.insert(Array(name)).inserted }
        for k in 0..<firstCount where Self.equal(first[k], name, text) { return false }
        for range in ranges where Self.equal(range, name, text) { return false }
        for copy in copies where copy.withUnsafeBytes({ $0.sameBytes(as: UnsafeRawBufferPointer(name)) }) { return false }
        if inText, let start = name.baseAddress, let base = text.baseAddress {
            let offset = start - base
            if firstCount < first.count {
                first[firstCount] = offset..<(offset + name.count)
                firstCount += 1
            } else {
                ranges.append(offset..<(offset + name.count))
            }
        } else {
            copies.append(Array(name))
        }
        if firstCount + ranges.count + copies.count > 32 {
            var all = copies + ranges.map { Array(text.extracting($0)) }
            for k in 0..<firstCount { all.append(Array(text.extracting(first[k]))) }
            large = Set(all)
        }
        return true
    }

    private static func equal(_ range: Range<Int>, _ name: UnsafeBufferPointer<UInt8>, _ text: UnsafeBufferPointer<UInt8>) -> Bool
    {
        UnsafeRawBufferPointer(text.extracting(range)).sameBytes(as: UnsafeRawBufferPointer(name))
    }
}
