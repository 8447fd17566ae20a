/// The store's writer as a pure state machine: what is queued, what the
/// next commit takes, who commits it, and what a storage fault, a drain or
/// a close does to the batches waiting. No SQLite, no threads, no clock:
/// each event returns an action and `HealthStore` carries it out on its
/// thread, never reading the state to decide (the shape of
/// swift-async-algorithms' `BoundedBufferStateMachine`: all the state inside
/// the cases, and an event that cannot happen in a state traps in debug builds).
///
/// Batches that queue while a commit runs go into the next single
/// transaction, so one fsync covers many callers; but a commit takes at most
/// `changeLimit` changes (and always at least one batch), so that each
/// commit is announced with its changes rather than read back in pages.
///
/// What stays outside, on purpose: the hand-over from producers' threads
/// (`HealthStore.submitted`, a mutex any thread may take, emptied into
/// `submit` on the store's thread), the backlog count that producers sleep
/// on, the fault mirrored into an atomic for other threads (set only as
/// `FaultAction.began` and `CommittedAction.leftFault` say), and the retry
/// task itself (started and cancelled only as the actions say).
struct WriterStateMachine<Waiter, Recovery> {
    /// Where the machine is, with everything it holds there.
    private enum State {
        /// Batches queue; `commitScheduled`: a job on the store's thread will
        /// take them; `leading`: a producer's thread is committing as the leader.
        case writing(pending: [Entry], commitScheduled: Bool, leading: Bool)
        /// The storage cannot be written (disk full, I/O error). `held`: the
        /// batches held through it, in order; `waiters`: whoever waits for a
        /// writable store; `retrying`: the retry timer runs (until the fault ends or a close).
        case faulted(reason: String, held: [Entry], waiters: [Recovery], leading: Bool, retrying: Bool)
        /// A close commits what is queued, the held batches included, until
        /// it is empty or the storage fails again (`failed`).
        case draining(pending: [Entry], failed: String?, waiters: [Recovery])
        /// Every batch is refused; what was left was handed back by `close`.
        case closed
        /// Only while an event rewrites the state (so that arrays are not copied).
        case modifying
    }

    let changeLimit: Int
    private var state: State = .writing(pending: [], commitScheduled: false, leading: false)

    init(changeLimit: Int) { self.changeLimit = changeLimit }

    private static func reentered() -> Never { preconditionFailure("WriterStateMachine: an event while modifying") }

    // MARK: - Reading, for status and tests

    var phase: Phase {
        switch state {
        case .writing: .writing
        case .faulted(let reason, _, _, _, _): .faulted(reason: reason)
        case .draining(_, let failed, _): .draining(failed: failed)
        case .closed, .modifying: .closed
        }
    }

    /// The batches waiting, in order.
    var pending: [Entry] {
        switch state {
        case .writing(let pending, _, _), .draining(let pending, _, _): pending
        case .faulted(_, let held, _, _, _): held
        case .closed, .modifying: []
        }
    }

    var isLeading: Bool {
        switch state {
        case .writing(_, _, let leading), .faulted(_, _, _, let leading, _): leading
        default: false
        }
    }
    var isRetrying: Bool {
        if case .faulted(_, _, _, _, let retrying) = state { return retrying }
        return false
    }
    var recoveryWaiters: Int {
        switch state {
        case .faulted(_, _, let waiters, _, _), .draining(_, _, let waiters): waiters.count
        default: 0
        }
    }

    // MARK: - Events

    mutating func submit(_ entry: Entry) -> SubmitAction {
        switch state {
        case .closed:
            return .refuse(.closed)
        case .faulted(let reason, var held, let waiters, let leading, let retrying):
            guard entry.holdOnFault else { return .refuse(.unavailable(reason)) }
            state = .modifying
            held.append(entry)
            state = .faulted(reason: reason, held: held, waiters: waiters, leading: leading, retrying: retrying)
            return .none
        case .draining(var pending, let failed, let waiters):
            state = .modifying
            pending.append(entry)
            state = .draining(pending: pending, failed: failed, waiters: waiters)
            return .none
        case .writing(var pending, let scheduled, let leading):
            state = .modifying
            pending.append(entry)
            let schedule = !scheduled && !leading
            state = .writing(pending: pending, commitScheduled: scheduled || schedule, leading: leading)
            return schedule ? .scheduleCommit : .none
        case .modifying: Self.reentered()
        }
    }

    /// The commit job scheduled on the store's thread runs: it takes every
    /// pending batch, or as many as fit in `changeLimit` changes (at least
    /// one), and schedules another for the rest unless a leader takes it.
    /// Nothing in a fault (only `retry` commits then), after a drain met a
    /// fault, or once closed (a job scheduled before then finds nothing).
    mutating func scheduledCommitRuns() -> NextCommit {
        switch state {
        case .writing(var pending, _, let leading):
            state = .modifying
            let entries = take(from: &pending)
            let another = !pending.isEmpty && !leading
            state = .writing(pending: pending, commitScheduled: another, leading: leading)
            return entries.isEmpty ? .none : .commit(entries, scheduleAnother: another)
        case .draining, .faulted, .closed:
            return flush().map { .commit($0, scheduleAnother: false) } ?? .none
        case .modifying: Self.reentered()
        }
    }

    /// The next commit of a flush (`commitPending`, the leader's one
    /// commit, a drain): what `scheduledCommitRuns` would take, leaving the
    /// scheduled job as it is. Nil when nothing is to be committed now.
    mutating func flush() -> [Entry]? {
        switch state {
        case .writing(var pending, let scheduled, let leading):
            guard !pending.isEmpty else { return nil }
            state = .modifying
            let entries = take(from: &pending)
            state = .writing(pending: pending, commitScheduled: scheduled, leading: leading)
            return entries
        case .draining(var pending, nil, let waiters):
            guard !pending.isEmpty else { return nil }
            state = .modifying
            let entries = take(from: &pending)
            state = .draining(pending: pending, failed: nil, waiters: waiters)
            return entries
        case .draining, .faulted, .closed:
            return nil
        case .modifying: Self.reentered()
        }
    }

    /// A producer's thread borrows the store's isolation to commit: while
    /// it leads, batches that arrive schedule nothing (it takes them).
    mutating func beginLeading() -> LeadAction {
        switch state {
        case .writing(let pending, let scheduled, let leading):
            precondition(!leading, "WriterStateMachine: a second leader")
            state = .writing(pending: pending, commitScheduled: scheduled, leading: true)
            return .lead
        case .faulted(let reason, let held, let waiters, let leading, let retrying):
            precondition(!leading, "WriterStateMachine: a second leader")
            state = .faulted(reason: reason, held: held, waiters: waiters, leading: true, retrying: retrying)
            return .lead  // what it hands over is held or refused; nothing commits
        case .draining, .closed:
            return .none
        case .modifying: Self.reentered()
        }
    }

    /// The leader is done after one commit: what is left goes to the
    /// store's thread, so a producer never commits a backlog it did not bring.
    mutating func endLeading() -> HandOver {
        switch state {
        case .writing(let pending, let scheduled, let leading):
            precondition(leading, "WriterStateMachine: endLeading without a leader")
            let schedule = !pending.isEmpty && !scheduled
            state = .writing(pending: pending, commitScheduled: scheduled || schedule, leading: false)
            return schedule ? .scheduleCommit : .none
        case .faulted(let reason, let held, let waiters, let leading, let retrying):
            precondition(leading, "WriterStateMachine: endLeading without a leader")
            state = .faulted(reason: reason, held: held, waiters: waiters, leading: false, retrying: retrying)
            return .none
        case .draining, .closed, .modifying:
            preconditionFailure("WriterStateMachine: endLeading after a close began")
        }
    }

    /// A commit is durable. One that wrote something while in a fault ends it.
    mutating func committed(wroteSomething: Bool) -> CommittedAction {
        guard case .faulted(let reason, let held, let waiters, let leading, _) = state, wroteSomething else { return .none }
        state = .writing(pending: held, commitScheduled: false, leading: leading)
        return .leftFault(was: reason, held: held.count, waiters: waiters)
    }

    /// A commit of `entries` met a storage fault: the held ones go back to
    /// the front, in order; the others, and every other writer queued, are refused.
    mutating func storageFailed(_ entries: [Entry], reason: String) -> FaultAction {
        switch state {
        case .writing(let pending, _, let leading):
            state = .modifying
            let all = entries + pending
            state = .faulted(
                reason: reason, held: all.filter(\.holdOnFault), waiters: [], leading: leading, retrying: true)
            return FaultAction(refused: all.filter { !$0.holdOnFault }, began: true)
        case .faulted(_, let held, let waiters, let leading, let retrying):
            state = .modifying
            let all = entries + held
            state = .faulted(
                reason: reason, held: all.filter(\.holdOnFault), waiters: waiters, leading: leading, retrying: retrying)
            return FaultAction(refused: all.filter { !$0.holdOnFault }, began: false)
        case .draining(let pending, _, let waiters):
            state = .modifying
            state = .draining(pending: entries + pending, failed: reason, waiters: waiters)
            return FaultAction(refused: [], began: false)
        case .closed, .modifying:
            preconditionFailure("WriterStateMachine: a commit after the close")
        }
    }

    /// The next of `entries` (the rest of a shared commit that failed,
    /// committed each alone) is due: commit it, unless the storage failed
    /// meanwhile; then all of them are settled as by that fault.
    mutating func commitAlone(_ entries: ArraySlice<Entry>) -> AloneAction {
        guard let first = entries.first else { preconditionFailure("WriterStateMachine: nothing to commit alone") }
        guard let reason = fault else { return .commit(first) }
        return .settled(storageFailed(Array(entries), reason: reason), reason: reason)
    }

    /// The retry timer fired.
    mutating func retry() -> RetryAction {
        guard case .faulted(let reason, var held, let waiters, let leading, _) = state else { return .stop }
        if held.isEmpty { return .probe }
        state = .modifying
        let entries = take(from: &held)
        state = .faulted(reason: reason, held: held, waiters: waiters, leading: leading, retrying: true)
        return .commit(entries)
    }

    /// Someone (the inbox) waits for a writable store.
    mutating func awaitWritable(_ waiter: Recovery) -> WaitAction {
        switch state {
        case .faulted(let reason, let held, var waiters, let leading, let retrying):
            state = .modifying
            waiters.append(waiter)
            state = .faulted(reason: reason, held: held, waiters: waiters, leading: leading, retrying: retrying)
            return .wait
        case .writing, .draining, .closed:
            return .resume(waiter)
        case .modifying: Self.reentered()
        }
    }

    /// Whether a commit outside the queue (a stream, a standby's copy) may
    /// run now: only while the store writes, after what is queued (`flush`).
    func admitsStream() -> Refusal? {
        switch state {
        case .writing: nil
        case .faulted(let reason, _, _, _, _): .unavailable(reason)
        case .draining, .closed, .modifying: .closed
        }
    }

    /// A close begins: what is queued commits (`flush`), the held batches
    /// of a fault included (the storage may be back), until the storage fails again.
    mutating func startDraining() -> DrainAction {
        switch state {
        case .writing(let pending, _, let leading):
            precondition(!leading, "WriterStateMachine: a close while a producer leads")
            state = .draining(pending: pending, failed: nil, waiters: [])
            return .none
        case .faulted(_, let held, let waiters, let leading, let retrying):
            precondition(!leading, "WriterStateMachine: a close while a producer leads")
            state = .draining(pending: held, failed: nil, waiters: waiters)
            return retrying ? .cancelRetry : .none
        case .draining, .closed:
            return .none
        case .modifying: Self.reentered()
        }
    }

    /// Closes: what is left (held through a fault that did not end) is
    /// handed back to be failed, with the fault if there was one.
    mutating func close() -> CloseAction {
        let action: CloseAction
        switch state {
        case .writing(let pending, _, _): action = CloseAction(left: pending, fault: nil, waiters: [])
        case .faulted(let reason, let held, let waiters, _, _):
            action = CloseAction(left: held, fault: reason, waiters: waiters)
        case .draining(let pending, let failed, let waiters):
            action = CloseAction(left: pending, fault: failed, waiters: waiters)
        case .closed: action = CloseAction(left: [], fault: nil, waiters: [])
        case .modifying: Self.reentered()
        }
        state = .closed
        return action
    }
}
