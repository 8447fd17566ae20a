import Foundation
import SQLite

/// Storage faults (disk full, I/O error, read-only file system) as a state
/// the store is in, not an event it logs (PROTOCOL.md §1).
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

    /// What the fault is ("disk is full", say), or nil while the store writes.
    public var faultDescription: String? { fault }

    /// Returns once the store can write (at once when it can now).
    public func waitUntilWritable() async {
        guard fault != nil else { return }
        await withCheckedContinuation { recoveryWaiters.append($0) }
    }

    /// The fault's description when `error` is a storage fault, else nil.
    static func storageFault(_ error: any Error) -> String? {
        guard let error = error as? SQLiteError, error.isStorageFault else { return nil }
        return error.message
    }

    func enterFault(_ reason: String) {
        guard fault == nil else { return }
        fault = reason
        faulted.store(true, ordering: .releasing)
        logger.error(
            "the store cannot write; holding the bus's input and answering writes unavailable until it can",
            metadata: ["fault": "\(reason)", "path": "\(configuration.path)"])
        Task { await self.retryWhileFaulted() }
    }

    func leaveFault() {
        guard let reason = fault else { return }
        fault = nil
        faulted.store(false, ordering: .releasing)
        logger.notice("the store writes again", metadata: ["was": "\(reason)", "held": "\(queue.pending.count)"])
        if !queue.isEmpty { commitPending() }
        let waiters = recoveryWaiters
        recoveryWaiters = []
        for waiter in waiters { waiter.resume() }
    }

    /// Tries to write every `faultRetryInterval` until a write succeeds.
    private func retryWhileFaulted() async {
        while fault != nil, db != nil {
            try? await configuration.timerClock.sleep(for: configuration.faultRetryInterval)
            guard fault != nil, let db else { return }
            takeSubmitted()
            if !queue.isEmpty {
                commitNext()  // ends the fault when it commits
            } else {
                do {
                    // An empty write: it appends to the WAL as a commit does.
                    try db.transaction { try statements.setMeta("anchor", currentAnchor) }
                    leaveFault()
                } catch {
                    if Self.storageFault(error) == nil {
                        logger.error("the store's probe write failed", metadata: ["error": "\(error)"])
                    }
                }
            }
        }
    }
}
