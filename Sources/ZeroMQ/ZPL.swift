/// ZeroMQ Property Language (ZeroMQ RFC 4): the text format of ZeroMQ
/// certificates, as CZMQ's `zcert` and pyzmq's `zmq.auth` write them.
///
///     metadata
///         name = "kitchen-scale"
///     curve
///         public-key = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"
///
/// Four spaces per level of nesting; `#` starts a comment; a value is quoted
/// with `"` or `'`, or runs to the end of the line (or a comment).
public enum ZPL {
    /// A ZPL document that cannot be read, with its line.
    public struct SyntaxError: Error, CustomStringConvertible, Equatable {
        public let line: Int
        public let message: String
        public var description: String { "line \(line): \(message)" }
    }

    /// Every `name = value` in `text`, keyed by its path (`curve/public-key`),
    /// with the line it is on.
    public static func parse(_ text: String) throws(SyntaxError) -> [String: (value: String, line: Int)] {
        var values: [String: (value: String, line: Int)] = [:]
        var path: [String] = []
        for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let number = index + 1
            let line = raw.hasSuffix("\r") ? raw.dropLast() : raw[...]
            let content = line.drop { $0 == " " }
            if content.isEmpty || content.hasPrefix("#") { continue }
            let indent = line.count - content.count
            guard indent % 4 == 0, !line.contains("\t") else {
                throw SyntaxError(line: number, message: "indent with four spaces per level (ZPL), not tabs or \(indent) spaces")
            }
            let level = indent / 4
            guard level <= path.count else {
                throw SyntaxError(line: number, message: "indented deeper than the line above allows")
            }
            path.removeLast(path.count - level)
            let name: Substring
            var value: String?
            if let equals = content.firstIndex(of: "=") {
                name = content[..<equals].reversed().drop { $0 == " " }.reversed().reduce(into: Substring()) { $0.append($1) }
                value = try Self.value(content[content.index(after: equals)...], line: number)
            } else {
                name = content.prefix { $0 != " " && $0 != "#" }
            }
            guard !name.isEmpty, name.allSatisfy(isNameCharacter) else {
                throw SyntaxError(line: number, message: "\"\(name)\" is not a ZPL name (letters, digits and $-_@.&+/)")
            }
            path.append(String(name))
            if let value { values[path.joined(separator: "/")] = (value, number) }
        }
        return values
    }

    private static func isNameCharacter(_ c: Character) -> Bool {
        c.isASCII && (c.isLetter || c.isNumber || "$-_@.&+/".contains(c))
    }

    private static func value(_ text: Substring, line: Int) throws(SyntaxError) -> String {
        let text = text.drop { $0 == " " }
        guard let quote = text.first, quote == "\"" || quote == "'" else {
            // Unquoted: up to a comment, trailing spaces dropped.
            let body = text.prefix { $0 != "#" }
            return String(body.reversed().drop { $0 == " " }.reversed())
        }
        let rest = text.dropFirst()
        guard let end = rest.firstIndex(of: quote) else {
            throw SyntaxError(line: line, message: "the value's closing \(quote) is missing")
        }
        let after = rest[rest.index(after: end)...].drop { $0 == " " }
        guard after.isEmpty || after.hasPrefix("#") else {
            throw SyntaxError(line: line, message: "unexpected text after the quoted value")
        }
        return String(rest[..<end])
    }
}
