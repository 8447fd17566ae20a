import CoffeeDomain
import Foundation

/// Drinks to save and deletions to apply together, in one commit.
public struct WriteBatch: Sendable, Hashable {
    public var drinks: [Drink]
    public var deletions: [Deletion]

    /// Report which duplicates were kept out by a deletion
    /// (`WriteResult.deletedDuplicates`): a lookup per duplicate, so only a
    /// caller that tells someone asks (a query `add`; not the bus or the inbox).
    public var explainDuplicates: Bool

    public init(drinks: [Drink] = [], deletions: [Deletion] = [], explainDuplicates: Bool = false) {
        self.drinks = drinks
        self.deletions = deletions
        self.explainDuplicates = explainDuplicates
    }

    public var isEmpty: Bool { drinks.isEmpty && deletions.isEmpty }

    /// A batch applies its saves before its deletions. Input that arrives in
    /// order may add drinks only while the batch holds no deletions; a drink
    /// after a deletion starts the next batch, or it would be reordered.
    public var acceptsDrinksInOrder: Bool { deletions.isEmpty }
    public var count: Int { drinks.count + deletions.count }
}

/// What one batch did, reported once its commit is durable.
public struct WriteResult: Sendable, Hashable {
    /// The anchor of the commit that holds this batch (its last anchor).
    public var anchor: Int64
    /// Saves that took effect.
    public var added: Int
    /// Saves ignored because a record with the same or a higher version exists.
    public var duplicates: Int
    /// Of those, the ones whose record is a deletion: the drink was deleted,
    /// and only a higher version brings it back (docs/protocol.md §1).
    public var deletedDuplicates: [Tombstone] = []
    /// Live drinks that became tombstones.
    public var deleted: Int
    /// Deletions of UUIDs with no live drink (a tombstone is stored or kept).
    public var unknown: Int

    public init(anchor: Int64 = 0, added: Int = 0, duplicates: Int = 0, deleted: Int = 0, unknown: Int = 0) {
        self.anchor = anchor
        self.added = added
        self.duplicates = duplicates
        self.deleted = deleted
        self.unknown = unknown
    }
}

/// A page of changes: the anchored query's answer.
public struct ChangeSet: Sendable, Hashable {
    public var added: [Drink]
    public var deleted: [Tombstone]
    /// Pass this back to continue; the store's anchor when nothing is left.
    public var anchor: Int64
    public var hasMore: Bool
    /// The anchor of each drink's own change, in `added`'s order (docs/protocol.md §1, v3).
    public var addedAnchors: [Int64]
    /// The anchor of each tombstone's own change, in `deleted`'s order.
    public var deletedAnchors: [Int64]
    /// The rows beside the drinks written in the anchors the page covers
    /// (docs/protocol.md §15, "In the feed").
    public var kept = KeptRows()

    public init(
        added: [Drink], deleted: [Tombstone], anchor: Int64, hasMore: Bool, addedAnchors: [Int64] = [],
        deletedAnchors: [Int64] = []
    ) {
        self.added = added
        self.deleted = deleted
        self.anchor = anchor
        self.hasMore = hasMore
        self.addedAnchors = addedAnchors
        self.deletedAnchors = deletedAnchors
    }

    /// The page's changes, each with its anchor.
    public var anchored: AnchoredChanges {
        var changes = AnchoredChanges()
        (changes.added, changes.addedAnchors, changes.deleted, changes.deletedAnchors) = (
            added, addedAnchors, deleted, deletedAnchors
        )
        changes.kept = kept
        return changes
    }
}

/// Changes with the anchor of each (docs/protocol.md §1, v3): what a `changes`
/// message or reply carries, drinks and tombstones apart, each in anchor order.
public struct AnchoredChanges: Sendable, Hashable {
    public var added: [Drink] = []
    public var addedAnchors: [Int64] = []
    public var deleted: [Tombstone] = []
    public var deletedAnchors: [Int64] = []
    /// The rows beside the drinks in the same anchors (docs/protocol.md §15, "In the feed").
    public var kept = KeptRows()

    public init() {}

    /// Splits changes, each with its anchor, into drinks and tombstones.
    public init(_ changes: some Sequence<(anchor: Int64, change: CommittedBatch.Change)>) {
        // Room for all as drinks: a page or a commit is mostly drinks, and growing copies them.
        added.reserveCapacity(changes.underestimatedCount)
        addedAnchors.reserveCapacity(changes.underestimatedCount)
        for (anchor, change) in changes {
            switch change {
            case .added(let d):
                added.append(d)
                addedAnchors.append(anchor)
            case .deleted(let t):
                deleted.append(t)
                deletedAnchors.append(anchor)
            }
        }
    }
}

/// One durable commit, as the store's update stream reports it: the
/// anchored query's update handler.
public struct CommittedBatch: Sendable, Hashable {
    /// One change as the commit made it.
    public enum Change: Sendable, Hashable {
        case added(Drink)
        case deleted(Tombstone)

        public var uuid: UUID {
            switch self {
            case .added(let d): d.uuid
            case .deleted(let t): t.uuid
            }
        }
    }

    public var anchor: Int64
    public var previousAnchor: Int64
    /// Every change, in anchor order; a UUID written twice in the commit
    /// appears twice. Kept raw so that the store's thread only appends:
    /// consumers resolve it on their own threads (`resolved()`).
    public var log: [Change]
    /// False for a commit too large to carry (`HealthStore.announceLimit`):
    /// `log` is then empty, and the changes are read with
    /// `changes(since: previousAnchor, limit:, through: anchor)`.
    public var isComplete: Bool = true
    /// When the earliest change of the commit reached the store (a
    /// `ContinuousClock` instant), for the publish-delay histogram; nil
    /// when unknown.
    public var arrived: ContinuousClock.Instant?
    /// Some change replaced a record that existed before it: only then can
    /// a UUID appear in `log` more than once (its second write replaces the
    /// first), so false lets `resolved()` skip its map. The store sets it;
    /// anyone else leaves it true.
    public var replacesRecords: Bool
    /// Every change wrote a record that did not exist before the commit: a
    /// copy of the store (the model) holds none of its UUIDs, so it need not
    /// look them up. Only the store's own commit knows, and sets it; it is
    /// false otherwise (another service's changes, a standby's singles).
    public var writesOnlyNewRecords = false
    /// The anchor of each change of `log`, when they are not the anchors
    /// after `previousAnchor` one by one: a standby's commit, whose changes
    /// keep the anchors their primary gave them (docs/protocol.md §11). Nil otherwise.
    public var anchors: [Int64]?
    /// The commit replaced everything the store held (a standby taking its
    /// primary's whole state): `log` is empty, `isComplete` false, and the
    /// anchor may even be lower than `previousAnchor`. Whoever keeps a copy
    /// rebuilds it from the store.
    public var replacesAll: Bool
    /// The store's identity after the commit (docs/protocol.md §13): what
    /// its announcement says. Nil where no store made it (a test's batch).
    public var identity: StoreIdentity?
    /// The store's settings after the commit, when it changed them
    /// (docs/protocol.md §15, `HealthStore.writeSettings`); nil otherwise.
    public var settings: StoredSettings?
    /// The rows beside the drinks that the commit wrote, each with its
    /// anchor (docs/protocol.md §15, "In the feed"): settings, the rules'
    /// states, the outbox. A `changes` message carries them.
    public var kept = KeptRows()

    public init(
        anchor: Int64, previousAnchor: Int64, log: [Change], isComplete: Bool = true,
        arrived: ContinuousClock.Instant? = nil, replacesRecords: Bool = true, anchors: [Int64]? = nil,
        replacesAll: Bool = false
    ) {
        precondition(anchors == nil || anchors?.count == log.count)
        self.anchors = anchors
        self.replacesAll = replacesAll
        self.arrived = arrived
        self.replacesRecords = replacesRecords
        self.anchor = anchor
        self.previousAnchor = previousAnchor
        self.log = log
        self.isComplete = isComplete
    }

    /// The commit as pages of at most `size` changes, in order, each with
    /// the anchors it spans: a page's changes took the anchors after its
    /// `previousAnchor` up to its `anchor`, one each, so the pages chain.
    /// A commit that fits one page is its own page (no array of one: the
    /// publisher pages every commit it sends).
    public func forEachPage(of size: Int, _ body: (CommittedBatch) -> Void) {
        guard log.count > size else { return body(self) }
        for start in stride(from: 0, to: log.count, by: size) {
            let end = min(start + size, log.count)
            var page = CommittedBatch(
                anchor: end == log.count ? anchor : anchor(at: end - 1),
                previousAnchor: start == 0 ? previousAnchor : anchor(at: start - 1), log: Array(log[start..<end]),
                arrived: arrived, replacesRecords: replacesRecords, anchors: anchors.map { Array($0[start..<end]) })
            page.writesOnlyNewRecords = writesOnlyNewRecords
            if end == log.count { page.kept = kept }  // the rows go with the last page, whose anchor covers them
            body(page)
        }
    }

    /// The anchor of `log[offset]`.
    public func anchor(at offset: Int) -> Int64 { anchors?[offset] ?? previousAnchor + 1 + Int64(offset) }

    /// Each UUID once, in its final state, with the anchor of its last
    /// change (`anchor(at:)`), in anchor order: what a `changes` message carries,
    /// and what `changes` read from the store after the commit gives.
    /// Resolves on every call.
    public func resolved() -> AnchoredChanges {
        // By index, not `enumerated()`: a lazy map of that reports no count, and
        // `AnchoredChanges.init` reserves by the count (growing a page of 5,000 copies it).
        let anchored = log.indices.lazy.map { (anchor: self.anchor(at: $0), change: self.log[$0]) }
        var changes: AnchoredChanges
        if replacesRecords {
            var last: [UUIDKey: Int64] = [:]
            last.reserveCapacity(log.count)
            for (anchor, change) in anchored { last[UUIDKey(change.uuid)] = anchor }
            // A later write of the same UUID wins, at its own anchor.
            changes = AnchoredChanges(anchored.filter { last[UUIDKey($0.change.uuid)] == $0.anchor })
        } else {
            changes = AnchoredChanges(anchored)  // each UUID is in the log once
        }
        if !kept.isEmpty { changes.kept = kept }
        return changes
    }

    /// `resolved().added`.
    public var added: [Drink] { resolved().added }
    /// `resolved().deleted`.
    public var deleted: [Tombstone] { resolved().deleted }
}

/// Facts about the store for `stats`.
public struct StoreStatistics: Sendable, Hashable {
    public var anchor: Int64
    public var purgedAnchor: Int64
    public var commits: Int64
    public var fileBytes: Int64
}

/// Where a reader of every live drink in date order goes on from: the last
/// drink it has, by its stored date and UUID (`HealthStore.drinks(after:limit:)`).
public struct DrinkCursor: Sendable, Hashable, Comparable {
    public var dateMs: Int64
    public var uuid: UUID

    public init(dateMs: Int64, uuid: UUID) {
        self.dateMs = dateMs
        self.uuid = uuid
    }

    /// Before every drink dated from `dateMs` on.
    public static func before(dateMs: Int64) -> DrinkCursor {
        DrinkCursor(dateMs: dateMs == .min ? .min : dateMs - 1, uuid: lastUUID)
    }

    /// The store's order: by date, then by the UUID's bytes (SQLite's
    /// order of blobs, PostgreSQL's of `uuid`).
    public static func < (a: DrinkCursor, b: DrinkCursor) -> Bool {
        guard a.dateMs == b.dateMs else { return a.dateMs < b.dateMs }
        return withUnsafeBytes(of: a.uuid.uuid) { x in
            withUnsafeBytes(of: b.uuid.uuid) { y in memcmp(x.baseAddress!, y.baseAddress!, 16) < 0 }
        }
    }

    /// The greatest UUID: with a date, a cursor after every drink of that date.
    static let lastUUID = UUID(uuid: (255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255))
}
