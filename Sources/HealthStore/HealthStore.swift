import CoffeeDomain
import CoffeeLifecycle
import CoffeeLogging
import Foundation
import PostgreSQL
import SQLite
import Synchronization

/// The anchored store: HealthKit's role in the seed.
///
/// SQLite in WAL mode with `synchronous=FULL`, or a PostgreSQL database that
/// several services share (`Configuration.postgresql`, docs/protocol.md §11;
/// `HealthStore+Shared.swift`); the rules and the commit path are the same
/// code for both (`Statements`, over `RecordConnection`). Every change that takes
/// effect gets the next anchor, committed in the same transaction as the data.
/// The actor runs on a thread of its own, so fsync never blocks the
/// cooperative pool; while that thread is idle, a producer may borrow its
/// isolation and commit on its own thread (`commitStaged(here:)`).
///
/// The API is split by concern: writing and group commit
/// (`HealthStore+Writing.swift`, deciding through `WriterStateMachine`),
/// reading (`HealthStore+Reading.swift`), and maintenance and its life as a
/// service (`HealthStore+Maintenance.swift`). Commits are observed one way:
/// `observeCommits`.
public actor HealthStore {
    /// Store settings, with the defaults of docs/protocol.md §7.
    public struct Configuration: Sendable {
        /// The SQLite file; created if missing.
        public var path: String
        /// A PostgreSQL database instead of the file (libpq's conninfo,
        /// `store.postgresql.conninfo`): a store several services may share.
        public var postgresql: String?
        /// How long tombstones are kept before `purgeTombstones` removes them
        /// (`store.tombstoneRetentionDays`, default 30 days).
        public var tombstoneRetention: TimeInterval
        /// Where "now" comes from, for tombstone ages and record times.
        public var clock: any WallClock
        /// How often the running store purges expired tombstones (default an hour).
        public var purgeInterval: Duration
        /// What the purge timer sleeps on: injected so that tests drive it.
        public var timerClock: any Clock<Duration>
        /// How often a store in a storage fault tries to write again.
        public var faultRetryInterval: Duration = .seconds(1)
        /// Whether the store purges its own tombstones; a standby's follows
        /// its primary's purge instead (`ReplicaCommit.purgedAnchor`).
        public var purgesTombstones = true
        /// The store opens as a standby's (`follow`): marked so, so that a
        /// later start as a primary is a promotion (its epoch goes up, once).
        public var standby = false
        /// The person's settings where the store keeps none of their own
        /// (the configuration's `model.*` and `alerts.*`, docs/protocol.md §15).
        public var settingsDefaults = PersonSettings()

        public init(
            path: String, tombstoneRetention: TimeInterval = 30 * 86_400, clock: any WallClock = SystemClock(),
            purgeInterval: Duration = .seconds(3600), timerClock: any Clock<Duration> = ContinuousClock()
        ) {
            self.path = path
            self.tombstoneRetention = tombstoneRetention
            self.clock = clock
            self.purgeInterval = purgeInterval
            self.timerClock = timerClock
        }
    }

    /// Commits with more changes than this are announced without their
    /// changes (`CommittedBatch.isComplete` false); readers page through them.
    public static let announceLimit = 10_000

    let executor: ThreadExecutor
    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    let configuration: Configuration
    let logger: Logger
    /// The SQLite connection; nil for a store in PostgreSQL (and once closed).
    var db: Database?
    /// Until `close()`.
    var isOpen = true
    let statements: any RecordStatements
    /// A shared store's listener of other services' commits.
    nonisolated let listener: SharedStoreListener?
    /// The last anchor announced to the observers: a shared store announces
    /// other services' commits before its own (`HealthStore+Shared.swift`).
    var announcedAnchor: Int64 {
        didSet { announcedNow.store(announcedAnchor, ordering: .relaxed) }
    }
    /// `announcedAnchor` for the listener's thread: a notification of a
    /// commit already announced (this service's own) wakes nothing.
    nonisolated let announcedNow = Atomic<Int64>(0)
    /// A catch-up of a shared store's announcements is queued on the store's thread.
    nonisolated let catchUpQueued = Atomic<Bool>(false)

    var currentAnchor: Int64 {
        didSet { figures.anchor.store(currentAnchor, ordering: .relaxed) }
    }
    var purgedAnchor: Int64 {
        didSet { figures.purgedAnchor.store(purgedAnchor, ordering: .relaxed) }
    }
    /// The figures of `statistics()` and the fault, for any thread.
    nonisolated let figures = StoreFigures()
    /// The store's identity (docs/protocol.md §13), for any thread: it
    /// changes only when a standby takes its primary's (`ReplicaCommit.identity`).
    nonisolated let identityNow: Mutex<IdentityNow>
    struct IdentityNow {
        var identity: StoreIdentity
        /// Made by this build for a store that already held changes
        /// (`StoreIdentityRecord`): a standby's such store takes its primary's.
        var upgraded: Bool
    }
    var commits: Int64 = 0 {
        didSet { figures.commits.store(commits, ordering: .relaxed) }
    }
    /// The person's settings and catalogue now, for any thread: the one
    /// owner of them, replaced by the store's own commits (a write, a
    /// standby's copy, another service's announcement) before they are
    /// announced or replied to, so no reader waits on another's round.
    public nonisolated let liveSettings: LiveSettings

    /// A batch waiting for its commit, and who to tell.
    struct Waiter: Sendable {
        var batch: WriteBatch
        /// Held through a storage fault (`WriterStateMachine.Entry.holdOnFault`).
        var holdOnFault = false
        /// When it reached the store, for the publish-delay histogram.
        var arrived = ContinuousClock.now
        /// Called through `finish`, which takes the batch out of the backlog.
        var completion: @Sendable (Result<WriteResult, any Error>) -> Void
    }
    /// From taking a commit's batches to its fsync returning (docs/protocol.md §9).
    public nonisolated let commitDuration = Histogram()
    /// What is queued, who commits it, the storage fault with its held
    /// batches and waiters (`HealthStore+Faults.swift`): every decision of the writer.
    var writer = WriterStateMachine<Waiter, CheckedContinuation<Void, Never>>(changeLimit: HealthStore.announceLimit)
    /// The writer's fault, mirrored for other threads without a hop: set
    /// only as its actions say (`FaultAction.began`, `CommittedAction.leftFault`).
    nonisolated let faulted = Atomic<Bool>(false)
    /// The retry task of a fault: started and dropped only as the writer's actions say.
    var faultRetry: Task<Void, Never>?
    var observers: [CommitObserver] = []
    /// Backups copying the main file now; while any is, nothing checkpoints
    /// into it (`HealthStore+Backup.swift`).
    var copiesOfMainFile = 0
    #if TEST_HOOKS
        /// Runs on a backup's thread after each chunk it copies: tests hold a copy there.
        var afterBackupChunk: (@Sendable () -> Void)?
    #endif

    /// Batches handed over by `submit` from other threads, not yet queued.
    struct Submitted: Sendable {
        var items: [Waiter] = []
        var scheduled = false
    }
    nonisolated let submitted = Mutex(Submitted())
    nonisolated let backlogCount = Backlog()

    /// Called on the store's thread right after each durable commit, in
    /// commit order. It must only queue work, never block.
    public typealias CommitObserver = @Sendable (CommittedBatch) -> Void

    /// Opens the store at `configuration.path`, creating or migrating it,
    /// or in the PostgreSQL database of `configuration.postgresql`.
    ///
    /// - Throws: `StoreError` when the file or database is corrupt, not
    ///   ours, or from a newer version; `SQLiteError` when the file cannot be
    ///   opened at all; `PostgreSQLError` when the database cannot be reached.
    public init(configuration: Configuration, logger: Logger) throws {
        self.logger = logger
        let opened =
            if let conninfo = configuration.postgresql {
                try Self.openShared(conninfo)
            } else {
                try Self.openFile(configuration.path)
            }
        db = opened.file
        statements = opened.statements
        currentAnchor = opened.anchor
        announcedAnchor = opened.anchor
        announcedNow.store(opened.anchor, ordering: .relaxed)
        purgedAnchor = opened.purgedAnchor
        figures.anchor.store(opened.anchor, ordering: .relaxed)  // no didSet in an initializer
        figures.purgedAnchor.store(opened.purgedAnchor, ordering: .relaxed)
        let identity = try StoreIdentityRecord.open(
            opened.connection, asStandby: configuration.standby, anchor: opened.anchor)
        identityNow = Mutex(IdentityNow(identity: identity.identity, upgraded: identity.upgraded))
        let stored = try Self.readSettings(opened.statements)
        liveSettings = LiveSettings(defaults: configuration.settingsDefaults, stored: stored.values, anchor: stored.anchor)
        if let event = identity.event {
            logger.notice(
                "the store's identity: \(event)",
                metadata: ["store": "\(UUIDText.string(identity.identity.store))", "epoch": "\(identity.identity.epoch)"])
        }
        self.configuration = configuration
        self.executor = ThreadExecutor(name: "store")
        listener = configuration.postgresql.map { SharedStoreListener(conninfo: $0, logger: logger) }
        startListening()
    }

    /// What an open found: the connection and statements, the anchors.
    struct Opened {
        var connection: any RecordConnection
        var file: Database?
        var statements: any RecordStatements
        var anchor: Int64
        var purgedAnchor: Int64
    }

    private static func openFile(_ path: String) throws -> Opened {
        let db = try Database(path: path)
        do {
            // One process owns the store: the lock is taken at the first read
            // and held until close, so a second service on the same file is
            // refused, and no transaction pays for file locks or a
            // shared-memory WAL index (set before the first WAL read).
            try db.execute("PRAGMA locking_mode=EXCLUSIVE")
            try StoreSchema.prepare(db, path: path)
            let mode = try db.text("PRAGMA journal_mode=WAL")
            guard mode?.lowercased() == "wal" else {
                throw StoreError.io("\(path): could not enable WAL (journal_mode is \(mode ?? "unknown"))")
            }
            try db.execute("PRAGMA synchronous=FULL")
            // Random-key upserts touch B-tree pages all over the file; the
            // default 2 MB cache sends most of them back to the kernel.
            try db.execute("PRAGMA cache_size=-32768")
            try db.execute("PRAGMA foreign_keys=OFF")
            // Each change's anchor is its record's rowid, so the highest one
            // costs a commit no extra page; a purge that removes it first
            // writes it into `meta` (`purgeTombstones`).
            return Opened(
                connection: db, file: db, statements: try Statements(db), anchor: try StoreSchema.anchor(of: db),
                purgedAnchor: try db.scalar("SELECT value FROM meta WHERE key = 'purged_anchor'") ?? 0)
        } catch let error as SQLiteError where error.isCorruption {
            throw StoreError.corrupt(path, error.message)
        } catch let error as SQLiteError where error.isBusy {
            throw StoreError.inUse(path)
        }
    }

    private static func openShared(_ conninfo: String) throws -> Opened {
        let db = try Connection(conninfo: conninfo)
        try SharedStoreSchema.prepare(db)
        return Opened(
            connection: db, statements: try Statements(db),
            anchor: try db.scalar("SELECT value FROM meta WHERE key = 'anchor'") ?? 0,
            purgedAnchor: try db.scalar("SELECT value FROM meta WHERE key = 'purged_anchor'") ?? 0)
    }

    /// The store is in PostgreSQL, which several services may share
    /// (docs/protocol.md §11): backups and restores are PostgreSQL's.
    public nonisolated var isShared: Bool { configuration.postgresql != nil }

    /// The store's identity now: `store` and `epoch` (docs/protocol.md §13).
    public nonisolated var identity: StoreIdentity { identityNow.withLock { $0.identity } }

    /// The settings the store keeps now (docs/protocol.md §15).
    public nonisolated var settings: StoredSettings {
        let current = liveSettings.current
        return StoredSettings(values: current.stored, anchor: current.anchor)
    }

    /// Whether the identity was made for a store that already held changes
    /// (by the first build that kept one): a standby's such store takes its
    /// primary's rather than refusing it.
    public nonisolated var identityWasUpgraded: Bool { identityNow.withLock { $0.upgraded } }

    /// Calls `observer` after every durable commit from now on, on the
    /// store's thread, in commit order: the anchored query's update handler.
    /// A consumer that only queues (the broadcaster, the model) saves the
    /// thread wake-up a stream would cost per commit.
    public func observeCommits(_ observer: @escaping CommitObserver) {
        observers.append(observer)
    }

    /// Commits what is queued, closes the database and stops the store's
    /// thread. Later calls fail with `StoreError.closed`.
    public func close() {
        drainAndClose()
        stopListening()
        observers = []
        statements.finalize()
        isOpen = false
        if let db {
            if copiesOfMainFile == 0 {
                try? db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            } else {
                // A backup still reads the main file: leave the WAL for the next open.
                db.setCheckpointOnClose(false)
            }
            db.close()  // releases the exclusive lock now, not when the last reference goes
        } else {
            statements.closeConnection()
        }
        db = nil
        executor.stop()
    }
}
