import Foundation
import Synchronization
import Syscall

/// A dedicated thread that owns some sockets for their whole life and polls
/// them together with a mailbox.
///
/// The handler is created on the thread, used only there and dropped there,
/// so a socket is never touched by two threads. Nothing here blocks Swift's
/// cooperative pool.
public final class SocketLoop<Message: Sendable>: Sendable {
    /// What runs on the loop's thread. Not Sendable: it never leaves it.
    public struct Handler {
        public var sockets: [ZMQSocket]
        /// Socket `index` of `sockets` is readable.
        public var readable: (_ index: Int) -> Void
        /// Messages posted to the mailbox.
        public var received: ([Message]) -> Void
        /// Called on every wake-up; returns how long to poll next (ms, -1 for ever).
        public var tick: () -> Int
        /// Called once on stop, before the sockets are closed: drain here.
        public var finish: () -> Void

        public init(
            sockets: [ZMQSocket], readable: @escaping (Int) -> Void = { _ in },
            received: @escaping ([Message]) -> Void = { _ in }, tick: @escaping () -> Int = { -1 },
            finish: @escaping () -> Void = {}
        ) {
            self.sockets = sockets
            self.readable = readable
            self.received = received
            self.tick = tick
            self.finish = finish
        }
    }

    public let name: String
    public let mailbox: Mailbox<Message>
    private let stopping = Atomic<Bool>(false)
    private let ended = Mutex<CheckedContinuation<Void, Never>?>(nil)
    /// True while no thread runs: before `start` and after the thread ends.
    private let hasEnded = Atomic<Bool>(true)
    /// Liveness probes asked for and answered (`answers(within:)`).
    private let probesAsked = Atomic<UInt64>(0)
    private let probesAnswered = Atomic<UInt64>(0)

    /// - Throws: `SystemCallError` when the mailbox's pipe cannot be made.
    public init(name: String, mailboxCapacity: Int = .max) throws {
        self.name = name
        self.mailbox = try Mailbox(capacity: mailboxCapacity)
    }

    /// Starts the thread and runs `make` on it to create the sockets.
    ///
    /// - Throws: whatever `make` throws (a taken port, say); the thread has ended then.
    public func start(_ make: @escaping @Sendable () throws -> Handler) async throws {
        hasEnded.store(false, ordering: .sequentiallyConsistent)
        try await withCheckedThrowingContinuation { (started: CheckedContinuation<Void, any Error>) in
            let thread = Thread { [self] in
                Thread.current.name = name  // on Linux only the thread itself can name itself (seen in `top -H`, perf)
                let handler: Handler
                do {
                    handler = try make()
                } catch {
                    markEnded()
                    started.resume(throwing: error)
                    return
                }
                started.resume()
                run(handler)
                markEnded()
            }
            thread.start()
        }
    }

    /// Asks the thread to finish, and waits until its sockets are closed.
    public func stop() async {
        stopping.store(true, ordering: .sequentiallyConsistent)
        mailbox.wake()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let already = ended.withLock { slot -> Bool in
                if hasEnded.load(ordering: .sequentiallyConsistent) { return true }
                slot = continuation
                return false
            }
            if already { continuation.resume() }
        }
    }

    /// Whether the loop's thread goes round within `timeout`: a probe wakes
    /// it and it answers on its next turn. False for a loop stuck in a
    /// handler (or not running), which a watchdog must not paper over.
    public func answers(within timeout: Duration) async -> Bool {
        guard !hasEnded.load(ordering: .sequentiallyConsistent) else { return false }
        let probe = probesAsked.add(1, ordering: .sequentiallyConsistent).newValue
        mailbox.wake()
        let deadline = ContinuousClock.now + timeout
        while probesAnswered.load(ordering: .sequentiallyConsistent) < probe {
            guard ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(2))
        }
        return true
    }

    private func markEnded() {
        let waiter = ended.withLock { slot -> CheckedContinuation<Void, Never>? in
            hasEnded.store(true, ordering: .sequentiallyConsistent)
            let w = slot
            slot = nil
            return w
        }
        waiter?.resume()
    }

    private func run(_ handler: Handler) {
        let items = handler.sockets.map { ZMQSocket.PollItem.socket($0) } + [.fd(mailbox.fd)]
        var timeout = handler.tick()
        while !stopping.load(ordering: .sequentiallyConsistent) {
            let ready: [Bool]
            do {
                ready = try ZMQSocket.poll(items, timeoutMs: timeout)
            } catch {
                break  // context terminated
            }
            for (i, isReady) in ready.enumerated() where isReady {
                if i < handler.sockets.count { handler.readable(i) }
            }
            if ready.last == true || mailbox.count > 0 {
                let messages = mailbox.drain()
                if !messages.isEmpty { handler.received(messages) }
            }
            timeout = handler.tick()
            probesAnswered.store(probesAsked.load(ordering: .sequentiallyConsistent), ordering: .sequentiallyConsistent)
        }
        let rest = mailbox.drain()
        if !rest.isEmpty { handler.received(rest) }
        handler.finish()
        for socket in handler.sockets { socket.close() }
    }
}
