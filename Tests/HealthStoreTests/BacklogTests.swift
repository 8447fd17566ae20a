import CoffeeDomain
import Foundation
import Synchronization
import Testing

@testable import HealthStore

@Suite("Back-pressure: the backlog of submitted changes", .timeLimit(.minutes(2)))
struct BacklogTests {
    /// A producer's thread sleeps while the store is behind and is woken by
    /// the commit that catches up, without polling; a wait that runs out
    /// says so.
    @Test func aWaitEndsWithTheCommitThatCatchesUp() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let store = try openStore(dir)
        // Hold the store's thread inside a streaming commit until `release`.
        let entered = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let holding = Task {
            try await store.applyStream {
                entered.signal()
                release.wait()
                return nil
            }
        }
        await Task.detached { entered.wait() }.value

        let committed = Atomic<Int>(0)
        store.submissions.submit(WriteBatch(drinks: (0..<10).map { drink(at: Double($0)) })) { result in
            if case .success(let r) = result { committed.store(r.added, ordering: .sequentiallyConsistent) }
        }
        #expect(store.submissions.backlog == 10)
        #expect(store.submissions.waitForBacklog(below: 5, timeout: .milliseconds(20)) == false)
        #expect(store.submissions.waitForBacklog(below: 11, timeout: .milliseconds(20)))

        // A waiter on a thread of its own, then the store let go.
        let started = Date()
        let caughtUp = await withCheckedContinuation { (done: CheckedContinuation<Bool, Never>) in
            Thread { done.resume(returning: store.submissions.waitForBacklog(below: 5, timeout: .seconds(20))) }.start()
            release.signal()
        }
        #expect(caughtUp)
        // Woken by the commit, not by the end of its 20 s (a missed wake-up would take all of them).
        #expect(Date().timeIntervalSince(started) < 10)
        #expect(store.submissions.backlog == 0)
        #expect(committed.load(ordering: .sequentiallyConsistent) == 10)
        _ = try await holding.value
        await store.close()
    }

    /// A batch refused by a closed store leaves the backlog too.
    @Test func aRefusedBatchLeavesTheBacklog() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let store = try openStore(dir)
        await store.close()
        let failed = await withCheckedContinuation { (done: CheckedContinuation<Bool, Never>) in
            store.submissions.submit(WriteBatch(drinks: [drink()])) { result in
                if case .failure = result { done.resume(returning: true) } else { done.resume(returning: false) }
            }
        }
        #expect(failed)
        #expect(store.submissions.backlog == 0)
    }
}
