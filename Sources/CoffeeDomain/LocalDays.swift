import Foundation
import Synchronization

/// One day of a person's calendar in their time zone.
public struct LocalDay: Sendable, Hashable {
    /// Its local midnight (`Calendar.startOfDay`): the first instant of the
    /// day where a change of offset skips midnight itself.
    public let start: Date
    /// The next day's `start`: 23, 24 or 25 hours on.
    public let end: Date
    /// The day as people write it, "2026-12-07".
    public let key: String

    /// Whether `date` falls on this day.
    public func holds(_ date: Date) -> Bool { date >= start && date < end }
}

/// The days of the Gregorian calendar in one time zone, the last answers
/// remembered: a model round asks for the same day ten times a second at
/// 1,000 drinks a second (the model's cups today, the daily-limit rule's
/// key and its next check, the bedtime rule's next bedtime), and `Calendar`
/// takes microseconds an answer. The answers are `Calendar`'s, made once a day.
public final class LocalDays: Sendable {
    public let timeZone: TimeZone
    private let calendar: Calendar
    private let last = Mutex<LocalDay?>(nil)
    /// The last time of day found: `next` is the first at `minutes` after `from`.
    private let lastTime = Mutex<(minutes: Int, from: Date, next: Date)?>(nil)

    public init(timeZone: TimeZone) {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        self.calendar = calendar
        self.timeZone = timeZone
    }

    /// The day that holds `date`.
    public func day(holding date: Date) -> LocalDay {
        if let day = last.withLock({ $0 }), day.holds(date) { return day }
        let start = calendar.startOfDay(for: date)
        let end = calendar.date(byAdding: .day, value: 1, to: start) ?? start + 86_400
        let c = calendar.dateComponents([.year, .month, .day], from: start)
        let day = LocalDay(
            start: start, end: end, key: String(format: "%04d-%02d-%02d", c.year ?? 0, c.month ?? 0, c.day ?? 0))
        // Remembered only when the next day starts at `end`, so that every
        // date between is this day's (a zone's odd day is answered afresh).
        if day.holds(date), calendar.startOfDay(for: end) == end { last.withLock { $0 = day } }
        return day
    }

    /// The first instant after `date` at `minutes` past local midnight, as
    /// `Calendar.nextDate(after:matching:matchingPolicy: .nextTime)` finds it
    /// (where a change of offset skips that time, the first instant after).
    /// Found once for every date from one found for up to the time found.
    public func next(minutesPastMidnight minutes: Int, after date: Date) -> Date {
        if let time = lastTime.withLock({ $0 }), time.minutes == minutes, time.from <= date, date < time.next {
            return time.next
        }
        let components = DateComponents(hour: minutes / 60, minute: minutes % 60)
        let next = calendar.nextDate(after: date, matching: components, matchingPolicy: .nextTime) ?? date + 86_400
        if next > date { lastTime.withLock { $0 = (minutes, date, next) } }
        return next
    }
}
