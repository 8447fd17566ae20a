import Foundation
import Testing

@testable import CoffeeDomain

/// The remembered days (`LocalDays`) answer as `Calendar` does, asked
/// afresh each time, across changes of offset: summer time's 23- and
/// 25-hour days, a zone whose clocks skip midnight itself (Santiago), one
/// that moves by half an hour (Lord Howe), and one without changes.
@Suite("Local days")
struct LocalDaysTests {
    static let zones = ["UTC", "Europe/Berlin", "America/Los_Angeles", "America/Santiago", "Australia/Lord_Howe", "Asia/Tokyo"]

    /// The zone, its calendar, and a year of dates from 2024-01-01
    /// `minutes` apart, in order and shuffled.
    func year(in name: String, everyMinutes minutes: Int) throws -> (TimeZone, Calendar, [[Date]]) {
        let zone = try #require(TimeZone(identifier: name))
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        let from = RFC3339.parse("2024-01-01T00:00:00Z")!
        let dates = (0..<(366 * 24 * 60 / minutes)).map { from + Double($0 * minutes * 60) }
        var generator = SystemRandomNumberGenerator()
        return (zone, calendar, [dates, dates.shuffled(using: &generator)])
    }

    /// Every 37 minutes over a year, in order (each day remembered is asked
    /// again), and the same dates shuffled (the memory of one day asked about another).
    @Test(arguments: zones) func daysAreTheCalendarsOwn(zone name: String) throws {
        let (zone, calendar, orders) = try year(in: name, everyMinutes: 37)
        for order in orders {
            let days = LocalDays(timeZone: zone)
            for date in order {
                let day = days.day(holding: date)
                let start = calendar.startOfDay(for: date)
                let c = calendar.dateComponents([.year, .month, .day], from: date)
                #expect(day.start == start, "\(name) \(RFC3339.string(date))")
                #expect(day.end == calendar.date(byAdding: .day, value: 1, to: start), "\(name) \(RFC3339.string(date))")
                #expect(day.key == String(format: "%04d-%02d-%02d", c.year!, c.month!, c.day!))
                if day.start != start { return }  // one failure tells it
            }
        }
    }

    /// The next bedtime, in order and shuffled, for times of day that a
    /// change of offset skips or repeats somewhere (00:30 in Santiago,
    /// 02:15 in Berlin and Los Angeles).
    @Test(arguments: zones) func timesOfDayAreTheCalendarsOwn(zone name: String) throws {
        let (zone, calendar, orders) = try year(in: name, everyMinutes: 197)
        for minutes in [0, 30, 2 * 60 + 15, 22 * 60, 23 * 60 + 59] {
            for order in orders {
                let days = LocalDays(timeZone: zone)
                for date in order {
                    let expected = calendar.nextDate(
                        after: date, matching: DateComponents(hour: minutes / 60, minute: minutes % 60),
                        matchingPolicy: .nextTime)
                    let next = days.next(minutesPastMidnight: minutes, after: date)
                    #expect(next == expected, "\(name) \(minutes) after \(RFC3339.string(date))")
                    if next != expected { return }
                }
            }
        }
    }

    /// A zone's day that begins when its clocks skip midnight: the day
    /// starts at 01:00 and the day before is 23 hours long.
    @Test func aSkippedMidnightStartsTheDayAfterTheGap() throws {
        let days = LocalDays(timeZone: try #require(TimeZone(identifier: "America/Santiago")))
        // 2024-09-08: clocks go from 00:00 to 01:00 (UTC-4 to UTC-3).
        let day = days.day(holding: RFC3339.parse("2024-09-08T12:00:00Z")!)
        #expect(day.key == "2024-09-08")
        #expect(RFC3339.string(day.start) == "2024-09-08T04:00:00.000Z")  // 01:00 -03:00
        let before = days.day(holding: RFC3339.parse("2024-09-08T03:59:00Z")!)
        #expect(before.key == "2024-09-07")
        #expect(before.end == day.start)
    }
}
