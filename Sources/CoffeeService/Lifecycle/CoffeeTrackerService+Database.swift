import Dispatch
import Foundation
import HealthStore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A service started before its PostgreSQL store (docs/postgresql.md): it
/// waits for the database rather than exiting, so that a boot that starts
/// it first, or a database down for a while, needs nobody to start it again.
extension CoffeeTrackerService {
    /// Returns once the database at `conninfo` accepts a connection (at
    /// once when it does now), trying again after 1, 2, 4 … up to 30
    /// seconds, each failure logged with its reason and told to systemd as
    /// the unit's status (its start timeout extended past the next try).
    /// False when SIGTERM or SIGINT came first: the service stops, having
    /// started nothing.
    func waitForTheDatabase(_ conninfo: String) async -> Bool {
        guard var reason = HealthStore.unreachableReason(conninfo) else { return true }
        let stop = StopWatch([SIGTERM, SIGINT])
        defer { stop.cancel() }
        var delay = 1
        while true {
            logger.warning(
                "the database does not answer; waiting for it before starting",
                metadata: ["store": "\(configuration.storeName)", "error": "\(reason)", "retryInSeconds": "\(delay)"])
            notifier.notify(
                "STATUS=waiting for the database: \(reason)", "EXTEND_TIMEOUT_USEC=\((delay + 30) * 1_000_000)")
            // In steps of a tenth of a second, so that a stop is seen at once.
            for _ in 0..<(delay * 10) {
                if stop.signalled { return false }
                try? await Task.sleep(for: .milliseconds(100))
            }
            guard let next = HealthStore.unreachableReason(conninfo) else {
                logger.notice("the database answers; starting", metadata: ["store": "\(configuration.storeName)"])
                return true
            }
            reason = next
            delay = min(delay * 2, 30)
        }
    }
}

/// Whether one of some signals came, seen by Dispatch sources of its own
/// beside the service's signal stream (which only the running service reads).
private struct StopWatch {
    private final class Seen: Sendable {
        let value = Atomic<Bool>(false)
    }
    private let seen = Seen()
    private let sources: [any DispatchSourceSignal]

    init(_ signals: [Int32]) {
        let queue = DispatchQueue(label: "database-wait-signals")
        let seen = seen
        sources = signals.map { sig in
            let source = DispatchSource.makeSignalSource(signal: sig, queue: queue)
            source.setEventHandler { seen.value.store(true, ordering: .releasing) }
            source.resume()
            return source
        }
    }

    var signalled: Bool { seen.value.load(ordering: .acquiring) }

    func cancel() { for source in sources { source.cancel() } }
}
