import CVersion
import CoffeeAlerts
import CoffeeDomain
import CoffeeModel
import Foundation
import HealthStore

/// The outbound door's parts (docs/protocol.md §16): the rules over the
/// model, a deliverer per receiver configured, the MQTT publisher.
extension CoffeeTrackerService {
    /// Nil on a standby: its primary tells the person.
    func makeOutbound(
        store: HealthStore, model: ModelService, broadcaster: Broadcaster, standby: Bool,
        commands: MQTTCommands, pushKey: WebPush.Key
    ) throws -> Outbound? {
        guard !standby else { return nil }
        let c = configuration
        var receivers: [AlertReceiver] = []
        if let webhook = c.alerts.webhook {
            let secret = try Self.secret(webhook.secretFile!, key: "alerts.webhook.secretFile")
            receivers.append(.webhook(url: webhook.url, secret: Array(secret.utf8)))
        }
        if let ntfy = c.alerts.ntfy {
            receivers.append(
                .ntfy(url: ntfy.url, token: try ntfy.secretFile.map { try Self.secret($0, key: "alerts.ntfy.tokenFile") }))
        }
        // Every subscription the store keeps, through one deliverer (§17).
        let book = PushSubscriptionBook(settings: store.liveSettings)
        receivers.append(.push(WebPushSender(key: pushKey, subject: c.alerts.pushSubject) { book.all }))
        var delivery = OutboxDeliverer.Configuration()
        delivery.maxAge = c.alerts.maxAgeS
        delivery.retryInitial = c.alerts.retryInitialS
        delivery.retryMax = c.alerts.retryMaxS
        let deadLetters = DeadLetterFile(path: c.droppedAlertsPath)
        let logger = self.logger.part("alerts")
        // Of several services on one PostgreSQL database, one tells (§16).
        let lease = TellerLease(conninfo: c.store.postgresql, logger: logger)
        let deliverers = receivers.map { receiver in
            OutboxDeliverer(
                receiver: receiver, store: store, clock: clock, configuration: delivery, logger: logger, lease: lease
            ) {
                item, reason in
                let entry = DeadLetterFile.Entry(
                    at: Date(), reason: reason, topic: "alert." + item.receiver, body: Data(item.body.utf8), frames: [])
                do { try deadLetters.append([entry]) } catch {
                    logger.error("could not write a dropped alert's dead letter", metadata: ["error": "\(error)"])
                }
            }
        }
        let alerts = AlertService(
            store: store, model: model, rules: c.alerts.rules, receivers: receivers.filter { !$0.isPush }.map(\.name),
            wallClock: clock, logger: logger,
            announce: { broadcaster.publish("alert", $0) },
            wakeDeliverers: { for deliverer in deliverers { deliverer.wake() } }, lease: lease, pushes: true)
        let mqtt = try c.mqtt.map { m in
            MQTTPublisher(
                configuration: .init(
                    host: m.host, port: m.port, caFile: m.caFile, username: m.username,
                    password: try m.passwordFile.map { try Self.secret($0, key: "mqtt.passwordFile") }, keepalive: m.keepaliveS),
                states: MQTTStates(
                    topicPrefix: m.topicPrefix, discoveryPrefix: m.discoveryPrefix, store: store.identity.store,
                    version: String(cString: coffee_tracker_version())),
                logger: self.logger.part("mqtt"), commands: m.acceptDrinks ? commands.take : nil)
        }
        return Outbound(lease: lease, alerts: alerts, deliverers: deliverers, mqtt: mqtt)
    }

    /// A secret's file, trimmed; an error names the key when it cannot be read or is empty.
    static func secret(_ path: String, key: String) throws -> String {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw ConfigurationError(message: "\(key): cannot read \(path) (\(error.localizedDescription))")
        }
        let secret = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !secret.isEmpty else { throw ConfigurationError(message: "\(key): \(path) is empty") }
        return secret
    }
}
