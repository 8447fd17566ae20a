import Foundation

/// Changes handed to the store but not yet committed, and a way for a
/// producer's own thread to sleep until the store has caught up.
///
/// The bus reads no further while the store is far behind, so that ZeroMQ's
/// queue absorbs a burst; it waits here, woken by the commits that bring the
/// count down, rather than polling.
final class Backlog: @unchecked Sendable {
    private let condition = NSCondition()
    // Guarded by `condition`.
    private var count = 0
    private var waiters = 0

    var value: Int {
        condition.lock()
        defer { condition.unlock() }
        return count
    }

    func add(_ n: Int) {
        condition.lock()
        count += n
        condition.unlock()
    }

    func remove(_ n: Int) {
        condition.lock()
        count -= n
        if waiters > 0 { condition.broadcast() }
        condition.unlock()
    }

    /// Blocks until fewer than `limit` changes wait, or `timeout` passes;
    /// true when the backlog is below `limit`.
    func wait(below limit: Int, timeout: Duration) -> Bool {
        let seconds = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18
        let deadline = Date(timeIntervalSinceNow: seconds)
        condition.lock()
        defer { condition.unlock() }
        waiters += 1
        defer { waiters -= 1 }
        while count >= limit {
            if !condition.wait(until: deadline) { break }
        }
        return count < limit
    }
}
