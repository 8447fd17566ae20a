import Foundation
import Synchronization
import Syscall

/// A dedicated thread that owns some sockets for their whole life and polls
/// them together with a mailbox.
///
/// The handler is created on the thread, used only there and dropped there,
/// so a socket is never touched by two threads at once. Nothing here blocks
/// Swift's cooperative pool.
///
/// A lendable loop (`init(lendable: true)`) lets another thread use its
/// sockets while it is idle (`runIfIdle`), under a lock that it also holds
/// whenever it handles a wake-up: a producer with one small message then
/// sends it itself, saving this thread a wake-up. Such a loop polls its
/// sockets' descriptors (`ZMQSocket.fileDescriptor`), not the sockets, so
/// that its blocked poll never touches a socket another thread uses.
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
        /// Whether a borrower may use the sockets now (`runIfIdle`), asked
        /// under the lock the loop holds while it handles a wake-up: false
        /// while the handler waits for something that must go out first.
        public var lends: () -> Bool

        public init(
            sockets: [ZMQSocket], readable: @escaping (Int) -> Void = { _ in },
            received: @escaping ([Message]) -> Void = { _ in }, tick: @escaping () -> Int = { -1 },
            finish: @escaping () -> Void = {}, lends: @escaping () -> Bool = { true }
        ) {
            self.sockets = sockets
            self.readable = readable
            self.received = received
            self.tick = tick
            self.finish = finish
            self.lends = lends
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

    /// Held by the loop while it handles a wake-up and by a borrower
    /// (`runIfIdle`); nil for a loop that lends nothing.
    private let lending: Lending?

    /// The handler, while the loop runs, for a borrower under the lock.
    private final class Lending: @unchecked Sendable {
        let lock = NSLock()
        var handler: Handler?  // guarded by `lock`
    }

    /// - Parameter lendable: other threads may use the sockets while the
    ///   loop is idle (`runIfIdle`).
    /// - Throws: `SystemCallError` when the mailbox's pipe cannot be made.
    public init(name: String, mailboxCapacity: Int = .max, lendable: Bool = false) throws {
        self.name = name
        self.mailbox = try Mailbox(capacity: mailboxCapacity)
        lending = lendable ? Lending() : nil
    }

    /// Runs `body` with the loop's sockets on the calling thread, if the
    /// loop is lendable, running, and idle: not handling a wake-up, with
    /// nothing in its mailbox (so `body` cannot overtake a posted message),
    /// and its handler lends (`Handler.lends`).
    /// Returns false, running nothing, otherwise: then post instead.
    public func runIfIdle(_ body: ([ZMQSocket]) -> Void) -> Bool {
        guard let lending, lending.lock.try() else { return false }
        defer { lending.lock.unlock() }
        guard let handler = lending.handler, mailbox.count == 0, !stopping.load(ordering: .relaxed), handler.lends() else {
            return false
        }
        body(handler.sockets)
        // The sends may have consumed the descriptor's signal of a message
        // that arrived meanwhile: have the loop look.
        if handler.sockets.contains(where: \.isReadable) { mailbox.wake() }
        return true
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
        let sockets = handler.sockets
        let lendable = lending != nil
        let items = sockets.map { lendable ? ZMQSocket.PollItem.fd($0.fileDescriptor) : .socket($0) } + [.fd(mailbox.fd)]
        var polled = ZMQSocket.PollSet(items)
        lending?.lock.lock()
        lending?.handler = handler
        var timeout = handler.tick()
        lending?.lock.unlock()
        while !stopping.load(ordering: .sequentiallyConsistent) {
            do {
                try polled.wait(timeoutMs: timeout)
            } catch {
                break  // context terminated
            }
            lending?.lock.lock()
            // A lendable loop asks each socket (its descriptor only says "look").
            for i in sockets.indices where lendable ? sockets[i].isReadable : polled.isReadable(i) { handler.readable(i) }
            if polled.isReadable(sockets.count) || mailbox.count > 0 {
                let messages = mailbox.drain()
                if !messages.isEmpty { handler.received(messages) }
            }
            timeout = handler.tick()
            // Its own sends may have consumed a descriptor's signal: look again at once.
            if lendable, sockets.contains(where: \.isReadable) { timeout = 0 }
            lending?.lock.unlock()
            probesAnswered.store(probesAsked.load(ordering: .sequentiallyConsistent), ordering: .sequentiallyConsistent)
        }
        lending?.lock.lock()
        defer { lending?.lock.unlock() }
        lending?.handler = nil
        let rest = mailbox.drain()
        if !rest.isEmpty { handler.received(rest) }
        handler.finish()
        for socket in sockets { socket.close() }
    }
}
