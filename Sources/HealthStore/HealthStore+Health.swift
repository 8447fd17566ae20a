import Foundation
import Synchronization

/// Whether the store's thread is alive, for health checks and the systemd
/// watchdog: a commit stuck in fsync, or a thread stalled, must show.
extension HealthStore {
    /// Whether a job queued on the store's thread now runs within `timeout`.
    /// The job's run resumes the caller at once (no polling: `/healthz`
    /// answers in the store thread's time, not a sleep's).
    public nonisolated func answers(within timeout: Duration) async -> Bool {
        let answer = Answer()
        let timer = Task {
            try? await Task.sleep(for: timeout)
            answer.finish(false)
        }
        let answered = await withCheckedContinuation { continuation in
            answer.wait(continuation)
            executor.run { answer.finish(true) }
        }
        timer.cancel()
        return answered
    }

    /// The first of the job and the timeout decides, once.
    private final class Answer: Sendable {
        private let state = Mutex<(waiting: CheckedContinuation<Bool, Never>?, result: Bool?)>((nil, nil))

        func wait(_ continuation: CheckedContinuation<Bool, Never>) {
            let decided = state.withLock { state -> Bool? in
                if let result = state.result { return result }
                state.waiting = continuation
                return nil
            }
            if let decided { continuation.resume(returning: decided) }
        }

        func finish(_ result: Bool) {
            let waiting = state.withLock { state -> CheckedContinuation<Bool, Never>? in
                guard state.result == nil else { return nil }
                state.result = result
                defer { state.waiting = nil }
                return state.waiting
            }
            waiting?.resume(returning: result)
        }
    }
}
