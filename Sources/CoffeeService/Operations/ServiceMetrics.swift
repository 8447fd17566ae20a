import CoffeeModel
import HealthStore

/// The metrics of docs/protocol.md §9, in Prometheus's text format: the
/// service's counters, the store's statistics, the publisher's delays, the
/// model's caffeine now and the process's own figures.
struct ServiceMetrics: Sendable {
    let counters: ServiceCounters
    let store: HealthStore
    let broadcaster: Broadcaster
    let model: ModelService
    /// A standby's lag behind its primary (docs/protocol.md §11); nil for a primary.
    var following: FollowStatus?

    /// The metrics text, read from the parts now.
    func text() async -> String {
        let c = counters
        let store = await self.store.statistics()
        var m = MetricsExposition()
        m.gauge("coffee_tracker_anchor", "The store's anchor: that of its last change.", Double(store.anchor))
        m.gauge(
            "coffee_tracker_store_epoch", "The store's epoch: raised by a restore and a promotion (docs/protocol.md §13).",
            Double(self.store.identity.epoch))
        m.counter(
            "coffee_tracker_events_received_total", "Drinks and deletions received, by channel.",
            [
                ([("channel", "bus")], Double(c.receivedBus.value)), ([("channel", "query")], Double(c.receivedQuery.value)),
                ([("channel", "inbox")], Double(c.receivedInbox.value)), ([("channel", "http")], Double(c.receivedHTTP.value)),
            ])
        m.counter(
            "coffee_tracker_drinks_stored_total", "Changes that took effect (each took an anchor).",
            [([], Double(c.stored.value))])
        m.counter("coffee_tracker_duplicates_total", "Saves ignored as duplicates.", [([], Double(c.duplicates.value))])
        m.counter(
            "coffee_tracker_rejected_total",
            "Input refused: bus messages dead-lettered, query requests in error, inbox files failed.",
            [
                ([("channel", "bus")], Double(c.rejected.value)), ([("channel", "query")], Double(c.queryRejected.value)),
                ([("channel", "inbox")], Double(c.filesFailed.value)),
            ])
        m.counter(
            "coffee_tracker_files_total", "Inbox files, by result.",
            [([("result", "processed")], Double(c.filesProcessed.value)), ([("result", "failed")], Double(c.filesFailed.value))])
        m.counter("coffee_tracker_commits_total", "Store commits.", [([], Double(store.commits))])
        m.histogram(
            "coffee_tracker_commit_duration_seconds", "From taking a commit's batches to its fsync returning.",
            self.store.commitDuration)
        m.histogram(
            "coffee_tracker_publish_delay_seconds", "From an event's arrival at the store to its changes message being sent.",
            broadcaster.publishDelay)
        m.gauge("coffee_tracker_subscribers", "Subscriptions on the update endpoint.", Double(c.subscribers.value))
        m.counter(
            "coffee_tracker_updates_dropped_total", "Update messages dropped by the publisher's queue.",
            [([], Double(c.updatesDropped.value))])
        m.counter(
            "coffee_tracker_auth_denied_total",
            "Connections the ZAP handler refused, and HTTP requests with a token that matched none, by endpoint.",
            [
                ([("endpoint", "ingest")], Double(c.authDeniedIngest.value)),
                ([("endpoint", "updates")], Double(c.authDeniedUpdates.value)),
                ([("endpoint", "query")], Double(c.authDeniedQuery.value)),
                ([("endpoint", "http")], Double(c.authDeniedHTTP.value)),
            ])
        m.gauge("coffee_tracker_store_bytes", "The store's database and WAL files.", Double(store.fileBytes))
        m.gauge(
            "coffee_tracker_store_fault", "1 while the store cannot write (disk full, I/O error), else 0.",
            self.store.isFaulted ? 1 : 0)
        if let following {
            m.gauge(
                "coffee_tracker_follow_lag_seconds",
                "A standby: how long the oldest change heard from the primary has waited for its commit here.",
                following.lagSeconds())
            m.gauge(
                "coffee_tracker_follow_anchor", "A standby: the primary's anchor, as last heard.", Double(following.followAnchor))
        }
        let caffeine = await model.heldSnapshot()?.mgCaffeine ?? 0
        m.gauge("coffee_tracker_caffeine_mg", "Caffeine in the body now, by the model.", caffeine)
        m.counter("process_cpu_seconds_total", "User and system CPU time.", [([], ProcessMetrics.cpuSeconds())])
        m.gauge("process_resident_memory_bytes", "Resident memory.", ProcessMetrics.residentBytes())
        m.gauge("process_open_fds", "Open file descriptors.", ProcessMetrics.openDescriptors())
        m.gauge("process_start_time_seconds", "When the process started, in Unix seconds.", c.started.timeIntervalSince1970)
        return m.text
    }
}
