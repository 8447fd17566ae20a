import Synchronization

/// Where the service is in its life: what `/readyz` and systemd are told.
public final class ServicePhase: Sendable {
    public enum Value: Int, Sendable {
        case starting, ready, draining
    }

    private let value = Atomic<Int>(Value.starting.rawValue)

    public init() {}

    public var current: Value { Value(rawValue: value.load(ordering: .sequentiallyConsistent)) ?? .starting }

    /// Ready, unless a drain has already begun.
    public func enterReady() {
        _ = value.compareExchange(
            expected: Value.starting.rawValue, desired: Value.ready.rawValue, ordering: .sequentiallyConsistent)
    }

    public func enterDraining() { value.store(Value.draining.rawValue, ordering: .sequentiallyConsistent) }
}
