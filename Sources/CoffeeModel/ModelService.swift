import CoffeeDomain
import CoffeeLifecycle
import CoffeeLogging
import Foundation
import HealthStore
import Synchronization

/// The model's one owner: it loads the model, follows the store's commits,
/// publishes the model after them and again as caffeine decays, pushes it
/// to the cache, and answers whoever reads it (a reply, the page, metrics).
///
/// One actor and one throttle: at most one round per `roundInterval`, each
/// round applying every commit that arrived (`catchUp`), publishing once
/// and pushing to the cache when it is due, all in the actor's own turn.
/// Commits reach it from the store's thread (`arrive`, which only queues
/// and rings); the first after a quiet spell starts a round at once, the
/// rest wait for the next. The seed's `ExtensionDelegate` background
/// refresh is the refresh timer here; its `HealthKitController`, which kept
/// the anchor and ran the anchored query, is `ModelService+Following.swift`.
public actor ModelService: Service {
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
        /// Beyond this many changes behind, rebuilding the window is cheaper than replaying.
        public var replayLimit: Int64 = 50_000

        public init(
            roundInterval: Duration = .milliseconds(100), refreshInterval: Duration = .seconds(60),
            clock: any Clock<Duration> = ContinuousClock()
        ) {
            self.roundInterval = roundInterval
            self.refreshInterval = refreshInterval
            self.clock = clock
        }
    }

    public nonisolated let name = "model"
    /// The person's settings (docs/protocol.md §15): the half-life and the
    /// time zone the model goes by. The store replaces them at a commit that
    /// changes them; the next round rebuilds the model with them.
    public nonisolated var settings: LiveSettings { store.liveSettings }
    /// The caffeine model's settings now, for readers that compute beyond the held window.
    public nonisolated var caffeine: CaffeineModel { settings.person.model }
    let store: HealthStore
    let cache: ModelCache?
    let wallClock: any WallClock
    let configuration: Configuration
    let logger: Logger
    /// Who is handed each model, and the last one handed (a late observer's first).
    private nonisolated let observers = Mutex<(list: [@Sendable (ModelSnapshot) -> Void], last: ModelSnapshot?)>(([], nil))

    /// The model itself.
    var state: ModelState
    /// The state changed since it was last pushed to the cache.
    var cacheBehind = false

    /// Commits the store has announced and the model has not applied yet, in order.
    /// Rings (coalesced: at most one waiting) when commits arrive or a refresh is due.
    private nonisolated let arrived = LatestValue<[CommittedBatch]>([])

    public init(
        store: HealthStore, cache: ModelCache?, clock: any WallClock,
        configuration: Configuration = .init(), logger: Logger
    ) {
        self.store = store
        self.cache = cache
        self.wallClock = clock
        self.configuration = configuration
        self.logger = logger
        state = ModelState(caffeine: store.liveSettings.person.model, clock: clock)
    }

    /// Loads the model (cache, then the store's changes since its anchor),
    /// follows commits from now on, and publishes it once. Runs before any
    /// input starts, so no commit goes unfollowed.
    public func start() async throws {
        try await load()
        await store.observeCommits { [self] batch in self.arrive(batch) }
        publishNow()
    }

    public func run() async throws {
        onGracefulShutdown { [arrived] in arrived.finish() }
        let configuration = self.configuration
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await repeatUntilShutdown(every: configuration.refreshInterval, on: configuration.clock) { self.ring() }
            }
            while await arrived.next() {
                await round()
                // Coalesce: what arrives meanwhile waits for the next round.
                await sleepUnlessShutdown(for: configuration.roundInterval, on: configuration.clock)
            }
        }
        // The last round: every commit made before the shutdown reached the
        // model (the inputs stopped first), and the store and the publisher
        // are still up (they were started before the model). The cache,
        // shut down after the model, writes what this pushes.
        await round()
        if cacheBehind, let cache {
            cache.push(state.cacheContents)
            cacheBehind = false
        }
    }

    /// One round: every commit that arrived applied, the model published,
    /// and pushed to the cache when it is due.
    private func round() async {
        await catchUp()
        publishNow()
        if cacheBehind, let cache, cache.isDue {
            cache.push(state.cacheContents)
            cacheBehind = false
        }
    }

    /// Hands every model published from now on to `observer` (the
    /// broadcaster, the rules, the page's event streams), the last one
    /// first when there was one. It is called on the model's turn, so it
    /// must only queue. Observers are told in the order they came, each
    /// model to all before the next.
    public nonisolated func observeModels(_ observer: @escaping @Sendable (ModelSnapshot) -> Void) {
        observers.withLock { observers in
            observers.list.append(observer)
            if let last = observers.last { observer(last) }
        }
    }

    private func publishNow() {
        guard let snapshot = state.snapshot() else { return }
        observers.withLock { observers in
            observers.last = snapshot
            for observer in observers.list { observer(snapshot) }
        }
    }

    /// Queues a commit for the model: a `HealthStore.CommitObserver`, run
    /// on the store's thread, so it only appends and rings. A round that is
    /// waiting wakes; one that is pausing finds it later, with whatever else
    /// arrived meanwhile. A commit of the settings rebuilds the model with
    /// them (`catchUp`).
    public nonisolated func arrive(_ batch: CommittedBatch) {
        arrived.update { $0.append(batch) }
    }

    /// Asks for a round without a commit (caffeine decays with time).
    public nonisolated func ring() { arrived.update { _ in } }

    /// Takes the commits that arrived, in order.
    func takeArrived() -> [CommittedBatch] {
        arrived.take(reset: [])
    }

    // MARK: - Reading, after every commit made before the call

    /// The model at `at` (default now) when the held drinks cover it, after
    /// a catch-up, so that a reply sees every commit made before it.
    public func snapshot(at: Date? = nil) async -> ModelSnapshot? {
        await catchUp()
        return state.snapshot(at: at)
    }

    /// The live drinks dated in `range` when the held drinks cover it (`ModelState.drinks(datedIn:)`).
    public func drinks(datedIn range: ClosedRange<Date>) async -> [Drink]? {
        await catchUp()
        return state.drinks(datedIn: range)
    }

    /// The model now as it is, without a catch-up: for metrics.
    public func heldSnapshot() -> ModelSnapshot? { state.snapshot() }

    /// The anchor the model reflects, without a catch-up.
    public var anchor: Int64 { state.anchor }

    /// The model as it is, without a catch-up: for tests.
    public var current: ModelState { state }
}
