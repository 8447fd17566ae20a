import CoffeeModel
import Dispatch
import Foundation
import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// What the inbox folder tells us.
public enum InboxEvent: Sendable, Equatable {
    /// A file was closed after writing, or renamed into the folder.
    case file(String)
    /// An entry was created. A regular file is left for its close event;
    /// anything else (a link, a FIFO, a folder) never gets one, so it is
    /// handled now.
    case created(String)
    /// Events were lost (`IN_Q_OVERFLOW`), or a scan is wanted: look at everything.
    case rescan
    /// The folder itself was deleted or moved away.
    case folderGone
}

/// Watches a folder with inotify, read by a Dispatch read source on a
/// private queue (`makeFileSystemObjectSource` does not exist on Linux).
///
/// The descriptor is read dry on every wake-up, or the source fires for
/// ever. Tests can hand in any readable descriptor and write raw
/// `inotify_event` records to it: an injected event source.
public final class InboxWatcher: @unchecked Sendable {
    static let mask = UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

    private let fd: Int32
    private let ownsInotify: Bool
    private let queue = DispatchQueue(label: "inbox-watcher")
    private var source: (any DispatchSourceRead)?
    private var watch: Int32 = -1
    private let logger = Logger(label: "inbox")

    /// Watches `directory`.
    public init(directory: String) throws {
        fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { throw DurableFileError(path: directory, operation: "inotify_init1 for", errno: errno) }
        ownsInotify = true
        try rewatch(directory)
    }

    /// Reads events from `descriptor` (a test's pipe, say) instead of inotify.
    public init(readingFrom descriptor: Int32) {
        fd = descriptor
        ownsInotify = false
    }

    deinit {
        source?.cancel()
        if ownsInotify { close(fd) }
    }

    /// (Re)adds the watch on `directory`, after it was recreated.
    public func rewatch(_ directory: String) throws {
        guard ownsInotify else { return }
        let w = inotify_add_watch(fd, directory, Self.mask)
        guard w >= 0 else { throw DurableFileError(path: directory, operation: "watching", errno: errno) }
        watch = w
    }

    /// Starts delivering events to `handler`, on the watcher's queue.
    public func start(_ handler: @escaping @Sendable ([InboxEvent]) -> Void) {
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
        let fd = self.fd
        source.setEventHandler { @Sendable in
            var events: [InboxEvent] = []
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            while true {
                let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n > 0 {
                    events += Self.decode(buffer.prefix(n))
                } else if n < 0 && errno == EINTR {
                    continue
                } else {
                    break  // EAGAIN: dry
                }
            }
            if !events.isEmpty { handler(events) }
        }
        source.resume()
        self.source = source
    }

    public func cancel() { source?.cancel() }

    /// Raw `inotify_event` records to events. Pure, for tests.
    public static func decode(_ bytes: some Collection<UInt8>) -> [InboxEvent] {
        let bytes = Array(bytes)
        var events: [InboxEvent] = []
        let header = MemoryLayout<inotify_event>.size  // wd, mask, cookie, len: 16 bytes
        var offset = 0
        while offset + header <= bytes.count {
            let mask = bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self) }
            let length = Int(bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self) })
            let nameBytes = bytes[min(bytes.count, offset + header)..<min(bytes.count, offset + header + length)]
            let name = String(decoding: nameBytes.prefix { $0 != 0 }, as: UTF8.self)
            offset += header + length
            if mask & UInt32(IN_Q_OVERFLOW) != 0 {
                events.append(.rescan)
            } else if mask & UInt32(IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED) != 0 {
                events.append(.folderGone)
            } else if !name.isEmpty {
                events.append(mask & UInt32(IN_CREATE) != 0 ? .created(name) : .file(name))
            }
        }
        return events
    }

    /// One raw record, as the kernel writes it: for tests that inject events.
    public static func record(mask: UInt32, name: String = "") -> [UInt8] {
        var nameBytes = Array(name.utf8)
        if !nameBytes.isEmpty {
            nameBytes.append(0)
            while nameBytes.count % 16 != 0 { nameBytes.append(0) }
        }
        var out: [UInt8] = []
        func put(_ v: UInt32) { withUnsafeBytes(of: v.littleEndian) { out += $0 } }
        put(1)
        put(mask)
        put(0)
        put(UInt32(nameBytes.count))
        return out + nameBytes
    }
}

typealias DurableFileError = DurableFile.Failure
