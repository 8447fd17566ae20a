import CoffeeDomain
import Foundation

/// Reading: the anchored query and the model's window.
extension HealthStore {
    /// The store's current anchor: that of its last change.
    public var anchor: Int64 { currentAnchor }

    /// Changes after `since`, in anchor order, at most `limit` of them.
    ///
    /// - Parameters:
    ///   - since: nil for every live drink (no tombstones).
    ///   - through: the last anchor to include (default: the store's anchor);
    ///     with it a reader pages through one commit without running into later ones.
    /// - Throws: `StoreError.anchorExpired` when tombstones after `since`
    ///   were purged, so the caller must resync from nil.
    public func changes(since: Int64?, limit: Int, through: Int64? = nil) throws -> ChangeSet {
        guard isOpen else { throw StoreError.closed }
        if let since, since < purgedAnchor { throw StoreError.anchorExpired(requested: since, purged: purgedAnchor) }
        let limit = max(1, limit)
        let end = min(through ?? currentAnchor, currentAnchor)
        let rows = try reading {
            try statements.changes(after: since ?? 0, through: end, liveOnly: since == nil, limit: limit + 1)
        }
        let hasMore = rows.count > limit
        let page = rows.prefix(limit)
        let changes = AnchoredChanges(page.lazy.map { (anchor: $0.anchor, change: $0.change) })
        let last = page.last?.anchor ?? since ?? 0
        var set = ChangeSet(
            added: changes.added, deleted: changes.deleted, anchor: hasMore ? last : end, hasMore: hasMore,
            addedAnchors: changes.addedAnchors, deletedAnchors: changes.deletedAnchors)
        // The rows beside the drinks in the same anchors: a page is a complete account (§15).
        set.kept = try reading { try statements.keptRows(after: since ?? 0, through: set.anchor) }
        return set
    }

    /// `changes(since:limit:through:)` for a thread of its own that must
    /// not block (the publisher's): the read runs on the store's thread,
    /// queued behind what is there, and `then` gets its result there.
    public nonisolated func readChanges(
        since: Int64?, limit: Int, through: Int64? = nil,
        then: @escaping @Sendable (Result<ChangeSet, any Error>) -> Void
    ) {
        executor.run {
            then(Result { try self.assumeIsolated { try $0.changes(since: since, limit: limit, through: through) } })
        }
    }

    /// Live drinks dated in `range`, oldest first: what a model window needs.
    /// A range of the index of live drinks by date (schema version 4): a
    /// rebuild of the model's window, a model of a past time, a picture
    /// before the model has loaded, history's curve.
    public func drinks(datedIn range: ClosedRange<Date>) throws -> [Drink] {
        guard isOpen else { throw StoreError.closed }
        return try reading {
            try statements.drinks(
                from: Int64((range.lowerBound.timeIntervalSince1970 * 1000).rounded(.down)),
                to: Int64((range.upperBound.timeIntervalSince1970 * 1000).rounded(.up)))
        }
    }

    /// Every live drink, a page at a time, in date order (then UUID's):
    /// at most `limit` after `cursor`'s drink (from the first when nil), and
    /// the cursor of the next page (nil after the last). Each page is a
    /// read of its own, so that a reader as slow as it likes never holds the
    /// store; a drink written meanwhile is in a later page when it sorts after
    /// the cursor. What `GET /api/v1/export.csv` sends.
    public func drinks(after cursor: DrinkCursor?, limit: Int) throws -> (drinks: [Drink], next: DrinkCursor?) {
        guard isOpen else { throw StoreError.closed }
        return try reading { try statements.drinks(after: cursor, limit: max(1, limit)) }
    }

    /// Live drinks dated from `start` on, with the anchor they reflect, read
    /// together: what a model rebuilds from.
    public func window(datedFrom start: Date) throws -> (drinks: [Drink], anchor: Int64) {
        guard isOpen else { throw StoreError.closed }
        let drinks = try reading {
            try statements.drinks(from: Int64((start.timeIntervalSince1970 * 1000).rounded(.down)), to: .max)
        }
        return (drinks, currentAnchor)
    }

    /// A read; one that finds the database unreachable throws
    /// `StoreError.unavailable`, as a write would.
    func reading<T>(_ read: () throws -> T) throws -> T {
        do {
            return try read()
        } catch {
            if let reason = Self.storageFault(error) { throw StoreError.unavailable(reason) }
            throw error
        }
    }

    /// The store's figures as of its last commit, from any thread without
    /// waiting for the store's (which an inbox file holds while it imports).
    public nonisolated func statistics() -> StoreStatistics {
        let path = configuration.path
        func size(_ p: String) -> Int64 {
            ((try? FileManager.default.attributesOfItem(atPath: p)[.size]) as? NSNumber)?.int64Value ?? 0
        }
        return StoreStatistics(
            anchor: figures.anchor.load(ordering: .relaxed),
            purgedAnchor: figures.purgedAnchor.load(ordering: .relaxed),
            commits: figures.commits.load(ordering: .relaxed), fileBytes: size(path) + size(path + "-wal"))
    }
}
