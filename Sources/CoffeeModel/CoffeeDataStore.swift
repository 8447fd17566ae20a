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
    private var savedValue: Snapshot?
    private var scheduled: (drinks: [UUID: Drink], anchor: Int64)?
    private var writeScheduled = false
    /// Files written so far.
    public private(set) var writes = 0
    private let logger = Logger(label: "model-cache")

    public init(url: URL, interval: Duration = .seconds(1)) {
        self.url = url
        self.interval = interval
    }

    /// Saves the latest drinks and anchor soon, coalescing: however many
    /// changes arrive, at most one write per `interval`, always of the newest.
    /// The cache is downstream of the store's commit, so it may lag; it never
    /// holds an anchor without its drinks.
    public func schedule(drinks: [UUID: Drink], anchor: Int64) {
        scheduled = (drinks, anchor)
        guard !writeScheduled else { return }
        writeScheduled = true
        Task {
            try? await Task.sleep(for: interval)
            flush()
        }
    }

    /// Writes what is scheduled now.
    public func flush() {
        writeScheduled = false
        guard let (drinks, anchor) = scheduled else { return }
        scheduled = nil
        let sorted = drinks.values.sorted { ($0.date, $0.uuid.uuidString) < ($1.date, $1.uuid.uuidString) }
        save(Snapshot(anchor: anchor, drinks: sorted))
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
    public func close() {
        flush()
        executor.stop()
    }
}
