import Synchronization

/// The newest value and a doorbell, under one lock: the house's one
/// mailbox between a thread that produces and the one task that consumes.
///
/// A producer on any thread (the store's, libmosquitto's, the model's
/// turn) replaces or amends the value with `update` and rings; it never
/// blocks and never queues more than the value itself, so a burst leaves
/// the newest and nothing older. The consumer waits with `next()` and
/// takes what is there with `take` (or reads it with `value`). A ring that
/// comes while the consumer is busy is kept, once: the next `next()`
/// returns at once. `finish()` (a graceful shutdown) ends the wait.
///
/// ```swift
/// let models = LatestValue<ModelSnapshot?>(nil)
/// models.set(snapshot)                       // the model's round
/// while await models.next() {                // the rules' task
///     guard let newest = models.take(reset: nil) else { continue }
///     evaluate(newest)
/// }
/// ```
///
/// The producers' side is inlinable, so that a caller in another module
/// gets it made for its own types: left generic, every ring looked up the
/// metadata of its tuple and its state at run time (about 1.7% of the
/// ingest thread's time at 1,000 drinks a second, the model's `arrive`).
public final class LatestValue<Value: Sendable>: Sendable {
    @usableFromInline
    struct State: Sendable {
        @usableFromInline var value: Value
        /// Rung since the consumer last returned from `next()`.
        @usableFromInline var rung = false
        @usableFromInline var finished = false
        @usableFromInline var waiter: CheckedContinuation<Bool, Never>?

        @usableFromInline
        init(value: Value) { self.value = value }
    }
    @usableFromInline
    let state: Mutex<State>

    public init(_ initial: Value) { state = Mutex(State(value: initial)) }

    /// The value now, without taking it.
    @inlinable
    public var value: Value { state.withLock { $0.value } }

    /// Replaces the value with a newer one and rings.
    @inlinable
    public func set(_ newest: Value) { update { $0 = newest } }

    /// Amends the value under the lock (a queue appended to, a flag raised)
    /// and rings: the waiting consumer wakes.
    @inlinable
    @discardableResult
    public func update<Result: Sendable>(_ body: (inout Value) -> Result) -> Result {
        let (result, waiter) = state.withLock { state -> (Result, CheckedContinuation<Bool, Never>?) in
            let result = body(&state.value)
            guard !state.finished else { return (result, nil) }
            if let waiter = state.waiter {
                state.waiter = nil
                return (result, waiter)
            }
            state.rung = true
            return (result, nil)
        }
        waiter?.resume(returning: true)
        return result
    }

    /// Amends the value without ringing: what the next ring finds (a retry
    /// left for later, not a reason to wake now).
    @inlinable
    public func amend(_ body: (inout Value) -> Void) { state.withLock { body(&$0.value) } }

    /// The value, replaced by `reset`, in one step: what the consumer handles.
    @inlinable
    public func take(reset: Value) -> Value {
        state.withLock { state in
            defer { state.value = reset }
            return state.value
        }
    }

    /// Waits for a ring (at once when one came since the last return):
    /// true, or false once finished or cancelled. One consumer waits at a time.
    public func next() async -> Bool {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let now = state.withLock { state -> Bool? in
                    if state.rung {
                        state.rung = false
                        return true
                    }
                    if state.finished || Task.isCancelled { return false }
                    precondition(state.waiter == nil, "LatestValue has one consumer")
                    state.waiter = continuation
                    return nil
                }
                if let now { continuation.resume(returning: now) }
            }
        } onCancel: {
            finishWaiting()
        }
    }

    /// Ends the consumer's wait, now and from now on; the value stays readable.
    public func finish() {
        state.withLock { $0.finished = true }
        finishWaiting()
    }

    private func finishWaiting() {
        let waiter = state.withLock { state in
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: false)
    }
}
