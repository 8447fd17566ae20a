import CoffeeDomain
import CoffeeModel
import Foundation
import HealthStore
import Logging
import Synchronization
import ZeroMQ

/// `coffee-tracker serve`: the store, the model and the endpoints, composed,
/// run until a signal, then drained (PROTOCOL.md §8).
public final class CoffeeTrackerService: Sendable {
    public let configuration: ServiceConfiguration
    private let clock: any WallClock
    private let counters = ServiceCounters()
    private let shuttingDown = Atomic<Bool>(false)
    private let logger = Logger(label: "service")

    public init(configuration: ServiceConfiguration, clock: any WallClock = SystemClock()) {
        self.configuration = configuration
        self.clock = clock
    }

    /// A start-up failure, with what to do about it.
    public struct StartupError: Error, CustomStringConvertible {
        public let description: String
    }

    /// Runs until `stop` yields (a signal), then drains and returns.
    ///
    /// - Throws: `StartupError` (or the underlying error) when the service
    ///   cannot start: a folder it cannot create, a database it must not
    ///   touch, an endpoint it cannot bind.
    public func run(until stop: AsyncStream<Int32>) async throws {
        let c = configuration
        do {
            try FileManager.default.createDirectory(atPath: c.dataDirectory, withIntermediateDirectories: true)
        } catch {
            throw StartupError(description: "cannot create data directory \(c.dataDirectory): \(error.localizedDescription)")
        }
        let store = try HealthStore(
            configuration: .init(
                path: c.storePath, tombstoneRetention: c.tombstoneRetentionDays * 86_400, clock: clock))
        let cache = CoffeeDataStore(url: URL(fileURLWithPath: c.modelCachePath))
        let model = CoffeeData(model: c.caffeineModel, clock: clock, cache: cache)
        let controller = HealthKitController(store: store, model: model, cache: cache, clock: clock)
        do {
            try await controller.load()
        } catch {
            await store.close()
            throw StartupError(description: "cannot load the model from the store: \(error)")
        }
        _ = try? await store.purgeTombstones()

        // Subscribe downstream before any input can commit, so that no commit
        // between start-up and the first message goes unannounced or unfollowed.
        // Both observers run on the store's thread and only queue.
        await store.observeCommits { batch in model.arrive(batch) }

        let context = ZMQContext()
        let validator = DrinkValidator(limits: c.limits)
        let handler = QueryHandler(
            store: store, model: model, controller: controller, caffeine: c.caffeineModel, validator: validator, clock: clock,
            counters: counters, maxMessageBytes: c.maxMessageBytes,
            isShuttingDown: { [self] in self.shuttingDown.load(ordering: .relaxed) })
        let query = QueryEndpoint()
        let broadcaster = Broadcaster(counters: counters)
        // Each commit is queued for publishing from the store's own thread
        // (what is queued before the publisher starts waits for it).
        await store.observeCommits { batch in broadcaster.announce(batch, store: store) }
        let ingest = IngestEndpoint(counters: counters, deadLetters: DeadLetterFile(path: c.deadLetterPath))
        /// Undoes a partial start; every part tolerates never having started.
        func abandon(_ error: any Error, _ what: String) async -> StartupError {
            await ingest.stop()
            await query.stop(grace: .zero)
            await broadcaster.stop()
            await store.close()
            return StartupError(description: what + "\(error)")
        }
        do {
            try await broadcaster.start(
                context: context, bind: c.updatesBind, sendHighWaterMark: c.updatesSendHighWaterMark,
                heartbeatInterval: c.heartbeatIntervalS, initialAnchor: await store.anchor)
            try await query.start(context: context, bind: c.queryBind, maxMessageBytes: c.maxMessageBytes, handler: handler)
            try await ingest.start(
                context: context, bind: c.ingestBind, connect: c.ingestConnect,
                receiveHighWaterMark: c.ingestReceiveHighWaterMark, maxMessageBytes: c.maxMessageBytes,
                decoder: BatchDecoder(validator: validator), clock: clock, store: store)
        } catch {
            throw await abandon(error, "")
        }
        // The inbox: files present now, then whatever the watcher reports.
        let importer = InboxImporter(
            inbox: URL(fileURLWithPath: c.inboxDirectory),
            parser: InboxFileParser(decoder: BatchDecoder(validator: validator)), store: store, counters: counters,
            maxFileBytes: c.maxFileBytes, clock: clock)
        let watcher: InboxWatcher
        do {
            try await importer.prepare()
            watcher = try InboxWatcher(directory: c.inboxDirectory)
        } catch {
            throw await abandon(error, "cannot watch inbox \(c.inboxDirectory): ")
        }
        let (inboxEvents, inboxContinuation) = AsyncStream.makeStream(of: [InboxEvent].self)
        watcher.start { events in
            inboxContinuation.yield(events)
            if events.contains(.folderGone) {
                try? FileManager.default.createDirectory(atPath: c.inboxDirectory, withIntermediateDirectories: true)
                try? watcher.rewatch(c.inboxDirectory)
            }
        }
        let inboxTask = Task {
            await importer.scan()
            for await events in inboxEvents {
                if self.shuttingDown.load(ordering: .relaxed) { break }  // the rest wait for the next start
                await importer.handle(events)
            }
        }
        writeEndpoints(ingest: ingest.boundEndpoints, updates: broadcaster.boundEndpoints, query: query.boundEndpoints)

        // Downstream of the commit: the model follows the store and is
        // published, both coalesced to one round per interval (the
        // broadcaster announces every commit itself).
        let interval = Duration.milliseconds(c.modelIntervalMs)
        let follower = Task { await controller.follow(every: interval) }
        let modelChanges = await model.changes()
        let modelPublisher = Task {
            for await _ in modelChanges {
                await self.publishModel(model, broadcaster)
                try? await Task.sleep(for: interval)  // coalesce: at most one per interval
            }
        }
        let refresher = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(Int64(c.refreshIntervalS * 1000)))
                if Task.isCancelled { break }
                await self.publishModel(model, broadcaster)
            }
        }
        let purger = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(3600))
                if Task.isCancelled { break }
                do { try await store.purgeTombstones() } catch { logger.error("tombstone purge failed", ["error": "\(error)"]) }
            }
        }
        await publishModel(model, broadcaster)
        let readyAnchor = await store.anchor
        logger.notice(
            "ready",
            ["anchor": "\(readyAnchor)", "store": c.storePath, "pid": "\(ProcessInfo.processInfo.processIdentifier)"])

        var signals = stop.makeAsyncIterator()
        let sig = await signals.next()
        logger.notice("draining", ["signal": sig.map(SignalStream.name) ?? "end of input"])

        // Drain: stop taking input, commit what is held, publish the last
        // model, close the sockets with a bounded linger.
        shuttingDown.store(true, ordering: .relaxed)
        watcher.cancel()
        inboxContinuation.finish()
        await inboxTask.value  // the file being imported finishes
        await importer.close()
        await ingest.stop()
        await query.stop()
        // Every commit is made and published while the store can still be
        // read: a large commit is paged out from it.
        await store.commitPending()
        await broadcaster.sent()
        // The model's rounds end; the last one runs here, while the store
        // can still be read (a large commit is caught up from it).
        model.endArrivals()
        follower.cancel()  // ends its pause
        await follower.value
        await controller.catchUp()
        await store.close()
        refresher.cancel()
        purger.cancel()
        modelPublisher.cancel()
        await publishModel(model, broadcaster)
        await broadcaster.stop()
        await model.close()
        await cache.close()
        let finalAnchor = await model.anchor
        logger.notice("stopped", ["anchor": "\(finalAnchor)"])
    }

    private func publishModel(_ model: CoffeeData, _ broadcaster: Broadcaster) async {
        guard let snapshot = await model.snapshot() else { return }
        broadcaster.publish("model", .object(WireFormat.members(snapshot)))
    }

    /// `<data>/endpoints.json`: the endpoints really bound, so that clients
    /// and tests can find ports chosen by the system (`tcp://127.0.0.1:*`).
    private func writeEndpoints(ingest: [String], updates: [String], query: [String]) {
        let json = JSONValue.object([
            ("ingest", .array(ingest.map { .string($0) })),
            ("updates", .array(updates.map { .string($0) })),
            ("query", .array(query.map { .string($0) })),
            ("pid", .int(Int64(ProcessInfo.processInfo.processIdentifier))),
        ])
        do {
            try DurableFile.write(json.data(), to: URL(fileURLWithPath: configuration.endpointsPath))
        } catch {
            logger.warning("could not write endpoints file", ["error": "\(error)"])
        }
    }
}
