import CoffeeLogging
import Foundation
import Synchronization
import Syscall

/// A serial executor backed by one dedicated thread.
///
/// An actor that uses it (`nonisolated var unownedExecutor`) runs every job on
/// that thread, so blocking work — `sqlite3_step`, `fsync` — never occupies
/// Swift's cooperative pool, which has only two threads on this machine.
///
/// Plain closures can be queued too (`run`); they run on the same thread in
/// order with the jobs, so one may use `assumeIsolated` on an actor of this
/// executor. That saves a producer such as the bus a hop through the
/// cooperative pool (a thread wake-up) for every batch it hands over.
///
/// A caller may also borrow the executor (`runIfIdle`): when nothing is
/// queued or running, its closure runs on the caller's own thread, with the
/// executor's isolation, while the executor's thread waits. That is the
/// leader of a leader/follower group commit: an idle store costs the bus no
/// thread wake-up per commit.
public final class ThreadExecutor: SerialExecutor, @unchecked Sendable {
    private enum Item {
        case job(UnownedJob)
        case closure(@Sendable () -> Void)
    }

    private let condition = NSCondition()
    private let name: String
    // All guarded by `condition`.
    private var jobs: [Item] = []
    private var stopping = false
    private var running = false
    /// A batch of jobs, or a borrower's closure, is running.
    private var busy = false
    /// The thread that runs the executor's work now (pthread_t): its own
    /// thread, or a borrower's, for isolation checks; 0 between batches.
    private let owner = Atomic<UInt>(0)

    /// Added to the thread's nice value (Linux schedules threads one by
    /// one): positive for background work that must not delay the rest.
    private let niceness: Int32
    /// Says when the niceness could not be set.
    private let logger: Logger?

    /// An executor on a thread of its own, at normal priority.
    public convenience init(name: String) {
        self.init(name: name, niceness: 0, logger: nil)
    }

    /// An executor on a thread of its own, `niceness` added to its nice
    /// value; `logger` says when that cannot be done.
    public init(name: String, niceness: Int32, logger: Logger?) {
        self.name = name
        self.niceness = niceness
        self.logger = logger
        condition.lock()
        startThread()
        condition.unlock()
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        append(.job(UnownedJob(job)))
    }

    /// Runs `body` on the executor's thread, after what is already queued.
    public func run(_ body: @escaping @Sendable () -> Void) {
        append(.closure(body))
    }

    /// Runs `body` now, on the calling thread and with the executor's
    /// isolation, if nothing is queued or running; returns false (and runs
    /// nothing) otherwise. Work queued meanwhile waits until `body` returns.
    ///
    /// Never call it from the executor's own work (it would find the
    /// executor busy), and `body` must not wait for work it queues here.
    public func runIfIdle(_ body: () -> Void) -> Bool {
        condition.lock()
        guard !busy && jobs.isEmpty else {
            condition.unlock()
            return false
        }
        busy = true
        condition.unlock()
        owner.store(UInt(pthread_self()), ordering: .releasing)
        body()
        owner.store(0, ordering: .releasing)
        condition.lock()
        busy = false
        if !jobs.isEmpty { condition.signal() }
        condition.unlock()
        return true
    }

    /// True where the executor's work runs now: on its thread while it runs
    /// jobs and closures, one at a time, or on a borrower's (`runIfIdle`).
    public func isIsolatingCurrentContext() -> Bool? {
        owner.load(ordering: .acquiring) == UInt(pthread_self())
    }

    public func checkIsolated() {
        precondition(isIsolatingCurrentContext() == true, "not on the \(name) executor's thread")
    }

    private func append(_ item: Item) {
        condition.lock()
        jobs.append(item)
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
            if self.niceness != 0 {
                do {
                    try Syscall.setThreadNice(self.niceness, detail: self.name)
                } catch {
                    // Runs at normal priority: slower for the rest, never wrong.
                    self.logger?.warning("could not lower the thread's priority", metadata: ["error": "\(error)"])
                }
            }
            self.loop()
        }
        thread.start()
    }

    private func loop() {
        let me = UInt(pthread_self())
        while true {
            condition.lock()
            // A borrower's closure (`runIfIdle`) finishes before any job runs here.
            while busy || (jobs.isEmpty && !stopping) { condition.wait() }
            if jobs.isEmpty {
                running = false
                condition.unlock()
                return
            }
            let batch = jobs
            jobs.removeAll(keepingCapacity: true)
            busy = true
            condition.unlock()
            owner.store(me, ordering: .releasing)
            for item in batch {
                switch item {
                case .job(let job): job.runSynchronously(on: asUnownedSerialExecutor())
                case .closure(let body): body()
                }
            }
            owner.store(0, ordering: .releasing)
            condition.lock()
            busy = false
            condition.unlock()
        }
    }
}
