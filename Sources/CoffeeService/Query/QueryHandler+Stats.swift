import CoffeeDomain
import Foundation

extension QueryHandler {
    /// `stats`: the store's figures and the service's counters (docs/protocol.md §4).
    func stats() async -> JSONValue {
        let s = await store.statistics()
        let c = counters
        return .object(
            [
                ("ok", true)
            ] + store.identity.members + [
                ("anchor", .int(s.anchor)),
                ("received", .int(Int64(c.received.value))),
                ("stored", .int(Int64(c.stored.value))),
                ("duplicates", .int(Int64(c.duplicates.value))),
                ("rejected", .int(Int64(c.rejected.value))),
                ("requests", .int(Int64(c.requests.value))),
                ("filesProcessed", .int(Int64(c.filesProcessed.value))),
                ("filesFailed", .int(Int64(c.filesFailed.value))),
                ("subscribers", .int(Int64(c.subscribers.value))),
                ("updatesDropped", .int(Int64(c.updatesDropped.value))),
                ("authDenied", .int(Int64(c.authDenied.value))),
                ("fault", await store.faultDescription.map { .string($0) } ?? .null),
                ("uptimeS", .double((Date().timeIntervalSince(c.started) * 1000).rounded() / 1000)),
                ("storeBytes", .int(s.fileBytes)),
                ("commits", .int(s.commits)),
                ("purgedAnchor", .int(s.purgedAnchor)),
            ] + (following.map { [("followAnchor", .int($0.followAnchor)), ("followLagS", .double($0.lagSeconds()))] } ?? [])
                + (await outbound?.report(store).members ?? []))
    }
}
