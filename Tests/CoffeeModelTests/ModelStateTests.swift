import CoffeeDomain
import CoffeeLifecycle
import CoffeeLogging
import CoffeeTestKit
import Foundation
import HealthStore
import Synchronization
import Testing

@testable import CoffeeModel

@Suite("ModelState: the seed's bugs stay fixed", .timeLimit(.minutes(2)))
struct ModelStateTests {
    /// Seed bug: `guard !newDrinks.isEmpty && !deletedDrinks.isEmpty` ignored add-only changes.
    @Test func addOnlyChangeApplies() {
        let f = Fixture()
        defer { f.cleanup() }
        var m = f.state()
        let changed = m.update(newDrinks: [f.drink(-60)], deletedDrinks: [], anchor: 1)
        #expect(changed)
        #expect(m.count == 1)
    }

    /// Same guard: delete-only changes were ignored too.
    @Test func deleteOnlyChangeApplies() {
        let f = Fixture()
        defer { f.cleanup() }
        var m = f.state()
        let a = f.drink(-60)
        m.update(newDrinks: [a], deletedDrinks: [], anchor: 1)
        m.update(newDrinks: [], deletedDrinks: [a.uuid], anchor: 2)
        #expect(m.count == 0)
        #expect(m.anchor == 2)
    }

    /// Seed bug: the filter kept exactly the deleted drinks.
    @Test func deletingOneKeepsTheOthers() {
        let f = Fixture()
        defer { f.cleanup() }
        var m = f.state()
        let a = f.drink(-60)
        let b = f.drink(-120)
        m.update(newDrinks: [a, b], deletedDrinks: [], anchor: 2)
        m.update(newDrinks: [], deletedDrinks: [a.uuid], anchor: 3)
        #expect(m.drinks == [b])
    }

    /// Seed bug: new drinks were appended without de-duplication by UUID.
    @Test func sameUUIDIsHeldOnce() {
        let f = Fixture()
        defer { f.cleanup() }
        var m = f.state()
        var a = f.drink(-60, mg: 100)
        m.update(newDrinks: [a], deletedDrinks: [], anchor: 1)
        a.mgCaffeine = 150
        a.version = 2
        m.update(newDrinks: [a], deletedDrinks: [], anchor: 2)
        #expect(m.drinks == [a])
    }

    /// Seed bug: `removeOutdatedDrinks` dropped drinks dated in the future.
    @Test func futureDrinksAreKeptAndCountOnceDue() {
        let f = Fixture()
        defer { f.cleanup() }
        var m = f.state()
        let future = f.drink(240)
        m.update(newDrinks: [future, f.drink(-40 * 3600)], deletedDrinks: [], anchor: 2)
        #expect(m.drinks == [future])
        let before = m.snapshot()?.mgCaffeine
        #expect(before == 0)
        f.clock.advance(by: 240)
        let due = m.snapshot()?.mgCaffeine
        #expect(due == 100)
    }

    /// A commit applies only when it follows on from the model's anchor;
    /// otherwise the model says what its owner must do instead.
    @Test func followSaysWhatACommitNeeds() {
        let f = Fixture()
        defer { f.cleanup() }
        var m = f.state()
        let a = f.drink(-60)
        let gap = m.apply(CommittedBatch(anchor: 2, previousAnchor: 1, log: [.added(a)]))
        #expect(gap == .gap)
        let tooLarge = m.apply(CommittedBatch(anchor: 9, previousAnchor: 0, log: [], isComplete: false))
        #expect(tooLarge == .tooLarge)
        let applied = m.apply(CommittedBatch(anchor: 1, previousAnchor: 0, log: [.added(a)]))
        #expect(applied == .applied)
        #expect(m.drinks == [a])
        #expect(m.anchor == 1)
        let held = m.apply(
            CommittedBatch(anchor: 1, previousAnchor: 0, log: [.deleted(Tombstone(uuid: a.uuid, version: 1))]))
        #expect(held == .alreadyHeld)
        #expect(m.drinks == [a])
    }

    /// A commit that writes a UUID more than once leaves the model in the
    /// UUID's final state, as the resolved changes (what `changes` carries)
    /// applied with `update` would.
    @Test func aUUIDWrittenTwiceInACommitEndsInItsFinalState() {
        let f = Fixture()
        defer { f.cleanup() }
        let (a, b, c, d) = (f.drink(-60), f.drink(-50), f.drink(-40), f.drink(-30))
        var b2 = b
        b2.version = 2
        var c2 = c
        c2.version = 2
        c2.date = f.clock.now() - 40 * 86_400  // a newer version dated out of the window
        let log: [CommittedBatch.Change] = [
            .added(a), .added(b), .added(c), .added(d), .deleted(Tombstone(uuid: a.uuid, version: 1)),
            .deleted(Tombstone(uuid: b.uuid, version: 1)), .added(b2), .added(c2),
        ]
        let batch = CommittedBatch(anchor: 8, previousAnchor: 0, log: log)
        var viaLog = f.state()
        let outcome = viaLog.apply(batch)
        #expect(outcome == .applied)
        var viaResolved = f.state()
        let resolved = batch.resolved()
        viaResolved.update(newDrinks: resolved.added, deletedDrinks: Set(resolved.deleted.map(\.uuid)), anchor: 8)
        #expect(viaLog.drinks == [b2, d])
        #expect(viaLog.drinks == viaResolved.drinks)
        #expect(viaLog.anchor == 8)
    }

    /// A commit of new records only goes in without lookups by UUID; a
    /// later deletion or new version of those drinks still finds them, and
    /// the prune lets old ones go.
    @Test func newRecordsGoInWithoutLookupsAndCanStillBeFound() {
        let f = Fixture()
        defer { f.cleanup() }
        var m = f.state()
        let (a, b, c) = (f.drink(-60), f.drink(-50), f.drink(-40))
        let old = Drink(mgCaffeine: 80, date: f.clock.now() - 40 * 86_400)  // out of the window: not held
        var batch = CommittedBatch(anchor: 4, previousAnchor: 0, log: [.added(a), .added(b), .added(c), .added(old)])
        batch.writesOnlyNewRecords = true
        #expect(m.apply(batch) == .applied)
        #expect(m.drinks == [a, b, c] && m.count == 3)
        var b2 = b
        b2.version = 2
        b2.mgCaffeine = 10
        let later = CommittedBatch(
            anchor: 6, previousAnchor: 4, log: [.deleted(Tombstone(uuid: a.uuid, version: 1)), .added(b2)])
        #expect(m.apply(later) == .applied)
        #expect(m.drinks == [b2, c] && m.count == 2)
        var direct = f.state()
        direct.update(newDrinks: [b2, c], deletedDrinks: [], anchor: 6)
        let (got, want) = (m.snapshot()!, direct.snapshot()!)
        #expect(abs(got.mgCaffeine - want.mgCaffeine) < 1e-9 && got.drinksToday == want.drinksToday)
    }

    /// Commits that arrived together apply together, in order, up to the
    /// first that does not follow on; the rest are left to the catch-up.
    @Test func arrivedCommitsApplyTogetherUpToAGap() {
        let f = Fixture()
        defer { f.cleanup() }
        var m = f.state()
        let (a, b, c) = (f.drink(-60), f.drink(-50), f.drink(-40))
        let first = m.apply([
            CommittedBatch(anchor: 1, previousAnchor: 0, log: [.added(a)]),
            CommittedBatch(anchor: 2, previousAnchor: 1, log: [.added(b)]),
        ])
        #expect(first.outcome == .applied && first.changed)
        #expect(m.drinks == [a, b])
        #expect(m.anchor == 2)
        let none = m.apply([])
        #expect(none.outcome == .alreadyHeld && !none.changed)
        let gap = m.apply([
            CommittedBatch(anchor: 4, previousAnchor: 3, log: [.added(c)]),
            CommittedBatch(anchor: 5, previousAnchor: 4, log: [.deleted(Tombstone(uuid: a.uuid, version: 1))]),
        ])
        #expect(gap.outcome == .gap && !gap.changed)
        #expect(m.drinks == [a, b])
        #expect(m.anchor == 2)
    }

    /// Every way the held drinks change (a commit's log, a batch of changes,
    /// a reset, a prune) reaches the index: the snapshot equals the model
    /// computed whole from the drinks held.
    @Test func theSnapshotEqualsTheModelOfTheDrinksHeld() {
        let f = Fixture()
        defer { f.cleanup() }
        var m = f.state()
        var drinks = (0..<50).map { f.drink(-Double($0) * 600, mg: Double(10 + $0)) }
        m.reset(drinks: drinks, anchor: 1, completeSince: f.clock.now() - CaffeineModel.retention)
        let replaced = Drink(uuid: drinks[3].uuid, mgCaffeine: 300, date: drinks[3].date + 60, version: 2, source: nil)
        m.update(newDrinks: [replaced, f.drink(-30)], deletedDrinks: [drinks[5].uuid, drinks[7].uuid], anchor: 2)
        drinks[3] = replaced
        _ = m.apply(CommittedBatch(anchor: 3, previousAnchor: 2, log: [.deleted(Tombstone(uuid: drinks[9].uuid, version: 1))]))
        f.clock.advance(by: 20 * 3600)  // many leave the window
        m.update(newDrinks: [f.drink(-10)], deletedDrinks: [], anchor: 4)
        let held = Dictionary(uniqueKeysWithValues: m.drinks.map { ($0.uuid, $0) })
        let snapshot = m.snapshot()!
        let exact = m.caffeine.snapshot(of: Array(held.values), at: f.clock.now(), anchor: 4)
        #expect(abs(snapshot.mgCaffeine - exact.mgCaffeine) < 1e-9 * max(1, exact.mgCaffeine))
        #expect(snapshot.drinksToday == exact.drinksToday && abs(snapshot.cupsToday - exact.cupsToday) < 1e-12)
        #expect(held[drinks[5].uuid] == nil && held[drinks[3].uuid]?.mgCaffeine == 300)
    }
}
