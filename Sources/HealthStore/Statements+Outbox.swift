import CoffeeDomain
import Foundation

/// The alerts' rows (docs/protocol.md §16; `HealthStore+Outbox.swift`): each
/// rule's state, and the outbox of what is still to be delivered.
extension Statements {
    func alertStates() throws -> [OutboxRuleState] {
        let s = try cached("SELECT rule, active, key FROM alert_state ORDER BY rule")
        defer { s.reset() }
        var rows: [OutboxRuleState] = []
        while try s.step() {
            rows.append(OutboxRuleState(rule: s.string(0) ?? "", active: s.int64(1) != 0, key: s.string(2) ?? ""))
        }
        return rows
    }

    func putAlertState(_ state: OutboxRuleState) throws {
        let p = dialect.p
        let s = try cached(
            """
            INSERT INTO alert_state(rule, active, key) VALUES (\(p(1)), \(p(2)), \(p(3)))
            ON CONFLICT(rule) DO UPDATE SET active = excluded.active, key = excluded.key
            """)
        try s.bind(1, state.rule)
        try s.bind(2, Int64(state.active ? 1 : 0))
        try s.bind(3, state.key)
        try s.run()
    }

    func putOutboxItem(_ item: OutboxItem) throws {
        let p = dialect.p
        let s = try cached(
            """
            INSERT INTO outbox(id, receiver, body, created_ms, attempts, next_ms)
            VALUES (\(p(1)), \(p(2)), \(p(3)), \(p(4)), \(p(5)), \(p(6)))
            ON CONFLICT(id, receiver) DO UPDATE SET attempts = excluded.attempts, next_ms = excluded.next_ms
            """)
        try s.bind(1, item.id)
        try s.bind(2, item.receiver)
        try s.bind(3, item.body)
        try s.bind(4, item.createdMs)
        try s.bind(5, item.attempts)
        try s.bind(6, item.nextMs)
        try s.run()
    }

    func removeOutboxItem(id: String, receiver: String) throws {
        let p = dialect.p
        let s = try cached("DELETE FROM outbox WHERE id = \(p(1)) AND receiver = \(p(2))")
        try s.bind(1, id)
        try s.bind(2, receiver)
        try s.run()
    }

    /// A receiver's items due by `nowMs`, oldest first; with `nowMs` nil, all of them.
    func outboxItems(receiver: String, dueBy nowMs: Int64, limit: Int) throws -> [OutboxItem] {
        let p = dialect.p
        let s = try cached(
            """
            SELECT id, receiver, body, created_ms, attempts, next_ms FROM outbox
            WHERE receiver = \(p(1)) AND next_ms <= \(p(2)) ORDER BY created_ms, id LIMIT \(p(3))
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
        let s = try cached("SELECT receiver, count(*), min(next_ms) FROM outbox GROUP BY receiver")
        defer { s.reset() }
        var summary: [String: (count: Int, nextMs: Int64)] = [:]
        while try s.step() { summary[s.string(0) ?? ""] = (Int(s.int64(1)), s.int64(2)) }
        return summary
    }
}
