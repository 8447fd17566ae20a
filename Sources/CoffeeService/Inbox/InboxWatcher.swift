import CoffeeLogging
import Dispatch
import Foundation
import Synchronization
import Syscall

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
/// `inotify_event` records to it: an injected event source. The source and
/// the watch are reached from the owner's task and from the watcher's own
/// queue (`rewatch` after the folder is recreated), so both sit behind a lock.
public final class InboxWatcher: Sendable {
    static let mask = UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

    private let fd: Int32
    private let ownsInotify: Bool
    private let queue = DispatchQueue(label: "inbox-watcher")
    private struct State {
        var source: Source?
        var watch: Int32 = -1
    }
    /// Dispatch sources are thread-safe objects; Swift does not know it.
    private struct Source: @unchecked Sendable {
        let read: any DispatchSourceRead
        func cancel() { read.cancel() }
    }
    private let state = Mutex(State())

    /// Watches `directory`.
    ///
    /// - Throws: `SystemCallError` naming `inotify_init1` or `inotify_add_watch` and the folder.
    public init(directory: String) throws(SystemCallError) {
        fd = try Syscall.call("inotify_init1", directory) { inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC)) }
        ownsInotify = true
        do {
            try rewatch(directory)
        } catch {
            Syscall.close(fd)
            throw error
        }
    }

    /// Reads events from `descriptor` (a test's pipe, say) instead of inotify.
    public init(readingFrom descriptor: Int32) {
        fd = descriptor
        ownsInotify = false
    }

    deinit {
        state.withLock { $0.source?.cancel() }
        if ownsInotify { Syscall.close(fd) }
    }

    /// (Re)adds the watch on `directory`, after it was recreated.
    public func rewatch(_ directory: String) throws(SystemCallError) {
        guard ownsInotify else { return }
        let fd = self.fd
        let w = try Syscall.call("inotify_add_watch", directory) { inotify_add_watch(fd, directory, Self.mask) }
        state.withLock { $0.watch = w }
    }

    /// Starts delivering events to `handler`, on the watcher's queue.
    ///
    /// - Throws: `SystemCallError` when the descriptor cannot be made non-blocking.
    public func start(logger: Logger, _ handler: @escaping @Sendable ([InboxEvent]) -> Void) throws(SystemCallError) {
        try Syscall.addStatusFlags(fd, O_NONBLOCK)
        let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
        let fd = self.fd
        source.setEventHandler { @Sendable in
            var events: [InboxEvent] = []
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            do {
                while let n = try Syscall.nonBlocking("read", "inbox watcher", { read(fd, &buffer, buffer.count) }), n > 0 {
                    events += Self.decode(buffer.prefix(n))
                }
            } catch {
                // The descriptor is broken: events may have been lost, so look at everything.
                logger.error("cannot read inbox events; rescanning", metadata: ["error": "\(error)"])
                events.append(.rescan)
            }
            if !events.isEmpty { handler(events) }
        }
        source.resume()
        let held = Source(read: source)
        state.withLock { $0.source = held }
    }

    public func cancel() { state.withLock { $0.source?.cancel() } }

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
            let rawName = nameBytes.prefix { $0 != 0 }
            let name = String(validating: rawName, as: UTF8.self)
            offset += header + length
            if mask & UInt32(IN_Q_OVERFLOW) != 0 || name == nil {
                events.append(.rescan)  // lost events, or a name that is not UTF-8: the scan lists raw names
            } else if mask & UInt32(IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED) != 0 {
                events.append(.folderGone)
            } else if let name, !name.isEmpty {
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
