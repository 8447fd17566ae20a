import Foundation

/// How domain values look on the wire (docs/protocol.md §1 and §3).
public enum WireFormat {
    /// A drink: `uuid`, `mgCaffeine`, `date`, `version`, and `type` and
    /// `source` when known; in `changes`, the `anchor` of its own change.
    public static func json(_ drink: Drink, anchor: Int64? = nil) -> JSONValue {
        var members: [(String, JSONValue)] = [
            ("uuid", .string(UUIDText.string(drink.uuid))),
            ("mgCaffeine", .double(drink.mgCaffeine)),
            ("date", .string(RFC3339.string(drink.date))),
            ("version", .int(drink.version)),
        ]
        if let type = drink.type { members.append(("type", .string(type.rawValue))) }
        if let source = drink.source { members.append(("source", .string(source))) }
        if let anchor { members.append(("anchor", .int(anchor))) }
        return .object(members)
    }

    /// `json(drink)`, written straight to bytes: the broadcaster encodes
    /// every stored drink, and building the tree and its strings first was
    /// most of its time. A test holds the two to the same bytes.
    public static func write(_ drink: Drink, anchor: Int64? = nil, into out: inout [UInt8]) {
        out += #"{"uuid":""#.utf8
        UUIDText.write(drink.uuid, into: &out)
        out += #"","mgCaffeine":"#.utf8
        out += JSONValue.number(drink.mgCaffeine).utf8
        out += #","date":""#.utf8
        RFC3339.write(drink.date, into: &out)
        out += #"","version":"#.utf8
        out += String(drink.version).utf8
        if let type = drink.type {
            out += #","type":"#.utf8
            JSONValue.quote(type.rawValue, into: &out)
        }
        if let source = drink.source {
            out += #","source":"#.utf8
            JSONValue.quote(source, into: &out)
        }
        if let anchor {
            out += #","anchor":"#.utf8
            out += String(anchor).utf8
        }
        out.append(UInt8(ascii: "}"))
    }

    /// A `changes` message (docs/protocol.md §3), as bytes: the store's
    /// identity (§13), then each drink and tombstone with the anchor of its
    /// own change (`addedAnchors[i]` is `added[i]`'s).
    public static func changesMessage(
        identity: StoreIdentity?, anchor: Int64, previousAnchor: Int64, added: [Drink], addedAnchors: [Int64],
        deleted: [Tombstone], deletedAnchors: [Int64]
    ) -> [UInt8] {
        precondition(added.count == addedAnchors.count && deleted.count == deletedAnchors.count)
        var out: [UInt8] = []
        out.reserveCapacity(128 + added.count * 160 + deleted.count * 80)
        out.append(UInt8(ascii: "{"))
        identity?.write(into: &out)
        out += #""anchor":\#(anchor),"previousAnchor":\#(previousAnchor),"added":["#.utf8
        for (i, drink) in added.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            write(drink, anchor: addedAnchors[i], into: &out)
        }
        out += #"],"deleted":["#.utf8
        for (i, tombstone) in deleted.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            json(tombstone, anchor: deletedAnchors[i]).write(to: &out)
        }
        out += "]}".utf8
        return out
    }

    /// `.array(zip(drinks, anchors).map { json($0, anchor: $1) })`, written
    /// straight to bytes: a `changes` reply's page of thousands of drinks
    /// (what a standby catching up reads) was most of the primary's time
    /// as a tree. A test holds the two to the same bytes over random pages.
    public static func drinksArray(_ drinks: [Drink], anchors: [Int64]) -> JSONValue {
        precondition(drinks.count == anchors.count)
        var out: [UInt8] = [UInt8(ascii: "[")]
        out.reserveCapacity(2 + drinks.count * 160)
        for (i, drink) in drinks.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            write(drink, anchor: anchors[i], into: &out)
        }
        out.append(UInt8(ascii: "]"))
        return .encoded(out)
    }

    /// A tombstone: `uuid` and `version`; in `changes`, the `anchor` of its own change.
    public static func json(_ tombstone: Tombstone, anchor: Int64? = nil) -> JSONValue {
        var members: [(String, JSONValue)] = [
            ("uuid", .string(UUIDText.string(tombstone.uuid))), ("version", .int(tombstone.version)),
        ]
        if let anchor { members.append(("anchor", .int(anchor))) }
        return .object(members)
    }

    /// A `model` message (docs/protocol.md §3), `members(model)` as one object
    /// written straight to bytes: a round with drinks dated now made 300
    /// JSON values of the timeline and their strings ten times a second,
    /// most of the model's own time. A test holds the two to the same bytes.
    public static func modelMessage(_ model: ModelSnapshot) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(384 + model.timeline.count * 64)
        out.append(UInt8(ascii: "{"))
        model.identity?.write(into: &out)
        out += #""anchor":"#.utf8
        out += String(model.anchor).utf8
        out += #","at":""#.utf8
        RFC3339.write(model.at, into: &out)
        out += #"","mgCaffeine":"#.utf8
        out += JSONValue.number(model.mgCaffeine).utf8
        out += #","level":"#.utf8
        JSONValue.quote(model.level.rawValue, into: &out)
        out += #","cupsToday":"#.utf8
        out += JSONValue.number(model.cupsToday).utf8
        out += #","cupsLevel":"#.utf8
        JSONValue.quote(model.cupsLevel.rawValue, into: &out)
        out += #","drinksToday":"#.utf8
        out += String(model.drinksToday).utf8
        out += #","halfLifeHours":"#.utf8
        out += JSONValue.number(model.halfLifeHours).utf8
        out += #","timeline":["#.utf8
        for (i, point) in model.timeline.enumerated() {
            out += (i == 0 ? #"{"date":""# : #",{"date":""#).utf8
            RFC3339.write(point.date, into: &out)
            out += #"","mgCaffeine":"#.utf8
            out += JSONValue.number(timelineMg(point.mgCaffeine)).utf8
            out.append(UInt8(ascii: "}"))
        }
        out += "]}".utf8
        return out
    }

    /// A timeline point's caffeine, rounded to 6 decimals (a nanogram): 287
    /// points of 17-digit noise helped no one. `mgCaffeine` keeps full precision.
    static func timelineMg(_ mg: Double) -> Double { (mg * 1e6).rounded() / 1e6 }

    /// The model's members, ready to be sent alone or inside a reply.
    public static func members(_ model: ModelSnapshot) -> [(String, JSONValue)] {
        (model.identity?.members ?? []) + [
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
                        .object([
                            ("date", .string(RFC3339.string($0.date))),
                            ("mgCaffeine", .double(timelineMg($0.mgCaffeine))),
                        ])
                    })
            ),
        ]
    }
}
