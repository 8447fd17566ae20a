import CoffeeDomain
import Foundation
import HealthStore

extension QueryHandler {
    /// `changes` (docs/protocol.md §4): a page after `anchor` (null: every
    /// live drink), with the store's identity it belongs to (§13).
    func changes(_ request: QueryRequest) async throws -> JSONValue {
        var anchor: Int64?
        switch request.anchor {
        case .absent: anchor = nil
        case .wrongType: throw QueryError(.badRequest, "anchor must be an integer >= 0 or null", field: "anchor")
        case .value(let v):
            guard v == v.rounded(), v >= 0, v < 9e18 else {
                throw QueryError(.badRequest, "anchor must be an integer >= 0 or null", field: "anchor")
            }
            anchor = Int64(v)
        }
        let limit = try Self.limit(request.limit) ?? Self.defaultLimit
        let (page, identity) = try await identified { try await store.changes(since: anchor, limit: limit) }
        return .object(
            [("ok", true)] + identity.members + [
                ("anchor", .int(page.anchor)),
                ("hasMore", .bool(page.hasMore)),
                ("added", WireFormat.drinksArray(page.added, anchors: page.addedAnchors)),
                ("deleted", WireFormat.tombstonesArray(page.deleted, anchors: page.deletedAnchors)),
            ] + page.kept.members)
    }

    /// A page's `limit` (`changes`, `drinks`): nil when absent.
    static func limit(_ input: InputField<Double>) throws(QueryError) -> Int? {
        switch input {
        case .absent: return nil
        case .wrongType: throw QueryError(.badRequest, "limit must be an integer", field: "limit")
        case .value(let v):
            guard v == v.rounded(), v >= 1, v <= Double(Self.maxLimit) else {
                throw QueryError(.badRequest, "limit must be an integer from 1 to \(Self.maxLimit)", field: "limit")
            }
            return Int(v)
        }
    }

    /// `read`'s value with the store's identity it belongs to: read again
    /// when the identity changed meanwhile (a standby taking its primary's).
    func identified<T>(_ read: () async throws -> T) async throws -> (T, StoreIdentity) {
        while true {
            let before = store.identity
            let value = try await read()
            if store.identity == before { return (value, before) }
        }
    }
}
