import CoffeeDomain
import CoffeeLifecycle
import CoffeeLogging
import Foundation
import HealthStore

/// The model as one service: it follows the store's commits, publishes the
/// model after them, and publishes it again as caffeine decays. One owner
/// and one throttle: at most one round per `roundInterval`, each round
/// applying every commit that arrived (`StoreFollower.catchUp`) and
/// publishing once.
///
/// Commits reach it from the store's thread (`CoffeeData.arrive`, which only
/// queues and rings); the first after a quiet spell starts a round at once,
/// the rest wait for the next. The seed's `ExtensionDelegate` background
/// refresh is the refresh timer here.
public final class ModelService: Service {
    /// The model's pace, with the defaults of docs/protocol.md §3.
    public struct Configuration: Sendable {
        /// At most one round, and one `model` message, per interval
        /// (`publish.modelIntervalMs`, default 100 ms).
        public var roundInterval: Duration
        /// A `model` message at least this often, since caffeine decays
        /// (`publish.refreshIntervalS`, default 60 s).
        public var refreshInterval: Duration
        /// What the timers sleep on: injected so that tests drive them.
        public var clock: any Clock<Duration>

        public init(
            roundInterval: Duration = .milliseconds(100), refreshInterval: Duration = .seconds(60),
            clock: any Clock<Duration> = ContinuousClock()
        ) {
            self.roundInterval = roundInterval
            self.refreshInterval = refreshInterval
            self.clock = clock
        }
    }

    public let name = "model"
    private let store: HealthStore
    private let model: CoffeeData
    private let controller: StoreFollower
    private let configuration: Configuration
    private let publish: @Sendable (ModelSnapshot) -> Void

    /// - Parameter publish: called with the model after each round; it must
    ///   only queue (the broadcaster's `publish`).
    public init(
        store: HealthStore, model: CoffeeData, controller: StoreFollower, configuration: Configuration = .init(),
        publish: @escaping @Sendable (ModelSnapshot) -> Void
    ) {
        self.store = store
        self.model = model
        self.controller = controller
        self.configuration = configuration
        self.publish = publish
    }

    /// Loads the model (cache, then the store's changes since its anchor),
    /// follows commits from now on, and publishes it once. Runs before any
    /// input starts, so no commit goes unfollowed.
    public func start() async throws {
        try await controller.load()
        await store.observeCommits { [model] batch in model.arrive(batch) }
        await publishNow()
    }

    public func run() async throws {
        let model = self.model
        onGracefulShutdown { model.endArrivals() }
        let configuration = self.configuration
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await repeatUntilShutdown(every: configuration.refreshInterval, on: configuration.clock) { model.ring() }
            }
            for await _ in model.arrivals {
                await controller.catchUp()
                await publishNow()
                // Coalesce: what arrives meanwhile waits for the next round.
                await sleepUnlessShutdown(for: configuration.roundInterval, on: configuration.clock)
            }
        }
        // The last round: every commit made before the shutdown reached the
        // model (the inputs stopped first), and the store and the publisher
        // are still up (they were started before the model).
        await controller.catchUp()
        await publishNow()
    }

    private func publishNow() async {
        if let snapshot = await model.snapshot() { publish(snapshot) }
    }
}
