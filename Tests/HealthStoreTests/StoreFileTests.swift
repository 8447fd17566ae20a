import CoffeeDomain
import CoffeeTestKit
import Foundation
import SQLite
import Synchronization
import Testing

@_spi(Testing) @testable import HealthStore

@Suite("The store's file: its schema, migrations and owner", .timeLimit(.minutes(2)))
struct StoreFileTests {
    @Test func corruptFileStopsOpeningAndIsLeftUntouched() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let garbage = Data(repeating: 0x42, count: 8192)
        try garbage.write(to: URL(fileURLWithPath: dir.storePath))
        #expect {
            _ = try openStore(dir)
        } throws: { error in
            (error as? StoreError)?.isCorrupt == true && "\(error)".contains("store.sqlite")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: dir.storePath)) == garbage)
    }

    @Test func newerSchemaStopsOpening() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let store = try openStore(dir)
        _ = try await store.save([drink()])
        await store.close()
        let db = try Database(path: dir.storePath)
        try db.execute("PRAGMA user_version = 99")
        db.close()
        #expect {
            _ = try openStore(dir)
        } throws: { error in
            (error as? StoreError)?.isNewerSchema == true && "\(error)".contains("99")
        }
    }

    /// A file as an older build wrote it: schema `version`, with `records`
    /// (that version's table and indexes) and `rows` in it.
    func olderFile(_ dir: TemporaryDirectory, version: Int, anchor: Int64, records: String, rows: String) throws {
        let db = try Database(path: dir.storePath)
        try db.execute(
            """
            PRAGMA application_id = \(StoreSchema.applicationID);
            CREATE TABLE meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
            INSERT INTO meta(key, value) VALUES ('anchor', \(anchor)), ('purged_anchor', 0);
            \(records)
            \(rows)
            PRAGMA user_version = \(version);
            """)
    }

    /// A UUID as an SQL blob literal.
    func blob(_ uuid: UUID) -> String { "x'\(uuid.uuidString.replacingOccurrences(of: "-", with: ""))'" }

    /// A version-1 file (records keyed by UUID) is migrated in place on
    /// open: every live drink and tombstone keeps its anchor, the rules still
    /// hold, and new anchors continue from the old ones.
    @Test func versionOneFileMigrates() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let live = drink(version: 2)
        let gone = UUID()
        try olderFile(
            dir, version: 1, anchor: 7, records: StoreSchema.recordsV1,
            rows: """
                INSERT INTO records VALUES (\(blob(live.uuid)), 2, 0, 5, \(live.epochMilliseconds), 96, NULL, 'test', 0);
                INSERT INTO records VALUES (\(blob(gone)), 3, 1, 7, NULL, NULL, NULL, NULL, \(Int64(t0.timeIntervalSince1970 * 1000)));
                """)
        let store = try openStore(dir)
        #expect(await store.anchor == 7)
        let all = try await store.changes(since: 0, limit: 10)
        #expect(all.added == [live] && all.deleted == [Tombstone(uuid: gone, version: 3)])
        #expect(try await store.drinks(datedIn: t0.addingTimeInterval(-60)...t0.addingTimeInterval(60)) == [live])
        // The rules on migrated rows: a lower version is a duplicate, a tombstone blocks a late save.
        let late = try await store.save([drink(live.uuid, version: 1), drink(gone, version: 3)])
        #expect(late.added == 0 && late.duplicates == 2)
        let newer = try await store.save([drink(live.uuid, mg: 50, version: 3)])
        #expect(newer.added == 1 && newer.anchor == 8)
        #expect(try await store.changes(since: 7, limit: 10).added.map(\.mgCaffeine) == [50])
        await store.close()
        let db = try Database(path: dir.storePath)
        #expect(try db.scalar("PRAGMA user_version") == StoreSchema.currentVersion)
    }

    /// A version-2 file goes through version 3, which dropped its index of
    /// live drinks by date, to version 4, which makes it again for history's
    /// sums, and to version 8's form of it; every row is kept and reads by
    /// date answer.
    @Test func versionTwoFileComesToVersionFourWithItsDateIndex() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let live = drink(version: 2)
        try olderFile(
            dir, version: 2, anchor: 0, records: StoreSchema.recordsV2,
            rows: "INSERT INTO records VALUES (4, \(blob(live.uuid)), 2, 0, \(live.epochMilliseconds), 96, NULL, 'test', 0);")
        let store = try openStore(dir)
        #expect(await store.anchor == 4)
        #expect(try await store.drinks(datedIn: t0.addingTimeInterval(-60)...t0.addingTimeInterval(60)) == [live])
        let added = drink()
        #expect(try await store.save([added]).anchor == 5)
        await store.close()
        let db = try Database(path: dir.storePath)
        #expect(try db.scalar("PRAGMA user_version") == StoreSchema.currentVersion)
        #expect(try db.scalar("SELECT count(*) FROM sqlite_schema WHERE name = 'live_by_date'") == 1)
        // The current form, which covers history's read (`StoreSchema.liveByDate`).
        let made = try db.prepare("SELECT sql FROM sqlite_schema WHERE name = 'live_by_date'")
        #expect(try made.step() && made.string(0).map { $0 + ";" } == StoreSchema.liveByDate)
        #expect(try db.scalar("SELECT count(*) FROM sqlite_schema WHERE name = 'tombstones_by_time'") == 1)
        #expect(try db.scalar("SELECT count(*) FROM records") == 2)
        // Version 9 took the old drink as indexed; the first commit put the new one in too.
        #expect(try db.scalar("SELECT count(*) FROM records WHERE indexed = 1") == 2)
        #expect(try db.scalar("SELECT value FROM meta WHERE key = 'date_indexed'") == 5)
    }

    /// A new file indexes live drinks by date (version 4, for history's
    /// sums), besides the table and its UUID index (the tombstones' index
    /// holds deletions only).
    @Test func aNewFileIndexesLiveDrinksByDate() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let store = try openStore(dir)
        await store.close()
        let db = try Database(path: dir.storePath)
        #expect(try db.scalar("PRAGMA user_version") == StoreSchema.currentVersion)
        #expect(try db.scalar("SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND sql LIKE '%date_ms%'") == 1)
        #expect(try db.scalar("SELECT count(*) FROM sqlite_schema WHERE name = 'live_by_date' AND sql LIKE '%deleted = 0%'") == 1)
    }

    @Test func someoneElsesDatabaseIsRefused() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let db = try Database(path: dir.storePath)
        try db.execute("CREATE TABLE unrelated(x)")
        #expect(throws: StoreError.self) { _ = try openStore(dir) }
    }

    /// Read on the store's own connection: `synchronous` is per
    /// connection, so a second connection would show its own default.
    @Test func theStoresOwnConnectionUsesWALWithFullSync() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let store = try openStore(dir)
        _ = try await store.save([drink()])
        let settings = try await store.connectionSettings()
        #expect(settings.journalMode == "wal")
        #expect(settings.synchronous == 2, "2 is FULL: the WAL is synced at every commit")
        #expect(settings.lockingMode == "exclusive")
        await store.close()
        let db = try Database(path: dir.storePath)
        #expect(try db.text("PRAGMA journal_mode") == "wal")
    }

    /// One process owns the store: while it is open, another connection
    /// (a second service on the same file) cannot read it, and opening a
    /// second store fails with an error that says the store is in use.
    @Test func anOpenStoreIsLockedAgainstOthers() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let store = try openStore(dir)
        _ = try await store.save([drink()])
        let other = try Database(path: dir.storePath)
        #expect(throws: SQLiteError.self) { try other.text("SELECT count(*) FROM records") }
        #expect { _ = try openStore(dir) } throws: { ($0 as? StoreError)?.isInUse == true && "\($0)".contains("in use") }
        await store.close()
        #expect(try other.text("SELECT count(*) FROM records") == "1")
    }
}
