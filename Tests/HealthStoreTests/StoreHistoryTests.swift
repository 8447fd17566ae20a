import CoffeeDomain
import Foundation
import SQLite
import Testing

@testable import HealthStore

/// History's read (docs/protocol.md §15): the doses of a stretch of time,
/// through the index of live drinks by date, on both stores, and the sums
/// per range computed from them.
@Suite("History's read of the store", .timeLimit(.minutes(2)))
struct StoreHistoryTests {
    /// Each range counts the live drinks dated from its start up to, not
    /// including, its end; a deletion and a new version count as they stand.
    @Test(arguments: StoreBackend.available) func eachRangeSumsItsLiveDrinks(_ backend: StoreBackend) async throws {
        let dir = TemporaryDirectory(backend)
        defer { dir.cleanup() }
        let store = try openStore(dir)
        let a = drink(mg: 96, at: 0)
        let b = drink(mg: 64.5, at: 3600)
        let c = drink(mg: 28, at: 7200)  // exactly the second range's end: the third range's
        let gone = drink(mg: 500, at: 1800)
        _ = try await store.save([a, b, c, gone])
        _ = try await store.delete([Deletion(uuid: gone.uuid)])
        _ = try await store.save([drink(b.uuid, mg: 100, at: 3600, version: 2)])
        let ranges = [
            DateInterval(start: t0 - 60, end: t0 + 60), DateInterval(start: t0 + 60, end: t0 + 7200),
            DateInterval(start: t0 + 7200, end: t0 + 86_400), DateInterval(start: t0 + 86_400, end: t0 + 2 * 86_400),
        ]
        let doses = try await store.doses(datedIn: (t0 - 60 - HistoryCurve.lookBack)...(t0 + 2 * 86_400))
        #expect(doses.map(\.mg) == [96, 100, 28])
        let curve = HistoryCurve(model: CaffeineModel(halfLifeHours: 5), thresholdMg: 50)
        let sums = curve.measure(ranges, doses: doses).map { [$0.mg, Double($0.drinks)] }
        #expect(sums == [[96, 1], [100, 1], [28, 1], [0, 0]])
        await store.close()
    }

    /// An export's pages (`drinks(after:limit:)`): every live drink once, in
    /// date order and then UUID's, ten of them on one date across pages of
    /// four, a deleted one left out, and no cursor after the last page.
    @Test(arguments: StoreBackend.available) func pagesGiveEveryLiveDrinkOnceInDateOrder(_ backend: StoreBackend)
        async throws
    {
        let dir = TemporaryDirectory(backend)
        defer { dir.cleanup() }
        let store = try openStore(dir)
        let tied = (0..<10).map { _ in drink(at: 60) }
        let others = (0..<13).map { drink(at: Double($0) * 7 - 30) }
        let gone = drink(at: 60)
        _ = try await store.save(tied + others + [gone])
        _ = try await store.delete([Deletion(uuid: gone.uuid)])
        func key(_ d: Drink) -> (Double, String) { (d.date.timeIntervalSince1970, UUIDText.string(d.uuid)) }
        let expected = (tied + others).sorted { key($0) < key($1) }.map(\.uuid)
        var read: [UUID] = []
        var pages = 0
        var cursor: DrinkCursor?
        repeat {
            let page = try await store.drinks(after: cursor, limit: 4)
            #expect(page.drinks.count <= 4)
            read += page.drinks.map(\.uuid)
            cursor = page.next
            pages += 1
        } while cursor != nil && pages < 20
        #expect(read == expected)
        #expect(pages == 6)  // 23 drinks: five full pages, and a last one of three
        await store.close()
    }

    /// A new SQLite file indexes live drinks by date, and history's read
    /// takes a range of that index alone, never the table, and the drinks
    /// not in it yet by anchor (`StoreSchema.deferredDateIndex`).
    @Test func theDosesAreReadFromTheIndexAlone() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let store = try openStore(dir)
        await store.close()
        let db = try Database(path: dir.storePath)
        let reads = SQLDialect.sqlite.liveByDate("date_ms, mg", where: "date_ms >= 1 AND date_ms <= 2", order: "date_ms")
        var plans: [[String]] = []
        for read in reads {
            let explain = try db.prepare("EXPLAIN QUERY PLAN \(read)")
            var plan: [String] = []
            while try explain.step() { plan.append(explain.string(3) ?? "") }
            #expect(!plan.contains { $0.hasPrefix("SCAN") || $0.contains("TEMP B-TREE") && read == reads[0] }, "\(plan)")
            plans.append(plan)
        }
        #expect(plans.count == 2)
        #expect(plans.first?.contains { $0.contains("USING COVERING INDEX live_by_date") } == true, "\(plans)")
        #expect(plans.last?.contains { $0.contains("USING INTEGER PRIMARY KEY (rowid>?)") } == true, "\(plans)")
    }
}
