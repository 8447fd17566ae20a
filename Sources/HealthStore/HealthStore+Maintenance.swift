import CoffeeLifecycle
import Foundation

/// Maintenance, and the store's life as a service: purged once at start,
/// then every `Configuration.purgeInterval`; closed last in a shutdown
/// (it is the group's first service), after every other part has
/// committed, published and read what it needed.
extension HealthStore: Service {
    public nonisolated var name: String { "store" }

    public func start() async throws {
        do {
            try purgeTombstones()
        } catch {
            logger.error("tombstone purge failed", metadata: ["error": "\(error)"])
        }
    }

    public nonisolated func run() async throws {
        await repeatUntilShutdown(every: configuration.purgeInterval, on: configuration.timerClock) {
            do { try await self.purgeTombstones() } catch {
                self.logger.error("tombstone purge failed", metadata: ["error": "\(error)"])
            }
        }
        await close()
    }

    /// Removes tombstones older than the retention period and remembers the
    /// highest anchor purged. Returns how many were removed.
    @discardableResult
    public func purgeTombstones() throws -> Int {
        guard isOpen else { throw StoreError.closed }
        guard configuration.purgesTombstones else { return 0 }
        let cutoff = configuration.clock.now().addingTimeInterval(-configuration.tombstoneRetention)
        let cutoffMs = Int64((cutoff.timeIntervalSince1970 * 1000).rounded())
        return try statements.transaction {
            // A shared store's purge waits for the commits of every service
            // (the counter row's lock), and keeps what another's purge kept.
            let anchor = statements.lockAnchor() ?? currentAnchor
            // Deliveries settled as long ago go too (docs/protocol.md §16).
            try statements.purgeSettledAlerts(before: cutoffMs)
            guard let highest = try statements.highestExpiredTombstone(before: cutoffMs) else { return 0 }
            let removed = try statements.purgeTombstones(before: cutoffMs)
            purgedAnchor = max(purgedAnchor, highest, try statements.meta("purged_anchor") ?? 0)
            try statements.setMeta("purged_anchor", purgedAnchor)
            // The records' highest anchor may have gone with them: the
            // anchor is kept here so it never goes back (`HealthStore.init`).
            try statements.setMeta("anchor", anchor)
            logger.info("purged tombstones", metadata: ["count": "\(removed)", "purgedAnchor": "\(purgedAnchor)"])
            return removed
        }
    }
}
