import Foundation
import Synchronization
import Syscall

#if canImport(Glibc)
    import Glibc
#endif

/// A queue into a socket's thread: any thread posts, the owner drains.
///
/// Backed by a non-blocking pipe whose read end the owner polls beside its
/// sockets, so a post wakes a thread blocked in `zmq_poll`. Optionally bounded: a full mailbox
/// refuses the message and counts it, so a slow consumer never blocks a producer.
public final class Mailbox<Message: Sendable>: Sendable {
    /// The read end, to poll.
    public let fd: Int32
    private let writeEnd: Int32
    private let queue = Mutex<[Message]>([])
    private let capacity: Int
    private let droppedCount = Atomic<Int>(0)
    /// `queue`'s length, kept beside it: a loop asks on every turn, and a
    /// look under the generic lock looked up the queue's type metadata each time.
    private let queued = Atomic<Int>(0)

    /// - Throws: `SystemCallError` when no pipe can be made (out of descriptors).
    public init(capacity: Int = .max) throws(SystemCallError) {
        var ends: [Int32] = [0, 0]
        try Syscall.call("pipe", "mailbox") { pipe(&ends) }
        do {
            for end in ends {
                try Syscall.addStatusFlags(end, O_NONBLOCK)
                try Syscall.call("fcntl(F_SETFD)", "mailbox") { fcntl(end, F_SETFD, FD_CLOEXEC) }
            }
        } catch {
            for end in ends { Syscall.close(end) }
            throw error
        }
        fd = ends[0]
        writeEnd = ends[1]
        self.capacity = capacity
    }

    deinit {
        Syscall.close(fd)
        Syscall.close(writeEnd)
    }

    /// Queues `message`; false (and counted) when the mailbox is full.
    /// With `evenIfFull`, past the capacity: for a reply the owner asked
    /// for and waits on (a page it reads), which must never be dropped.
    @discardableResult
    public func post(_ message: Message, evenIfFull: Bool = false) -> Bool {
        // Only the post that finds the queue empty writes to the pipe: the
        // owner takes the whole queue once woken, so one byte per message
        // was a system call per message for nothing.
        let (accepted, wasEmpty) = queue.withLock { q -> (Bool, Bool) in
            guard evenIfFull || q.count < capacity else { return (false, false) }
            q.append(message)
            queued.store(q.count, ordering: .releasing)
            return (true, q.count == 1)
        }
        guard accepted else {
            droppedCount.add(1, ordering: .relaxed)
            return false
        }
        if wasEmpty { wake() }
        return true
    }

    /// Wakes the owner without a message (to notice a stop flag, say).
    public func wake() {
        var one: UInt8 = 1
        do {
            // nil (EAGAIN): the pipe is full, which already means "wake up".
            _ = try Syscall.nonBlocking("write", "mailbox") { write(writeEnd, &one, 1) }
        } catch {
            // Only a closed or invalid descriptor fails here: a bug, not a state.
            preconditionFailure("\(error)")
        }
    }

    /// Everything queued, oldest first; resets the wake-up.
    public func drain() -> [Message] {
        var sink = [UInt8](repeating: 0, count: 256)
        do {
            while let n = try Syscall.nonBlocking("read", "mailbox", { read(fd, &sink, sink.count) }), n > 0 {}
        } catch {
            preconditionFailure("\(error)")
        }
        return queue.withLock { q in
            let all = q
            q.removeAll(keepingCapacity: true)
            queued.store(0, ordering: .releasing)
            return all
        }
    }

    public var count: Int { queued.load(ordering: .acquiring) }
    public var dropped: Int { droppedCount.load(ordering: .relaxed) }
}
