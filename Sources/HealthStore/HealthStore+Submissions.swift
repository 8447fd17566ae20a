import CoffeeDomain
import Foundation

/// What producers on other threads hand the store without waiting (the
/// bus): `submit`, `stage` and `commitStaged(here:)`, which lets an idle
/// store's isolation to the producer's thread (the leader of a group
/// commit), and the backlog a producer waits on.
extension HealthStore {
    /// Queues `batch` without waiting; `completion` runs on the store's
    /// thread once the commit is durable (or failed). For producers such as
    /// the bus, which must not wait one commit per message.
    ///
    /// Batches submitted from one thread are committed in the order submitted.
    ///
    /// - Parameter holdOnFault: in a storage fault, hold the batch and retry
    ///   it until it commits (the default: the bus has taken it and has no
    ///   one to tell); false fails it at once with `StoreError.unavailable`.
    public nonisolated func submit(
        _ batch: WriteBatch, holdOnFault: Bool = true,
        completion: @escaping @Sendable (Result<WriteResult, any Error>) -> Void
    ) {
        if hand(batch, holdOnFault: holdOnFault, take: true, completion: completion) { scheduleSubmitted() }
    }

    /// Queues `batch` as `submit` does, but leaves its commit to the
    /// caller's next `commitStaged(here:)`, so that a producer hands over
    /// all it read in one wake-up and then decides who commits it.
    public nonisolated func stage(
        _ batch: WriteBatch, holdOnFault: Bool = true,
        completion: @escaping @Sendable (Result<WriteResult, any Error>) -> Void
    ) {
        _ = hand(batch, holdOnFault: holdOnFault, take: false, completion: completion)
    }

    /// Commits what was staged (`stage`) and not yet taken. With `here`,
    /// when the store is idle, the commit runs on the calling thread (the
    /// leader of a leader/follower group commit), and what arrives
    /// meanwhile joins the next one; the completions and commit observers
    /// run on this thread then. Otherwise, or when the store is busy, the
    /// store's thread commits it, as for `submit`.
    ///
    /// A producer at a high rate passes `here` false, so that its next read
    /// overlaps the commit; at a low rate an idle store then costs no thread
    /// wake-up per commit. Call it from a producer's thread, never the store's.
    public nonisolated func commitStaged(here: Bool) {
        let mine = submitted.withLock { state -> Bool in
            guard !state.items.isEmpty, !state.scheduled else { return false }
            state.scheduled = true
            return true
        }
        guard mine else { return }  // nothing staged, or already on its way to a commit
        if here, executor.runIfIdle({ self.assumeIsolated { $0.lead() } }) { return }
        scheduleSubmitted()
    }

    /// Adds a batch to those handed over. With `take`, true when the caller
    /// must have them taken (no take was scheduled yet; it is now marked so).
    private nonisolated func hand(
        _ batch: WriteBatch, holdOnFault: Bool, take: Bool,
        completion: @escaping @Sendable (Result<WriteResult, any Error>) -> Void
    ) -> Bool {
        let count = batch.count
        let backlog = self.backlogCount
        backlog.add(count)
        let waiter = Waiter(batch: batch, holdOnFault: holdOnFault) { result in
            backlog.remove(count)
            completion(result)
        }
        return submitted.withLock { state -> Bool in
            state.items.append(waiter)
            if state.scheduled || !take { return false }
            state.scheduled = true
            return true
        }
    }

    /// Straight onto the store's thread, not through a Task (which would
    /// wake a pool thread only to hop here).
    private nonisolated func scheduleSubmitted() {
        executor.run { self.assumeIsolated { $0.takeSubmitted() } }
    }

    /// On a borrowing producer's thread (`commitStaged(here:)`): takes what
    /// was handed over and commits it, and anything queued before it, now.
    private func lead() {
        leading = true
        defer { leading = false }
        commitPending()
    }

    func takeSubmitted() {
        let items = submitted.withLock { state -> [Waiter] in
            let items = state.items
            state.items = []
            state.scheduled = false
            return items
        }
        for item in items { enqueue(item) }
    }

    /// Changes submitted but not yet committed, for back-pressure.
    public nonisolated var backlog: Int { backlogCount.value }

    /// Blocks the calling thread (a producer's, never the store's) until
    /// fewer than `limit` submitted changes await commit, or `timeout`
    /// passes. Returns whether the backlog is below `limit`.
    @discardableResult
    public nonisolated func waitForBacklog(below limit: Int, timeout: Duration) -> Bool {
        backlogCount.wait(below: limit, timeout: timeout)
    }
}
