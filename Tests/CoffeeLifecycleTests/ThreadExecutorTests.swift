import Dispatch
import Foundation
import Synchronization
import Testing

@testable import CoffeeLifecycle

@Suite("ThreadExecutor", .timeLimit(.minutes(2)))
struct ThreadExecutorTests {
    @Test func closuresRunOnItsThreadInOrderAndKnowIt() async {
        let executor = ThreadExecutor(name: "test-executor")
        #expect(executor.isIsolatingCurrentContext() == false)
        let seen = await withCheckedContinuation { (done: CheckedContinuation<[Bool], Never>) in
            let log = Mutex<[Bool]>([])
            for i in 0..<3 {
                executor.run {
                    log.withLock { $0.append(executor.isIsolatingCurrentContext() == true && $0.count == i) }
                    if i == 2 { done.resume(returning: log.withLock { $0 }) }
                }
            }
        }
        #expect(seen == [true, true, true])
        executor.stop()
    }

    /// A borrower runs on its own thread with the executor's isolation when
    /// it is idle; work queued meanwhile waits for it, then runs in order.
    @Test func anIdleExecutorLendsItsIsolationAndQueuedWorkWaits() async {
        let executor = ThreadExecutor(name: "test-executor")
        let log = Mutex<[String]>([])
        let ran = executor.runIfIdle {
            log.withLock { $0.append("borrower isolated \(executor.isIsolatingCurrentContext() == true)") }
            // Queued while borrowed: must not run until the borrower returns.
            executor.run { log.withLock { $0.append("queued") } }
            usleep(100_000)
            log.withLock { $0.append("borrower done") }
        }
        #expect(ran)
        #expect(executor.isIsolatingCurrentContext() == false)  // given back
        let after = await withCheckedContinuation { (done: CheckedContinuation<[String], Never>) in
            executor.run { done.resume(returning: log.withLock { $0 }) }
        }
        #expect(after == ["borrower isolated true", "borrower done", "queued"])
        executor.stop()
    }

    /// A busy executor (a closure running, or one queued) lends nothing.
    @Test func aBusyExecutorLendsNothing() async {
        let executor = ThreadExecutor(name: "test-executor")
        let release = DispatchSemaphore(value: 0)
        let started = DispatchSemaphore(value: 0)
        executor.run {
            started.signal()
            release.wait()
        }
        started.wait()
        #expect(executor.runIfIdle { Issue.record("ran while a closure ran") } == false)
        executor.run {}
        release.signal()
        // Once everything has run, it lends again.
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in executor.run { done.resume() } }
        var lent = false
        for _ in 0..<500 where !lent {
            lent = executor.runIfIdle {}
            if !lent { usleep(1000) }
        }
        #expect(lent)
        executor.stop()
    }
}
