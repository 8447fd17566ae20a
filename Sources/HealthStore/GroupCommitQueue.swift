/// What the store's group commit decides, without SQLite or threads: what
/// is pending, what the next commit takes, and what becomes of a failed
/// commit's waiters. A pure state machine that returns actions (the shape
/// of swift-async-algorithms' `BoundedBufferStateMachine`); `HealthStore`
/// carries them out on its thread.
///
/// Batches that queue while a commit runs go into the next single
/// transaction, so one fsync covers many callers; but a commit takes at
/// most `changeLimit` changes (and always at least one batch), so that
/// each commit is announced with its changes rather than read back in pages.
struct GroupCommitQueue<Waiter> {
    /// A batch's size in changes and whoever waits for its commit.
    struct Entry {
        var changes: Int
        var waiter: Waiter
    }

    enum EnqueueAction: Equatable {
        /// No commit was scheduled: schedule one, after the jobs already
        /// queued on the store's thread, so that what arrives meanwhile joins it.
        case scheduleCommit
        /// A scheduled commit will take it.
        case none
    }

    /// What the next commit takes, and whether another must be scheduled
    /// for what is left.
    struct Commit {
        var entries: [Entry]
        var scheduleAnother: Bool
    }

    enum FailureAction {
        /// One batch alone failed: its waiter gets the error.
        case fail(Entry)
        /// A shared transaction failed: commit each batch alone, so that one
        /// bad batch cannot fail the others queued with it.
        case retryEachAlone([Entry])
    }

    let changeLimit: Int
    private(set) var pending: [Entry] = []
    private(set) var commitScheduled = false

    init(changeLimit: Int) { self.changeLimit = changeLimit }

    var isEmpty: Bool { pending.isEmpty }

    mutating func enqueue(changes: Int, waiter: Waiter) -> EnqueueAction {
        pending.append(Entry(changes: changes, waiter: waiter))
        if commitScheduled { return .none }
        commitScheduled = true
        return .scheduleCommit
    }

    /// Takes the batches for one commit: every pending batch, or as many as
    /// fit in `changeLimit` changes (at least one).
    mutating func nextCommit() -> Commit {
        commitScheduled = false
        var take = 0
        var changes = 0
        while take < pending.count, take == 0 || changes + pending[take].changes <= changeLimit {
            changes += pending[take].changes
            take += 1
        }
        let entries = Array(pending.prefix(take))
        pending.removeFirst(take)
        if !pending.isEmpty { commitScheduled = true }
        return Commit(entries: entries, scheduleAnother: commitScheduled)
    }

    /// Puts `entries` back at the front, in their order: batches held through
    /// a storage fault commit first, before anything queued after them.
    mutating func putBack(_ entries: [Entry]) {
        pending.insert(contentsOf: entries, at: 0)
    }

    /// What to do about a commit of `entries` that failed.
    func commitFailed(_ entries: [Entry]) -> FailureAction {
        entries.count == 1 ? .fail(entries[0]) : .retryEachAlone(entries)
    }
}
