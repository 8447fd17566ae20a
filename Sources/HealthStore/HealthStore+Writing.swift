import CoffeeDomain
import Foundation

/// Writing: the group commit and its one commit path (`commit`); the store
/// rules are in `HealthStore+Rules.swift`, what producers hand over in
/// `HealthStore+Submissions.swift`.
///
/// `apply` queues its batch and suspends; one commit drains what is queued
/// (as `WriterStateMachine` decides) into a single transaction, so one fsync
/// covers many callers. Each caller resumes only after that commit is durable.
extension HealthStore {
    /// Saves drinks and applies deletions in one commit; returns once it is durable.
    ///
    /// - Throws: `StoreError.closed` after `close()`; a SQLite error if the
    ///   commit failed (nothing of the batch was stored).
    ///
    /// Nonisolated, through `submit`: the caller resumes from the commit's
    /// completion, not by hopping back onto the store's thread, so that
    /// nothing but the commit's own order keeps a reply behind it (and a
    /// test that holds a COMMIT sees a reply made too early).
    ///
    /// - Throws: `StoreError.unavailable` in a storage fault (disk full,
    ///   I/O error, read-only file system): nothing of the batch was stored.
    public nonisolated func apply(_ batch: WriteBatch) async throws -> WriteResult {
        try await withCheckedThrowingContinuation { continuation in
            submissions.submit(batch, holdOnFault: false) { continuation.resume(with: $0) }
        }
    }

    public nonisolated func save(_ drinks: [Drink]) async throws -> WriteResult {
        try await apply(WriteBatch(drinks: drinks))
    }

    public nonisolated func delete(_ deletions: [Deletion]) async throws -> WriteResult {
        try await apply(WriteBatch(deletions: deletions))
    }

    /// Commits everything submitted or queued so far; returns once it is
    /// durable (and observed). For a producer's drain, and a drain that must
    /// publish every commit before the store closes. In a storage fault it
    /// commits nothing: the held batches wait for the retry.
    public func commitPending() {
        takeSubmitted()
        while let entries = writer.flush() { commitEntries(entries) }
    }

    typealias Writer = WriterStateMachine<Waiter, CheckedContinuation<Void, Never>>
    typealias Entry = Writer.Entry

    func enqueue(_ waiter: Waiter) {
        let entry = Entry(changes: waiter.batch.count, holdOnFault: waiter.holdOnFault, waiter: waiter)
        switch writer.submit(entry) {
        case .scheduleCommit: scheduleCommit()
        case .none: break
        case .refuse(let refusal): finish(waiter, .failure(Self.error(refusal)))
        }
    }

    static func error(_ refusal: Writer.Refusal) -> StoreError {
        switch refusal {
        case .closed: .closed
        case .unavailable(let reason): .unavailable(reason)
        }
    }

    /// Straight onto the store's thread, after the jobs already queued
    /// there, so that every batch that arrived meanwhile joins the commit.
    func scheduleCommit() {
        executor.run { self.assumeIsolated { $0.commitNext() } }
    }

    /// Commits what the writer takes next, in one transaction.
    func commitNext() {
        guard case .commit(let entries, let another) = writer.scheduledCommitRuns() else { return }
        if another { scheduleCommit() }
        commitEntries(entries)
    }

    /// The leader's turn (`commitStaged(here:)`), on a producer's thread:
    /// one commit of what is queued, then what is left goes to the store's thread.
    func lead() {
        let action = writer.beginLeading()
        takeSubmitted()  // queued, held, or refused by a store that is closing, as the writer decides
        guard action == .lead else { return }
        if let entries = writer.flush() { commitEntries(entries) }
        if writer.endLeading() == .scheduleCommit { scheduleCommit() }
    }

    /// Commits `entries` in one transaction and settles their waiters: told
    /// once it is durable; in a storage fault held or refused, as the writer
    /// decides; after any other failure each batch retried alone, so that
    /// one bad batch cannot fail the others.
    func commitEntries(_ entries: [Entry]) {
        let outcome = commit(arrived: entries.lazy.map(\.waiter.arrived).min()) { changes in
            let count = entries.reduce(0) { $0 + $1.changes }
            changes.reserve(count)
            statements.deferringDateIndex = count <= DateIndexDeferral.largestDeferred
            return try entries.map { try write($0.waiter.batch, into: &changes) }
        } delivered: { results in
            for (entry, result) in zip(entries, results) { reply(entry.waiter, result) }
        }
        switch outcome {
        case .committed: break
        case .storageFault(let reason):
            storageFailed(entries, reason)
        case .failed(let error):
            switch writer.failed(entries) {
            case .fail(let entry):
                logger.error("commit failed", metadata: ["error": "\(error)", "changes": "\(entry.changes)"])
                finish(entry.waiter, .failure(error))
            case .retryEachAlone(let entries):
                for i in entries.indices {
                    switch writer.commitAlone(entries[i...]) {
                    case .commit(let entry): commitEntries([entry])
                    case .settled(let action, let reason):  // the storage failed meanwhile
                        settle(action, reason)
                        return
                    }
                }
            }
        }
    }

    /// Tells a waiter its batch is durable, with the anchor the commit reached.
    private func reply(_ item: Waiter, _ result: WriteResult) {
        var result = result
        result.anchor = currentAnchor
        finish(item, .success(result))
    }

    /// How a commit ended.
    enum CommitOutcome<Value> {
        /// Durable, and announced to the observers.
        case committed(Value)
        /// The disk is full, or cannot be written: the store is now in a storage fault.
        case storageFault(String)
        /// Anything else (a constraint, a closed store): nothing was stored.
        case failed(any Error)
    }

    /// The one commit path: runs `body` in one transaction, then, once it
    /// is durable, records the new anchor, announces the commit to the
    /// observers and hands its value to `delivered` (the waiters' replies);
    /// on any failure restores the anchor; the caller settles a failure
    /// (`storageFailed` for a storage fault). A commit that wrote something
    /// while in a fault ends it, after `delivered`, so replies keep commit order.
    func commit<Value>(
        arrived: ContinuousClock.Instant?, _ body: (inout CommitChanges) throws -> Value,
        delivered: (Value) -> Void = { _ in }
    ) -> CommitOutcome<Value> {
        guard isOpen else { return .failed(StoreError.closed) }
        var previous = currentAnchor
        var changes = CommitChanges()
        changes.arrived = arrived
        let started = ContinuousClock.now
        let value: Value
        do {
            value = try statements.transaction {
                // A shared store's anchor is the counter row's, locked until COMMIT.
                if let locked = statements.lockAnchor() { (previous, currentAnchor) = (locked, locked) }
                let value = try body(&changes)
                if let anchor = changes.anchor { statements.advanceAnchor(to: anchor) }
                return value
            }
        } catch {
            currentAnchor = previous
            if let reason = Self.storageFault(error) { return .storageFault(reason) }
            return .failed(error)
        }
        commitDuration.observe(ContinuousClock.now - started)
        // The settings' one owner takes them before anyone is told of the commit
        // (a standby that took a whole state may go back to older ones).
        if let settings = changes.settings {
            if changes.replacesAll {
                liveSettings.replace(stored: settings.values, anchor: settings.anchor)
            } else {
                liveSettings.update(stored: settings.values, anchor: settings.anchor)
            }
        }
        finishCommit(from: previous, changes: changes)
        delivered(value)
        // A commit of duplicates alone writes nothing, so it proves nothing
        // about the disk: the probe write decides then.
        if case .leftFault(let reason, let held, let waiters) = writer.committed(wroteSomething: changes.anchor != nil) {
            leftFault(reason, held: held, waiters: waiters)
        }
        return .committed(value)
    }

    /// Applies every batch `next` yields, in one transaction: all of them or,
    /// if `next` or a write throws, none. For imports of any size: memory is
    /// one batch, not the whole input. Returns once the commit is durable.
    ///
    /// - Parameter next: called on the store's thread until it returns nil;
    ///   what it throws (a validation error, say) rolls everything back and
    ///   is rethrown.
    ///
    /// - Throws: `StoreError.unavailable` in a storage fault (nothing stored).
    public func applyStream(_ next: @Sendable () throws -> WriteBatch?) throws -> WriteResult {
        if let refusal = writer.admitsStream() { throw Self.error(refusal) }
        commitPending()  // whatever was queued before commits first, in order
        let outcome = commit(arrived: ContinuousClock.now) { changes in
            var total = WriteResult()
            while let batch = try next() {
                let r = try write(batch, into: &changes)
                total.added += r.added
                total.duplicates += r.duplicates
                total.deleted += r.deleted
                total.unknown += r.unknown
            }
            return total
        }
        switch outcome {
        case .committed(var total):
            total.anchor = currentAnchor
            return total
        case .storageFault(let reason):
            storageFailed([], reason)
            throw StoreError.unavailable(reason)
        case .failed(let error): throw error
        }
    }

    private func finishCommit(from previous: Int64, changes: CommitChanges) {
        commits += 1
        guard let anchor = changes.anchor else { return }
        currentAnchor = anchor
        // Another service's commits before this one are announced first; if
        // they cannot be read now, this one waits with them for the catch-up.
        if statements.dialect.isShared, announceStored(through: previous) < previous { return }
        var batch = changes.committed(previousAnchor: previous, anchor: anchor)
        batch.identity = identity
        for observer in observers { observer(batch) }
        announcedAnchor = anchor
    }
}
