import CoffeeLogging
import Synchronization

/// Runs services as one unit, with swift-service-lifecycle's semantics.
///
/// - Start: each service's `start()` in the order given; the next begins
///   only when it returns. Then every `run()` runs concurrently.
/// - Graceful shutdown (`triggerGracefulShutdown()`, a signal): the services
///   are asked to finish one at a time, in reverse order, each only after the
///   one started after it has returned. So what was started first (the
///   store) closes last, and a producer's drain finds its consumers still up.
/// - Failure: a service whose `start()` throws, or whose `run()` throws or
///   returns before it was asked to, ends the group: the others shut down
///   gracefully in reverse order, services never started are skipped, and
///   `run()` throws a `ServiceGroupError` naming the service.
/// - Cancellation of the task running the group is "stop now": it reaches
///   every service at once.
/// - A drain deadline (`maximumGracefulShutdownDuration`, as
///   swift-service-lifecycle has it): a graceful shutdown still running
///   when it passes escalates to cancellation of every service still
///   running, and `run()` throws a `ServiceGroupError` naming them.
public final class ServiceGroup: Sendable {
    private let services: [any Service]
    private let requested = ShutdownSignal()
    private let maximumGracefulShutdownDuration: Duration?
    private let clock: any Clock<Duration>
    private let logger: Logger
    /// `run()` was called: a second call is refused, not run twice.
    private let ran = Atomic<Bool>(false)

    /// - Parameters:
    ///   - maximumGracefulShutdownDuration: how long a graceful shutdown may
    ///     take before the services still draining are cancelled; nil waits
    ///     for ever.
    ///   - clock: what the deadline is measured on (a `TestClock` in tests).
    public init(
        services: [any Service], maximumGracefulShutdownDuration: Duration? = nil,
        clock: any Clock<Duration> = ContinuousClock(), logger: Logger
    ) {
        self.services = services
        self.maximumGracefulShutdownDuration = maximumGracefulShutdownDuration
        self.clock = clock
        self.logger = logger
    }

    /// Starts a graceful shutdown; safe from any thread, any number of times.
    public func triggerGracefulShutdown() { requested.trigger() }

    private enum Event: Sendable {
        case finished(Int, (any Error)?)
        case shutdownRequested
        case drainDeadline
    }

    /// Starts every service, calls `onStarted` once all are up, and returns
    /// after a graceful shutdown has finished every service.
    ///
    /// - Throws: `ServiceGroupError` when a service failed to start, failed,
    ///   or stopped on its own (the others have been shut down by then), or
    ///   when the group ran already.
    public func run(onStarted: @Sendable () async -> Void = {}) async throws {
        guard !ran.exchange(true, ordering: .relaxed) else { throw ServiceGroupError.ranTwice(services.map(\.name)) }
        let failure = await withTaskGroup(of: Event.self, returning: ServiceGroupError?.self) { group in
            var signals: [ShutdownSignal] = []
            var failure: ServiceGroupError?
            for (index, service) in services.enumerated() {
                if requested.isTriggered || Task.isCancelled { break }
                do {
                    logger.debug("starting", metadata: ["service": "\(service.name)"])
                    try await service.start()
                } catch {
                    failure = .startFailed(service.name, error)
                    break
                }
                let signal = ShutdownSignal()
                signals.append(signal)
                group.addTask {
                    do {
                        try await ShutdownSignal.$current.withValue(signal) { try await service.run() }
                        return .finished(index, nil)
                    } catch {
                        return .finished(index, error)
                    }
                }
            }
            var finished = Set<Int>()
            func record(_ event: Event) {
                guard case .finished(let index, let error) = event else { return }
                finished.insert(index)
                let name = services[index].name
                if let error {
                    logger.error("service failed", metadata: ["service": "\(name)", "error": "\(error)"])
                    if failure == nil { failure = .runFailed(name, error) }
                } else if !signals[index].isTriggered, !Task.isCancelled, failure == nil {
                    failure = .finishedEarly(name)
                }
            }
            if failure == nil {
                if !requested.isTriggered { await onStarted() }
                group.addTask { [requested] in
                    await requested.wait()
                    return .shutdownRequested
                }
                // Until a shutdown is requested or a service ends by itself.
                while failure == nil, let event = await group.next() {
                    if case .shutdownRequested = event { break }
                    record(event)
                }
            }
            if let limit = maximumGracefulShutdownDuration {
                group.addTask { [clock] in
                    try? await clock.sleep(for: limit)
                    return .drainDeadline
                }
            }
            // Reverse order: each service finishes before the one started before it is asked.
            var cancelled = false
            for index in signals.indices.reversed() where !finished.contains(index) {
                logger.debug("stopping", metadata: ["service": "\(services[index].name)"])
                signals[index].trigger()
                while !finished.contains(index), let event = await group.next() {
                    guard case .drainDeadline = event else {
                        record(event)
                        continue
                    }
                    guard !cancelled, !Task.isCancelled else { continue }
                    cancelled = true
                    let draining = signals.indices.filter { !finished.contains($0) }.map { services[$0].name }
                    logger.error(
                        "the drain passed its deadline; cancelling the services still running",
                        metadata: ["services": "\(draining.joined(separator: ","))"])
                    if failure == nil { failure = .drainTimedOut(draining) }
                    for signal in signals { signal.trigger() }
                    group.cancelAll()
                }
                logger.debug("stopped", metadata: ["service": "\(services[index].name)"])
            }
            group.cancelAll()  // the deadline's timer, when the drain beat it
            requested.trigger()  // ends the waiter above if a failure came first
            return failure
        }
        if let failure { throw failure }
    }
}
