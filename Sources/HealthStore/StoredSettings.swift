import CoffeeDomain
import Foundation
import Synchronization

/// The settings a store keeps (docs/protocol.md §15): the person's own
/// values and their drink catalogue, as rows of `settings` (scope, name, a
/// JSON value, the anchor of the change that wrote it). The store keeps
/// them as text and does not read them; its `LiveSettings` does, over the
/// configuration's defaults.
public struct StoredSettings: Sendable, Hashable {
    /// Scope, then name, then the value's JSON text.
    public var values: [String: [String: String]]
    /// The anchor of the last change to any of them; 0 when none was ever made.
    public var anchor: Int64

    public init(values: [String: [String: String]] = [:], anchor: Int64 = 0) {
        self.values = values
        self.anchor = anchor
    }

    /// The values of one scope (`person`, `catalogue`).
    public subscript(scope: String) -> [String: String] { values[scope] ?? [:] }
}

extension HealthStore {
    /// Writes `values` (name and JSON text) into `scope` in one durable
    /// commit with an anchor of its own, announced like any commit (its
    /// batch carries the settings after it, `CommittedBatch.settings`), and
    /// returns the settings after it. Commits what was queued before it first.
    ///
    /// - Throws: `StoreError.unavailable` in a storage fault (nothing stored);
    ///   `StoreError.closed`.
    public func writeSettings(scope: String, _ values: [(name: String, value: String)]) throws -> StoredSettings {
        if let refusal = writer.admitsStream() { throw Self.error(refusal) }
        commitPending()
        let outcome = commit(arrived: ContinuousClock.now) { changes -> StoredSettings in
            let anchor = currentAnchor + 1
            for (name, value) in values {
                try statements.putSetting(scope: scope, name: name, value: value, anchor: anchor)
                changes.kept.settings.append(.init(scope: scope, name: name, value: value, anchor: anchor))
            }
            // No record holds this anchor: `meta` keeps it (as a purge's does).
            try statements.setMeta("anchor", anchor)
            changes.anchor = anchor
            // A shared store reads them back: another service may have written other names meanwhile.
            let after = try Self.readSettings(statements)
            changes.settings = after
            return after
        }
        switch outcome {
        case .committed(let after):
            return after
        case .storageFault(let reason):
            storageFailed([], reason)
            throw StoreError.unavailable(reason)
        case .failed(let error):
            throw error
        }
    }

    /// Every row of `settings`.
    static func readSettings(_ statements: any RecordStatements) throws -> StoredSettings {
        var settings = StoredSettings()
        for row in try statements.settingsRows() {
            settings.values[row.scope, default: [:]][row.name] = row.value
            settings.anchor = max(settings.anchor, row.anchor)
        }
        return settings
    }

    /// The rows beside the drinks that another service of a shared store
    /// wrote after `after` through `anchor` (its settings, alerts and
    /// deliveries), and the settings after them when it wrote some: what its
    /// announcement carries. Empty when they cannot be read now (the next
    /// announcement that leaves an anchor out looks again).
    func keptChanged(after: Int64, through anchor: Int64) -> (kept: KeptRows, settings: StoredSettings?) {
        guard let kept = try? statements.keptRows(after: after, through: anchor), !kept.isEmpty else { return (KeptRows(), nil) }
        guard !kept.settings.isEmpty, let read = try? Self.readSettings(statements) else { return (kept, nil) }
        liveSettings.update(stored: read.values, anchor: read.anchor)
        return (kept, read)
    }
}
