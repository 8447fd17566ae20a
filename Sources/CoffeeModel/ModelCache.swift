import CoffeeDomain
import CoffeeLifecycle
import CoffeeLogging
import Foundation
import HealthStore
import Synchronization
import Syscall

/// Persists the model's drinks and the anchor they reflect, as one binary
/// property list.
///
/// In the seed, `ModelCache` was the private actor that saved the
/// watch app's drink list to `CoffeeTracker.plist` and loaded it at launch.
/// Here it is the model's cache: drinks and anchor are written together,
/// atomically, so the file can never hold an anchor that claims changes its
/// drinks do not (the seed saved the anchor first). It is not fsynced: the
/// store is the truth, and a stale, torn or missing cache is rebuilt from
/// it at start-up. Unchanged values are not written again. The model pushes
/// its state when the cache is due (`isDue`, `push`); the cache never calls
/// back into it. As a service it writes what was pushed when the group shuts
/// it down (after the model, whose last round pushes).
public actor ModelCache: Service {
    /// What the file holds.
    public struct Snapshot: Codable, Equatable, Sendable {
        public var anchor: Int64
        public var drinks: [Drink]
        /// The drinks are every live drink dated from here on
        /// (`ModelState.completeSince`); nil in a file written before it was kept.
        public var completeSince: Date?
        /// The store and epoch the anchor belongs to (docs/protocol.md §13);
        /// nil in a file written before they were kept. A cache of another
        /// store or epoch is rebuilt.
        public var store: UUID?
        public var epoch: Int64?

        public init(anchor: Int64, drinks: [Drink], completeSince: Date? = nil, identity: StoreIdentity? = nil) {
            self.anchor = anchor
            self.drinks = drinks
            self.completeSince = completeSince
            self.store = identity?.store
            self.epoch = identity?.epoch
        }

        /// The identity it was written under, when it says.
        public var identity: StoreIdentity? {
            guard let store, let epoch else { return nil }
            return StoreIdentity(store: store, epoch: epoch)
        }
    }

    /// Background priority: encoding a large window takes tens of
    /// milliseconds of a core, which the store and the publisher need more.
    private let executor: ThreadExecutor
    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    public let url: URL
    /// Least time between two writes.
    public let interval: Duration
    /// A write waits at least this many times as long as the last one took,
    /// so the cache never takes more than about 1/costFactor of a core: a
    /// window of 200,000 drinks takes half a second to encode, and writing it
    /// every second made the cache the busiest thread of the service.
    public let costFactor: Double
    private var lastCost: Duration = .zero
    private var savedValue: Snapshot?
    /// Files written so far.
    public private(set) var writes = 0
    private let logger: Logger

    /// - Parameters:
    ///   - interval: at most one write per interval (default 15 s). The
    ///     cache only shortens start-up: the model replays the store's
    ///     changes since its anchor (up to 50,000; at 1,000 events/s, 15 s
    ///     is 15,000), so writing the whole window every second cost a busy
    ///     service 4% of a core for nothing the store does not already hold.
    ///   - costFactor: a write waits at least this many times as long as the
    ///     last one took (default 100: at most about 1% of a core).
    public init(
        url: URL, interval: Duration = .seconds(15), costFactor: Double = 100, logger: Logger
    ) {
        self.logger = logger
        executor = ThreadExecutor(name: "model-cache", niceness: 10, logger: logger)
        self.url = url
        self.interval = interval
        self.costFactor = costFactor
        // The first write waits an interval too: a start-up has just read the file.
        slot = Mutex(Slot(pushed: nil, notBefore: .now + interval))
    }

    /// What the model pushes (`ModelState.cacheContents`): its index, whose
    /// drinks are read and sorted here, on the cache's thread, not the model's.
    public struct Contents: Sendable {
        let index: CaffeineIndex
        let anchor: Int64
        let completeSince: Date?
        let identity: StoreIdentity?

        public init(index: CaffeineIndex, anchor: Int64, completeSince: Date?, identity: StoreIdentity?) {
            self.index = index
            self.anchor = anchor
            self.completeSince = completeSince
            self.identity = identity
        }
    }

    /// What was pushed and not yet written, and when the next write is due.
    private struct Slot {
        var pushed: Contents?
        var notBefore: ContinuousClock.Instant
    }
    private nonisolated let slot: Mutex<Slot>

    /// Whether a push would be written now: nothing pushed waits, and at
    /// least `interval` (or `costFactor` times the last write's cost, if
    /// longer) has passed since the last write. The model asks after each
    /// round that changed it, so that however many changes arrive, at most
    /// one write per interval happens, of the newest state. One uncontended
    /// lock: it never wakes the cache's thread.
    public nonisolated var isDue: Bool {
        slot.withLock { $0.pushed == nil && ContinuousClock.now >= $0.notBefore }
    }

    /// Writes `contents` soon, on the cache's thread (or at the close,
    /// whichever comes first), replacing anything pushed before and not yet
    /// written. The cache is downstream of the store's commit and may lag;
    /// it never holds an anchor without its drinks.
    public nonisolated func push(_ contents: Contents) {
        let first = slot.withLock { slot -> Bool in
            defer { slot.pushed = contents }
            return slot.pushed == nil
        }
        if first { Task { await self.flush() } }
    }

    /// Writes what was pushed, now.
    public func flush() async {
        guard
            let contents = slot.withLock({ slot in
                defer { slot.pushed = nil }
                return slot.pushed
            })
        else { return }
        let clock = ContinuousClock()
        let started = clock.now
        // Sorted here, on the cache's thread, not on the model's.
        save(
            Snapshot(
                anchor: contents.anchor, drinks: contents.index.drinks.sorted(by: Drink.chronological),
                completeSince: contents.completeSince, identity: contents.identity))
        lastCost = clock.now - started
        let wait = max(interval, lastCost * costFactor)
        slot.withLock { $0.notBefore = clock.now + wait }
    }

    /// The saved snapshot, or nil when there is none or it cannot be read.
    public func load() -> Snapshot? {
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            logger.info("no model cache; it will be rebuilt from the store", metadata: ["path": "\(url.path)"])
            return nil
        }
        do {
            try PropertyListCheck.check(data)
            let snapshot = try PropertyListDecoder().decode(Snapshot.self, from: data)
            savedValue = snapshot
            return snapshot
        } catch {
            logger.warning(
                "model cache is unreadable; rebuilding it from the store",
                metadata: ["path": "\(url.path)", "error": "\(BatchDecoder.describe(error))"])
            return nil
        }
    }

    /// Writes `snapshot` unless it equals what was last saved.
    ///
    /// - Returns: true when the file was written.
    @discardableResult
    public func save(_ snapshot: Snapshot) -> Bool {
        guard snapshot != savedValue else { return false }
        do {
            let encoder = PropertyListEncoder()
            encoder.outputFormat = .binary
            // Atomic, not fsynced: after a crash the file may be stale, empty
            // or missing, and `load` then rebuilds from the store. It can never
            // claim more than the store holds, because it is written only
            // after commits that are already durable. An fsync here (a 500 kB
            // window every second) delayed the store's own fsyncs by
            // milliseconds.
            try DurableFile.write(try encoder.encode(snapshot), to: url, durable: false)
            savedValue = snapshot
            writes += 1
            return true
        } catch {
            // The store is the truth; a lost cache is only rebuilt at start-up.
            logger.error("could not save the model cache", metadata: ["path": "\(url.path)", "error": "\(error)"])
            return false
        }
    }

    public nonisolated var name: String { "model-cache" }

    public nonisolated func run() async throws {
        await gracefulShutdown()
        await close()
    }

    /// Writes what was pushed, then stops the cache's thread.
    public func close() async {
        await flush()
        executor.stop()
    }
}
