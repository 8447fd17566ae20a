import CoffeeDomain
import CoffeeLogging
import CoffeeTestKit
import Foundation
import PostgreSQL
import Synchronization
import Testing

@testable import HealthStore

/// A fresh folder under the system's temporary directory, removed by
/// `cleanup()`; with `.postgresql`, a fresh database too. Databases are left
/// to the server, which `make unit` throws away after the tests: a DROP
/// DATABASE waits for its sessions, which may wait for another test's
/// COMMIT held on purpose (`SharedStoreTests`), on a thread of the pool that
/// test needs.
struct TemporaryDirectory {
    let url: URL
    let backend: StoreBackend
    /// The database's conninfo, for `.postgresql`.
    let postgresql: String?

    init(_ backend: StoreBackend = .sqlite) {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("ct-test-\(UUID().uuidString)")
        try! FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        self.backend = backend
        postgresql = backend == .postgresql ? TestDatabase.create() : nil
    }

    var storePath: String { url.appendingPathComponent("store.sqlite").path }
    func cleanup() {
        try? FileManager.default.removeItem(at: url)
    }
}

/// The two stores the rules run on (docs/protocol.md §11): the SQLite file,
/// and a PostgreSQL database when the tests have a server
/// (`COFFEE_TRACKER_TEST_POSTGRES`, a conninfo without a dbname; `make test`
/// starts one and sets it).
enum StoreBackend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgresql

    static var available: [StoreBackend] { TestDatabase.server == nil ? [.sqlite] : [.sqlite, .postgresql] }
    var testDescription: String { rawValue }
}

/// Databases of their own for tests, on the server `make test` started.
enum TestDatabase {
    static var server: String? { ProcessInfo.processInfo.environment["COFFEE_TRACKER_TEST_POSTGRES"] }

    /// A new empty database; its conninfo.
    static func create() -> String {
        let name = "ct_\(UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased())"
        let admin = try! Connection(conninfo: server! + " dbname=postgres")
        try! admin.execute("CREATE DATABASE \(name)")
        return server! + " dbname=\(name)"
    }
}

let t0 = Date(timeIntervalSince1970: 1_796_000_000)  // 2026-11-29T...

func drink(_ uuid: UUID = UUID(), mg: Double = 96, at offset: TimeInterval = 0, version: Int64 = 1) -> Drink {
    Drink(uuid: uuid, mgCaffeine: mg, date: t0 + offset, version: version, source: "test")
}

func openStore(_ dir: TemporaryDirectory, clock: any WallClock = ManualClock(t0)) throws -> HealthStore {
    var configuration = HealthStore.Configuration(path: dir.storePath, tombstoneRetention: 30 * 86_400, clock: clock)
    configuration.postgresql = dir.postgresql
    return try HealthStore(configuration: configuration, logger: Logger(label: "test"))
}

/// Every commit a store announces through `observeCommits`, in order.
final class CommitRecorder: Sendable {
    private let recorded = Mutex<[CommittedBatch]>([])

    init(_ store: HealthStore) async {
        await store.observeCommits { batch in self.recorded.withLock { $0.append(batch) } }
    }

    var batches: [CommittedBatch] { recorded.withLock { $0 } }
}
