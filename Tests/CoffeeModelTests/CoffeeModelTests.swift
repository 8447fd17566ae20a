import CoffeeDomain
import CoffeeLifecycle
import Foundation
import HealthStore
import Synchronization
import Testing

@testable import CoffeeModel

struct Fixture {
    let dir: URL
    let clock = ManualClock(RFC3339.parse("2026-11-29T13:00:00Z")!)

    init() {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("ct-model-\(UUID().uuidString)")
        try! FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    var cacheURL: URL { dir.appendingPathComponent("model.plist") }
    func store() throws -> HealthStore {
        try HealthStore(configuration: .init(path: dir.appendingPathComponent("s.sqlite").path, clock: clock))
    }
    func model(cache: ModelCache? = nil) -> CoffeeData {
        CoffeeData(model: CaffeineModel(halfLifeHours: 5, timeZone: TimeZone(identifier: "UTC")!), clock: clock, cache: cache)
    }
    func drink(_ offset: TimeInterval, mg: Double = 100) -> Drink {
        Drink(mgCaffeine: mg, date: clock.now() + offset)
    }
    func cleanup() { try? FileManager.default.removeItem(at: dir) }

    /// A store, a model loaded from it, a controller, and a `ModelService`
    /// following the store's commits in rounds of `interval`; the anchors of
    /// the models it publishes, to wait on; the running service.
    func following(every interval: Duration = .milliseconds(1), clock: any Clock<Duration> = ContinuousClock())
        async throws -> (HealthStore, CoffeeData, StoreFollower, AsyncStream<Int64>, Following)
    {
        let store = try store()
        let m = model()
        let controller = StoreFollower(store: store, model: m, cache: nil, clock: self.clock)
        let (published, continuation) = AsyncStream.makeStream(of: Int64.self)
        let service = ModelService(
            store: store, model: m, controller: controller,
            configuration: .init(roundInterval: interval, refreshInterval: .seconds(3600), clock: clock),
            publish: { continuation.yield($0.anchor) })
        try await service.start()
        let signal = ShutdownSignal()
        let task = Task { try await ShutdownSignal.$current.withValue(signal) { try await service.run() } }
        return (store, m, controller, published, Following(signal: signal, task: task))
    }

    /// A `ModelService` running as a group would run it.
    struct Following {
        let signal: ShutdownSignal
        let task: Task<Void, any Error>
    }

    /// Shuts a follower from `following()` down, as the group does, before the store closes.
    func stop(_ following: Following) async {
        following.signal.trigger()
        _ = try? await following.task.value
    }
}

@Suite("CoffeeData: the seed's bugs stay fixed", .timeLimit(.minutes(2)))
struct CoffeeDataTests {
    /// Seed bug: `guard !newDrinks.isEmpty && !deletedDrinks.isEmpty` ignored add-only changes.
    @Test func addOnlyChangeApplies() async {
        let f = Fixture()
        defer { f.cleanup() }
        let m = f.model()
        await m.updateModel(newDrinks: [f.drink(-60)], deletedDrinks: [], anchor: 1)
        #expect(await m.count == 1)
    }

    /// Same guard: delete-only changes were ignored too.
    @Test func deleteOnlyChangeApplies() async {
        let f = Fixture()
        defer { f.cleanup() }
        let m = f.model()
        let a = f.drink(-60)
        await m.updateModel(newDrinks: [a], deletedDrinks: [], anchor: 1)
        await m.updateModel(newDrinks: [], deletedDrinks: [a.uuid], anchor: 2)
        #expect(await m.count == 0)
        #expect(await m.anchor == 2)
    }

    /// Seed bug: the filter kept exactly the deleted drinks.
    @Test func deletingOneKeepsTheOthers() async {
        let f = Fixture()
        defer { f.cleanup() }
        let m = f.model()
        let a = f.drink(-60)
        let b = f.drink(-120)
        await m.updateModel(newDrinks: [a, b], deletedDrinks: [], anchor: 2)
        await m.updateModel(newDrinks: [], deletedDrinks: [a.uuid], anchor: 3)
        #expect(await m.drinks == [b])
    }

    /// Seed bug: new drinks were appended without de-duplication by UUID.
    @Test func sameUUIDIsHeldOnce() async {
        let f = Fixture()
        defer { f.cleanup() }
        let m = f.model()
        var a = f.drink(-60, mg: 100)
        await m.updateModel(newDrinks: [a], deletedDrinks: [], anchor: 1)
        a.mgCaffeine = 150
        a.version = 2
        await m.updateModel(newDrinks: [a], deletedDrinks: [], anchor: 2)
        #expect(await m.drinks == [a])
    }

    /// Seed bug: `removeOutdatedDrinks` dropped drinks dated in the future.
    @Test func futureDrinksAreKeptAndCountOnceDue() async {
        let f = Fixture()
        defer { f.cleanup() }
        let m = f.model()
        let future = f.drink(240)
        await m.updateModel(newDrinks: [future, f.drink(-40 * 3600)], deletedDrinks: [], anchor: 2)
        #expect(await m.drinks == [future])
        #expect(await m.snapshot()?.mgCaffeine == 0)
        f.clock.advance(by: 240)
        #expect(await m.snapshot()?.mgCaffeine == 100)
    }

    /// Seed bug: the anchor was saved before the model, so a crash in between
    /// lost changes. The cache holds both, written together.
    @Test func cacheHoldsDrinksAndTheirAnchorTogether() async throws {
        let f = Fixture()
        defer { f.cleanup() }
        let cache = ModelCache(url: f.cacheURL)
        let m = f.model(cache: cache)
        let a = f.drink(-60)
        await m.updateModel(newDrinks: [a], deletedDrinks: [], anchor: 5)
        await cache.flush()
        let saved = try PropertyListDecoder().decode(ModelCache.Snapshot.self, from: Data(contentsOf: f.cacheURL))
        #expect(saved == ModelCache.Snapshot(anchor: 5, drinks: [a]))
    }

    @Test func cacheWritesCoalesceToTheNewest() async throws {
        let f = Fixture()
        defer { f.cleanup() }
        let cache = ModelCache(url: f.cacheURL, interval: .seconds(3600))
        let m = f.model(cache: cache)
        var last: Drink?
        for i in 1...100 {
            let d = f.drink(-Double(i))
            last = d
            await m.updateModel(newDrinks: [d], deletedDrinks: [], anchor: Int64(i))
        }
        #expect(await cache.writes == 0)
        await cache.close()
        #expect(await cache.writes == 1)
        let saved = try PropertyListDecoder().decode(ModelCache.Snapshot.self, from: Data(contentsOf: f.cacheURL))
        #expect(saved.anchor == 100 && saved.drinks.count == 100)
        #expect(saved.drinks.first == last)  // oldest first
    }

    /// A costly write spaces out the next: the wait is the larger of the
    /// interval and `costFactor` times what the last write took.
    @Test func costlyWritesWaitLonger() async throws {
        let f = Fixture()
        defer { f.cleanup() }
        let cache = ModelCache(url: f.cacheURL, interval: .milliseconds(10), costFactor: 1_000_000)
        let m = f.model(cache: cache)
        await m.updateModel(newDrinks: [f.drink(-60)], deletedDrinks: [], anchor: 1)
        let deadline = ContinuousClock.now + .seconds(10)
        while await cache.writes == 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        #expect(await cache.writes == 1)
        // The first write took some microseconds: a million times that is seconds.
        await m.updateModel(newDrinks: [f.drink(-30)], deletedDrinks: [], anchor: 2)
        try await Task.sleep(for: .milliseconds(300))
        #expect(await cache.writes == 1)
        await cache.close()  // what is scheduled is still written
        #expect(await cache.writes == 2)
        let saved = try PropertyListDecoder().decode(ModelCache.Snapshot.self, from: Data(contentsOf: f.cacheURL))
        #expect(saved.anchor == 2 && saved.drinks.count == 2)
    }
    @Test func cacheRoundTripsAndSkipsUnchangedWrites() async throws {
        let f = Fixture()
        defer { f.cleanup() }
        let cache = ModelCache(url: f.cacheURL)
        let snapshot = ModelCache.Snapshot(anchor: 9, drinks: [f.drink(-60), f.drink(-7200, mg: 47)])
        #expect(await cache.save(snapshot))
        #expect(await cache.save(snapshot) == false)
        let fresh = ModelCache(url: f.cacheURL)
        #expect(await fresh.load() == snapshot)
        // The file is a binary property list.
        #expect(try Data(contentsOf: f.cacheURL).prefix(8) == Data("bplist00".utf8))
    }

    /// Seed bug: `load()` called `fatalError` on a corrupt file.
    @Test func corruptCacheIsRebuiltFromTheStore() async throws {
        let f = Fixture()
        defer { f.cleanup() }
        let store = try f.store()
        let a = f.drink(-60)
        let old = f.drink(-40 * 3600)
        _ = try await store.save([a, old])
        try Data("not a plist".utf8).write(to: f.cacheURL)
        let cache = ModelCache(url: f.cacheURL)
        let m = f.model(cache: cache)
        let controller = StoreFollower(store: store, model: m, cache: cache, clock: f.clock)
        try await controller.load()
        #expect(await m.drinks == [a])
        #expect(await m.anchor == 2)
        await cache.flush()
        #expect(await cache.load()?.anchor == 2)
        await store.close()
    }

    @Test func startUpLoadsCacheThenCatchesUp() async throws {
        let f = Fixture()
        defer { f.cleanup() }
        let store = try f.store()
        let a = f.drink(-60)
        _ = try await store.save([a])
        let cache = ModelCache(url: f.cacheURL)
        await cache.save(.init(anchor: 1, drinks: [a]))
        let b = f.drink(-30)
        _ = try await store.save([b])
        _ = try await store.delete([Deletion(uuid: a.uuid)])
        let m = f.model(cache: cache)
        try await StoreFollower(store: store, model: m, cache: cache, clock: f.clock).load()
        #expect(await m.drinks == [b])
        #expect(await m.anchor == 3)
        await store.close()
    }

    /// A commit applies only when it follows on from the model's anchor;
    /// otherwise the model says what the controller must do instead.
    @Test func followSaysWhatACommitNeeds() async {
        let f = Fixture()
        defer { f.cleanup() }
        let m = f.model()
        let a = f.drink(-60)
        func follow(_ batch: CommittedBatch) async -> CoffeeData.FollowOutcome {
            m.arrive(batch)
            return await m.applyArrived()
        }
        #expect(await follow(CommittedBatch(anchor: 2, previousAnchor: 1, log: [.added(a)])) == .gap)
        #expect(await follow(CommittedBatch(anchor: 9, previousAnchor: 0, log: [], isComplete: false)) == .tooLarge)
        #expect(await follow(CommittedBatch(anchor: 1, previousAnchor: 0, log: [.added(a)])) == .applied)
        #expect(await m.drinks == [a])
        #expect(await m.anchor == 1)
        #expect(
            await follow(CommittedBatch(anchor: 1, previousAnchor: 0, log: [.deleted(Tombstone(uuid: a.uuid, version: 1))]))
                == .alreadyHeld)
        #expect(await m.drinks == [a])
    }

    /// A commit that writes a UUID more than once leaves the model in the
    /// UUID's final state, as the resolved changes (what `changes` carries)
    /// applied with `updateModel` would.
    @Test func aUUIDWrittenTwiceInACommitEndsInItsFinalState() async {
        let f = Fixture()
        defer { f.cleanup() }
        let (a, b, c, d) = (f.drink(-60), f.drink(-50), f.drink(-40), f.drink(-30))
        var b2 = b
        b2.version = 2
        var c2 = c
        c2.version = 2
        c2.date = f.clock.now() - 40 * 86_400  // a newer version dated out of the window
        let log: [CommittedBatch.Change] = [
            .added(a), .added(b), .added(c), .added(d), .deleted(Tombstone(uuid: a.uuid, version: 1)),
            .deleted(Tombstone(uuid: b.uuid, version: 1)), .added(b2), .added(c2),
        ]
        let batch = CommittedBatch(anchor: 8, previousAnchor: 0, log: log)
        let viaLog = f.model()
        viaLog.arrive(batch)
        #expect(await viaLog.applyArrived() == .applied)
        let viaResolved = f.model()
        let resolved = batch.resolved()
        await viaResolved.updateModel(
            newDrinks: resolved.added, deletedDrinks: Set(resolved.deleted.map(\.uuid)), anchor: 8)
        #expect(await viaLog.drinks == [b2, d])
        #expect(await viaLog.drinks == viaResolved.drinks)
        #expect(await viaLog.anchor == 8)
    }

    /// Commits that arrived together apply together, in order, up to the
    /// first that does not follow on; the rest are left to the catch-up.
    @Test func arrivedCommitsApplyTogetherUpToAGap() async {
        let f = Fixture()
        defer { f.cleanup() }
        let m = f.model()
        let (a, b, c) = (f.drink(-60), f.drink(-50), f.drink(-40))
        m.arrive(CommittedBatch(anchor: 1, previousAnchor: 0, log: [.added(a)]))
        m.arrive(CommittedBatch(anchor: 2, previousAnchor: 1, log: [.added(b)]))
        #expect(await m.applyArrived() == .applied)
        #expect(await m.drinks == [a, b])
        #expect(await m.anchor == 2)
        #expect(await m.applyArrived() == .alreadyHeld)  // nothing waits
        m.arrive(CommittedBatch(anchor: 4, previousAnchor: 3, log: [.added(c)]))
        m.arrive(CommittedBatch(anchor: 5, previousAnchor: 4, log: [.deleted(Tombstone(uuid: a.uuid, version: 1))]))
        #expect(await m.applyArrived() == .gap)
        #expect(await m.drinks == [a, b])
        #expect(await m.anchor == 2)
        #expect(await m.applyArrived() == .alreadyHeld)  // dropped: the catch-up reads them from the store
    }

    /// The follower applies the first commit after a quiet spell at once,
    /// then pauses for its interval; a reply that needs the model catches up
    /// first, gaps included, so it sees every commit made before it.
    @Test func theFollowerPausesAndCatchUpReadsTheRest() async throws {
        let f = Fixture()
        defer { f.cleanup() }
        let (store, m, controller, changes, following) = try await f.following(every: .seconds(3600))
        let a = f.drink(-60)
        _ = try await controller.save(drinks: [a])
        for await anchor in changes where anchor == 1 { break }
        let b = f.drink(-30)
        _ = try await controller.save(drinks: [b])
        try await Task.sleep(for: .milliseconds(50))
        #expect(await m.anchor == 1)  // pausing: b waits
        await controller.catchUp()
        #expect(await m.drinks == [a, b])
        #expect(await m.anchor == 2)
        // A commit the model never saw (a gap) is read from the store.
        await m.reset(drinks: [a], anchor: 1, completeSince: f.clock.now() - CaffeineModel.retention)
        let c = f.drink(-10)
        _ = try await controller.save(drinks: [c])
        await controller.catchUp()
        #expect(await m.drinks == [a, b, c])
        #expect(await m.anchor == 3)
        await f.stop(following)
        await store.close()
    }

    @Test func controllerFollowsCommits() async throws {
        let f = Fixture()
        defer { f.cleanup() }
        let (store, m, controller, changes, following) = try await f.following()
        let a = f.drink(-60)
        _ = try await controller.save(drinks: [a])
        for await anchor in changes where anchor == 1 { break }
        #expect(await m.drinks == [a])
        await f.stop(following)
        await store.close()
    }

    /// A commit too large to carry its changes rebuilds the window from the
    /// store: the model ends with exactly the drinks that count, at the
    /// store's anchor, without reading back every change.
    @Test func controllerRebuildsAfterACommitTooLargeToCarry() async throws {
        let f = Fixture()
        defer { f.cleanup() }
        let (store, m, controller, changes, following) = try await f.following()
        let old = f.drink(-120)
        _ = try await controller.save(drinks: [old])
        for await anchor in changes where anchor == 1 { break }
        let recent = f.drink(-30)
        let history = (0..<HealthStore.announceLimit).map { i in f.drink(-Double(40 * 86_400 + i)) }
        let batches = Mutex<[WriteBatch]>([
            WriteBatch(drinks: history), WriteBatch(drinks: [recent]), WriteBatch(deletions: [Deletion(uuid: old.uuid)]),
        ])
        let result = try await store.applyStream { batches.withLock { $0.isEmpty ? nil : $0.removeFirst() } }
        for await anchor in changes where anchor == result.anchor { break }
        #expect(await m.drinks == [recent])
        #expect(await m.anchor == Int64(HealthStore.announceLimit) + 3)
        await f.stop(following)
        await store.close()
    }
}

@Suite("CoffeeData keeps its index with its drinks", .timeLimit(.minutes(2)))
struct CoffeeDataIndexTests {
    /// Every way the held drinks change (a commit's log, a batch of changes,
    /// a reset, a prune) reaches the index: the snapshot equals the model
    /// computed whole from the drinks held.
    @Test func theSnapshotEqualsTheModelOfTheDrinksHeld() async {
        let f = Fixture()
        defer { f.cleanup() }
        let m = f.model()
        var drinks = (0..<50).map { f.drink(-Double($0) * 600, mg: Double(10 + $0)) }
        await m.reset(drinks: drinks, anchor: 1, completeSince: f.clock.now() - CaffeineModel.retention)
        let replaced = Drink(uuid: drinks[3].uuid, mgCaffeine: 300, date: drinks[3].date + 60, version: 2, source: nil)
        await m.updateModel(newDrinks: [replaced, f.drink(-30)], deletedDrinks: [drinks[5].uuid, drinks[7].uuid], anchor: 2)
        drinks[3] = replaced
        m.arrive(CommittedBatch(anchor: 3, previousAnchor: 2, log: [.deleted(Tombstone(uuid: drinks[9].uuid, version: 1))]))
        _ = await m.applyArrived()
        f.clock.advance(by: 20 * 3600)  // many leave the window
        await m.updateModel(newDrinks: [f.drink(-10)], deletedDrinks: [], anchor: 4)
        let held = Dictionary(uniqueKeysWithValues: await m.drinks.map { ($0.uuid, $0) })
        let snapshot = await m.snapshot()!
        let exact = m.model.snapshot(of: Array(held.values), at: f.clock.now(), anchor: 4)
        #expect(abs(snapshot.mgCaffeine - exact.mgCaffeine) < 1e-9 * max(1, exact.mgCaffeine))
        #expect(snapshot.drinksToday == exact.drinksToday && abs(snapshot.cupsToday - exact.cupsToday) < 1e-12)
        #expect(held[drinks[5].uuid] == nil && held[drinks[3].uuid]?.mgCaffeine == 300)
    }
}
