import CoffeeDomain
import CoffeeModel
import Foundation
import Logging

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
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o640)
        guard fd >= 0 else { throw DurableFile.Failure(path: path, operation: "opening", errno: errno) }
        defer { close(fd) }
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeMutableBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 {
                if errno == EINTR { continue }
                throw DurableFile.Failure(path: path, operation: "appending to", errno: errno)
            }
            offset += n
        }
        guard fsync(fd) == 0 else { throw DurableFile.Failure(path: path, operation: "syncing", errno: errno) }
    }
}
