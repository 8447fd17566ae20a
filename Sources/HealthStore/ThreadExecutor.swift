import Foundation

/// A serial executor backed by one dedicated thread.
///
/// An actor that uses it (`nonisolated var unownedExecutor`) runs every job on
/// that thread, so blocking work — `sqlite3_step`, `fsync` — never occupies
/// Swift's cooperative pool, which has only two threads on this machine.
public final class ThreadExecutor: SerialExecutor, @unchecked Sendable {
    private let condition = NSCondition()
    private let name: String
    // All guarded by `condition`.
    private var jobs: [UnownedJob] = []
    private var stopping = false
    private var running = false

    public init(name: String) {
        self.name = name
        condition.lock()
        startThread()
        condition.unlock()
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        condition.lock()
        jobs.append(unowned)
        // After `stop()` the thread may have ended; an executor must never
        // drop a job, so a thread is started again to run it.
        if !running { startThread() }
        condition.signal()
        condition.unlock()
    }

    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    /// Lets the thread end once it finds no more jobs. Jobs enqueued later
    /// still run, on a thread started for them that ends when they are done.
    public func stop() {
        condition.lock()
        stopping = true
        condition.signal()
        condition.unlock()
    }

    /// Called with `condition` held.
    private func startThread() {
        running = true
        let thread = Thread { [self] in
            Thread.current.name = name  // on Linux only the thread itself can name itself
            self.loop()
        }
        thread.start()
    }

    private func loop() {
        while true {
            condition.lock()
            while jobs.isEmpty && !stopping { condition.wait() }
            if jobs.isEmpty {
                running = false
                condition.unlock()
                return
            }
            let batch = jobs
            jobs.removeAll(keepingCapacity: true)
            condition.unlock()
            for job in batch { job.runSynchronously(on: asUnownedSerialExecutor()) }
        }
    }
}
