import CoffeeDomain
import Foundation
import HealthStore

/// The model's state: the drinks that matter now and the anchor they reflect.
///
/// In the seed, `CoffeeData` was the main-actor `ObservableObject` that
/// SwiftUI drew from, holding the current drinks and calling
/// `drinksUpdated()` after each change. Here it is a value, pure and
/// clock-injected, owned by `ModelService`, which changes it, publishes it
/// and pushes it to the cache.
public struct ModelState: Sendable {
    /// The caffeine model's settings (half-life, the day's time zone).
    public let caffeine: CaffeineModel
    private let clock: any WallClock

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
    /// The store's identity whose anchor `anchor` is (docs/protocol.md §13):
    /// what the model's snapshots and its cache carry. Set by `reset`.
    public private(set) var identity: StoreIdentity?
    private var lastPruned = Date.distantPast

    public init(caffeine: CaffeineModel, clock: any WallClock) {
        self.caffeine = caffeine
        self.clock = clock
        index = CaffeineIndex(model: caffeine, reference: clock.now())
    }

    /// The same drinks, anchor and identity under other settings (a half-life
    /// or a time zone the person changed, docs/protocol.md §15): every sum is
    /// made again from the drinks held, with no read of the store.
    public func with(_ caffeine: CaffeineModel) -> ModelState {
        var next = ModelState(caffeine: caffeine, clock: clock)
        guard let completeSince else { return next }
        next.reset(drinks: index.drinks, anchor: anchor, completeSince: completeSince, identity: identity)
        return next
    }

    /// What applying a commit did (`apply`).
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

    /// Replaces the whole state (start-up, resync): `drinks` are every live
    /// drink dated from `completeSince` on, at `anchor`.
    public mutating func reset(drinks: [Drink], anchor: Int64, completeSince: Date, identity: StoreIdentity? = nil) {
        self.completeSince = completeSince
        self.identity = identity
        let latest = Dictionary(drinks.map { ($0.uuid, $0) }, uniquingKeysWith: { a, b in a.version >= b.version ? a : b })
        index.removeAll()
        for drink in latest.values { index.insert(drink) }
        self.anchor = anchor
        removeOutdatedDrinks(force: true)
    }

    /// Applies changes from the store (a page of `changes`). Returns whether
    /// anything changed.
    ///
    /// The seed's version ignored a change unless it both added and deleted
    /// (`&&` in its guard), kept exactly the deleted drinks, and appended new
    /// drinks without replacing those with the same UUID. Here every change
    /// applies, deletions remove, and a UUID is held once.
    @discardableResult
    public mutating func update(newDrinks: [Drink], deletedDrinks: Set<UUID>, anchor: Int64) -> Bool {
        guard !newDrinks.isEmpty || !deletedDrinks.isEmpty || anchor != self.anchor else { return false }
        for uuid in deletedDrinks { index.remove(uuid) }
        let cutoff = clock.now() - CaffeineModel.retention
        for drink in newDrinks { hold(drink, cutoff: cutoff) }
        self.anchor = max(self.anchor, anchor)
        removeOutdatedDrinks()
        return true
    }

    /// Applies a commit when it follows on from the model's anchor;
    /// otherwise says what to do instead.
    public mutating func apply(_ batch: CommittedBatch) -> FollowOutcome {
        if batch.replacesAll { return .tooLarge }  // a standby's whole new state: rebuild
        if batch.anchor <= anchor { return .alreadyHeld }
        if !batch.isComplete { return .tooLarge }
        if batch.previousAnchor != anchor { return .gap }
        // The log in order: a later write of a UUID replaces an earlier one,
        // which is what resolving it first would give, without the map.
        let cutoff = clock.now() - CaffeineModel.retention
        if batch.writesOnlyNewRecords {
            // UUIDs the store had no record of: none is held, nothing to look up or let go.
            for case .added(let drink) in batch.log where drink.date >= cutoff { index.insertNew(drink) }
        } else {
            for change in batch.log {
                switch change {
                case .added(let drink): hold(drink, cutoff: cutoff)
                case .deleted(let tombstone): index.remove(tombstone.uuid)
                }
            }
        }
        anchor = batch.anchor
        removeOutdatedDrinks()
        return .applied
    }

    /// Applies commits that arrived together, in order, up to the first
    /// that does not follow on from the model's anchor, and returns what
    /// that one was (`gap` or `tooLarge`; the rest are dropped, as the
    /// catch-up from the store covers them), and whether any applied.
    public mutating func apply(_ batches: [CommittedBatch]) -> (outcome: FollowOutcome, changed: Bool) {
        var outcome = FollowOutcome.alreadyHeld
        var changed = false
        for batch in batches {
            outcome = apply(batch)
            if outcome == .applied { changed = true }
            if outcome == .gap || outcome == .tooLarge { break }
        }
        return (outcome, changed)
    }

    /// Holds `drink`, replacing its UUID's earlier version, unless it is too
    /// old to matter: then it is not held at all (an import of old history
    /// would otherwise sit here until the next prune), and an earlier
    /// version dated in the window goes too.
    private mutating func hold(_ drink: Drink, cutoff: Date) {
        if drink.date >= cutoff { index.insert(drink) } else { index.remove(drink.uuid) }
    }

    /// Drops drinks too old to matter, at most once a minute (the model's
    /// formulas ignore old drinks anyway; this only bounds memory). Drinks
    /// dated in the future stay: the seed dropped them, losing a drink logged
    /// a few minutes ahead.
    private mutating func removeOutdatedDrinks(force: Bool = false) {
        let now = clock.now()
        guard force || now.timeIntervalSince(lastPruned) >= 60 else { return }
        lastPruned = now
        index.removeAll(datedBefore: now - CaffeineModel.retention)
    }

    /// How many drinks are held.
    public var count: Int { index.count }

    /// The drinks, oldest first.
    public var drinks: [Drink] { index.drinks.sorted(by: Drink.chronological) }

    /// What the cache writes: the drinks (read on the cache's thread), their
    /// anchor and since when they are complete, taken together. A copy of
    /// the index costs nothing until the model next changes.
    public var cacheContents: ModelCache.Contents {
        ModelCache.Contents(index: index, anchor: anchor, completeSince: completeSince, identity: identity)
    }

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
    public mutating func snapshot(at: Date? = nil) -> ModelSnapshot? {
        let now = clock.now()
        let at = at ?? now
        // Held drinks cover [now - retention, ∞); the model at `at` needs
        // [at - 26 h, at].
        guard at >= now else { return nil }
        var snapshot = index.snapshot(at: at, anchor: anchor)
        snapshot.identity = identity
        return snapshot
    }
}
