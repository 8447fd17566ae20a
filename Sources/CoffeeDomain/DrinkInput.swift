import Foundation

/// A field as it arrived, before any rule is applied.
public enum InputField<Value: Sendable>: Sendable {
    case absent
    case value(Value)
    /// Present but of the wrong JSON/plist type; carries the expected type.
    case wrongType(expected: String)
}

/// A date as it arrived: text, epoch seconds, or a property-list date.
public enum InputDate: Sendable, Hashable {
    case text(String)
    case epochSeconds(Double)
    case date(Date)
}

/// An input read from one JSON object by `JSONReader`, the way its
/// `Decodable` init reads it from a property list: field by field, never
/// failing on a field.
public protocol JSONObjectInput: Sendable {
    init(json object: JSONValue)
}

extension InputField<String> {
    /// A JSON string; null or missing is absent.
    public init(json value: JSONValue?, expected: String) {
        switch value {
        case nil, .null?: self = .absent
        case .string(let s)?: self = .value(s)
        default: self = .wrongType(expected: expected)
        }
    }
}

extension InputField<Double> {
    /// A JSON number; null or missing is absent.
    public init(json value: JSONValue?, expected: String) {
        switch value {
        case nil, .null?: self = .absent
        case .int(let n)?: self = .value(Double(n))
        case .double(let d)?: self = .value(d)
        default: self = .wrongType(expected: expected)
        }
    }
}

extension InputField<InputDate> {
    /// An RFC 3339 string or epoch seconds; null or missing is absent.
    public init(json value: JSONValue?) {
        switch value {
        case nil, .null?: self = .absent
        case .string(let s)?: self = .value(.text(s))
        case .int(let n)?: self = .value(.epochSeconds(Double(n)))
        case .double(let d)?: self = .value(.epochSeconds(d))
        default: self = .wrongType(expected: DrinkInput.dateExpected)
        }
    }
}

/// A drink object as decoded from JSON or a property list, field by field.
///
/// Decoding never fails on a field: a missing or mistyped field is recorded
/// so that validation can name it. Decoding fails only when the element is
/// not an object at all.
public struct DrinkInput: Decodable, JSONObjectInput {
    public var uuid: InputField<String> = .absent
    public var mgCaffeine: InputField<Double> = .absent
    public var date: InputField<InputDate> = .absent
    public var type: InputField<String> = .absent
    public var version: InputField<Double> = .absent
    public var source: InputField<String> = .absent

    public init() {}

    enum Key: String, CodingKey { case uuid, mgCaffeine, date, type, version, source }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Key.self)
        uuid = Self.field(c, .uuid, "a string")
        mgCaffeine = Self.field(c, .mgCaffeine, "a number")
        type = Self.field(c, .type, "a string")
        version = Self.field(c, .version, "an integer")
        source = Self.field(c, .source, "a string")
        date = Self.dateField(c, .date)
    }

    public init(json object: JSONValue) {
        uuid = .init(json: object[member: "uuid"], expected: "a string")
        mgCaffeine = .init(json: object[member: "mgCaffeine"], expected: "a number")
        type = .init(json: object[member: "type"], expected: "a string")
        version = .init(json: object[member: "version"], expected: "an integer")
        source = .init(json: object[member: "source"], expected: "a string")
        date = .init(json: object[member: "date"])
    }

    static let dateExpected = "an RFC 3339 date string or epoch seconds"

    public static func field<T: Decodable & Sendable, K: CodingKey>(
        _ c: KeyedDecodingContainer<K>, _ key: K, _ expected: String
    ) -> InputField<T> {
        guard c.contains(key), (try? c.decodeNil(forKey: key)) != true else { return .absent }
        if let v = try? c.decode(T.self, forKey: key) { return .value(v) }
        return .wrongType(expected: expected)
    }

    public static func dateField<K: CodingKey>(_ c: KeyedDecodingContainer<K>, _ key: K) -> InputField<InputDate> {
        guard c.contains(key), (try? c.decodeNil(forKey: key)) != true else { return .absent }
        if let s = try? c.decode(String.self, forKey: key) { return .value(.text(s)) }
        if let n = try? c.decode(Double.self, forKey: key) { return .value(.epochSeconds(n)) }
        if let d = try? c.decode(Date.self, forKey: key) { return .value(.date(d)) }
        return .wrongType(expected: dateExpected)
    }
}

/// A deletion as it arrived: `{"uuid", "version"}`, or JSON Lines'
/// `{"delete": "<uuid>"}`.
public struct DeletionInput: Decodable, JSONObjectInput {
    public var uuid: InputField<String> = .absent
    public var version: InputField<Double> = .absent
    /// Which key held the UUID, so errors name the field the sender used.
    public var uuidKey = "uuid"

    public init() {}

    enum Key: String, CodingKey { case uuid, version, delete }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Key.self)
        uuid = DrinkInput.field(c, .uuid, "a string")
        if case .absent = uuid, c.contains(.delete) {
            uuid = DrinkInput.field(c, .delete, "a string")
            uuidKey = "delete"
        }
        version = DrinkInput.field(c, .version, "an integer")
    }

    public init(json object: JSONValue) {
        uuid = .init(json: object[member: "uuid"], expected: "a string")
        if case .absent = uuid, let delete = object[member: "delete"] {
            uuid = .init(json: delete, expected: "a string")
            uuidKey = "delete"
        }
        version = .init(json: object[member: "version"], expected: "an integer")
    }
}
