/// What `WriterStateMachine`'s events take and return: batches, and the
/// actions the store carries out (`HealthStore+Writing.swift`, `+Faults.swift`).
extension WriterStateMachine {
    /// A batch's size in changes, whether it is held through a storage
    /// fault, and whoever waits for its commit.
    struct Entry {
        var changes: Int
        /// Held and retried through a storage fault (the bus, which has
        /// already taken the batch and has no one to tell), rather than failed
        /// at once (a caller who can be told, and retry).
        var holdOnFault: Bool
        var waiter: Waiter
    }

    /// The state without what it holds: for status and tests, never for deciding.
    enum Phase: Equatable {
        case writing
        case faulted(reason: String)
        case draining(failed: String?)
        case closed
    }

    /// Why a batch is refused.
    enum Refusal: Equatable {
        case closed
        case unavailable(String)
    }

    enum SubmitAction: Equatable {
        /// No commit was scheduled: schedule one, after the jobs already
        /// queued on the store's thread, so that what arrives meanwhile joins it.
        case scheduleCommit
        /// A scheduled commit, the leader, the retry or the drain will take it.
        case none
        /// Tell the waiter now; the batch was not queued.
        case refuse(Refusal)
    }

    enum NextCommit {
        /// Commit these in one transaction; with `scheduleAnother`, schedule
        /// a commit for what is left.
        case commit([Entry], scheduleAnother: Bool)
        case none
    }

    enum LeadAction: Equatable {
        /// Lead: queue what producers handed over, commit once (`flush`), then `endLeading`.
        case lead
        /// The store is closing or closed: nothing to lead.
        case none
    }

    enum HandOver: Equatable {
        /// Batches are left and no commit is scheduled for them: schedule one.
        case scheduleCommit
        case none
    }

    enum CommittedAction {
        /// The commit ended a storage fault (mirror it, stop the retry task):
        /// commit what is queued (`held` batches), then resume `waiters`.
        case leftFault(was: String, held: Int, waiters: [Recovery])
        case none
    }

    /// What a storage fault did to the batches of the failed commit and to
    /// those queued: `refused` are to be told now; the held ones wait.
    struct FaultAction {
        var refused: [Entry]
        /// The fault began now: mirror it, log it, start the retry task.
        var began: Bool
    }

    enum FailureAction {
        /// One batch alone failed: its waiter gets the error.
        case fail(Entry)
        /// A shared transaction failed: commit each batch alone (`commitAlone`),
        /// so that one bad batch cannot fail the others queued with it.
        case retryEachAlone([Entry])
    }

    enum AloneAction {
        /// Commit the first of the batches alone.
        case commit(Entry)
        /// The storage failed meanwhile: the batches were settled as by a
        /// storage fault (the held ones back at the front, in order).
        case settled(FaultAction, reason: String)
    }

    enum RetryAction {
        /// Commit the held batches; success ends the fault.
        case commit([Entry])
        /// Nothing is held: an empty write decides whether the storage is back.
        case probe
        /// Not in a fault: the retry task ends.
        case stop
    }

    enum WaitAction {
        /// The store writes (or is closing): go on at once.
        case resume(Recovery)
        /// Held until the fault ends (`CommittedAction.leftFault`) or a close.
        case wait
    }

    enum DrainAction: Equatable {
        /// The fault's retry task is no longer wanted: cancel it.
        case cancelRetry
        case none
    }

    struct CloseAction {
        /// Batches that could not be written: fail them, with `fault` if there was one.
        var left: [Entry]
        var fault: String?
        /// Whoever still waits for a writable store: resume them.
        var waiters: [Recovery]
    }

    // MARK: - What needs none of the state

    /// What the fault is, or nil while the store writes.
    var fault: String? {
        switch phase {
        case .faulted(let reason): reason
        case .draining(let failed): failed
        case .writing, .closed: nil
        }
    }

    var isEmpty: Bool { pending.isEmpty }

    /// What to do about a commit of `entries` that failed for any reason
    /// but the storage (a constraint, say).
    func failed(_ entries: [Entry]) -> FailureAction {
        entries.count == 1 ? .fail(entries[0]) : .retryEachAlone(entries)
    }

    /// Every pending batch, or as many as fit in `changeLimit` changes (at least one).
    func take(from pending: inout [Entry]) -> [Entry] {
        var count = 0
        var changes = 0
        while count < pending.count, count == 0 || changes + pending[count].changes <= changeLimit {
            changes += pending[count].changes
            count += 1
        }
        if count == pending.count {
            // All of it (at a low rate, the one batch): the array itself, where
            // a copy of its prefix and a shift of the rest were two allocations.
            defer { pending = [] }
            return pending
        }
        let entries = Array(pending.prefix(count))
        pending.removeFirst(count)
        return entries
    }

}
