import Foundation

/// Reads JSON text (RFC 8259) into a `JSONValue`, strictly, in one pass over
/// the bytes.
///
/// Every bus message, inbox line and inbox document is read here. Foundation's
/// `JSONDecoder` took about 7 µs for one small drink object on this machine,
/// most of the ingest thread's time, because each optional field that did not
/// decode threw an error; this reader builds the few values a drink has and
/// nothing else. An object that gives a key twice is refused, naming the
/// key (docs/protocol.md §2: which of the two was meant cannot be known); the
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

        /// The next value, whole, and its text as it stands in the document
        /// (a number's digits as written: `12.50` stays `12.50`).
        public mutating func valueAndText() throws(SyntaxError) -> (value: JSONValue, text: String) {
            parser.skipWhitespace()
            let start = parser.i
            let value = try parser.value()
            return (value, String(decoding: UnsafeBufferPointer(rebasing: parser.bytes[start..<parser.i]), as: UTF8.self))
        }

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
}

/// A member name as read, valid only during the call that receives it.
public struct JSONKey {
    public let bytes: UnsafeBufferPointer<UInt8>

    public static func == (key: JSONKey, name: StaticString) -> Bool {
        UnsafeRawBufferPointer(key.bytes).sameBytes(
            as: UnsafeRawBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
    }
}

extension JSONValue {
    /// The value of the last member named `key`, when this is an object.
    public subscript(member key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.last { $0.0 == key }?.1
    }
}
