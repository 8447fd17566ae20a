import CoffeeLifecycle
import CoffeeLogging
import CoffeeRelay
import CoffeeService
import CoffeeTrackerClient
import Foundation
import ZeroMQ

#if canImport(Glibc)
    import Glibc
#endif

/// `relay`: an update endpoint forwarded to many subscribers (docs/protocol.md §11).
enum RelayCommand {
    static let help = """
        Usage: coffee-tracker relay --from ENDPOINT --bind ENDPOINT [--bind ENDPOINT…]
                                    [--key FILE --server-key KEY]
                                    [--secret-key-file FILE --clients-directory DIR]
                                    [--hwm N] [--log-level LEVEL]

        Forwards a service's update endpoint (or another relay's) to many
        subscribers with libzmq's own proxy (XSUB to XPUB). Every message
        passes unchanged, so `changes` chains stay whole; the last `model` is
        kept and sent to each new subscriber at once. A relay chains behind a
        relay. SIGTERM or SIGINT drains: the proxy stops, and subscribers get
        2 s to take what is queued for them. The counts (messages forwarded by
        topic, subscriptions, cached models sent, gaps in the `changes` chain
        seen upstream) are logged every minute, on SIGUSR1 and at the end.

        Options:
          --from ENDPOINT           the update endpoint to follow (tcp://host:5556)
          --bind ENDPOINT           where subscribers connect; repeat for more
          --key FILE                under CURVE upstream: this relay's secret certificate
          --server-key KEY          under CURVE upstream: the followed endpoint's public key
          --secret-key-file FILE    CURVE to subscribers: the relay's own secret certificate
          --clients-directory DIR   CURVE to subscribers: the public certificates
                                    admitted (role subscribe), as security.curve has it
          --hwm N                   messages queued per subscriber before dropping (10000)
          --log-level LEVEL         trace … critical (default info)

        Plaintext endpoints must be on loopback, as for the service.
        """

    static func run(_ words: [String]) async throws -> Int32 {
        let args = try Arguments(
            words,
            valued: ["from", "bind", "key", "server-key", "secret-key-file", "clients-directory", "hwm", "log-level"],
            switches: ["help"])
        if args.has("help") {
            print(help)
            return 0
        }
        guard args.positional.isEmpty else {
            throw Arguments.UsageError(description: "unexpected argument \"\(args.positional[0])\"")
        }
        guard let from = args["from"] else { throw Arguments.UsageError(description: "relay needs --from ENDPOINT") }
        let binds = args.all("bind")
        guard !binds.isEmpty else { throw Arguments.UsageError(description: "relay needs at least one --bind ENDPOINT") }
        for endpoint in [from] + binds { try EndpointDiscovery.checkScheme(endpoint) }
        let level = try args["log-level"].map { name in
            guard let level = Logger.Level(rawValue: name) else {
                throw Arguments.UsageError(
                    description: "--log-level must be one of trace, debug, info, notice, warning, error, critical")
            }
            return level
        }
        LoggingSystem.shared.configure(
            level: level ?? .info, handler: StderrLogHandler(format: .text, journal: StderrLogHandler.stderrIsJournal))
        umask(0o077)

        var configuration = UpdateRelay.Configuration(from: from, bind: binds)
        if let hwm = args["hwm"] {
            guard let n = Int32(hwm), n > 0 else { throw Arguments.UsageError(description: "--hwm must be a positive number") }
            configuration.highWaterMark = n
        }
        if let curve = try ClientCurve.from(keyFile: args["key"], serverKey: args["server-key"], discovered: nil) {
            configuration.upstreamKeys = (curve.serverKey, curve.keys.publicKey, curve.keys.secretKey)
        }
        let context = ZMQContext()
        // The relay's composition root: each part's logger comes from this one.
        let logger = Logger(label: "relay", metadata: ["role": "relay"])
        var services: [any Service] = []
        switch (args["secret-key-file"], args["clients-directory"]) {
        case (let secret?, let clients?):
            let keys = try SecuritySetup.secretKey(secret, option: "--secret-key-file")
            let registry = try ClientRegistry(directory: clients)
            services.append(
                try ZAPHandler(
                    context: context, registry: registry, counters: ServiceCounters(), logger: logger.part("security")))
            configuration.downstreamCurve = CurveServerSettings(secretKey: keys.secretKey, domain: "updates")
        case (nil, nil):
            let plaintext = ([from] + binds).filter { $0.hasPrefix("tcp://") && !SecuritySetup.isLoopback($0) }
            if let remote = plaintext.first {
                printError(
                    "coffee-tracker relay: \(remote) is not on loopback; plaintext is for one machine: give --secret-key-file and --clients-directory (and --key, --server-key upstream)"
                )
                return 2
            }
        default:
            throw Arguments.UsageError(description: "--secret-key-file and --clients-directory go together")
        }
        let relay = try UpdateRelay(configuration: configuration, context: context, logger: logger)
        services.append(relay)
        let group = ServiceGroup(
            services: services, maximumGracefulShutdownDuration: .seconds(20), logger: logger.part("lifecycle"))
        let signals = SignalStream.make([SIGINT, SIGTERM, SIGUSR1])
        let stop = Task {
            for await signal in signals {
                if signal == SIGUSR1 {
                    relay.report()
                    continue
                }
                logger.notice("draining", metadata: ["signal": "\(SignalStream.name(signal))"])
                break
            }
            group.triggerGracefulShutdown()
        }
        defer { stop.cancel() }
        do {
            try await group.run {
                // For scripts and tests: where it listens, once it does.
                print("relay: \(relay.endpoints.joined(separator: " "))")
                fflush(nil)
            }
        } catch {
            logger.critical("stopped: \(error)")
            return 1
        }
        return 0
    }
}
