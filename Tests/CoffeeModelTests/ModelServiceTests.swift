import CoffeeDomain
import CoffeeLifecycle
import CoffeeLogging
import CoffeeTestKit
import Foundation
import HealthStore
import Synchronization
import Testing

@testable import CoffeeModel

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
