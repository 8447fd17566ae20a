import CoffeeDomain
import Foundation

/// The alerts' rows (docs/protocol.md §16; `HealthStore+Outbox.swift`): each
/// rule's state, and the outbox of what is still to be delivered, with the
/// settled rows kept (under their anchors, for a standby) until a purge.
extension Statements {
    func alertStates() throws -> [OutboxRuleState] {
        try alertStateRows(after: nil).map(\.state)
    }

    /// The rules' rows written after `anchor` (all of them with nil).
    func alertStateRows(after anchor: Int64?, through end: Int64 = .max) throws -> [KeptRows.RuleState] {
        let p = dialect.p
        let s = try cached(
            "SELECT rule, active, key, turns, anchor FROM alert_state WHERE anchor > \(p(1)) AND anchor <= \(p(2)) ORDER BY anchor, rule"
        )
        try s.bind(1, anchor ?? -1)
        try s.bind(2, end)
        defer { s.reset() }
        var rows: [KeptRows.RuleState] = []
        while try s.step() {
            let state = OutboxRuleState(
                rule: s.string(0) ?? "", active: s.int64(1) != 0, key: s.string(2) ?? "", turns: s.int64(3))
            rows.append(.init(state, anchor: s.int64(4)))
        }
        return rows
    }

    /// Writes a rule's row under `anchor`, unless a row of a later anchor is held
    /// (a standby may be handed rows out of order).
    func putAlertState(_ state: OutboxRuleState, anchor: Int64) throws {
        let p = dialect.p
        let s = try cached(
            """
            INSERT INTO alert_state(rule, active, key, turns, anchor) VALUES (\(p(1)), \(p(2)), \(p(3)), \(p(4)), \(p(5)))
            ON CONFLICT(rule) DO UPDATE SET active = excluded.active, key = excluded.key, turns = excluded.turns,
                anchor = excluded.anchor
            WHERE excluded.anchor >= alert_state.anchor
            """)
        try s.bind(1, state.rule)
        try s.bind(2, Int64(state.active ? 1 : 0))
        try s.bind(3, state.key)
        try s.bind(4, state.turns)
        try s.bind(5, anchor)
        try s.run()
    }

    /// Writes an alert's row for its receiver under `anchor` (new, or
    /// settled), unless a row of a later anchor is held.
    func putOutboxItem(_ item: OutboxItem, settled: Bool, anchor: Int64) throws {
        let p = dialect.p
        let s = try cached(
            """
            INSERT INTO outbox(id, receiver, body, created_ms, attempts, next_ms, settled, anchor)
            VALUES (\(p(1)), \(p(2)), \(p(3)), \(p(4)), \(p(5)), \(p(6)), \(p(7)), \(p(8)))
            ON CONFLICT(id, receiver) DO UPDATE SET attempts = excluded.attempts, next_ms = excluded.next_ms,
                settled = excluded.settled, anchor = excluded.anchor
            WHERE excluded.anchor >= outbox.anchor
            """)
        try s.bind(1, item.id)
        try s.bind(2, item.receiver)
        try s.bind(3, item.body)
        try s.bind(4, item.createdMs)
        try s.bind(5, item.attempts)
        try s.bind(6, item.nextMs)
        try s.bind(7, Int64(settled ? 1 : 0))
        try s.bind(8, anchor)
        try s.run()
    }

    /// A try that failed: the attempts and the next due time, nothing else.
    func retryOutboxItem(_ item: OutboxItem) throws {
        let p = dialect.p
        let s = try cached(
            "UPDATE outbox SET attempts = \(p(1)), next_ms = \(p(2)) WHERE id = \(p(3)) AND receiver = \(p(4)) AND settled = 0")
        try s.bind(1, item.attempts)
        try s.bind(2, item.nextMs)
        try s.bind(3, item.id)
        try s.bind(4, item.receiver)
        try s.run()
    }

    /// The outbox's rows written after `anchor` (all of them with nil).
    func outboxRows(after anchor: Int64?, through end: Int64 = .max) throws -> [KeptRows.Alert] {
        let p = dialect.p
        let s = try cached(
            """
            SELECT id, receiver, body, created_ms, attempts, next_ms, settled, anchor FROM outbox
            WHERE anchor > \(p(1)) AND anchor <= \(p(2)) ORDER BY anchor, created_ms, id, receiver
            """)
        try s.bind(1, anchor ?? -1)
        try s.bind(2, end)
        defer { s.reset() }
        var rows: [KeptRows.Alert] = []
        while try s.step() {
            let item = OutboxItem(
                id: s.string(0) ?? "", receiver: s.string(1) ?? "", body: s.string(2) ?? "", createdMs: s.int64(3),
                attempts: s.int64(4), nextMs: s.int64(5))
            rows.append(.init(item, settled: s.int64(6) != 0, anchor: s.int64(7)))
        }
        return rows
    }

    /// Settled rows made before `cutoff`: gone with the purge of tombstones.
    func purgeSettledAlerts(before cutoff: Int64) throws {
        let s = try cached("DELETE FROM outbox WHERE settled = 1 AND created_ms < \(dialect.p(1))")
        try s.bind(1, cutoff)
        try s.run()
    }

    /// A receiver's items due by `nowMs`, oldest first.
    func outboxItems(receiver: String, prefix: Bool, dueBy nowMs: Int64, limit: Int) throws -> [OutboxItem] {
        let p = dialect.p
        // A prefix (`push:`, every subscription's) compared as bytes, whatever the database's collation.
        let which = prefix ? "substr(receiver, 1, \(receiver.utf8.count)) = \(p(1))" : "receiver = \(p(1))"
        let s = try cached(
            """
            SELECT id, receiver, body, created_ms, attempts, next_ms FROM outbox
            WHERE \(which) AND settled = 0 AND next_ms <= \(p(2)) ORDER BY created_ms, id LIMIT \(p(3))
            """)
        try s.bind(1, receiver)
        try s.bind(2, nowMs)
        try s.bind(3, Int64(limit))
        defer { s.reset() }
        var items: [OutboxItem] = []
        while try s.step() {
            items.append(
                OutboxItem(
                    id: s.string(0) ?? "", receiver: s.string(1) ?? "", body: s.string(2) ?? "", createdMs: s.int64(3),
                    attempts: s.int64(4), nextMs: s.int64(5)))
        }
        return items
    }

    /// Per receiver: the items waiting and the earliest `next_ms`.
    func outboxSummary() throws -> [String: (count: Int, nextMs: Int64)] {
        let s = try cached("SELECT receiver, count(*), min(next_ms) FROM outbox WHERE settled = 0 GROUP BY receiver")
        defer { s.reset() }
        var summary: [String: (count: Int, nextMs: Int64)] = [:]
        while try s.step() { summary[s.string(0) ?? ""] = (Int(s.int64(1)), s.int64(2)) }
        return summary
    }

    /// The rows beside the drinks written after `anchor` through `end`
    /// (docs/protocol.md §15, "In the feed"); every row with nil.
    func keptRows(after anchor: Int64?, through end: Int64) throws -> KeptRows {
        KeptRows(
            settings: try settingsRows(after: anchor, through: end), ruleStates: try alertStateRows(after: anchor, through: end),
            alerts: try outboxRows(after: anchor, through: end))
    }

    /// Writes another store's rows beside the drinks under their anchors (a
    /// row of a later anchor held here stays): a standby's, a migration's.
    func putKept(_ kept: KeptRows) throws {
        for row in kept.settings { try putSetting(scope: row.scope, name: row.name, value: row.value, anchor: row.anchor) }
        for row in kept.ruleStates { try putAlertState(row.state, anchor: row.anchor) }
        for row in kept.alerts { try putOutboxItem(row.item, settled: row.settled, anchor: row.anchor) }
    }

    /// Every row beside the drinks gone: a standby about to take its primary's whole state.
    func deleteAllKeptRows() throws {
        for table in ["settings", "alert_state", "outbox"] { try db.executeSQL("DELETE FROM \(table)") }
    }
}
