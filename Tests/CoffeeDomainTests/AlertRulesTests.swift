import CoffeeDomain
import Foundation
import Testing

/// The rules of docs/protocol.md §16, pure: each told once per crossing,
/// cleared when it turns back, a new day starting the daily rule over in
/// silence, and the next moment to look computed from the curve.
@Suite("Alert rules")
struct AlertRulesTests {
    let berlin = TimeZone(identifier: "Europe/Berlin")!
    var rules: AlertRules { rules(bedtime: 23 * 60) }

    func rules(bedtime: Int?) -> AlertRules {
        var person = PersonSettings(model: CaffeineModel(halfLifeHours: 5, timeZone: berlin))
        person.levelOverMg = 300
        person.bedtime = bedtime.map { String(format: "%02d:%02d", $0 / 60, $0 % 60) }
        return AlertRules(configuration: AlertRules.Configuration(), settings: person)
    }

    func snapshot(mg: Double, today: Double, at text: String) -> ModelSnapshot {
        let at = RFC3339.parse(text)!
        var s = CaffeineModel(halfLifeHours: 5, timeZone: berlin).snapshot(
            mgNow: mg, mgToday: today, drinksToday: 1, at: at, anchor: 1)
        s.mgCaffeine = mg
        return s
    }

    func told(_ events: [AlertEvent]) -> [String] { events.map { "\($0.rule.rawValue) \($0.fired ? "fired" : "cleared")" } }

    @Test func eachCrossingIsToldOnceAndClearedWhenItTurnsBack() {
        let rules = rules(bedtime: nil)
        var state: [AlertRule: AlertStatus] = [:]
        // Nothing yet: the sleep threshold starts as under it, so nothing is told.
        #expect(rules.evaluate(snapshot(mg: 0, today: 0, at: "2025-06-02T08:00:00Z"), state: &state).isEmpty)
        // 350 mg at 08:00 local: over 300 and no longer fine to sleep; 350 today is under 400.
        #expect(
            told(rules.evaluate(snapshot(mg: 350, today: 350, at: "2025-06-02T06:00:00Z"), state: &state))
                == ["levelOver fired", "sleepThreshold cleared"])
        // The same again, and inside the band (290 > 270): nothing new.
        #expect(rules.evaluate(snapshot(mg: 340, today: 350, at: "2025-06-02T06:10:00Z"), state: &state).isEmpty)
        #expect(rules.evaluate(snapshot(mg: 290, today: 350, at: "2025-06-02T06:40:00Z"), state: &state).isEmpty)
        // Another drink: over the daily limit.
        #expect(
            told(rules.evaluate(snapshot(mg: 390, today: 450, at: "2025-06-02T07:00:00Z"), state: &state)) == ["dailyLimit fired"]
        )
        // Deleted again: cleared.
        #expect(
            told(rules.evaluate(snapshot(mg: 280, today: 350, at: "2025-06-02T07:01:00Z"), state: &state)) == [
                "dailyLimit cleared"
            ])
        // Out of the band by decay: cleared; then under the threshold: fine to sleep.
        #expect(
            told(rules.evaluate(snapshot(mg: 260, today: 350, at: "2025-06-02T08:00:00Z"), state: &state)) == [
                "levelOver cleared"
            ])
        #expect(
            told(rules.evaluate(snapshot(mg: 49.9, today: 350, at: "2025-06-02T19:00:00Z"), state: &state))
                == ["sleepThreshold fired"])
        // Over the limit today, a new day starts the daily rule over without a word.
        _ = rules.evaluate(snapshot(mg: 40, today: 500, at: "2025-06-02T20:00:00Z"), state: &state)
        #expect(state[.dailyLimit]?.active == true && state[.dailyLimit]?.key == "2025-06-02")
        #expect(rules.evaluate(snapshot(mg: 30, today: 0, at: "2025-06-02T22:30:00Z"), state: &state).isEmpty)  // 00:30 in Berlin
        #expect(state[.dailyLimit] == AlertStatus(active: false, key: "2025-06-03"))
    }

    @Test func aDrinkThatKeepsTheLevelOverTheThresholdAtBedtimeWarns() throws {
        var state: [AlertRule: AlertStatus] = [:]
        // 19:00 local with 150 mg: at 23:00, 4 h later, 150 × 0.5^0.8 = 86 mg > 50.
        let events = rules.evaluate(snapshot(mg: 150, today: 150, at: "2025-06-02T17:00:00Z"), state: &state)
        let warning = try #require(events.first { $0.rule == .bedtime })
        #expect(warning.fired && warning.title == "Not under 50 mg by 23:00")
        #expect(warning.message.contains("86 mg then") && warning.message.contains("under it from 02:55"), "\(warning.message)")
        // Deleted: it clears.
        #expect(
            told(rules.evaluate(snapshot(mg: 60, today: 60, at: "2025-06-02T17:01:00Z"), state: &state)) == ["bedtime cleared"])
    }

    @Test func theNextLookIsWhenTheCurveCrosses() throws {
        var state: [AlertRule: AlertStatus] = [:]
        let s = snapshot(mg: 100, today: 100, at: "2025-06-02T10:00:00Z")
        _ = rules.evaluate(s, state: &state)
        // 100 mg falls to 50 in one half-life: 15:00 UTC, before midnight and bedtime in Berlin.
        let next = try #require(rules.nextCheck(s, state: state))
        #expect(abs(next.timeIntervalSince(RFC3339.parse("2025-06-02T15:00:00Z")!) - 0.5) < 0.01)
        // Over 300: the next look is its band's crossing, 320 → 270 in 5 h × log2(320/270).
        let high = snapshot(mg: 320, today: 320, at: "2025-06-02T10:00:00Z")
        _ = rules.evaluate(high, state: &state)
        let back = try #require(rules.nextCheck(high, state: state))
        #expect(abs(back.timeIntervalSince(high.at) - (5 * 3600 * log2(320.0 / 270) + 0.5)) < 0.01)
    }
}
