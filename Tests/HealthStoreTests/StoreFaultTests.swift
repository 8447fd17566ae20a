import CoffeeDomain
import CoffeeLogging
import CoffeeTestKit
import Foundation
import SQLite
import Synchronization
import Testing

@_spi(Testing) @testable import HealthStore

/// A disk that fills while the bus's batch is in its commit: the batch is
/// held, not dropped, and commits once the store can write (docs/protocol.md §1).
@Suite("Storage faults on the bus's paths", .timeLimit(.minutes(1)))
struct StoreFaultTests {
    func openFaultStore(_ dir: TemporaryDirectory) throws -> HealthStore {
        var configuration = HealthStore.Configuration(path: dir.storePath, clock: ManualClock(t0))
        configuration.faultRetryInterval = .milliseconds(20)
        return try HealthStore(configuration: configuration, logger: Logger(label: "test"))
    }

    /// What a bus batch's completion was told, once it is told.
    final class Outcome: Sendable {
        private let value = Mutex<Result<WriteResult, any Error>?>(nil)
        func set(_ result: Result<WriteResult, any Error>) { value.withLock { $0 = result } }
        var result: Result<WriteResult, any Error>? { value.withLock { $0 } }

        /// Waits, at most `seconds`, for the completion.
        func wait(seconds: Double = 10) async -> Result<WriteResult, any Error>? {
            let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
            while result == nil, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(5)) }
            return result
        }
    }

    func expectHeldThenStored(_ store: HealthStore, _ batch: Drink, _ outcome: Outcome, faultSeen: Bool) async throws {
        #expect(faultSeen, "the store never showed the fault")
        let told = await outcome.wait()
        #expect((try? told?.get())?.added == 1, "the held batch was not committed: \(String(describing: told))")
        let stored = try await store.changes(since: 0, limit: 10).added.map(\.uuid)
        #expect(stored == [batch.uuid])
        #expect(!store.isFaulted)
    }

    /// Polls `isFaulted`, which the failing commit sets, for at most a few seconds.
    func sawFault(_ store: HealthStore) async -> Bool {
        for _ in 0..<1000 {
            if store.isFaulted { return true }
            try? await Task.sleep(for: .milliseconds(2))
        }
        return false
    }

    @Test func aSubmittedBatchInACommitThatMeetsAFullDiskIsHeldAndCommittedLater() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let store = try openFaultStore(dir)
        await store.failNextCommitsAsDiskFull(3)  // the commit and two retries
        let d = drink()
        let outcome = Outcome()
        store.submissions.submit(WriteBatch(drinks: [d])) { outcome.set($0) }
        let faulted = await sawFault(store)
        #expect(outcome.result == nil, "the batch was answered while the disk was full")
        try await expectHeldThenStored(store, d, outcome, faultSeen: faulted)
        await store.close()
    }

    /// The leader path: the bus's own thread commits (the store idle), the
    /// disk is full right then, and the batch is still held.
    @Test func aStagedBatchCommittedByItsLeaderThatMeetsAFullDiskIsHeld() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let store = try openFaultStore(dir)
        await store.failNextCommitsAsDiskFull(3)
        let d = drink()
        let outcome = Outcome()
        let leaderSawFault = await withCheckedContinuation { (done: CheckedContinuation<Bool, Never>) in
            Thread {
                // The store's thread may still be finishing the call above
                // (busy: no leader then); it is idle well within this.
                Thread.sleep(forTimeInterval: 0.05)
                store.submissions.stage(WriteBatch(drinks: [d])) { outcome.set($0) }
                store.submissions.commitStaged(here: true)
                done.resume(returning: store.isFaulted)  // the leader's own commit met the full disk
            }.start()
        }
        #expect(leaderSawFault, "the leader did not commit on its own thread, or the commit did not fail")
        try await expectHeldThenStored(store, d, outcome, faultSeen: true)
        await store.close()
    }

    /// Two bus batches share a transaction that fails (not for want of
    /// space), so each is retried alone; the disk is full by then. Both are
    /// held and committed later, as any batch of the bus is: the one
    /// commit path classifies every failure alike.
    @Test func batchesRetriedAloneThatMeetAFullDiskAreHeld() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let store = try openFaultStore(dir)
        let first = Atomic<Bool>(true)
        await store.setCommitHook { !first.exchange(false, ordering: .relaxed) }  // the shared COMMIT fails
        await store.failNextCommitsAsDiskFull(3, after: 1)  // then the disk is full
        let (a, b) = (drink(), drink())
        let (outcomeA, outcomeB) = (Outcome(), Outcome())
        store.submissions.stage(WriteBatch(drinks: [a])) { outcomeA.set($0) }
        store.submissions.stage(WriteBatch(drinks: [b])) { outcomeB.set($0) }
        store.submissions.commitStaged(here: false)  // one commit on the store's thread, both batches in it
        let toldA = await outcomeA.wait()
        let toldB = await outcomeB.wait()
        #expect((try? toldA?.get())?.added == 1, "\(String(describing: toldA))")
        #expect((try? toldB?.get())?.added == 1, "\(String(describing: toldB))")
        let stored = Set(try await store.changes(since: 0, limit: 10).added.map(\.uuid))
        #expect(stored == [a.uuid, b.uuid])
        await store.close()
    }

    /// A writer that can be told (a query `add`) is told `unavailable` and nothing is stored.
    @Test func anAwaitedWriteInAFullDiskFailsAtOnce() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let store = try openFaultStore(dir)
        await store.failNextCommitsAsDiskFull(1_000_000)
        await #expect(throws: StoreError.self) { try await store.save([drink()]) }
        #expect(store.isFaulted)
        await store.setCommitHook(nil)
        await store.failNextCommitsAsDiskFull(0)
        await store.waitUntilWritable()
        #expect(try await store.changes(since: 0, limit: 10).added.isEmpty)
        await store.close()
    }
}
