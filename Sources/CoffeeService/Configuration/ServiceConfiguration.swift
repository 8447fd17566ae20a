import CoffeeCharts
import CoffeeDomain
import CoffeeLogging
import CoffeeModel
import Foundation
import HealthStore

/// Everything `coffee-tracker serve` can be told (docs/protocol.md §7), by the
/// file's sections. Each default is written once, in the part it belongs
/// to (an endpoint's `Configuration`, the validator's `Limits`, the model),
/// and read here from it. Relative paths are resolved against the config
/// file's folder.
public struct ServiceConfiguration: Sendable, Equatable {
    public var dataDirectory = "data"
    public var inboxDirectory = "inbox"
    public var inbox = Inbox()
    public var ingest = Ingest()
    public var updates = Updates()
    public var query = Query()
    public var http = HTTP()
    public var model = Model()
    public var publish = Publish()
    public var store = Store()
    public var limits = Limits()
    public var log = Log()
    public var security = Security()
    /// A standby's primary (docs/protocol.md §11); nil for a primary.
    public var follow: Follow?
    /// What the service tells the person, and where (docs/protocol.md §16).
    public var alerts = Alerts()
    /// The MQTT broker (docs/protocol.md §16); nil: none.
    public var mqtt: MQTT?

    public init() {}

    /// `inbox`.
    public struct Inbox: Sendable, Equatable {
        /// How often the inbox is swept for files no event announced (a hard link).
        public var sweepIntervalS = seconds(InboxService.defaultSweepInterval)
    }

    /// `ingest`.
    public struct Ingest: Sendable, Equatable {
        public var bind = IngestEndpoint.Configuration().bind
        /// Publishers that bind, for the service to connect to.
        public var connect: [ConnectEntry] = []
        /// Per-publisher receive queue; absorbs bursts while the store catches up.
        public var receiveHighWaterMark = IngestEndpoint.Configuration().receiveHighWaterMark
    }

    /// `updates`.
    public struct Updates: Sendable, Equatable {
        public var bind = Broadcaster.Configuration().bind
        /// Per-subscriber send queue; a slow subscriber loses messages past it.
        public var sendHighWaterMark = Broadcaster.Configuration().sendHighWaterMark
    }

    /// `query`.
    public struct Query: Sendable, Equatable {
        public var bind = QueryEndpoint.Configuration().bind
    }

    /// `http`.
    public struct HTTP: Sendable, Equatable {
        /// The HTTP endpoint (`host:port`); nil turns it off.
        public var bind: String? = HTTPEndpoint.Configuration().bind
        /// `http.tls`: HTTPS with these PEM files (docs/protocol.md §12).
        public var tls: TLSFiles?
        public var maxConnections = HTTPEndpoint.Configuration().maxConnections
        public var idleTimeoutS = seconds(HTTPEndpoint.Configuration().idleTimeout)
        /// Proxies whose `X-Forwarded-For` and `X-Forwarded-Proto` are believed.
        public var trustedProxies: [String] = []
        /// How long an address past 20 failed tokens in this time is refused (429).
        public var lockoutS = 60.0
    }

    /// `model`.
    public struct Model: Sendable, Equatable {
        public var halfLifeHours = CaffeineModel().halfLifeHours
        public var timeZone = TimeZone.current.identifier
        /// The picture's "under this by" line (docs/protocol.md §10).
        public var sleepThresholdMg = PersonSettings.defaultSleepThresholdMg
        /// The most a person means to take in a day: history's days over it (docs/protocol.md §15).
        public var dailyLimitMg = PersonSettings.defaultDailyLimitMg
    }

    /// `publish`.
    public struct Publish: Sendable, Equatable {
        public var modelIntervalMs = Int(seconds(ModelService.Configuration().roundInterval) * 1000)
        public var refreshIntervalS = seconds(ModelService.Configuration().refreshInterval)
        public var heartbeatIntervalS = seconds(Broadcaster.Configuration().heartbeatInterval)
    }

    /// `store`.
    public struct Store: Sendable, Equatable {
        public var tombstoneRetentionDays = HealthStore.Configuration(path: "").tombstoneRetention / 86_400
        /// Where query `backup` writes (docs/protocol.md §11); nil: `<dataDirectory>/backups`.
        public var backupDirectory: String?
        /// `store.postgresql.conninfo`: the store in a PostgreSQL database
        /// (docs/protocol.md §11) instead of `<dataDirectory>/coffee.sqlite`.
        public var postgresql: String?
    }

    /// `limits`.
    public struct Limits: Sendable, Equatable {
        public var maxMgCaffeine = DrinkValidator.Limits().maxMgCaffeine
        public var maxFutureSkewS = DrinkValidator.Limits().maxFutureSkew
        /// Drinks dated before it are refused.
        public var earliestDate = DrinkValidator.Limits().earliestDate
        public var maxMessageBytes = IngestEndpoint.Configuration().maxMessageBytes
        public var maxFileBytes = InboxImporter.Configuration(inbox: URL(fileURLWithPath: "/")).maxFileBytes
        /// Apple Health exports (`.xml`, `.zip`) are bounded by this instead.
        public var maxExportBytes = InboxImporter.Configuration(inbox: URL(fileURLWithPath: "/")).maxExportBytes
    }

    /// `log`.
    public struct Log: Sendable, Equatable {
        public var level: Logger.Level = .info
        public var format: StderrLogHandler.Format = .text
    }

    /// `security`.
    public struct Security: Sendable, Equatable {
        /// `security.curve`: nil for plaintext (loopback only, docs/protocol.md §6).
        public var curve: Curve?
        /// Plaintext on addresses other than loopback.
        public var allowPlaintextRemote = false
        /// The HTTP endpoint's tokens (`NAME.token` files, docs/protocol.md §12); nil: no tokens.
        public var tokensDirectory: String?

        public struct Curve: Sendable, Equatable {
            /// The service's own `.key_secret`.
            public var secretKeyFile: String
            /// The admitted clients' `.key` files.
            public var clientsDirectory: String
        }
    }

    /// `follow`: the service is a read-only copy of the primary there.
    public struct Follow: Sendable, Equatable {
        public var query: String
        public var updates: String
        /// The primary's public key, under its CURVE.
        public var serverKey: String?
        /// This standby's own `.key_secret`, as the primary's client.
        public var keyFile: String?
        /// Take a primary of another store, dropping what this one holds
        /// (docs/protocol.md §13); without it such a primary is refused,
        /// unless this store is empty.
        public var adopt = false
    }

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
        Self.keys.filter { $0.differs(self, other) }.map(\.name)
    }

    /// Every key of the file, by name, with a comparison of its value.
    static let keys: [Key] = [
        Key("dataDirectory", \.dataDirectory), Key("inboxDirectory", \.inboxDirectory),
        Key("inbox.sweepIntervalS", \.inbox.sweepIntervalS),
        Key("ingest.bind", \.ingest.bind), Key("ingest.connect", \.ingest.connect),
        Key("ingest.receiveHighWaterMark", \.ingest.receiveHighWaterMark),
        Key("updates.bind", \.updates.bind), Key("updates.sendHighWaterMark", \.updates.sendHighWaterMark),
        Key("query.bind", \.query.bind), Key("http.bind", \.http.bind),
        Key("http.tls", \.http.tls), Key("http.maxConnections", \.http.maxConnections),
        Key("http.idleTimeoutS", \.http.idleTimeoutS), Key("http.trustedProxies", \.http.trustedProxies),
        Key("http.lockoutS", \.http.lockoutS),
        Key("model.halfLifeHours", \.model.halfLifeHours), Key("model.timeZone", \.model.timeZone),
        Key("model.sleepThresholdMg", \.model.sleepThresholdMg), Key("model.dailyLimitMg", \.model.dailyLimitMg),
        Key("publish.modelIntervalMs", \.publish.modelIntervalMs),
        Key("publish.refreshIntervalS", \.publish.refreshIntervalS),
        Key("publish.heartbeatIntervalS", \.publish.heartbeatIntervalS),
        Key("store.tombstoneRetentionDays", \.store.tombstoneRetentionDays),
        Key("store.backupDirectory", \.store.backupDirectory),
        Key("store.postgresql.conninfo", \.store.postgresql),
        Key("limits.maxMgCaffeine", \.limits.maxMgCaffeine), Key("limits.maxFutureSkewS", \.limits.maxFutureSkewS),
        Key("limits.earliestDate", \.limits.earliestDate), Key("limits.maxMessageBytes", \.limits.maxMessageBytes),
        Key("limits.maxFileBytes", \.limits.maxFileBytes), Key("limits.maxExportBytes", \.limits.maxExportBytes),
        Key("log.level", \.log.level), Key("log.format", \.log.format),
        Key("security.curve", \.security.curve),
        Key("security.allowPlaintextRemote", \.security.allowPlaintextRemote),
        Key("security.tokensDirectory", \.security.tokensDirectory),
        Key("follow.query", \.follow?.query), Key("follow.updates", \.follow?.updates),
        Key("follow.serverKey", \.follow?.serverKey), Key("follow.keyFile", \.follow?.keyFile),
        Key("follow.adopt", \.follow?.adopt),
        Key("alerts.dailyLimit", \.alerts.dailyLimit), Key("alerts.levelOverMg", \.alerts.levelOverMg),
        Key("alerts.sleepThreshold", \.alerts.sleepThreshold), Key("alerts.bedtime", \.alerts.bedtime),
        Key("alerts.maxAgeS", \.alerts.maxAgeS), Key("alerts.retryInitialS", \.alerts.retryInitialS),
        Key("alerts.retryMaxS", \.alerts.retryMaxS), Key("alerts.webhook.url", \.alerts.webhook?.url),
        Key("alerts.webhook.secretFile", \.alerts.webhook?.secretFile), Key("alerts.ntfy.url", \.alerts.ntfy?.url),
        Key("alerts.ntfy.tokenFile", \.alerts.ntfy?.secretFile), Key("alerts.pushSubject", \.alerts.pushSubject),
        Key("mqtt.host", \.mqtt?.host),
        Key("mqtt.port", \.mqtt?.port), Key("mqtt.tls.caFile", \.mqtt?.caFile), Key("mqtt.username", \.mqtt?.username),
        Key("mqtt.passwordFile", \.mqtt?.passwordFile), Key("mqtt.topicPrefix", \.mqtt?.topicPrefix),
        Key("mqtt.discoveryPrefix", \.mqtt?.discoveryPrefix), Key("mqtt.keepaliveS", \.mqtt?.keepaliveS),
        Key("mqtt.acceptDrinks", \.mqtt?.acceptDrinks),
    ]

    /// One key of the file: its name, and whether two configurations differ in it.
    struct Key: Sendable {
        let name: String
        let differs: @Sendable (ServiceConfiguration, ServiceConfiguration) -> Bool

        init<Value: Equatable & Sendable>(_ name: String, _ path: KeyPath<ServiceConfiguration, Value> & Sendable) {
            self.name = name
            differs = { $0[keyPath: path] != $1[keyPath: path] }
        }
    }

    /// The keys `section` allows (`ingest` → `bind`, `connect`, …), from `keys`.
    /// `""` gives the top level's keys and sections.
    static func keys(of section: String) -> Set<String> {
        Set(
            keys.compactMap { key -> String? in
                let rest: Substring? =
                    section.isEmpty
                    ? Substring(key.name) : key.name.hasPrefix(section + ".") ? key.name.dropFirst(section.count + 1) : nil
                return rest.map { String($0.prefix { $0 != "." }) }
            })
    }

    /// Every TCP endpoint bound or connected, with the key that names it.
    public var tcpEndpoints: [(key: String, endpoint: String)] {
        let all =
            ingest.bind.map { ("ingest.bind", $0) } + ingest.connect.map { ("ingest.connect", $0.endpoint) }
            + updates.bind.map { ("updates.bind", $0) } + query.bind.map { ("query.bind", $0) }
            + (follow.map { [("follow.query", $0.query), ("follow.updates", $0.updates)] } ?? [])
        return all.filter { $0.1.hasPrefix("tcp://") }.map { (key: $0.0, endpoint: $0.1) }
    }

    public var storePath: String { (dataDirectory as NSString).appendingPathComponent("coffee-tracker.sqlite") }
    /// The store as log lines and `status` name it: its file, or its
    /// database's conninfo with any password left out.
    public var storeName: String {
        guard let conninfo = store.postgresql else { return storePath }
        let hidden =
            conninfo
            .replacingOccurrences(of: #"password\s*=\s*('[^']*'|\S+)"#, with: "password=…", options: .regularExpression)
            .replacingOccurrences(of: #"(://[^:/@]*):[^@]*@"#, with: "$1:…@", options: .regularExpression)
        return "PostgreSQL (\(hidden))"
    }
    public var backupPath: String { store.backupDirectory ?? (dataDirectory as NSString).appendingPathComponent("backups") }
    public var modelCachePath: String { (dataDirectory as NSString).appendingPathComponent("CoffeeTracker.plist") }
    public var deadLetterPath: String { (dataDirectory as NSString).appendingPathComponent("rejected.jsonl") }
    /// Alerts dropped undelivered (docs/protocol.md §16), one JSON object per line as `rejected.jsonl`'s.
    /// The service's Web Push key (docs/protocol.md §17), made at the first start.
    public var pushKeyPath: String { (dataDirectory as NSString).appendingPathComponent("vapid.pem") }
    public var droppedAlertsPath: String { (dataDirectory as NSString).appendingPathComponent("alerts-dropped.jsonl") }
    public var endpointsPath: String { (dataDirectory as NSString).appendingPathComponent("endpoints.json") }

    public var drinkLimits: DrinkValidator.Limits {
        DrinkValidator.Limits(
            maxMgCaffeine: limits.maxMgCaffeine, maxFutureSkew: limits.maxFutureSkewS, earliestDate: limits.earliestDate)
    }

    /// What the person's tracker goes by (docs/protocol.md §15), from `model`:
    /// the defaults, under what the person set in the store (`LiveSettings`).
    public var settings: PersonSettings {
        var settings = PersonSettings(
            model: caffeineModel, sleepThresholdMg: model.sleepThresholdMg, dailyLimitMg: model.dailyLimitMg)
        settings.timeZoneName = model.timeZone
        settings.levelOverMg = alerts.levelOverMg ?? 0
        settings.bedtime = alerts.bedtime
        return settings
    }

    public var caffeineModel: CaffeineModel {
        CaffeineModel(halfLifeHours: model.halfLifeHours, timeZone: TimeZone(identifier: model.timeZone) ?? .current)
    }
}

/// A `Duration` in seconds, as the file gives them.
func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

/// A configuration that cannot be used; the message names the file and key.
public struct ConfigurationError: Error, CustomStringConvertible, Equatable {
    public let message: String
    public var description: String { message }
}
