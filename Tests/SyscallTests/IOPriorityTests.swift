import Foundation
import Syscall
import Testing

@Suite("IOPriority: a thread's class at the disk", .timeLimit(.minutes(1)))
struct IOPriorityTests {
    /// Runs `body` on a new thread and returns what it returned.
    private func onNewThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: body()) }.start()
        }
    }

    @Test func theIdleClassHoldsInsideTheBodyAndTheThreadsOwnComesBack() async throws {
        let seen = await onNewThread { () -> [IOPriority?] in
            let before = try? IOPriority.current()
            let inside = IOPriority.with(.idle) { try? IOPriority.current() }
            let after = try? IOPriority.current()
            return [before, inside, after]
        }
        let before = try #require(seen[0])
        #expect(before != .idle)
        #expect(seen[1] == .idle)
        #expect(seen[2] == before)
        #expect(IOPriority.idle.ioClass == 3 && IOPriority.idle.description == "idle/0")
    }

    @Test func anotherThreadKeepsItsOwnWhileOneIsIdle() async throws {
        let mine = try IOPriority.current()
        let entered = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let idleThread = Thread {
            IOPriority.with(.idle) {
                entered.signal()
                _ = release.wait(timeout: .now() + 10)
            }
        }
        idleThread.start()
        #expect(entered.wait(timeout: .now() + 10) == .success)
        #expect(try IOPriority.current() == mine)
        release.signal()
    }

    @Test func aThrowingBodyStillPutsThePriorityBack() async throws {
        struct Refused: Error {}
        let after = await onNewThread { () -> (IOPriority?, Bool) in
            let before = try? IOPriority.current()
            var threw = false
            do { try IOPriority.with(.idle) { throw Refused() } } catch { threw = true }
            return ((try? IOPriority.current()) == before ? before : nil, threw)
        }
        #expect(after.0 != nil && after.1)
    }
}
