import CoffeeDomain
import Foundation

/// What producers on threads of their own (the bus) hand the store without
/// waiting, all through one value: `store.submissions`.
///
/// A producer submits (or stages, then commits what it staged, possibly on
/// its own thread as the leader of a group commit while the store is idle),
/// watches the backlog and the storage fault to know when to stop reading,
/// and drains what it handed over when it stops.
public struct Submissions: Sendable {
    let store: HealthStore

    /// Queues `batch` without waiting; `completion` runs on the store's
    /// thread (or the leader's) once the commit is durable, or failed.
    ///
    /// Batches submitted from one thread are committed in the order submitted.
    ///
    /// - Parameter holdOnFault: in a storage fault, hold the batch and retry
    ///   it until it commits (the default: the bus has taken it and has no
    ///   one to tell); false fails it at once with `StoreError.unavailable`.
    public func submit(
        _ batch: WriteBatch, holdOnFault: Bool = true,
        completion: @escaping @Sendable (Result<WriteResult, any Error>) -> Void
    ) {
        if store.hand(batch, holdOnFault: holdOnFault, take: true, completion: completion) { store.scheduleSubmitted() }
    }

    /// Queues `batch` as `submit` does, but leaves its commit to the
    /// caller's next `commitStaged(here:)`, so that a producer hands over
    /// all it read in one wake-up and then decides who commits it.
    public func stage(
        _ batch: WriteBatch, holdOnFault: Bool = true,
        completion: @escaping @Sendable (Result<WriteResult, any Error>) -> Void
    ) {
        _ = store.hand(batch, holdOnFault: holdOnFault, take: false, completion: completion)
    }

    /// Commits what was staged (`stage`) and not yet taken. With `here`,
    /// when the store is idle, one commit runs on the calling thread (the
    /// leader of a leader/follower group commit) and whatever is left is
    /// handed to the store's thread; the completions and commit observers of
    /// that commit run on this thread then. Otherwise, or when the store is
    /// busy, the store's thread commits it, as for `submit`.
    ///
    /// A producer at a high rate passes `here` false, so that its next read
    /// overlaps the commit; at a low rate an idle store then costs no thread
    /// wake-up per commit. Call it from a producer's thread, never the store's.
    public func commitStaged(here: Bool) {
        let mine = store.submitted.withLock { state -> Bool in
            guard !state.items.isEmpty, !state.scheduled else { return false }
            state.scheduled = true
            return true
        }
        guard mine else { return }  // nothing staged, or already on its way to a commit
        let store = self.store
        if here, store.executor.runIfIdle({ store.assumeIsolated { $0.lead() } }) { return }
        store.scheduleSubmitted()
    }

    /// Changes handed over but not yet committed, for back-pressure.
    public var backlog: Int { store.backlogCount.value }

    /// Blocks the calling thread (a producer's, never the store's) until
    /// fewer than `limit` changes await commit, or `timeout` passes.
    /// Returns whether the backlog is below `limit`.
    @discardableResult
    public func waitForBacklog(below limit: Int, timeout: Duration) -> Bool {
        store.backlogCount.wait(below: limit, timeout: timeout)
    }

    /// Whether the store is in a storage fault: a producer reads nothing
    /// more while it is, so messages wait in ZeroMQ's queue.
    public var isFaulted: Bool { store.isFaulted }

    /// Commits everything handed over. In a storage fault it waits up to
    /// `patience` for the storage to come back (the batches are held in
    /// memory only). Returns the changes still not stored.
    public func drain(patience: Duration) async -> Int {
        await store.commitPending()
        if store.isFaulted {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await store.waitUntilWritable() }
                group.addTask { try? await Task.sleep(for: patience) }
                await group.next()
                group.cancelAll()
            }
            await store.commitPending()
        }
        return backlog
    }
}

extension HealthStore {
    /// The producers' side of the store: submitting without waiting (`Submissions`).
    public nonisolated var submissions: Submissions { Submissions(store: self) }

    /// Adds a batch to those handed over. With `take`, true when the caller
    /// must have them taken (no take was scheduled yet; it is now marked so).
    nonisolated func hand(
        _ batch: WriteBatch, holdOnFault: Bool, take: Bool,
        completion: @escaping @Sendable (Result<WriteResult, any Error>) -> Void
    ) -> Bool {
        backlogCount.add(batch.count)  // and out again in `finish`
        let waiter = Waiter(batch: batch, holdOnFault: holdOnFault, completion: completion)
        return submitted.withLock { state -> Bool in
            state.items.append(waiter)
            if state.scheduled || !take { return false }
            state.scheduled = true
            return true
        }
    }

    /// Tells a waiter how its batch ended, its changes out of the backlog
    /// first. (A closure around the completion did that, an allocation per batch.)
    nonisolated func finish(_ waiter: Waiter, _ result: Result<WriteResult, any Error>) {
        backlogCount.remove(waiter.batch.count)
        waiter.completion(result)
    }

    /// Straight onto the store's thread, not through a Task (which would
    /// wake a pool thread only to hop here).
    nonisolated func scheduleSubmitted() {
        executor.run { self.assumeIsolated { $0.takeSubmitted() } }
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
}
