import CoffeeDomain
import CoffeeLogging
import Foundation
import HealthStore

/// Drinks from the MQTT broker's command topics (docs/protocol.md §16,
/// `mqtt.acceptDrinks`): each message is a bus message (§2) of the topic it
/// stands for, read by the bus's own rules, its drinks' `source` defaulting
/// to `mqtt`; a refused one goes to the dead-letter file (its topic
/// `mqtt:drink.add`), and the service goes on. Who may publish there is the
/// broker's to say (its ACL: the topics' own role). Called on libmosquitto's thread: the store is only handed the
/// batch (`submit`), never waited for.
struct MQTTCommands: Sendable {
    let store: HealthStore
    let decoder: BatchDecoder
    let deadLetters: DeadLetterFile
    let counters: ServiceCounters
    let clock: any WallClock
    let logger: Logger

    /// One message: `topic` is the bus's (`drink.add`, `drink.delete`).
    func take(_ topic: String, _ payload: [UInt8]) {
        let topicBytes = Array(topic.utf8)
        let outcome = topicBytes.withUnsafeBytes { t in
            payload.withUnsafeBytes { p in
                IngestEndpoint.decode([t, p], decoder: decoder, now: clock.now(), channel: "mqtt")
            }
        }
        let batch: WriteBatch
        switch outcome {
        case .drinks(let drinks): batch = WriteBatch(drinks: drinks)
        case .deletions(let deletions): batch = WriteBatch(deletions: deletions)
        case .rejected(var entry):
            defer {
                ServiceCounters.bump(counters.rejected)
                ServiceCounters.bump(counters.rejectedMQTT)
            }
            entry.topic = "mqtt:" + entry.topic  // where it came from, beside the bus's own
            do {
                try deadLetters.append([entry])
            } catch {
                logger.error("could not write the dead-letter file", metadata: ["error": "\(error)"])
            }
            logger.warning("an MQTT command was refused", metadata: ["topic": "\(topic)", "reason": "\(entry.reason)"])
            return
        }
        counters.received(batch.count, over: .mqtt)
        let (counters, logger) = (self.counters, self.logger)
        store.submissions.submit(batch) { result in
            switch result {
            case .success(let r):
                ServiceCounters.bump(counters.stored, by: r.added + r.deleted + r.unknown)
                ServiceCounters.bump(counters.duplicates, by: r.duplicates)
            case .failure(let error):
                logger.error("an MQTT command's batch was not stored", metadata: ["error": "\(error)"])
            }
        }
    }
}
