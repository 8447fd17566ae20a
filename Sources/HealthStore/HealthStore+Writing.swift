import CoffeeDomain
import Foundation
import SQLite

/// Writing: the group commit and the store rules of PROTOCOL.md §1.
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

    /// Queues `batch` without waiting; `completion` runs on the store's
    /// thread once the commit is durable (or failed). For producers such as
    /// the bus, which must not wait one commit per message.
    ///
    /// Batches submitted from one thread are committed in the order submitted.
    ///
    /// - Parameter holdOnFault: in a storage fault, hold the batch and retry
    ///   it until it commits (the default: the bus has taken it and has no
    ///   one to tell); false fails it at once with `StoreError.unavailable`.
    public nonisolated func submit(
        _ batch: WriteBatch, holdOnFault: Bool = true,
        completion: @escaping @Sendable (Result<WriteResult, any Error>) -> Void
    ) {
        if hand(batch, holdOnFault: holdOnFault, take: true, completion: completion) { scheduleSubmitted() }
    }

    /// Queues `batch` as `submit` does, but leaves its commit to the
    /// caller's next `commitStaged(here:)`, so that a producer hands over
    /// all it read in one wake-up and then decides who commits it.
    public nonisolated func stage(
        _ batch: WriteBatch, holdOnFault: Bool = true,
        completion: @escaping @Sendable (Result<WriteResult, any Error>) -> Void
    ) {
        _ = hand(batch, holdOnFault: holdOnFault, take: false, completion: completion)
    }

    /// Commits what was staged (`stage`) and not yet taken. With `here`,
    /// when the store is idle, the commit runs on the calling thread (the
    /// leader of a leader/follower group commit), and what arrives
    /// meanwhile joins the next one; the completions and commit observers
    /// run on this thread then. Otherwise, or when the store is busy, the
    /// store's thread commits it, as for `submit`.
    ///
    /// A producer at a high rate passes `here` false, so that its next read
    /// overlaps the commit; at a low rate an idle store then costs no thread
    /// wake-up per commit. Call it from a producer's thread, never the store's.
    public nonisolated func commitStaged(here: Bool) {
        let mine = submitted.withLock { state -> Bool in
            guard !state.items.isEmpty, !state.scheduled else { return false }
            state.scheduled = true
            return true
        }
        guard mine else { return }  // nothing staged, or already on its way to a commit
        if here, executor.runIfIdle({ self.assumeIsolated { $0.lead() } }) { return }
        scheduleSubmitted()
    }

    /// Adds a batch to those handed over. With `take`, true when the caller
    /// must have them taken (no take was scheduled yet; it is now marked so).
    private nonisolated func hand(
        _ batch: WriteBatch, holdOnFault: Bool, take: Bool,
        completion: @escaping @Sendable (Result<WriteResult, any Error>) -> Void
    ) -> Bool {
        let count = batch.count
        let backlog = self.backlogCount
        backlog.add(count)
        let waiter = Waiter(batch: batch, holdOnFault: holdOnFault) { result in
            backlog.remove(count)
            completion(result)
        }
        return submitted.withLock { state -> Bool in
            state.items.append(waiter)
            if state.scheduled || !take { return false }
            state.scheduled = true
            return true
        }
    }

    /// Straight onto the store's thread, not through a Task (which would
    /// wake a pool thread only to hop here).
    private nonisolated func scheduleSubmitted() {
        executor.run { self.assumeIsolated { $0.takeSubmitted() } }
    }

    /// On a borrowing producer's thread (`commitStaged(here:)`): takes what
    /// was handed over and commits it, and anything queued before it, now.
    private func lead() {
        leading = true
        defer { leading = false }
        commitPending()
    }

    func takeSubmitted() {
        let items = submitted.withLock { state -> [Waiter] in
            let items = state.items
            state.items = []
            state.scheduled = false
            return items
        }
        for item in items { enqueue(item) }
    }

    /// Changes submitted but not yet committed, for back-pressure.
    public nonisolated var backlog: Int { backlogCount.value }

    /// Blocks the calling thread (a producer's, never the store's) until
    /// fewer than `limit` submitted changes await commit, or `timeout`
    /// passes. Returns whether the backlog is below `limit`.
    @discardableResult
    public nonisolated func waitForBacklog(below limit: Int, timeout: Duration) -> Bool {
        backlogCount.wait(below: limit, timeout: timeout)
    }

    /// Commits everything submitted or queued so far; returns once it is
    /// durable (and observed). For a producer's drain, and a drain that must
    /// publish every commit before the store closes.
    public func commitPending() {
        takeSubmitted()
        while !queue.isEmpty && fault == nil { commitNext() }
    }

    private func enqueue(_ waiter: Waiter) {
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
        let commit = queue.nextCommit()
        if commit.scheduleAnother && fault == nil { scheduleCommit() }
        let work = commit.entries.map(\.waiter)
        guard !work.isEmpty else { return }
        guard let db else {
            for item in work { item.completion(.failure(StoreError.closed)) }
            return
        }
        let previous = currentAnchor
        var changes = CommitChanges()
        changes.arrived = work.map(\.arrived).min()
        let started = ContinuousClock.now
        do {
            let results = try db.transaction {
                var results: [WriteResult] = []
                for item in work { results.append(try write(item.batch, into: &changes)) }
                return results
            }
            commitDuration.observe(ContinuousClock.now - started)
            finishCommit(from: previous, changes: changes)
            for (item, result) in zip(work, results) {
                var result = result
                result.anchor = currentAnchor
                item.completion(.success(result))
            }
            // A commit of duplicates alone writes nothing, so it proves
            // nothing about the disk: the probe write decides then.
            if fault != nil, changes.anchor != nil { leaveFault() }
        } catch {
            currentAnchor = previous
            if let reason = Self.storageFault(error) {
                enterFault(reason)
                // Held batches go back to the front, in order; the others are told.
                let held = commit.entries.filter(\.waiter.holdOnFault)
                for entry in commit.entries where !entry.waiter.holdOnFault {
                    entry.waiter.completion(.failure(StoreError.unavailable(reason)))
                }
                queue.putBack(held)
                return
            }
            switch queue.commitFailed(commit.entries) {
            case .fail(let entry):
                logger.error("commit failed", ["error": "\(error)", "changes": "\(entry.changes)"])
                entry.waiter.completion(.failure(error))
            case .retryEachAlone(let entries):
                for entry in entries { commitAlone(entry.waiter, db: db) }
            }
        }
    }

    private func commitAlone(_ item: Waiter, db: Database) {
        let previous = currentAnchor
        var changes = CommitChanges()
        changes.arrived = item.arrived
        do {
            var result = try db.transaction {
                try write(item.batch, into: &changes)
            }
            finishCommit(from: previous, changes: changes)
            result.anchor = currentAnchor
            item.completion(.success(result))
        } catch {
            currentAnchor = previous
            logger.error("commit failed", ["error": "\(error)", "changes": "\(item.batch.count)"])
            item.completion(.failure(error))
        }
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
        guard let db else { throw StoreError.closed }
        if let fault { throw StoreError.unavailable(fault) }
        commitPending()  // whatever was queued before commits first, in order
        let previous = currentAnchor
        var changes = CommitChanges()
        changes.arrived = ContinuousClock.now
        var total = WriteResult()
        let started = ContinuousClock.now
        do {
            try db.transaction {
                while let batch = try next() {
                    let r = try write(batch, into: &changes)
                    total.added += r.added
                    total.duplicates += r.duplicates
                    total.deleted += r.deleted
                    total.unknown += r.unknown
                }
            }
        } catch {
            currentAnchor = previous
            if let reason = Self.storageFault(error) {
                enterFault(reason)
                throw StoreError.unavailable(reason)
            }
            throw error
        }
        commitDuration.observe(ContinuousClock.now - started)
        finishCommit(from: previous, changes: changes)
        total.anchor = currentAnchor
        return total
    }

    private func finishCommit(from previous: Int64, changes: CommitChanges) {
        commits += 1
        guard let anchor = changes.anchor else { return }
        currentAnchor = anchor
        let batch = changes.committed(previousAnchor: previous, anchor: anchor)
        for observer in observers { observer(batch) }
    }

    /// Applies the store rules of PROTOCOL.md §1 for one batch, inside the
    /// open transaction.
    private func write(_ batch: WriteBatch, into changes: inout CommitChanges) throws -> WriteResult {
        var result = WriteResult()
        let now = Int64((configuration.clock.now().timeIntervalSince1970 * 1000).rounded())
        var next = changes.anchor ?? currentAnchor
        var rest = batch.drinks[...]
        while !rest.isEmpty {
            // Runs of new drinks in one statement each; a run that finds a
            // record (or a UUID twice) is written one by one, below.
            let run = rest.prefix(Statements.insertRuns.first { $0 <= rest.count } ?? 1)
            rest = rest.dropFirst(run.count)
            if run.count > 1, try statements.insertNew(run, firstAnchor: next + 1, now: now) {
                for drink in run {
                    next += 1
                    changes.record(.added(drink), anchor: next, replacing: false)
                }
                result.added += run.count
                continue
            }
            for drink in run {
                // Stored when there is no record or the record's version is lower.
                let upsert = try statements.upsert(drink, anchor: next + 1, now: now)
                if upsert != .unchanged {
                    next += 1
                    result.added += 1
                    changes.record(.added(drink), anchor: next, replacing: upsert == .replaced)
                } else {
                    result.duplicates += 1
                    // Only for a caller that reports it: was it a deletion that kept it out?
                    if batch.explainDuplicates, case .some((let version, true)) = try statements.lookup(drink.uuid) {
                        result.deletedDuplicates.append(Tombstone(uuid: drink.uuid, version: version))
                    }
                }
            }
        }
        for deletion in batch.deletions {
            let existing = try statements.lookup(deletion.uuid)
            let version: Int64
            switch existing {
            case .some((_, true)):
                result.unknown += 1  // already deleted: no-op
                continue
            case .some((let recordVersion, false)):
                version = max(recordVersion, deletion.version ?? recordVersion)
                result.deleted += 1
            case .none:
                version = deletion.version ?? 1
                result.unknown += 1
            }
            next += 1
            try statements.tombstone(deletion.uuid, version: version, anchor: next, now: now)
            changes.record(.deleted(Tombstone(uuid: deletion.uuid, version: version)), anchor: next, replacing: existing != nil)
        }
        return result
    }
}

/// The changes of one commit, in order; past `HealthStore.announceLimit`
/// only the anchor is kept, so a huge commit needs no memory in
/// proportion to its size.
struct CommitChanges {
    var anchor: Int64?
    var log: [CommittedBatch.Change] = []
    var isComplete = true
    var arrived: ContinuousClock.Instant?
    /// Some change replaced a record that existed (see `CommittedBatch.replacesRecords`).
    var replacesRecords = false

    mutating func record(_ change: CommittedBatch.Change, anchor: Int64, replacing: Bool) {
        self.anchor = anchor
        if replacing { replacesRecords = true }
        guard isComplete else { return }
        log.append(change)
        if log.count > HealthStore.announceLimit {
            isComplete = false
            log = []
        }
    }

    func committed(previousAnchor: Int64, anchor: Int64) -> CommittedBatch {
        CommittedBatch(
            anchor: anchor, previousAnchor: previousAnchor, log: log, isComplete: isComplete, arrived: arrived,
            replacesRecords: replacesRecords)
    }
}
