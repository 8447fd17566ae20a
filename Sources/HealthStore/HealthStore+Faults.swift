import Foundation
import PostgreSQL
import SQLite

/// Storage faults (disk full, I/O error, read-only file system) as a state
/// the store is in, not an event it logs (docs/protocol.md §1).
///
/// Entering it, the store keeps the bus's batches (held, in order, at the
/// front of the queue) and tells every other writer `unavailable` at once.
/// It tries to write again every `Configuration.faultRetryInterval`: the
/// held batches first, or, with none, an empty write that needs the same
/// space. The first commit that succeeds ends the fault; then the rest of
/// the queue commits and whoever waits for a writable store (the inbox) goes on.
extension HealthStore {
    /// Whether the store is in a storage fault; cheap, from any thread (the
    /// bus stops reading while it is, so messages wait in ZeroMQ's queue).
    public nonisolated var isFaulted: Bool { faulted.load(ordering: .acquiring) }

    /// What the fault is ("disk is full", say), or nil while the store
    /// writes; from any thread, as the writer's actions last set it.
    public nonisolated var faultDescription: String? { figures.fault.withLock { $0 } }

    /// Returns once the store can write (at once when it can now).
    public func waitUntilWritable() async {
        await withCheckedContinuation { continuation in
            if case .resume(let waiter) = writer.awaitWritable(continuation) { waiter.resume() }
        }
    }

    /// The fault's description when `error` is a storage fault, else nil.
    static func storageFault(_ error: any Error) -> String? {
        if let error = error as? SQLiteError, error.isStorageFault { return error.message }
        if let error = error as? PostgreSQLError, error.isUnavailable {
            return "the database is unreachable: \(error.message)"
        }
        return nil
    }

    /// A commit of `entries` (none for a stream, whose caller is told by
    /// the throw) met a storage fault: the writer holds or refuses them, and
    /// a fault that begins now starts the retries.
    func storageFailed(_ entries: [Entry], _ reason: String) {
        settle(writer.storageFailed(entries, reason: reason), reason)
    }

    /// Carries out what a storage fault did: the refused are told; a fault
    /// that began now is mirrored, logged, and retried.
    func settle(_ action: Writer.FaultAction, _ reason: String) {
        for entry in action.refused { finish(entry.waiter, .failure(StoreError.unavailable(reason))) }
        figures.fault.withLock { [fault = writer.fault] in $0 = fault }
        guard action.began else { return }
        faulted.store(true, ordering: .releasing)
        logger.error(
            "the store cannot write; holding the bus's input and answering writes unavailable until it can",
            metadata: ["fault": "\(reason)", "path": "\(configuration.path)"])
        faultRetry = Task { await self.retryWhileFaulted() }
    }

    /// The writer left its fault: whoever waits for a writable store goes
    /// on, after what is queued (the held batches first) commits.
    func leftFault(_ reason: String, held: Int, waiters: [CheckedContinuation<Void, Never>]) {
        faulted.store(false, ordering: .releasing)
        figures.fault.withLock { [fault = writer.fault] in $0 = fault }
        faultRetry = nil  // its next tick finds no fault (`RetryAction.stop`) and ends
        logger.notice("the store writes again", metadata: ["was": "\(reason)", "held": "\(held)"])
        commitPending()
        for waiter in waiters { waiter.resume() }
        if statements.dialect.isShared { scheduleCatchUp() }  // what others committed meanwhile
    }

    /// Tries to write every `faultRetryInterval` until a write succeeds, or
    /// the store closes (which cancels it).
    private func retryWhileFaulted() async {
        var interval = configuration.faultRetryInterval
        while !Task.isCancelled {
            try? await configuration.timerClock.sleep(for: interval)
            guard !Task.isCancelled, isOpen else { return }
            // A database away is tried again less and less often, up to 8
            // intervals apart; a disk is local, and tried every interval.
            if statements.dialect.isShared { interval = min(interval * 2, configuration.faultRetryInterval * 8) }
            takeSubmitted()
            switch writer.retry() {
            case .stop:
                return
            case .commit(let entries):
                commitEntries(entries)  // ends the fault when it commits
            case .probe:
                do {
                    // An empty write: it appends to the WAL as a commit does
                    // (a shared store's sets the counter row to what it holds).
                    try statements.transaction {
                        try statements.setMeta("anchor", statements.lockAnchor() ?? currentAnchor)
                    }
                    if case .leftFault(let reason, let held, let waiters) = writer.committed(wroteSomething: true) {
                        leftFault(reason, held: held, waiters: waiters)
                    }
                } catch {
                    if Self.storageFault(error) == nil {
                        logger.error("the store's probe write failed", metadata: ["error": "\(error)"])
                    }
                }
            }
        }
    }

    /// A close's drain: everything handed over commits, the batches held
    /// through a fault included (the storage may be back); what still cannot
    /// be written is failed, never left without an answer.
    func drainAndClose() {
        takeSubmitted()
        if writer.startDraining() == .cancelRetry { faultRetry?.cancel() }
        faultRetry = nil
        while let entries = writer.flush() { commitEntries(entries) }
        let closing = writer.close()
        let left = closing.left
        if !left.isEmpty {
            logger.error(
                "closing with batches the store could not write",
                metadata: ["batches": "\(left.count)", "fault": "\(closing.fault ?? "none")"])
        }
        let error = closing.fault.map { StoreError.unavailable($0) } ?? .closed
        for entry in left { finish(entry.waiter, .failure(error)) }
        for waiter in closing.waiters { waiter.resume() }
    }
}
