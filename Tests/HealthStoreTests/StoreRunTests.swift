import CoffeeDomain
import Foundation
import Testing

@testable import HealthStore

/// Runs of new drinks in one statement (`Statements.insertNew`): SQLite's
/// `VALUES` lists of 16 and 4, PostgreSQL's one insert over arrays
/// (`SQLDialect.arrayInsert`), and what happens when a run meets a record.
@Suite("Runs of new drinks", .timeLimit(.minutes(2)))
struct StoreRunTests {
    /// A run that meets a stored drink is taken back once. SQLite writes
    /// that run of 16 row by row; PostgreSQL's run of all 32 is cut around
    /// the stored drink (one lookup), and the drinks before and after it go
    /// in as runs again.
    @Test(arguments: StoreBackend.available) func aRunThatMeetsAStoredDrinkIsTakenBackOnce(_ backend: StoreBackend) async throws {
        let dir = TemporaryDirectory(backend)
        defer { dir.cleanup() }
        let store = try openStore(dir)
        let stored = drink(at: 0)
        _ = try await store.save([stored])
        var drinks = (0..<32).map { drink(at: Double($0 + 1)) }
        drinks[5] = stored
        let r = try await store.save(drinks)
        #expect(r.added == 31 && r.duplicates == 1 && r.anchor == 32)
        #expect(await store.statements.runsUndone == 1)
        #expect(await store.statements.insertedInRuns == (backend == .sqlite ? 16 : 31))
        let page = try await store.changes(since: 1, limit: 100)
        #expect(page.added == drinks.filter { $0 != stored } && page.addedAnchors == Array(2...32))
        await store.close()
    }

    /// A drink repeated in a long batch is stored once, its higher version
    /// winning; an old version of a stored drink is a duplicate; the drinks
    /// between go in as runs, in order, at consecutive anchors.
    @Test(arguments: StoreBackend.available) func aLongRunWithRepeatsAndOldDrinksStoresWhatItsRulesSay(_ backend: StoreBackend)
        async throws
    {
        let dir = TemporaryDirectory(backend)
        defer { dir.cleanup() }
        let store = try openStore(dir)
        let old = drink(mg: 10, at: 0, version: 3)
        _ = try await store.save([old])
        var drinks = (0..<40).map { drink(mg: Double($0 + 1), at: Double($0 + 1)) }
        drinks[12] = drink(old.uuid, mg: 11, version: 2)  // lower: a duplicate
        drinks[30] = drink(drinks[3].uuid, mg: 99, version: 2)  // a newer version of one earlier in the batch
        drinks[31] = drink(drinks[4].uuid, mg: 98, version: 1)  // the same version again: a duplicate
        let r = try await store.save(drinks)
        #expect(r.added == 38 && r.duplicates == 2 && r.anchor == 39)
        let page = try await store.changes(since: 1, limit: 100)
        let expected = drinks.enumerated().filter { ![3, 12, 31].contains($0.offset) }.map(\.element)
        #expect(page.added == expected)
        if backend == .postgresql { #expect(await store.statements.insertedInRuns == 3 + 7 + 17 + 8) }  // cut at 3, 4, 12, 30, 31
        await store.close()
    }

    /// Text that PostgreSQL's array syntax gives a meaning (quotes,
    /// backslashes, braces, commas, the word NULL) is stored as it was sent.
    @Test(arguments: StoreBackend.available) func aRunStoresTextAsItWasSent(_ backend: StoreBackend) async throws {
        let dir = TemporaryDirectory(backend)
        defer { dir.cleanup() }
        let store = try openStore(dir)
        let sources: [String?] = [
            #"say "hi""#, #"back\slash"#, "{a,b}", "NULL", "null", "", " padded ", "a,b", "café ☕️", #"\"{"#, nil, "\t\n",
        ]
        let types: [DrinkType?] = [nil, .doubleEspresso, .chocolate]
        let drinks = sources.enumerated().map { k, source in
            Drink(mgCaffeine: 0.1 * Double(k + 1), date: t0 + Double(k), type: types[k % 3], source: source)
        }
        #expect(try await store.save(drinks).added == drinks.count)
        let page = try await store.changes(since: 0, limit: 100)
        #expect(page.added == drinks)
        #expect(await store.statements.insertedInRuns == drinks.count)
        await store.close()
    }
}
