import CoffeeDomain
import CoffeeLifecycle
import CoffeeLogging
import CoffeeModel
import Foundation
@_spi(Testing) import HealthStore  // the test hook stalls the store's thread
import Synchronization
import Syscall
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
    /// The file it was read from, read again at SIGHUP (nil: embedded defaults).
    private let configurationPath: String?
    private let clock: any WallClock
    private let counters = ServiceCounters()
    private let notifier: SystemdNotifier
    private let logger: Logger
    /// Starting, ready, draining: what `/readyz` and systemd are told.
    private let phase = ServicePhase()
    /// Test hooks (`COFFEE_TRACKER_TEST_HOOKS=1`): SIGUSR1 stalls the
    /// store's thread for 5 s, as a wedged fsync would, and the process
    /// kills itself once it begins importing an inbox file named
    /// `COFFEE_TRACKER_TEST_DIE_IMPORTING`. Off otherwise.
    private let testHooks = ProcessInfo.processInfo.environment["COFFEE_TRACKER_TEST_HOOKS"] == "1"

    public init(
        configuration: ServiceConfiguration, configurationPath: String? = nil, clock: any WallClock = SystemClock(),
        notifier: SystemdNotifier = SystemdNotifier(), logger: Logger = Logger(label: "service")
    ) {
        self.logger = logger
        self.configuration = configuration
        self.configurationPath = configurationPath
        self.clock = clock
        self.notifier = notifier
    }

    /// A start-up failure, with what to do about it.
    public struct StartupError: Error, CustomStringConvertible {
        public let description: String
    }

    /// A part that failed after the start, or a drain that passed its deadline.
    public struct RunError: Error, CustomStringConvertible {
        public let description: String
    }

    /// Runs until `stop` yields (a signal), then drains and returns.
    ///
    /// - Throws: `StartupError` when the service cannot start: a folder it
    ///   cannot create, a database it must not touch, an endpoint it cannot
    ///   bind; `RunError` when a part fails while running, or the drain
    ///   passes its deadline (named).
    public func run(until stop: AsyncStream<Int32>) async throws {
        let c = configuration
        do {
            try FileManager.default.createDirectory(atPath: c.dataDirectory, withIntermediateDirectories: true)
        } catch {
            throw StartupError(description: "cannot create data directory \(c.dataDirectory): \(error.localizedDescription)")
        }
        // Held until run() returns: one service per store, and no restore under it.
        let taken: DirectoryLock?
        do {
            taken = try DirectoryLock.take(directory: c.dataDirectory)
        } catch {
            throw StartupError(description: "cannot lock the data directory \(c.dataDirectory): \(error)")
        }
        guard let lock = taken else {
            throw StartupError(
                description:
                    "another coffee-tracker holds the data directory \(c.dataDirectory) (its \(DirectoryLock.fileName)); stop it first, or give this one a dataDirectory of its own"
            )
        }
        defer { withExtendedLifetime(lock) {} }
        let security: SecuritySetup
        do {
            security = try SecuritySetup.prepare(c)
        } catch {
            throw StartupError(description: "\(error)")
        }
        for warning in security.warnings { logger.warning("\(warning)") }
        let parts = try makeParts(security)
        // Under the unit's TimeoutStopSec (60 s): a drain that hangs is
        // cancelled, and the service exits saying so, before systemd kills it.
        let group = ServiceGroup(services: parts.services, maximumGracefulShutdownDuration: .seconds(50))
        let signals = Task {
            // SIGHUP reloads; SIGINT, SIGTERM (or the stream's end) drain.
            var last: Int32?
            for await signal in stop {
                if Task.isCancelled { return }
                if signal == SIGHUP {
                    ConfigurationReload(
                        running: configuration, path: configurationPath, registry: security.registry, notifier: notifier
                    ).reload()
                    continue
                }
                if signal == SIGUSR1 {
                    if testHooks { parts.store.stallThread(for: 5) }
                    continue
                }
                last = signal
                break
            }
            if Task.isCancelled { return }
            phase.enterDraining()
            notifier.notify("STOPPING=1", "STATUS=draining")
            logger.notice("draining", metadata: ["signal": "\(last.map(SignalStream.name) ?? "end of input")"])
            group.triggerGracefulShutdown()
        }
        defer { signals.cancel() }
        do {
            try await group.run {
                self.writeEndpoints(parts)
                let anchor = await parts.store.anchor
                self.phase.enterReady()
                self.notifier.notify("READY=1", "STATUS=" + (await self.status(parts)))
                self.logger.notice(
                    "ready",
                    metadata: [
                        "anchor": "\(anchor)", "store": "\(c.storePath)", "pid": "\(ProcessInfo.processInfo.processIdentifier)",
                    ])
            }
        } catch let error as ServiceGroupError {
            // A part that could not start says why in its own words (a taken
            // port, an inbox that cannot be watched); a later failure is named.
            if error.isStartFailure, let underlying = error.underlying { throw StartupError(description: "\(underlying)") }
            throw RunError(description: "\(error)")
        }
        // ipc:// socket files bound here go with the service.
        for endpoint in parts.ingest.boundEndpoints + parts.broadcaster.boundEndpoints + parts.query.boundEndpoints
        where endpoint.hasPrefix("ipc:///") {
            _ = unlink(String(endpoint.dropFirst("ipc://".count)))
        }
        let anchor = await parts.model.anchor
        logger.notice(
            "stopped",
            metadata: [
                "anchor": "\(anchor)", "received": "\(counters.received.value)", "stored": "\(counters.stored.value)",
                "duplicates": "\(counters.duplicates.value)", "rejected": "\(counters.rejected.value)",
            ])
    }

    /// The one-line summary systemd shows (`STATUS=`).
    private func status(_ parts: Parts) async -> String {
        let anchor = await parts.store.anchor
        let fault = parts.store.isFaulted ? " STORE FAULT:" + ((await parts.store.faultDescription) ?? "") : ""
        return
            "anchor \(anchor), \(counters.received.value) received, \(counters.stored.value) stored, "
            + "\(counters.subscribers.value) subscriptions\(fault)"
    }

    /// Every part, in start order. The store opens first, since the parts
    /// after it hold it; a part that cannot be made after it (a bind that
    /// fails) throws out of here with the store still open, and `serve`
    /// then exits, which releases the file.
    private func makeParts(_ security: SecuritySetup) throws -> Parts {
        let c = configuration
        let context = ZMQContext()
        let validator = DrinkValidator(limits: c.drinkLimits)
        let cache = ModelCache(url: URL(fileURLWithPath: c.modelCachePath))
        let model = CoffeeData(model: c.caffeineModel, clock: clock, cache: cache)
        let store = try HealthStore(configuration: c.storeConfiguration(clock: clock))
        let controller = StoreFollower(store: store, model: model, cache: cache, clock: clock)
        do {
            let broadcaster = try Broadcaster(
                configuration: c.broadcasterConfiguration(curve: security.server("updates")), context: context, store: store,
                counters: counters)
            let handler = QueryHandler(
                store: store, model: model, controller: controller, validator: validator, counters: counters, clock: clock,
                maxMessageBytes: c.limits.maxMessageBytes, registry: security.registry, backupDirectory: c.backupPath)
            let query = try QueryEndpoint(
                configuration: c.queryConfiguration(curve: security.server("query")), context: context, handler: handler)
            let ingest = try IngestEndpoint(
                configuration: c.ingestConfiguration(curve: security.server("ingest"), keys: security.keys),
                context: context, store: store.submissions, decoder: BatchDecoder(validator: validator),
                deadLetters: DeadLetterFile(path: c.deadLetterPath), counters: counters, clock: clock,
                registry: security.registry)
            let dieWhileImporting = testHooks ? ProcessInfo.processInfo.environment["COFFEE_TRACKER_TEST_DIE_IMPORTING"] : nil
            let importer = InboxImporter(
                configuration: c.importerConfiguration(dieWhileImporting: dieWhileImporting),
                parser: InboxFileParser(decoder: BatchDecoder(validator: validator)), store: store, counters: counters,
                clock: clock)

            let zap = try security.registry.map { try ZAPHandler(context: context, registry: $0, counters: counters) }
            let partsBox = PartsBox()
            let pictures = ModelPictures(store: store, model: model, follower: controller, chart: c.chart, clock: clock)
            let http = try c.httpConfiguration.map { httpConfiguration in
                try HTTPEndpoint(configuration: httpConfiguration) { method, path in
                    guard let parts = partsBox.parts else { return HTTPResponse(status: 503, body: "starting\n") }
                    return await OperationsRoutes(
                        store: parts.store, phase: self.phase,
                        metrics: ServiceMetrics(
                            counters: self.counters, store: parts.store, broadcaster: parts.broadcaster, model: parts.model),
                        pictures: pictures
                    ).answer(method, path)
                }
            }
            // Each model goes to the bus's subscribers and to the page's event streams.
            let modelService = ModelService(
                store: store, model: model, controller: controller, configuration: c.modelServiceConfiguration,
                publish: { snapshot in
                    let body = JSONValue.object(WireFormat.members(snapshot)).data()
                    broadcaster.publish("model", encoded: body)
                    if let http, http.hasEventStreams { http.publish(event: HTTPResponse.event("model", json: body)) }
                })
            var probes: [OperationsService.Probe] = [
                ("store", { await store.answers(within: .seconds(1)) }),
                ("updates", { await broadcaster.answers(within: .seconds(1)) }),
                ("query", { await query.answers(within: .seconds(1)) }),
                ("ingest", { await ingest.answers(within: .seconds(1)) }),
            ]
            if let zap { probes.append(("zap", { await zap.answers(within: .seconds(1)) })) }
            let operations = OperationsService(notifier: notifier, probes: probes) {
                guard let parts = partsBox.parts else { return "starting" }
                return await self.status(parts)
            }
            let parts = Parts(
                store: store, cache: cache, zap: zap, broadcaster: broadcaster, model: model, modelService: modelService,
                query: query, ingest: ingest,
                inbox: InboxService(importer: importer, sweepInterval: c.inboxSweepInterval),
                http: http, operations: operations, serverKey: security.keys?.publicKey)
            partsBox.set(parts)
            return parts
        }
    }

    /// The service's parts; `services` is the group's start order.
    private struct Parts: Sendable {
        let store: HealthStore
        let cache: ModelCache
        /// The ZAP handler, under `security.curve`: up before any endpoint binds.
        let zap: ZAPHandler?
        let broadcaster: Broadcaster
        let model: CoffeeData
        let modelService: ModelService
        let query: QueryEndpoint
        let ingest: IngestEndpoint
        let inbox: InboxService
        /// The monitoring endpoint (`http.bind`), when on.
        let http: HTTPEndpoint?
        /// STATUS and the watchdog for systemd.
        let operations: OperationsService
        /// The service's public key under CURVE, for `endpoints.json`.
        let serverKey: String?
        /// Gives memory back after bursts of large input; first, so that
        /// its allocator settings hold for every part.
        let memory = MemoryReclaimer()

        /// Monitoring starts right after the store, so that `/healthz` and
        /// `/readyz` answer while the rest starts and drains; the watchdog
        /// starts last, once there is everything to watch.
        var services: [any Service] {
            [memory, store] + (http.map { [$0] } ?? []) + [cache] + (zap.map { [$0] } ?? [])
                + [broadcaster, modelService, query, ingest, inbox, operations]
        }
    }

    /// The parts, for the HTTP routes and the status line made before they exist.
    private final class PartsBox: Sendable {
        private let value = Mutex<Parts?>(nil)
        var parts: Parts? { value.withLock { $0 } }
        func set(_ parts: Parts) { value.withLock { $0 = parts } }
    }

    /// `<data>/endpoints.json`: the endpoints really bound, so that clients
    /// and tests can find ports chosen by the system (`tcp://127.0.0.1:*`).
    private func writeEndpoints(_ parts: Parts) {
        let json = JSONValue.object([
            ("ingest", .array(parts.ingest.boundEndpoints.map { .string($0) })),
            ("updates", .array(parts.broadcaster.boundEndpoints.map { .string($0) })),
            ("query", .array(parts.query.boundEndpoints.map { .string($0) })),
            ("http", parts.http?.boundAddress.map { .string($0) } ?? .null),
            ("serverKey", parts.serverKey.map { .string($0) } ?? .null),
            ("pid", .int(Int64(ProcessInfo.processInfo.processIdentifier))),
        ])
        do {
            try DurableFile.write(json.data(), to: URL(fileURLWithPath: configuration.endpointsPath))
        } catch {
            logger.warning("could not write endpoints file", metadata: ["error": "\(error)"])
        }
    }
}
