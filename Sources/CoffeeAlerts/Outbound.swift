import CoffeeDomain
import CoffeeLifecycle
import Foundation
import HealthStore

/// The service's outbound door (docs/protocol.md §16): the rules, the
/// outbox's deliverers and the MQTT publisher, as one part of the
/// composition, and what they report for `stats`, the metrics and `/readyz`.
public struct Outbound: Sendable {
    /// Whether this service tells (several on one PostgreSQL database: one does).
    public let lease: TellerLease
    public let alerts: AlertService
    public let deliverers: [OutboxDeliverer]
    public let mqtt: MQTTPublisher?
    /// Each receiver's pending alerts as last read from the store, for a
    /// report that must not wait for the store (an inbox file holds it).
    private let pendingRead = LatestValue<[String: Int]>([:])
    /// The read of them on the store's thread now, if one is: at most one
    /// at a time, however many reports wait for it.
    private let reading = LatestValue<HealthStore.Job<Void>?>(nil)
    /// How long a report waits for that read before it answers with the
    /// counts as last read: a read queued behind an inbox file's
    /// transaction (one for the whole file) or a stalled store's thread
    /// finishes when the store is free, and the next report has it.
    static let storeWait: Duration = .milliseconds(250)

    public init(lease: TellerLease, alerts: AlertService, deliverers: [OutboxDeliverer], mqtt: MQTTPublisher?) {
        self.lease = lease
        self.alerts = alerts
        self.deliverers = deliverers
        self.mqtt = mqtt
    }

    /// In the group's start order, after the model.
    public var services: [any Service] { [lease, alerts as any Service] + deliverers + (mqtt.map { [$0] } ?? []) }

    /// A model was published: to the rules and to the broker. Only hands over.
    public func observe(_ snapshot: ModelSnapshot, sleepThresholdMg: Double) {
        alerts.observe(snapshot)
        mqtt?.publish(snapshot, sleepThresholdMg: sleepThresholdMg)
    }

    /// What each receiver has done and holds.
    public struct Report: Sendable {
        public var told: Int
        /// This service holds the teller's lease.
        public var teller: Bool
        public var receivers: [(name: String, pending: Int, counts: OutboxDeliverer.Counts)]
        public var mqtt: MQTTPublisher.Status?

        /// `stats`' members.
        public var members: [(String, JSONValue)] {
            var members: [(String, JSONValue)] = [("alertsTold", .int(Int64(told))), ("alertsTeller", .bool(teller))]
            for r in receivers {
                members.append(
                    (
                        "alerts." + r.name,
                        .object(
                            [
                                ("pending", .int(Int64(r.pending))), ("delivered", .int(Int64(r.counts.delivered))),
                                ("retried", .int(Int64(r.counts.retried))), ("dropped", .int(Int64(r.counts.dropped))),
                                ("failing", r.counts.failing.map { .string($0) } ?? .null),
                            ] + (r.name == "push" ? [("removed", .int(Int64(r.counts.removed)))] : []))
                    ))
            }
            if let mqtt {
                members.append(
                    (
                        "mqtt",
                        .object([
                            ("connected", .bool(mqtt.connected)), ("connections", .int(Int64(mqtt.connections))),
                            ("published", .int(Int64(mqtt.published))), ("problem", mqtt.problem.map { .string($0) } ?? .null),
                        ])
                    ))
            }
            return members
        }

        /// `/readyz`'s lines for what fails now: a state shown, never a reason to be unready.
        public var problems: [String] {
            var lines = receivers.compactMap { r in
                r.counts.failing.map { "alerts \(r.name): failing (\($0)); \(r.pending) waiting in the outbox" }
            }
            if let mqtt, !mqtt.connected { lines.append("mqtt: not connected (\(mqtt.problem ?? "connecting"))") }
            return lines
        }
    }

    /// Waits at most `storeWait` for the store (`stats`, `/metrics` and
    /// `/readyz` answer while an inbox file holds it).
    ///
    /// - Parameter readingStore: false while the store is held by an
    ///   inbox file: the pending counts as last read, without a read.
    public func report(_ store: HealthStore, readingStore: Bool = true) async -> Report {
        if readingStore {
            let job = startReading(store)
            let deadline = ContinuousClock.now + Self.storeWait
            // A cancelled sleep returns at once: stop waiting rather than spin.
            while !job.isDone, ContinuousClock.now < deadline, !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(2))
            }
        }
        let pending = pendingRead.value
        return Report(
            told: await alerts.told, teller: lease.isHeld,
            receivers: deliverers.map { ($0.receiver.name, pending[$0.receiver.name] ?? 0, $0.current) },
            mqtt: mqtt?.current)
    }

    /// The read in progress, or a new one: on the store's thread, it sets
    /// the counts as last read when it is done.
    private func startReading(_ store: HealthStore) -> HealthStore.Job<Void> {
        let (pendingRead, deliverers) = (self.pendingRead, self.deliverers)
        return reading.update { current in
            if let current, !current.isDone { return current }
            let job = store.started { store in
                guard let summary = try? store.outboxSummary() else { return }
                var pending = pendingRead.value
                for deliverer in deliverers {
                    pending[deliverer.receiver.name] = summary.filter { deliverer.receiver.owns($0.key) }.reduce(0) {
                        $0 + $1.value.count
                    }
                }
                pendingRead.set(pending)
            }
            current = job
            return job
        }
    }
}
