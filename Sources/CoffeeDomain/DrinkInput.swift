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
    /// Text that was read in place and is a valid RFC 3339 date (the bus's
    /// common case: no `String` is made for it).
    case rfc3339(Date)
    case epochSeconds(Double)
    case date(Date)
}

/// An input read from one JSON object by `JSONReader`, the way its
/// `Decodable` init reads it from a property list: field by field, never
/// failing on a field.
public protocol JSONObjectInput: Sendable {
    /// Nothing read yet: every field absent.
    init()
    /// Takes one member of the object. A name given twice is taken twice,
    /// so the last one wins, as with `JSONValue[member:]`.
    mutating func take(_ key: JSONKey, _ value: JSONValue)
    /// Takes a member whose value is a string of printable ASCII without
    /// escapes, read in place (valid only during the call); false to have
    /// it as a `JSONValue` through `take(_:_:)` instead.
    mutating func take(_ key: JSONKey, text: UnsafeBufferPointer<UInt8>) -> Bool
    /// An input from a value that is not an object, where the contract
    /// allows one (a deletion given as a bare UUID string); nil otherwise.
    static func fromScalar(_ value: JSONValue) -> Self?
}

extension JSONObjectInput {
    public static func fromScalar(_ value: JSONValue) -> Self? { nil }

    public mutating func take(_ key: JSONKey, text: UnsafeBufferPointer<UInt8>) -> Bool { false }

    /// From an object already read whole (an inbox document, a query).
    public init(json object: JSONValue) {
        self.init()
        guard case .object(let members) = object else { return }
        for (name, value) in members {
            var name = name
            name.withUTF8 { take(JSONKey(bytes: $0), value) }
        }
    }
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
    /// The UUID and the type, when they arrived as text that was read in
    /// place and is valid (`take(_:text:)`); `uuid` and `type` are absent
    /// then. Validation takes these first.
    public var parsedUUID: UUID?
    public var parsedType: DrinkType?

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

    public mutating func take(_ key: JSONKey, _ value: JSONValue) {
        if key == "uuid" {
            uuid = .init(json: value, expected: "a string")
            parsedUUID = nil
        } else if key == "mgCaffeine" {
            mgCaffeine = .init(json: value, expected: "a number")
        } else if key == "date" {
            date = .init(json: value)
        } else if key == "type" {
            type = .init(json: value, expected: "a string")
            parsedType = nil
        } else if key == "version" {
            version = .init(json: value, expected: "an integer")
        } else if key == "source" {
            source = .init(json: value, expected: "a string")
        }
    }

    /// A bus drink's UUID, date and type, parsed where they lie; text that
    /// is not a valid UUID, date or type goes the way of any other value,
    /// so that its error quotes it.
    public mutating func take(_ key: JSONKey, text: UnsafeBufferPointer<UInt8>) -> Bool {
        if key == "uuid", let parsed = UUIDText.parse(bytes: text) {
            uuid = .absent
            parsedUUID = parsed
            return true
        }
        if key == "date", let parsed = RFC3339.parse(bytes: text) {
            date = .value(.rfc3339(parsed))
            return true
        }
        if key == "type", let parsed = DrinkType(name: text) {
            type = .absent
            parsedType = parsed
            return true
        }
        return false
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
    /// The `uuid` member, or `delete` when `uuid` is absent and `delete` was given.
    public var uuid: InputField<String> {
        if case .absent = named, let delete { delete } else { named }
    }
    public var version: InputField<Double> = .absent
    /// Which key held the UUID, so errors name the field the sender used.
    public var uuidKey: String {
        if case .absent = named, delete != nil { "delete" } else { "uuid" }
    }
    /// The `uuid` member.
    private var named: InputField<String> = .absent
    /// The `delete` member; nil when the object has none.
    private var delete: InputField<String>?

    public init() {}

    /// A bare UUID string means `{"uuid": "<that UUID>"}` (docs/protocol.md §1).
    public static func fromScalar(_ value: JSONValue) -> DeletionInput? {
        guard case .string = value else { return nil }
        var input = DeletionInput()
        input.named = .init(json: value, expected: "a string")
        return input
    }

    enum Key: String, CodingKey { case uuid, version, delete }

    public init(from decoder: any Decoder) throws {
        if let bare = try? decoder.singleValueContainer().decode(String.self) {
            named = .value(bare)
            return
        }
        let c = try decoder.container(keyedBy: Key.self)
        named = DrinkInput.field(c, .uuid, "a string")
        if c.contains(.delete) { delete = DrinkInput.field(c, .delete, "a string") }
        version = DrinkInput.field(c, .version, "an integer")
    }

    public mutating func take(_ key: JSONKey, _ value: JSONValue) {
        if key == "uuid" {
            named = .init(json: value, expected: "a string")
        } else if key == "delete" {
            delete = .init(json: value, expected: "a string")
        } else if key == "version" {
            version = .init(json: value, expected: "an integer")
        }
    }
}
