import CoffeeDomain
import Foundation
import Synchronization
import Testing

@_spi(Testing) @testable import HealthStore

/// The store's thread and the threads that borrow it: `submit` without a
/// Task, and the leader of a group commit.
@Suite("Store leaders and submissions", .timeLimit(.minutes(2)))
struct StoreLeaderTests {
    /// `submit` hands its batch to the store's thread without a Task; the
    /// completion still runs once the commit is durable.
    @Test func submittedBatchCommitsWithoutClose() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let store = try openStore(dir)
        let result = await withCheckedContinuation { (done: CheckedContinuation<Int, Never>) in
            store.submissions.submit(WriteBatch(drinks: [drink(), drink()])) {
                done.resume(returning: (try? $0.get())?.added ?? -1)
            }
        }
        #expect(result == 2)
        #expect(await store.anchor == 2)
        await store.close()
    }

    /// The leader of a group commit: staged batches commit on the caller's
    /// thread when the store is idle, completions and observers run there,
    /// and nothing reaches the store's thread.
    @Test func stagedBatchesCommitOnTheCallersThreadWhenTheStoreIsIdle() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let store = try openStore(dir)
        let observedOn = Mutex<[UInt]>([])
        await store.observeCommits { _ in observedOn.withLock { $0.append(UInt(pthread_self())) } }
        let (caller, completedOn, added) = await withCheckedContinuation {
            (done: CheckedContinuation<(UInt, UInt, Int), Never>) in
            Thread {
                let me = UInt(pthread_self())
                let completion = Mutex<(UInt, Int)>((0, 0))
                store.submissions.stage(WriteBatch(drinks: [drink()])) { r in
                    completion.withLock { $0 = (UInt(pthread_self()), (try? r.get())?.added ?? -1) }
                }
                store.submissions.stage(WriteBatch(drinks: [drink()])) { r in
                    completion.withLock { $0.1 += (try? r.get())?.added ?? -1 }
                }
                store.submissions.commitStaged(here: true)
                // Durable and observed before commitStaged returned.
                let (on, added) = completion.withLock { $0 }
                done.resume(returning: (me, on, added))
            }.start()
        }
        #expect(completedOn == caller)
        #expect(added == 2)
        #expect(observedOn.withLock { $0 } == [caller])  // one commit for both batches
        #expect(await store.anchor == 2)
        await store.close()
    }

    /// A store busy with a commit is not borrowed: what is staged meanwhile
    /// commits on the store's thread after it, in order.
    @Test func stagedBatchesGoToTheStoresThreadWhileACommitRuns() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let store = try openStore(dir)
        let held = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let once = Atomic<Bool>(false)
        await store.setCommitHook {
            if once.exchange(true, ordering: .relaxed) { return true }  // only the first commit is held
            held.signal()
            release.wait()
            return true
        }
        let first = drink()
        let second = drink()
        let firstDone = Task { try await store.save([first]) }
        held.wait()  // the first commit is in progress on the store's thread
        let staged = await withCheckedContinuation { (done: CheckedContinuation<UInt, Never>) in
            Thread {
                store.submissions.stage(WriteBatch(drinks: [second])) { _ in }
                store.submissions.commitStaged(here: true)  // must not wait for, or overtake, the held commit
                done.resume(returning: UInt(pthread_self()))
            }.start()
        }
        #expect(staged != 0)  // commitStaged returned while the first commit was held
        release.signal()
        #expect(try await firstDone.value.anchor == 1)
        await store.commitPending()
        let changes = try await store.changes(since: 0, limit: 10)
        #expect(changes.added.map(\.uuid) == [first.uuid, second.uuid])
        await store.close()
    }
}
