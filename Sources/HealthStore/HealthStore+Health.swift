import Foundation
import Synchronization

/// Whether the store's thread is alive, for health checks and the systemd
/// watchdog: a commit stuck in fsync, or a thread stalled, must show.
extension HealthStore {
    /// Whether a job queued on the store's thread now runs within `timeout`.
    public nonisolated func answers(within timeout: Duration) async -> Bool {
        let answered = Answer()
        executor.run { answered.flag.store(true, ordering: .releasing) }
        let deadline = ContinuousClock.now + timeout
        while !answered.flag.load(ordering: .acquiring) {
            guard ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(2))
        }
        return true
    }

    private final class Answer: Sendable {
        let flag = Atomic<Bool>(false)
    }

    /// For tests only: blocks the store's thread for `seconds`, as a wedged
    /// fsync would, so that tests can see the watchdog and health checks stop.
    @_spi(Testing) public nonisolated func stallThread(for seconds: Double) {
        executor.run { usleep(UInt32(seconds * 1_000_000)) }
    }
}
