import CoffeeDomain
import Foundation
import SQLite
import Synchronization
import Testing

@testable import HealthStore

/// The settings a store keeps (docs/protocol.md §15), on both stores: a
/// change is one commit with an anchor of its own and no drink, announced
/// with the settings after it, and kept across a reopen.
@Suite("Settings in the store", .timeLimit(.minutes(2)))
struct StoreSettingsTests {
    @Test(arguments: StoreBackend.available) func aChangeIsACommitWithAnAnchorOfItsOwn(_ backend: StoreBackend) async throws {
        let dir = TemporaryDirectory(backend)
        defer { dir.cleanup() }
        let store = try openStore(dir)
        #expect(store.settings == StoredSettings())
        let saved = try await store.save([drink(mg: 96)])
        let announced = Mutex<[CommittedBatch]>([])
        // What an observer reads of the store's live settings when it is told of the commit.
        let seenWhenTold = Mutex<[Double]>([])
        await store.observeCommits { batch in
            announced.withLock { $0.append(batch) }
            seenWhenTold.withLock { $0.append(store.liveSettings.person.model.halfLifeHours) }
        }

        let after = try await store.writeSettings(scope: "person", [("halfLifeHours", "2"), ("timeZone", "\"Europe/Berlin\"")])
        #expect(after.anchor == saved.anchor + 1)
        #expect(after["person"] == ["halfLifeHours": "2", "timeZone": "\"Europe/Berlin\""])
        #expect(await store.anchor == after.anchor)
        let batch = try #require(announced.withLock { $0.last })
        #expect(batch.previousAnchor == saved.anchor && batch.anchor == after.anchor && batch.log.isEmpty)
        #expect(batch.settings == after)
        // The store owns the live settings and replaces them before it tells anyone: no reader waits on another's round.
        #expect(seenWhenTold.withLock { $0 } == [2])
        #expect(store.liveSettings.person.timeZoneName == "Europe/Berlin")
        #expect(store.liveSettings.current.anchor == after.anchor)
        // `changes` from before it: no drink, the new anchor.
        let page = try await store.changes(since: saved.anchor, limit: 10)
        #expect(page.added.isEmpty && page.deleted.isEmpty && page.anchor == after.anchor)

        // Another scope, and a name written again: its anchor moves, the rest stay.
        let second = try await store.writeSettings(scope: "catalogue", [("flatWhite", #"{"mgCaffeine":130,"retired":false}"#)])
        let third = try await store.writeSettings(scope: "person", [("halfLifeHours", "null")])
        #expect(third.anchor == second.anchor + 1 && third["person"]["halfLifeHours"] == "null")
        #expect(third["catalogue"].count == 1)
        // A drink after them takes the next anchor.
        let next = try await store.save([drink(mg: 64)])
        #expect(next.anchor == third.anchor + 1)
        await store.close()

        let reopened = try openStore(dir)
        #expect(reopened.settings == third)
        #expect(reopened.liveSettings.catalogue.entry(try #require(DrinkType(rawValue: "flatWhite")))?.mgCaffeine == 130)
        #expect(await reopened.anchor == next.anchor)
        await reopened.close()
    }

    /// A SQLite file of schema 4 gains the settings' table (and the outbox's) and keeps its drinks.
    @Test func aVersion4FileIsMigrated() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let store = try openStore(dir)
        let saved = try await store.save([drink(mg: 96)])
        await store.close()
        let db = try Database(path: dir.storePath)
        try db.execute(
            """
            DROP TABLE settings; DROP TABLE alert_state; DROP TABLE outbox;
            DROP INDEX live_by_date; ALTER TABLE records DROP COLUMN indexed; DELETE FROM meta WHERE key = 'date_indexed';
            \(StoreSchema.liveByDateV4) PRAGMA user_version = 4
            """)
        db.close()
        let migrated = try openStore(dir)
        #expect(await migrated.anchor == saved.anchor)
        let after = try await migrated.writeSettings(scope: "person", [("dailyLimitMg", "300")])
        #expect(after.anchor == saved.anchor + 1)
        await migrated.close()
    }
}
