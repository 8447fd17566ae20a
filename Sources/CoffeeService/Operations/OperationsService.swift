import CoffeeLifecycle
import CoffeeLogging
import Foundation
import Synchronization

/// Tells systemd how the service is (docs/protocol.md §9): `STATUS=` every few
/// seconds, and `WATCHDOG=1` at half of `WATCHDOG_USEC`, sent only while
/// every probe answers (the store's thread and each socket loop within a
/// second), so that a wedged service is restarted rather than kept alive by
/// a timer that still runs. `READY=1`, `STOPPING=1` and `RELOADING=1` are
/// sent by the composition, which knows when they are true.
public final class OperationsService: Service {
    /// A part that must answer for the watchdog to be fed: its name, and
    /// whether it answered within its time.
    public typealias Probe = (name: String, answers: @Sendable () async -> Bool)

    public let name = "operations"
    private let notifier: SystemdNotifier
    private let probes: [Probe]
    private let status: @Sendable () async -> String
    private let statusInterval: Duration
    private let clock: any Clock<Duration>
    private let logger: Logger
    private let warnings = RateLimiter(interval: 10)

    public init(
        notifier: SystemdNotifier, probes: [Probe], statusInterval: Duration = .seconds(5),
        clock: any Clock<Duration> = ContinuousClock(), logger: Logger,
        status: @escaping @Sendable () async -> String
    ) {
        self.logger = logger
        self.notifier = notifier
        self.probes = probes
        self.status = status
        self.statusInterval = statusInterval
        self.clock = clock
    }

    /// The names of the probes that did not answer; empty when all did.
    public func silentParts() async -> [String] {
        var silent: [String] = []
        for probe in probes where !(await probe.answers()) { silent.append(probe.name) }
        return silent
    }

    public func run() async throws {
        guard notifier.isEnabled else {
            await gracefulShutdown()
            return
        }
        let (notifier, status, statusInterval, clock) = (notifier, status, statusInterval, clock)
        await withTaskGroup(of: Void.self) { group in
            if let interval = notifier.watchdogInterval {
                group.addTask {
                    await repeatUntilShutdown(every: interval / 2, on: clock) {
                        let silent = await self.silentParts()
                        if silent.isEmpty {
                            notifier.notify("WATCHDOG=1")
                        } else if let suppressed = self.warnings.allow(count: 1) {
                            self.logger.error(
                                "not feeding the watchdog: parts do not answer",
                                metadata: ["parts": "\(silent.joined(separator: ","))", "suppressed": "\(suppressed)"])
                        }
                    }
                }
            }
            group.addTask {
                notifier.notify("STATUS=" + (await status()))
                await repeatUntilShutdown(every: statusInterval, on: clock) { notifier.notify("STATUS=" + (await status())) }
            }
            await gracefulShutdown()
        }
    }
}
