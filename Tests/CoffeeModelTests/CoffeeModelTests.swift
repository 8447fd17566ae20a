import CoffeeDomain
import CoffeeLifecycle
import CoffeeLogging
import CoffeeTestKit
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
    static let caffeine = CaffeineModel(halfLifeHours: 5, timeZone: TimeZone(identifier: "UTC")!)
    static let logger = Logger(label: "test")

    func store() throws -> HealthStore {
        var configuration = HealthStore.Configuration(path: dir.appendingPathComponent("s.sqlite").path, clock: clock)
        configuration.settingsDefaults = PersonSettings(model: Self.caffeine)
        return try HealthStore(configuration: configuration, logger: Self.logger)
    }
    /// The model's state alone: pure, on the fixture's clock.
    func state() -> ModelState { ModelState(caffeine: Self.caffeine, clock: clock) }
    func cache(interval: Duration = .seconds(15), costFactor: Double = 100) -> ModelCache {
        ModelCache(url: cacheURL, interval: interval, costFactor: costFactor, logger: Self.logger)
    }
    /// The model's owner over `store`, not started; `publish` gets each model's anchor.
    func service(
        _ store: HealthStore, cache: ModelCache? = nil, every interval: Duration = .milliseconds(1),
        clock: any Clock<Duration> = ContinuousClock(), publish: @escaping @Sendable (Int64) -> Void = { _ in }
    ) -> ModelService {
        let service = ModelService(
            store: store, cache: cache, clock: self.clock,
            configuration: .init(roundInterval: interval, refreshInterval: .seconds(3600), clock: clock),
            logger: Self.logger)
        service.observeModels { publish($0.anchor) }
        return service
    }
    func drink(_ offset: TimeInterval, mg: Double = 100) -> Drink {
        Drink(mgCaffeine: mg, date: clock.now() + offset)
    }
    func cleanup() { try? FileManager.default.removeItem(at: dir) }

    /// A store, and a `ModelService` loaded from it and following its
    /// commits in rounds of `interval`; the anchors of the models it
    /// publishes, to wait on; the running service.
    func following(every interval: Duration = .milliseconds(1), cache: ModelCache? = nil)
        async throws -> (HealthStore, ModelService, AsyncStream<Int64>, Following)
    {
        let store = try store()
        let (published, continuation) = AsyncStream.makeStream(of: Int64.self)
        let service = service(store, cache: cache, every: interval) { continuation.yield($0) }
        try await service.start()
        let signal = ShutdownSignal()
        let task = Task { try await ShutdownSignal.$current.withValue(signal) { try await service.run() } }
        return (store, service, published, Following(signal: signal, task: task))
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

@Suite("ModelState: the seed's bugs stay fixed", .timeLimit(.minutes(2)))
struct ModelStateTests {
    /// Seed bug: `guard !newDrinks.isEmpty && !deletedDrinks.isEmpty` ignored add-only changes.
    @Test func addOnlyChangeApplies() {
        let f = Fixture()
        defer { f.cleanup() }
        var m = f.state()
        let changed = m.update(newDrinks: [f.drink(-60)], deletedDrinks: [], anchor: 1)
        #expect(changed)
        #expect(m.count == 1)
    }

    /// Same guard: delete-only changes were ignored too.
    @Test func deleteOnlyChangeApplies() {
        let f = Fixture()
        defer { f.cleanup() }
        var m = f.state()
        let a = f.drink(-60)
        m.update(newDrinks: [a], deletedDrinks: [], anchor: 1)
        m.update(newDrinks: [], deletedDrinks: [a.uuid], anchor: 2)
        #expect(m.count == 0)
        #expect(m.anchor == 2)
    }

    /// Seed bug: the filter kept exactly the deleted drinks.
    @Test func deletingOneKeepsTheOthers() {
        let f = Fixture()
        defer { f.cleanup() }
        var m = f.state()
        let a = f.drink(-60)
        let b = f.drink(-120)
        m.update(newDrinks: [a, b], deletedDrinks: [], anchor: 2)
        m.update(newDrinks: [], deletedDrinks: [a.uuid], anchor: 3)
        #expect(m.drinks == [b])
    }

    /// Seed bug: new drinks were appended without de-duplication by UUID.
    @Test func sameUUIDIsHeldOnce() {
        let f = Fixture()
        defer { f.cleanup() }
        var m = f.state()
        var a = f.drink(-60, mg: 100)
        m.update(newDrinks: [a], deletedDrinks: [], anchor: 1)
        a.mgCaffeine = 150
        a.version = 2
        m.update(newDrinks: [a], deletedDrinks: [], anchor: 2)
        #expect(m.drinks == [a])
    }

    /// Seed bug: `removeOutdatedDrinks` dropped drinks dated in the future.
    @Test func futureDrinksAreKeptAndCountOnceDue() {
        let f = Fixture()
        defer { f.cleanup() }
        var m = f.state()
        let future = f.drink(240)
        m.update(newDrinks: [future, f.drink(-40 * 3600)], deletedDrinks: [], anchor: 2)
        #expect(m.drinks == [future])
        let before = m.snapshot()?.mgCaffeine
        #expect(before == 0)
        f.clock.advance(by: 240)
        let due = m.snapshot()?.mgCaffeine
        #expect(due == 100)
    }

    /// A commit applies only when it follows on from the model's anchor;
    /// otherwise the model says what its owner must do instead.
    @Test func followSaysWhatACommitNeeds() {
        let f = Fixture()
        defer { f.cleanup() }
        var m = f.state()
        let a = f.drink(-60)
        let gap = m.apply(CommittedBatch(anchor: 2, previousAnchor: 1, log: [.added(a)]))
        #expect(gap == .gap)
        let tooLarge = m.apply(CommittedBatch(anchor: 9, previousAnchor: 0, log: [], isComplete: false))
        #expect(tooLarge == .tooLarge)
        let applied = m.apply(CommittedBatch(anchor: 1, previousAnchor: 0, log: [.added(a)]))
        #expect(applied == .applied)
        #expect(m.drinks == [a])
        #expect(m.anchor == 1)
        let held = m.apply(
            CommittedBatch(anchor: 1, previousAnchor: 0, log: [.deleted(Tombstone(uuid: a.uuid, version: 1))]))
        #expect(held == .alreadyHeld)
        #expect(m.drinks == [a])
    }

    /// A commit that writes a UUID more than once leaves the model in the
    /// UUID's final state, as the resolved changes (what `changes` carries)
    /// applied with `update` would.
    @Test func aUUIDWrittenTwiceInACommitEndsInItsFinalState() {
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
        var viaLog = f.state()
        let outcome = viaLog.apply(batch)
        #expect(outcome == .applied)
        var viaResolved = f.state()
        let resolved = batch.resolved()
        viaResolved.update(newDrinks: resolved.added, deletedDrinks: Set(resolved.deleted.map(\.uuid)), anchor: 8)
        #expect(viaLog.drinks == [b2, d])
        #expect(viaLog.drinks == viaResolved.drinks)
        #expect(viaLog.anchor == 8)
    }

    /// A commit of new records only goes in without lookups by UUID; a
    /// later deletion or new version of those drinks still finds them, and
    /// the prune lets old ones go.
    @Test func newRecordsGoInWithoutLookupsAndCanStillBeFound() {
        let f = Fixture()
        defer { f.cleanup() }
        var m = f.state()
        let (a, b, c) = (f.drink(-60), f.drink(-50), f.drink(-40))
        let old = Drink(mgCaffeine: 80, date: f.clock.now() - 40 * 86_400)  // out of the window: not held
        var batch = CommittedBatch(anchor: 4, previousAnchor: 0, log: [.added(a), .added(b), .added(c), .added(old)])
        batch.writesOnlyNewRecords = true
        #expect(m.apply(batch) == .applied)
        #expect(m.drinks == [a, b, c] && m.count == 3)
        var b2 = b
        b2.version = 2
        b2.mgCaffeine = 10
        let later = CommittedBatch(
            anchor: 6, previousAnchor: 4, log: [.deleted(Tombstone(uuid: a.uuid, version: 1)), .added(b2)])
        #expect(m.apply(later) == .applied)
        #expect(m.drinks == [b2, c] && m.count == 2)
        var direct = f.state()
        direct.update(newDrinks: [b2, c], deletedDrinks: [], anchor: 6)
        let (got, want) = (m.snapshot()!, direct.snapshot()!)
        #expect(abs(got.mgCaffeine - want.mgCaffeine) < 1e-9 && got.drinksToday == want.drinksToday)
    }

    /// Commits that arrived together apply together, in order, up to the
    /// first that does not follow on; the rest are left to the catch-up.
    @Test func arrivedCommitsApplyTogetherUpToAGap() {
        let f = Fixture()
        defer { f.cleanup() }
        var m = f.state()
        let (a, b, c) = (f.drink(-60), f.drink(-50), f.drink(-40))
        let first = m.apply([
            CommittedBatch(anchor: 1, previousAnchor: 0, log: [.added(a)]),
            CommittedBatch(anchor: 2, previousAnchor: 1, log: [.added(b)]),
        ])
        #expect(first.outcome == .applied && first.changed)
        #expect(m.drinks == [a, b])
        #expect(m.anchor == 2)
        let none = m.apply([])
        #expect(none.outcome == .alreadyHeld && !none.changed)
        let gap = m.apply([
            CommittedBatch(anchor: 4, previousAnchor: 3, log: [.added(c)]),
            CommittedBatch(anchor: 5, previousAnchor: 4, log: [.deleted(Tombstone(uuid: a.uuid, version: 1))]),
        ])
        #expect(gap.outcome == .gap && !gap.changed)
        #expect(m.drinks == [a, b])
        #expect(m.anchor == 2)
    }

    /// Every way the held drinks change (a commit's log, a batch of changes,
    /// a reset, a prune) reaches the index: the snapshot equals the model
    /// computed whole from the drinks held.
    @Test func theSnapshotEqualsTheModelOfTheDrinksHeld() {
        let f = Fixture()
        defer { f.cleanup() }
        var m = f.state()
        var drinks = (0..<50).map { f.drink(-Double($0) * 600, mg: Double(10 + $0)) }
        m.reset(drinks: drinks, anchor: 1, completeSince: f.clock.now() - CaffeineModel.retention)
        let replaced = Drink(uuid: drinks[3].uuid, mgCaffeine: 300, date: drinks[3].date + 60, version: 2, source: nil)
        m.update(newDrinks: [replaced, f.drink(-30)], deletedDrinks: [drinks[5].uuid, drinks[7].uuid], anchor: 2)
        drinks[3] = replaced
        _ = m.apply(CommittedBatch(anchor: 3, previousAnchor: 2, log: [.deleted(Tombstone(uuid: drinks[9].uuid, version: 1))]))
        f.clock.advance(by: 20 * 3600)  // many leave the window
        m.update(newDrinks: [f.drink(-10)], deletedDrinks: [], anchor: 4)
        let held = Dictionary(uniqueKeysWithValues: m.drinks.map { ($0.uuid, $0) })
        let snapshot = m.snapshot()!
        let exact = m.caffeine.snapshot(of: Array(held.values), at: f.clock.now(), anchor: 4)
        #expect(abs(snapshot.mgCaffeine - exact.mgCaffeine) < 1e-9 * max(1, exact.mgCaffeine))
        #expect(snapshot.drinksToday == exact.drinksToday && abs(snapshot.cupsToday - exact.cupsToday) < 1e-12)
        #expect(held[drinks[5].uuid] == nil && held[drinks[3].uuid]?.mgCaffeine == 300)
    }
}

@Suite("The model's cache", .timeLimit(.minutes(2)))
struct ModelCacheTests {
    /// Seed bug: the anchor was saved before the model, so a crash in between
    /// lost changes. The cache holds both, written together.
    @Test func cacheHoldsDrinksAndTheirAnchorTogether() async throws {
        let f = Fixture()
        defer { f.cleanup() }
        let cache = f.cache()
        var m = f.state()
        let a = f.drink(-60)
        m.update(newDrinks: [a], deletedDrinks: [], anchor: 5)
        cache.push(m.cacheContents)
        await cache.flush()
        let saved = try PropertyListDecoder().decode(ModelCache.Snapshot.self, from: Data(contentsOf: f.cacheURL))
        #expect(saved == ModelCache.Snapshot(anchor: 5, drinks: [a]))
    }

    /// However many commits a running model follows, the cache is written
    /// once per interval, of the newest state; the model's last round
    /// pushes what is left, and the cache's close writes it.
    @Test func cacheWritesCoalesceToTheNewest() async throws {
        let f = Fixture()
        defer { f.cleanup() }
        let cache = f.cache(interval: .seconds(3600))
        let (store, model, published, following) = try await f.following(cache: cache)
        var last: Drink?
        for i in 1...100 {
            let d = f.drink(-Double(i))
            last = d
            _ = try await store.save([d])
        }
        for await anchor in published where anchor == 100 { break }
        #expect(await cache.writes == 0)
        await f.stop(following)
        await cache.close()
        #expect(await cache.writes == 1)
        let saved = try PropertyListDecoder().decode(ModelCache.Snapshot.self, from: Data(contentsOf: f.cacheURL))
        #expect(saved.anchor == 100 && saved.drinks.count == 100)
        #expect(saved.drinks.first == last)  // oldest first
        #expect(await model.anchor == 100)
        await store.close()
    }

    /// A costly write spaces out the next: the cache is due again only
    /// after the larger of the interval and `costFactor` times what the last
    /// write took; what is pushed meanwhile is still written at the close.
    @Test func costlyWritesWaitLonger() async throws {
        let f = Fixture()
        defer { f.cleanup() }
        let cache = f.cache(interval: .milliseconds(10), costFactor: 1_000_000)
        var m = f.state()
        m.update(newDrinks: [f.drink(-60)], deletedDrinks: [], anchor: 1)
        let deadline = ContinuousClock.now + .seconds(10)
        while !cache.isDue, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        cache.push(m.cacheContents)
        while await cache.writes == 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        #expect(await cache.writes == 1)
        // The first write took some microseconds: a million times that is seconds.
        try await Task.sleep(for: .milliseconds(300))
        #expect(!cache.isDue)
        m.update(newDrinks: [f.drink(-30)], deletedDrinks: [], anchor: 2)
        cache.push(m.cacheContents)  // as the model's last round does, due or not
        await cache.close()
        #expect(await cache.writes == 2)
        let saved = try PropertyListDecoder().decode(ModelCache.Snapshot.self, from: Data(contentsOf: f.cacheURL))
        #expect(saved.anchor == 2 && saved.drinks.count == 2)
    }

    @Test func cacheRoundTripsAndSkipsUnchangedWrites() async throws {
        let f = Fixture()
        defer { f.cleanup() }
        let cache = f.cache()
        let snapshot = ModelCache.Snapshot(anchor: 9, drinks: [f.drink(-60), f.drink(-7200, mg: 47)])
        #expect(await cache.save(snapshot))
        #expect(await cache.save(snapshot) == false)
        let fresh = f.cache()
        #expect(await fresh.load() == snapshot)
        // The file is a binary property list.
        #expect(try Data(contentsOf: f.cacheURL).prefix(8) == Data("bplist00".utf8))
    }
}

@Suite("ModelService: the model's one owner", .timeLimit(.minutes(2)))
struct ModelServiceTests {
    /// Seed bug: `load()` called `fatalError` on a corrupt file.
    @Test func corruptCacheIsRebuiltFromTheStore() async throws {
        let f = Fixture()
        defer { f.cleanup() }
        let store = try f.store()
        let a = f.drink(-60)
        let old = f.drink(-40 * 3600)
        _ = try await store.save([a, old])
        try Data("not a plist".utf8).write(to: f.cacheURL)
        let cache = f.cache()
        let model = f.service(store, cache: cache)
        try await model.load()
        #expect(await model.current.drinks == [a])
        #expect(await model.anchor == 2)
        // What was rebuilt reaches the cache: pushed by the model, never read back by the cache.
        cache.push(await model.current.cacheContents)
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
        let cache = f.cache()
        await cache.save(.init(anchor: 1, drinks: [a]))
        let b = f.drink(-30)
        _ = try await store.save([b])
        _ = try await store.delete([Deletion(uuid: a.uuid)])
        let model = f.service(store, cache: cache)
        try await model.load()
        #expect(await model.current.drinks == [b])
        #expect(await model.anchor == 3)
        await store.close()
    }

    /// The model applies the first commit after a quiet spell at once,
    /// then pauses for its interval; a reply that needs the model catches up
    /// first, gaps included, so it sees every commit made before it.
    @Test func theModelPausesAndAReplyCatchesUpWithTheRest() async throws {
        let f = Fixture()
        defer { f.cleanup() }
        let (store, model, changes, following) = try await f.following(every: .seconds(3600))
        let a = f.drink(-60)
        _ = try await store.save([a])
        for await anchor in changes where anchor == 1 { break }
        let b = f.drink(-30)
        _ = try await store.save([b])
        try await Task.sleep(for: .milliseconds(50))
        #expect(await model.anchor == 1)  // pausing: b waits
        #expect(await model.snapshot()?.anchor == 2)  // a reply catches up
        #expect(await model.current.drinks == [a, b])
        // A commit the model never saw (a gap) is read from the store.
        let c = f.drink(-10)
        _ = try await store.save([c])
        _ = await model.takeArrived()  // c's announcement lost
        let d = f.drink(-5)
        _ = try await store.save([d])
        #expect(await model.snapshot()?.anchor == 4)
        #expect(await model.current.drinks == [a, b, c, d])
        await f.stop(following)
        await store.close()
    }

    /// Every observer is handed each model; one that comes late is handed
    /// the last one first, so nobody starts with nothing.
    @Test func aLateObserverIsHandedTheLastModelFirst() async throws {
        let f = Fixture()
        defer { f.cleanup() }
        let (store, model, changes, following) = try await f.following()
        _ = try await store.save([f.drink(-60)])
        for await anchor in changes where anchor == 1 { break }
        let (late, handed) = AsyncStream.makeStream(of: Int64.self)
        model.observeModels { snapshot in handed.yield(snapshot.anchor) }
        var lateAnchors = late.makeAsyncIterator()
        #expect(await lateAnchors.next() == 1, "handed the last model at once")
        _ = try await store.save([f.drink(-30)])
        for await anchor in changes where anchor == 2 { break }
        while let anchor = await lateAnchors.next(), anchor != 2 {}  // the suite's time limit bounds the wait
        await f.stop(following)
        await store.close()
    }

    @Test func theModelFollowsCommits() async throws {
        let f = Fixture()
        defer { f.cleanup() }
        let (store, model, changes, following) = try await f.following()
        let a = f.drink(-60)
        _ = try await store.save([a])
        for await anchor in changes where anchor == 1 { break }
        #expect(await model.current.drinks == [a])
        await f.stop(following)
        await store.close()
    }

    /// A commit too large to carry its changes rebuilds the window from the
    /// store: the model ends with exactly the drinks that count, at the
    /// store's anchor, without reading back every change.
    @Test func theModelRebuildsAfterACommitTooLargeToCarry() async throws {
        let f = Fixture()
        defer { f.cleanup() }
        let (store, model, changes, following) = try await f.following()
        let old = f.drink(-120)
        _ = try await store.save([old])
        for await anchor in changes where anchor == 1 { break }
        let recent = f.drink(-30)
        let history = (0..<HealthStore.announceLimit).map { i in f.drink(-Double(40 * 86_400 + i)) }
        let batches = Mutex<[WriteBatch]>([
            WriteBatch(drinks: history), WriteBatch(drinks: [recent]), WriteBatch(deletions: [Deletion(uuid: old.uuid)]),
        ])
        let result = try await store.applyStream { batches.withLock { $0.isEmpty ? nil : $0.removeFirst() } }
        for await anchor in changes where anchor == result.anchor { break }
        #expect(await model.current.drinks == [recent])
        #expect(await model.anchor == Int64(HealthStore.announceLimit) + 3)
        await f.stop(following)
        await store.close()
    }
}
