import CoffeeDomain
import CoffeeLogging
import CoffeeTestKit
import Foundation
import SQLite
import Testing

@testable import HealthStore

/// The store's identity (docs/protocol.md §13): made once, kept by a backup
/// and its restore, raised by a restore and by a promotion, taken by a standby.
@Suite("The store's identity", .timeLimit(.minutes(2)))
struct StoreIdentityTests {
    func open(_ dir: TemporaryDirectory, standby: Bool = false, path: String? = nil) throws -> HealthStore {
        var configuration = HealthStore.Configuration(path: path ?? dir.storePath, clock: ManualClock(t0))
        configuration.standby = standby
        return try HealthStore(configuration: configuration, logger: Logger(label: "test"))
    }

    @Test func aNewStoreIsEpochOneAndKeepsItsIdentity() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let store = try open(dir)
        let made = store.identity
        #expect(made.epoch == 1 && !store.identityWasUpgraded)
        let recorder = await CommitRecorder(store)
        _ = try await store.save([drink()])
        #expect(recorder.batches.map(\.identity) == [made])  // each announcement says whose anchor it is
        await store.close()
        let again = try open(dir)
        #expect(again.identity == made)
        await again.close()
        let other = try open(dir, path: dir.url.appendingPathComponent("other.sqlite").path)
        #expect(other.identity.store != made.store)
        await other.close()
    }

    @Test func aStandbysStoreStartedAsAPrimaryIsPromotedOnce() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let standby = try open(dir, standby: true)
        let made = standby.identity
        await standby.close()
        let promoted = try open(dir)
        #expect(promoted.identity == StoreIdentity(store: made.store, epoch: made.epoch + 1))
        await promoted.close()
        let restarted = try open(dir)
        #expect(restarted.identity == promoted.identity)  // once: a later restart keeps it
        await restarted.close()
    }

    @Test func aRestoreKeepsTheStoreAndRaisesTheEpochAboveBothSoNoPairRepeats() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let store = try open(dir)
        let made = store.identity
        _ = try await store.save([drink()])
        let backup = dir.url.appendingPathComponent("b.sqlite").path
        _ = try await store.backup(to: backup)
        await store.close()
        let first = try HealthStore.restore(from: backup, to: dir.storePath)
        #expect(first.identity == StoreIdentity(store: made.store, epoch: 2))
        let second = try HealthStore.restore(from: backup, to: dir.storePath)
        #expect(first.kept != nil && second.kept != nil && first.kept != second.kept)  // in one second, both kept
        #expect(second.identity == StoreIdentity(store: made.store, epoch: 3))  // the backup's is 1, the replaced store's 2
        let reopened = try open(dir)
        #expect(reopened.identity == second.identity)
        await reopened.close()
    }

    @Test func aStandbyTakesItsPrimarysIdentityInTheCommitThatTakesItsState() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let store = try open(dir, standby: true)
        _ = try await store.replicate(.init(changes: AnchoredChanges([(anchor: 1, change: .added(drink()))]), through: 1))
        let recorder = await CommitRecorder(store)
        let primary = StoreIdentity(store: UUID(), epoch: 7)
        let state = AnchoredChanges([(anchor: 4, change: .added(drink()))])
        _ = try await store.replicate(.init(changes: state, through: 4, replacesAll: true, purgedAnchor: 0, identity: primary))
        #expect(store.identity == primary)
        #expect(recorder.batches.last?.identity == primary && recorder.batches.last?.replacesAll == true)
        await store.close()
        let again = try open(dir, standby: true)
        #expect(again.identity == primary)
        await again.close()
        let promoted = try open(dir)
        #expect(promoted.identity == StoreIdentity(store: primary.store, epoch: 8))
        await promoted.close()
    }

    @Test func aStoreFromBeforeIdentitiesGetsOneFlaggedAsUpgraded() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let store = try open(dir)
        _ = try await store.save([drink()])
        await store.close()
        let db = try Database(path: dir.storePath)
        try db.execute("DELETE FROM meta WHERE key IN ('store_hi', 'store_lo', 'epoch', 'standby', 'identity_upgraded')")
        db.close()
        let upgraded = try open(dir)
        #expect(upgraded.identityWasUpgraded && upgraded.identity.epoch == 1)
        await upgraded.close()
    }
}
