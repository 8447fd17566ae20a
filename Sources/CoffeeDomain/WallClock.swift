import Foundation
import Synchronization

/// Where "now" comes from. Injected wherever caffeine decays, days start and
/// timelines are cut, so tests are exact.
public protocol WallClock: Sendable {
    func now() -> Date
}

/// The machine's clock.
public struct SystemClock: WallClock {
    public init() {}
    public func now() -> Date { Date() }
}

/// A clock that stands still until a test moves it.
public final class ManualClock: WallClock {
    private let current: Mutex<Date>

    public init(_ start: Date) { current = Mutex(start) }

    public func now() -> Date { current.withLock { $0 } }
    public func set(_ date: Date) { current.withLock { $0 = date } }
    public func advance(by seconds: TimeInterval) { current.withLock { $0 += seconds } }
}
