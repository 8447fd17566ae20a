import CoffeeDomain
import CoffeeLifecycle
import CoffeeLogging
import CoffeeTestKit
import Foundation
import HealthStore
import Synchronization
import Testing

@testable import CoffeeModel

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
