import CoffeeDomain
import CoffeeLogging
import Foundation
import Synchronization

@testable import HealthStore

/// A fresh folder under the system's temporary directory, removed by `cleanup()`.
struct TemporaryDirectory {
    let url: URL

    init() {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("ct-test-\(UUID().uuidString)")
        try! FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    var storePath: String { url.appendingPathComponent("store.sqlite").path }
    func cleanup() { try? FileManager.default.removeItem(at: url) }
}

let t0 = Date(timeIntervalSince1970: 1_796_000_000)  // 2026-11-29T...

func drink(_ uuid: UUID = UUID(), mg: Double = 96, at offset: TimeInterval = 0, version: Int64 = 1) -> Drink {
    Drink(uuid: uuid, mgCaffeine: mg, date: t0 + offset, version: version, source: "test")
}

func openStore(_ dir: TemporaryDirectory, clock: any WallClock = ManualClock(t0)) throws -> HealthStore {
    try HealthStore(
        configuration: .init(path: dir.storePath, tombstoneRetention: 30 * 86_400, clock: clock), logger: Logger(label: "test"))
}

/// Every commit a store announces through `observeCommits`, in order.
final class CommitRecorder: Sendable {
    private let recorded = Mutex<[CommittedBatch]>([])

    init(_ store: HealthStore) async {
        await store.observeCommits { batch in self.recorded.withLock { $0.append(batch) } }
    }

    var batches: [CommittedBatch] { recorded.withLock { $0 } }
}
