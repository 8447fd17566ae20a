import CoffeeDomain
import Foundation
import HealthStore

/// `history` (docs/protocol.md §15): the person's days, weeks or months.
extension QueryHandler {
    /// At most this many days in one answer (a little over 54 years).
    static let maxHistoryDays = 20_000

    func history(_ request: QueryRequest) async throws -> JSONValue {
        let settings = self.settings
        let calendar = HistoryCalendar(timeZone: settings.timeZone)
        let grain: HistoryGrain
        switch request.by {
        case .absent: grain = .day
        case .wrongType(let expected): throw QueryError(.badRequest, "by must be \(expected)", field: "by")
        case .value(let name):
            guard let known = HistoryGrain(rawValue: name) else {
                throw QueryError(.badRequest, "by must be day, week or month, got \"\(name.prefix(20))\"", field: "by")
            }
            grain = known
        }
        let to = try Self.day(request.to, field: "to", calendar) ?? clock.now()
        let from = try Self.day(request.from, field: "from", calendar) ?? to - 30 * 86_400
        guard from <= to else { throw QueryError(.badRequest, "from must not be after to", field: "from") }
        // Whole buckets: from the one that holds `from` to the one that holds `to`, read day by day.
        let first = calendar.start(of: grain, holding: from)
        let end = calendar.next(grain, after: calendar.start(of: grain, holding: to))
        guard let days = calendar.buckets(.day, from: first, to: end - 1, limit: Self.maxHistoryDays) else {
            throw QueryError(
                .badRequest, "the range spans more than \(Self.maxHistoryDays) days; ask for less, or by week or month",
                field: "from")
        }
        let intake = try await store.intake(in: days)
        let drinks = try await store.drinks(datedIn: (first - HistoryCurve.lookBack)...end)
        let curve = HistoryCurve(model: settings.model, thresholdMg: settings.sleepThresholdMg)
        let measures = curve.measure(days, drinks: drinks)
        var buckets: [JSONValue] = []
        var day = 0
        while day < days.count {
            let start = days[day].start
            let stop = grain == .day ? days[day].end : calendar.next(grain, after: start)
            var sum = Intake(mg: 0, drinks: 0)
            var peak = 0.0
            var over = 0.0
            var overLimit = 0
            while day < days.count, days[day].start < stop {
                sum.mg += intake[day].mg
                sum.drinks += intake[day].drinks
                peak = max(peak, measures[day].peakMg)
                over += measures[day].secondsOverThreshold
                if intake[day].mg > settings.dailyLimitMg { overLimit += 1 }
                day += 1
            }
            buckets.append(
                .object([
                    ("start", .string(calendar.localTime(start))), ("end", .string(calendar.localTime(stop))),
                    ("hours", .double(stop.timeIntervalSince(start) / 3600)), ("mg", .double(sum.mg)),
                    ("cups", .double(sum.mg / CaffeineModel.mgPerCup)), ("drinks", .int(Int64(sum.drinks))),
                    ("peakMg", .double(peak)), ("hoursOverSleepThreshold", .double(over / 3600)),
                    ("daysOverLimit", .int(Int64(overLimit))),
                ]))
        }
        return .object([
            ("ok", true), ("by", .string(grain.rawValue)), ("timeZone", .string(settings.timeZone.identifier)),
            ("halfLifeHours", .double(settings.model.halfLifeHours)),
            ("sleepThresholdMg", .double(settings.sleepThresholdMg)), ("dailyLimitMg", .double(settings.dailyLimitMg)),
            ("buckets", .array(buckets)),
        ])
    }

    /// A request's day: a local date ("2024-03-31") or an RFC 3339 time; nil when absent.
    static func day(_ input: InputField<InputDate>, field: String, _ calendar: HistoryCalendar) throws(QueryError) -> Date? {
        if case .value(let raw) = input, case .text(let text) = raw, let midnight = calendar.startOfDay(text) {
            return midnight
        }
        return try date(input, field: field)
    }
}
