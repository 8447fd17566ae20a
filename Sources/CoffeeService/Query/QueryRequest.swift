import CoffeeDomain
import Foundation

/// A query request as decoded, before its fields are checked.
struct QueryRequest: Decodable {
    var op: InputField<String> = .absent
    /// `anchor`: absent or null (every live drink), or a number.
    var anchor: InputField<Double> = .absent
    var limit: InputField<Double> = .absent
    var at: InputField<InputDate> = .absent
    var drinks: InputField<[Lenient<DrinkInput>]> = .absent
    var deletions: InputField<[Lenient<DeletionInput>]> = .absent

    enum Key: String, CodingKey { case op, anchor, limit, at, drinks, deletions }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Key.self)
        op = DrinkInput.field(c, .op, "a string")
        anchor = DrinkInput.field(c, .anchor, "an integer or null")
        limit = DrinkInput.field(c, .limit, "an integer")
        at = DrinkInput.dateField(c, .at)
        drinks = DrinkInput.field(c, .drinks, "an array of drink objects")
        deletions = DrinkInput.field(c, .deletions, "an array of deletion objects")
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
