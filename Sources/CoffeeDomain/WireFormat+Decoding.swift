import Foundation

/// Reading back what the service writes (docs/protocol.md §1, §3, §4): the
/// inverse of `WireFormat`'s encoding, for clients (`CoffeeTrackerClient`).
/// It reads the service's output, so it checks shapes, not the drink rules
/// (the service applied those on the way in).
extension WireFormat {
    /// What a client could not read in a reply or a message.
    public struct DecodingError: Error, CustomStringConvertible, Equatable {
        public let description: String
        public init(_ description: String) { self.description = description }
    }

    public static func drink(_ value: JSONValue) throws(DecodingError) -> Drink {
        let uuid = try value.member("uuid").uuid()
        var drink = Drink(
            uuid: uuid, mgCaffeine: try value.member("mgCaffeine").number(), date: try value.member("date").date(),
            version: try value.optionalMember("version")?.integer() ?? 1)
        if let type = try value.optionalMember("type")?.text() {
            guard let known = DrinkType(rawValue: type) else { throw DecodingError("not a drink type's name: \"\(type)\"") }
            drink.type = known
        }
        drink.source = try value.optionalMember("source")?.text()
        return drink
    }

    public static func tombstone(_ value: JSONValue) throws(DecodingError) -> Tombstone {
        Tombstone(uuid: try value.member("uuid").uuid(), version: try value.optionalMember("version")?.integer() ?? 1)
    }

    /// The model, as a `model` message or the `model` op's reply carries it.
    public static func snapshot(_ value: JSONValue) throws(DecodingError) -> ModelSnapshot {
        func level(_ name: String) throws(DecodingError) -> Level {
            let text = try value.member(name).text()
            guard let level = Level(rawValue: text) else { throw DecodingError("\(name): unknown level \"\(text)\"") }
            return level
        }
        var timeline: [ModelSnapshot.Point] = []
        for point in try value.member("timeline").items() {
            timeline.append(.init(date: try point.member("date").date(), mgCaffeine: try point.member("mgCaffeine").number()))
        }
        return ModelSnapshot(
            anchor: try value.member("anchor").integer(), at: try value.member("at").date(),
            mgCaffeine: try value.member("mgCaffeine").number(), level: try level("level"),
            cupsToday: try value.member("cupsToday").number(), cupsLevel: try level("cupsLevel"),
            drinksToday: Int(try value.member("drinksToday").integer()),
            halfLifeHours: try value.member("halfLifeHours").number(), timeline: timeline,
            identity: StoreIdentity.read(value))
    }
}

extension JSONValue {
    /// The value of `key` in an object.
    public func member(_ key: String) throws(WireFormat.DecodingError) -> JSONValue {
        guard let value = try optionalMember(key) else { throw WireFormat.DecodingError("missing \"\(key)\"") }
        return value
    }

    /// JSON's `null`: a test of the case, where `==` would write both sides out.
    public var isNull: Bool { if case .null = self { true } else { false } }

    /// The value of `key` in an object; nil when absent or null.
    public func optionalMember(_ key: String) throws(WireFormat.DecodingError) -> JSONValue? {
        guard case .object(let members) = self else { throw WireFormat.DecodingError("expected an object for \"\(key)\"") }
        guard let value = members.last(where: { $0.0 == key })?.1, !value.isNull else { return nil }
        return value
    }

    public func items() throws(WireFormat.DecodingError) -> [JSONValue] {
        guard case .array(let items) = self else { throw WireFormat.DecodingError("expected an array") }
        return items
    }

    public func text() throws(WireFormat.DecodingError) -> String {
        guard case .string(let s) = self else { throw WireFormat.DecodingError("expected a string") }
        return s
    }

    public func number() throws(WireFormat.DecodingError) -> Double {
        switch self {
        case .int(let i): return Double(i)
        case .double(let d): return d
        default: throw WireFormat.DecodingError("expected a number")
        }
    }

    public func integer() throws(WireFormat.DecodingError) -> Int64 {
        switch self {
        case .int(let i): return i
        case .double(let d) where d == d.rounded() && abs(d) < 9.2e18: return Int64(d)
        default: throw WireFormat.DecodingError("expected an integer")
        }
    }

    public func bool() throws(WireFormat.DecodingError) -> Bool {
        guard case .bool(let b) = self else { throw WireFormat.DecodingError("expected true or false") }
        return b
    }

    func uuid() throws(WireFormat.DecodingError) -> UUID {
        let s = try text()
        guard let uuid = UUIDText.parse(s) else { throw WireFormat.DecodingError("not a UUID: \"\(s)\"") }
        return uuid
    }

    func date() throws(WireFormat.DecodingError) -> Date {
        let s = try text()
        guard let date = RFC3339.parse(s) else { throw WireFormat.DecodingError("not an RFC 3339 date: \"\(s)\"") }
        return date
    }
}
