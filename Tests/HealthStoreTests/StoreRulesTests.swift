import CoffeeDomain
import Foundation
import Testing

@testable import HealthStore

/// On both stores (`StoreBackend.available`): one definition of the rules.
@Suite("Store rules (docs/protocol.md §1)", .timeLimit(.minutes(2)))
struct StoreRulesTests {
    @Test(arguments: StoreBackend.available) func saveNewDrinkStoresItAndTakesOneAnchor(_ backend: StoreBackend) async throws {
        let dir = TemporaryDirectory(backend)
        defer { dir.cleanup() }
        let store = try openStore(dir)
        let d = drink()
        let result = try await store.save([d])
        #expect(result == WriteResult(anchor: 1, added: 1))
        let changes = try await store.changes(since: nil, limit: 10)
        #expect(changes.added == [d])
        #expect(changes.anchor == 1)
        #expect(!changes.hasMore)
        await store.close()
    }

    @Test(arguments: StoreBackend.available) func sameOrLowerVersionIsADuplicateAndTakesNoAnchor(_ backend: StoreBackend)
        async throws
    {
        let dir = TemporaryDirectory(backend)
        defer { dir.cleanup() }
        let store = try openStore(dir)
        let id = UUID()
        _ = try await store.save([drink(id, mg: 100, version: 2)])
        let same = try await store.save([drink(id, mg: 100, version: 2)])
        let lower = try await store.save([drink(id, mg: 50, version: 1)])
        #expect(same.duplicates == 1 && same.added == 0)
        #expect(lower.duplicates == 1 && lower.added == 0)
        #expect(await store.anchor == 1)
        let changes = try await store.changes(since: nil, limit: 10)
        #expect(changes.added.map(\.mgCaffeine) == [100])
        await store.close()
    }

    @Test(arguments: StoreBackend.available) func higherVersionReplaces(_ backend: StoreBackend) async throws {
        let dir = TemporaryDirectory(backend)
        defer { dir.cleanup() }
        let store = try openStore(dir)
        let id = UUID()
        _ = try await store.save([drink(id, mg: 100, version: 1)])
        let r = try await store.save([drink(id, mg: 150, version: 2)])
        #expect(r.added == 1 && r.anchor == 2)
        let changes = try await store.changes(since: 1, limit: 10)
        #expect(changes.added.map(\.mgCaffeine) == [150])
        #expect(changes.added.first?.version == 2)
        await store.close()
    }

    @Test(arguments: StoreBackend.available) func deleteLiveDrinkMakesTombstoneWithMaxVersion(_ backend: StoreBackend)
        async throws
    {
        let dir = TemporaryDirectory(backend)
        defer { dir.cleanup() }
        let store = try openStore(dir)
        let a = UUID()
        let b = UUID()
        _ = try await store.save([drink(a, version: 3), drink(b, version: 3)])
        let r = try await store.delete([Deletion(uuid: a, version: 1), Deletion(uuid: b, version: 7)])
        #expect(r.deleted == 2 && r.unknown == 0 && r.anchor == 4)
        let changes = try await store.changes(since: 2, limit: 10)
        #expect(Set(changes.deleted) == [Tombstone(uuid: a, version: 3), Tombstone(uuid: b, version: 7)])
        #expect(try await store.changes(since: nil, limit: 10).added.isEmpty)
        await store.close()
    }

    @Test(arguments: StoreBackend.available) func deleteOfUnknownUUIDStoresTombstoneThatBlocksLateSave(_ backend: StoreBackend)
        async throws
    {
        let dir = TemporaryDirectory(backend)
        defer { dir.cleanup() }
        let store = try openStore(dir)
        let id = UUID()
        let r = try await store.delete([Deletion(uuid: id, version: 2)])
        #expect(r.unknown == 1 && r.anchor == 1)
        // A late save with the tombstone's version or lower stays deleted.
        let late = try await store.save([drink(id, version: 2)])
        #expect(late.duplicates == 1 && late.added == 0)
        #expect(try await store.changes(since: nil, limit: 10).added.isEmpty)
        // A higher version brings it back.
        let revived = try await store.save([drink(id, version: 3)])
        #expect(revived.added == 1)
        #expect(try await store.changes(since: nil, limit: 10).added.map(\.uuid) == [id])
        await store.close()
    }

    @Test(arguments: StoreBackend.available) func deleteWithoutVersionDefaultsToOne(_ backend: StoreBackend) async throws {
        let dir = TemporaryDirectory(backend)
        defer { dir.cleanup() }
        let store = try openStore(dir)
        let id = UUID()
        _ = try await store.delete([Deletion(uuid: id)])
        let changes = try await store.changes(since: 0, limit: 10)
        #expect(changes.deleted == [Tombstone(uuid: id, version: 1)])
        await store.close()
    }

    @Test(arguments: StoreBackend.available) func deletingTwiceIsANoOp(_ backend: StoreBackend) async throws {
        let dir = TemporaryDirectory(backend)
        defer { dir.cleanup() }
        let store = try openStore(dir)
        let id = UUID()
        _ = try await store.save([drink(id)])
        _ = try await store.delete([Deletion(uuid: id)])
        let again = try await store.delete([Deletion(uuid: id, version: 9)])
        #expect(again.deleted == 0 && again.unknown == 1)
        #expect(await store.anchor == 2)
        #expect(try await store.changes(since: 0, limit: 10).deleted == [Tombstone(uuid: id, version: 1)])
        await store.close()
    }

    @Test(arguments: StoreBackend.available) func orderOfDifferentVersionsDoesNotMatter(_ backend: StoreBackend) async throws {
        let id = UUID()
        let v1 = drink(id, mg: 10, version: 1)
        let v2 = drink(id, mg: 20, version: 2)
        let v3 = drink(id, mg: 30, version: 3)
        var finals: Set<Drink> = []
        for order in [[v1, v2, v3], [v3, v1, v2], [v2, v3, v1], [v3, v2, v1]] {
            let dir = TemporaryDirectory(backend)
            defer { dir.cleanup() }
            let store = try openStore(dir)
            for d in order { _ = try await store.save([d]) }
            finals.formUnion(try await store.changes(since: nil, limit: 10).added)
            await store.close()
        }
        #expect(finals == [v3])
    }

    @Test(arguments: StoreBackend.available) func aCommitOfKChangesTakesKConsecutiveAnchors(_ backend: StoreBackend) async throws
    {
        let dir = TemporaryDirectory(backend)
        defer { dir.cleanup() }
        let store = try openStore(dir)
        let drinks = (0..<5).map { drink(at: Double($0)) }
        let r = try await store.save(drinks)
        #expect(r.anchor == 5 && r.added == 5)
        // Paging one at a time sees anchors 1…5, in order, none skipped or repeated.
        var anchor: Int64? = 0
        var seen: [UUID] = []
        var anchors: [Int64] = []
        while let a = anchor {
            let page = try await store.changes(since: a, limit: 1)
            seen += page.added.map(\.uuid)
            anchors.append(page.anchor)
            anchor = page.hasMore ? page.anchor : nil
        }
        #expect(seen == drinks.map(\.uuid))
        #expect(anchors == [1, 2, 3, 4, 5])
        await store.close()
    }

    /// A commit says whether it replaced a record: only then may a UUID be
    /// in its log twice, and only then does `resolved()` build its map.
    @Test(arguments: StoreBackend.available) func aCommitSaysWhetherItReplacedARecord(_ backend: StoreBackend) async throws {
        let dir = TemporaryDirectory(backend)
        defer { dir.cleanup() }
        let store = try openStore(dir)
        let recorder = await CommitRecorder(store)
        let (a, b) = (drink(at: 1), drink(at: 2))
        _ = try await store.save([a, b])  // new records only
        _ = try await store.delete([Deletion(uuid: UUID())])  // a tombstone for an unknown UUID is new too
        // One commit that writes a twice (v1 then v2) and deletes b, stored before.
        let c = drink(at: 3)
        var c2 = c
        c2.version = 2
        _ = try await store.apply(WriteBatch(drinks: [c, c2], deletions: [Deletion(uuid: b.uuid)]))
        _ = try await store.save([drink(a.uuid, mg: 50, at: 1, version: 2)])  // a newer version of a stored drink
        let batches = recorder.batches
        #expect(batches.map(\.replacesRecords) == [false, false, true, true])
        #expect(batches.map(\.writesOnlyNewRecords) == [true, true, false, false])
        let third = batches[2].resolved()
        #expect(third.added == [c2] && third.deleted == [Tombstone(uuid: b.uuid, version: 1)])
        // Each change carries its own anchor: c's second write (the third
        // commit's second change) and b's tombstone (its third); c's first
        // write left no trace.
        let previous = batches[2].previousAnchor
        #expect(third.addedAnchors == [previous + 2] && third.deletedAnchors == [previous + 3])
        #expect(batches[0].resolved().added == [a, b] && batches[0].resolved().addedAnchors == [1, 2])
        // What a commit announces is what `changes` reads after it: the same
        // changes at the same anchors.
        let read = try await store.changes(since: previous, limit: 100, through: batches[2].anchor)
        #expect(read.anchored == third)
        await store.close()
    }

    /// A page of 5,000 drinks is resolved into arrays made once at their
    /// size: grown from empty, each doubling copies them and touches fresh
    /// pages (at full speed a tenth of the publisher's thread was page faults).
    @Test func resolvingACommitMakesItsArraysOnceAtTheirSize() {
        let drinks = (0..<5000).map { drink(at: TimeInterval($0)) }
        let commit = CommittedBatch(anchor: 5000, previousAnchor: 0, log: drinks.map { .added($0) }, replacesRecords: false)
        let changes = commit.resolved()
        #expect(changes.added == drinks && changes.addedAnchors == Array(1...5000))
        #expect(changes.added.capacity < 5000 * 9 / 8 && changes.addedAnchors.capacity < 5000 * 9 / 8)
    }

    /// A commit written as a `changes` message straight from its log (no
    /// UUID twice) is the message of its resolved arrays, byte for byte:
    /// drinks and tombstones mixed, anchors given or counted, kept rows, an
    /// identity; and a log with a UUID twice goes through `resolved()`.
    @Test func aCommitsMessageFromItsLogIsTheResolvedOnesBytes() {
        var rng = SystemRandomNumberGenerator()
        for round in 0..<200 {
            let count = Int.random(in: 0...12, using: &rng)
            var log: [CommittedBatch.Change] = (0..<count).map { i in
                Bool.random(using: &rng)
                    ? .added(drink(mg: Double(Int.random(in: 1...400, using: &rng)) / 4, at: TimeInterval(i)))
                    : .deleted(Tombstone(uuid: UUID(), version: Int64.random(in: 1...9, using: &rng)))
            }
            let twice = round % 4 == 0 && !log.isEmpty
            if twice, case .added(var again) = log[0] {
                again.mgCaffeine += 1
                log.append(.added(again))  // the same UUID later: the later write wins
            }
            let anchors = round % 3 == 0 ? (0..<log.count).map { 10 + Int64($0) * 7 } : nil
            var commit = CommittedBatch(
                anchor: (anchors?.last ?? Int64(log.count)), previousAnchor: 0, log: log,
                replacesRecords: twice, anchors: anchors)
            if round % 5 == 0 {
                commit.kept = KeptRows(settings: [.init(scope: "person", name: "bedtime", value: "\"22:30\"", anchor: 3)])
            }
            if round % 2 == 0 { commit.identity = StoreIdentity(store: UUID(), epoch: Int64(round)) }
            let changes = commit.resolved()
            let expected = WireFormat.changesMessage(
                identity: commit.identity, anchor: commit.anchor, previousAnchor: commit.previousAnchor,
                added: changes.added, addedAnchors: changes.addedAnchors, deleted: changes.deleted,
                deletedAnchors: changes.deletedAnchors, kept: changes.kept)
            var out: [UInt8] = [7]
            commit.writeChangesMessage(into: &out)
            #expect(out == [7] + expected, "round \(round)")
            if out != [7] + expected { return }
        }
    }

    /// Runs of new drinks go in as one statement each (`insertNew`); a run
    /// that meets a stored UUID, or one UUID twice, is written row by row.
    /// Either way the records and anchors must be exactly those of writing
    /// every change alone, in the same order.
    @Test(arguments: StoreBackend.available) func batchesStoreWhatWritingEachChangeAloneStores(_ backend: StoreBackend)
        async throws
    {
        var rng = SystemRandomNumberGenerator()
        let (dirA, dirB) = (TemporaryDirectory(backend), TemporaryDirectory(backend))
        defer {
            dirA.cleanup()
            dirB.cleanup()
        }
        let (batched, alone) = (try openStore(dirA), try openStore(dirB))
        var known: [Drink] = []
        var totals = (WriteResult(), WriteResult())
        for round in 0..<40 {
            var drinks: [Drink] = []
            // Now and then a long batch: PostgreSQL's one run of it is cut around its old and repeated drinks.
            for _ in 0..<(round % 10 == 9 ? 330 : Int.random(in: 0...45, using: &rng)) {
                let roll = Int.random(in: 0..<20, using: &rng)
                if roll == 0, let old = known.randomElement(using: &rng) {
                    drinks.append(old)  // sent again: a duplicate
                } else if roll == 1, let old = known.randomElement(using: &rng) {
                    drinks.append(drink(old.uuid, mg: Double(round + 1), version: old.version + 1))  // a newer version
                } else if roll == 2, let earlier = drinks.last {
                    drinks.append(drink(earlier.uuid, mg: 7, version: earlier.version + 1))  // twice in one batch
                } else {
                    drinks.append(drink(mg: Double(round + 1), at: Double(round)))
                }
            }
            let deletions = (0..<Int.random(in: 0...2, using: &rng)).compactMap { _ in
                known.randomElement(using: &rng).map { Deletion(uuid: $0.uuid) }
            }
            known += drinks
            let r = try await batched.apply(WriteBatch(drinks: drinks, deletions: deletions))
            totals.0.added += r.added
            totals.0.duplicates += r.duplicates
            for d in drinks {
                let r = try await alone.save([d])
                totals.1.added += r.added
                totals.1.duplicates += r.duplicates
            }
            for d in deletions { _ = try await alone.delete([d]) }
        }
        #expect(totals.0.added == totals.1.added && totals.0.duplicates == totals.1.duplicates)
        // Runs went in, and runs were taken back.
        let (inRuns, undone) = await (batched.statements.insertedInRuns, batched.statements.runsUndone)
        #expect(inRuns > 40 && undone > 5, "\(inRuns) rows went in runs, \(undone) runs were taken back")
        // Alone, no drink can go in a run.
        #expect(await alone.statements.insertedInRuns == 0)
        #expect(totals.0.added > 1_500 && totals.0.duplicates > 10)
        /// Every change in anchor order, one page of one change at a time.
        func history(_ store: HealthStore) async throws -> [(Int64, [Drink], [Tombstone])] {
            var anchor: Int64 = 0
            var pages: [(Int64, [Drink], [Tombstone])] = []
            while true {
                let page = try await store.changes(since: anchor, limit: 1)
                if page.added.isEmpty && page.deleted.isEmpty { break }
                pages.append((page.anchor, page.added, page.deleted))
                anchor = page.anchor
            }
            return pages
        }
        let (a, b) = (try await history(batched), try await history(alone))
        #expect(a.count == b.count)
        #expect(zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 && $0.2 == $1.2 })
        await batched.close()
        await alone.close()
    }

    @Test(arguments: StoreBackend.available) func pagingWithNullAnchorReturnsLiveDrinksOnly(_ backend: StoreBackend) async throws
    {
        let dir = TemporaryDirectory(backend)
        defer { dir.cleanup() }
        let store = try openStore(dir)
        let drinks = (0..<25).map { drink(at: Double($0)) }
        _ = try await store.save(drinks)
        _ = try await store.delete([Deletion(uuid: drinks[3].uuid)])
        var page = try await store.changes(since: nil, limit: 10)
        var all = page.added
        #expect(page.hasMore && page.deleted.isEmpty && page.anchor == 11)
        while page.hasMore {
            page = try await store.changes(since: page.anchor, limit: 10)
            all += page.added
        }
        #expect(all.count == 24)
        #expect(!all.contains { $0.uuid == drinks[3].uuid })
        #expect(page.anchor == 26)
        await store.close()
    }
}
