import CoffeeLogging
import Foundation

/// SIGHUP (docs/protocol.md §9): the configuration file read again.
struct ConfigurationReload {
    /// The configuration the service runs with.
    let running: ServiceConfiguration
    /// The file it came from (nil: embedded defaults).
    let path: String?
    /// The clients directory, under `security.curve`.
    let registry: ClientRegistry?
    /// The HTTP endpoint's tokens, under `security.tokensDirectory`.
    let tokens: TokenRegistry?
    /// The HTTP endpoint, whose certificate is read again under `http.tls`.
    let http: HTTPEndpoint?
    let notifier: SystemdNotifier
    private let logger: Logger

    init(
        running: ServiceConfiguration, path: String?, registry: ClientRegistry?, tokens: TokenRegistry?, http: HTTPEndpoint?,
        notifier: SystemdNotifier, logger: Logger
    ) {
        self.tokens = tokens
        self.http = http
        self.logger = logger
        self.running = running
        self.path = path
        self.registry = registry
        self.notifier = notifier
    }

    /// SIGHUP: `log.level`, the clients and tokens directories and the TLS
    /// certificate are read again; other
    /// keys that changed are named in the log (they need a restart). A file
    /// or a certificate that cannot be read keeps what was there and says why.
    func reload() {
        notifier.notify("RELOADING=1", SystemdNotifier.monotonicMicroseconds)
        defer { notifier.notify("READY=1") }
        do {
            let fresh =
                try path.map(ConfigurationLoader.load(path:))
                ?? ConfigurationLoader.defaults(relativeTo: FileManager.default.currentDirectoryPath)
            if fresh.log.level != LoggingSystem.shared.level {
                LoggingSystem.shared.setLevel(fresh.log.level)
                logger.notice("log level changed", metadata: ["level": "\(fresh.log.level.rawValue)"])
            }
            var stale = running
            stale.log.level = fresh.log.level
            let changed = fresh.changedKeys(comparedTo: stale)
            if !changed.isEmpty {
                logger.warning(
                    "configuration keys changed that take effect only after a restart",
                    metadata: ["keys": "\(changed.joined(separator: ","))"])
            }
        } catch {
            logger.error("could not read the configuration again; nothing changed", metadata: ["error": "\(error)"])
        }
        http?.reloadCertificate()
        if let tokens { reload("tokens", tokens.directory) { try tokens.reload() } }
        if let registry { reload("clients", registry.directory) { try registry.reload() } }
    }

    /// Reads a directory of credentials again (`what`: tokens, clients); one that fails keeps the old list.
    private func reload(_ what: String, _ directory: String, _ read: () throws -> Int) {
        do {
            let count = try read()
            logger.notice("reloaded the \(what) directory", metadata: ["\(what)": "\(count)", "directory": "\(directory)"])
        } catch {
            logger.error("could not reload the \(what) directory; keeping the old list", metadata: ["error": "\(error)"])
        }
    }
}
