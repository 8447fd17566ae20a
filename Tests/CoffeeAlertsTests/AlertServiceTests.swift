import CoffeeDomain
import CoffeeLifecycle
import CoffeeLogging
import CoffeeTestKit
import Foundation
import HealthStore
import Synchronization
import Testing

@testable import CoffeeAlerts
@testable import CoffeeModel

/// The rules' service (docs/protocol.md §16) over a real store and model,
/// on injected clocks: the sleep threshold's crossing with no drink is found
/// by the timer at its minute; what is decided is in the outbox with the
/// rules' state, so a new service over the same store tells nothing again.
@Suite("The alerts' service", .timeLimit(.minutes(1)))
struct AlertServiceTests {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ct-alerts-\(UUID().uuidString)")
    let wall = ManualClock(RFC3339.parse("2025-06-02T10:00:00Z")!)
    let timers = TestClock()
    let logger = Logger(label: "test")
    /// The person's settings, without the bedtime warning (a setting of theirs,
    /// §15), so that each test sees only what it is about.
    let person = Self.person(bedtime: nil)
    let rules = AlertRules.Configuration()

    static func person(bedtime: String?) -> PersonSettings {
        var person = PersonSettings(model: CaffeineModel(halfLifeHours: 5, timeZone: TimeZone(identifier: "UTC")!))
        person.bedtime = bedtime
        return person
    }

    /// - Parameter observing: the rules look at each model published; without,
    ///   only at what a test hands `evaluate` and when their timer rings.
    func parts(
        file: String = "s.sqlite", person: PersonSettings? = nil, observing: Bool = true,
        prepare: (HealthStore) async throws -> Void = { _ in }
    ) async throws -> (HealthStore, ModelService, AlertService, Recorder) {
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        var configuration = HealthStore.Configuration(path: dir.appendingPathComponent(file).path, clock: wall)
        configuration.settingsDefaults = person ?? self.person
        let store = try HealthStore(configuration: configuration, logger: logger)
        try await prepare(store)
        let announced = Recorder()
        let model = ModelService(
            store: store, cache: nil, clock: wall,
            configuration: .init(roundInterval: .milliseconds(1), refreshInterval: .seconds(3600), clock: ContinuousClock()),
            logger: logger)
        let alerts = AlertService(
            store: store, model: model, rules: rules, receivers: ["webhook"], wallClock: wall,
            timerClock: timers, logger: logger, announce: { json in announced.append(json) },
            wakeDeliverers: {})
        if observing { model.observeModels { snapshot in alerts.observe(snapshot) } }
        try await model.start()
        try await alerts.start()
        return (store, model, alerts, announced)
    }

    func rules(_ announced: Recorder) -> [String] {
        announced.all.map { json in
            guard case .string(let rule)? = json[member: "rule"], case .string(let event)? = json[member: "event"] else {
                return "?"
            }
            return "\(rule) \(event)"
        }
    }

    @Test func theSleepThresholdsCrossingIsToldAtItsMinuteWithNoDrink() async throws {
        let (store, model, alerts, announced) = try await parts()
        defer { try? FileManager.default.removeItem(at: dir) }
        let group = ServiceGroup(services: [model, alerts], logger: logger)
        let running = Task { try await group.run() }
        _ = try await store.save([Drink(mgCaffeine: 100, date: wall.now())])
        // The drink: no longer under the threshold (50 mg).
        try await eventually { rules(announced) == ["sleepThreshold cleared"] }
        let pending = try await store.dueAlerts(receiver: "webhook", nowMs: .max, limit: 10)
        #expect(pending.count == 1)
        // 100 mg halves in five hours: under 50 mg at 15:00. A minute before, nothing.
        wall.advance(by: 5 * 3600 - 60)
        timers.advance(by: .seconds(5 * 3600 - 60))
        try await Task.sleep(for: .milliseconds(100))
        #expect(rules(announced) == ["sleepThreshold cleared"])
        wall.advance(by: 61)
        timers.advance(by: .seconds(61))
        try await eventually { rules(announced) == ["sleepThreshold cleared", "sleepThreshold fired"] }
        let told = try #require(announced.all.last)
        #expect(told[member: "message"] == .string("Caffeine is under 50 mg from 15:00 (50 mg now): fine to sleep."))
        #expect(try await store.dueAlerts(receiver: "webhook", nowMs: .max, limit: 10).count == 2)
        #expect(try await store.alertStates().contains(OutboxRuleState(rule: "sleepThreshold", active: true, key: "", turns: 2)))
        group.triggerGracefulShutdown()
        _ = try? await running.value
        await store.close()
    }

    /// A drink that puts the crossing off keeps the timer set for the
    /// earlier one (not made again for every model): it rings early, finds
    /// nothing, and sets the next, which tells at the new crossing.
    @Test func aLaterCrossingKeepsTheTimerWhichLooksAgain() async throws {
        let (store, model, alerts, announced) = try await parts(observing: false)
        defer { try? FileManager.default.removeItem(at: dir) }
        let group = ServiceGroup(services: [model, alerts], logger: logger)
        let running = Task { try await group.run() }
        _ = try await store.save([Drink(mgCaffeine: 100, date: wall.now())])
        await alerts.evaluate(try #require(await model.snapshot()))
        #expect(rules(announced) == ["sleepThreshold cleared"])
        try await timerSet()  // for 15:00, when 100 mg is down to 50
        // 200 mg now: under 50 mg at 20:00.
        _ = try await store.save([Drink(mgCaffeine: 100, date: wall.now())])
        await alerts.evaluate(try #require(await model.snapshot()))
        wall.advance(by: 5 * 3600 + 60)
        timers.advance(by: .seconds(5 * 3600 + 60))
        try await timerSet()  // it rang at 15:00, found 100 mg, and set the next
        #expect(rules(announced) == ["sleepThreshold cleared"])
        wall.advance(by: 5 * 3600)
        timers.advance(by: .seconds(5 * 3600))
        try await eventually { rules(announced) == ["sleepThreshold cleared", "sleepThreshold fired"] }
        group.triggerGracefulShutdown()
        _ = try? await running.value
        await store.close()
    }

    /// A crossing brought forward (a drink deleted) replaces the later timer.
    @Test func anEarlierCrossingReplacesTheTimer() async throws {
        let (store, model, alerts, announced) = try await parts(observing: false)
        defer { try? FileManager.default.removeItem(at: dir) }
        let group = ServiceGroup(services: [model, alerts], logger: logger)
        let running = Task { try await group.run() }
        let large = Drink(mgCaffeine: 200, date: wall.now())
        _ = try await store.save([large])
        await alerts.evaluate(try #require(await model.snapshot()))
        try await timerSet()  // for 20:00
        _ = try await store.save([Drink(mgCaffeine: 100, date: wall.now())])
        _ = try await store.delete([Deletion(uuid: large.uuid)])
        await alerts.evaluate(try #require(await model.snapshot()))  // 100 mg: under 50 mg at 15:00
        wall.advance(by: 5 * 3600 + 60)
        timers.advance(by: .seconds(5 * 3600 + 60))
        try await eventually { rules(announced) == ["sleepThreshold cleared", "sleepThreshold fired"] }
        group.triggerGracefulShutdown()
        _ = try? await running.value
        await store.close()
    }

    /// Returns once the rules' timer waits on the test's clock; records an issue after 10 s.
    func timerSet() async throws {
        let set = await withTaskGroup(of: Bool.self) { group in
            group.addTask { [timers] in
                await timers.waitForSleepers(1)
                return true
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(10))
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
        #expect(set, "no timer was set within 10 s")
    }

    /// What was told stays told: a new service over the store, with the same model, tells nothing.
    @Test func aRestartTellsNothingAgain() async throws {
        let (store, model, alerts, announced) = try await parts()
        defer { try? FileManager.default.removeItem(at: dir) }
        _ = try await store.save([Drink(mgCaffeine: 350, date: wall.now())])
        let snapshot = try #require(await model.snapshot())
        await alerts.evaluate(snapshot)
        #expect(rules(announced) == ["levelOver fired", "sleepThreshold cleared"])
        let again = AlertService(
            store: store, model: model, rules: rules, receivers: ["webhook"], wallClock: wall,
            timerClock: timers, logger: logger, announce: { json in announced.append(json) },
            wakeDeliverers: {})
        try await again.start()
        await again.evaluate(snapshot)
        #expect(announced.all.count == 2)
        await store.close()
    }

    /// The person's bedtime and level limit (§15) over the configuration's:
    /// the rules go by the new values from the next model on.
    @Test func aChangedBedtimeOrLevelLimitMovesItsAlert() async throws {
        let (store, model, alerts, announced) = try await parts(person: Self.person(bedtime: "23:00"))
        defer { try? FileManager.default.removeItem(at: dir) }
        // 100 mg at 10:00, halved every 5 h: 16.5 mg at 23:00, under the threshold (50 mg): no bedtime alert.
        _ = try await store.save([Drink(mgCaffeine: 100, date: wall.now())])
        await alerts.evaluate(try #require(await model.snapshot()))
        #expect(rules(announced) == ["sleepThreshold cleared"])
        // Bedtime at noon: 75.8 mg then. A level limit of 80 mg: the level (100 mg) is over it.
        // Written through the store, which owns them: the rules read them from there.
        _ = try await store.writeSettings(scope: "person", [("bedtime", "\"12:00\""), ("levelOverMg", "80")])
        await alerts.evaluate(try #require(await model.snapshot()))
        #expect(rules(announced) == ["sleepThreshold cleared", "levelOver fired", "bedtime fired"])
        #expect(announced.all.last?[member: "key"] == .string("2025-06-02"))
        #expect(announced.all[1][member: "limitMg"] == .double(80))
        await store.close()
    }

    /// An alert's id is derived from the store, the rule and its turn: the
    /// same turn decided on a copy of the store that did not hold the
    /// decision (a promoted standby) has the same id, a later turn another.
    @Test func theSameTurnDecidedAgainHasTheSameID() async throws {
        let (store, model, alerts, announced) = try await parts()
        defer { try? FileManager.default.removeItem(at: dir) }
        _ = try await store.save([Drink(mgCaffeine: 350, date: wall.now())])
        let drinks = try await store.changes(since: 0, limit: 10)
        let identity = store.identity
        await alerts.evaluate(try #require(await model.snapshot()))
        // A standby that had the drink but not the alert's commit.
        let (copy, copyModel, copyAlerts, again) = try await parts(file: "copy.sqlite") { copy in
            var changes = drinks.anchored
            changes.kept = KeptRows()
            try await copy.replicate(.init(changes: changes, through: drinks.anchor, replacesAll: true, identity: identity))
        }
        await copyAlerts.evaluate(try #require(await copyModel.snapshot()))
        let ids = announced.all.map { $0[member: "id"] }
        #expect(ids.count == 2 && again.all.map { $0[member: "id"] } == ids)
        // A later turn of the same rule: another id.
        _ = try await store.delete([Deletion(uuid: drinks.added[0].uuid)])
        await alerts.evaluate(try #require(await model.snapshot()))
        #expect(Set(announced.all.map { $0[member: "id"] }).count == 4)
        await store.close()
        await copy.close()
    }

    final class Recorder: Sendable {
        private let items = Mutex<[JSONValue]>([])
        func append(_ item: JSONValue) { items.withLock { $0.append(item) } }
        var all: [JSONValue] { items.withLock { $0 } }
    }

    func eventually(_ condition: () async throws -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while try await !condition() {
            guard ContinuousClock.now < deadline else {
                Issue.record("the condition did not come true in 10 s")
                return
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }
}
