import CoffeeDomain
import Foundation
import SQLite
import Testing

@_spi(Testing) @testable import HealthStore

/// SQLite's index by date, written by a later commit for a small one
/// (`StoreSchema.deferredDateIndex`, `DateIndexDeferral`): every read by
/// date answers as if each drink were in the index from its commit.
@Suite("The index by date, deferred", .timeLimit(.minutes(2)))
struct StoreDateIndexTests {
    /// The rule alone: when a commit leaves its drinks out, and which
    /// anchors the commit that settles puts in.
    @Test func theRuleSettlesOnceEnoughRowsLieAboveTheMark() {
        var rule = DateIndexDeferral()
        #expect(rule.settles(after: 1) == (false, nil))  // not opened: nothing known
        rule.opened(through: 10)
        // The first commit after opening puts in whatever an earlier run left out.
        #expect(rule.settles(after: 0) == (false, nil))
        #expect(rule.settles(after: 1) == (true, 11...Int64.max))
        rule.committed(rows: 1, movedTo: 11)
        #expect(rule.wrote(at: 12) == 1)  // not deferring
        rule.deferring = true
        #expect(rule.settles(after: 1) == (false, nil))
        #expect(rule.wrote(at: 12) == 0 && rule.wrote(at: 14) == 0)
        #expect(rule.settles(after: 2) == (false, nil))
        rule.committed(rows: 2, movedTo: nil)
        #expect(rule.settles(after: DateIndexDeferral.settleEvery - 3) == (false, nil))
        #expect(rule.settles(after: DateIndexDeferral.settleEvery - 2) == (true, 12...14))
        rule.committed(rows: DateIndexDeferral.settleEvery - 2, movedTo: 2000)
        #expect(rule.through == 2000 && rule.rowsSince == 0)
        // A commit that does not defer moves the mark at once, setting no
        // row when none was left out since.
        rule.deferring = false
        #expect(rule.wrote(at: 2001) == 1)
        #expect(rule.settles(after: 1) == (true, nil))
    }

    /// Two reads in order merged as one; among equals the first read's first.
    @Test func readsAreMergedInOrder() {
        let merged = Statements<Database>.merged(
            [(1, "a"), (3, "a"), (3, "b"), (7, "a")], [(0, "x"), (3, "x"), (9, "x")], before: { $0.0 < $1.0 })
        #expect(merged.map { "\($0.0)\($0.1)" } == ["0x", "1a", "3a", "3b", "3x", "7a", "9x"])
        #expect(Statements<Database>.merged([1, 2], [], before: <) == [1, 2])
        #expect(Statements<Database>.merged([], [1, 2], before: <) == [1, 2])
    }

    /// A cursor's order is the store's: by date, then by the UUID's bytes
    /// (unsigned, as SQLite compares blobs), not by its text's case or sign.
    @Test func cursorsOrderByDateThenUUIDBytes() throws {
        let low = try #require(UUID(uuidString: "7FFFFFFF-0000-4000-8000-000000000000"))
        let high = try #require(UUID(uuidString: "80000000-0000-4000-8000-000000000000"))
        #expect(DrinkCursor(dateMs: 5, uuid: low) < DrinkCursor(dateMs: 5, uuid: high))
        #expect(!(DrinkCursor(dateMs: 5, uuid: high) < DrinkCursor(dateMs: 5, uuid: low)))
        #expect(DrinkCursor(dateMs: 4, uuid: high) < DrinkCursor(dateMs: 5, uuid: low))
        #expect(!(DrinkCursor(dateMs: 5, uuid: low) < DrinkCursor(dateMs: 5, uuid: low)))
    }

    /// Small commits leave their drinks out of the index; history's doses,
    /// the model's window and an export's pages still give every live drink
    /// (a new version and a deletion among those left out as they stand);
    /// a large commit puts them in and moves `date_indexed` to the top; so
    /// does the first commit after reopening, for drinks left out before.
    @Test func readsByDateSeeDrinksBeforeTheyAreIndexed() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        var store = try openStore(dir)
        let first = drink(mg: 1, at: 0)
        _ = try await store.save([first])  // the first commit after opening: into the index
        let singles = (1...5).map { drink(mg: Double($0) * 10, at: Double($0) * -600) }
        for single in singles { _ = try await store.save([single]) }
        func count(_ condition: String) async throws -> Int64 {
            try await store.scalar("SELECT count(*) FROM records WHERE \(condition)") ?? -1
        }
        #expect(try await count("indexed = 0 AND deleted = 0") == 5)
        #expect(try await count("indexed = 1 AND deleted = 0") == 1)

        let replaced = drink(singles[0].uuid, mg: 11, at: 3000, version: 2)
        _ = try await store.save([replaced])
        _ = try await store.delete([Deletion(uuid: singles[1].uuid)])
        var live = [first, replaced] + singles[2...]
        #expect(try await count("indexed = 0 AND deleted = 0") == 4)
        try await expectReads(store, give: live)

        // Drinks of one moment in and out of the index: the pages give them in UUID order.
        let tiedIn = (0..<20).map { _ in drink(mg: 6, at: 5000) }
        _ = try await store.save(tiedIn)
        let tiedOut = (0..<4).map { _ in drink(mg: 6, at: 5000) }
        for one in tiedOut { _ = try await store.save([one]) }
        live += tiedIn + tiedOut
        #expect(try await count("indexed = 0 AND deleted = 0") == 4)
        try await expectReads(store, give: live, pagesOf: 3)

        let many = (0..<1100).map { drink(mg: 2, at: 7200 + Double($0)) }
        _ = try await store.save(many)
        live += many
        #expect(try await count("indexed = 0 AND deleted = 0") == 0)
        let mark = try await store.scalar("SELECT value FROM meta WHERE key = 'date_indexed'")
        #expect(try await mark == store.scalar("SELECT max(anchor) FROM records"))
        try await expectReads(store, give: live)

        // Left out, then the store closes: the next run's first commit puts them in.
        let late = (1...3).map { drink(mg: 3, at: 90_000 + Double($0)) }
        for one in late { _ = try await store.save([one]) }
        live += late
        #expect(try await count("indexed = 0 AND deleted = 0") == 3)
        await store.close()
        store = try openStore(dir)
        try await expectReads(store, give: live)
        let last = drink(mg: 4, at: 100_000)
        _ = try await store.save([last])
        live.append(last)
        #expect(try await count("indexed = 0 AND deleted = 0") == 0)
        try await expectReads(store, give: live)

        // A commit too large to defer moves the mark to the top by itself.
        let twenty = (0..<20).map { drink(mg: 5, at: 100_100 + Double($0)) }
        _ = try await store.save(twenty)
        live += twenty
        let top = try await store.scalar("SELECT max(anchor) FROM records")
        #expect(try await store.scalar("SELECT value FROM meta WHERE key = 'date_indexed'") == top)
        try await expectReads(store, give: live)
        await store.close()
    }

    /// Every read by date gives exactly `live`, in date order (then UUID's).
    private func expectReads(_ store: HealthStore, give live: [Drink], pagesOf pageSize: Int = 400) async throws {
        func key(_ d: Drink) -> DrinkCursor { DrinkCursor(dateMs: d.epochMilliseconds, uuid: d.uuid) }
        let expected = live.sorted { key($0) < key($1) }
        let all = (t0 - 86_400)...(t0 + 2 * 86_400)
        let doses = try await store.doses(datedIn: all)
        #expect(doses.map(\.mg) == expected.map(\.mgCaffeine))
        #expect(doses.map(\.date) == expected.map(\.date))
        let window = try await store.drinks(datedIn: all)
        let windowUUIDs = Set(window.map(\.uuid))
        #expect(window.count == live.count && windowUUIDs == Set(live.map(\.uuid)))
        #expect(window.map(\.date) == expected.map(\.date))
        var read: [UUID] = []
        var cursor: DrinkCursor?
        var pages = 0
        repeat {
            let page = try await store.drinks(after: cursor, limit: pageSize)
            #expect(page.drinks.count <= pageSize)
            read += page.drinks.map(\.uuid)
            cursor = page.next
            pages += 1
        } while cursor != nil && pages < 2 * live.count / pageSize + 2
        #expect(read == expected.map(\.uuid))
    }
}
