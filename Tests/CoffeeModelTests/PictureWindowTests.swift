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

    /// A cache that says since when it is complete covers the window at
    /// once; one written before it said so held 26 hours, so the model
    /// covers the 36 only once 10 hours have passed.
    @Test func aCacheCoversTheWindowOnlyAsFarAsItSays() async throws {
        let f = Fixture()
        defer { f.cleanup() }
        let store = try f.store()
        let a = f.drink(-3600)
        _ = try await store.save([a])
        let cache = f.cache()
        #expect(await cache.save(.init(anchor: 1, drinks: [a])))  // no completeSince: an older build's file
        let model = f.service(store, cache: cache)
        try await model.load()
        #expect(await model.anchor == 1)
        #expect(await model.current.drinks(datedIn: window(f)) == nil)
        f.clock.advance(by: 10 * 3600)
        #expect(await model.current.drinks(datedIn: window(f)) == [a])
        // What this model writes says since when it is complete.
        cache.push(await model.current.cacheContents)
        await cache.flush()
        let saved = try #require(await f.cache().load())
        #expect(saved.completeSince == f.clock.now() - 36 * 3600)
        let later = f.service(store, cache: f.cache())
        try await later.load()
        #expect(await later.current.drinks(datedIn: window(f)) == [a])
        await store.close()
    }
}
