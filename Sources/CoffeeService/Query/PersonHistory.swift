import CoffeeDomain
import Foundation
import HealthStore

/// A person's history from the store (docs/protocol.md §15): the buckets
/// that `history` answers and the history page draws. Each day's mg and
/// drinks are summed in the store (a range of its index by date); the
/// peaks and the hours over the sleep threshold come from the drinks of
/// those days and the one before, by the model's formula; a week or a
/// month is the sum of its days.
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
        let intake = try await store.intake(in: days)
        let doses = try await store.doses(datedIn: (first - HistoryCurve.lookBack)...end)
        let measures = HistoryCurve(model: settings.model, thresholdMg: settings.sleepThresholdMg).measure(days, doses: doses)
        var buckets: [HistoryBucket] = []
        var day = 0
        while day < days.count {
            let start = days[day].start
            var bucket = HistoryBucket(
                start: start, end: grain == .day ? days[day].end : calendar.next(grain, after: start))
            while day < days.count, days[day].start < bucket.end {
                bucket.mg += intake[day].mg
                bucket.drinks += intake[day].drinks
                bucket.peakMg = max(bucket.peakMg, measures[day].peakMg)
                bucket.secondsOverThreshold += measures[day].secondsOverThreshold
                if intake[day].mg > settings.dailyLimitMg { bucket.daysOverLimit += 1 }
                day += 1
            }
            buckets.append(bucket)
        }
        return buckets
    }
}
