import CoffeeLifecycle
import CoffeeLogging
import Foundation
import Synchronization

/// The inbox as a service: the files present at start, then whatever the
/// watcher reports, imported one at a time by `InboxImporter` on its thread.
///
/// A sweep every `sweepInterval` finds regular files that no event
/// announced: a hard link made into the folder, a copy by a tool that never
/// closes for writing, a file system that drops events (Telegraf's
/// `directory_monitor` polls for the same reason). Idle, a sweep is one
/// directory listing.
///
/// In a shutdown the watcher stops, the file being imported finishes, and
/// files that arrived meanwhile wait for the next start (the start-up scan
/// finds them).
public final class InboxService: Service {
    public let name = "inbox"
    private let importer: InboxImporter
    private let sweepInterval: Duration
    private let clock: any Clock<Duration>
    private let watcher = Mutex<InboxWatcher?>(nil)
    private let logger: Logger

    /// `inbox.sweepIntervalS`'s default.
    public static let defaultSweepInterval: Duration = .seconds(10)

    public init(
        importer: InboxImporter, sweepInterval: Duration = defaultSweepInterval, clock: any Clock<Duration> = ContinuousClock(),
        logger: Logger
    ) {
        self.logger = logger
        self.importer = importer
        self.sweepInterval = sweepInterval
        self.clock = clock
    }

    /// Creates the inbox and its folders and starts watching it.
    ///
    /// - Throws: the folder cannot be created or watched.
    public func start() async throws {
        let directory = importer.inbox.path
        do {
            try await importer.prepare()
            await importer.recoverAbortedImport()
            let made = try InboxWatcher(directory: directory)
            watcher.withLock { $0 = made }
        } catch {
            throw InboxServiceError(description: "cannot watch inbox \(directory): \(error)")
        }
    }

    public func run() async throws {
        guard let watcher = watcher.withLock({ $0 }) else { return }
        let directory = importer.inbox.path
        let logger = self.logger
        let (events, continuation) = AsyncStream.makeStream(of: [InboxEvent].self)
        try watcher.start(logger: logger) { batch in
            continuation.yield(batch)
            if batch.contains(.folderGone) {
                do {
                    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
                    try watcher.rewatch(directory)
                } catch {
                    logger.error("cannot recreate the inbox; the sweep looks for it again", metadata: ["error": "\(error)"])
                }
            }
        }
        onGracefulShutdown {
            watcher.cancel()
            continuation.finish()
        }
        await importer.scan()
        let (importer, sweepInterval, clock) = (self.importer, self.sweepInterval, self.clock)
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await repeatUntilShutdown(every: sweepInterval, on: clock) { await importer.scan() } }
            for await batch in events {
                if isShuttingDownGracefully { break }  // the rest wait for the next start
                await importer.handle(batch)
            }
        }
        await importer.close()
    }
}

/// The inbox cannot be prepared or watched.
struct InboxServiceError: Error, CustomStringConvertible {
    let description: String
}
