import CoffeeDomain
import Foundation
import Synchronization

/// A wall clock that stands still until a test moves it.
public final class ManualClock: WallClock {
    private let current: Mutex<Date>

    public init(_ start: Date) { current = Mutex(start) }

    public func now() -> Date { current.withLock { $0 } }
    public func set(_ date: Date) { current.withLock { $0 = date } }
    public func advance(by seconds: TimeInterval) { current.withLock { $0 += seconds } }
}
