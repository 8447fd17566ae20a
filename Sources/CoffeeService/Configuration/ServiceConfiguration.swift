import CoffeeDomain
import CoffeeLogging
import Foundation

/// Everything `coffee-tracker serve` can be told, with the defaults of
/// PROTOCOL.md §7. Relative paths are resolved against the config file's folder.
public struct ServiceConfiguration: Sendable, Equatable {
    public var dataDirectory: String = "data"
    public var inboxDirectory: String = "inbox"
    /// How often the inbox is swept for files no event announced (a hard link).
    public var inboxSweepIntervalS: Double = 10
    public var ingestBind: [String] = ["tcp://127.0.0.1:5555"]
    /// Publishers that bind, for the service to connect to.
    public var ingestConnect: [ConnectEntry] = []
    /// Per-publisher receive queue; absorbs bursts while the store catches up.
    public var ingestReceiveHighWaterMark: Int = 200_000
    public var updatesBind: [String] = ["tcp://127.0.0.1:5556"]
    /// Per-subscriber send queue; a slow subscriber loses messages past it.
    public var updatesSendHighWaterMark: Int = 100_000
    public var queryBind: [String] = ["tcp://127.0.0.1:5557"]
    /// The monitoring endpoint (`http.bind`, `host:port`); nil turns it off.
    public var httpBind: String? = "127.0.0.1:5558"
    public var halfLifeHours: Double = 5
    public var timeZone: String = TimeZone.current.identifier
    public var modelIntervalMs: Int = 100
    public var refreshIntervalS: Double = 60
    public var heartbeatIntervalS: Double = 1
    public var tombstoneRetentionDays: Double = 30
    public var maxMgCaffeine: Double = 1000
    public var maxFutureSkewS: Double = 300
    /// `limits.earliestDate`: drinks dated before it are refused.
    public var earliestDate: Date = DrinkValidator.Limits.defaultEarliestDate
    public var maxMessageBytes: Int = 1_048_576
    public var maxFileBytes: Int = 268_435_456
    public var logLevel: Logger.Level = .info
    public var logFormat: StderrLogHandler.Format = .text
    /// `security.curve.secretKeyFile`: the service's own `.key_secret`; nil
    /// for plaintext (loopback only, PROTOCOL.md §6).
    public var curveSecretKeyFile: String?
    /// `security.curve.clientsDirectory`: the admitted clients' `.key` files.
    public var curveClientsDirectory: String?
    /// `security.allowPlaintextRemote`: plaintext on addresses other than loopback.
    public var allowPlaintextRemote = false

    public init() {}

    /// An `ingest.connect` entry: a publisher's endpoint, and its public key
    /// when the service connects as its CURVE client.
    public struct ConnectEntry: Sendable, Equatable {
        public var endpoint: String
        public var serverKey: String?

        public init(endpoint: String, serverKey: String? = nil) {
            self.endpoint = endpoint
            self.serverKey = serverKey
        }
    }

    /// The keys whose values differ between `self` and `other` (what a
    /// SIGHUP finds changed), by their configuration names.
    public func changedKeys(comparedTo other: ServiceConfiguration) -> [String] {
        let names: [String: String] = [
            "dataDirectory": "dataDirectory", "inboxDirectory": "inboxDirectory", "inboxSweepIntervalS": "inbox.sweepIntervalS",
            "ingestBind": "ingest.bind", "ingestConnect": "ingest.connect",
            "ingestReceiveHighWaterMark": "ingest.receiveHighWaterMark", "updatesBind": "updates.bind",
            "updatesSendHighWaterMark": "updates.sendHighWaterMark", "queryBind": "query.bind", "httpBind": "http.bind",
            "halfLifeHours": "model.halfLifeHours", "timeZone": "model.timeZone", "modelIntervalMs": "publish.modelIntervalMs",
            "refreshIntervalS": "publish.refreshIntervalS", "heartbeatIntervalS": "publish.heartbeatIntervalS",
            "tombstoneRetentionDays": "store.tombstoneRetentionDays", "maxMgCaffeine": "limits.maxMgCaffeine",
            "maxFutureSkewS": "limits.maxFutureSkewS", "earliestDate": "limits.earliestDate",
            "maxMessageBytes": "limits.maxMessageBytes",
            "maxFileBytes": "limits.maxFileBytes", "logLevel": "log.level", "logFormat": "log.format",
            "curveSecretKeyFile": "security.curve.secretKeyFile", "curveClientsDirectory": "security.curve.clientsDirectory",
            "allowPlaintextRemote": "security.allowPlaintextRemote",
        ]
        let mine = Mirror(reflecting: self).children
        let theirs = Dictionary(
            Mirror(reflecting: other).children.compactMap { child in child.label.map { ($0, "\(child.value)") } },
            uniquingKeysWith: { a, _ in a })
        return mine.compactMap { child in
            guard let label = child.label, theirs[label] != "\(child.value)" else { return nil }
            return names[label] ?? label
        }
    }

    /// Every TCP endpoint bound or connected, with the key that names it.
    public var tcpEndpoints: [(key: String, endpoint: String)] {
        let all =
            ingestBind.map { ("ingest.bind", $0) } + ingestConnect.map { ("ingest.connect", $0.endpoint) }
            + updatesBind.map { ("updates.bind", $0) } + queryBind.map { ("query.bind", $0) }
        return all.filter { $0.1.hasPrefix("tcp://") }.map { (key: $0.0, endpoint: $0.1) }
    }

    public var storePath: String { (dataDirectory as NSString).appendingPathComponent("coffee-tracker.sqlite") }
    public var modelCachePath: String { (dataDirectory as NSString).appendingPathComponent("CoffeeTracker.plist") }
    public var deadLetterPath: String { (dataDirectory as NSString).appendingPathComponent("rejected.jsonl") }
    public var endpointsPath: String { (dataDirectory as NSString).appendingPathComponent("endpoints.json") }

    public var limits: DrinkValidator.Limits {
        DrinkValidator.Limits(maxMgCaffeine: maxMgCaffeine, maxFutureSkew: maxFutureSkewS, earliestDate: earliestDate)
    }

    public var caffeineModel: CaffeineModel {
        CaffeineModel(halfLifeHours: halfLifeHours, timeZone: TimeZone(identifier: timeZone) ?? .current)
    }
}

/// A configuration that cannot be used; the message names the file and key.
public struct ConfigurationError: Error, CustomStringConvertible, Equatable {
    public let message: String
    public var description: String { message }
}
