import Foundation

/// The formulas of docs/protocol.md §3: pure, with the time passed in.
public struct CaffeineModel: Sendable, Hashable {
    /// The window of drinks that count: the last 24 hours.
    public static let window: TimeInterval = 24 * 3600
    /// What a holder of current drinks must keep so that the 24 h dose, a
    /// 25-hour local day (the end of daylight saving time) and the picture's
    /// curve (from 12 hours back, each point the dose of the 24 h before it:
    /// `CaffeineChart.window`) are covered.
    public static let retention: TimeInterval = 36 * 3600
    /// Timeline spacing, as the seed's complication timeline.
    public static let timelineStep: TimeInterval = 5 * 60
    /// One small coffee, the unit of "cups".
    public static let mgPerCup: Double = 96

    public var halfLifeHours: Double
    public var timeZone: TimeZone

    public init(halfLifeHours: Double = 5, timeZone: TimeZone = .current) {
        self.halfLifeHours = halfLifeHours
        self.timeZone = timeZone
    }

    /// Caffeine left of `mg` taken at `taken`, at time `at`.
    ///
    /// - Important: a drink taken after `at` contributes nothing (the seed
    ///   let it add more than its dose, since the exponent went negative).
    public func remaining(mg: Double, taken: Date, at: Date) -> Double {
        let elapsed = at.timeIntervalSince(taken)
        guard elapsed >= 0 else { return 0 }
        return mg * pow(0.5, elapsed / (halfLifeHours * 3600))
    }

    /// The drinks that count at `at`: dated in the 24 h up to and including `at`.
    public func counts(_ drink: Drink, at: Date) -> Bool {
        drink.date <= at && drink.date >= at - Self.window
    }

    /// Caffeine in the body at `at` from `drinks`.
    public func mgCaffeine(_ drinks: some Collection<Drink>, at: Date) -> Double {
        var total = 0.0
        for drink in drinks where counts(drink, at: at) {
            total += remaining(mg: drink.mgCaffeine, taken: drink.date, at: at)
        }
        return total
    }

    /// Local midnight of the day that contains `at`, in `timeZone`.
    public func startOfDay(at: Date) -> Date {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        return calendar.startOfDay(for: at)
    }

    /// The full model at `at`, reflecting store anchor `anchor`.
    public func snapshot(of drinks: some Collection<Drink>, at: Date, anchor: Int64) -> ModelSnapshot {
        let counted = drinks.filter { counts($0, at: at) }
        let midnight = startOfDay(at: at)
        var mgNow = 0.0
        for drink in counted { mgNow += remaining(mg: drink.mgCaffeine, taken: drink.date, at: at) }
        // Today is counted from all drinks, not just the 24 h window: on the
        // day daylight saving time ends a local day lasts 25 hours.
        var mgToday = 0.0
        var drinksToday = 0
        for drink in drinks where drink.date >= midnight && drink.date <= at {
            mgToday += drink.mgCaffeine
            drinksToday += 1
        }
        return snapshot(mgNow: mgNow, mgToday: mgToday, drinksToday: drinksToday, at: at, anchor: anchor)
    }

    /// The model at `at` from its three sums (`CaffeineIndex` keeps them as drinks come and go).
    public func snapshot(mgNow: Double, mgToday: Double, drinksToday: Int, at: Date, anchor: Int64) -> ModelSnapshot {
        let cups = mgToday / Self.mgPerCup
        // Every point decays the same drinks, so each is mgNow decayed by
        // its distance from `at`: O(points), whatever the number of drinks.
        let points = Int(Self.window / Self.timelineStep) - 1  // 287: at+5 min … at+23 h 55 min
        var timeline: [ModelSnapshot.Point] = []
        timeline.reserveCapacity(points)
        for i in 1...points {
            let offset = Double(i) * Self.timelineStep
            timeline.append(
                ModelSnapshot.Point(date: at + offset, mgCaffeine: mgNow * pow(0.5, offset / (halfLifeHours * 3600))))
        }
        return ModelSnapshot(
            anchor: anchor, at: at, mgCaffeine: mgNow, level: .forDose(mg: mgNow), cupsToday: cups,
            cupsLevel: .forCups(cups), drinksToday: drinksToday, halfLifeHours: halfLifeHours, timeline: timeline)
    }
}

/// What complications and widgets draw: docs/protocol.md §3 "the model".
public struct ModelSnapshot: Sendable, Hashable {
    public struct Point: Sendable, Hashable {
        public var date: Date
        public var mgCaffeine: Double

        public init(date: Date, mgCaffeine: Double) {
            self.date = date
            self.mgCaffeine = mgCaffeine
        }
    }

    public var anchor: Int64
    public var at: Date
    public var mgCaffeine: Double
    public var level: Level
    public var cupsToday: Double
    public var cupsLevel: Level
    public var drinksToday: Int
    public var halfLifeHours: Double
    public var timeline: [Point]
    /// The store's identity (docs/protocol.md §13) whose `anchor` this is;
    /// nil for a model computed apart from a store.
    public var identity: StoreIdentity? = nil
}

extension CaffeineModel {
    /// How long, with no drink, until a level of `mg` falls to `threshold`,
    /// one `halfLife` (seconds) per halving: `halfLife × log2(mg / threshold)`,
    /// the closed form of §3's decay; nil when it is at or under it already
    /// (or the threshold is not above 0). The alerts' timer, MQTT's
    /// `under_threshold_at`, the picture's sleep time and history's hours over
    /// the threshold all go by it.
    public static func secondsToFall(from mg: Double, to threshold: Double, halfLife: TimeInterval) -> TimeInterval? {
        guard mg > threshold, threshold > 0 else { return nil }
        return halfLife * log2(mg / threshold)
    }
}
