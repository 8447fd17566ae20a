import CoffeeDomain
import CoffeeLogging
import Foundation
import Synchronization
import Syscall

#if canImport(Glibc)
    import Glibc
#endif

/// `<data>/rejected.jsonl`: every rejected bus message, one JSON object per
/// line (docs/protocol.md §2): `at`, `reason`, `topic`, `body` (the body frame in
/// base64) and `frames` (every frame as it arrived, in base64). Appended and
/// fsynced; a rejected message is never silently dropped.
///
/// Lines that cannot be written (a full disk) are held, in order, and
/// written before the next ones, so the file ends up holding every rejected
/// message and agrees with the `rejected` count. A failed append is cut
/// back to the file's previous length, so a retry never leaves half a line.
/// Held lines are bounded (`maxHeldBytes`); past that the bus stops taking
/// messages (`isBacklogged`) until they are written.
public final class DeadLetterFile: Sendable {
    public let path: String
    public let maxHeldBytes: Int

    private struct State {
        var held: [UInt8] = []
        var heldCount = 0
    }
    private let state = Mutex(State())

    public init(path: String, maxHeldBytes: Int = 64 << 20) {
        self.path = path
        self.maxHeldBytes = maxHeldBytes
    }

    public struct Entry: Sendable {
        public var at: Date
        public var reason: String
        public var topic: String
        public var body: Data
        /// Every frame of the message as it arrived.
        public var frames: [Data]

        public init(at: Date, reason: String, topic: String, body: Data, frames: [Data]) {
            self.at = at
            self.reason = reason
            self.topic = topic
            self.body = body
            self.frames = frames
        }
    }

    /// Lines held because they could not be written yet.
    public var hasPending: Bool { state.withLock { $0.heldCount > 0 } }
    public var pendingCount: Int { state.withLock { $0.heldCount } }
    /// Too much is held: take no more messages until it is written.
    public var isBacklogged: Bool { state.withLock { $0.held.count >= maxHeldBytes } }

    /// Appends what is held and then `entries`, and fsyncs once. On failure
    /// everything stays held for the next call.
    public func append(_ entries: [Entry]) throws(SystemCallError) {
        var bytes: [UInt8] = []
        for e in entries {
            JSONValue.object([
                ("at", .string(RFC3339.string(e.at))),
                ("reason", .string(e.reason)),
                ("topic", .string(e.topic)),
                ("body", .string(e.body.base64EncodedString())),
                ("frames", .array(e.frames.map { .string($0.base64EncodedString()) })),
            ]).write(to: &bytes)
            bytes.append(0x0A)
        }
        try state.withLock { (s: inout State) throws(SystemCallError) in
            s.held += bytes
            s.heldCount += entries.count
            guard !s.held.isEmpty else { return }
            try write(s.held)
            s.held = []
            s.heldCount = 0
        }
    }

    private func write(_ bytes: [UInt8]) throws(SystemCallError) {
        let path = self.path
        let fd = try Syscall.call("open", path) { open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o640) }
        defer { Syscall.close(fd) }
        var info = stat()
        try Syscall.call("fstat", path) { fstat(fd, &info) }
        var failure: SystemCallError?
        bytes.withUnsafeBytes { buffer in
            do throws(SystemCallError) {
                try Syscall.writeAll(fd, buffer, detail: path)
                try Syscall.call("fsync", path) { fsync(fd) }
                // A file empty until now may have just been created: its name is
                // durable only once its folder is synced (a power cut keeps no
                // unsynced name; Tests/powercut found this one).
                if info.st_size == 0 { try DurableFile.syncFolder((path as NSString).deletingLastPathComponent) }
            } catch {
                failure = error
            }
        }
        if let failure {
            _ = ftruncate(fd, info.st_size)  // no half line left for the retry to follow
            throw failure
        }
    }
}
