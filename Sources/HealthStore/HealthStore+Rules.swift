import CoffeeDomain
import Foundation
import SQLite

/// The store rules of docs/protocol.md §1, applied inside an open transaction,
/// and the record of what one commit changed.
extension HealthStore {
    /// Applies the store rules of docs/protocol.md §1 for one batch, inside the
    /// open transaction.
    func write(_ batch: WriteBatch, into changes: inout CommitChanges) throws -> WriteResult {
        var result = WriteResult()
        let now = Int64((configuration.clock.now().timeIntervalSince1970 * 1000).rounded())
        var next = changes.anchor ?? currentAnchor
        var rest = batch.drinks[...]
        while !rest.isEmpty {
            // Runs of new drinks in one statement each; a run that finds a
            // record (or a UUID twice) is written again below.
            let run = rest.prefix(statements.dialect.runLength(rest.count))
            rest = rest.dropFirst(run.count)
            if run.count > 1, try insertRun(run, after: &next, now: now, into: &changes, &result) { continue }
            // What is left goes one by one (SQLite's runs are short); a run
            // of PostgreSQL's, any length, is cut around the drinks that have
            // records or repeat (one lookup), the drinks between going in as
            // runs again, so that an old drink among thousands does not send
            // them all one by one.
            let single = try statements.takenOrRepeated(run)
            var from = run.startIndex
            while from < run.endIndex {
                let end = run[from...].firstIndex { single?.contains(UUIDKey($0.uuid)) ?? true } ?? run.endIndex
                if end - from > 1, try insertRun(run[from..<end], after: &next, now: now, into: &changes, &result) {
                    from = end
                    continue
                }
                let upTo = max(end, from + 1)  // the new drinks that would not go as a run, or one single drink
                for drink in run[from..<upTo] {
                    try upsert(drink, after: &next, now: now, batch: batch, into: &changes, &result)
                }
                from = upTo
            }
        }
        for deletion in batch.deletions {
            let existing = try statements.lookup(deletion.uuid)
            let version: Int64
            switch existing {
            case .some((_, true)):
                result.unknown += 1  // already deleted: no-op
                continue
            case .some((let recordVersion, false)):
                version = max(recordVersion, deletion.version ?? recordVersion)
                result.deleted += 1
            case .none:
                version = deletion.version ?? 1
                result.unknown += 1
            }
            next += 1
            try statements.tombstone(deletion.uuid, version: version, anchor: next, now: now)
            changes.record(.deleted(Tombstone(uuid: deletion.uuid, version: version)), anchor: next, replacing: existing != nil)
        }
        return result
    }

    /// Stores `run` as new records at the anchors after `next`; false, with
    /// nothing written, when one of them has a record or repeats.
    private func insertRun(
        _ run: ArraySlice<Drink>, after next: inout Int64, now: Int64, into changes: inout CommitChanges,
        _ result: inout WriteResult
    ) throws -> Bool {
        guard try statements.insertNew(run, firstAnchor: next + 1, now: now) else { return false }
        for drink in run {
            next += 1
            changes.record(.added(drink), anchor: next, replacing: false)
        }
        result.added += run.count
        return true
    }

    /// Stores `drink` when there is no record or the record's version is lower.
    private func upsert(
        _ drink: Drink, after next: inout Int64, now: Int64, batch: WriteBatch, into changes: inout CommitChanges,
        _ result: inout WriteResult
    ) throws {
        let upsert = try statements.upsert(drink, anchor: next + 1, now: now)
        if upsert != .unchanged {
            next += 1
            result.added += 1
            changes.record(.added(drink), anchor: next, replacing: upsert == .replaced)
        } else {
            result.duplicates += 1
            // Only for a caller that reports it: was it a deletion that kept it out?
            if batch.explainDuplicates, case .some((let version, true)) = try statements.lookup(drink.uuid) {
                result.deletedDuplicates.append(Tombstone(uuid: drink.uuid, version: version))
            }
        }
    }
}

/// The changes of one commit, in order; past `HealthStore.announceLimit`
/// only the anchor is kept, so a huge commit needs no memory in
/// proportion to its size.
struct CommitChanges {
    var anchor: Int64?
    var log: [CommittedBatch.Change] = []
    var isComplete = true
    var arrived: ContinuousClock.Instant?
    /// Some change replaced a record that existed (see `CommittedBatch.replacesRecords`).
    var replacesRecords = false
    /// Each change's anchor, kept only for a standby's commit, whose anchors
    /// are its primary's (`CommittedBatch.anchors`); nil otherwise.
    var anchors: [Int64]?
    /// Everything held was replaced (`CommittedBatch.replacesAll`).
    var replacesAll = false
    /// The settings after the commit, when it wrote them (`CommittedBatch.settings`).
    var settings: StoredSettings?
    /// The rows beside the drinks that the commit wrote (`CommittedBatch.kept`).
    var kept = KeptRows()

    /// Room for `count` more changes, so that a large commit's log does not
    /// grow by copies. Once per commit: reserving little by little would
    /// copy at each step.
    mutating func reserve(_ count: Int) {
        guard isComplete else { return }
        let total = min(log.count + count, HealthStore.announceLimit + 1)
        log.reserveCapacity(total)
        anchors?.reserveCapacity(total)
    }

    mutating func record(_ change: CommittedBatch.Change, anchor: Int64, replacing: Bool) {
        self.anchor = anchor
        if replacing { replacesRecords = true }
        guard isComplete else { return }
        log.append(change)
        anchors?.append(anchor)
        if log.count > HealthStore.announceLimit { carryNothing() }
    }

    /// The commit is announced without its changes: readers page through it.
    mutating func carryNothing() {
        isComplete = false
        log = []
        anchors = anchors.map { _ in [] }
    }

    func committed(previousAnchor: Int64, anchor: Int64) -> CommittedBatch {
        var batch = CommittedBatch(
            anchor: anchor, previousAnchor: previousAnchor, log: log, isComplete: isComplete, arrived: arrived,
            replacesRecords: replacesRecords, anchors: anchors, replacesAll: replacesAll)
        batch.settings = settings
        batch.kept = kept
        batch.writesOnlyNewRecords = !replacesRecords && !replacesAll
        return batch
    }
}
