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
