import CoffeeLifecycle
import CoffeeLogging
import Foundation
import Synchronization

/// The inbox as a service: the files present at start, then whatever the
/// watcher reports, imported one at a time by `InboxImporter` on its thread.
///
/// In a shutdown the watcher stops, the file being imported finishes, and
/// files that arrived meanwhile wait for the next start (the start-up scan
/// finds them).
public final class InboxService: Service {
    public let name = "inbox"
    private let importer: InboxImporter
    private let watcher = Mutex<InboxWatcher?>(nil)
    private let logger = Logger(label: "inbox")

    public init(importer: InboxImporter) {
        self.importer = importer
    }

    /// Creates the inbox and its folders and starts watching it.
    ///
    /// - Throws: the folder cannot be created or watched.
    public func start() async throws {
        let directory = importer.inbox.path
        do {
            try await importer.prepare()
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
        try watcher.start { batch in
            continuation.yield(batch)
            if batch.contains(.folderGone) {
                do {
                    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
                    try watcher.rewatch(directory)
                } catch {
                    logger.error("cannot recreate the inbox; files dropped there wait for a restart", ["error": "\(error)"])
                }
            }
        }
        onGracefulShutdown {
            watcher.cancel()
            continuation.finish()
        }
        await importer.scan()
        for await batch in events {
            if isShuttingDownGracefully { break }  // the rest wait for the next start
            await importer.handle(batch)
        }
        await importer.close()
    }
}

/// The inbox cannot be prepared or watched.
struct InboxServiceError: Error, CustomStringConvertible {
    let description: String
}
