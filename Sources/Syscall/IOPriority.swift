import CLinux

#if canImport(Glibc)
    import Glibc
#endif

/// A thread's I/O priority (`ioprio_set(2)`): what the block layer's
/// scheduler (mq-deadline, bfq) weighs when requests of several threads wait
/// for one disk. Every write a thread submits, its write-back started by
/// `sync_file_range(2)` and its fsyncs included, carries the thread's class.
public struct IOPriority: Sendable, Equatable, CustomStringConvertible {
    /// The kernel's value: class << 13 | level.
    public let value: Int32

    /// The idle class: served only when no other class has requests waiting
    /// (mq-deadline ages a waiting request into service after
    /// `prio_aging_expire`, ten seconds by default), so bulk copies give way
    /// to a store's commits.
    public static let idle = IOPriority(value: 3 << 13)

    public init(value: Int32) { self.value = value }

    /// The class: 0 none (follows the CPU's nice), 1 real-time, 2 best
    /// effort, 3 idle.
    public var ioClass: Int32 { value >> 13 }

    public var description: String {
        ["none", "realtime", "best-effort", "idle"][Int(min(max(ioClass, 0), 3))] + "/\(value & 0x1FFF)"
    }

    /// The calling thread's priority now.
    public static func current() throws(SystemCallError) -> IOPriority {
        IOPriority(value: try Syscall.call("ioprio_get") { clinux_ioprio_get_thread() })
    }

    /// Runs `body` with the calling thread at `priority`, then puts the
    /// thread's own back. Where the call is refused (a kernel without it, a
    /// sandbox), `body` runs at the thread's priority: a priority is a hint,
    /// never a reason to fail the work.
    public static func with<T, E: Error>(_ priority: IOPriority, _ body: () throws(E) -> T) throws(E) -> T {
        guard let own = try? current(),
            (try? Syscall.call("ioprio_set") { clinux_ioprio_set_thread(priority.value) })
                != nil
        else { return try body() }
        defer { _ = clinux_ioprio_set_thread(own.value) }
        return try body()
    }
}
