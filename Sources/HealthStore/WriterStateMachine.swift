/// The store's writer as a pure state machine: what is queued, what the
/// next commit takes, who commits it, and what a storage fault, a drain or
/// a close does to the batches waiting. No SQLite, no threads, no clock:
/// each event returns an action and `HealthStore` carries it out on its
/// thread (the shape of swift-async-algorithms' `BoundedBufferStateMachine`).
///
/// Batches that queue while a commit runs go into the next single
/// transaction, so one fsync covers many callers; but a commit takes at most
/// `changeLimit` changes (and always at least one batch), so that each
/// commit is announced with its changes rather than read back in pages.
///
/// The states:
/// - `writing`: batches queue; a commit is scheduled on the store's thread
///   for them, or a producer's thread commits them as the leader.
/// - `faulted`: the storage cannot be written (disk full, I/O error). The
///   batches that hold on a fault (the bus's) wait at the front, in order;
///   every other writer is failed at once. Only `retry` commits.
/// - `draining`: a close commits what is queued, the held batches included,
///   until it is empty or the storage fails again.
/// - `closed`: every batch is refused; what was left was handed back by `close`.
struct WriterStateMachine<Waiter> {
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

    enum State: Equatable {
        case writing
        case faulted(reason: String)
        /// `failed` once the storage failed during the drain: nothing more is tried.
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

    enum HandOver: Equatable {
        /// Batches are left and no commit is scheduled for them: schedule one.
        case scheduleCommit
        case none
    }

    enum CommittedAction: Equatable {
        /// The commit ended a storage fault: tell whoever waits for a
        /// writable store, and commit what is queued.
        case leftFault(was: String)
        case none
    }

    /// What a storage fault did to the batches of the failed commit and to
    /// those queued: `refused` are to be told now; the held ones wait.
    struct FaultAction {
        var refused: [Entry]
        /// The fault began now: start retrying.
        var startRetrying: Bool
    }

    enum FailureAction {
        /// One batch alone failed: its waiter gets the error.
        case fail(Entry)
        /// A shared transaction failed: commit each batch alone, so that one
        /// bad batch cannot fail the others queued with it.
        case retryEachAlone([Entry])
    }

    enum RetryAction {
        /// Commit the held batches; success ends the fault.
        case commit([Entry])
        /// Nothing is held: an empty write decides whether the storage is back.
        case probe
        /// Not in a fault: stop retrying.
        case none
    }

    let changeLimit: Int
    private(set) var state: State = .writing
    private(set) var pending: [Entry] = []
    private(set) var commitScheduled = false
    /// A producer's thread is committing as the leader: it takes what is
    /// queued, so nothing needs scheduling until it hands over.
    private(set) var leading = false

    init(changeLimit: Int) { self.changeLimit = changeLimit }

    var isEmpty: Bool { pending.isEmpty }

    var fault: String? {
        switch state {
        case .faulted(let reason): reason
        case .draining(let failed): failed
        case .writing, .closed: nil
        }
    }

    mutating func submit(_ entry: Entry) -> SubmitAction {
        switch state {
        case .closed:
            return .refuse(.closed)
        case .faulted(let reason):
            guard entry.holdOnFault else { return .refuse(.unavailable(reason)) }
            pending.append(entry)
            return .none
        case .draining:
            pending.append(entry)
            return .none
        case .writing:
            pending.append(entry)
            if commitScheduled || leading { return .none }
            commitScheduled = true
            return .scheduleCommit
        }
    }

    /// Takes the batches for one commit: every pending batch, or as many as
    /// fit in `changeLimit` changes (at least one). Nothing in a fault (only
    /// `retry` commits then), after a drain met a fault, or once closed.
    mutating func nextCommit() -> NextCommit {
        commitScheduled = false
        switch state {
        case .writing, .draining(failed: nil): break
        case .faulted, .draining, .closed: return .none
        }
        guard !pending.isEmpty else { return .none }
        let entries = takeForCommit()
        if case .writing = state, !pending.isEmpty, !leading {
            commitScheduled = true
            return .commit(entries, scheduleAnother: true)
        }
        return .commit(entries, scheduleAnother: false)
    }

    private mutating func takeForCommit() -> [Entry] {
        var take = 0
        var changes = 0
        while take < pending.count, take == 0 || changes + pending[take].changes <= changeLimit {
            changes += pending[take].changes
            take += 1
        }
        let entries = Array(pending.prefix(take))
        pending.removeFirst(take)
        return entries
    }

    /// A producer's thread borrows the store's isolation to commit.
    mutating func beginLeading() {
        leading = true
    }

    /// The leader is done after one commit: what is left goes to the
    /// store's thread, so a producer never commits a backlog it did not bring.
    mutating func endLeading() -> HandOver {
        leading = false
        guard case .writing = state, !pending.isEmpty, !commitScheduled else { return .none }
        commitScheduled = true
        return .scheduleCommit
    }

    /// A commit is durable. One that wrote something while in a fault ends it.
    mutating func committed(wroteSomething: Bool) -> CommittedAction {
        guard case .faulted(let reason) = state, wroteSomething else { return .none }
        state = .writing
        return .leftFault(was: reason)
    }

    /// A commit of `entries` met a storage fault: the held ones go back to
    /// the front, in order; the others, and every other writer queued, are refused.
    mutating func storageFailed(_ entries: [Entry], reason: String) -> FaultAction {
        pending.insert(contentsOf: entries, at: 0)
        switch state {
        case .writing, .faulted:
            let began = state == .writing
            state = .faulted(reason: reason)
            let refused = pending.filter { !$0.holdOnFault }
            pending.removeAll { !$0.holdOnFault }
            return FaultAction(refused: refused, startRetrying: began)
        case .draining:
            state = .draining(failed: reason)
            return FaultAction(refused: [], startRetrying: false)
        case .closed:
            let refused = pending
            pending = []
            return FaultAction(refused: refused, startRetrying: false)
        }
    }

    /// What to do about a commit of `entries` that failed for any reason
    /// but the storage (a constraint, say).
    func failed(_ entries: [Entry]) -> FailureAction {
        entries.count == 1 ? .fail(entries[0]) : .retryEachAlone(entries)
    }

    /// The retry timer fired.
    mutating func retry() -> RetryAction {
        guard case .faulted = state else { return .none }
        return pending.isEmpty ? .probe : .commit(takeForCommit())
    }

    /// A close begins: what is queued commits, the held batches of a fault
    /// included (the storage may be back), until the storage fails again.
    mutating func startDraining() {
        switch state {
        case .writing, .faulted: state = .draining(failed: nil)
        case .draining, .closed: break
        }
    }

    /// Closes: what is left (held through a fault that did not end) is
    /// handed back to be failed, with the fault if there was one.
    mutating func close() -> (left: [Entry], fault: String?) {
        let fault = self.fault
        let left = pending
        pending = []
        commitScheduled = false
        state = .closed
        return (left, fault)
    }
}
