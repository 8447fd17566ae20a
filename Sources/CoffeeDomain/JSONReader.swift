import Foundation

/// Reads JSON text (RFC 8259) into a `JSONValue`, strictly, in one pass over
/// the bytes.
///
/// Every bus message, inbox line and inbox document is read here. Foundation's
/// `JSONDecoder` took about 7 µs for one small drink object on this machine,
/// most of the ingest thread's time, because each optional field that did not
/// decode threw an error; this reader builds the few values a drink has and
/// nothing else. An object that gives a key twice is refused, naming the
/// key (PROTOCOL.md §2: which of the two was meant cannot be known); the
/// configuration file is read with `duplicateKeys: .keep` so that its own
/// error can name the key's path.
public enum JSONReader {
    /// What to do about an object that gives a key twice.
    public enum DuplicateKeys: Sendable {
        /// A syntax error naming the key (the default).
        case refuse
        /// Keep both; readers of the object take the last.
        case keep
    }

    /// Arrays and objects nested deeper than this are refused, so hostile
    /// input cannot exhaust the stack.
    public static let maxDepth = 128

    /// Why the text is not JSON, and where.
    public struct SyntaxError: Error, CustomStringConvertible, Sendable, Equatable {
        public var message: String
        /// Byte offset of the problem from the start of the text.
        public var offset: Int
        public var description: String { "\(message) at byte \(offset)" }
    }

    /// The one JSON value `data` holds (whitespace around it is allowed).
    public static func parse(_ data: Data, duplicateKeys: DuplicateKeys = .refuse) throws(SyntaxError) -> JSONValue {
        try data.withUnsafeBytes { raw in
            Result { () throws(SyntaxError) in try parse(raw, duplicateKeys: duplicateKeys) }
        }.get()
    }

    /// The one JSON value in `bytes`, read in place.
    public static func parse(_ bytes: UnsafeRawBufferPointer, duplicateKeys: DuplicateKeys = .refuse) throws(SyntaxError)
        -> JSONValue
    {
        var parser = Parser(bytes: bytes.bindMemory(to: UInt8.self))
        parser.refuseDuplicates = duplicateKeys == .refuse
        return try parser.document()
    }

    /// Reads one document piece by piece, in order, for a caller that knows
    /// its shape: memory is what the caller keeps, not a tree of the whole.
    /// Every method reads strictly and throws where the text is not JSON.
    /// Bus messages are read this way (objects straight into drink inputs,
    /// member names compared in place), and so are inbox JSON documents.
    public struct Cursor {
        private var parser: Parser

        public init(_ bytes: UnsafeRawBufferPointer) {
            parser = Parser(bytes: bytes.bindMemory(to: UInt8.self))
        }

        private init(parser: Parser) { self.parser = parser }

        /// The first byte of the next value, after whitespace (`{` for an
        /// object, `[` for an array); nil at the end of the text.
        public mutating func peek() -> UInt8? {
            parser.skipWhitespace()
            return parser.peek
        }

        /// The next value, whole.
        public mutating func value() throws(SyntaxError) -> JSONValue { try parser.value() }

        /// The next value, an object, read straight into a `T`.
        public mutating func object<T: JSONObjectInput>(_: T.Type) throws(SyntaxError) -> T {
            try parser.object(T.self)
        }

        /// The next value as a `T` when it is an object, or a value `T`
        /// takes in place of one (`fromScalar`: a deletion's bare UUID);
        /// otherwise read, dropped, and nil.
        public mutating func objectOrSkip<T: JSONObjectInput>(_: T.Type) throws(SyntaxError) -> T? {
            if peek() == UInt8(ascii: "{") { return try object(T.self) }
            return T.fromScalar(try value())
        }

        /// The next value, an array: `element` reads each element (exactly one value).
        public mutating func elements(_ element: (inout Cursor) throws(SyntaxError) -> Void) throws(SyntaxError) {
            guard peek() == UInt8(ascii: "[") else { throw parser.fail("expected an array") }
            try parser.elements(closing: "]", in: "array") { (p: inout Parser) throws(SyntaxError) in
                try Cursor.lend(&p, element)
            }
        }

        /// The next value, an object: `member` gets each name, valid during
        /// the call, and reads its value (exactly one).
        public mutating func members(_ member: (JSONKey, inout Cursor) throws(SyntaxError) -> Void) throws(SyntaxError) {
            guard peek() == UInt8(ascii: "{") else { throw parser.fail("expected an object") }
            try parser.members { (key: JSONKey, p: inout Parser) throws(SyntaxError) in
                try Cursor.lend(&p) { (c: inout Cursor) throws(SyntaxError) in try member(key, &c) }
            }
        }

        /// Only whitespace is left.
        public mutating func end() throws(SyntaxError) {
            parser.skipWhitespace()
            guard parser.i == parser.bytes.count else { throw parser.fail("unexpected text after the JSON value") }
        }

        /// Runs `body` on a cursor over `parser`'s position, and takes back where it stopped.
        private static func lend(_ parser: inout Parser, _ body: (inout Cursor) throws(SyntaxError) -> Void) throws(SyntaxError) {
            var cursor = Cursor(parser: parser)
            defer { parser = cursor.parser }
            try body(&cursor)
        }
    }

    private struct Parser {
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

        /// A string, from its opening quote; escapes decoded, UTF-8 checked.
        mutating func string() throws(SyntaxError) -> String {
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
        mutating func escape(into out: inout [UInt8]) throws(SyntaxError) {
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

        mutating func hex4() throws(SyntaxError) -> UInt32 {
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
        mutating func number() throws(SyntaxError) -> JSONValue {
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
        for copy in copies where copy.count == name.count && copy.elementsEqual(name) { return false }
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
        range.count == name.count
            && (name.isEmpty || memcmp(text.baseAddress! + range.lowerBound, name.baseAddress!, name.count) == 0)
    }
}

/// A member name as read, valid only during the call that receives it.
public struct JSONKey {
    public let bytes: UnsafeBufferPointer<UInt8>

    public static func == (key: JSONKey, name: StaticString) -> Bool {
        key.bytes.count == name.utf8CodeUnitCount
            && (key.bytes.isEmpty || memcmp(key.bytes.baseAddress!, name.utf8Start, key.bytes.count) == 0)
    }
}

extension JSONValue {
    /// The value of the last member named `key`, when this is an object.
    public subscript(member key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.last { $0.0 == key }?.1
    }
}
