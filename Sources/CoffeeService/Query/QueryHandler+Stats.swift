import CoffeeDomain
import Foundation

extension QueryHandler {
    /// `stats`: the store's figures and the service's counters (docs/protocol.md §4).
    ///
    /// While an inbox file imports (one transaction, holding the store for
    /// the file), the answer does not wait for the store: its figures as of
    /// the last commit and its fault now (both kept for any thread), the
    /// alerts' pending counts as last read, `importing` how far the file is.
    func stats() async -> JSONValue {
        let c = counters
        let importing = c.importing.withLock { $0 }
        let s = store.statistics()
        let fault: JSONValue = store.faultDescription.map { .string($0) } ?? .null
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
                ("fault", fault),
                ("uptimeS", .double((Date().timeIntervalSince(c.started) * 1000).rounded() / 1000)),
                ("storeBytes", .int(s.fileBytes)),
                ("commits", .int(s.commits)),
                ("purgedAnchor", .int(s.purgedAnchor)),
                ("importing", importing.map(Self.json) ?? .null),
            ]
                + (following.map {
                    [
                        ("followAnchor", .int($0.followAnchor)), ("followLagS", .double($0.lagSeconds())),
                        ("followPushKey", .string($0.pushKeyComparison.rawValue)),
                    ]
                } ?? [])
                + (await outbound?.report(store, readingStore: importing == nil).members ?? []))
    }

    /// `stats.importing`: `{"file", "bytes", "read", "changesRead"}`.
    static func json(_ progress: InboxProgress) -> JSONValue {
        .object([
            ("file", .string(progress.file)), ("bytes", .int(progress.bytes)), ("read", .int(progress.read)),
            ("changesRead", .int(Int64(progress.changesRead))),
        ])
    }
}
