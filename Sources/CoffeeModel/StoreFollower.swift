import CoffeeDomain
import CoffeeLogging
import Foundation
import HealthStore

/// The adapter between the model and the store.
///
/// In the seed, `StoreFollower` was the actor that saved caffeine
/// samples to HealthKit and ran the anchored object query, keeping its
/// anchor. Here it does the same against `HealthStore`: it saves drinks,
/// loads what changed since the model's anchor (moving the anchor only with
/// the drinks it covers), and applies the commits that arrive at the model,
/// catching up or rebuilding when they do not follow on.
public actor StoreFollower {
    private let store: HealthStore
    private let model: CoffeeData
    private let cache: ModelCache?
    private let clock: any WallClock
    private let logger: Logger
    /// Beyond this many changes behind, rebuilding the window is cheaper than replaying.
    private let replayLimit: Int64

    public init(
        store: HealthStore, model: CoffeeData, cache: ModelCache?, clock: any WallClock, replayLimit: Int64 = 50_000,
        logger: Logger = Logger(label: "follower")
    ) {
        self.logger = logger
        self.store = store
        self.model = model
        self.cache = cache
        self.clock = clock
        self.replayLimit = replayLimit
    }

    /// Start-up: the cache if it is usable, then catch up with the store.
    public func load() async throws {
        let storeAnchor = await store.anchor
        if let saved = await cache?.load(), saved.anchor <= storeAnchor, storeAnchor - saved.anchor <= replayLimit {
            // A cache written before it said since when it is complete kept
            // 26 hours (the retention then) up to a save before now.
            let completeSince = saved.completeSince ?? clock.now() - Self.legacyRetention
            await model.reset(drinks: saved.drinks, anchor: saved.anchor, completeSince: completeSince)
            do {
                try await loadNewData()
                logger.info(
                    "model loaded from cache", metadata: ["anchor": "\(saved.anchor)", "drinks": "\(saved.drinks.count)"])
                return
            } catch let error as StoreError where error.isAnchorExpired {
                logger.notice("model cache is older than the store's tombstones; rebuilding")
            }
        }
        try await rebuild()
    }

    /// What a cache written by a build before schema version 3 held.
    static let legacyRetention: TimeInterval = 26 * 3600

    /// Rebuilds the model from the store's window of recent drinks.
    public func rebuild() async throws {
        let since = clock.now() - CaffeineModel.retention
        let (drinks, anchor) = try await store.window(datedFrom: since)
        await model.reset(drinks: drinks, anchor: anchor, completeSince: since)
        logger.info("model rebuilt from the store", metadata: ["anchor": "\(anchor)", "drinks": "\(drinks.count)"])
    }

    /// Applies every change after the model's anchor: the seed's `loadNewDataFromHealthKit`.
    ///
    /// The anchor moves only together with the drinks it covers.
    public func loadNewData() async throws {
        var anchor = await model.anchor
        while true {
            let page = try await store.changes(since: anchor, limit: 5000)
            await model.updateModel(
                newDrinks: page.added, deletedDrinks: Set(page.deleted.map(\.uuid)), anchor: page.anchor)
            anchor = page.anchor
            if !page.hasMore { break }
        }
    }

    /// Saves drinks to the store; the model follows through `ModelService`.
    public func save(drinks: [Drink]) async throws -> WriteResult {
        try await store.save(drinks)
    }

    /// Applies the commits that have arrived at the model (`CoffeeData.arrive`);
    /// catches up through `changes` (paged) when one does not follow on from
    /// the model's anchor. A commit too large to carry its changes (an
    /// import) rebuilds the window instead: reading back a million changes
    /// to keep the few dated today cost the store's thread more than the
    /// import itself. Also called before the model is read for a reply, so
    /// a reply sees every commit made before it.
    public func catchUp() async {
        do {
            switch await model.applyArrived() {
            case .applied, .alreadyHeld: break
            case .tooLarge: try await rebuild()
            case .gap: try await loadNewData()
            }
        } catch {
            logger.error("could not catch up with the store", metadata: ["error": "\(error)"])
        }
    }
}
