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
    /// The thread running now (pthread_t), for isolation checks.
    private let owner = Atomic<UInt>(0)

    /// Added to the thread's nice value (Linux schedules threads one by
    /// one): positive for background work that must not delay the rest.
    private let niceness: Int32

    public init(name: String, niceness: Int32 = 0) {
        self.name = name
        self.niceness = niceness
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

    /// True on the executor's thread: there, and only there, its jobs and
    /// closures run, one at a time.
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
            self.owner.store(UInt(pthread_self()), ordering: .releasing)
            // On Linux the nice value belongs to the thread, and 0 names the calling one.
            if self.niceness != 0 {
                do {
                    try Syscall.call("setpriority", self.name) {
                        setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, self.niceness)
                    }
                } catch {
                    // Runs at normal priority: slower for the rest, never wrong.
                    Logger(label: "executor").warning("could not lower the thread's priority", ["error": "\(error)"])
                }
            }
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
                owner.store(0, ordering: .releasing)
                condition.unlock()
                return
            }
            let batch = jobs
            jobs.removeAll(keepingCapacity: true)
            condition.unlock()
            for item in batch {
                switch item {
                case .job(let job): job.runSynchronously(on: asUnownedSerialExecutor())
                case .closure(let body): body()
                }
            }
        }
    }
}
