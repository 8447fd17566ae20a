import Foundation
import Synchronization

/// What the service has done since it started, for `stats`.
public final class ServiceCounters: Sendable {
    /// Drinks and deletions received, over every channel.
    public let received = Atomic<Int>(0)
    /// Changes that took effect (each took an anchor).
    public let stored = Atomic<Int>(0)
    /// Saves ignored as duplicates.
    public let duplicates = Atomic<Int>(0)
    /// Bus messages rejected (to the dead-letter file), those of the MQTT broker's command topics included.
    public let rejected = Atomic<Int>(0)
    /// Of `rejected`, those from the MQTT broker's command topics (docs/protocol.md §16).
    public let rejectedMQTT = Atomic<Int>(0)
    public let requests = Atomic<Int>(0)
    public let filesProcessed = Atomic<Int>(0)
    public let filesFailed = Atomic<Int>(0)
    public let subscribers = Atomic<Int>(0)
    /// Update messages the publisher's bounded queue had to drop.
    public let updatesDropped = Atomic<Int>(0)
    /// Connections the ZAP handler refused (docs/protocol.md §6) and HTTP tokens refused (§12), and per endpoint.
    public let authDenied = Atomic<Int>(0)
    public let authDeniedIngest = Atomic<Int>(0)
    public let authDeniedUpdates = Atomic<Int>(0)
    public let authDeniedQuery = Atomic<Int>(0)
    /// HTTP requests whose token matched none (docs/protocol.md §12).
    public let authDeniedHTTP = Atomic<Int>(0)
    /// `received` per channel, for metrics.
    public let receivedBus = Atomic<Int>(0)
    public let receivedQuery = Atomic<Int>(0)
    public let receivedInbox = Atomic<Int>(0)
    public let receivedHTTP = Atomic<Int>(0)
    /// Drinks taken from the MQTT broker's command topics (docs/protocol.md §16).
    public let receivedMQTT = Atomic<Int>(0)
    /// Query requests answered with an error of the request's making
    /// (`bad_request`, `invalid_drink`, `too_large`).
    public let queryRejected = Atomic<Int>(0)
    public let started = Date()
    /// The inbox file being imported, and how far its reader is (`stats.importing`).
    public let importing = Mutex<InboxProgress?>(nil)

    public init() {}

    public static func bump(_ counter: borrowing Atomic<Int>, by n: Int = 1) {
        counter.add(n, ordering: .relaxed)
    }

    /// Counts `n` events received over `channel` (the total and the channel's own).
    public func received(_ n: Int, over channel: Channel) {
        received.add(n, ordering: .relaxed)
        switch channel {
        case .bus: receivedBus.add(n, ordering: .relaxed)
        case .query: receivedQuery.add(n, ordering: .relaxed)
        case .inbox: receivedInbox.add(n, ordering: .relaxed)
        case .http: receivedHTTP.add(n, ordering: .relaxed)
        case .mqtt: receivedMQTT.add(n, ordering: .relaxed)
        }
    }

    public enum Channel: String, Sendable, CaseIterable { case bus, query, inbox, http, mqtt }
}

/// An inbox file under way: its name, its size, and the bytes read of it so far.
public struct InboxProgress: Sendable, Equatable {
    public var file: String
    public var bytes: Int64
    public var read: Int64
    public var changesRead: Int
}

extension Atomic where Value == Int {
    /// The value, for reports.
    public var value: Int { load(ordering: .relaxed) }
}
