import CoffeeLogging
import CoffeeService
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

enum ServeCommand {
    static let help = """
        Usage: coffee-tracker serve [--config FILE]

        Runs the service in the foreground: the ingest subscriber, the update
        publisher, the query endpoint and the anchored store. SIGINT or SIGTERM
        drains it: input stops, held work is committed, the last model is
        published, sockets close, and it exits 0. SIGHUP re-reads the clients
        directory of security.curve, the tokens directory, the TLS certificate
        and key of http.tls, and log.level (other keys need a restart; the log
        says which changed). Files it creates are private (umask 077).
        Under systemd (NOTIFY_SOCKET) it reports READY=1, STATUS=, STOPPING=1
        and feeds the watchdog while every part answers; http.bind serves the
        live page, the JSON API (/api/v1), /metrics, /healthz and /readyz,
        over HTTPS with http.tls. With follow in the configuration it
        is a standby: a read-only copy of the primary there (add and delete
        get read_only, no bus or inbox); restarted without follow, it is a
        primary that continues the anchors.

        Options:
          --config FILE   configuration (default config/coffee-tracker.json when it
                          exists, else embedded defaults: data/ and inbox/ here,
                          endpoints on 127.0.0.1:5555, 5556, 5557)
          -h, --help      show this help

        Logs go to stderr (log.level, log.format in the configuration).
        """

    static func run(_ words: [String]) async throws -> Int32 {
        guard let args = try Arguments.configOnly(words, help: help) else { return 0 }
        let configuration: ServiceConfiguration
        let path = configurationPath(args["config"])
        do {
            configuration = try loadConfiguration(path)
        } catch {
            printError("coffee-tracker serve: \(error)")
            return 2
        }
        LoggingSystem.shared.configure(
            level: configuration.log.level,
            handler: StderrLogHandler(format: configuration.log.format, journal: StderrLogHandler.stderrIsJournal))
        // Everything the service creates is private to its user (docs/protocol.md §6).
        umask(0o077)
        let signals = SignalStream.make([SIGINT, SIGTERM, SIGHUP, SIGUSR1])
        // The composition root's logger: every part's lines carry its metadata.
        let logger = Logger(label: "service", metadata: configuration.follow == nil ? [:] : ["role": "standby"])
        let service = CoffeeTrackerService(configuration: configuration, configurationPath: path, logger: logger)
        do {
            try await service.run(until: signals)
        } catch let error as CoffeeTrackerService.RunError {
            logger.critical("stopped: \(error)")
            return 1
        } catch {
            logger.critical("could not start: \(error)")
            return 1
        }
        return 0
    }
}
