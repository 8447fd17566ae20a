import Synchronization

/// A clock whose time moves only when `advance(by:)` is called: for tests
/// that drive timers (`repeatUntilShutdown`, the model's refresh) without
/// sleeping. Sleepers wake in deadline order as time passes their deadline.
public final class TestClock: Clock, Sendable {
    public struct Instant: InstantProtocol {
        public var offset: Duration
        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        public static func < (a: Instant, b: Instant) -> Bool { a.offset < b.offset }
    }

    private struct Sleeper {
        var deadline: Instant
        var continuation: CheckedContinuation<Void, any Error>
    }
    private struct State {
        var now = Instant(offset: .zero)
        var nextID = 0
        var sleepers: [Int: Sleeper] = [:]
        var cancelled: Set<Int> = []
    }
    private let state = Mutex(State())
    private let sleepersChanged: AsyncStream<Int>.Continuation
    private let sleeperCounts: AsyncStream<Int>

    public init() {
        (sleeperCounts, sleepersChanged) = AsyncStream.makeStream(of: Int.self, bufferingPolicy: .bufferingNewest(1))
    }

    public var now: Instant { state.withLock { $0.now } }
    public var minimumResolution: Duration { .zero }

    public func sleep(until deadline: Instant, tolerance: Duration?) async throws {
        let id = state.withLock { s -> Int in
            s.nextID += 1
            return s.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let outcome = state.withLock { s -> (wake: Bool, cancelled: Bool, count: Int) in
                    if s.cancelled.remove(id) != nil { return (true, true, s.sleepers.count) }
                    if deadline <= s.now { return (true, false, s.sleepers.count) }
                    s.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
                    return (false, false, s.sleepers.count)
                }
                if outcome.wake {
                    if outcome.cancelled { continuation.resume(throwing: CancellationError()) } else { continuation.resume() }
                } else {
                    sleepersChanged.yield(outcome.count)
                }
            }
        } onCancel: {
            let sleeper = state.withLock { s -> Sleeper? in
                if let sleeper = s.sleepers.removeValue(forKey: id) { return sleeper }
                s.cancelled.insert(id)
                return nil
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves time on and wakes every sleeper whose deadline has come.
    public func advance(by duration: Duration) {
        let due = state.withLock { s -> [Sleeper] in
            s.now = s.now.advanced(by: duration)
            let now = s.now
            let due = s.sleepers.filter { $0.value.deadline <= now }
            for id in due.keys { s.sleepers[id] = nil }
            return due.values.sorted { $0.deadline < $1.deadline }
        }
        for sleeper in due { sleeper.continuation.resume() }
    }

    /// Returns once at least `count` tasks are asleep on this clock, so a
    /// test advances time only after the timer it drives has started waiting.
    public func waitForSleepers(_ count: Int) async {
        if state.withLock({ $0.sleepers.count }) >= count { return }
        for await n in sleeperCounts where n >= count { return }
    }
}
