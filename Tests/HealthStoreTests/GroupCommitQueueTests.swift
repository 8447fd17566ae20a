import Testing

@testable import HealthStore

@Suite("GroupCommitQueue: what each commit takes, without SQLite", .timeLimit(.minutes(2)))
struct GroupCommitQueueTests {
    @Test func theFirstBatchSchedulesACommitAndTheRestJoinIt() {
        var queue = GroupCommitQueue<String>(changeLimit: 100)
        #expect(queue.enqueue(changes: 1, waiter: "a") == .scheduleCommit)
        #expect(queue.enqueue(changes: 1, waiter: "b") == .none)
        #expect(queue.enqueue(changes: 1, waiter: "c") == .none)
        let commit = queue.nextCommit()
        #expect(commit.entries.map(\.waiter) == ["a", "b", "c"])
        #expect(!commit.scheduleAnother)
        #expect(queue.isEmpty)
        // After a commit, the next batch schedules the next one.
        #expect(queue.enqueue(changes: 1, waiter: "d") == .scheduleCommit)
    }

    @Test func aCommitStopsAtTheChangeLimitAndSchedulesAnotherForTheRest() {
        var queue = GroupCommitQueue<Int>(changeLimit: 10)
        for i in 0..<4 { _ = queue.enqueue(changes: 4, waiter: i) }
        let first = queue.nextCommit()
        #expect(first.entries.map(\.waiter) == [0, 1])  // 8 changes; a third batch would make 12
        #expect(first.scheduleAnother)
        #expect(queue.commitScheduled)
        // Batches arriving now join the scheduled commit rather than scheduling one.
        #expect(queue.enqueue(changes: 1, waiter: 4) == .none)
        let second = queue.nextCommit()
        #expect(second.entries.map(\.waiter) == [2, 3, 4])
        #expect(!second.scheduleAnother)
    }

    @Test func aBatchLargerThanTheLimitStillCommitsAlone() {
        var queue = GroupCommitQueue<Int>(changeLimit: 10)
        _ = queue.enqueue(changes: 50, waiter: 0)
        _ = queue.enqueue(changes: 1, waiter: 1)
        #expect(queue.nextCommit().entries.map(\.waiter) == [0])
        #expect(queue.nextCommit().entries.map(\.waiter) == [1])
    }

    @Test func anEmptyQueueCommitsNothing() {
        var queue = GroupCommitQueue<Int>(changeLimit: 10)
        let commit = queue.nextCommit()
        #expect(commit.entries.isEmpty && !commit.scheduleAnother)
    }

    @Test func aFailedSharedCommitRetriesEachBatchAloneAndALoneFailureFailsItsWaiter() {
        var queue = GroupCommitQueue<String>(changeLimit: 100)
        _ = queue.enqueue(changes: 1, waiter: "good")
        _ = queue.enqueue(changes: 1, waiter: "bad")
        let commit = queue.nextCommit()
        guard case .retryEachAlone(let entries) = queue.commitFailed(commit.entries) else {
            Issue.record("a shared commit's failure should retry each batch alone")
            return
        }
        #expect(entries.map(\.waiter) == ["good", "bad"])
        guard case .fail(let entry) = queue.commitFailed([entries[1]]) else {
            Issue.record("a lone batch's failure should fail its waiter")
            return
        }
        #expect(entry.waiter == "bad")
    }
}
