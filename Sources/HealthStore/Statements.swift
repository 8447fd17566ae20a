import CoffeeDomain
import Foundation
import SQLite

/// The store's prepared statements, and the mapping between rows and drinks.
final class Statements: @unchecked Sendable {
    private var upsertStatement: Statement?
    /// `INSERT OR IGNORE` of `rows` new records in one statement, by `rows`.
    private var insertStatements: [Int: Statement] = [:]
    /// Takes back what such a statement stored when it skipped a row.
    private var undoRunStatement: Statement?
    /// Records stored by `insertNew`, and runs it took back, for tests of
    /// the path taken.
    private(set) var insertedInRuns = 0
    private(set) var runsUndone = 0
    private var lookupStatement: Statement?
    private var tombstoneStatement: Statement?
    private var metaStatement: Statement?
    /// A standby's write (`Statements+Replica.swift`), prepared at its first use.
    var replicaStatement: Statement?
    let db: Database

    init(_ db: Database) throws {
        self.db = db
        // Stored when no record exists, or replaces one with a lower version
        // (reviving a tombstone too).
        upsertStatement = try db.prepare(
            """
            INSERT INTO records(uuid, version, deleted, anchor, date_ms, mg, type, source, changed_ms)
            VALUES (?1, ?2, 0, ?3, ?4, ?5, ?6, ?7, ?8)
            ON CONFLICT(uuid) DO UPDATE SET
                version = excluded.version, deleted = 0, anchor = excluded.anchor,
                date_ms = excluded.date_ms, mg = excluded.mg, type = excluded.type,
                source = excluded.source, changed_ms = excluded.changed_ms
            WHERE excluded.version > records.version
            """)
        for rows in Self.insertRuns {
            let values = (0..<rows).map { k in
                let p = 8 * k
                return "(?\(p + 1), ?\(p + 2), 0, ?\(p + 3), ?\(p + 4), ?\(p + 5), ?\(p + 6), ?\(p + 7), ?\(p + 8))"
            }
            insertStatements[rows] = try db.prepare(
                "INSERT OR IGNORE INTO records(uuid, version, deleted, anchor, date_ms, mg, type, source, changed_ms) VALUES "
                    + values.joined(separator: ", "))
        }
        undoRunStatement = try db.prepare("DELETE FROM records WHERE anchor >= ?1 AND anchor < ?2")
        lookupStatement = try db.prepare("SELECT version, deleted FROM records WHERE uuid = ?1")
        tombstoneStatement = try db.prepare(
            """
            INSERT INTO records(uuid, version, deleted, anchor, date_ms, mg, type, source, changed_ms)
            VALUES (?1, ?2, 1, ?3, NULL, NULL, NULL, NULL, ?4)
            ON CONFLICT(uuid) DO UPDATE SET
                version = excluded.version, deleted = 1, anchor = excluded.anchor,
                date_ms = NULL, mg = NULL, type = NULL, source = NULL, changed_ms = excluded.changed_ms
            """)
        metaStatement = try db.prepare("UPDATE meta SET value = ?2 WHERE key = ?1")
    }

    func finalize() {
        upsertStatement = nil
        insertStatements = [:]
        undoRunStatement = nil
        lookupStatement = nil
        tombstoneStatement = nil
        metaStatement = nil
        replicaStatement = nil
    }

    /// What an upsert did.
    enum Upsert {
        /// A new record.
        case inserted
        /// A newer version over a record (live or a tombstone).
        case replaced
        /// Nothing: the record's version was not lower.
        case unchanged
    }

    func upsert(_ drink: Drink, anchor: Int64, now: Int64) throws -> Upsert {
        let s = upsertStatement!
        try bindRecord(drink, anchor: anchor, now: now, to: s, from: 1)
        try s.run()
        guard db.changes > 0 else { return .unchanged }
        // Anchors only grow, so the last rowid inserted is this anchor only if this row is new.
        return db.lastInsertRowID == anchor ? .inserted : .replaced
    }

    /// How many rows `insertNew` takes at once, largest first. One
    /// statement of many rows keeps SQLite's cursors open from row to row
    /// instead of seeking each B-tree from its root for every row. In a C
    /// loop over this schema (200k rows) a row cost 43% less in runs of 16
    /// with UUIDs and dates in order, and 13% less with random ones.
    static let insertRuns = [16, 4]

    /// Stores `drinks` (as many as one of `insertRuns`) as new records, at
    /// consecutive anchors from `firstAnchor`, in one statement; false, with
    /// nothing written, when a UUID among them has a record already or is
    /// among them twice (the caller then upserts them one by one).
    ///
    /// `OR IGNORE`, not a plain `INSERT` that aborts: a statement that may
    /// abort keeps a journal of every page it touches so that it can be
    /// undone, which doubled the cost of a row with random UUIDs. A skipped
    /// row shows in the count of changes, and the rows stored with it are
    /// deleted again (their anchors are new, so nothing else is).
    func insertNew(_ drinks: ArraySlice<Drink>, firstAnchor: Int64, now: Int64) throws -> Bool {
        let s = insertStatements[drinks.count]!
        for (k, drink) in drinks.enumerated() {
            try bindRecord(drink, anchor: firstAnchor + Int64(k), now: now, to: s, from: Int32(8 * k + 1))
        }
        try s.run()
        guard db.changes == drinks.count else {
            let undo = undoRunStatement!
            try undo.bind(1, firstAnchor)
            try undo.bind(2, firstAnchor + Int64(drinks.count))
            try undo.run()
            db.lastInsertRowID = 0  // not a row of the undone run's, for `upsert`'s test
            runsUndone += 1
            return false
        }
        insertedInRuns += drinks.count
        return true
    }

    /// Binds a drink's record to the eight parameters from `first`: uuid,
    /// version, anchor, date, mg, type, source, and the time of the change.
    func bindRecord(_ drink: Drink, anchor: Int64, now: Int64, to s: Statement, from first: Int32) throws {
        try bind(drink.uuid, to: s, at: first)
        try s.bind(first + 1, drink.version)
        try s.bind(first + 2, anchor)
        try s.bind(first + 3, drink.epochMilliseconds)
        try s.bind(first + 4, drink.mgCaffeine)
        try s.bind(first + 5, drink.type?.rawValue)
        try s.bind(first + 6, drink.source)
        try s.bind(first + 7, now)
    }

    /// The record's version and whether it is a tombstone, if there is one.
    func lookup(_ uuid: UUID) throws -> (Int64, Bool)? {
        let s = lookupStatement!
        defer { s.reset() }
        try bind(uuid, to: s, at: 1)
        guard try s.step() else { return nil }
        return (s.int64(0), s.int64(1) != 0)
    }

    func tombstone(_ uuid: UUID, version: Int64, anchor: Int64, now: Int64) throws {
        let s = tombstoneStatement!
        try bind(uuid, to: s, at: 1)
        try s.bind(2, version)
        try s.bind(3, anchor)
        try s.bind(4, now)
        try s.run()
    }

    func setMeta(_ key: String, _ value: Int64) throws {
        let s = metaStatement!
        try s.bind(1, key)
        try s.bind(2, value)
        try s.run()
    }

    struct Row {
        var anchor: Int64
        var change: CommittedBatch.Change
    }

    func changes(after anchor: Int64, through end: Int64, liveOnly: Bool, limit: Int) throws -> [Row] {
        let s = try db.prepare(
            """
            SELECT uuid, version, deleted, anchor, date_ms, mg, type, source FROM records
            WHERE anchor > ?1 AND anchor <= ?3 \(liveOnly ? "AND deleted = 0" : "") ORDER BY anchor LIMIT ?2
            """)
        try s.bind(1, anchor)
        try s.bind(2, Int64(limit))
        try s.bind(3, end)
        var rows: [Row] = []
        while try s.step() {
            let uuid = Self.uuid(s, 0)
            let version = s.int64(1)
            if s.int64(2) != 0 {
                rows.append(Row(anchor: s.int64(3), change: .deleted(Tombstone(uuid: uuid, version: version))))
            } else {
                rows.append(Row(anchor: s.int64(3), change: .added(Self.drink(s, uuid: uuid, version: version))))
            }
        }
        return rows
    }

    func drinks(from: Int64, to: Int64) throws -> [Drink] {
        let s = try db.prepare(
            """
            SELECT uuid, version, deleted, anchor, date_ms, mg, type, source FROM records
            WHERE deleted = 0 AND date_ms BETWEEN ?1 AND ?2 ORDER BY date_ms
            """)
        try s.bind(1, from)
        try s.bind(2, to)
        var drinks: [Drink] = []
        while try s.step() {
            drinks.append(Self.drink(s, uuid: Self.uuid(s, 0), version: s.int64(1)))
        }
        return drinks
    }

    func highestExpiredTombstone(before cutoff: Int64) throws -> Int64? {
        // INDEXED BY: left alone, SQLite's max() optimisation walks the anchor
        // index backwards through every live row (2 s with 1M drinks) instead
        // of the partial index that holds only tombstones.
        let s = try db.prepare(
            "SELECT max(anchor) FROM records INDEXED BY tombstones_by_time WHERE deleted = 1 AND changed_ms < ?1")
        try s.bind(1, cutoff)
        guard try s.step(), !s.isNull(0) else { return nil }
        return s.int64(0)
    }

    func purgeTombstones(before cutoff: Int64) throws -> Int {
        let s = try db.prepare("DELETE FROM records INDEXED BY tombstones_by_time WHERE deleted = 1 AND changed_ms < ?1")
        try s.bind(1, cutoff)
        try s.run()
        return db.changes
    }

    private static func drink(_ s: Statement, uuid: UUID, version: Int64) -> Drink {
        Drink(
            uuid: uuid, mgCaffeine: s.double(5), date: Date(timeIntervalSince1970: Double(s.int64(4)) / 1000),
            version: version, type: s.string(6).flatMap(DrinkType.init(rawValue:)), source: s.string(7))
    }

    func bind(_ uuid: UUID, to s: Statement, at index: Int32) throws {
        var raw = uuid.uuid
        try withUnsafeBytes(of: &raw) { try s.bind(index, bytes: $0) }
    }

    private static func uuid(_ s: Statement, _ column: Int32) -> UUID {
        s.withBlob(column) { bytes in
            var raw: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
            withUnsafeMutableBytes(of: &raw) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes.prefix(16))) }
            return UUID(uuid: raw)
        }
    }
}
