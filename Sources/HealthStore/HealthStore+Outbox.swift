import CoffeeDomain
import Foundation

/// A rule's state as the store keeps it (docs/protocol.md §16).
public struct OutboxRuleState: Sendable, Hashable {
    public var rule: String
    public var active: Bool
    public var key: String

    public init(rule: String, active: Bool, key: String) {
        self.rule = rule
        self.active = active
        self.key = key
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

/// The alerts' outbox (docs/protocol.md §16): what the rules decided is
/// written with their new state in one durable commit (which moves no
/// anchor: it changes no drink), so that after a crash an alert is either
/// told and waiting in the outbox, or not decided at all and decided again;
/// a delivery's outcome is written in one commit per batch.
extension HealthStore {
    /// The rules' states.
    public func alertStates() throws -> [OutboxRuleState] {
        guard isOpen else { throw StoreError.closed }
        return try statements.alertStates()
    }

    /// Writes `states` and `items` in one durable commit.
    ///
    /// - Throws: `StoreError.unavailable` in a storage fault (nothing
    ///   written); `StoreError.closed`.
    public func recordAlerts(states: [OutboxRuleState], items: [OutboxItem]) throws {
        try commitOutbox { statements in
            for state in states { try statements.putAlertState(state) }
            for item in items { try statements.putOutboxItem(item) }
        }
    }

    /// Settles deliveries in one durable commit: `done` leave the outbox
    /// (delivered, or dropped), `retried` stay with their new attempts and due times.
    public func settleAlerts(done: [OutboxItem], retried: [OutboxItem]) throws {
        guard !done.isEmpty || !retried.isEmpty else { return }
        try commitOutbox { statements in
            for item in done { try statements.removeOutboxItem(id: item.id, receiver: item.receiver) }
            for item in retried { try statements.putOutboxItem(item) }
        }
    }

    /// A receiver's items due by `nowMs`, oldest first, at most `limit`.
    public func dueAlerts(receiver: String, nowMs: Int64, limit: Int) throws -> [OutboxItem] {
        guard isOpen else { throw StoreError.closed }
        return try statements.outboxItems(receiver: receiver, dueBy: nowMs, limit: limit)
    }

    /// Per receiver, the items waiting and when the first is due.
    public func outboxSummary() throws -> [String: (count: Int, nextMs: Int64)] {
        guard isOpen else { throw StoreError.closed }
        return try statements.outboxSummary()
    }

    private func commitOutbox(_ body: (any RecordStatements) throws -> Void) throws {
        if let refusal = writer.admitsStream() { throw Self.error(refusal) }
        let outcome = commit(arrived: nil) { _ in try body(statements) }
        switch outcome {
        case .committed: return
        case .storageFault(let reason):
            storageFailed([], reason)
            throw StoreError.unavailable(reason)
        case .failed(let error): throw error
        }
    }
}
