import CoffeeDomain
import Foundation
import Synchronization

/// A standby's writing (docs/protocol.md §11): the changes its primary made, each
/// stored under the anchor the primary gave it, through the one commit path,
/// so that a page that ends inside a commit means the same on both.
extension HealthStore {
    /// One commit of a standby.
    public struct ReplicaCommit: Sendable, Hashable {
        /// The primary's changes, each with its anchor (drinks and tombstones
        /// apart, each in anchor order), as a `changes` message or page holds them.
        public var changes: AnchoredChanges
        /// The primary's anchor after them: that of the last change, or
        /// beyond it (the last page of a read ends at the primary's anchor).
        public var through: Int64
        /// The changes are the primary's whole state at `through`: every
        /// record held goes first (a standby that fell behind past the
        /// primary's purge, or whose primary went back). Its anchors then
        /// need not follow the store's.
        public var replacesAll: Bool
        /// The primary's purged anchor, when known: the store's becomes it.
        public var purgedAnchor: Int64?
        /// The primary's identity, taken with its whole state (`replacesAll`),
        /// or with the first page of a copy into an empty store: another
        /// store's (adopted), or a higher epoch of this one's.
        public var identity: StoreIdentity?

        public init(
            changes: AnchoredChanges, through: Int64, replacesAll: Bool = false, purgedAnchor: Int64? = nil,
            identity: StoreIdentity? = nil
        ) {
            precondition(identity == nil || replacesAll, "a new identity comes only with the primary's whole state")
            self.changes = changes
            self.through = through
            self.replacesAll = replacesAll
            self.purgedAnchor = purgedAnchor
            self.identity = identity
        }
    }

    /// Stores `commit` in one durable transaction and announces it to the
    /// observers like any commit (a whole state without its changes: they
    /// page through it, and the model rebuilds). Returns the store's anchor.
    ///
    /// - Throws: `StoreError.outOfOrder` when a change's anchor is not after
    ///   the store's (or the changes are out of order), with nothing stored;
    ///   `StoreError.unavailable` in a storage fault; `StoreError.closed`.
    @discardableResult
    public func replicate(_ commit: ReplicaCommit) throws -> Int64 {
        if let refusal = writer.admitsStream() { throw Self.error(refusal) }
        let ordered = commit.changes.inAnchorOrder
        if !commit.replacesAll {
            var last = currentAnchor
            for (anchor, _) in ordered {
                guard anchor > last else { throw StoreError.outOfOrder(anchor, after: last) }
                last = anchor
            }
            guard commit.through >= last else { throw StoreError.outOfOrder(commit.through, after: last) }
            // The rows beside the drinks may come after a page whose anchors they precede (a
            // standby of a standby): only their bound matters, and the later row wins as stored.
            if let beyond = commit.changes.kept.anchors.max(), beyond > commit.through {
                throw StoreError.outOfOrder(commit.through, after: beyond)
            }
            if ordered.isEmpty, commit.changes.kept.isEmpty, commit.through == currentAnchor,
                commit.purgedAnchor ?? 0 <= purgedAnchor
            {
                return currentAnchor  // nothing new
            }
        }
        let now = Int64((configuration.clock.now().timeIntervalSince1970 * 1000).rounded())
        let identityBefore = identityNow.withLock { $0 }
        let outcome = self.commit(arrived: ContinuousClock.now) { changes in
            changes.anchors = []
            changes.reserve(ordered.count)
            if commit.replacesAll {
                try statements.deleteAllRecords()
                try statements.deleteAllKeptRows()
            }
            try replicate(ordered[...], now: now, into: &changes)
            let kept = commit.changes.kept
            try statements.putKept(kept)
            if commit.replacesAll {
                changes.carryNothing()
                changes.replacesAll = true
            } else {
                changes.kept = kept
            }
            if commit.replacesAll || !kept.settings.isEmpty { changes.settings = try Self.readSettings(statements) }
            // The anchor is kept in `meta` too: the last page may end past its last change.
            changes.anchor = commit.through
            try statements.setMeta("anchor", commit.through)
            if let purged = commit.purgedAnchor, purged > purgedAnchor || commit.identity != nil {
                // Tombstones at or below it are the primary's purged ones (or
                // hidden by it: a read from below is refused): they go here too.
                try statements.purgeTombstones(through: purged)
                try statements.setMeta("purged_anchor", purged)
            }
            if let identity = commit.identity {
                // In this transaction, and seen by the announcement after it.
                try StoreIdentityRecord.write(identity, standby: true, to: db!)  // a standby's store is a file
                identityNow.withLock { $0 = IdentityNow(identity: identity, upgraded: false) }
            }
        }
        switch outcome {
        case .committed:
            if let purged = commit.purgedAnchor {
                purgedAnchor = commit.identity != nil ? purged : max(purgedAnchor, purged)
            }
            return currentAnchor
        case .storageFault(let reason):
            identityNow.withLock { $0 = identityBefore }
            storageFailed([], reason)
            throw StoreError.unavailable(reason)
        case .failed(let error):
            identityNow.withLock { $0 = identityBefore }
            throw error
        }
    }

    /// Writes `ordered` (each change under its primary's anchor): runs of
    /// new drinks in one statement each, as `write` does; the rest, and a
    /// run that finds a record, one by one, replacing whatever is held.
    private func replicate(
        _ ordered: ArraySlice<(anchor: Int64, change: CommittedBatch.Change)>, now: Int64,
        into changes: inout CommitChanges
    ) throws {
        var rest = ordered
        let longest = statements.dialect.longestRun
        while !rest.isEmpty {
            let additions = rest.prefix(longest).prefix { if case .added = $0.change { true } else { false } }
            let size = statements.dialect.runLength(additions.count)
            if size > 1 {
                let run = additions.prefix(size)
                let drinks = run.map { if case .added(let drink) = $0.change { drink } else { preconditionFailure() } }
                if try statements.insertRun(drinks[...], anchors: run.map(\.anchor)[...], now: now) {
                    for item in run { changes.record(item.change, anchor: item.anchor, replacing: false) }
                    rest = rest.dropFirst(size)
                    continue
                }
            }
            for item in rest.prefix(size) {
                try statements.replicate(item.change, anchor: item.anchor, now: now)
                changes.record(item.change, anchor: item.anchor, replacing: true)
            }
            rest = rest.dropFirst(size)
        }
    }

    /// Runs `body` on the store's thread and waits for it, for a thread of
    /// its own that may block (a standby's follower commits this way).
    public nonisolated func blocking<T: Sendable>(_ body: @escaping @Sendable (isolated HealthStore) throws -> T) throws -> T {
        try started(body).wait()
    }

    /// Starts `body` on the store's thread; the caller goes on (a standby
    /// reads its next page meanwhile) and takes the result with `wait()`.
    public nonisolated func started<T: Sendable>(
        _ body: @escaping @Sendable (isolated HealthStore) throws -> T
    ) -> Job<T> {
        let job = Job<T>()
        executor.run { job.finish(Result { try self.assumeIsolated { try body($0) } }) }
        return job
    }

    /// Work started on the store's thread (`started`): its result, once it is done.
    public final class Job<T: Sendable>: Sendable {
        private let done = DispatchSemaphore(value: 0)
        private let result = Mutex<Result<T, any Error>?>(nil)

        fileprivate func finish(_ outcome: Result<T, any Error>) {
            result.withLock { $0 = outcome }
            done.signal()
        }

        /// Whether the work is done (`wait()` would return at once).
        public var isDone: Bool { result.withLock { $0 != nil } }

        /// Waits until the work is done, then returns or throws what it did;
        /// again at once on a later call.
        public func wait() throws -> T {
            done.wait()
            done.signal()  // a later wait returns at once
            return try result.withLock { $0! }.get()
        }
    }
}

extension AnchoredChanges {
    /// Drinks and tombstones, each list in anchor order, merged into one.
    public var inAnchorOrder: [(anchor: Int64, change: CommittedBatch.Change)] {
        var merged: [(anchor: Int64, change: CommittedBatch.Change)] = []
        merged.reserveCapacity(added.count + deleted.count)
        var (a, d) = (0, 0)
        while a < added.count || d < deleted.count {
            if d == deleted.count || (a < added.count && addedAnchors[a] < deletedAnchors[d]) {
                merged.append((addedAnchors[a], .added(added[a])))
                a += 1
            } else {
                merged.append((deletedAnchors[d], .deleted(deleted[d])))
                d += 1
            }
        }
        return merged
    }
}
