import CoffeeDomain
import CoffeeLogging
import CoffeeModel
import Foundation
import Syscall

#if canImport(Glibc)
    import Glibc
#endif

/// `<data>/rejected.jsonl`: every rejected bus message, with its reason, topic
/// and raw body (base64), one JSON object per line. Appended and fsynced;
/// a rejected message is never silently dropped.
public final class DeadLetterFile: @unchecked Sendable {
    public let path: String
    private let lock = NSLock()

    public init(path: String) {
        self.path = path
    }

    public struct Entry: Sendable {
        public var at: Date
        public var reason: String
        public var topic: String
        public var body: Data
    }

    /// Appends `entries` and fsyncs once.
    public func append(_ entries: [Entry]) throws {
        guard !entries.isEmpty else { return }
        var bytes: [UInt8] = []
        for e in entries {
            JSONValue.object([
                ("at", .string(RFC3339.string(e.at))),
                ("reason", .string(e.reason)),
                ("topic", .string(e.topic)),
                ("body", .string(e.body.base64EncodedString())),
            ]).write(to: &bytes)
            bytes.append(0x0A)
        }
        lock.lock()
        defer { lock.unlock() }
        let fd = try Syscall.call("open", path) { open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o640) }
        defer { Syscall.close(fd) }
        var failure: SystemCallError?
        bytes.withUnsafeBytes { buffer in
            do throws(SystemCallError) { try Syscall.writeAll(fd, buffer, detail: path) } catch { failure = error }
        }
        if let failure { throw failure }
        try Syscall.call("fsync", path) { fsync(fd) }
    }
}
