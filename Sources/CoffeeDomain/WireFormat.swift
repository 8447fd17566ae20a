import Foundation

/// How domain values look on the wire (PROTOCOL.md §1 and §3).
public enum WireFormat {
    /// A drink: `uuid`, `mgCaffeine`, `date`, `version`, and `type` and
    /// `source` when known.
    public static func json(_ drink: Drink) -> JSONValue {
        var members: [(String, JSONValue)] = [
            ("uuid", .string(UUIDText.string(drink.uuid))),
            ("mgCaffeine", .double(drink.mgCaffeine)),
            ("date", .string(RFC3339.string(drink.date))),
            ("version", .int(drink.version)),
        ]
        if let type = drink.type { members.append(("type", .string(type.rawValue))) }
        if let source = drink.source { members.append(("source", .string(source))) }
        return .object(members)
    }

    public static func json(_ tombstone: Tombstone) -> JSONValue {
        .object([("uuid", .string(UUIDText.string(tombstone.uuid))), ("version", .int(tombstone.version))])
    }

    /// The model's members, ready to be sent alone or inside a reply.
    public static func members(_ model: ModelSnapshot) -> [(String, JSONValue)] {
        [
            ("anchor", .int(model.anchor)),
            ("at", .string(RFC3339.string(model.at))),
            ("mgCaffeine", .double(model.mgCaffeine)),
            ("level", .string(model.level.rawValue)),
            ("cupsToday", .double(model.cupsToday)),
            ("cupsLevel", .string(model.cupsLevel.rawValue)),
            ("drinksToday", .int(Int64(model.drinksToday))),
            ("halfLifeHours", .double(model.halfLifeHours)),
            (
                "timeline",
                .array(
                    model.timeline.map {
                        .object([("date", .string(RFC3339.string($0.date))), ("mgCaffeine", .double($0.mgCaffeine))])
                    })
            ),
        ]
    }
}
