import CoffeeDomain
import Foundation
import Testing

/// The independently computed vectors of ../shared/vectors/model.json.
struct Vectors: Decodable {
    struct Case: Decodable {
        var timeZone: String
        var halfLifeHours: Double
        var at: String
        var expected: Expected
    }
    struct Expected: Decodable {
        var mgCaffeine: Double
        var level: String
        var cupsToday: Double?
        var cupsLevel: String?
        var drinksToday: Int?
        var timelineCount: Int?
        var timeline: [String: Point]?
    }
    struct Point: Decodable {
        var date: String
        var mgCaffeine: Double
    }
    var drinks: [DrinkInput]
    var cases: [Case]

    static func load() throws -> Vectors {
        let url = Bundle.module.url(forResource: "Vectors/model", withExtension: "json")!
        return try JSONDecoder().decode(Vectors.self, from: Data(contentsOf: url))
    }

    func validDrinks() throws -> [Drink] {
        let validator = DrinkValidator()
        return try drinks.map { try validator.drink(from: $0, now: .distantFuture, defaultSource: "test") }
    }
}

@Suite("Model vectors (docs/protocol.md §3)", .timeLimit(.minutes(2)))
struct ModelVectorTests {
    @Test(arguments: 0..<4)
    func vectorCase(_ index: Int) throws {
        let vectors = try Vectors.load()
        let c = vectors.cases[index]
        let model = CaffeineModel(halfLifeHours: c.halfLifeHours, timeZone: TimeZone(identifier: c.timeZone)!)
        let at = RFC3339.parse(c.at)!
        let snapshot = model.snapshot(of: try vectors.validDrinks(), at: at, anchor: 7)
        #expect(abs(snapshot.mgCaffeine - c.expected.mgCaffeine) < 1e-6)
        #expect(snapshot.level.rawValue == c.expected.level)
        #expect(snapshot.anchor == 7)
        if let cups = c.expected.cupsToday { #expect(abs(snapshot.cupsToday - cups) < 1e-6) }
        if let level = c.expected.cupsLevel { #expect(snapshot.cupsLevel.rawValue == level) }
        if let n = c.expected.drinksToday { #expect(snapshot.drinksToday == n) }
        if let n = c.expected.timelineCount { #expect(snapshot.timeline.count == n) }
        for (key, point) in c.expected.timeline ?? [:] {
            let actual = snapshot.timeline[Int(key)! - 1]
            #expect(RFC3339.string(actual.date) == point.date)
            #expect(abs(actual.mgCaffeine - point.mgCaffeine) < 1e-6)
        }
    }

    @Test func handComputedSingleDrink() {
        let model = CaffeineModel(halfLifeHours: 5, timeZone: TimeZone(identifier: "UTC")!)
        let taken = RFC3339.parse("2026-11-29T08:00:00Z")!
        let d = Drink(mgCaffeine: 200, date: taken)
        // Exactly one half-life later: half the dose; two: a quarter.
        #expect(abs(model.mgCaffeine([d], at: taken + 5 * 3600) - 100) < 1e-9)
        #expect(abs(model.mgCaffeine([d], at: taken + 10 * 3600) - 50) < 1e-9)
        let s = model.snapshot(of: [d], at: taken + 5 * 3600, anchor: 1)
        #expect(s.level == .green)
        #expect(abs(s.cupsToday - 200.0 / 96) < 1e-9)
        #expect(abs(s.timeline[0].mgCaffeine - 200 * pow(0.5, (5 * 3600 + 300) / 18000.0)) < 1e-9)
    }

    @Test func levelsAtTheirThresholds() {
        #expect(Level.forDose(mg: 199.999) == .green)
        #expect(Level.forDose(mg: 200) == .yellow)
        #expect(Level.forDose(mg: 400) == .red)
        #expect(Level.forCups(2.99) == .green)
        #expect(Level.forCups(3) == .yellow)
        #expect(Level.forCups(5) == .red)
    }

    /// Seed bug: a drink dated after the target time added more than its dose.
    @Test func drinkAfterTargetTimeAddsNothing() {
        let model = CaffeineModel(halfLifeHours: 5, timeZone: TimeZone(identifier: "UTC")!)
        let at = RFC3339.parse("2026-11-29T13:00:00Z")!
        #expect(model.remaining(mg: 100, taken: at + 600, at: at) == 0)
        #expect(model.mgCaffeine([Drink(mgCaffeine: 100, date: at + 600)], at: at) == 0)
    }

    @Test func midnightFollowsTheTimeZone() {
        let at = RFC3339.parse("2026-11-29T13:00:00Z")!
        let tokyo = CaffeineModel(timeZone: TimeZone(identifier: "Asia/Tokyo")!)
        #expect(RFC3339.string(tokyo.startOfDay(at: at)) == "2026-11-28T15:00:00.000Z")  // 22:00 JST
        let la = CaffeineModel(timeZone: TimeZone(identifier: "America/Los_Angeles")!)
        #expect(RFC3339.string(la.startOfDay(at: at)) == "2026-11-29T08:00:00.000Z")
    }

    @Test func twentyFiveHourDayCountsDrinksOlderThanTheWindow() {
        // 2026-11-01: daylight saving time ends in Los Angeles; the local day lasts 25 h.
        let model = CaffeineModel(timeZone: TimeZone(identifier: "America/Los_Angeles")!)
        let early = Drink(mgCaffeine: 96, date: RFC3339.parse("2026-11-01T07:10:00Z")!)  // 00:10 PDT
        let at = RFC3339.parse("2026-11-02T07:50:00Z")!  // 23:50 PST, 24 h 40 min later
        let s = model.snapshot(of: [early], at: at, anchor: 0)
        #expect(s.drinksToday == 1)
        #expect(s.mgCaffeine == 0)
    }
}
