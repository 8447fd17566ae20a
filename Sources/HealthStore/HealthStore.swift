import CoffeeDomain
import Foundation
import Logging
import SQLite
import Synchronization

/// The anchored store: HealthKit's role in the seed.
///
/// SQLite in WAL mode with `synchronous=FULL`. Every change that takes
/// effect gets the next anchor, committed in the same transaction as the data.
/// The actor runs on a thread of its own, so fsync never blocks the
/// cooperative pool.
///
/// Group commit: `apply` queues its batch and suspends; one flush drains
/// everything queued into a single transaction, so one fsync covers many
/// callers. Each caller resumes only after that commit is durable.
public actor HealthStore {
    /// Store settings, with the defaults of PROTOCOL.md §7.
    public struct Configuration: Sendable {
        /// The SQLite file; created if missing.
        public var path: String
        /// How long tombstones are kept before `purgeTombstones` removes them.
        public var tombstoneRetention: TimeInterval
        /// Where "now" comes from, for tombstone ages.
        public var clock: any WallClock

        public init(path: String, tombstoneRetention: TimeInterval = 30 * 86_400, clock: any WallClock = SystemClock()) {
            self.path = path
            self.tombstoneRetention = tombstoneRetention
            self.clock = clock
        }
    }

    /// Commits with more changes than this are announced without their
    /// changes (`CommittedBatch.isComplete` false); readers page through them.
    public static let announceLimit = 10_000

    private let executor: ThreadExecutor
    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    private let configuration: Configuration
    private let logger = Logger(label: "store")
    private var db: Database?
    private let statements: Statements

    private var currentAnchor: Int64
    private var purgedAnchor: Int64
    private var commits: Int64 = 0

    private struct Pending: Sendable {
        var batch: WriteBatch
        var completion: @Sendable (Result<WriteResult, any Error>) -> Void
    }
    private var pending: [Pending] = []
    private var flushScheduled = false
    private var subscribers: [UUID: AsyncStream<CommittedBatch>.Continuation] = [:]
    private var observers: [CommitObserver] = []

    /// Called on the store's thread right after each durable commit, in
    /// commit order. It must only queue work, never block.
    public typealias CommitObserver = @Sendable (CommittedBatch) -> Void

    /// Opens the store at `configuration.path`, creating or migrating it.
    ///
    /// - Throws: `StoreError` when the file is corrupt, not ours, or from a
    ///   newer version; `SQLiteError` when it cannot be opened at all.
    public init(configuration: Configuration) throws {
        let db = try Database(path: configuration.path)
        do {
            // One process owns the store: the lock is taken at the first read
            // and held until close, so a second service on the same file is
            // refused, and no transaction pays for file locks or a
            // shared-memory WAL index (set before the first WAL read).
            try db.execute("PRAGMA locking_mode=EXCLUSIVE")
            try StoreSchema.prepare(db, path: configuration.path)
            let mode = try db.text("PRAGMA journal_mode=WAL")
            guard mode?.lowercased() == "wal" else {
                throw StoreError.io("\(configuration.path): could not enable WAL (journal_mode is \(mode ?? "unknown"))")
            }
            try db.execute("PRAGMA synchronous=FULL")
            // Random-key upserts touch B-tree pages all over the file; the
            // default 2 MB cache sends most of them back to the kernel.
            try db.execute("PRAGMA cache_size=-32768")
            try db.execute("PRAGMA foreign_keys=OFF")
            statements = try Statements(db)
            currentAnchor = try db.scalar("SELECT value FROM meta WHERE key = 'anchor'") ?? 0
            purgedAnchor = try db.scalar("SELECT value FROM meta WHERE key = 'purged_anchor'") ?? 0
        } catch let error as SQLiteError where error.isCorruption {
            throw StoreError.corrupt(configuration.path, error.message)
        } catch let error as SQLiteError where error.isBusy {
            throw StoreError.inUse(configuration.path)
        }
        self.db = db
        self.configuration = configuration
        self.executor = ThreadExecutor(name: "store")
    }

    // MARK: Writing

    /// Saves drinks and applies deletions in one commit; returns once it is durable.
    ///
    /// - Throws: `StoreError.closed` after `close()`; a SQLite error if the
    ///   commit failed (nothing of the batch was stored).
    public func apply(_ batch: WriteBatch) async throws -> WriteResult {
        try await withCheckedThrowingContinuation { continuation in
            enqueue(batch) { continuation.resume(with: $0) }
        }
    }

    public func save(_ drinks: [Drink]) async throws -> WriteResult {
        try await apply(WriteBatch(drinks: drinks))
    }

    public func delete(_ deletions: [Deletion]) async throws -> WriteResult {
        try await apply(WriteBatch(deletions: deletions))
    }

    /// Queues `batch` without waiting; `completion` runs on the store's
    /// thread once the commit is durable (or failed). For producers such as
    /// the bus, which must not wait one commit per message.
    ///
    /// Batches submitted from one thread are committed in the order submitted.
    public nonisolated func submit(
        _ batch: WriteBatch, completion: @escaping @Sendable (Result<WriteResult, any Error>) -> Void
    ) {
        let count = batch.count
        let backlog = self.backlogCount
        backlog.add(count)
        let completion: @Sendable (Result<WriteResult, any Error>) -> Void = { result in
            backlog.remove(count)
            completion(result)
        }
        let schedule = submitted.withLock { state -> Bool in
            state.items.append(Pending(batch: batch, completion: completion))
            if state.scheduled { return false }
            state.scheduled = true
            return true
        }
        // Straight onto the store's thread, not through a Task (which would
        // wake a pool thread only to hop here).
        if schedule { executor.run { self.assumeIsolated { $0.takeSubmitted() } } }
    }

    private struct Submitted: Sendable {
        var items: [Pending] = []
        var scheduled = false
    }
    private nonisolated let submitted = Mutex(Submitted())

    private func takeSubmitted() {
        let items = submitted.withLock { state -> [Pending] in
            let items = state.items
            state.items = []
            state.scheduled = false
            return items
        }
        for item in items { enqueue(item.batch, completion: item.completion) }
    }

    /// Changes submitted but not yet committed, for back-pressure.
    public nonisolated var backlog: Int { backlogCount.value }
    private nonisolated let backlogCount = Backlog()

    /// Blocks the calling thread (a producer's, never the store's) until
    /// fewer than `limit` submitted changes await commit, or `timeout`
    /// passes. Returns whether the backlog is below `limit`.
    @discardableResult
    public nonisolated func waitForBacklog(below limit: Int, timeout: Duration) -> Bool {
        backlogCount.wait(below: limit, timeout: timeout)
    }

    private func enqueue(_ batch: WriteBatch, completion: @escaping @Sendable (Result<WriteResult, any Error>) -> Void) {
        guard db != nil else { return completion(.failure(StoreError.closed)) }
        pending.append(Pending(batch: batch, completion: completion))
        if !flushScheduled {
            flushScheduled = true
            // Runs after the jobs already queued on this executor, so that
            // every batch that arrived meanwhile joins this commit.
            Task { self.flush() }
        }
    }

    /// Commits what is queued in one transaction: every batch, or as many
    /// as fit in `announceLimit` changes (at least one), so that a commit's
    /// changes are announced with it rather than read back in pages; the rest
    /// commit next, after any jobs already queued.
    private func flush() {
        flushScheduled = false
        var take = 0
        var changeCount = 0
        while take < pending.count, take == 0 || changeCount + pending[take].batch.count <= Self.announceLimit {
            changeCount += pending[take].batch.count
            take += 1
        }
        let work = Array(pending.prefix(take))
        pending.removeFirst(take)
        if !pending.isEmpty {
            flushScheduled = true
            Task { self.flush() }
        }
        guard !work.isEmpty else { return }
        guard let db else {
            for item in work { item.completion(.failure(StoreError.closed)) }
            return
        }
        let previous = currentAnchor
        var changes = CommitChanges()
        do {
            let results = try db.transaction {
                var results: [WriteResult] = []
                for item in work { results.append(try write(item.batch, into: &changes)) }
                try statements.setMeta("anchor", changes.anchor ?? previous)
                return results
            }
            finishCommit(from: previous, changes: changes)
            for (item, result) in zip(work, results) {
                var result = result
                result.anchor = currentAnchor
                item.completion(.success(result))
            }
        } catch {
            // Something failed the shared transaction. Retry each batch alone,
            // so that one bad batch cannot fail the others queued with it.
            currentAnchor = previous
            if work.count == 1 {
                logger.error("commit failed", ["error": "\(error)", "changes": "\(work[0].batch.count)"])
                work[0].completion(.failure(error))
                return
            }
            for item in work { commitAlone(item, db: db) }
        }
    }

    /// Commits everything queued, in as many transactions as `flush` takes.
    private func flushAll() {
        repeat { flush() } while !pending.isEmpty
    }

    /// Applies every batch `next` yields, in one transaction: all of them or,
    /// if `next` or a write throws, none. For imports of any size: memory is
    /// one batch, not the whole input. Returns once the commit is durable.
    ///
    /// - Parameter next: called on the store's thread until it returns nil;
    ///   what it throws (a validation error, say) rolls everything back and
    ///   is rethrown.
    public func applyStream(_ next: @Sendable () throws -> WriteBatch?) throws -> WriteResult {
        guard let db else { throw StoreError.closed }
        flushAll()  // whatever was queued before commits first, in order
        let previous = currentAnchor
        var changes = CommitChanges()
        var total = WriteResult()
        do {
            try db.transaction {
                while let batch = try next() {
                    let r = try write(batch, into: &changes)
                    total.added += r.added
                    total.duplicates += r.duplicates
                    total.deleted += r.deleted
                    total.unknown += r.unknown
                }
                try statements.setMeta("anchor", changes.anchor ?? previous)
            }
        }
        finishCommit(from: previous, changes: changes)
        total.anchor = currentAnchor
        return total
    }

    private func commitAlone(_ item: Pending, db: Database) {
        let previous = currentAnchor
        var changes = CommitChanges()
        do {
            var result = try db.transaction {
                let result = try write(item.batch, into: &changes)
                try statements.setMeta("anchor", changes.anchor ?? previous)
                return result
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

    private func finishCommit(from previous: Int64, changes: CommitChanges) {
        commits += 1
        guard let anchor = changes.anchor else { return }
        currentAnchor = anchor
        let batch = changes.committed(previousAnchor: previous, anchor: anchor)
        for observer in observers { observer(batch) }
        for continuation in subscribers.values { continuation.yield(batch) }
    }

    /// The changes of one commit, in order; past `HealthStore.announceLimit`
    /// only the anchor is kept, so a huge commit needs no memory in
    /// proportion to its size.
    private struct CommitChanges {
        var anchor: Int64?
        var log: [CommittedBatch.Change] = []
        var isComplete = true

        mutating func record(_ change: CommittedBatch.Change, anchor: Int64) {
            self.anchor = anchor
            guard isComplete else { return }
            log.append(change)
            if log.count > HealthStore.announceLimit {
                isComplete = false
                log = []
            }
        }

        func committed(previousAnchor: Int64, anchor: Int64) -> CommittedBatch {
            CommittedBatch(anchor: anchor, previousAnchor: previousAnchor, log: log, isComplete: isComplete)
        }
    }

    /// Applies the store rules of PROTOCOL.md §1 for one batch, inside the
    /// open transaction.
    private func write(_ batch: WriteBatch, into changes: inout CommitChanges) throws -> WriteResult {
        var result = WriteResult()
        let now = Int64((configuration.clock.now().timeIntervalSince1970 * 1000).rounded())
        var next = changes.anchor ?? currentAnchor
        for drink in batch.drinks {
            // Stored when there is no record or the record's version is lower.
            if try statements.upsert(drink, anchor: next + 1, now: now) {
                next += 1
                result.added += 1
                changes.record(.added(drink), anchor: next)
            } else {
                result.duplicates += 1
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
            changes.record(.deleted(Tombstone(uuid: deletion.uuid, version: version)), anchor: next)
        }
        return result
    }

    // MARK: Reading

    /// The store's current anchor: that of its last change.
    public var anchor: Int64 { currentAnchor }

    /// Changes after `since`, in anchor order, at most `limit` of them.
    ///
    /// - Parameter since: nil for every live drink (no tombstones).
    /// - Throws: `StoreError.anchorExpired` when tombstones after `since`
    ///   were purged, so the caller must resync from nil.
    ///   - through: the last anchor to include (default: the store's anchor);
    ///     with it a reader pages through one commit without running into later ones.
    public func changes(since: Int64?, limit: Int, through: Int64? = nil) throws -> ChangeSet {
        guard db != nil else { throw StoreError.closed }
        if let since, since < purgedAnchor { throw StoreError.anchorExpired(requested: since, purged: purgedAnchor) }
        let limit = max(1, limit)
        let end = min(through ?? currentAnchor, currentAnchor)
        let rows = try statements.changes(after: since ?? 0, through: end, liveOnly: since == nil, limit: limit + 1)
        let hasMore = rows.count > limit
        let page = rows.prefix(limit)
        let (added, deleted) = CommittedBatch.Change.split(page.lazy.map(\.change))
        let last = page.last?.anchor ?? since ?? 0
        return ChangeSet(added: added, deleted: deleted, anchor: hasMore ? last : end, hasMore: hasMore)
    }

    /// `changes(since:limit:through:)` for a thread of its own that may
    /// block (the publisher's): the read runs on the store's thread, queued
    /// behind what is there, and this waits for it. Never call it from the
    /// cooperative pool or from the store's own thread.
    public nonisolated func changesWaiting(since: Int64?, limit: Int, through: Int64? = nil) throws -> ChangeSet {
        let done = DispatchSemaphore(value: 0)
        let result = Mutex<Result<ChangeSet, any Error>?>(nil)
        executor.run {
            let r = Result { try self.assumeIsolated { try $0.changes(since: since, limit: limit, through: through) } }
            result.withLock { $0 = r }
            done.signal()
        }
        done.wait()
        return try result.withLock { $0! }.get()
    }

    /// Live drinks dated in `range`, oldest first: what a model window needs.
    public func drinks(datedIn range: ClosedRange<Date>) throws -> [Drink] {
        guard db != nil else { throw StoreError.closed }
        return try statements.drinks(
            from: Int64((range.lowerBound.timeIntervalSince1970 * 1000).rounded(.down)),
            to: Int64((range.upperBound.timeIntervalSince1970 * 1000).rounded(.up)))
    }

    /// Live drinks dated from `start` on, with the anchor they reflect, read
    /// together: what a model rebuilds from.
    public func window(datedFrom start: Date) throws -> (drinks: [Drink], anchor: Int64) {
        guard db != nil else { throw StoreError.closed }
        let drinks = try statements.drinks(from: Int64((start.timeIntervalSince1970 * 1000).rounded(.down)), to: .max)
        return (drinks, currentAnchor)
    }

    /// A stream of every durable commit from now on: the anchored query's
    /// update handler. Ends when the store closes.
    public func updates() -> AsyncStream<CommittedBatch> {
        let (stream, continuation) = AsyncStream.makeStream(of: CommittedBatch.self)
        guard db != nil else {
            continuation.finish()
            return stream
        }
        let id = UUID()
        subscribers[id] = continuation
        continuation.onTermination = { _ in Task { await self.unsubscribe(id) } }
        return stream
    }

    private func unsubscribe(_ id: UUID) { subscribers[id] = nil }

    /// Calls `observer` after every durable commit from now on, on the
    /// store's thread: for a consumer that only queues, such as the
    /// broadcaster, this saves the thread wake-up an update stream costs
    /// per commit.
    public func observeCommits(_ observer: @escaping CommitObserver) {
        observers.append(observer)
    }

    // MARK: Maintenance

    /// Removes tombstones older than the retention period and remembers the
    /// highest anchor purged. Returns how many were removed.
    @discardableResult
    public func purgeTombstones() throws -> Int {
        guard let db else { throw StoreError.closed }
        let cutoff = configuration.clock.now().addingTimeInterval(-configuration.tombstoneRetention)
        let cutoffMs = Int64((cutoff.timeIntervalSince1970 * 1000).rounded())
        return try db.transaction {
            guard let highest = try statements.highestExpiredTombstone(before: cutoffMs) else { return 0 }
            let removed = try statements.purgeTombstones(before: cutoffMs)
            purgedAnchor = max(purgedAnchor, highest)
            try statements.setMeta("purged_anchor", purgedAnchor)
            logger.info("purged tombstones", ["count": "\(removed)", "purgedAnchor": "\(purgedAnchor)"])
            return removed
        }
    }

    public func statistics() -> StoreStatistics {
        let path = configuration.path
        func size(_ p: String) -> Int64 {
            ((try? FileManager.default.attributesOfItem(atPath: p)[.size]) as? NSNumber)?.int64Value ?? 0
        }
        return StoreStatistics(
            anchor: currentAnchor, purgedAnchor: purgedAnchor, commits: commits,
            fileBytes: size(path) + size(path + "-wal"))
    }

    /// Commits everything submitted or queued so far; returns once it is
    /// durable (and observed). For a drain that must publish every commit
    /// before the store closes.
    public func commitPending() {
        takeSubmitted()
        flushAll()
    }

    /// Commits what is queued, ends the update streams, closes the database
    /// and stops the store's thread. Later calls fail with `StoreError.closed`.
    public func close() {
        commitPending()  // batches submitted but not yet taken are committed too
        for continuation in subscribers.values { continuation.finish() }
        subscribers = [:]
        observers = []
        statements.finalize()
        if let db {
            try? db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            db.close()  // releases the exclusive lock now, not when the last reference goes
        }
        db = nil
        executor.stop()
    }
}
