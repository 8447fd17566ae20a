import Synchronization

/// A Prometheus histogram: counts of observations at or below each bucket's
/// upper bound, their sum and count. Observing takes one uncontended lock,
/// from any thread, so the store's and the publisher's threads can afford it.
public final class Histogram: Sendable {
    /// Upper bounds, in seconds, ascending; `+Inf` is implied.
    public let bounds: [Double]
    private struct State {
        var buckets: [Int]
        var count = 0
        var sum = 0.0
    }
    private let state: Mutex<State>

    /// Latency buckets from 0.1 ms to 10 s.
    public static let latencyBounds: [Double] = [
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10,
    ]

    public init(bounds: [Double] = Histogram.latencyBounds) {
        self.bounds = bounds
        state = Mutex(State(buckets: [Int](repeating: 0, count: bounds.count)))
    }

    public func observe(seconds: Double) {
        guard seconds.isFinite, seconds >= 0 else { return }
        let index = bounds.firstIndex(where: { seconds <= $0 })
        state.withLock { s in
            if let index { s.buckets[index] += 1 }
            s.count += 1
            s.sum += seconds
        }
    }

    public func observe(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        observe(seconds: Double(seconds) + Double(attoseconds) / 1e18)
    }

    /// Cumulative counts per bound (then `+Inf`), the sum in seconds, and the count.
    public func snapshot() -> (cumulative: [Int], sum: Double, count: Int) {
        let s = state.withLock { $0 }
        var running = 0
        var cumulative: [Int] = []
        for bucket in s.buckets {
            running += bucket
            cumulative.append(running)
        }
        cumulative.append(s.count)
        return (cumulative, s.sum, s.count)
    }
}
