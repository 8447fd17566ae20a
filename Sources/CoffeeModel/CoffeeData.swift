import CoffeeDomain
import CoffeeLogging
import Foundation
import HealthStore
import Synchronization

/// The model: the drinks that matter now and the anchor they reflect.
///
/// In the seed, `CoffeeData` was the main-actor `ObservableObject` that
/// SwiftUI drew from, holding the current drinks and calling
/// `drinksUpdated()` after each change. Here its observer is `ModelService`,
/// which publishes it to the update endpoint instead of redrawing a watch face.
public actor CoffeeData {
    public nonisolated let model: CaffeineModel
    private let clock: any WallClock
    private let cache: ModelCache?
    private let logger: Logger

    /// The current drinks: the last `CaffeineModel.retention` and any
    /// dated in the future (which count once their time comes), summed per
    /// minute so that a snapshot costs the same whatever their number, and
    /// held once, by UUID (`CaffeineIndex`).
    private var index: CaffeineIndex
    /// The store anchor that the held drinks reflect.
    public private(set) var anchor: Int64 = 0
    /// Held drinks are every live drink dated from here on (and not before
    /// `CaffeineModel.retention` ago, which they cover once this is that
    /// old); nil until the first `reset` (start-up, rebuild).
    public private(set) var completeSince: Date?

    private var lastPruned = Date.distantPast

    /// Commits the store has announced and the model has not applied yet, in order.
    private nonisolated let arrived = Mutex<[CommittedBatch]>([])
    private nonisolated let doorbell: AsyncStream<Void>.Continuation
    /// Yields (coalesced: at most one waiting) when commits arrive or a
    /// refresh is due; what `ModelService` waits on between rounds.
    public nonisolated let arrivals: AsyncStream<Void>

    public init(model: CaffeineModel, clock: any WallClock, cache: ModelCache?, logger: Logger = Logger(label: "model")) {
        self.logger = logger
        self.model = model
        self.clock = clock
        self.cache = cache
        index = CaffeineIndex(model: model, reference: clock.now())
        (arrivals, doorbell) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// Queues a commit for the model: a `HealthStore.CommitObserver`, run
    /// on the store's thread, so it only appends and rings. A follower that
    /// is waiting wakes; one that is pausing between rounds finds it later,
    /// with whatever else arrived meanwhile.
    public nonisolated func arrive(_ batch: CommittedBatch) {
        arrived.withLock { $0.append(batch) }
        doorbell.yield()
    }

    /// Asks for a round without a commit (caffeine decays with time).
    public nonisolated func ring() { doorbell.yield() }

    /// Ends `arrivals` (the service is draining).
    public nonisolated func endArrivals() { doorbell.finish() }

    /// Applies every commit that has arrived, in order, telling observers
    /// once. Stops at the first that does not follow on from the model's
    /// anchor and returns what it was (`gap` or `tooLarge`); the rest are
    /// dropped, as the catch-up from the store covers them.
    public func applyArrived() async -> FollowOutcome {
        let batches = arrived.withLock { queue in
            defer { queue.removeAll() }
            return queue
        }
        var outcome = FollowOutcome.alreadyHeld
        var applied = false
        for batch in batches {
            outcome = apply(batch)
            if outcome == .applied { applied = true }
            if outcome == .gap || outcome == .tooLarge { break }
        }
        if applied { await drinksUpdated() }
        return outcome
    }

    /// Replaces the whole state (start-up, resync): `drinks` are every live
    /// drink dated from `completeSince` on, at `anchor`.
    public func reset(drinks: [Drink], anchor: Int64, completeSince: Date) async {
        self.completeSince = completeSince
        let latest = Dictionary(drinks.map { ($0.uuid, $0) }, uniquingKeysWith: { a, b in a.version >= b.version ? a : b })
        index.removeAll()
        for drink in latest.values { index.insert(drink) }
        self.anchor = anchor
        removeOutdatedDrinks(force: true)
        await drinksUpdated()
    }

    /// Applies changes from the store.
    ///
    /// The seed's version ignored a change unless it both added and deleted
    /// (`&&` in its guard), kept exactly the deleted drinks, and appended new
    /// drinks without replacing those with the same UUID. Here every change
    /// applies, deletions remove, and a UUID is held once.
    public func updateModel(newDrinks: [Drink], deletedDrinks: Set<UUID>, anchor: Int64) async {
        guard !newDrinks.isEmpty || !deletedDrinks.isEmpty || anchor != self.anchor else { return }
        change(newDrinks: newDrinks, deletedDrinks: deletedDrinks, anchor: anchor)
        await drinksUpdated()
    }

    /// `updateModel` without telling observers.
    private func change(newDrinks: [Drink], deletedDrinks: Set<UUID>, anchor: Int64) {
        for uuid in deletedDrinks { set(nil, for: uuid) }
        let cutoff = clock.now() - CaffeineModel.retention
        for drink in newDrinks { hold(drink, cutoff: cutoff) }
        self.anchor = max(self.anchor, anchor)
        removeOutdatedDrinks()
    }

    /// Holds `drink`, replacing its UUID's earlier version, unless it is too
    /// old to matter: then it is not held at all (an import of old history
    /// would otherwise sit here until the next prune), and an earlier
    /// version dated in the window goes too.
    private func hold(_ drink: Drink, cutoff: Date) {
        set(drink.date >= cutoff ? drink : nil, for: drink.uuid)
    }

    /// Holds `drink` for `uuid`, or lets go of it (nil).
    private func set(_ drink: Drink?, for uuid: UUID) {
        if let drink { index.insert(drink) } else { index.remove(uuid) }
    }

    /// What applying a commit did (`applyArrived`).
    public enum FollowOutcome: Sendable {
        /// Applied: it followed on from the model's anchor.
        case applied
        /// Already covered by the model's anchor.
        case alreadyHeld
        /// It does not follow on from the model's anchor: catch up from the store.
        case gap
        /// Too large to carry its changes: rebuild from the store.
        case tooLarge
    }

    /// Applies a commit when it follows on from the model's anchor, without
    /// telling observers (`applyArrived` tells them once per round).
    private func apply(_ batch: CommittedBatch) -> FollowOutcome {
        if batch.replacesAll { return .tooLarge }  // a standby's whole new state: rebuild
        if batch.anchor <= anchor { return .alreadyHeld }
        if !batch.isComplete { return .tooLarge }
        if batch.previousAnchor != anchor { return .gap }
        // The log in order: a later write of a UUID replaces an earlier one,
        // which is what resolving it first would give, without the map.
        let cutoff = clock.now() - CaffeineModel.retention
        for change in batch.log {
            switch change {
            case .added(let drink): hold(drink, cutoff: cutoff)
            case .deleted(let tombstone): set(nil, for: tombstone.uuid)
            }
        }
        anchor = batch.anchor
        removeOutdatedDrinks()
        return .applied
    }

    /// Drops drinks too old to matter, at most once a minute (the model's
    /// formulas ignore old drinks anyway; this only bounds memory). Drinks
    /// dated in the future stay: the seed dropped them, losing a drink logged
    /// a few minutes ahead.
    func removeOutdatedDrinks(force: Bool = false) {
        let now = clock.now()
        guard force || now.timeIntervalSince(lastPruned) >= 60 else { return }
        lastPruned = now
        index.removeAll(datedBefore: now - CaffeineModel.retention)
    }

    /// What the cache writes: the drinks, in no order, their anchor and
    /// since when they are complete, read together.
    public func cacheContents() -> (drinks: [Drink], anchor: Int64, completeSince: Date?) {
        (index.drinks, anchor, completeSince)
    }

    /// How many drinks are held.
    public var count: Int { index.count }

    /// The drinks, oldest first.
    public var drinks: [Drink] { index.drinks.sorted(by: Drink.chronological) }

    /// The live drinks dated in `range`, oldest first, when the held
    /// drinks cover all of it (the picture's 36 hours, say); otherwise nil
    /// and the caller asks the store, which scans its records for them.
    public func drinks(datedIn range: ClosedRange<Date>) -> [Drink]? {
        guard let completeSince, range.lowerBound >= max(completeSince, clock.now() - CaffeineModel.retention) else {
            return nil
        }
        return index.drinks.filter { range.contains($0.date) }.sorted(by: Drink.chronological)
    }

    /// The model at `at` (default now), if `at` lies where the held drinks
    /// cover it; otherwise nil and the caller asks the store.
    public func snapshot(at: Date? = nil) -> ModelSnapshot? {
        let now = clock.now()
        let at = at ?? now
        // Held drinks cover [now - retention, ∞); the model at `at` needs
        // [at - 26 h, at].
        guard at >= now else { return nil }
        return index.snapshot(at: at, anchor: anchor)
    }

    /// Saves the cache: the seed's `drinksUpdated()`, whose other job,
    /// telling observers, is `ModelService`'s round after it.
    private func drinksUpdated() async {
        cache?.schedule(from: self)
    }
}
