import CoffeeDomain
import Foundation
import SQLite

/// Writing: the group commit and its one commit path (`commit`); the store
/// rules are in `HealthStore+Rules.swift`, what producers hand over in
/// `HealthStore+Submissions.swift`.
///
/// `apply` queues its batch and suspends; one commit drains what is queued
/// (as `GroupCommitQueue` decides) into a single transaction, so one fsync
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
            submit(batch, holdOnFault: false) { continuation.resume(with: $0) }
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
    /// publish every commit before the store closes.
    public func commitPending() {
        takeSubmitted()
        while !queue.isEmpty && fault == nil { commitNext() }
    }

    func enqueue(_ waiter: Waiter) {
        guard db != nil else { return waiter.completion(.failure(StoreError.closed)) }
        if let fault {
            // Faulted: a caller who can be told is told now; the bus's batch
            // waits, in order, for the retry that finds the store writable.
            guard waiter.holdOnFault else { return waiter.completion(.failure(StoreError.unavailable(fault))) }
            _ = queue.enqueue(changes: waiter.batch.count, waiter: waiter)
            return
        }
        if queue.enqueue(changes: waiter.batch.count, waiter: waiter) == .scheduleCommit {
            scheduleCommit()
        }
    }

    /// Runs after the jobs already queued on the store's thread, so that
    /// every batch that arrived meanwhile joins the commit. A leader
    /// (`lead`) commits what is queued before it returns: nothing to schedule.
    private func scheduleCommit() {
        if leading { return }
        Task { self.commitNext() }
    }

    /// Commits what `GroupCommitQueue` takes next, in one transaction.
    /// In a storage fault the batches are held or failed (`enterFault`) and
    /// nothing more is scheduled until a retry succeeds.
    func commitNext() {
        let taken = queue.nextCommit()
        if taken.scheduleAnother && fault == nil { scheduleCommit() }
        let work = taken.entries.map(\.waiter)
        guard !work.isEmpty else { return }
        guard db != nil else {
            for item in work { item.completion(.failure(StoreError.closed)) }
            return
        }
        let outcome = commit(arrived: work.map(\.arrived).min()) { changes in
            try work.map { try write($0.batch, into: &changes) }
        } delivered: { results in
            for (item, result) in zip(work, results) { reply(item, result) }
        }
        switch outcome {
        case .committed: break
        case .storageFault(let reason):
            // Held batches go back to the front, in order; the others are told.
            holdOrFail(taken.entries, reason)
        case .failed(let error):
            switch queue.commitFailed(taken.entries) {
            case .fail(let entry):
                logger.error("commit failed", metadata: ["error": "\(error)", "changes": "\(entry.changes)"])
                entry.waiter.completion(.failure(error))
            case .retryEachAlone(let entries):
                for entry in entries { commitAlone(entry) }
            }
        }
    }

    /// One batch of a shared transaction that failed, committed alone.
    private func commitAlone(_ entry: GroupCommitQueue<Waiter>.Entry) {
        let item = entry.waiter
        let outcome = commit(arrived: item.arrived) { changes in
            try write(item.batch, into: &changes)
        } delivered: { result in
            reply(item, result)
        }
        switch outcome {
        case .committed: break
        case .storageFault(let reason):
            holdOrFail([entry], reason)
        case .failed(let error):
            logger.error("commit failed", metadata: ["error": "\(error)", "changes": "\(item.batch.count)"])
            item.completion(.failure(error))
        }
    }

    /// Tells a waiter its batch is durable, with the anchor the commit reached.
    private func reply(_ item: Waiter, _ result: WriteResult) {
        var result = result
        result.anchor = currentAnchor
        item.completion(.success(result))
    }

    /// In a storage fault that a commit of `entries` met: the held ones go
    /// back to the front of the queue, in order; the others are told.
    private func holdOrFail(_ entries: [GroupCommitQueue<Waiter>.Entry], _ reason: String) {
        queue.putBack(entries.filter(\.waiter.holdOnFault))
        for entry in entries where !entry.waiter.holdOnFault {
            entry.waiter.completion(.failure(StoreError.unavailable(reason)))
        }
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
    /// on any failure restores the anchor, and a storage fault puts the
    /// store in its fault state (`enterFault`). A commit that wrote
    /// something while in a fault ends it, after `delivered`, so replies
    /// keep commit order.
    private func commit<Value>(
        arrived: ContinuousClock.Instant?, _ body: (inout CommitChanges) throws -> Value,
        delivered: (Value) -> Void = { _ in }
    ) -> CommitOutcome<Value> {
        guard let db else { return .failed(StoreError.closed) }
        let previous = currentAnchor
        var changes = CommitChanges()
        changes.arrived = arrived
        let started = ContinuousClock.now
        let value: Value
        do {
            value = try db.transaction { try body(&changes) }
        } catch {
            currentAnchor = previous
            if let reason = Self.storageFault(error) {
                enterFault(reason)
                return .storageFault(reason)
            }
            return .failed(error)
        }
        commitDuration.observe(ContinuousClock.now - started)
        finishCommit(from: previous, changes: changes)
        delivered(value)
        // A commit of duplicates alone writes nothing, so it proves nothing
        // about the disk: the probe write decides then.
        if fault != nil, changes.anchor != nil { leaveFault() }
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
        guard db != nil else { throw StoreError.closed }
        if let fault { throw StoreError.unavailable(fault) }
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
        case .storageFault(let reason): throw StoreError.unavailable(reason)
        case .failed(let error): throw error
        }
    }

    private func finishCommit(from previous: Int64, changes: CommitChanges) {
        commits += 1
        guard let anchor = changes.anchor else { return }
        currentAnchor = anchor
        let batch = changes.committed(previousAnchor: previous, anchor: anchor)
        for observer in observers { observer(batch) }
    }
}
