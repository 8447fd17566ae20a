import CoffeeDomain
import Foundation
import SQLite

/// The store's statements, and the mapping between rows and drinks: one
/// definition over both stores (`RecordConnection`), the dialect's
/// differences written into each statement's text.
///
/// The store calls it through `RecordStatements`, which runs the generic
/// code; the per-drink methods carry `@_specialize` for SQLite, so that the
/// default store's live path binds and steps without a witness call per
/// column (without it: 0.84x the previous build's 10-event rate, CPU 1.22x).
final class Statements<Connection: RecordConnection>: RecordStatements, @unchecked Sendable {
    typealias Statement = Connection.Prepared
    private var upsertStatement: Statement?
    /// SQLite's inserts of `rows` new records, by `rows` (`SQLDialect.insertRuns`):
    /// `OR IGNORE` skips a taken UUID and keeps no statement journal (`insertNew`).
    var insertStatements: [Int: Statement] = [:]
    /// PostgreSQL's insert of any number of rows (`SQLDialect.arrayInsert`).
    var arrayInsertStatement: Statement?
    /// Takes back what such a statement stored when it skipped a row.
    var undoRunStatement: Statement?
    /// Records stored by `insertNew`, and runs it took back, for tests of
    /// the path taken.
    var insertedInRuns = 0
    var runsUndone = 0
    private var lookupStatement: Statement?
    private var tombstoneStatement: Statement?
    private var metaStatement: Statement?
    /// A shared store's transaction: the counter row as BEGIN locked it,
    /// and the anchor COMMIT sets it to.
    private var lockedAnchor: Int64?
    private var advancedTo: Int64?
    /// A standby's write (`Statements+Replica.swift`), prepared at its first use.
    var replicaStatement: Statement?
    /// SQLite's drinks not yet in the index by date (`Statements+DateIndex.swift`).
    var dateIndex = DateIndexDeferral()
    /// The statements of reads and maintenance, by their text, prepared at
    /// first use (a PostgreSQL session keeps each until it ends).
    private var prepared: [String: Statement] = [:]
    let db: Connection
    var dialect: SQLDialect { db.dialect }

    init(_ db: Connection) throws {
        self.db = db
        let p = db.dialect.p
        // Stored when no record exists, or replaces one with a lower version
        // (reviving a tombstone too). In or out of the index by date as the
        // commit decides (`DateIndexDeferral`), in parameter 9.
        let indexed = db.dialect.indexedColumn(value: p(9))
        upsertStatement = try db.statement(
            """
            INSERT INTO records(uuid, version, deleted, anchor, date_ms, mg, type, source, changed_ms\(indexed.column))
            VALUES (\(p(1)), \(p(2)), 0, \(p(3)), \(p(4)), \(p(5)), \(p(6)), \(p(7)), \(p(8))\(indexed.value))
            ON CONFLICT(uuid) DO UPDATE SET
                version = excluded.version, deleted = 0, anchor = excluded.anchor,
                date_ms = excluded.date_ms, mg = excluded.mg, type = excluded.type,
                source = excluded.source, changed_ms = excluded.changed_ms\(indexed.update)
            WHERE excluded.version > records.version \(db.dialect.upsertReturning?.clause ?? "")
            """)
        for rows in db.dialect.insertRuns {
            // Every row's `indexed` is the one parameter after their eight each.
            let indexed = db.dialect.indexedColumn(value: p(8 * rows + 1))
            let values = (0..<rows).map { k in
                let n = 8 * k
                return
                    "(\(p(n + 1)), \(p(n + 2)), 0, \(p(n + 3)), \(p(n + 4)), \(p(n + 5)), \(p(n + 6)), \(p(n + 7)), \(p(n + 8))\(indexed.value))"
            }
            insertStatements[rows] = try db.statement(
                "INSERT OR IGNORE INTO records(uuid, version, deleted, anchor, date_ms, mg, type, source, changed_ms\(indexed.column)) VALUES "
                    + values.joined(separator: ", "))
        }
        arrayInsertStatement = try db.dialect.arrayInsert.map { try db.statement($0) }
        undoRunStatement = try db.statement("DELETE FROM records WHERE anchor >= \(p(1)) AND anchor < \(p(2))")
        lookupStatement = try db.statement("SELECT version, deleted FROM records WHERE uuid = \(p(1))")
        tombstoneStatement = try db.statement(
            """
            INSERT INTO records(uuid, version, deleted, anchor, date_ms, mg, type, source, changed_ms)
            VALUES (\(p(1)), \(p(2)), 1, \(p(3)), NULL, NULL, NULL, NULL, \(p(4)))
            ON CONFLICT(uuid) DO UPDATE SET
                version = excluded.version, deleted = 1, anchor = excluded.anchor,
                date_ms = NULL, mg = NULL, type = NULL, source = NULL, changed_ms = excluded.changed_ms
            """)
        metaStatement = try db.statement(
            """
            INSERT INTO meta(key, value) VALUES (\(p(1)), \(p(2)))
            ON CONFLICT(key) DO UPDATE SET value = excluded.value
            """)
    }

    func finalize() {
        upsertStatement = nil
        insertStatements = [:]
        arrayInsertStatement = nil
        undoRunStatement = nil
        lookupStatement = nil
        tombstoneStatement = nil
        metaStatement = nil
        replicaStatement = nil
        prepared = [:]
    }

    /// `sql` prepared once, reset for its next use.
    func cached(_ sql: String) throws -> Statement {
        if let s = prepared[sql] {
            s.reset()
            return s
        }
        let s = try db.statement(sql)
        prepared[sql] = s
        return s
    }

    func closeConnection() { db.close() }

    /// One transaction. A shared store's reads the counter row in BEGIN's
    /// round trip, locked until the transaction ends, so that commits of
    /// every service take their anchors one after another
    /// (`lockAnchor`); it sets the row to the commit's last anchor and
    /// notifies the other services in COMMIT's (`advanceAnchor`).
    func transaction<T>(_ body: () throws -> T) throws -> T {
        guard dialect.isShared else { return try transactionSettlingDateIndex(body) }
        advancedTo = nil
        defer { (lockedAnchor, advancedTo) = (nil, nil) }
        return try db.inTransaction(opening: "SELECT value FROM meta WHERE key = 'anchor' FOR UPDATE") { locked in
            guard let locked else { throw StoreError.io("the store's counter row is missing") }
            lockedAnchor = locked
            return try body()
        } closing: {
            advancedTo.map {
                """
                WITH counter AS (UPDATE meta SET value = \($0) WHERE key = 'anchor')
                SELECT pg_notify('\(SharedStoreListener.channel)', '\($0)')
                """
            }
        }
    }

    /// A shared store's anchor at the start of the transaction (nil for a
    /// store of one process: its anchor is its own).
    func lockAnchor() -> Int64? { lockedAnchor }

    /// A shared store's counter row is set to `anchor` as the transaction commits.
    func advanceAnchor(to anchor: Int64) {
        if dialect.isShared { advancedTo = anchor }
    }

    @_specialize(where Connection == Database)
    func upsert(_ drink: Drink, anchor: Int64, now: Int64) throws -> RecordUpsert {
        let s = upsertStatement!
        try bindRecord(drink, anchor: anchor, now: now, to: s, from: 1)
        if dialect.defersDateIndex { try bindIndexed(9, to: s, anchor: anchor) }
        if let returning = dialect.upsertReturning {
            defer { s.reset() }
            guard try s.step() else { return .unchanged }  // the version was not lower: no row
            return s.string(0) == returning.inserted ? .inserted : .replaced
        }
        try s.run()
        guard db.changes > 0 else { return .unchanged }
        return db.insertedRow(at: anchor) ? .inserted : .replaced
    }

    /// The record's version and whether it is a tombstone, if there is one.
    @_specialize(where Connection == Database)
    func lookup(_ uuid: UUID) throws -> (Int64, Bool)? {
        let s = lookupStatement!
        defer { s.reset() }
        try s.bind(1, uuid: uuid)
        guard try s.step() else { return nil }
        return (s.int64(0), s.int64(1) != 0)
    }

    @_specialize(where Connection == Database)
    func tombstone(_ uuid: UUID, version: Int64, anchor: Int64, now: Int64) throws {
        let s = tombstoneStatement!
        try s.bind(1, uuid: uuid)
        try s.bind(2, version)
        try s.bind(3, anchor)
        try s.bind(4, now)
        try s.run()
    }

    func meta(_ key: String) throws -> Int64? {
        let s = try cached("SELECT value FROM meta WHERE key = \(dialect.p(1))")
        try s.bind(1, key)
        defer { s.reset() }
        return try s.step() ? s.int64(0) : nil
    }

    func setMeta(_ key: String, _ value: Int64) throws {
        let s = metaStatement!
        try s.bind(1, key)
        try s.bind(2, value)
        try s.run()
    }

    @_specialize(where Connection == Database)
    func changes(after anchor: Int64, through end: Int64, liveOnly: Bool, limit: Int) throws -> [RecordRow] {
        let p = dialect.p
        let s = try cached(
            """
            SELECT uuid, version, deleted, anchor, date_ms, mg, type, source FROM records
            WHERE anchor > \(p(1)) AND anchor <= \(p(3)) \(liveOnly ? "AND deleted = 0" : "") ORDER BY anchor LIMIT \(p(2))
            """)
        try s.bind(1, anchor)
        try s.bind(2, Int64(limit))
        try s.bind(3, end)
        defer { s.reset() }
        var rows: [RecordRow] = []
        rows.reserveCapacity(min(limit, 10_001))  // a page, without the copies of growing
        while try s.step() {
            let uuid = s.uuid(0)
            let version = s.int64(1)
            if s.int64(2) != 0 {
                rows.append(RecordRow(anchor: s.int64(3), change: .deleted(Tombstone(uuid: uuid, version: version))))
            } else {
                rows.append(RecordRow(anchor: s.int64(3), change: .added(s.drink(uuid: uuid, version: version))))
            }
        }
        return rows
    }

    func drinks(from: Int64, to: Int64) throws -> [Drink] {
        let p = dialect.p
        return try liveByDate(
            "uuid, version, deleted, anchor, date_ms, mg, type, source", where: "date_ms BETWEEN \(p(1)) AND \(p(2))",
            order: "date_ms",
            bind: {
                try $0.bind(1, from)
                try $0.bind(2, to)
            }, read: { $0.drink(uuid: $0.uuid(0), version: $0.int64(1)) }, before: { $0.date < $1.date })
    }

    func drinks(after cursor: DrinkCursor?, limit: Int) throws -> (drinks: [Drink], next: DrinkCursor?) {
        let p = dialect.p
        // Keyset paging by (date, UUID): each page a range of the index by date, ties in UUID order.
        let cursor = cursor ?? .before(dateMs: .min)
        let rows = try liveByDate(
            "uuid, version, deleted, anchor, date_ms, mg, type, source",
            where: "date_ms >= \(p(1)) AND (date_ms > \(p(1)) OR uuid > \(p(2)))", order: "date_ms, uuid",
            limit: (p(3), limit),
            bind: {
                try $0.bind(1, cursor.dateMs)
                try $0.bind(2, uuid: cursor.uuid)
                try $0.bind(3, Int64(limit))
            },
            read: { s -> (drink: Drink, cursor: DrinkCursor) in
                let uuid = s.uuid(0)
                return (s.drink(uuid: uuid, version: s.int64(1)), DrinkCursor(dateMs: s.int64(4), uuid: uuid))
            }, before: { $0.cursor < $1.cursor })
        return (rows.map(\.drink), rows.count == limit ? rows.last?.cursor : nil)
    }

    func highestExpiredTombstone(before cutoff: Int64) throws -> Int64? {
        // INDEXED BY: left alone, SQLite's max() optimisation walks the anchor
        // index backwards through every live row (2 s with 1M drinks) instead
        // of the partial index that holds only tombstones.
        let s = try cached(
            "SELECT max(anchor) FROM records \(dialect.tombstoneIndex) WHERE deleted = 1 AND changed_ms < \(dialect.p(1))")
        try s.bind(1, cutoff)
        defer { s.reset() }  // a statement left mid-read holds SQLite's read lock (a backup's checkpoint waits on it)
        guard try s.step(), !s.isNull(0) else { return nil }
        return s.int64(0)
    }

    func purgeTombstones(before cutoff: Int64) throws -> Int {
        let s = try cached(
            "DELETE FROM records \(dialect.tombstoneIndex) WHERE deleted = 1 AND changed_ms < \(dialect.p(1))")
        try s.bind(1, cutoff)
        try s.run()
        return db.changes
    }

}
