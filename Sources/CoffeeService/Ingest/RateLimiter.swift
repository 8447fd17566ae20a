import Foundation
import Synchronization

/// Lets one log line through per interval; counts the rest.
final class RateLimiter: Sendable {
    private struct State {
        var last: Date = .distantPast
        var suppressed = 0
    }
    private let state = Mutex(State())
    let interval: TimeInterval

    init(interval: TimeInterval) { self.interval = interval }

    /// The number suppressed since the last line, when a line may be written now; nil otherwise.
    func allow(count: Int) -> Int? {
        state.withLock { s in
            let now = Date()
            if now.timeIntervalSince(s.last) >= interval {
                let n = s.suppressed + count - 1
                s.last = now
                s.suppressed = 0
                return n
            }
            s.suppressed += count
            return nil
        }
    }
}
