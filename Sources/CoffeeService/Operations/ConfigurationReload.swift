import CoffeeLogging
import Foundation

/// SIGHUP (PROTOCOL.md §9): the configuration file read again.
struct ConfigurationReload {
    /// The configuration the service runs with.
    let running: ServiceConfiguration
    /// The file it came from (nil: embedded defaults).
    let path: String?
    /// The clients directory, under `security.curve`.
    let registry: ClientRegistry?
    let notifier: SystemdNotifier
    private let logger: Logger

    init(
        running: ServiceConfiguration, path: String?, registry: ClientRegistry?, notifier: SystemdNotifier,
        logger: Logger = Logger(label: "service")
    ) {
        self.logger = logger
        self.running = running
        self.path = path
        self.registry = registry
        self.notifier = notifier
    }

    /// SIGHUP: `log.level` and the clients directory are read again; other
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
        guard let registry else { return }
        do {
            let count = try registry.reload()
            logger.notice(
                "reloaded the clients directory", metadata: ["clients": "\(count)", "directory": "\(registry.directory)"])
        } catch {
            logger.error("could not reload the clients directory; keeping the old list", metadata: ["error": "\(error)"])
        }
    }
}
