import CoffeeDomain
import Foundation
import HealthStore
import Testing

@testable import CoffeeModel

/// The picture's 36 hours come from the model's drinks (the store has no
/// index by date since schema version 3, so it would scan), and only when
/// the model holds every drink of them.
@Suite("The model holds the picture's window", .timeLimit(.minutes(2)))
struct PictureWindowTests {
    /// The picture's window, 36 hours up to now.
    func window(_ f: Fixture) -> ClosedRange<Date> { (f.clock.now() - 36 * 3600)...f.clock.now() }

    /// Loaded from the store, then following its commits (a save, a newer
    /// version, a deletion), the model gives the store's drinks of the
    /// window, and none before it has loaded.
    @Test func afterARebuildTheModelGivesTheStoresDrinksOfTheWindow() async throws {
        let f = Fixture()
        defer { f.cleanup() }
        let store = try f.store()
        let model = f.service(store)
        #expect(await model.current.drinks(datedIn: window(f)) == nil)
        var early = f.drink(-35 * 3600)
        let gone = f.drink(-20 * 3600)
        _ = try await store.save([f.drink(-37 * 3600), early, gone, f.drink(-60)])
        try await model.load()
        early.mgCaffeine = 40
        early.version = 2
        _ = try await store.save([early, f.drink(-30)])
        _ = try await store.delete([Deletion(uuid: gone.uuid)])
        try await model.loadNewData()
        let held = try #require(await model.current.drinks(datedIn: window(f)))
        #expect(held == (try await store.drinks(datedIn: window(f))))
        #expect(held.count == 3 && held.first == early)
        // A window reaching before what the model holds is the store's to answer.
        #expect(await model.current.drinks(datedIn: (f.clock.now() - 40 * 3600)...f.clock.now()) == nil)
        await store.close()
    }

    /// A cache that names this store and epoch and says since when it is
    /// complete covers the window at once; one that names neither (an
    /// older build's) or another store or epoch is rebuilt from the store,
    /// keeping nothing of its own.
    @Test func aCacheCoversTheWindowOnlyWhenItIsOfThisStoreAndEpoch() async throws {
        let f = Fixture()
        defer { f.cleanup() }
        let store = try f.store()
        let a = f.drink(-3600)
        _ = try await store.save([a])
        let stranger = f.drink(-60)  // in no store this model should follow
        let cache = f.cache()
        for identity in [nil, StoreIdentity(store: UUID(), epoch: 1), StoreIdentity(store: store.identity.store, epoch: 2)] {
            let old = ModelCache.Snapshot(anchor: 1, drinks: [stranger], completeSince: f.clock.now(), identity: identity)
            #expect(await cache.save(old))
            let model = f.service(store, cache: cache)
            try await model.load()
            #expect(await model.anchor == 1)
            #expect(
                await model.current.drinks(datedIn: window(f)) == [a],
                "a cache of \(identity.map(\.description) ?? "no store") was used")
        }
        // What this model writes names its store and epoch, and says since when it is complete.
        let model = f.service(store, cache: cache)
        try await model.load()
        cache.push(await model.current.cacheContents)
        await cache.flush()
        let saved = try #require(await f.cache().load())
        #expect(saved.completeSince == f.clock.now() - CaffeineModel.retention)
        #expect(saved.identity == store.identity)
        let later = f.service(store, cache: f.cache())
        try await later.load()
        #expect(await later.current.drinks(datedIn: window(f)) == [a])
        await store.close()
    }
}
