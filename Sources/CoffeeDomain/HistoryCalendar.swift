import Foundation

/// A bucket of a person's history (docs/protocol.md §15).
public enum HistoryGrain: String, Sendable, CaseIterable {
    case day, week, month
}

/// The days, weeks (from Monday) and months of a person's calendar in
/// their time zone: where daylight saving time begins a day is 23 hours
/// long, where it ends 25, and a bucket's bounds are the local midnights
/// around it. Pure: the time zone is passed in.
public struct HistoryCalendar: Sendable {
    public let timeZone: TimeZone
    private let calendar: Calendar

    public init(timeZone: TimeZone) {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        calendar.firstWeekday = 2  // Monday, as ISO 8601
        calendar.minimumDaysInFirstWeek = 4
        self.calendar = calendar
        self.timeZone = timeZone
    }

    /// The start of the bucket of `grain` that holds `date`.
    public func start(of grain: HistoryGrain, holding date: Date) -> Date {
        let unit: Calendar.Component =
            switch grain {
            case .day: .day
            case .week: .weekOfYear
            case .month: .month
            }
        return calendar.dateInterval(of: unit, for: date)?.start ?? calendar.startOfDay(for: date)
    }

    /// The start of the bucket after the one that starts at `start`.
    public func next(_ grain: HistoryGrain, after start: Date) -> Date {
        let step: DateComponents =
            switch grain {
            case .day: DateComponents(day: 1)
            case .week: DateComponents(day: 7)
            case .month: DateComponents(month: 1)
            }
        // Twelve hours in, so that a zone whose midnight can be skipped
        // (a change of offset at 00:00) still lands in the next bucket.
        let inside = calendar.date(byAdding: step, to: start + 12 * 3600) ?? start + 86_400
        return self.start(of: grain, holding: inside)
    }

    /// The buckets from the one that holds `from` to the one that holds
    /// `to`, both included; nil when they would be more than `limit`.
    public func buckets(_ grain: HistoryGrain, from: Date, to: Date, limit: Int) -> [DateInterval]? {
        var buckets: [DateInterval] = []
        var start = self.start(of: grain, holding: from)
        while start <= to {
            guard buckets.count < limit else { return nil }
            let end = next(grain, after: start)
            buckets.append(DateInterval(start: start, end: end))
            start = end
        }
        return buckets
    }

    /// The local midnight that starts `day` ("2024-03-31"), or nil when it is not such a date.
    public func startOfDay(_ day: String) -> Date? {
        let parts = day.split(separator: "-", omittingEmptySubsequences: false)
        guard day.utf8.count == 10, parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
            let year = Int(parts[0]), let month = Int(parts[1]), let dayOfMonth = Int(parts[2]),
            (1...12).contains(month), (1...31).contains(dayOfMonth)
        else { return nil }
        let components = DateComponents(year: year, month: month, day: dayOfMonth)
        guard calendar.date(from: components) != nil,
            let noon = calendar.date(
                from: DateComponents(
                    year: year, month: month, day: dayOfMonth, hour: 12))
        else { return nil }
        // Rejects 2023-02-30, which DateComponents would roll into March.
        guard calendar.component(.day, from: noon) == dayOfMonth else { return nil }
        return calendar.startOfDay(for: noon)
    }

    /// `date` as people read it there: an RFC 3339 time with its offset
    /// ("2024-03-31T00:00:00+01:00"), and its milliseconds when it has any
    /// (the store keeps dates to the millisecond).
    public func localTime(_ date: Date) -> String {
        let milliseconds = (date.timeIntervalSince1970 * 1000).rounded()
        let wholeSeconds = (milliseconds / 1000).rounded(.down)
        let fraction = Int(milliseconds - wholeSeconds * 1000)
        let date = Date(timeIntervalSince1970: wholeSeconds)
        let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        let offset = timeZone.secondsFromGMT(for: date)
        let sign = offset < 0 ? "-" : "+"
        let minutes = abs(offset) / 60
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let year = String(c.year ?? 0)
        return "\(String(repeating: "0", count: max(0, 4 - year.count)) + year)-\(two(c.month ?? 0))-\(two(c.day ?? 0))"
            + "T\(two(c.hour ?? 0)):\(two(c.minute ?? 0)):\(two(c.second ?? 0))"
            + (fraction == 0 ? "" : "." + String(String(1000 + fraction).dropFirst()))
            + "\(sign)\(two(minutes / 60)):\(two(minutes % 60))"
    }
}
