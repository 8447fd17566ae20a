import CoffeeAlerts
import CoffeeDomain
import CoffeeLifecycle
import CoffeeModel
import Foundation
import HealthStore
import Synchronization
import Syscall
import ZeroMQ

/// The composition itself: every part made, in the group's order.
extension CoffeeTrackerService {
    /// Every part, in start order. The store opens first, since the parts
    /// after it hold it; a part that cannot be made after it (a bind that
    /// fails) throws out of here with the store still open, and `serve`
    /// then exits, which releases the file.
    func makeParts(_ security: SecuritySetup) throws -> Parts {
        let c = configuration
        let context = ZMQContext()
        // Every part's logger comes from the service's (`Logger.part`), with what it says on every line.
        let cache = ModelCache(url: URL(fileURLWithPath: c.modelCachePath), logger: logger.part("model-cache"))
        let store = try HealthStore(configuration: c.storeConfiguration(clock: clock), logger: logger.part("store"))
        do {
            // The configuration's defaults with what the person set, kept and owned by the store (§15).
            let validator = DrinkValidator(limits: c.drinkLimits, settings: store.liveSettings)
            // The key push services know this service by (§17): made at the first start.
            let pushKey = try WebPush.Key.loadOrCreate(path: c.pushKeyPath)
            let broadcaster = try Broadcaster(
                configuration: c.broadcasterConfiguration(curve: security.server("updates")), context: context, store: store,
                counters: counters, logger: logger.part("updates"))
            // A standby takes no bus events and no inbox files: its follower of the primary stands in their place.
            let standby = try c.follow.map {
                try StandbyService(
                    follow: $0, store: store, pushKey: pushKey.publicKeyText, pushKeyPath: c.pushKeyPath,
                    logger: logger.part("standby"))
            }
            let model = ModelService(
                store: store, cache: cache, clock: clock,
                configuration: c.modelServiceConfiguration, logger: logger.part("model"))
            // One dead-letter file, which the bus and the broker's command topics share.
            let deadLetters = DeadLetterFile(path: c.deadLetterPath)
            let outbound = try makeOutbound(
                store: store, model: model, broadcaster: broadcaster, standby: standby != nil,
                commands: MQTTCommands(
                    store: store, decoder: BatchDecoder(validator: validator), deadLetters: deadLetters, counters: counters,
                    clock: clock, logger: logger.part("mqtt")), pushKey: pushKey)
            let handler = QueryHandler(
                store: store, model: model, validator: validator, counters: counters, clock: clock,
                maxMessageBytes: c.limits.maxMessageBytes, registry: security.registry, backupDirectory: c.backupPath,
                following: standby?.status, outbound: outbound, pushKey: pushKey, logger: logger.part("query"))
            let query = try QueryEndpoint(
                configuration: c.queryConfiguration(curve: security.server("query")), context: context, handler: handler,
                logger: logger.part("query"))
            let ingest =
                try standby != nil
                ? nil
                : IngestEndpoint(
                    configuration: c.ingestConfiguration(curve: security.server("ingest"), keys: security.keys),
                    context: context, store: store.submissions, decoder: BatchDecoder(validator: validator),
                    deadLetters: deadLetters, counters: counters, clock: clock,
                    registry: security.registry, logger: logger.part("ingest"))
            let inbox =
                standby != nil
                ? nil
                : InboxService(
                    importer: InboxImporter(
                        configuration: c.importerConfiguration,
                        parser: InboxFileParser(decoder: BatchDecoder(validator: validator)), store: store, counters: counters,
                        clock: clock, logger: logger.part("inbox")), sweepInterval: c.inboxSweepInterval,
                    logger: logger.part("inbox"))

            let zap = try security.registry.map {
                try ZAPHandler(context: context, registry: $0, counters: counters, logger: logger.part("security"))
            }
            let pictures = ModelPictures(store: store, model: model, clock: clock)
            let gate = HTTPGate(
                configuration: .init(
                    tokens: security.tokens, trustedProxies: Set(c.http.trustedProxies), tls: c.http.tls != nil,
                    lockout: .milliseconds(Int64(c.http.lockoutS * 1000))), counters: counters, logger: logger.part("http"))
            let http = try c.httpConfiguration.map { httpConfiguration in
                let api = APIRoutes(handler: handler)
                return try HTTPEndpoint(configuration: httpConfiguration, logger: logger.part("http")) { request in
                    let token: String?
                    switch gate.admit(request) {
                    case .refused(let refusal): return refusal
                    case .admitted(let name): token = name
                    }
                    if APIRoutes.isAPI(request.path) { return await api.answer(request, caller: .http(token: token)) }
                    return await OperationsRoutes(
                        store: store, phase: self.phase,
                        metrics: ServiceMetrics(
                            counters: self.counters, store: store, broadcaster: broadcaster, model: model,
                            following: standby?.status, outbound: outbound),
                        pictures: pictures, outbound: outbound
                    ).answer(request)
                }
            }
            var probes: [OperationsService.Probe] = [
                ("store", { await store.answers(within: .seconds(1)) }),
                ("updates", { await broadcaster.answers(within: .seconds(1)) }),
                ("query", { await query.answers(within: .seconds(1)) }),
            ]
            if let ingest { probes.append(("ingest", { await ingest.answers(within: .seconds(1)) })) }
            if let zap { probes.append(("zap", { await zap.answers(within: .seconds(1)) })) }
            let operations = OperationsService(notifier: notifier, probes: probes, logger: logger.part("systemd")) {
                await self.status(store)
            }
            // Each model goes to the bus's subscribers, the rules and the broker (§16), and the page's event streams.
            model.observeModels { snapshot in
                let body = Data(WireFormat.modelMessage(snapshot))
                broadcaster.publish("model", encoded: body)
                outbound?.observe(snapshot, sleepThresholdMg: store.liveSettings.person.sleepThresholdMg)
                if let http, http.hasEventStreams { http.publish(event: HTTPResponse.event("model", json: body)) }
            }
            let parts = Parts(
                store: store, cache: cache, zap: zap, broadcaster: broadcaster, model: model, outbound: outbound,
                query: query, ingest: ingest, inbox: inbox, standby: standby, http: http, operations: operations,
                serverKey: security.keys?.publicKey, memory: MemoryReclaimer(logger: logger.part("memory")))
            return parts
        }
    }

    /// The service's parts; `services` is the group's start order.
    struct Parts: Sendable {
        let store: HealthStore
        let cache: ModelCache
        /// The ZAP handler, under `security.curve`: up before any endpoint binds.
        let zap: ZAPHandler?
        let broadcaster: Broadcaster
        /// The model's one owner: follows the store, publishes, pushes to the cache.
        let model: ModelService
        /// The rules, the outbox's deliverers, the MQTT publisher (§16); nil on a standby.
        let outbound: Outbound?
        let query: QueryEndpoint
        /// A primary's inputs; nil on a standby.
        let ingest: IngestEndpoint?
        let inbox: InboxService?
        /// A standby's follower of its primary (`follow`); nil on a primary.
        let standby: StandbyService?
        /// The monitoring endpoint (`http.bind`), when on.
        let http: HTTPEndpoint?
        /// STATUS and the watchdog for systemd.
        let operations: OperationsService
        /// The service's public key under CURVE, for `endpoints.json`.
        let serverKey: String?
        /// Gives memory back after bursts of large input; first, so that
        /// its allocator settings hold for every part.
        let memory: MemoryReclaimer

        /// Monitoring starts right after the store, so that `/healthz` and
        /// `/readyz` answer while the rest starts and drains; the watchdog
        /// starts last, once there is everything to watch.
        var services: [any Service] {
            var services: [any Service] = [memory, store]
            if let http { services.append(http) }
            services.append(cache)
            if let zap { services.append(zap) }
            services += [broadcaster, model] as [any Service]
            services += outbound?.services ?? []
            services.append(query)
            // Inputs: a primary's bus and inbox, or a standby's follower of its primary.
            if let standby { services.append(standby) }
            if let ingest { services.append(ingest) }
            if let inbox { services.append(inbox) }
            services.append(operations)
            return services
        }
    }

    /// `<data>/endpoints.json`: the endpoints really bound, so that clients
    /// and tests can find ports chosen by the system (`tcp://127.0.0.1:*`).
    func writeEndpoints(_ parts: Parts) {
        let json = JSONValue.object(
            [
                ("ingest", .array((parts.ingest?.boundEndpoints ?? []).map { .string($0) })),
                ("updates", .array(parts.broadcaster.boundEndpoints.map { .string($0) })),
                ("query", .array(parts.query.boundEndpoints.map { .string($0) })),
                ("http", parts.http?.boundAddress.map { .string($0) } ?? .null),
                ("serverKey", parts.serverKey.map { .string($0) } ?? .null),
                ("pid", .int(Int64(ProcessInfo.processInfo.processIdentifier))),
            ] + parts.store.identity.members)
        do {
            try DurableFile.write(json.data(), to: URL(fileURLWithPath: configuration.endpointsPath))
        } catch {
            logger.warning("could not write endpoints file", metadata: ["error": "\(error)"])
        }
    }

    /// Writes `endpoints.json` again when the store's identity changes (a
    /// standby taking its primary's), off the store's thread, which the
    /// observer must never block.
    func keepEndpointsCurrent(_ parts: Parts) async {
        let written = Mutex(parts.store.identity)
        await parts.store.observeCommits { batch in
            // Only a standby's commit that takes its primary's whole state changes it.
            guard batch.replacesAll, let identity = batch.identity,
                written.withLock({ last in
                    defer { last = identity }
                    return last != identity
                })
            else { return }
            DispatchQueue.global().async { self.writeEndpoints(parts) }
        }
    }
}
