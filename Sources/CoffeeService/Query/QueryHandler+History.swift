import CoffeeDomain
import Foundation
import HealthStore

/// `history` (docs/protocol.md §15): the person's days, weeks or months.
extension QueryHandler {
    func history(_ request: QueryRequest) async throws -> JSONValue {
        let settings = self.settings.person
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
        let history = PersonHistory(store: store, settings: settings)
        guard let buckets = try await history.buckets(grain, from: from, to: to) else {
            throw QueryError(
                .badRequest, "the range spans more than \(PersonHistory.maxDays) days; ask for less, or by week or month",
                field: "from")
        }
        return .object([
            ("ok", true), ("by", .string(grain.rawValue)), ("timeZone", .string(settings.timeZoneName)),
            ("halfLifeHours", .double(settings.model.halfLifeHours)),
            ("sleepThresholdMg", .double(settings.sleepThresholdMg)), ("dailyLimitMg", .double(settings.dailyLimitMg)),
            ("buckets", .encoded(Self.write(buckets, calendar))),
        ])
    }

    /// The buckets as a JSON array, written straight to bytes: ten years by
    /// day is 3,653 objects, and a tree of them cost more than the store's sums.
    static func write(_ buckets: [HistoryBucket], _ calendar: HistoryCalendar) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(buckets.count * 200 + 2)
        var times = HistoryCalendar.LocalTimes(calendar)
        out.append(UInt8(ascii: "["))
        for (index, bucket) in buckets.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            JSONBytes.append(#"{"start":""#, to: &out)
            times.write(bucket.start, into: &out)
            JSONBytes.append(#"","end":""#, to: &out)
            times.write(bucket.end, into: &out)
            JSONBytes.append(#"","hours":"#, to: &out)
            JSONBytes.append(bucket.end.timeIntervalSince(bucket.start) / 3600, to: &out)
            JSONBytes.append(#","mg":"#, to: &out)
            JSONBytes.append(bucket.mg, to: &out)
            JSONBytes.append(#","cups":"#, to: &out)
            JSONBytes.append(bucket.mg / CaffeineModel.mgPerCup, to: &out)
            JSONBytes.append(#","drinks":"#, to: &out)
            JSONBytes.append(Int64(bucket.drinks), to: &out)
            JSONBytes.append(#","peakMg":"#, to: &out)
            JSONBytes.append(bucket.peakMg, to: &out)
            JSONBytes.append(#","hoursOverSleepThreshold":"#, to: &out)
            JSONBytes.append(bucket.secondsOverThreshold / 3600, to: &out)
            JSONBytes.append(#","daysOverLimit":"#, to: &out)
            JSONBytes.append(Int64(bucket.daysOverLimit), to: &out)
            out.append(UInt8(ascii: "}"))
        }
        out.append(UInt8(ascii: "]"))
        return out
    }

    /// A request's day: a local date ("2024-03-31") or an RFC 3339 time; nil when absent.
    static func day(_ input: InputField<InputDate>, field: String, _ calendar: HistoryCalendar) throws(QueryError) -> Date? {
        if case .value(let raw) = input, case .text(let text) = raw, let midnight = calendar.startOfDay(text) {
            return midnight
        }
        return try date(input, field: field)
    }
}
