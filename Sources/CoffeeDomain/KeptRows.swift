import Foundation

/// A rule's state as the store keeps it (docs/protocol.md §16): on or off,
/// its key, and how many alerts it has told (`turns`), from which the next
/// alert's id is derived.
public struct OutboxRuleState: Sendable, Hashable {
    public var rule: String
    public var active: Bool
    public var key: String
    public var turns: Int64

    public init(rule: String, active: Bool, key: String, turns: Int64 = 0) {
        self.rule = rule
        self.active = active
        self.key = key
        self.turns = turns
    }
}

/// An alert waiting for one receiver: its body as sent, when it was made,
/// how often it was tried and when it is next due.
public struct OutboxItem: Sendable, Hashable {
    public var id: String
    public var receiver: String
    public var body: String
    public var createdMs: Int64
    public var attempts: Int64
    public var nextMs: Int64

    public init(id: String, receiver: String, body: String, createdMs: Int64, attempts: Int64 = 0, nextMs: Int64) {
        self.id = id
        self.receiver = receiver
        self.body = body
        self.createdMs = createdMs
        self.attempts = attempts
        self.nextMs = nextMs
    }
}

/// The rows a store keeps beside its drinks (docs/protocol.md §15, "In the
/// feed"): the person's settings and catalogue, the rules' states and the
/// outbox, each with the anchor of the change that wrote it. A `changes`
/// reply or message carries those of the anchors it covers, and a standby
/// stores them as its primary did.
public struct KeptRows: Sendable, Hashable {
    /// A setting (scope `person`) or a catalogue entry (scope `catalogue`): its JSON text.
    public struct Setting: Sendable, Hashable {
        public var scope: String
        public var name: String
        public var value: String
        public var anchor: Int64

        public init(scope: String, name: String, value: String, anchor: Int64) {
            (self.scope, self.name, self.value, self.anchor) = (scope, name, value, anchor)
        }
    }

    public struct RuleState: Sendable, Hashable {
        public var state: OutboxRuleState
        public var anchor: Int64

        public init(_ state: OutboxRuleState, anchor: Int64) { (self.state, self.anchor) = (state, anchor) }
    }

    /// An alert for one receiver; `settled` once delivered or dropped.
    public struct Alert: Sendable, Hashable {
        public var item: OutboxItem
        public var settled: Bool
        public var anchor: Int64

        public init(_ item: OutboxItem, settled: Bool, anchor: Int64) {
            (self.item, self.settled, self.anchor) = (item, settled, anchor)
        }
    }

    public var settings: [Setting] = []
    public var ruleStates: [RuleState] = []
    public var alerts: [Alert] = []

    public init(settings: [Setting] = [], ruleStates: [RuleState] = [], alerts: [Alert] = []) {
        (self.settings, self.ruleStates, self.alerts) = (settings, ruleStates, alerts)
    }

    public var isEmpty: Bool { settings.isEmpty && ruleStates.isEmpty && alerts.isEmpty }

    /// Every row's anchor.
    public var anchors: [Int64] { settings.map(\.anchor) + ruleStates.map(\.anchor) + alerts.map(\.anchor) }

    /// The rows of `other` after these (a later row of the same key wins when stored).
    public mutating func append(_ other: KeptRows) {
        settings += other.settings
        ruleStates += other.ruleStates
        alerts += other.alerts
    }

    /// The rows with the newest of each key (scope and name, rule, alert and
    /// receiver), in anchor order: what a standby's commit of many messages stores.
    public var newestOfEach: KeptRows {
        func newest<Row, Key: Hashable>(_ rows: [Row], _ key: (Row) -> Key, _ anchor: (Row) -> Int64) -> [Row] {
            var latest: [Key: Row] = [:]
            for row in rows where latest[key(row)].map({ anchor($0) <= anchor(row) }) ?? true { latest[key(row)] = row }
            return latest.values.sorted { anchor($0) < anchor($1) }
        }
        return KeptRows(
            settings: newest(settings, { [$0.scope, $0.name] }, \.anchor),
            ruleStates: newest(ruleStates, \.state.rule, \.anchor),
            alerts: newest(alerts, { [$0.item.id, $0.item.receiver] }, \.anchor))
    }

    /// The members of a `changes` reply or message, each only when it has a row.
    public var members: [(String, JSONValue)] {
        var members: [(String, JSONValue)] = []
        if !settings.isEmpty {
            members.append(
                (
                    "settings",
                    .array(
                        settings.map {
                            .object([
                                ("scope", .string($0.scope)), ("name", .string($0.name)),
                                ("value", .encoded(Array($0.value.utf8))), ("anchor", .int($0.anchor)),
                            ])
                        })
                ))
        }
        if !ruleStates.isEmpty {
            members.append(
                (
                    "alertStates",
                    .array(
                        ruleStates.map {
                            .object([
                                ("rule", .string($0.state.rule)), ("active", .bool($0.state.active)),
                                ("key", .string($0.state.key)), ("turns", .int($0.state.turns)), ("anchor", .int($0.anchor)),
                            ])
                        })
                ))
        }
        if !alerts.isEmpty {
            members.append(
                (
                    "outbox",
                    .array(
                        alerts.map {
                            .object([
                                ("id", .string($0.item.id)), ("receiver", .string($0.item.receiver)),
                                ("createdMs", .int($0.item.createdMs)), ("settled", .bool($0.settled)),
                                ("alert", .encoded(Array($0.item.body.utf8))), ("anchor", .int($0.anchor)),
                            ])
                        })
                ))
        }
        return members
    }

    /// Reads one member of a `changes` reply or message (`settings`, `alertStates`, `outbox`) into these rows.
    public mutating func read(_ name: String, _ value: JSONValue) throws(WireFormat.DecodingError) {
        switch name {
        case "settings":
            for row in try value.items() {
                settings.append(
                    Setting(
                        scope: try row.member("scope").text(), name: try row.member("name").text(),
                        value: try row.member("value").serialized(), anchor: try row.member("anchor").integer()))
            }
        case "alertStates":
            for row in try value.items() {
                let state = OutboxRuleState(
                    rule: try row.member("rule").text(), active: try row.member("active").bool(),
                    key: try row.member("key").text(), turns: try row.optionalMember("turns")?.integer() ?? 0)
                ruleStates.append(RuleState(state, anchor: try row.member("anchor").integer()))
            }
        case "outbox":
            for row in try value.items() {
                let created = try row.member("createdMs").integer()
                let item = OutboxItem(
                    id: try row.member("id").text(), receiver: try row.member("receiver").text(),
                    body: try row.member("alert").serialized(), createdMs: created, nextMs: created)
                alerts.append(Alert(item, settled: try row.member("settled").bool(), anchor: try row.member("anchor").integer()))
            }
        default:
            return
        }
    }

    /// The rows of a `changes` reply or message; none when it has no such member.
    public init(reading reply: JSONValue) throws(WireFormat.DecodingError) {
        for name in ["settings", "alertStates", "outbox"] {
            if let value = try reply.optionalMember(name) { try read(name, value) }
        }
    }
}
