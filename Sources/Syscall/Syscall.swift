import CLinux

#if canImport(Glibc)
    import Glibc
#endif

/// The one way this project makes a raw system call.
///
/// Every call goes through `Syscall.call` (or `nonBlocking`): a call that
/// returns -1 with `EINTR` is retried, and any other failure throws a
/// `SystemCallError` carrying errno, read at once before anything else can
/// overwrite it, and the name of the call. Modelled on swift-nio's
/// `System.swift`, whose `syscall` helper does the same for every call it makes.
public enum Syscall {
    /// Runs `body` (a system call that returns -1 and sets errno on failure)
    /// until it does not fail with `EINTR`.
    ///
    /// - Parameters:
    ///   - name: the call, for the error (`"read"`, `"inotify_add_watch"`).
    ///   - detail: what it was done to (a path), for the error.
    /// - Returns: what the call returned (never -1).
    /// - Throws: `SystemCallError` for any failure but `EINTR`.
    @discardableResult
    @inline(__always)
    public static func call<T: FixedWidthInteger>(
        _ name: StaticString, _ detail: @autoclosure () -> String = "", _ body: () -> T
    ) throws(SystemCallError) -> T {
        while true {
            let result = body()
            if result != -1 { return result }
            let code = errno
            if code == EINTR { continue }
            throw SystemCallError(call: "\(name)", detail: detail(), errno: code)
        }
    }

    /// `call` for a descriptor in non-blocking mode: `EAGAIN` (or
    /// `EWOULDBLOCK`) returns nil instead of throwing.
    @inline(__always)
    public static func nonBlocking<T: FixedWidthInteger>(
        _ name: StaticString, _ detail: @autoclosure () -> String = "", _ body: () -> T
    ) throws(SystemCallError) -> T? {
        while true {
            let result = body()
            if result != -1 { return result }
            let code = errno
            if code == EINTR { continue }
            if code == EAGAIN || code == EWOULDBLOCK { return nil }
            throw SystemCallError(call: "\(name)", detail: detail(), errno: code)
        }
    }

    /// Writes all of `bytes` to `fd`, resuming after short writes.
    public static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, detail: @autoclosure () -> String = "")
        throws(SystemCallError)
    {
        var offset = 0
        while offset < bytes.count {
            offset += try call("write", detail()) { Glibc.write(fd, bytes.baseAddress! + offset, bytes.count - offset) }
        }
    }

    /// Writes all of `bytes` to `fd` at `offset` (`pwrite`), resuming after short writes.
    public static func writeAll(
        _ fd: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int64, detail: @autoclosure () -> String = ""
    ) throws(SystemCallError) {
        var done = 0
        while done < bytes.count {
            done += try call("pwrite", detail()) {
                pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
            }
        }
    }

    /// Sets the calling thread's nice value: on Linux it belongs to the
    /// thread, and 0 names the calling one. Higher is a lower CPU priority;
    /// an unprivileged thread can only raise it.
    public static func setThreadNice(_ nice: Int32, detail: @autoclosure () -> String = "") throws(SystemCallError) {
        try call("setpriority", detail()) { setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, nice) }
    }

    /// Sets `flags` (`O_NONBLOCK`, say) on `fd`'s status flags.
    public static func addStatusFlags(_ fd: Int32, _ flags: Int32) throws(SystemCallError) {
        let current = try call("fcntl(F_GETFL)") { fcntl(fd, F_GETFL) }
        try call("fcntl(F_SETFL)") { fcntl(fd, F_SETFL, current | flags) }
    }

    /// Closes `fd`. `EINTR` is not retried: on Linux the descriptor is gone
    /// either way, and a retry could close one another thread just opened.
    public static func close(_ fd: Int32) {
        _ = Glibc.close(fd)
    }
}

/// A failed system call: which, on what, and errno.
public struct SystemCallError: Error, CustomStringConvertible, Equatable {
    /// The call, as `read` or `fcntl(F_SETFL)`.
    public let call: String
    /// What it was done to (a path, a descriptor's role); may be empty.
    public let detail: String
    public let errno: Int32

    public init(call: String, detail: String = "", errno: Int32) {
        self.call = call
        self.detail = detail
        self.errno = errno
    }

    /// "read inbox watcher: Bad file descriptor (errno 9)"
    public var description: String {
        let what = detail.isEmpty ? call : "\(call) \(detail)"
        return "\(what): \(String(cString: strerror(errno))) (errno \(errno))"
    }

    /// The disk or the quota is full: a state to wait out, not a bug.
    public var isNoSpace: Bool { errno == ENOSPC || errno == EDQUOT }
}
