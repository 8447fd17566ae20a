import CoffeeDomain
import Foundation
import HealthStore
import Logging

/// Persists the model's drinks and the anchor they reflect, as one binary
/// property list: the seed's `CoffeeDataStore`.
///
/// Drinks and anchor are written together, atomically and durably, so a crash
/// can never leave an anchor that claims changes the drinks do not hold (the
/// seed saved the anchor first). Unchanged values are not written again. A
/// missing or unreadable file is not fatal: the caller rebuilds from the store.
public actor CoffeeDataStore {
    /// What the file holds.
    public struct Snapshot: Codable, Equatable, Sendable {
        public var anchor: Int64
        public var drinks: [Drink]

        public init(anchor: Int64, drinks: [Drink]) {
            self.anchor = anchor
            self.drinks = drinks
        }
    }

    private let executor = ThreadExecutor(name: "model-cache")
    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    public let url: URL
    /// Least time between two scheduled writes.
    public let interval: Duration
    /// A write waits at least this many times as long as the last one took,
    /// so the cache never takes more than about 1/costFactor of a core: a
    /// window of 200,000 drinks takes half a second to encode, and writing it
    /// every second made the cache the busiest thread of the service.
    public let costFactor: Double
    private var lastCost: Duration = .zero
    private var savedValue: Snapshot?
    /// The model to read when the scheduled write happens.
    private var source: CoffeeData?
    private var writeScheduled = false
    /// Files written so far.
    public private(set) var writes = 0
    private let logger = Logger(label: "model-cache")

    public init(url: URL, interval: Duration = .seconds(1), costFactor: Double = 20) {
        self.url = url
        self.interval = interval
        self.costFactor = costFactor
    }

    /// Saves `model`'s drinks and anchor soon, coalescing: however many
    /// changes arrive, at most one write per `interval` (or per `costFactor`
    /// times the last write's cost, if longer), of the newest state.
    /// The drinks are read from the model when the write happens, so a change
    /// costs nothing here (holding the model's dictionary between writes made
    /// every change copy it). The cache is downstream of the store's commit
    /// and may lag; it never holds an anchor without its drinks.
    public func schedule(from model: CoffeeData) {
        source = model
        guard !writeScheduled else { return }
        writeScheduled = true
        let wait = max(interval, lastCost * costFactor)
        Task {
            try? await Task.sleep(for: wait)
            await flush()
        }
    }

    /// Writes what is scheduled now.
    public func flush() async {
        writeScheduled = false
        guard let model = source else { return }
        source = nil
        let (drinks, anchor) = await model.cacheContents()
        let clock = ContinuousClock()
        let started = clock.now
        // Sorted here, on the cache's thread, not on the model's.
        save(Snapshot(anchor: anchor, drinks: drinks.sorted(by: Drink.chronological)))
        lastCost = clock.now - started
    }

    /// The saved snapshot, or nil when there is none or it cannot be read.
    public func load() -> Snapshot? {
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            logger.info("no model cache; it will be rebuilt from the store", ["path": url.path])
            return nil
        }
        do {
            let snapshot = try PropertyListDecoder().decode(Snapshot.self, from: data)
            savedValue = snapshot
            return snapshot
        } catch {
            logger.warning(
                "model cache is unreadable; rebuilding it from the store",
                ["path": url.path, "error": BatchDecoder.describe(error)])
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
            try DurableFile.write(try encoder.encode(snapshot), to: url)
            savedValue = snapshot
            writes += 1
            return true
        } catch {
            // The store is the truth; a lost cache is only rebuilt at start-up.
            logger.error("could not save the model cache", ["path": url.path, "error": "\(error)"])
            return false
        }
    }

    /// Writes what is scheduled, then stops the cache's thread.
    public func close() async {
        await flush()
        executor.stop()
    }
}
