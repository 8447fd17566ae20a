import CoffeeDomain
import CoffeeTestKit
import Foundation
import SQLite
import Synchronization
import Testing

@_spi(Testing) @testable import HealthStore

@Suite("Store durability, group commit and maintenance", .timeLimit(.minutes(2)))
struct StoreDurabilityTests {
    @Test func anchorsSurviveARestartAndAreNeverReused() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        var store = try openStore(dir)
        _ = try await store.save([drink(), drink()])
        let id = UUID()
        _ = try await store.delete([Deletion(uuid: id)])
        await store.close()

        store = try openStore(dir)
        #expect(await store.anchor == 3)
        let r = try await store.save([drink()])
        #expect(r.anchor == 4)
        await store.close()
    }

    @Test func anchorOfPurgedHighestTombstoneIsNotReused() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let clock = ManualClock(t0)
        var store = try openStore(dir, clock: clock)
        _ = try await store.delete([Deletion(uuid: UUID())])  // anchor 1, the highest
        clock.advance(by: 31 * 86_400)
        #expect(try await store.purgeTombstones() == 1)
        await store.close()
        store = try openStore(dir, clock: clock)
        #expect(try await store.save([drink()]).anchor == 2)
        await store.close()
    }

    @Test func tombstonesExpireAfterRetentionAndOldAnchorsGetAnchorExpired() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let clock = ManualClock(t0)
        let store = try openStore(dir, clock: clock)
        let keep = drink()
        _ = try await store.save([keep])  // 1
        _ = try await store.delete([Deletion(uuid: UUID())])  // 2, old
        clock.advance(by: 29 * 86_400)
        #expect(try await store.purgeTombstones() == 0)
        clock.advance(by: 2 * 86_400)
        _ = try await store.delete([Deletion(uuid: UUID())])  // 3, young
        #expect(try await store.purgeTombstones() == 1)
        await #expect(throws: StoreError.self) { try await store.changes(since: 1, limit: 10) }
        do {
            _ = try await store.changes(since: 0, limit: 10)
            Issue.record("expected anchor_expired")
        } catch let error as StoreError {
            #expect(error.isAnchorExpired)
        }
        // From the purged anchor on, and from null, all is well.
        #expect(try await store.changes(since: 2, limit: 10).deleted.count == 1)
        #expect(try await store.changes(since: nil, limit: 10).added == [keep])
        #expect(store.statistics().purgedAnchor == 2)
        await store.close()
    }

    @Test func concurrentWritersShareCommits() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let store = try openStore(dir)
        let writers = 200
        let results = try await withThrowingTaskGroup(of: WriteResult.self) { group in
            for i in 0..<writers {
                group.addTask { try await store.save([drink(at: Double(i))]) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.allSatisfy { $0.added == 1 })
        #expect(await store.anchor == Int64(writers))
        let commits = store.statistics().commits
        // Group commit: far fewer transactions than writers.
        #expect(commits < Int64(writers))
        await store.close()
    }

    /// Group commit stops at `announceLimit` changes, so queued batches that
    /// together exceed it commit in several transactions, each announced with
    /// its changes, in order, and nothing is lost (close commits the rest).
    @Test func groupCommitStaysWithinTheAnnounceLimit() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let store = try openStore(dir)
        let stream = await CommitRecorder(store)
        let size = HealthStore.announceLimit * 3 / 5
        for i in 0..<3 {
            store.submissions.submit(WriteBatch(drinks: (0..<size).map { _ in drink(at: Double(i)) })) { _ in }
        }
        await store.close()
        let batches = stream.batches
        #expect(batches.count == 3)
        #expect(batches.allSatisfy { $0.isComplete && $0.added.count == size })
        #expect(batches.map(\.previousAnchor) == [0, Int64(size), Int64(2 * size)])
        #expect(batches.last?.anchor == Int64(3 * size))
    }

    @Test func updateStreamReportsEachCommitWithAnUnbrokenChain() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let store = try openStore(dir)
        let stream = await CommitRecorder(store)
        let id = UUID()
        _ = try await store.save([drink(id)])
        _ = try await store.save([drink(id)])  // duplicate: no commit batch
        _ = try await store.apply(WriteBatch(drinks: [drink()], deletions: [Deletion(uuid: id)]))
        await store.close()
        let batches = stream.batches
        #expect(batches.map(\.previousAnchor) == [0, 1])
        #expect(batches.map(\.anchor) == [1, 3])
        #expect(batches[1].deleted == [Tombstone(uuid: id, version: 1)])
        #expect(batches[1].added.count == 1)
    }

    @Test func saveThenDeleteInOneCommitReportsFinalStateOnce() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let store = try openStore(dir)
        let stream = await CommitRecorder(store)
        let id = UUID()
        _ = try await store.apply(WriteBatch(drinks: [drink(id)], deletions: [Deletion(uuid: id)]))
        await store.close()
        let batches = stream.batches
        #expect(batches.count == 1)
        #expect(batches[0].added.isEmpty)
        #expect(batches[0].deleted == [Tombstone(uuid: id, version: 1)])
        #expect(batches[0].anchor == 2)
    }

    @Test func drinksDatedInARange() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let store = try openStore(dir)
        let old = drink(at: -30 * 3600)
        let recent = drink(at: -3600)
        let deleted = drink(at: -1800)
        _ = try await store.save([old, recent, deleted])
        _ = try await store.delete([Deletion(uuid: deleted.uuid)])
        let window = try await store.drinks(datedIn: (t0 - 24 * 3600)...t0)
        #expect(window == [recent])
        await store.close()
    }

    /// The drain path: the bus submits, then the store closes at once; what
    /// was submitted is committed, in order, before the store shuts.
    @Test func closeCommitsWhatWasSubmittedJustBefore() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let store = try openStore(dir)
        let id = UUID()
        store.submissions.submit(WriteBatch(drinks: [drink(id, version: 1)])) { _ in }
        store.submissions.submit(WriteBatch(deletions: [Deletion(uuid: id)])) { _ in }
        store.submissions.submit(WriteBatch(drinks: [drink()])) { _ in }
        await store.close()
        let reopened = try openStore(dir)
        #expect(await reopened.anchor == 3)
        #expect(try await reopened.changes(since: 0, limit: 10).deleted == [Tombstone(uuid: id, version: 1)])
        await reopened.close()
    }

    @Test func closedStoreRefusesWork() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let store = try openStore(dir)
        await store.close()
        await #expect(throws: StoreError.closed) { try await store.save([drink()]) }
    }
}
