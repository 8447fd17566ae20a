import Synchronization

/// The graceful-shutdown signal of one service: triggered once, waited on
/// by any number of tasks.
///
/// A `ServiceGroup` gives each service's `run()` its own signal through a
/// task-local, so that `gracefulShutdown()` inside it waits for exactly
/// that service's turn in the reverse-order shutdown.
public final class ShutdownSignal: Sendable {
    private struct State {
        var triggered = false
        var nextID: UInt64 = 0
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        /// Waits whose task was cancelled before they registered.
        var cancelled: Set<UInt64> = []
        var handlers: [@Sendable () -> Void] = []
    }
    private let state = Mutex(State())

    public init() {}

    /// The signal of the service whose `run()` is running on this task.
    @TaskLocal public static var current: ShutdownSignal?

    public var isTriggered: Bool { state.withLock { $0.triggered } }

    /// Releases every waiter and runs the handlers; later calls do nothing.
    public func trigger() {
        let (waiters, handlers) = state.withLock { s -> ([CheckedContinuation<Void, Never>], [@Sendable () -> Void]) in
            guard !s.triggered else { return ([], []) }
            s.triggered = true
            defer {
                s.waiters = [:]
                s.handlers = []
            }
            return (Array(s.waiters.values), s.handlers)
        }
        for waiter in waiters { waiter.resume() }
        for handler in handlers { handler() }
    }

    /// Runs `handler` when the signal is triggered (at once if it was).
    public func onTrigger(_ handler: @escaping @Sendable () -> Void) {
        let now = state.withLock { s -> Bool in
            if s.triggered { return true }
            s.handlers.append(handler)
            return false
        }
        if now { handler() }
    }

    /// Returns once the signal is triggered, or the calling task is cancelled.
    public func wait() async {
        let id = state.withLock { s -> UInt64 in
            s.nextID += 1
            return s.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { s -> Bool in
                    if s.triggered || s.cancelled.remove(id) != nil { return true }
                    s.waiters[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
                if let waiter = s.waiters.removeValue(forKey: id) { return waiter }
                if !s.triggered { s.cancelled.insert(id) }
                return nil
            }
            waiter?.resume()
        }
    }
}

/// Returns when the current service is asked to shut down gracefully, or
/// its task is cancelled. Outside a `ServiceGroup`, only cancellation ends it.
public func gracefulShutdown() async {
    await (ShutdownSignal.current ?? ShutdownSignal()).wait()
}

/// Whether the current service has been asked to shut down.
public var isShuttingDownGracefully: Bool { ShutdownSignal.current?.isTriggered ?? false }

/// Runs `handler` when the current service is asked to shut down (at once
/// if it already was): for a loop that waits on something other than
/// `gracefulShutdown()`, such as an event stream to finish.
public func onGracefulShutdown(_ handler: @escaping @Sendable () -> Void) {
    ShutdownSignal.current?.onTrigger(handler)
}

/// Calls `tick` every `interval` of `clock` until the current service is
/// asked to shut down (or its task is cancelled); a tick in progress
/// finishes first. The clock is injected so that tests drive timers
/// without sleeping.
public func repeatUntilShutdown(
    every interval: Duration, on clock: any Clock<Duration>, _ tick: @escaping @Sendable () async -> Void
) async {
    await withTaskGroup(of: Void.self) { group in
        group.addTask {
            while true {
                do { try await clock.sleep(for: interval) } catch { return }  // cancelled
                await tick()
            }
        }
        await gracefulShutdown()
        group.cancelAll()
    }
}

/// Sleeps for `duration` of `clock`, or until the current service is asked
/// to shut down, whichever comes first: a pause that never delays a drain.
public func sleepUnlessShutdown(for duration: Duration, on clock: any Clock<Duration>) async {
    await withTaskGroup(of: Void.self) { group in
        group.addTask { try? await clock.sleep(for: duration) }
        group.addTask { await gracefulShutdown() }
        await group.next()
        group.cancelAll()
    }
}
