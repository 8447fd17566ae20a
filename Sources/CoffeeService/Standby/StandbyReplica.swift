import CoffeeDomain
import CoffeeLogging
import CoffeeTrackerClient
import Foundation
import HealthStore

/// A standby's store as a follow loop's target (docs/protocol.md §11): each
/// change stored under its primary's anchor. It starts from its own anchor
/// (0 when new, so that it holds the tombstones too); where the primary has
/// purged past it, or the primary is behind it, it takes the primary's
/// whole state in one commit. The messages of a burst become one commit; a
/// read's next page is read while the store commits the one before.
struct StandbyReplica: FeedTarget {
    let store: HealthStore
    let status: FollowStatus
    let logger: Logger
    /// `follow.adopt`: take a primary of another store, dropping what is held.
    let adopt: Bool
    /// The store's anchor: every change up to it is durable here.
    private(set) var held: Int64
    /// Messages applied since the last commit, and the anchor they reach.
    private var pending: [(anchor: Int64, change: CommittedBatch.Change)] = []
    /// The rows beside the drinks those messages carried (settings, the rules' states, the outbox).
    private var pendingKept = KeptRows()
    private var pendingThrough: Int64?
    /// The update feed has been silent since the last word from it.
    private var silent = false
    /// A read's page, and the most changes one commit of messages holds.
    static let page = 10_000
    /// A standby commits each burst at once.
    static var settleInterval: Duration { .zero }

    init(store: HealthStore, status: FollowStatus, adopt: Bool, logger: Logger) throws {
        self.store = store
        self.status = status
        self.adopt = adopt
        self.logger = logger
        held = try store.blocking { $0.anchor }
        status.stored(held)
    }

    var anchor: Int64 { pendingThrough ?? held }
    var identity: StoreIdentity? { store.identity }

    mutating func resync(_ client: QueryClient) throws {
        try settled()
        let primary = try client.ping().identity
        comparePushKeys(client)  // after the ping: a primary that is away fails there, at once
        if let primary, primary != store.identity {
            return try take(primary, client)
        }
        let purged = try Self.purgedAnchor(client)
        do {
            let page = try client.changes(since: held, limit: Self.page)
            if page.anchor < held {
                logger.warning(
                    "the primary is behind this standby (restored, or a new store); taking its whole state",
                    metadata: ["primary": "\(page.anchor)", "standby": "\(held)"])
                return try replaceAll(client)
            }
            try copy(from: page, client, purgedAnchor: purged)
        } catch let refusal as QueryClient.Refusal where refusal.code == "anchor_expired" {
            logger.notice(
                "the primary purged tombstones past this standby's anchor; taking its whole state",
                metadata: ["anchor": "\(held)"])
            try replaceAll(client)
        }
    }

    /// Stores `first` and the pages after it, each in one commit; the next
    /// page is read while the store commits the one before (one commit at a
    /// time: a page is started only after the one before it is durable).
    /// With `identity`, the first commit takes it, replacing what is held.
    private mutating func copy(
        from first: Changes, _ client: QueryClient, purgedAnchor: Int64, identity: StoreIdentity? = nil
    ) throws {
        var page = first
        var identity = identity
        var committing: HealthStore.Job<Int64>?
        do {
            while true {
                let commit = HealthStore.ReplicaCommit(
                    changes: Self.anchored(page), through: page.anchor, replacesAll: identity != nil,
                    purgedAnchor: purgedAnchor, identity: identity)
                identity = nil
                if let job = committing {
                    committing = nil
                    stored(try job.wait())
                }
                committing = store.started { try $0.replicate(commit) }
                if !page.hasMore { break }
                page = try client.changes(since: page.anchor, limit: Self.page)
            }
        } catch {
            if let job = committing { try? stored(job.wait()) }
            throw error
        }
        if let job = committing { stored(try job.wait()) }
    }

    mutating func apply(_ changes: Changes) throws {
        pending += Self.anchored(changes).inAnchorOrder
        pendingKept.append(changes.kept)
        pendingThrough = changes.anchor
        if pending.count >= Self.page { try settled() }
    }

    mutating func settled() throws {
        guard let through = pendingThrough else { return }
        var changes = AnchoredChanges(pending)
        changes.kept = pendingKept.newestOfEach
        (pending, pendingKept, pendingThrough) = ([], KeptRows(), nil)  // on a failure the loop reads them again from `held`
        try commit(changes, through: through)
    }

    mutating func heard(anchor: Int64) {
        status.heard(anchor)
        silent = false
    }

    /// The update feed went silent: said once, until it speaks again. (Under
    /// CURVE a key without the `subscribe` role is refused there without a
    /// word, while its reads go on working.)
    mutating func lost() {
        guard !silent else { return }
        silent = true
        logger.warning(
            "no word from the primary's update feed; resyncing from its query endpoint (under CURVE this standby's key needs the subscribe role)",
            metadata: ["updates": "\(status.primary)"])
    }

    /// The primary is of another history than this store (docs/protocol.md
    /// §13). A higher epoch of this store (the primary was restored or
    /// promoted since), another store while this one is empty, or with
    /// `follow.adopt`, or while this one's identity is only the one an
    /// upgrade made: drop what is held and copy the primary from anchor 0,
    /// in one commit that takes its identity (an empty store drops nothing:
    /// page by page then, the first commit taking the identity, unless the
    /// primary purged tombstones). A lower epoch of this store
    /// (an old primary restarted after a promotion), or another store
    /// otherwise: refused, serving what is held; the loop ends, and the
    /// standby tries again later.
    private mutating func take(_ primary: StoreIdentity, _ client: QueryClient) throws {
        let mine = store.identity
        if primary.store == mine.store {
            guard primary.epoch > mine.epoch else {
                throw FeedRefusal(
                    "the primary at \(status.primary) is epoch \(primary.epoch) of this store, older than this standby's epoch \(mine.epoch) (an old primary restarted after a promotion?): refusing it, so that two histories never mix; serving what this standby holds"
                )
            }
            logger.notice(
                "the primary is a later epoch of this store (restored or promoted since); dropping what this standby holds and copying it again",
                metadata: ["epoch": "\(mine.epoch)", "primaryEpoch": "\(primary.epoch)"])
        } else {
            guard held == 0 || adopt || store.identityWasUpgraded else {
                throw FeedRefusal(
                    "the primary at \(status.primary) is another store (\(UUIDText.string(primary.store))) than this standby's (\(UUIDText.string(mine.store)), anchor \(held)): refusing it; serving what this standby holds (follow.adopt: true takes it, dropping what is held)"
                )
            }
            logger.notice(
                "taking the primary's store",
                metadata: ["store": "\(UUIDText.string(primary.store))", "epoch": "\(primary.epoch)"])
        }
        if held == 0 {
            // Nothing held to drop: the copy goes page by page, the first commit taking the identity.
            let purged = try Self.purgedAnchor(client)
            do {
                return try copy(from: client.changes(since: 0, limit: Self.page), client, purgedAnchor: purged, identity: primary)
            } catch let refusal as QueryClient.Refusal where refusal.code == "anchor_expired" {
                // The primary purged tombstones: its whole state, as below.
            }
        }
        try replaceAll(client, identity: primary)
    }

    /// The primary's whole state: every live drink (read from null), and
    /// every change after its purged anchor (its tombstones), each UUID at
    /// its latest anchor, in one commit that replaces what is held (and
    /// takes `identity`, the primary's, when given).
    /// Memory is the primary's store, once, for this rare case.
    private mutating func replaceAll(_ client: QueryClient, identity: StoreIdentity? = nil) throws {
        let purged = try Self.purgedAnchor(client)
        var latest: [UUID: (anchor: Int64, change: CommittedBatch.Change)] = [:]
        var kept = KeptRows()
        var through: Int64 = 0
        // Every live drink (from null), then the changes after the purged
        // anchor; with nothing purged, the read from 0 holds both.
        let starts: [Int64?] = purged == 0 ? [0] : [nil, purged]
        for start in starts {
            var page = try client.changes(since: start, limit: Self.page)
            while true {
                for item in Self.anchored(page).inAnchorOrder where (latest[item.change.uuid]?.anchor ?? 0) < item.anchor {
                    latest[item.change.uuid] = item
                }
                kept.append(page.kept)
                through = max(through, page.anchor)
                if !page.hasMore { break }
                page = try client.changes(since: page.anchor, limit: Self.page)
            }
        }
        var state = AnchoredChanges(latest.values.sorted { $0.anchor < $1.anchor })
        state.kept = kept.newestOfEach
        try commit(state, through: through, replacesAll: true, purgedAnchor: purged, identity: identity)
        logger.notice(
            "standby took the primary's whole state",
            metadata: ["anchor": "\(through)", "records": "\(latest.count)", "purgedAnchor": "\(purged)"])
    }

    private mutating func commit(
        _ changes: AnchoredChanges, through: Int64, replacesAll: Bool = false, purgedAnchor: Int64? = nil,
        identity: StoreIdentity? = nil
    ) throws {
        let commit = HealthStore.ReplicaCommit(
            changes: changes, through: through, replacesAll: replacesAll, purgedAnchor: purgedAnchor, identity: identity)
        stored(try store.blocking { try $0.replicate(commit) })
    }

    private mutating func stored(_ anchor: Int64) {
        held = anchor
        status.stored(anchor)
    }

    /// Whether this standby's Web Push key is its primary's (§17), asked at
    /// each resync (each connection): another key is said when it becomes
    /// so, as a warning naming the file to copy, since a promotion would
    /// leave every phone subscribed on the primary untold.
    private func comparePushKeys(_ client: QueryClient) {
        // A primary with no key, or one that does not know the op, answers a refusal: unknown.
        let theirs = try? client.pushKey()
        switch status.compare(primaryPushKey: theirs) {
        case .different:
            logger.warning(
                "this standby's Web Push key is not its primary's: promoted, it could tell no phone subscribed there; copy the primary's vapid.pem over this one's and restart",
                metadata: ["path": "\(status.pushKeyPath)"])
        case .same: logger.info("this standby's Web Push key is its primary's")
        case .unknown, nil: break
        }
    }

    private static func purgedAnchor(_ client: QueryClient) throws -> Int64 {
        Int64(try client.stats()["purgedAnchor"] ?? 0)
    }

    static func anchored(_ changes: Changes) -> AnchoredChanges {
        var anchored = AnchoredChanges()
        (anchored.added, anchored.addedAnchors) = (changes.added, changes.addedAnchors)
        (anchored.deleted, anchored.deletedAnchors) = (changes.deleted, changes.deletedAnchors)
        anchored.kept = changes.kept
        return anchored
    }
}
