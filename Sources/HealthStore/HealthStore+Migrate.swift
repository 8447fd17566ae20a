import CoffeeDomain
import Foundation
import PostgreSQL
import SQLite

/// What `migrate` copied.
public struct MigrationResult: Sendable {
    /// Live drinks and tombstones copied.
    public var drinks: Int
    public var tombstones: Int
    /// The store's anchor, its purged anchor and identity, now the database's.
    public var anchor: Int64
    public var purgedAnchor: Int64
    public var identity: StoreIdentity
}

/// `coffee-tracker migrate` (docs/protocol.md §11): a SQLite store copied
/// into an empty PostgreSQL database, every record under its own anchor with
/// the time of its change (so tombstones expire when they would have), the
/// anchor, the purged anchor and the identity: the same history, so that a
/// client following the file's store goes on following the database's
/// without a resync.
extension HealthStore {
    /// Records copied per page (one read of the file, one round trip each
    /// to the database); everything is one transaction of the database.
    static let migrationPage = 10_000

    /// Copies the store at `path` (its service stopped) into the database
    /// of `conninfo`, which must hold no change yet. `progress` is called
    /// after each page with the records copied so far and the total.
    ///
    /// - Throws: `StoreError` when the file is not a current coffee-tracker
    ///   store or the database is not empty; `PostgreSQLError` when the
    ///   database cannot be reached. Nothing is written to it then.
    public static func migrate(
        from path: String, to conninfo: String, progress: (Int, Int) -> Void = { _, _ in }
    ) throws -> MigrationResult {
        let file: Database
        do {
            file = try Database(path: path, readOnly: true)
            _ = try file.scalar("PRAGMA schema_version")
        } catch {
            throw error.isBusy
                ? StoreError.inUse(path) : StoreError.corrupt(path, "it cannot be read: \(error.message)")
        }
        defer { file.close() }
        guard try file.scalar("PRAGMA application_id") == StoreSchema.applicationID else {
            throw StoreError.corrupt(path, "not a coffee-tracker store")
        }
        let version = try file.scalar("PRAGMA user_version") ?? 0
        guard version == StoreSchema.currentVersion else {
            throw StoreError.corrupt(
                path,
                "schema version \(version), this build copies version \(StoreSchema.currentVersion): start the service on it once to bring it up to date"
            )
        }
        let anchor = try StoreSchema.anchor(of: file)
        let purged = try file.scalar("SELECT value FROM meta WHERE key = 'purged_anchor'") ?? 0
        let identity = try StoreIdentityRecord.read(file)?.identity ?? StoreIdentity.new()
        let total = Int(try file.scalar("SELECT count(*) FROM records") ?? 0)

        let db = try Connection(conninfo: conninfo)
        defer { db.close() }
        try SharedStoreSchema.prepare(db)
        let into = try Statements(db)
        defer { into.finalize() }
        let read = try file.prepare(
            """
            SELECT anchor, uuid, version, deleted, date_ms, mg, type, source, changed_ms FROM records
            WHERE anchor > ?1 ORDER BY anchor LIMIT ?2
            """)
        var result = MigrationResult(drinks: 0, tombstones: 0, anchor: anchor, purgedAnchor: purged, identity: identity)
        try into.transaction {
            // Under the counter row's lock (`Statements.transaction`): no service commits meanwhile.
            guard try SharedStoreSchema.isEmpty(db) else {
                throw StoreError.corrupt(
                    "the PostgreSQL database at \(db.endpoint)", "it holds changes already; migrate copies into an empty one")
            }
            var after: Int64 = 0
            while true {
                read.reset()
                try read.bind(1, after)
                try read.bind(2, Int64(migrationPage))
                var rows = 0
                while try read.step() {
                    rows += 1
                    after = read.int64(0)
                    let uuid = read.uuid(1)
                    let change: CommittedBatch.Change
                    if read.int64(3) != 0 {
                        change = .deleted(Tombstone(uuid: uuid, version: read.int64(2)))
                        result.tombstones += 1
                    } else {
                        change = .added(read.drink(uuid: uuid, version: read.int64(2)))
                        result.drinks += 1
                    }
                    try into.replicate(change, anchor: after, now: read.int64(8))
                }
                progress(result.drinks + result.tombstones, total)
                if rows < migrationPage { break }
            }
            // The person's settings, the alerts' state and what waits in the outbox (§15, §16).
            let kept = try Statements(file)
            defer { kept.finalize() }
            try into.putKept(try kept.keptRows(after: nil, through: .max))
            try into.setMeta("anchor", anchor)
            try into.setMeta("purged_anchor", purged)
            try StoreIdentityRecord.write(identity, standby: false, to: db)
        }
        return result
    }
}
