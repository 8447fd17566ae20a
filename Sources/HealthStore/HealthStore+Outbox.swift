import CoffeeDomain
import Foundation

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

    /// Writes `states` and `items` in one durable commit; when it told
    /// something (`told`), with an anchor of its own (docs/protocol.md §16),
    /// announced like any commit with the rows it wrote
    /// (`CommittedBatch.kept`), so that a standby takes them. A change that
    /// tells nothing (a new day, a new store under the threshold) moves no
    /// anchor: a promoted standby makes it again, as silently.
    ///
    /// - Throws: `StoreError.unavailable` in a storage fault (nothing
    ///   written); `StoreError.closed`.
    public func recordAlerts(states: [OutboxRuleState], items: [OutboxItem], told: Bool = true) throws {
        try commitOutbox(anchored: told) { statements, anchor in
            var kept = KeptRows()
            for state in states {
                try statements.putAlertState(state, anchor: anchor)
                kept.ruleStates.append(.init(state, anchor: anchor))
            }
            for item in items {
                try statements.putOutboxItem(item, settled: false, anchor: anchor)
                kept.alerts.append(.init(item, settled: false, anchor: anchor))
            }
            return kept
        }
    }

    /// Settles deliveries in one durable commit: `done` (delivered, or
    /// dropped) stay as settled rows under the commit's anchor, so that a
    /// standby takes the outcome; `retried` stay with their new attempts and
    /// due times. A commit of retries alone moves no anchor.
    public func settleAlerts(done: [OutboxItem], retried: [OutboxItem]) throws {
        guard !done.isEmpty || !retried.isEmpty else { return }
        try commitOutbox(anchored: !done.isEmpty) { statements, anchor in
            var kept = KeptRows()
            for item in done {
                try statements.putOutboxItem(item, settled: true, anchor: anchor)
                kept.alerts.append(.init(item, settled: true, anchor: anchor))
            }
            for item in retried { try statements.retryOutboxItem(item) }
            return kept
        }
    }

    /// A receiver's items due by `nowMs`, oldest first, at most `limit`.
    public func dueAlerts(receiver: String, nowMs: Int64, limit: Int) throws -> [OutboxItem] {
        guard isOpen else { throw StoreError.closed }
        return try statements.outboxItems(receiver: receiver, prefix: false, dueBy: nowMs, limit: limit)
    }

    /// The items due by `nowMs` of every receiver whose name begins with `prefix` (`push:`), oldest first.
    public func dueAlerts(receiversPrefixed prefix: String, nowMs: Int64, limit: Int) throws -> [OutboxItem] {
        guard isOpen else { throw StoreError.closed }
        return try statements.outboxItems(receiver: prefix, prefix: true, dueBy: nowMs, limit: limit)
    }

    /// Per receiver, the items waiting and when the first is due.
    public func outboxSummary() throws -> [String: (count: Int, nextMs: Int64)] {
        guard isOpen else { throw StoreError.closed }
        return try statements.outboxSummary()
    }

    /// One commit of the outbox's rows; `anchored`, under the next anchor
    /// (set in `meta`, since no record holds it), announced with the rows
    /// `body` returns.
    private func commitOutbox(
        anchored: Bool, _ body: (any RecordStatements, Int64) throws -> KeptRows
    ) throws {
        if let refusal = writer.admitsStream() { throw Self.error(refusal) }
        let outcome = commit(arrived: nil) { changes in
            // A change that tells nothing keeps the anchor it was made at: no follower is owed it.
            let anchor = anchored ? currentAnchor + 1 : currentAnchor
            let kept = try body(statements, anchor)
            guard anchored else { return }
            try statements.setMeta("anchor", anchor)
            changes.anchor = anchor
            changes.kept = kept
        }
        switch outcome {
        case .committed: return
        case .storageFault(let reason):
            storageFailed([], reason)
            throw StoreError.unavailable(reason)
        case .failed(let error): throw error
        }
    }
}
