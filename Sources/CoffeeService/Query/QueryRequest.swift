import CoffeeDomain
import Foundation

/// A query request as read by `JSONReader`, before its fields are checked.
struct QueryRequest {
    var op: InputField<String> = .absent
    /// `anchor`: absent or null (every live drink), or a number.
    var anchor: InputField<Double> = .absent
    var limit: InputField<Double> = .absent
    var at: InputField<InputDate> = .absent
    /// `drinks`' range (§15).
    var from: InputField<InputDate> = .absent
    var to: InputField<InputDate> = .absent
    /// `drinks`' page: the UUID of the last drink of the page before.
    var after: InputField<String> = .absent
    /// `history`'s bucket: day, week or month.
    var by: InputField<String> = .absent
    /// Each element, or nil where it is not an object (so that it can be named).
    var drinks: InputField<[DrinkInput?]> = .absent
    var deletions: InputField<[DeletionInput?]> = .absent
    /// `backup`'s file name.
    var name: InputField<String> = .absent

    init(json object: JSONValue) {
        op = .init(json: object[member: "op"], expected: "a string")
        anchor = .init(json: object[member: "anchor"], expected: "an integer or null")
        limit = .init(json: object[member: "limit"], expected: "an integer")
        at = .init(json: object[member: "at"])
        from = .init(json: object[member: "from"])
        to = .init(json: object[member: "to"])
        after = .init(json: object[member: "after"], expected: "a UUID")
        by = .init(json: object[member: "by"], expected: "a string")
        drinks = Self.objects(object[member: "drinks"], DrinkInput.self, expected: "an array of drink objects")
        deletions = Self.objects(object[member: "deletions"], DeletionInput.self, expected: "an array of deletion objects")
        name = .init(json: object[member: "name"], expected: "a string")
    }

    private static func objects<T: JSONObjectInput>(_ value: JSONValue?, _: T.Type, expected: String) -> InputField<[T?]> {
        switch value {
        case nil, .null?: .absent
        case .array(let items)?: .value(BatchDecoder.objects(T.self, items))
        default: .wrongType(expected: expected)
        }
    }
}

/// A refusal, as the query endpoint reports it.
public struct QueryError: Error, Sendable {
    public enum Code: String, Sendable {
        case badRequest = "bad_request"
        case invalidDrink = "invalid_drink"
        case anchorExpired = "anchor_expired"
        case tooLarge = "too_large"
        case unavailable
        case forbidden
        /// A standby (docs/protocol.md §11) takes no writes.
        case readOnly = "read_only"
        case `internal`
    }

    public var code: Code
    public var message: String
    public var index: Int?
    public var field: String?

    public init(_ code: Code, _ message: String, index: Int? = nil, field: String? = nil) {
        self.code = code
        self.message = message
        self.index = index
        self.field = field
    }

    var json: JSONValue {
        var error: [(String, JSONValue)] = [("code", .string(code.rawValue)), ("message", .string(message))]
        if let index { error.append(("index", .int(Int64(index)))) }
        if let field { error.append(("field", .string(field))) }
        return .object([("ok", false), ("error", .object(error))])
    }
}
