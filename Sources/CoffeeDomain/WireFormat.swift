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
        // The pieces between the dose and the quoted strings are put
        // together on the stack and appended at once (`ByteSegment`).
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 128) { memory in
            var piece = ByteSegment(memory)
            piece.put(#"{"uuid":""#)
            piece.put(uuid: drink.uuid)
            piece.put(#"","mgCaffeine":"#)
            piece.flush(into: &out)
            JSONBytes.append(drink.mgCaffeine, to: &out)
            piece.put(#","date":""#)
            piece.put(date: drink.date, offset: nil, alwaysMilliseconds: true)
            piece.put(#"","version":"#)
            piece.put(drink.version)
            if let type = drink.type {
                piece.put(#","type":"#)
                piece.flush(into: &out)
                JSONValue.quote(type.rawValue, into: &out)
            }
            if let source = drink.source {
                piece.put(#","source":"#)
                piece.flush(into: &out)
                JSONValue.quote(source, into: &out)
            }
            if let anchor {
                piece.put(#","anchor":"#)
                piece.put(anchor)
            }
            piece.put(byte: UInt8(ascii: "}"))
            piece.flush(into: &out)
        }
    }

    /// A `changes` message (docs/protocol.md §3), as bytes: the store's
    /// identity (§13), then each drink and tombstone with the anchor of its
    /// own change (`addedAnchors[i]` is `added[i]`'s).
    public static func changesMessage(
        identity: StoreIdentity?, anchor: Int64, previousAnchor: Int64, added: [Drink], addedAnchors: [Int64],
        deleted: [Tombstone], deletedAnchors: [Int64], kept: KeptRows = KeptRows()
    ) -> [UInt8] {
        precondition(added.count == addedAnchors.count && deleted.count == deletedAnchors.count)
        var out: [UInt8] = []
        out.reserveCapacity(128 + added.count * 224 + deleted.count * 80)
        writeChangesMessage(identity: identity, anchor: anchor, previousAnchor: previousAnchor, into: &out) { out in
            JSONBytes.append(#""added":"#, to: &out)
            appendArray(added, anchors: addedAnchors, into: &out) { write($0, anchor: $1, into: &$2) }
            JSONBytes.append(#","deleted":"#, to: &out)
            appendArray(deleted, anchors: deletedAnchors, into: &out) { write($0, anchor: $1, into: &$2) }
        }
        writeChangesEnd(kept: kept, into: &out)
        return out
    }

    /// A `changes` message's head appended to `out` (`{`, the identity,
    /// `anchor` and `previousAnchor`), then its `added` and `deleted`
    /// members by `members`; `writeChangesEnd` closes it. For a writer that
    /// has its changes in another shape (a commit's log, `CommittedBatch`).
    public static func writeChangesMessage(
        identity: StoreIdentity?, anchor: Int64, previousAnchor: Int64, into out: inout [UInt8],
        members: (inout [UInt8]) -> Void
    ) {
        out.append(UInt8(ascii: "{"))
        identity?.write(into: &out)
        JSONBytes.append(#""anchor":"#, to: &out)
        JSONBytes.append(anchor, to: &out)
        JSONBytes.append(#","previousAnchor":"#, to: &out)
        JSONBytes.append(previousAnchor, to: &out)
        out.append(UInt8(ascii: ","))
        members(&out)
    }

    /// A `changes` message's end: the kept rows' members, then `}`.
    public static func writeChangesEnd(kept: KeptRows, into out: inout [UInt8]) {
        for (name, value) in kept.members {  // rare: a settings change, an alert, a delivery (§15)
            out.append(UInt8(ascii: ","))
            JSONValue.quote(name, into: &out)
            out.append(UInt8(ascii: ":"))
            value.write(to: &out)
        }
        out.append(UInt8(ascii: "}"))
    }

    /// `.array(zip(drinks, anchors).map { json($0, anchor: $1) })`, written
    /// straight to bytes: a `changes` reply's page of thousands of drinks
    /// (what a standby catching up reads) was most of the primary's time
    /// as a tree. A test holds the two to the same bytes over random pages.
    public static func drinksArray(_ drinks: [Drink], anchors: [Int64]) -> JSONValue {
        var out: [UInt8] = []
        out.reserveCapacity(2 + drinks.count * 224)  // a drink with a source of 30 bytes takes about 200
        appendArray(drinks, anchors: anchors, into: &out) { write($0, anchor: $1, into: &$2) }
        return .encoded(out)
    }

    /// `.array(zip(tombstones, anchors).map { json($0, anchor: $1) })`, written straight to bytes.
    public static func tombstonesArray(_ tombstones: [Tombstone], anchors: [Int64]) -> JSONValue {
        var out: [UInt8] = []
        out.reserveCapacity(2 + tombstones.count * 80)
        appendArray(tombstones, anchors: anchors, into: &out) { write($0, anchor: $1, into: &$2) }
        return .encoded(out)
    }

    /// `[` then each item with its anchor, written by `write`, then `]`.
    private static func appendArray<Item>(
        _ items: [Item], anchors: [Int64], into out: inout [UInt8], _ write: (Item, Int64, inout [UInt8]) -> Void
    ) {
        precondition(items.count == anchors.count)
        appendArray(zip(items, anchors), into: &out, write)
    }

    /// `[` then each item of `pairs` with its anchor, written by `write`,
    /// separated by commas, then `]`: for arrays, and for a commit's log
    /// read in place (`CommittedBatch.writeChangesMessage`).
    @inlinable
    public static func appendArray<Pairs: Sequence, Item>(
        _ pairs: Pairs, into out: inout [UInt8], _ write: (Item, Int64, inout [UInt8]) -> Void
    ) where Pairs.Element == (Item, Int64) {
        out.append(UInt8(ascii: "["))
        var first = true
        for (item, anchor) in pairs {
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            write(item, anchor, &out)
        }
        out.append(UInt8(ascii: "]"))
    }

    /// `json(tombstone, anchor:)` written straight to bytes.
    public static func write(_ tombstone: Tombstone, anchor: Int64? = nil, into out: inout [UInt8]) {
        JSONBytes.append(#"{"uuid":""#, to: &out)
        UUIDText.write(tombstone.uuid, into: &out)
        JSONBytes.append(#"","version":"#, to: &out)
        JSONBytes.append(tombstone.version, to: &out)
        if let anchor {
            JSONBytes.append(#","anchor":"#, to: &out)
            JSONBytes.append(anchor, to: &out)
        }
        out.append(UInt8(ascii: "}"))
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
        JSONBytes.append(#""anchor":"#, to: &out)
        JSONBytes.append(model.anchor, to: &out)
        JSONBytes.append(#","at":""#, to: &out)
        RFC3339.write(model.at, into: &out)
        JSONBytes.append(#"","mgCaffeine":"#, to: &out)
        JSONBytes.append(model.mgCaffeine, to: &out)
        JSONBytes.append(#","level":"#, to: &out)
        JSONValue.quote(model.level.rawValue, into: &out)
        JSONBytes.append(#","cupsToday":"#, to: &out)
        JSONBytes.append(model.cupsToday, to: &out)
        JSONBytes.append(#","cupsLevel":"#, to: &out)
        JSONValue.quote(model.cupsLevel.rawValue, into: &out)
        JSONBytes.append(#","drinksToday":"#, to: &out)
        JSONBytes.append(Int64(model.drinksToday), to: &out)
        JSONBytes.append(#","halfLifeHours":"#, to: &out)
        JSONBytes.append(model.halfLifeHours, to: &out)
        JSONBytes.append(#","timeline":["#, to: &out)
        for (i, point) in model.timeline.enumerated() {
            JSONBytes.append(i == 0 ? #"{"date":""# : #",{"date":""#, to: &out)
            RFC3339.write(point.date, into: &out)
            JSONBytes.append(#"","mgCaffeine":"#, to: &out)
            JSONBytes.append(millionths: point.mgCaffeine, to: &out)
            out.append(UInt8(ascii: "}"))
        }
        JSONBytes.append("]}", to: &out)
        return out
    }

    /// A timeline point's caffeine, rounded to 6 decimals (a nanogram): 287
    /// points of 17-digit noise helped no one. `mgCaffeine` keeps full
    /// precision. (`modelMessage` writes it with `JSONBytes.append(millionths:)`.)
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
