import Foundation

/// Where "now" comes from. Injected wherever caffeine decays, days start and
/// timelines are cut, so tests are exact (`CoffeeTestKit.ManualClock`).
public protocol WallClock: Sendable {
    func now() -> Date
}

/// The machine's clock.
public struct SystemClock: WallClock {
    public init() {}
    public func now() -> Date { Date() }
}
