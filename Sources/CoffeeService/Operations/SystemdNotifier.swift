import CoffeeLogging
import Foundation
import Syscall

#if canImport(Glibc)
    import Glibc
#endif

/// systemd's notification protocol (sd_notify(3)), spoken directly: one
/// datagram of `KEY=VALUE` lines to the `AF_UNIX` socket that
/// `NOTIFY_SOCKET` names (a leading `@` is the abstract namespace).
///
/// Why not libsystemd's `sd_notify`: the protocol is a documented, stable
/// datagram of a few bytes; speaking it takes forty lines, adds no library
/// to install or link, and lets a test listen with a plain Python socket.
/// Everything else libsystemd offers is unused here.
public final class SystemdNotifier: Sendable {
    /// The socket's path; nil when the service does not run under systemd
    /// (every call is then a no-op).
    public let socketPath: String?
    /// How often systemd wants `WATCHDOG=1` (`WATCHDOG_USEC`, when
    /// `WATCHDOG_PID` is unset or this process); nil for no watchdog.
    public let watchdogInterval: Duration?
    private let logger: Logger

    public init(environment: [String: String] = ProcessInfo.processInfo.environment, logger: Logger) {
        self.logger = logger
        socketPath = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
        let forUs = environment["WATCHDOG_PID"].map { Int32($0) == getpid() } ?? true
        if forUs, let usec = environment["WATCHDOG_USEC"].flatMap(Int64.init), usec > 0 {
            watchdogInterval = .microseconds(usec)
        } else {
            watchdogInterval = nil
        }
    }

    public var isEnabled: Bool { socketPath != nil }

    /// Sends `lines` as one notification; a failure is logged, never thrown
    /// (systemd going away must not stop the service).
    public func notify(_ lines: String...) {
        guard let socketPath else { return }
        do {
            try send(lines.joined(separator: "\n"), to: socketPath)
        } catch {
            logger.warning("could not notify systemd", metadata: ["error": "\(error)", "socket": "\(socketPath)"])
        }
    }

    /// `RELOADING=1` wants the monotonic time (systemd's Type=notify-reload).
    public static var monotonicMicroseconds: String {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return "MONOTONIC_USEC=\(Int64(ts.tv_sec) * 1_000_000 + Int64(ts.tv_nsec) / 1000)"
    }

    private func send(_ message: String, to path: String) throws(SystemCallError) {
        let fd = try Syscall.call("socket", "NOTIFY_SOCKET") {
            socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        }
        defer { Syscall.close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array(path.utf8)
        if bytes.first == UInt8(ascii: "@") { bytes[0] = 0 }  // the abstract namespace
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard bytes.count < capacity else {
            throw SystemCallError(call: "sendto", detail: "NOTIFY_SOCKET too long", errno: ENAMETOOLONG)
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count)
        let payload = Array(message.utf8)
        let sent = payload.withUnsafeBytes { buffer in
            withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                    Result { () throws(SystemCallError) in
                        try Syscall.call("sendto", path) { sendto(fd, buffer.baseAddress, buffer.count, 0, sa, length) }
                    }
                }
            }
        }
        _ = try sent.get()
    }
}
