import CoffeeDomain
import CoffeeLifecycle
import CoffeeLogging
import CoffeeModel
import Foundation
import HealthStore
import Synchronization
import Syscall
import ZeroMQ

#if canImport(Glibc)
    import Glibc
#endif

/// `coffee-tracker serve`: the store, the model and the endpoints composed
/// as one `ServiceGroup`, run until a signal, then drained (docs/protocol.md §8).
///
/// The order of the group is the data flow read from the store outwards,
/// and the drain is that order reversed: inputs stop first (each committing
/// what it took), then the model takes its last round and publishes it,
/// then the publisher sends what it holds, and the store closes last.
public final class CoffeeTrackerService: Sendable {
    public let configuration: ServiceConfiguration
    /// The file it was read from, read again at SIGHUP (nil: embedded defaults).
    private let configurationPath: String?
    let clock: any WallClock
    let counters = ServiceCounters()
    let notifier: SystemdNotifier
    let logger: Logger
    /// Starting, ready, draining: what `/readyz` and systemd are told.
    let phase = ServicePhase()

    /// - Parameter logger: the composition root's: each part gets its own
    ///   from it (`Logger.part`), with its metadata (a standby's `role`).
    public init(
        configuration: ServiceConfiguration, configurationPath: String? = nil, clock: any WallClock = SystemClock(),
        notifier: SystemdNotifier? = nil, logger: Logger
    ) {
        self.logger = logger
        self.configuration = configuration
        self.configurationPath = configurationPath
        self.clock = clock
        self.notifier = notifier ?? SystemdNotifier(logger: logger.part("systemd"))
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
        if let conninfo = c.store.postgresql, !(await waitForTheDatabase(conninfo)) {
            logger.notice("stopped while waiting for the database")
            return
        }
        let parts = try makeParts(security)
        // Under the unit's TimeoutStopSec (60 s): a drain that hangs is
        // cancelled, and the service exits saying so, before systemd kills it.
        let group = ServiceGroup(
            services: parts.services, maximumGracefulShutdownDuration: .seconds(50), logger: logger.part("lifecycle"))
        let signals = Task {
            // SIGHUP reloads; SIGINT, SIGTERM (or the stream's end) drain.
            var last: Int32?
            for await signal in stop {
                if Task.isCancelled { return }
                if signal == SIGHUP {
                    ConfigurationReload(
                        running: configuration, path: configurationPath, registry: security.registry,
                        tokens: security.tokens, http: parts.http, notifier: notifier, logger: logger
                    ).reload()
                    continue
                }
                if signal == SIGUSR1 {
                    #if TEST_HOOKS
                        TestHooks.signalled(parts.store)
                    #endif
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
                await self.keepEndpointsCurrent(parts)
                let anchor = await parts.store.anchor
                self.phase.enterReady()
                self.notifier.notify("READY=1", "STATUS=" + (await self.status(parts.store)))
                self.logger.notice(
                    "ready",
                    metadata: [
                        "anchor": "\(anchor)", "store": "\(c.storeName)", "pid": "\(ProcessInfo.processInfo.processIdentifier)",
                    ])
            }
        } catch let error as ServiceGroupError {
            // A part that could not start says why in its own words (a taken
            // port, an inbox that cannot be watched); a later failure is named.
            if error.isStartFailure, let underlying = error.underlying { throw StartupError(description: "\(underlying)") }
            throw RunError(description: "\(error)")
        }
        // ipc:// socket files bound here go with the service.
        for endpoint in (parts.ingest?.boundEndpoints ?? []) + parts.broadcaster.boundEndpoints + parts.query.boundEndpoints
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
    func status(_ store: HealthStore) async -> String {
        let anchor = await store.anchor
        let fault = store.isFaulted ? " STORE FAULT:" + (store.faultDescription ?? "") : ""
        return
            "anchor \(anchor), \(counters.received.value) received, \(counters.stored.value) stored, "
            + "\(counters.subscribers.value) subscriptions\(fault)"
    }
}
