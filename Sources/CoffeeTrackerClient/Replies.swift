import CoffeeDomain
import Foundation

/// A page of `changes` (docs/protocol.md §4).
public struct Changes: Sendable, Equatable {
    public var added: [Drink]
    public var deleted: [Tombstone]
    /// The anchor of each drink's own change, in `added`'s order (v3).
    public var addedAnchors: [Int64]
    /// The anchor of each tombstone's own change, in `deleted`'s order (v3).
    public var deletedAnchors: [Int64]
    /// The anchor of the last change returned, or the store's when nothing is left.
    public var anchor: Int64
    public var hasMore: Bool
    /// A `changes` message's `previousAnchor` (the anchor it follows); nil in a reply.
    public var previousAnchor: Int64?
    /// The store's identity the anchors belong to (docs/protocol.md §13); nil
    /// from a service that does not say (an older build).
    public var identity: StoreIdentity?
    /// The rows beside the drinks in the anchors it covers (docs/protocol.md
    /// §15, "In the feed"); none from an older build.
    public var kept = KeptRows()

    /// A `changes` reply or message.
    public init(_ reply: JSONValue) throws(WireFormat.DecodingError) {
        (added, addedAnchors, deleted, deletedAnchors) = ([], [], [], [])
        for item in try reply.member("added").items() {
            added.append(try WireFormat.drink(item))
            addedAnchors.append(try item.member("anchor").integer())
        }
        for item in try reply.member("deleted").items() {
            deleted.append(try WireFormat.tombstone(item))
            deletedAnchors.append(try item.member("anchor").integer())
        }
        anchor = try reply.member("anchor").integer()
        hasMore = try reply.optionalMember("hasMore")?.bool() ?? false
        previousAnchor = try reply.optionalMember("previousAnchor")?.integer()
        identity = StoreIdentity.read(reply)
        kept = try KeptRows(reading: reply)
    }
}

/// `ping`'s reply: the store's anchor and its identity (docs/protocol.md §13).
public struct Ping: Sendable, Equatable {
    public var anchor: Int64
    /// Nil from a service that does not say (an older build).
    public var identity: StoreIdentity?

    public init(_ reply: JSONValue) throws(WireFormat.DecodingError) {
        anchor = try reply.member("anchor").integer()
        identity = StoreIdentity.read(reply)
    }
}

/// `add`'s reply: the anchor of the durable commit, and what it took.
public struct AddResult: Sendable, Equatable {
    public var anchor: Int64
    public var added: Int
    public var duplicates: Int

    public init(_ reply: JSONValue) throws(WireFormat.DecodingError) {
        anchor = try reply.member("anchor").integer()
        added = Int(try reply.member("added").integer())
        duplicates = Int(try reply.member("duplicates").integer())
    }
}

/// `delete`'s reply: live drinks that became tombstones, and UUIDs with none.
public struct DeleteResult: Sendable, Equatable {
    public var anchor: Int64
    public var deleted: Int
    public var unknown: Int

    public init(_ reply: JSONValue) throws(WireFormat.DecodingError) {
        anchor = try reply.member("anchor").integer()
        deleted = Int(try reply.member("deleted").integer())
        unknown = Int(try reply.member("unknown").integer())
    }
}

/// `stats`' counters, by name (`received`, `stored`, `commits`…); `fault` apart.
public struct Stats: Sendable, Equatable {
    public var counters: [String: Double]
    /// Why the store cannot write, while it cannot.
    public var fault: String?

    public init(_ reply: JSONValue) throws(WireFormat.DecodingError) {
        guard case .object(let members) = reply else { throw WireFormat.DecodingError("expected an object") }
        counters = [:]
        for (name, value) in members {
            if let number = try? value.number() { counters[name] = number }
        }
        fault = try reply.optionalMember("fault")?.text()
    }

    public subscript(_ name: String) -> Double? { counters[name] }
    public var anchor: Int64 { Int64(counters["anchor"] ?? 0) }
}
