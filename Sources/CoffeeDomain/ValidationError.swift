/// Why an input was refused: which element, which field, which rule.
///
/// Describes itself the way a person would say it:
/// `drink 3: mgCaffeine must be > 0, got -5`.
public struct ValidationError: Error, Hashable, Sendable, CustomStringConvertible {
    /// 0-based position in an array, when the input was one.
    public var index: Int?
    /// 1-based line, for JSON Lines input.
    public var line: Int?
    /// The offending field, when one field is to blame.
    public var field: String?
    /// The rule that was broken, as a sentence fragment ("must be > 0, got -5").
    public var rule: String

    public init(index: Int? = nil, line: Int? = nil, field: String? = nil, rule: String) {
        self.index = index
        self.line = line
        self.field = field
        self.rule = rule
    }

    /// The same error, placed at `index` of an array.
    public func at(index: Int) -> ValidationError {
        var copy = self
        copy.index = index
        return copy
    }

    /// The same error, placed at a 1-based `line` of a JSON Lines file.
    public func at(line: Int) -> ValidationError {
        var copy = self
        copy.line = line
        return copy
    }

    /// The error without its position: "mgCaffeine must be > 0, got -5".
    public var reason: String {
        if let field { return "\(field) \(rule)" }
        return rule
    }

    public var description: String {
        var place: [String] = []
        if let line { place.append("line \(line)") }
        if let index { place.append("element \(index)") }
        return place.isEmpty ? reason : "\(place.joined(separator: ", ")): \(reason)"
    }
}
