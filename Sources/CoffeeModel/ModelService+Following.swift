import CoffeeDomain
import CoffeeLogging
import Foundation
import HealthStore

/// Following the store: the seed's `HealthKitController`, which ran the
/// anchored object query and kept its anchor. Here the model loads what
/// changed since its anchor (moving the anchor only with the drinks it
/// covers), and applies the commits that arrive, catching up or rebuilding
/// when they do not follow on.
extension ModelService {
    /// Start-up: the cache if it is usable, then catch up with the store.
    func load() async throws {
        let storeAnchor = await store.anchor
        let identity = store.identity
        var saved = await cache?.load()
        if let cached = saved, cached.identity != identity {
            // Another history's anchor means nothing here: a restore raised
            // the epoch, a standby took another store, or a promotion.
            logger.notice(
                "the model cache is of another store or epoch; rebuilding it from the store",
                metadata: ["cache": "\(cached.identity.map(\.description) ?? "none")", "store": "\(identity)"])
            saved = nil
        }
        // A cache of this store and epoch says since when it is complete (an
        // older build's file says neither, and is rebuilt above).
        if let saved, let completeSince = saved.completeSince, saved.anchor <= storeAnchor,
            storeAnchor - saved.anchor <= configuration.replayLimit
        {
            state.reset(drinks: saved.drinks, anchor: saved.anchor, completeSince: completeSince, identity: identity)
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

    /// Rebuilds the model from the store's window of recent drinks, with
    /// the person's settings as they are now.
    func rebuild() async throws {
        let since = wallClock.now() - CaffeineModel.retention
        let identity = store.identity  // read before the window: a change after it rebuilds again
        let (drinks, anchor) = try await store.window(datedFrom: since)
        state = ModelState(caffeine: caffeine, clock: wallClock)
        state.reset(drinks: drinks, anchor: anchor, completeSince: since, identity: identity)
        cacheBehind = true
        logger.info("model rebuilt from the store", metadata: ["anchor": "\(anchor)", "drinks": "\(drinks.count)"])
    }

    /// Applies every change after the model's anchor: the seed's `loadNewDataFromHealthKit`.
    ///
    /// The anchor moves only together with the drinks it covers.
    func loadNewData() async throws {
        var anchor = state.anchor
        while true {
            let page = try await store.changes(since: anchor, limit: 5000)
            // Another catch-up (a reply's) moved the anchor meanwhile: go on from there.
            guard state.anchor == anchor else {
                anchor = state.anchor
                continue
            }
            if state.update(newDrinks: page.added, deletedDrinks: Set(page.deleted.map(\.uuid)), anchor: page.anchor) {
                cacheBehind = true
            }
            anchor = page.anchor
            if !page.hasMore { break }
        }
    }

    /// Applies the commits that have arrived (`arrive`), in order; catches
    /// up through `changes` (paged) when one does not follow on from the
    /// model's anchor (the rest of what arrived is dropped: the catch-up
    /// covers it). A commit too large to carry its changes (an import)
    /// rebuilds the window instead: reading back a million changes to keep
    /// the few dated today cost the store's thread more than the import
    /// itself. Also run before the model is read for a reply, so a reply
    /// sees every commit made before it.
    func catchUp() async {
        // A standby that takes another store or epoch does it in a `replacesAll`
        // commit, which rebuilds (`tooLarge`), reading the new identity.
        let (outcome, changed) = state.apply(takeArrived())
        if changed { cacheBehind = true }
        do {
            switch outcome {
            case .applied, .alreadyHeld: break
            case .tooLarge: try await rebuild()
            case .gap: try await loadNewData()
            }
            // The person changed the half-life or the time zone: every sum the
            // model holds was made with the old ones. Made again from the drinks
            // it holds: a read of the store's window would hold up its commits.
            if state.caffeine != caffeine {
                logger.info("the person's settings changed; the model goes by them", metadata: ["anchor": "\(state.anchor)"])
                state = state.with(caffeine)
                cacheBehind = true
            }
        } catch {
            logger.error("could not catch up with the store", metadata: ["error": "\(error)"])
        }
    }
}
