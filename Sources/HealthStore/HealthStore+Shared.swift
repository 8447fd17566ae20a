import CoffeeDomain
import Foundation
import PostgreSQL

/// A store that several services share (PostgreSQL, docs/protocol.md §11):
/// each announces every change, its own and the others', in anchor order
/// with whole `previousAnchor` chains. A commit takes its anchors from the
/// counter row under its lock, so commits are visible in anchor order; the
/// others' commits are read from the database, from the last anchor
/// announced, before this service's own (`finishCommit`), and whenever one
/// of them notifies (`SharedStoreListener`).
extension HealthStore {
    /// Announces, in pages, the changes committed from the last anchor
    /// announced through `end`; returns the anchor announced through (less
    /// than `end` when the database could not be read: the rest waits for
    /// the next catch-up).
    @discardableResult
    func announceStored(through end: Int64) -> Int64 {
        while announcedAnchor < end {
            let rows: [RecordRow]
            do {
                rows = try statements.changes(
                    after: announcedAnchor, through: end, liveOnly: false, limit: Self.announceLimit + 1)
            } catch {
                logger.warning(
                    "could not read other services' changes; they are announced once the database answers",
                    metadata: ["error": "\(error)", "announced": "\(announcedAnchor)", "through": "\(end)"])
                scheduleCatchUp(after: .seconds(1))
                break
            }
            let page = rows.prefix(Self.announceLimit)
            let last = rows.count > Self.announceLimit ? page.last!.anchor : end
            // Each UUID is read once (its record's last change), so none replaces another in the log.
            var batch = CommittedBatch(
                anchor: last, previousAnchor: announcedAnchor, log: page.map(\.change), replacesRecords: false,
                anchors: page.map(\.anchor))
            batch.identity = identity
            // A settings change, an alert or a delivery is an anchor no record
            // holds: look for the rows beside the drinks only when the page leaves one out.
            if Int64(page.count) < last - announcedAnchor {
                (batch.kept, batch.settings) = keptChanged(after: announcedAnchor, through: last)
            }
            for observer in observers { observer(batch) }
            announcedAnchor = last
            currentAnchor = max(currentAnchor, last)
        }
        return announcedAnchor
    }

    /// Catches up with what the database holds: the counter row says how
    /// far every service has committed (each commit sets it in its own
    /// transaction), and what lies past the last anchor announced is
    /// announced. Purges by other services are taken too.
    func catchUpShared() {
        catchUpQueued.store(false, ordering: .relaxed)
        guard isOpen, !isFaulted else { return }
        do {
            guard let stored = try statements.meta("anchor") else { return }
            purgedAnchor = max(purgedAnchor, try statements.meta("purged_anchor") ?? 0)
            if stored > currentAnchor { currentAnchor = stored }
            announceStored(through: currentAnchor)
        } catch {
            if let reason = Self.storageFault(error) {
                storageFailed([], reason)  // the retry connects again, then catches up
            } else {
                logger.error("could not read the store's anchor", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Queues one catch-up on the store's thread, however many ask for it.
    nonisolated func scheduleCatchUp(after delay: Duration? = nil) {
        guard !catchUpQueued.exchange(true, ordering: .relaxed) else { return }
        if let delay {
            Task {
                try? await Task.sleep(for: delay)
                self.executor.run { self.assumeIsolated { $0.catchUpShared() } }
            }
        } else {
            executor.run { self.assumeIsolated { $0.catchUpShared() } }
        }
    }

    nonisolated func startListening() {
        guard let listener else { return }
        listener.wake = { [weak self] in self?.scheduleCatchUp() }
        listener.announced = { [weak self] in self?.announcedNow.load(ordering: .relaxed) ?? .max }
        listener.onLost = { [weak self] reason in
            guard let self else { return }
            self.executor.run {
                self.assumeIsolated { store in
                    if store.isOpen, !store.isFaulted { store.storageFailed([], reason) }
                }
            }
        }
        listener.start()
    }

    func stopListening() {
        listener?.stop()
    }
}

extension HealthStore {
    /// Why the PostgreSQL database at `conninfo` cannot be reached now, or
    /// nil when it accepts a connection (closed again at once): what a
    /// service started before its database waits out.
    public static func unreachableReason(_ conninfo: String) -> String? {
        do {
            _ = try Connection(conninfo: conninfo)
            return nil
        } catch {
            return error.message
        }
    }
}
