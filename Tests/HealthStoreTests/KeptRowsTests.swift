import CoffeeDomain
import Foundation
import Synchronization
import Testing

@testable import HealthStore

/// The rows a store keeps beside its drinks (docs/protocol.md §15, "In the
/// feed"): a settings change, an alert decided and a delivery settled are
/// commits with anchors of their own, and `changes` carries their rows at
/// those anchors, so a standby fed its primary's pages holds the person's
/// settings, the rules' state and the outbox as the primary does.
@Suite("The rows beside the drinks", .timeLimit(.minutes(2)))
struct KeptRowsTests {
    let alert = OutboxItem(id: "A1", receiver: "webhook", body: #"{"id":"A1","rule":"levelOver"}"#, createdMs: 1000, nextMs: 1000)

    @Test(arguments: StoreBackend.available) func settingsAlertsAndDeliveriesAreInTheFeed(_ backend: StoreBackend) async throws {
        let dir = TemporaryDirectory(backend)
        defer { dir.cleanup() }
        let store = try openStore(dir)
        let announced = Mutex<[CommittedBatch]>([])
        await store.observeCommits { batch in announced.withLock { $0.append(batch) } }
        let first = try await store.save([drink(mg: 96)])

        let settings = try await store.writeSettings(scope: "person", [("timeZone", "\"Europe/Berlin\"")])
        #expect(
            announced.withLock { $0.last?.kept.settings }
                == [.init(scope: "person", name: "timeZone", value: "\"Europe/Berlin\"", anchor: settings.anchor)])

        let state = OutboxRuleState(rule: "levelOver", active: true, key: "", turns: 1)
        try await store.recordAlerts(states: [state], items: [alert])
        let decided = await store.anchor
        #expect(decided == settings.anchor + 1)
        let batch = try #require(announced.withLock { $0.last })
        #expect(batch.anchor == decided && batch.log.isEmpty)
        #expect(batch.kept.ruleStates == [.init(state, anchor: decided)])
        #expect(batch.kept.alerts == [.init(alert, settled: false, anchor: decided)])

        // A page from before them carries each row at its anchor; one from after them, none.
        let page = try await store.changes(since: first.anchor, limit: 10)
        #expect(page.anchor == decided && page.added.isEmpty)
        #expect(page.kept.settings.map(\.anchor) == [settings.anchor])
        #expect(page.kept.ruleStates.map(\.state) == [state] && page.kept.alerts.map(\.settled) == [false])
        #expect(try await store.changes(since: decided, limit: 10).kept.isEmpty)
        // From null: every row.
        let whole = try await store.changes(since: nil, limit: 10)
        #expect(whole.kept.settings.count == 1 && whole.kept.ruleStates.count == 1 && whole.kept.alerts.count == 1)

        // Retries alone move no anchor; a delivery does, and its row stays, settled.
        var tried = alert
        tried.attempts = 1
        tried.nextMs = 5000
        try await store.settleAlerts(done: [], retried: [tried])
        #expect(await store.anchor == decided)
        #expect(try await store.dueAlerts(receiver: "webhook", nowMs: 4999, limit: 10).isEmpty)
        try await store.settleAlerts(done: [tried], retried: [])
        let settled = await store.anchor
        #expect(settled == decided + 1)
        #expect(try await store.dueAlerts(receiver: "webhook", nowMs: .max, limit: 10).isEmpty)
        #expect(try await store.outboxSummary().isEmpty)
        let after = try await store.changes(since: decided, limit: 10)
        #expect(after.kept.alerts.map { [$0.settled ? 1 : 0, $0.anchor] } == [[1, settled]])
        #expect(after.kept.ruleStates.isEmpty && after.kept.settings.isEmpty)
        await store.close()
    }

    /// A standby fed the primary's pages (small ones, from 0, the first taking
    /// its identity) holds the same settings, rules' state and outbox, under
    /// the same anchors; a delivery settled on the primary is settled there.
    @Test func aStandbyFedThePagesHoldsThemAsThePrimaryDoes() async throws {
        let dirs = (TemporaryDirectory(), TemporaryDirectory())
        defer {
            dirs.0.cleanup()
            dirs.1.cleanup()
        }
        let primary = try openStore(dirs.0)
        let standby = try openStore(dirs.1)
        _ = try await primary.save([drink(mg: 96), drink(mg: 64)])
        _ = try await primary.writeSettings(scope: "person", [("halfLifeHours", "4"), ("bedtime", "\"22:30\"")])
        _ = try await primary.writeSettings(scope: "catalogue", [("flatWhite", #"{"mgCaffeine":130,"retired":false}"#)])
        _ = try await primary.save([drink(mg: 32)])
        let second = OutboxItem(id: "A2", receiver: "webhook", body: #"{"id":"A2"}"#, createdMs: 2000, nextMs: 2000)
        try await primary.recordAlerts(
            states: [OutboxRuleState(rule: "levelOver", active: true, key: "", turns: 1)], items: [alert, second])
        _ = try await primary.writeSettings(scope: "person", [("halfLifeHours", "3")])  // written again: its latest anchor
        try await primary.settleAlerts(done: [alert], retried: [])

        var anchor: Int64 = 0
        var identity: StoreIdentity? = primary.identity
        while true {
            let page = try await primary.changes(since: anchor, limit: 1)
            try await standby.replicate(
                .init(changes: page.anchored, through: page.anchor, replacesAll: identity != nil, identity: identity))
            identity = nil
            anchor = page.anchor
            if !page.hasMore { break }
        }
        #expect(await standby.anchor == primary.anchor)
        #expect(standby.settings == primary.settings)
        #expect(standby.settings["person"]["halfLifeHours"] == "3")
        #expect(try await standby.alertStates() == primary.alertStates())
        #expect(try await standby.dueAlerts(receiver: "webhook", nowMs: .max, limit: 10).map(\.id) == ["A2"])
        let (a, b) = (try await primary.changes(since: 0, limit: 1000), try await standby.changes(since: 0, limit: 1000))
        #expect(b.kept == a.kept && b.added == a.added)
        await primary.close()
        await standby.close()
        // Kept across a reopen: what a promotion starts from.
        let promoted = try openStore(dirs.1)
        #expect(promoted.settings["catalogue"]["flatWhite"] != nil)
        #expect(try await promoted.dueAlerts(receiver: "webhook", nowMs: .max, limit: 10).map(\.id) == ["A2"])
        await promoted.close()
    }

    /// Rows handed over out of order (a standby of a standby gets a page's
    /// rows with a later page): the row of the later anchor stays.
    @Test func anOlderRowNeverReplacesANewerOne() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let standby = try openStore(dir)
        var newer = AnchoredChanges()
        newer.kept.settings = [.init(scope: "person", name: "halfLifeHours", value: "3", anchor: 5)]
        try await standby.replicate(.init(changes: newer, through: 5))
        var older = AnchoredChanges()
        older.kept.settings = [.init(scope: "person", name: "halfLifeHours", value: "4", anchor: 4)]
        older.kept.alerts = [.init(alert, settled: false, anchor: 4)]
        try await standby.replicate(.init(changes: older, through: 6))
        #expect(standby.settings["person"]["halfLifeHours"] == "3")
        #expect(try await standby.dueAlerts(receiver: "webhook", nowMs: .max, limit: 10).count == 1)
        var beyond = AnchoredChanges()
        beyond.kept.settings = [.init(scope: "person", name: "timeZone", value: "\"UTC\"", anchor: 9)]
        await #expect(throws: StoreError.self) { try await standby.replicate(.init(changes: beyond, through: 8)) }
        await standby.close()
    }
}
