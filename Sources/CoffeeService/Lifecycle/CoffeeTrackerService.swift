import CoffeeDomain
import CoffeeLifecycle
import CoffeeLogging
import CoffeeModel
import Foundation
import HealthStore
import Synchronization
import ZeroMQ

#if canImport(Glibc)
    import Glibc
#endif

/// `coffee-tracker serve`: the store, the model and the endpoints composed
/// as one `ServiceGroup`, run until a signal, then drained (PROTOCOL.md §8).
///
/// The order of the group is the data flow read from the store outwards,
/// and the drain is that order reversed: inputs stop first (each committing
/// what it took), then the model takes its last round and publishes it,
/// then the publisher sends what it holds, and the store closes last.
public final class CoffeeTrackerService: Sendable {
    public let configuration: ServiceConfiguration
    private let clock: any WallClock
    private let counters = ServiceCounters()
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
    /// - Throws: `StartupError` when the service cannot start: a folder it
    ///   cannot create, a database it must not touch, an endpoint it cannot
    ///   bind; or when a part fails while running (named).
    public func run(until stop: AsyncStream<Int32>) async throws {
        let c = configuration
        do {
            try FileManager.default.createDirectory(atPath: c.dataDirectory, withIntermediateDirectories: true)
        } catch {
            throw StartupError(description: "cannot create data directory \(c.dataDirectory): \(error.localizedDescription)")
        }
        let security: SecuritySetup
        do {
            security = try SecuritySetup.prepare(c)
        } catch {
            throw StartupError(description: "\(error)")
        }
        for warning in security.warnings { logger.warning("\(warning)") }
        let parts = try makeParts(security)
        let group = ServiceGroup(services: parts.services)
        let signals = Task {
            // SIGHUP reloads; SIGINT, SIGTERM (or the stream's end) drain.
            var last: Int32?
            for await signal in stop {
                if Task.isCancelled { return }
                if signal == SIGHUP {
                    reload(security)
                    continue
                }
                last = signal
                break
            }
            if Task.isCancelled { return }
            logger.notice("draining", ["signal": last.map(SignalStream.name) ?? "end of input"])
            group.triggerGracefulShutdown()
        }
        defer { signals.cancel() }
        do {
            try await group.run {
                self.writeEndpoints(parts)
                let anchor = await parts.store.anchor
                self.logger.notice(
                    "ready", ["anchor": "\(anchor)", "store": c.storePath, "pid": "\(ProcessInfo.processInfo.processIdentifier)"])
            }
        } catch let error as ServiceGroupError {
            // A part that could not start says why in its own words (a taken
            // port, an inbox that cannot be watched); a later failure is named.
            if error.isStartFailure, let underlying = error.underlying { throw StartupError(description: "\(underlying)") }
            throw StartupError(description: "\(error)")
        }
        let anchor = await parts.model.anchor
        logger.notice(
            "stopped",
            [
                "anchor": "\(anchor)", "received": "\(counters.received.value)", "stored": "\(counters.stored.value)",
                "duplicates": "\(counters.duplicates.value)", "rejected": "\(counters.rejected.value)",
            ])
    }

    /// SIGHUP: the clients directory is read again; a bad certificate keeps
    /// the old list and says why.
    private func reload(_ security: SecuritySetup) {
        guard let registry = security.registry else {
            logger.notice("SIGHUP: nothing to reload (no security.curve)")
            return
        }
        do {
            let count = try registry.reload()
            logger.notice("reloaded the clients directory", ["clients": "\(count)", "directory": registry.directory])
        } catch {
            logger.error("could not reload the clients directory; keeping the old list", ["error": "\(error)"])
        }
    }

    /// Every part, in start order. The store opens last here, so that
    /// nothing after it can fail and leave it open outside the group.
    private func makeParts(_ security: SecuritySetup) throws -> Parts {
        let c = configuration
        let context = ZMQContext()
        let validator = DrinkValidator(limits: c.limits)
        let cache = CoffeeDataStore(url: URL(fileURLWithPath: c.modelCachePath))
        let model = CoffeeData(model: c.caffeineModel, clock: clock, cache: cache)
        let store = try HealthStore(
            configuration: .init(path: c.storePath, tombstoneRetention: c.tombstoneRetentionDays * 86_400, clock: clock))
        let controller = HealthKitController(store: store, model: model, cache: cache, clock: clock)
        do {
            var updates = Broadcaster.Configuration()
            updates.bind = c.updatesBind
            updates.sendHighWaterMark = c.updatesSendHighWaterMark
            updates.heartbeatInterval = .milliseconds(Int64(c.heartbeatIntervalS * 1000))
            updates.curve = security.server("updates")
            let broadcaster = try Broadcaster(configuration: updates, context: context, store: store, counters: counters)

            let modelService = ModelService(
                store: store, model: model, controller: controller,
                configuration: .init(
                    roundInterval: .milliseconds(c.modelIntervalMs),
                    refreshInterval: .milliseconds(Int64(c.refreshIntervalS * 1000))),
                publish: { broadcaster.publish($0) })

            var queryConfiguration = QueryEndpoint.Configuration()
            queryConfiguration.bind = c.queryBind
            queryConfiguration.maxMessageBytes = c.maxMessageBytes
            queryConfiguration.curve = security.server("query")
            let handler = QueryHandler(
                store: store, model: model, controller: controller, validator: validator, counters: counters, clock: clock,
                maxMessageBytes: c.maxMessageBytes, registry: security.registry)
            let query = try QueryEndpoint(configuration: queryConfiguration, context: context, handler: handler)

            var ingestConfiguration = IngestEndpoint.Configuration()
            ingestConfiguration.bind = c.ingestBind
            ingestConfiguration.connect = c.ingestConnect
            ingestConfiguration.receiveHighWaterMark = c.ingestReceiveHighWaterMark
            ingestConfiguration.maxMessageBytes = c.maxMessageBytes
            ingestConfiguration.curve = security.server("ingest")
            ingestConfiguration.clientKeys = security.keys
            let ingest = try IngestEndpoint(
                configuration: ingestConfiguration, context: context, store: store, decoder: BatchDecoder(validator: validator),
                deadLetters: DeadLetterFile(path: c.deadLetterPath), counters: counters, clock: clock,
                registry: security.registry)

            var inboxConfiguration = InboxImporter.Configuration(inbox: URL(fileURLWithPath: c.inboxDirectory))
            inboxConfiguration.maxFileBytes = c.maxFileBytes
            let importer = InboxImporter(
                configuration: inboxConfiguration, parser: InboxFileParser(decoder: BatchDecoder(validator: validator)),
                store: store, counters: counters, clock: clock)

            let zap = try security.registry.map { try ZAPHandler(context: context, registry: $0, counters: counters) }
            return Parts(
                store: store, cache: cache, zap: zap, broadcaster: broadcaster, model: model, modelService: modelService,
                query: query, ingest: ingest,
                inbox: InboxService(importer: importer, sweepInterval: .milliseconds(Int64(c.inboxSweepIntervalS * 1000))),
                serverKey: security.keys?.publicKey)
        }
    }

    /// The service's parts; `services` is the group's start order.
    private struct Parts: Sendable {
        let store: HealthStore
        let cache: CoffeeDataStore
        /// The ZAP handler, under `security.curve`: up before any endpoint binds.
        let zap: ZAPHandler?
        let broadcaster: Broadcaster
        let model: CoffeeData
        let modelService: ModelService
        let query: QueryEndpoint
        let ingest: IngestEndpoint
        let inbox: InboxService
        /// The service's public key under CURVE, for `endpoints.json`.
        let serverKey: String?

        var services: [any Service] {
            [store, cache] + (zap.map { [$0] } ?? []) + [broadcaster, modelService, query, ingest, inbox]
        }
    }

    /// `<data>/endpoints.json`: the endpoints really bound, so that clients
    /// and tests can find ports chosen by the system (`tcp://127.0.0.1:*`).
    private func writeEndpoints(_ parts: Parts) {
        let json = JSONValue.object([
            ("ingest", .array(parts.ingest.boundEndpoints.map { .string($0) })),
            ("updates", .array(parts.broadcaster.boundEndpoints.map { .string($0) })),
            ("query", .array(parts.query.boundEndpoints.map { .string($0) })),
            ("serverKey", parts.serverKey.map { .string($0) } ?? .null),
            ("pid", .int(Int64(ProcessInfo.processInfo.processIdentifier))),
        ])
        do {
            try DurableFile.write(json.data(), to: URL(fileURLWithPath: configuration.endpointsPath))
        } catch {
            logger.warning("could not write endpoints file", ["error": "\(error)"])
        }
    }
}
