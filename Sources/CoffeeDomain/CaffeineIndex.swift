import Foundation

/// The model's sums, kept per minute of drink date as drinks come and go,
/// so that a snapshot costs the same with 10 drinks in the window or
/// 100,000: it reads at most the 1,560 minutes of the window and the local
/// day, not the drinks.
///
/// Caffeine is a sum of exponential decays, so a drink's share of the dose
/// at any time `at` is `mg · 2^((date − T)/h) · 2^((T − at)/h)`: the first
/// factor is fixed once the drink is known (`T` is a reference time), the
/// second is common to all drinks. Each minute keeps the sum of the first
/// factor, the sum of mg and a count, plus its drinks. Minutes wholly inside
/// the window (or the local day) are read from their sums; the one or two
/// minutes where a boundary falls are read drink by drink, exactly. A minute
/// that lost or replaced a drink is summed again from its drinks before it
/// is read (subtracting would let rounding drift), and every sum is made
/// again from the drinks when the reference moves (every 12 hours of `at`),
/// so the result stays within a few ulps of `CaffeineModel.snapshot`.
public struct CaffeineIndex: Sendable {
    public let model: CaffeineModel

    private struct Minute: Sendable {
        var weighted = 0.0
        var mg = 0.0
        var drinks: [UUID: Drink] = [:]
        /// A drink left or was replaced since the sums were made.
        var stale = false
    }

    private var minutes: [Int64: Minute] = [:]
    /// Where each drink is, for removal by UUID.
    private var minuteOf: [UUID: Int64] = [:]
    /// The reference time `T` of the weights.
    private var reference: Date

    public init(model: CaffeineModel, reference: Date = Date()) {
        self.model = model
        self.reference = reference
    }

    public var count: Int { minuteOf.count }

    private var halfLife: Double { model.halfLifeHours * 3600 }

    private static func minute(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 / 60).rounded(.down)) }

    private func weight(_ drink: Drink) -> Double {
        drink.mgCaffeine * pow(2, drink.date.timeIntervalSince(reference) / halfLife)
    }

    /// Holds `drink`, replacing whatever its UUID held.
    public mutating func insert(_ drink: Drink) {
        remove(drink.uuid)
        let m = Self.minute(drink.date)
        minutes[m, default: Minute()].drinks[drink.uuid] = drink
        minutes[m]!.weighted += weight(drink)
        minutes[m]!.mg += drink.mgCaffeine
        minuteOf[drink.uuid] = m
    }

    /// Lets go of the drink with `uuid`, if held.
    public mutating func remove(_ uuid: UUID) {
        guard let m = minuteOf.removeValue(forKey: uuid) else { return }
        minutes[m]!.drinks[uuid] = nil
        if minutes[m]!.drinks.isEmpty {
            minutes[m] = nil
        } else {
            minutes[m]!.stale = true
        }
    }

    /// Lets go of every drink dated before `cutoff`.
    public mutating func removeAll(datedBefore cutoff: Date) {
        let last = Self.minute(cutoff)
        for (m, minute) in minutes where m <= last {
            for drink in minute.drinks.values where drink.date < cutoff { remove(drink.uuid) }
        }
    }

    /// Drops everything.
    public mutating func removeAll() {
        minutes = [:]
        minuteOf = [:]
    }

    private mutating func resum(_ m: Int64) {
        var weighted = 0.0
        var mg = 0.0
        for drink in minutes[m]!.drinks.values {
            weighted += weight(drink)
            mg += drink.mgCaffeine
        }
        minutes[m]!.weighted = weighted
        minutes[m]!.mg = mg
        minutes[m]!.stale = false
    }

    /// Makes every sum again from the drinks, against `reference`.
    public mutating func rebuild(reference: Date) {
        self.reference = reference
        for m in Array(minutes.keys) { resum(m) }
    }

    /// The model at `at`, as `CaffeineModel.snapshot` computes it from the
    /// same drinks. Mutating only to bring stale sums (and a reference more
    /// than 12 hours from `at`) up to date.
    public mutating func snapshot(at: Date, anchor: Int64) -> ModelSnapshot {
        if abs(at.timeIntervalSince(reference)) > 12 * 3600 { rebuild(reference: at) }
        let start = at - CaffeineModel.window
        let midnight = model.startOfDay(at: at)
        let (first, dayFirst, last) = (Self.minute(start), Self.minute(midnight), Self.minute(at))
        var weighted = 0.0
        var exactNow = 0.0
        var mgToday = 0.0
        var drinksToday = 0
        for m in min(first, dayFirst)...last {
            guard minutes[m] != nil else { continue }
            if minutes[m]!.stale { resum(m) }
            let minute = minutes[m]!
            // The dose: whole minutes from their sums, boundary minutes drink by drink.
            if m > first && m < last {
                weighted += minute.weighted
            } else if m >= first {
                for drink in minute.drinks.values where model.counts(drink, at: at) {
                    exactNow += model.remaining(mg: drink.mgCaffeine, taken: drink.date, at: at)
                }
            }
            // Today: the same, from local midnight.
            if m > dayFirst && m < last {
                mgToday += minute.mg
                drinksToday += minute.drinks.count
            } else if m >= dayFirst {
                for drink in minute.drinks.values where drink.date >= midnight && drink.date <= at {
                    mgToday += drink.mgCaffeine
                    drinksToday += 1
                }
            }
        }
        let mgNow = exactNow + weighted * pow(2, reference.timeIntervalSince(at) / halfLife)
        return model.snapshot(mgNow: mgNow, mgToday: mgToday, drinksToday: drinksToday, at: at, anchor: anchor)
    }
}
