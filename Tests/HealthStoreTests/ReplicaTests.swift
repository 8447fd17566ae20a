import CoffeeDomain
import Foundation
import Testing

@testable import HealthStore

/// A standby's store (docs/protocol.md §11): fed its primary's changes with their
/// anchors, it holds what the primary holds, under the same anchors, and
/// announces commits whose pages chain as the primary's do.
@Suite("A standby's store", .timeLimit(.minutes(1)))
struct ReplicaTests {
    /// Everything `store` holds from anchor 0: each change with its anchor.
    func everything(_ store: HealthStore) async throws -> ChangeSet {
        try await store.changes(since: 0, limit: 1_000_000)
    }

    /// Random commits on a primary: new drinks, new versions of held ones,
    /// a UUID written twice in one commit, deletions of live and unknown UUIDs.
    func randomCommits(_ primary: HealthStore, count: Int, seed: UInt64) async throws {
        var rng = SplitMix(state: seed)
        var known: [UUID] = []
        for _ in 0..<count {
            var batch = WriteBatch()
            for _ in 0..<Int(rng.next() % 6) {
                if !known.isEmpty, rng.next() % 3 == 0 {
                    let uuid = known[Int(rng.next() % UInt64(known.count))]
                    batch.drinks.append(drink(uuid, mg: 50, version: Int64(rng.next() % 4) + 1))
                } else {
                    let fresh = drink(mg: Double(rng.next() % 300) + 1, at: Double(rng.next() % 100_000))
                    known.append(fresh.uuid)
                    batch.drinks.append(fresh)
                    if rng.next() % 4 == 0 { batch.drinks.append(drink(fresh.uuid, mg: 10, version: 2)) }
                }
            }
            for _ in 0..<Int(rng.next() % 3) {
                let uuid = known.isEmpty || rng.next() % 4 == 0 ? UUID() : known[Int(rng.next() % UInt64(known.count))]
                batch.deletions.append(Deletion(uuid: uuid))
            }
            if !batch.isEmpty { _ = try await primary.apply(batch) }
        }
    }

    /// A primary and a standby, each a new store in a folder of its own, closed and removed after `body`.
    func withTwoStores(_ body: (HealthStore, HealthStore) async throws -> Void) async throws {
        let dirs = (TemporaryDirectory(), TemporaryDirectory())
        defer {
            dirs.0.cleanup()
            dirs.1.cleanup()
        }
        let primary = try openStore(dirs.0)
        let standby = try openStore(dirs.1)
        try await body(primary, standby)
        await primary.close()
        await standby.close()
    }

    @Test func pagesReadFromThePrimaryMakeAnEqualStore() async throws {
        try await withTwoStores { primary, standby in
            try await randomCommits(primary, count: 300, seed: 11)
            // As a follower reads: small pages from 0, each ending inside a commit.
            var anchor: Int64 = 0
            while true {
                let page = try await primary.changes(since: anchor, limit: 7)
                try await standby.replicate(.init(changes: page.anchored, through: page.anchor))
                anchor = page.anchor
                if !page.hasMore { break }
            }
            let (a, b) = (try await everything(primary), try await everything(standby))
            #expect(b == a)
            #expect(a.deleted.count > 10 && a.added.count > 100)
            #expect(await standby.anchor == primary.anchor)
        }
    }

    @Test func commitsAnnouncedByThePrimaryMakeAnEqualStoreThatAnnouncesTheSame() async throws {
        try await withTwoStores { primary, standby in
            let announced = await CommitRecorder(primary)
            let relayed = await CommitRecorder(standby)
            try await randomCommits(primary, count: 200, seed: 12)
            // As a `changes` message carries each commit: resolved, each change with its anchor.
            for batch in announced.batches {
                try await standby.replicate(.init(changes: batch.resolved(), through: batch.anchor))
            }
            #expect(try await everything(standby) == everything(primary))
            // The standby's own announcements chain, and say what the primary's said.
            let mine = relayed.batches
            #expect(mine.map(\.anchor) == announced.batches.map(\.anchor))
            #expect(mine.map(\.previousAnchor) == announced.batches.map(\.previousAnchor))
            #expect(mine.map { $0.resolved() } == announced.batches.map { $0.resolved() })
            // Split into pages, a standby's commit chains by its own anchors.
            for batch in mine where batch.log.count > 2 {
                var pages: [CommittedBatch] = []
                batch.forEachPage(of: 2) { pages.append($0) }
                #expect(pages.first?.previousAnchor == batch.previousAnchor && pages.last?.anchor == batch.anchor)
                for (page, next) in zip(pages, pages.dropFirst()) { #expect(next.previousAnchor == page.anchor) }
                #expect(
                    pages.flatMap { $0.resolved().addedAnchors + $0.resolved().deletedAnchors }.sorted()
                        == (batch.resolved().addedAnchors + batch.resolved().deletedAnchors).sorted())
            }
        }
    }

    @Test func aChangeNotAfterTheStoresAnchorIsRefusedWithNothingStored() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let standby = try openStore(dir)
        var first = AnchoredChanges()
        (first.added, first.addedAnchors) = ([drink(), drink()], [3, 5])
        #expect(try await standby.replicate(.init(changes: first, through: 6)) == 6)
        var stale = AnchoredChanges()
        (stale.added, stale.addedAnchors) = ([drink(), drink()], [7, 6])
        await #expect(throws: StoreError.outOfOrder(6, after: 7)) {
            try await standby.replicate(.init(changes: stale, through: 8))
        }
        (stale.added, stale.addedAnchors) = ([drink()], [6])
        await #expect(throws: StoreError.outOfOrder(6, after: 6)) {
            try await standby.replicate(.init(changes: stale, through: 9))
        }
        #expect(await standby.anchor == 6)
        #expect(try await everything(standby).added == first.added)
        // A page with nothing new but a later anchor moves the anchor, and survives a reopening.
        #expect(try await standby.replicate(.init(changes: AnchoredChanges(), through: 11)) == 11)
        await standby.close()
        let reopened = try openStore(dir)
        #expect(await reopened.anchor == 11)
        await reopened.close()
    }

    @Test func aWholeStateReplacesWhatWasHeldAndTheModelIsToldToRebuild() async throws {
        try await withTwoStores { primary, standby in
            try await randomCommits(primary, count: 50, seed: 13)
            try await randomCommits(standby, count: 80, seed: 14)  // what it held before: all of it goes
            let recorder = await CommitRecorder(standby)
            let before = await standby.anchor
            let state = try await everything(primary)
            try await standby.replicate(.init(changes: state.anchored, through: state.anchor, replacesAll: true, purgedAnchor: 3))
            #expect(standby.statistics().purgedAnchor == 3)
            #expect(try await standby.changes(since: 3, limit: 1_000_000) == primary.changes(since: 3, limit: 1_000_000))
            #expect(try await standby.changes(since: nil, limit: 1_000_000) == primary.changes(since: nil, limit: 1_000_000))
            await #expect(throws: StoreError.anchorExpired(requested: 2, purged: 3)) {
                try await standby.changes(since: 2, limit: 10)
            }
            let batch = try #require(recorder.batches.last)
            #expect(batch.replacesAll && !batch.isComplete && batch.log.isEmpty)
            #expect(batch.previousAnchor == before && batch.anchor == state.anchor)
        }
    }

    /// A standby's new drinks go in runs of one statement each, at their
    /// primary's anchors (gaps between them); a run that meets a held record
    /// is written one by one, replacing it. Either way the store holds what
    /// storing each change alone holds, and announces the same.
    @Test func newDrinksGoInRunsAndARunThatMeetsAHeldRecordIsWrittenOneByOne() async throws {
        try await withTwoStores { batched, alone in
            let (announced, told) = (await CommitRecorder(batched), await CommitRecorder(alone))
            let held = (0..<40).map { drink(mg: Double($0 + 1), at: Double($0)) }
            var first = AnchoredChanges()
            (first.added, first.addedAnchors) = (held, held.indices.map { Int64(2 * $0 + 2) })
            let fresh = (0..<25).map { drink(mg: 7, at: Double(100 + $0)) }
            var second = AnchoredChanges()
            second.added = Array(fresh[..<10]) + [drink(held[3].uuid, mg: 300, version: 2)] + fresh[10...]
            second.addedAnchors = second.added.indices.map { Int64(100 + $0) }
            (second.deleted, second.deletedAnchors) = ([Tombstone(uuid: held[5].uuid, version: 1)], [200])
            for (changes, through) in [(first, Int64(81)), (second, 201)] {
                try await batched.replicate(.init(changes: changes, through: through))
                for item in changes.inAnchorOrder {
                    var one = AnchoredChanges()
                    switch item.change {
                    case .added(let d): (one.added, one.addedAnchors) = ([d], [item.anchor])
                    case .deleted(let t): (one.deleted, one.deletedAnchors) = ([t], [item.anchor])
                    }
                    try await alone.replicate(.init(changes: one, through: item.anchor))
                }
                try await alone.replicate(.init(changes: AnchoredChanges(), through: through))
            }
            #expect(try await everything(batched) == everything(alone))
            let anchors = (await batched.anchor, await alone.anchor)
            #expect(anchors == (201, 201))
            let record = try await batched.changes(since: 0, limit: 1000)
            #expect(record.added.first { $0.uuid == held[3].uuid }?.mgCaffeine == 300)
            #expect(record.deleted.map(\.uuid) == [held[5].uuid])
            // 40 in runs (16, 16, 4, 4); then the run of 16 with held[3] undone, and 8 of the last 10 in runs.
            let runs = await (batched.statements.insertedInRuns, batched.statements.runsUndone)
            #expect(runs == (48, 1))
            #expect(await alone.statements.insertedInRuns == 0)
            func anchorsOf(_ batches: [CommittedBatch]) -> [Int64] {
                batches.flatMap { batch -> [Int64] in
                    let r = batch.resolved()
                    return r.addedAnchors + r.deletedAnchors
                }.sorted()
            }
            #expect(announced.batches.count == 2)
            #expect(anchorsOf(announced.batches) == anchorsOf(told.batches))
        }
    }
}
