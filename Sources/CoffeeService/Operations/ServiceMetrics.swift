import CoffeeAlerts
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
    /// Alerts and the broker (docs/protocol.md §16); nil on a standby.
    var outbound: Outbound?

    /// The metrics text, read from the parts now.
    func text() async -> String {
        let c = counters
        let store = self.store.statistics()
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
                ([("channel", "mqtt")], Double(c.receivedMQTT.value)),
            ])
        m.counter(
            "coffee_tracker_drinks_stored_total", "Changes that took effect (each took an anchor).",
            [([], Double(c.stored.value))])
        m.counter("coffee_tracker_duplicates_total", "Saves ignored as duplicates.", [([], Double(c.duplicates.value))])
        m.counter(
            "coffee_tracker_rejected_total",
            "Input refused: bus and MQTT messages dead-lettered, query requests in error, inbox files failed.",
            [
                ([("channel", "bus")], Double(c.rejected.value - c.rejectedMQTT.value)),
                ([("channel", "query")], Double(c.queryRejected.value)), ([("channel", "inbox")], Double(c.filesFailed.value)),
                ([("channel", "mqtt")], Double(c.rejectedMQTT.value)),
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
            m.gauge(
                "coffee_tracker_follow_push_key_different",
                "A standby: 1 while its Web Push key is not its primary's (copy the primary's vapid.pem), else 0.",
                following.pushKeyComparison == .different ? 1 : 0)
        }
        if let outbound { await alertMetrics(outbound, into: &m) }
        let caffeine = await model.heldSnapshot()?.mgCaffeine ?? 0
        m.gauge("coffee_tracker_caffeine_mg", "Caffeine in the body now, by the model.", caffeine)
        m.counter("process_cpu_seconds_total", "User and system CPU time.", [([], ProcessMetrics.cpuSeconds())])
        m.gauge("process_resident_memory_bytes", "Resident memory.", ProcessMetrics.residentBytes())
        m.gauge("process_open_fds", "Open file descriptors.", ProcessMetrics.openDescriptors())
        m.gauge("process_start_time_seconds", "When the process started, in Unix seconds.", c.started.timeIntervalSince1970)
        return m.text
    }

    /// The outbox by receiver, and the broker's connection.
    private func alertMetrics(_ outbound: Outbound, into m: inout MetricsExposition) async {
        let report = await outbound.report(store)
        m.counter("coffee_tracker_alerts_total", "Alerts the rules decided (fired and cleared).", [([], Double(report.told))])
        func byReceiver(_ value: (Int, OutboxDeliverer.Counts) -> Int) -> [([(String, String)], Double)] {
            report.receivers.map { ([("receiver", $0.name)], Double(value($0.pending, $0.counts))) }
        }
        m.gauge("coffee_tracker_alerts_pending", "Alerts waiting in the outbox, by receiver.", byReceiver { p, _ in p })
        m.counter("coffee_tracker_alerts_delivered_total", "Alerts a receiver took (2xx).", byReceiver { $1.delivered })
        m.counter("coffee_tracker_alerts_retried_total", "Deliveries tried again.", byReceiver { $1.retried })
        m.counter("coffee_tracker_alerts_dropped_total", "Alerts dropped undelivered.", byReceiver { $1.dropped })
        m.gauge(
            "coffee_tracker_alerts_receiver_failing", "1 while a receiver fails, by receiver.",
            byReceiver { $1.failing == nil ? 0 : 1 })
        if let mqtt = report.mqtt {
            m.gauge("coffee_tracker_mqtt_connected", "1 while connected to the MQTT broker.", mqtt.connected ? 1 : 0)
            m.counter(
                "coffee_tracker_mqtt_published_total", "MQTT messages handed to the broker.", [([], Double(mqtt.published))])
        }
    }
}
