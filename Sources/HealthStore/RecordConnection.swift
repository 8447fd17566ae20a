import CoffeeDomain
import Foundation
import PostgreSQL
import SQLite

/// What the store's statements need of a database: the seam between the
/// rules, written once (`Statements`), and the two stores that hold them,
/// SQLite's file and a PostgreSQL database (docs/protocol.md §11).
protocol RecordConnection: AnyObject {
    associatedtype Prepared: RecordStatement
    var dialect: SQLDialect { get }
    /// A statement to run many times, with parameters `dialect.p(n)`.
    func statement(_ sql: String) throws -> Prepared
    /// Runs statements that return no rows.
    func executeSQL(_ sql: String) throws
    /// The first column of the first row, as an integer.
    func scalarSQL(_ sql: String) throws -> Int64?
    /// Runs `body` in one transaction, rolled back if it throws.
    func inTransaction<T>(_ body: () throws -> T) throws -> T
    /// Runs `body` in one transaction that first reads the integer `opening`
    /// selects (its argument) and last runs what `closing` returns, each in
    /// the round trip of BEGIN or COMMIT where the database has them (a
    /// shared store's counter row, `Statements.transaction`).
    func inTransaction<T>(opening: String, _ body: (Int64?) throws -> T, closing: () -> String?) throws -> T
    /// Rows the last statement inserted, updated or deleted.
    var changes: Int { get }
    /// Rows every statement so far inserted, updated or deleted (SQLite's;
    /// PostgreSQL's, whose index by date takes every drink at once, is 0).
    var totalChanges: Int { get }
    /// Whether the upsert just run inserted its row rather than replacing
    /// one; false when the database cannot tell (a replacement is the safe guess).
    func insertedRow(at anchor: Int64) -> Bool
    /// After a run of inserts was taken back: `insertedRow` must not see it.
    func forgetLastInsert()
    /// Ends the connection; statements must be finalized first.
    func close()
}

/// A prepared statement: bind with 1-based indexes, read columns 0-based.
protocol RecordStatement: AnyObject {
    func bind(_ index: Int32, _ value: Int64) throws
    func bind(_ index: Int32, _ value: Double) throws
    func bind(_ index: Int32, _ value: String?) throws
    func bindNull(_ index: Int32) throws
    func bind(_ index: Int32, uuid: UUID) throws
    func step() throws -> Bool
    func run() throws
    func reset()
    func isNull(_ column: Int32) -> Bool
    func int64(_ column: Int32) -> Int64
    func double(_ column: Int32) -> Double
    func string(_ column: Int32) -> String?
    func uuid(_ column: Int32) -> UUID
}

/// Where the two stores' SQL differs: each statement is written once, with
/// these in its text.
enum SQLDialect: Sendable {
    case sqlite
    case postgresql

    /// The `n`th parameter.
    func p(_ n: Int) -> String { self == .sqlite ? "?\(n)" : "$\(n)" }

    /// SQLite's planner needs to be told the tombstones' index (see
    /// `Statements.highestExpiredTombstone`); PostgreSQL's finds it.
    var tombstoneIndex: String { self == .sqlite ? "INDEXED BY tombstones_by_time" : "" }

    /// How an upsert says it inserted: PostgreSQL returns whether the row
    /// is new (no transaction has replaced it: `xmax = 0`); SQLite's last
    /// rowid says so instead (`RecordConnection.insertedRow`).
    var upsertReturning: (clause: String, inserted: String)? {
        self == .postgresql ? ("RETURNING xmax = 0", "t") : nil
    }

    /// Several services may write the store at once: anchors come from the
    /// counter row, under its lock (`Statements.lockAnchor`).
    var isShared: Bool { self == .postgresql }

    /// SQLite's small commits leave their drinks out of the index by date
    /// for a later commit to add (`StoreSchema.deferredDateIndex`).
    var defersDateIndex: Bool { self == .sqlite }

    /// `indexed` in a record's insert: its column, its value (`value`, a
    /// parameter), and its update in an upsert; nothing for PostgreSQL.
    func indexedColumn(value: String) -> (column: String, value: String, update: String) {
        defersDateIndex ? (", indexed", ", \(value)", ", indexed = excluded.indexed") : ("", "", "")
    }

    /// The reads of `columns` of the live drinks whose date `condition`
    /// holds, each in `order`, at most `limit` (a parameter) of them: a
    /// range of the index by date and, on SQLite, the drinks above
    /// `date_indexed` it does not hold yet (`StoreSchema.deferredDateIndex`),
    /// a thousand rows or so by anchor. `Statements.liveByDate` merges them:
    /// one `UNION ALL` with the order made SQLite merge two co-routines, some
    /// 110 ns a row more over a ten years' history of 40,000 drinks.
    func liveByDate(_ columns: String, where condition: String, order: String, limit: String? = nil) -> [String] {
        let limited = limit.map { " LIMIT \($0)" } ?? ""
        guard defersDateIndex else {
            return ["SELECT \(columns) FROM records WHERE deleted = 0 AND \(condition) ORDER BY \(order)\(limited)"]
        }
        return [
            "SELECT \(columns) FROM records WHERE deleted = 0 AND indexed = 1 AND \(condition) ORDER BY \(order)\(limited)",
            """
            SELECT \(columns) FROM records
            WHERE anchor > (SELECT value FROM meta WHERE key = 'date_indexed') AND indexed = 0 AND deleted = 0
                AND \(condition)
            ORDER BY \(order)\(limited)
            """,
        ]
    }

    /// The `VALUES` lists `insertNew` takes at once, largest first (none:
    /// `arrayInsert` takes any number). One statement of many rows keeps
    /// SQLite's cursors open from row to row instead of seeking each B-tree
    /// from its root for every row. In a C loop over this schema (200k rows)
    /// a row cost 43% less in runs of 16 with UUIDs and dates in order, and
    /// 13% less with random ones.
    var insertRuns: [Int] { self == .sqlite ? [16, 4] : [] }

    /// PostgreSQL's insert of a run of any length: each column's values as
    /// one array parameter (`RecordArrays`), in one statement. Every
    /// statement of a commit is a round trip inside the counter row's lock;
    /// runs of 256 and 64 in `VALUES` lists made a commit of 5,000 drinks
    /// some twenty of them, with the service binding 2,048 parameters
    /// between each while the other services waited.
    var arrayInsert: String? {
        guard self == .postgresql else { return nil }
        return """
            INSERT INTO records(uuid, version, deleted, anchor, date_ms, mg, type, source, changed_ms)
            SELECT u, v, 0, a, d, m, t, s, $8
            FROM unnest($1::uuid[], $2::bigint[], $3::bigint[], $4::bigint[], $5::float8[], $6::text[], $7::text[])
                AS run(u, v, a, d, m, t, s)
            ON CONFLICT DO NOTHING
            """
    }

    /// Which of an array of UUIDs have records (PostgreSQL's, for a run
    /// `arrayInsert` could not store whole).
    var arrayLookup: String? {
        self == .postgresql ? "SELECT uuid FROM records WHERE uuid = ANY($1::uuid[])" : nil
    }

    /// The most drinks one run takes (PostgreSQL's: the UUIDs of 5,000
    /// drinks are 185 KB of text in one parameter).
    var longestRun: Int { insertRuns.first ?? Self.longestArrayRun }
    static let longestArrayRun = 5000

    /// The length of the run `insertNew` takes from `available` new drinks (1: none, one by one).
    func runLength(_ available: Int) -> Int {
        insertRuns.isEmpty ? max(1, min(available, longestRun)) : insertRuns.first { $0 <= available } ?? 1
    }
}

// MARK: - SQLite

extension Database: RecordConnection {
    var dialect: SQLDialect { .sqlite }
    func statement(_ sql: String) throws -> Statement { try prepare(sql) }
    func executeSQL(_ sql: String) throws { try execute(sql) }
    func scalarSQL(_ sql: String) throws -> Int64? { try scalar(sql) }
    func inTransaction<T>(_ body: () throws -> T) throws -> T { try transaction(body) }
    func inTransaction<T>(opening: String, _ body: (Int64?) throws -> T, closing: () -> String?) throws -> T {
        try transaction {
            let value = try body(try scalar(opening))
            if let sql = closing() { try execute(sql) }
            return value
        }
    }
    /// Anchors only grow, so the last rowid inserted is this anchor only if this row is new.
    func insertedRow(at anchor: Int64) -> Bool { lastInsertRowID == anchor }
    func forgetLastInsert() { lastInsertRowID = 0 }
}

extension Statement: RecordStatement {
    func bind(_ index: Int32, uuid: UUID) throws {
        var raw = uuid.uuid
        try withUnsafeBytes(of: &raw) { try bind(index, bytes: $0) }
    }

    func uuid(_ column: Int32) -> UUID {
        withBlob(column) { bytes in
            var raw: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
            withUnsafeMutableBytes(of: &raw) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes.prefix(16))) }
            return UUID(uuid: raw)
        }
    }
}

// MARK: - PostgreSQL

extension Connection: RecordConnection {
    var dialect: SQLDialect { .postgresql }
    func statement(_ sql: String) throws -> PreparedStatement { prepare(sql) }
    func executeSQL(_ sql: String) throws { try execute(sql) }
    func scalarSQL(_ sql: String) throws -> Int64? { try scalar(sql) }
    func inTransaction<T>(_ body: () throws -> T) throws -> T { try transaction(body) }
    func inTransaction<T>(opening: String, _ body: (Int64?) throws -> T, closing: () -> String?) throws -> T {
        try transaction(opening: opening, { try body($0.flatMap { $0.rows > 0 ? $0.int64(0, 0) : nil }) }, closing: closing)
    }
    func insertedRow(at anchor: Int64) -> Bool { false }  // the upsert's RETURNING says (`SQLDialect.upsertReturning`)
    var totalChanges: Int { 0 }
    func forgetLastInsert() {}
}

extension PreparedStatement: RecordStatement {
    func bind(_ index: Int32, uuid: UUID) throws { bind(index, UUIDText.string(uuid)) }

    /// PostgreSQL's text form of a `uuid`; a value that is not one cannot
    /// be in the column.
    func uuid(_ column: Int32) -> UUID {
        withText(column) { UUIDText.parse(bytes: $0.assumingMemoryBound(to: UInt8.self)) }!
    }
}
