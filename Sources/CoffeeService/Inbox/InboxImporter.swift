import CoffeeDomain
import CoffeeLifecycle
import CoffeeLogging
import Foundation
import HealthStore
import Syscall

#if canImport(Glibc)
    import Glibc
#endif

/// Imports inbox files (docs/protocol.md §5), one at a time, on a thread of its
/// own (file reads and fsyncs never touch the cooperative pool).
///
/// Each file is one all-or-nothing store commit. It moves to `processed/`
/// only after that commit is durable; a refused file moves to `failed/`
/// beside `<name>.error.json`. Nothing is deleted. A crash between commit and
/// move re-imports the file on restart, which adds nothing (UUID rules).
public actor InboxImporter {
    private let executor = ThreadExecutor(name: "inbox")
    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    /// The inbox's settings, with the defaults of docs/protocol.md §5 and §7.
    public struct Configuration: Sendable {
        /// The folder (`inboxDirectory`); `processed/` and `failed/` are made in it.
        public var inbox: URL
        /// Larger files are refused (`limits.maxFileBytes`, default 256 MiB).
        public var maxFileBytes = 268_435_456
        /// Larger Health exports are refused (`limits.maxExportBytes`, default 16 GiB).
        public var maxExportBytes = 17_179_869_184
        /// A file found by a scan and modified this recently may still be
        /// open for writing; it is left for its close event (or a later
        /// scan). A close or rename event says the writer is done, so it
        /// waits for nothing.
        public var settleTime: TimeInterval = 1
        /// Where the file being imported is recorded before its import
        /// begins (`<dataDirectory>/importing.json`); nil records nothing.
        public var attemptRecord: String?

        public init(inbox: URL) { self.inbox = inbox }
    }

    public nonisolated let inbox: URL
    let configuration: Configuration
    private let parser: InboxFileParser
    private let store: HealthStore
    let counters: ServiceCounters
    private let clock: any WallClock
    let logger: Logger
    private var maxFileBytes: Int { configuration.maxFileBytes }
    private var settleTime: TimeInterval { configuration.settleTime }
    private var rescanScheduled = false
    let attempts: ImportAttemptRecord?

    public init(
        configuration: Configuration, parser: InboxFileParser, store: HealthStore, counters: ServiceCounters,
        clock: any WallClock, logger: Logger
    ) {
        self.logger = logger
        self.configuration = configuration
        self.inbox = configuration.inbox
        self.parser = parser
        self.store = store
        self.counters = counters
        self.clock = clock
        self.attempts = configuration.attemptRecord.map(ImportAttemptRecord.init(path:))
    }

    var processed: URL { inbox.appendingPathComponent("processed") }
    var failed: URL { inbox.appendingPathComponent("failed") }

    /// Creates the inbox and its `processed/` and `failed/` folders.
    public func prepare() throws {
        for url in [inbox, processed, failed] {
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        }
    }

    public func handle(_ events: [InboxEvent]) async {
        var names: [String] = []
        var rescan = false
        var closed: Set<String> = []
        for event in events {
            switch event {
            case .file(let name):
                if !names.contains(name) { names.append(name) }
                closed.insert(name)
            case .created(let name):
                var info = stat()
                let path = inbox.appendingPathComponent(name).path
                let isRegular =
                    (try? Syscall.call("lstat", path) { lstat(path, &info) }) != nil && info.st_mode & S_IFMT == S_IFREG
                if !isRegular && !names.contains(name) { names.append(name) }
            case .rescan: rescan = true
            case .folderGone:
                logger.warning(
                    "inbox folder was removed or replaced; recreating it and rescanning", metadata: ["path": "\(inbox.path)"])
                try? prepare()
                rescan = true
            }
        }
        if rescan {
            await scan()
        } else {
            for name in names { await importFile(named: name, writerDone: closed.contains(name)) }
        }
    }

    /// Imports every candidate file in the inbox, oldest name first; a
    /// name that is not UTF-8 is refused (its bytes escaped in `failed/`).
    public func scan() async {
        let entries: [InboxNames.Entry]
        do {
            entries = try InboxNames.list(inbox.path)
        } catch {
            logger.error("cannot list the inbox; the sweep looks again", metadata: ["error": "\(error)"])
            return
        }
        var names: [String] = []
        for entry in entries {
            switch entry {
            case .text(let name): names.append(name)
            case .undecodable(let bytes): refuseUndecodable(bytes)
            }
        }
        for name in names.sorted() { await importFile(named: name) }
    }

    /// Imports one file, if it is one the inbox takes and it is still there.
    ///
    /// - Parameter writerDone: the file was closed after writing or renamed
    ///   in, so it is complete however recently it was modified.
    public func importFile(named name: String, writerDone: Bool = false) async {
        guard name != "processed", name != "failed", !InboxFileParser.isIgnored(name) else { return }
        let url = inbox.appendingPathComponent(name)
        var info = stat()
        do {
            try Syscall.call("lstat", url.path) { lstat(url.path, &info) }
        } catch {
            // ENOENT: already moved, a repeated event; anything else is the next scan's.
            if error.errno != ENOENT {
                logger.error("cannot look at an inbox file", metadata: ["file": "\(name)", "error": "\(error)"])
            }
            return
        }
        let kind = info.st_mode & S_IFMT
        if kind == S_IFLNK { return refuse(name, InboxFileError("symbolic links are refused; copy or move the file itself in")) }
        if kind == S_IFDIR { return refuse(name, InboxFileError("directories are refused; drop the files themselves")) }
        if kind != S_IFREG { return refuse(name, InboxFileError("not a regular file (a FIFO, socket or device); refused")) }
        guard let format = InboxFormat.of(name) else {
            return refuse(name, InboxFileError("unknown file type; the inbox takes \(InboxFormat.names)"))
        }
        let (limit, key) =
            switch format.sizeLimit {
            case .export: (configuration.maxExportBytes, "limits.maxExportBytes")
            case .file: (maxFileBytes, "limits.maxFileBytes")
            }
        if Int(info.st_size) > limit {
            return refuse(name, InboxFileError("file is \(info.st_size) bytes; \(key) is \(limit)"))
        }
        let modified = Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9
        if !writerDone && Date().timeIntervalSince1970 - modified < settleTime {
            scheduleRescan()  // may still be written in place; its close event or this rescan picks it up
            return
        }
        if let refusal = beginAttempt(name, info) { return refuse(name, refusal) }
        defer { attempts?.end() }
        let started = Date()
        let file: FileHandle
        do {
            file = try Self.open(url.path)
        } catch {
            return refuse(name, InboxFileError("file cannot be read (\(error))"))
        }
        let result: WriteResult
        let reader: any InboxFileReader
        do {
            reader = try format.reader(for: .file(file), InboxFormat.Context(parser: parser, now: clock.now()))
            if format.streams {
                // Streamed into one transaction: memory is a few batches, and
                // a file that fails rolls the whole file back. The file is
                // read and decoded on a thread of its own while the store
                // writes the batches before.
                let handoff = BatchHandoff()
                let counters = self.counters
                counters.importing.withLock {
                    $0 = InboxProgress(file: name, bytes: Int64(info.st_size), read: 0, changesRead: 0)
                }
                defer { counters.importing.withLock { $0 = nil } }
                handoff.start(name: "inbox-reader") {
                    let batch = try reader.next()
                    let (read, changes) = (reader.bytesRead, reader.changesRead)  // on the reader's own thread
                    counters.importing.withLock {
                        $0?.read = read
                        $0?.changesRead = changes
                    }
                    return batch
                }
                defer { handoff.abandon() }
                result = try await store.applyStream { try handoff.take() }
            } else {
                // Read whole when the reader was made: one batch, committed
                // with whatever else is waiting.
                result = try await store.apply(try reader.next() ?? WriteBatch())
            }
        } catch let error as InboxFileError {
            return refuse(name, error)
        } catch {
            // Not the file's fault: it stays, and is tried again once the
            // store can write (after the bus's held batches).
            logger.error(
                "could not store an inbox file; it stays in the inbox", metadata: ["file": "\(name)", "error": "\(error)"])
            scheduleRetryWhenWritable()
            return
        }
        counters.received(reader.changesRead, over: .inbox)  // the reader is done: take() returned nil
        ServiceCounters.bump(counters.stored, by: result.added + result.deleted + result.unknown)
        ServiceCounters.bump(counters.duplicates, by: result.duplicates)
        do {
            let moved = try move(name, to: processed)
            if let summary = reader.summary { try writeSummary(summary, result, of: moved) }
            ServiceCounters.bump(counters.filesProcessed)
            logger.info(
                "imported",
                metadata: [
                    "file": "\(name)", "added": "\(result.added)", "duplicates": "\(result.duplicates)",
                    "deleted": "\(result.deleted)", "anchor": "\(result.anchor)",
                    "seconds": "\(String(format: "%.3f", Date().timeIntervalSince(started)))",
                ])
        } catch {
            logger.error("imported but could not move to processed/", metadata: ["file": "\(name)", "error": "\(error)"])
        }
    }

    private var retryScheduled = false

    /// Scans again once the store can write; at most one such wait at a time.
    private func scheduleRetryWhenWritable() {
        guard !retryScheduled else { return }
        retryScheduled = true
        Task {
            await store.waitUntilWritable()
            try? await Task.sleep(for: .milliseconds(100))  // a store that failed otherwise is not retried in a loop
            retryScheduled = false
            await scan()
        }
    }

    private func scheduleRescan() {
        guard !rescanScheduled else { return }
        rescanScheduled = true
        Task {
            try? await Task.sleep(for: .milliseconds(Int64(settleTime * 1000) + 100))
            rescanScheduled = false
            await scan()
        }
    }

    /// Opens a regular file (checked with lstat just before) without
    /// following a link swapped in since, or blocking on a FIFO.
    public static func open(_ path: String) throws -> FileHandle {
        let fd = try Syscall.call("open", path) { Glibc.open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) }
        return FileHandle(fileDescriptor: fd, closeOnDealloc: true)
    }

    public func close() { executor.stop() }
}
