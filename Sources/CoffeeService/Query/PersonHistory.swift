import CoffeeDomain
import Foundation
import HealthStore

/// A person's history from the store (docs/protocol.md §15): the buckets
/// that `history` answers and the history page draws. One read of the
/// store's index by date gives the drinks of the days and of the one
/// before; each day's mg and drinks, its peak and its hours over the sleep
/// threshold come from them by the model's formula; a week or a month is
/// the sum of its days.
struct PersonHistory: Sendable {
    let store: HealthStore
    let settings: PersonSettings

    /// At most this many days in one answer (a little over 54 years).
    static let maxDays = 20_000

    var calendar: HistoryCalendar { HistoryCalendar(timeZone: settings.timeZone) }

    /// The buckets of `grain` from the one that holds `from` to the one
    /// that holds `to`; nil when they span more than `maxDays` days.
    func buckets(_ grain: HistoryGrain, from: Date, to: Date) async throws -> [HistoryBucket]? {
        let calendar = self.calendar
        let first = calendar.start(of: grain, holding: from)
        let end = calendar.next(grain, after: calendar.start(of: grain, holding: to))
        guard let days = calendar.buckets(.day, from: first, to: end - 1, limit: Self.maxDays) else { return nil }
        let doses = try await store.doses(datedIn: (first - HistoryCurve.lookBack)...end)
        let measures = HistoryCurve(model: settings.model, thresholdMg: settings.sleepThresholdMg).measure(days, doses: doses)
        var buckets: [HistoryBucket] = []
        var day = 0
        while day < days.count {
            let start = days[day].start
            var bucket = HistoryBucket(
                start: start, end: grain == .day ? days[day].end : calendar.next(grain, after: start))
            while day < days.count, days[day].start < bucket.end {
                bucket.mg += measures[day].mg
                bucket.drinks += measures[day].drinks
                bucket.peakMg = max(bucket.peakMg, measures[day].peakMg)
                bucket.secondsOverThreshold += measures[day].secondsOverThreshold
                if measures[day].mg > settings.dailyLimitMg { bucket.daysOverLimit += 1 }
                day += 1
            }
            buckets.append(bucket)
        }
        return buckets
    }
}
