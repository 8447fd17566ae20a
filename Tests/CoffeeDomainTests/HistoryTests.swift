import CoffeeDomain
import Foundation
import Testing

/// History's calendar, curve and CSV (docs/protocol.md §15): pure, so they
/// are checked here against what is known of Europe/Berlin and against the
/// model sampled second by second.
@Suite("History: buckets, the curve's measures, CSV")
struct HistoryTests {
    let berlin = HistoryCalendar(timeZone: TimeZone(identifier: "Europe/Berlin")!)

    func utc(_ text: String) -> Date { RFC3339.parse(text)! }

    /// Days are 23 hours where summer time begins and 25 where it ends; weeks start on Monday; months at the 1st.
    @Test func bucketsFollowTheLocalCalendar() throws {
        let march = try #require(
            berlin.buckets(.day, from: utc("2025-03-29T12:00:00Z"), to: utc("2025-03-31T12:00:00Z"), limit: 10))
        #expect(march.map { $0.duration / 3600 } == [24, 23, 24])
        #expect(march[1].start == utc("2025-03-29T23:00:00Z") && march[2].start == utc("2025-03-30T22:00:00Z"))
        let october = try #require(
            berlin.buckets(.day, from: utc("2025-10-26T12:00:00Z"), to: utc("2025-10-26T12:00:00Z"), limit: 10))
        #expect(october.map { $0.duration / 3600 } == [25])
        let weeks = try #require(
            berlin.buckets(.week, from: utc("2025-01-01T12:00:00Z"), to: utc("2025-01-13T12:00:00Z"), limit: 10))
        #expect(weeks.map(\.start) == [utc("2024-12-29T23:00:00Z"), utc("2025-01-05T23:00:00Z"), utc("2025-01-12T23:00:00Z")])
        let months = try #require(
            berlin.buckets(.month, from: utc("2025-02-10T12:00:00Z"), to: utc("2025-04-01T12:00:00Z"), limit: 10))
        #expect(months.map(\.start) == [utc("2025-01-31T23:00:00Z"), utc("2025-02-28T23:00:00Z"), utc("2025-03-31T22:00:00Z")])
        #expect(berlin.buckets(.day, from: utc("2025-01-01T00:00:00Z"), to: utc("2025-12-31T00:00:00Z"), limit: 100) == nil)
        #expect(berlin.localTime(utc("2025-03-30T22:00:00.125Z")) == "2025-03-31T00:00:00.125+02:00")
        #expect(berlin.localTime(utc("2025-01-01T00:00:00Z")) == "2025-01-01T01:00:00+01:00")
    }

    /// The heat map's rows: Monday is 0, and the Sunday of a 23-hour day is still 6.
    @Test func daysOfTheWeekCountFromMonday() {
        #expect(berlin.dayOfWeek(utc("2025-03-29T23:00:00Z")) == 6)  // Sunday 30 March, 00:00 local
        #expect(berlin.dayOfWeek(utc("2025-03-30T22:00:00Z")) == 0)  // Monday 31 March, 00:00 local
        #expect(berlin.dayOfWeek(utc("2025-10-25T22:00:00Z")) == 6)  // Sunday 26 October, 00:00 local
    }

    /// Local times by arithmetic agree with Foundation's calendar, before
    /// 1970 too, in zones whose offsets have minutes and change with summer,
    /// and end with the zone's offset, east or west of UTC.
    @Test func localTimesAgreeWithTheCalendar() {
        var random = SystemRandomNumberGenerator()
        for zone in ["Europe/Berlin", "Asia/Kathmandu", "America/St_Johns", "Pacific/Apia"] {
            let timeZone = TimeZone(identifier: zone)!
            let history = HistoryCalendar(timeZone: timeZone)
            var calendar = Calendar(identifier: .gregorian)
            calendar.timeZone = timeZone
            for _ in 0..<750 {
                let date = Date(timeIntervalSince1970: Double(Int64.random(in: -631_152_000...4_102_444_800, using: &random)))
                let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
                let text = history.localTime(date)
                let expected = String(
                    format: "%04d-%02d-%02dT%02d:%02d:%02d", c.year!, c.month!, c.day!, c.hour!, c.minute!, c.second!)
                #expect(text.hasPrefix(expected), "\(zone) \(date): \(text) against \(expected)")
                // And the zone's offset then, its sign included (St John's is west of UTC).
                let offset = timeZone.secondsFromGMT(for: date)
                let (hours, minutes) = (abs(offset) / 3600, abs(offset) / 60 % 60)
                let suffix = String(format: "%02d:%02d", hours, minutes)
                #expect(text.hasSuffix((offset < 0 ? "-" : "+") + suffix), "\(zone) \(date): \(text), offset \(offset)")
            }
        }
    }

    /// Ten years of days stepped by arithmetic between the offset's changes
    /// are the calendar's days, in zones whose clocks change at midnight too;
    /// local times of a series are each one's.
    @Test func daysByArithmeticAreTheCalendarsDays() throws {
        for zone in ["Europe/Berlin", "America/Santiago", "Asia/Beirut", "America/Havana", "Australia/Lord_Howe", "UTC"] {
            let timeZone = TimeZone(identifier: zone)!
            let history = HistoryCalendar(timeZone: timeZone)
            var calendar = Calendar(identifier: .gregorian)
            calendar.timeZone = timeZone
            let from = utc("2016-01-01T12:00:00Z")
            let to = utc("2026-01-01T12:00:00Z")
            let days = try #require(history.buckets(.day, from: from, to: to, limit: 5000))
            var expected: [DateInterval] = []
            var day = calendar.dateInterval(of: .day, for: from)!
            while day.start <= to {
                expected.append(day)
                day = calendar.dateInterval(of: .day, for: day.end + 1)!
            }
            let differs = days.indices.first { $0 < expected.count && days[$0] != expected[$0] }
            let difference = differs.map { "\(days[$0]) against \(expected[$0])" } ?? "-"
            #expect(
                days.count == expected.count && differs == nil,
                "\(zone): \(days.count) against \(expected.count) days, first difference at \(difference)")
            let starts = days.map(\.start)
            var times = HistoryCalendar.LocalTimes(history)
            let written = starts.map { date in
                var out: [UInt8] = []
                times.write(date, into: &out)
                return String(decoding: out, as: UTF8.self)
            }
            #expect(written == starts.map { history.localTime($0) }, "\(zone)")
        }
    }

    @Test func aDayIsReadAsTheLocalMidnightThatStartsIt() {
        #expect(berlin.startOfDay("2025-03-30") == utc("2025-03-29T23:00:00Z"))
        #expect(berlin.startOfDay("2025-07-01") == utc("2025-06-30T22:00:00Z"))
        for bad in ["2025-02-30", "2025-13-01", "2025-1-01", "20250101", "2025-01-01T00:00:00Z", "yesterday"] {
            #expect(berlin.startOfDay(bad) == nil, "\(bad)")
        }
    }

    /// The closed form against the model itself, sampled every 10 seconds:
    /// the peak is the highest sample (or above it), and the time over the
    /// threshold is the samples' within a sample per crossing.
    @Test func theCurvesMeasuresAgreeWithTheModelSampled() throws {
        let model = CaffeineModel(halfLifeHours: 5, timeZone: TimeZone(identifier: "Europe/Berlin")!)
        let start = utc("2025-10-25T22:00:00Z")
        let drinks = [(-30.0, 200.0), (-20, 96), (-2, 128), (1.5, 64), (2.2, 256), (9, 47), (20, 300)].map { hours, mg in
            Drink(uuid: UUID(), mgCaffeine: mg, date: start + hours * 3600)
        }
        let days = try #require(berlin.buckets(.day, from: start, to: start + 30 * 3600, limit: 5))
        let doses = drinks.map { HistoryCurve.Dose(date: $0.date, mg: $0.mgCaffeine) }
        let measures = HistoryCurve(model: model, thresholdMg: 50).measure(days, doses: doses)
        #expect(days.count == 2 && days[0].duration == 25 * 3600)
        for (day, measure) in zip(days, measures) {
            var over = 0.0
            var peak = 0.0
            let step = 10.0
            var t = day.start
            while t < day.end {
                let level = model.mgCaffeine(drinks, at: t)
                peak = max(peak, level)
                if level > 50 { over += step }
                t += step
            }
            #expect(measure.peakMg >= peak - 1e-9 && measure.peakMg - peak < 1, "\(measure.peakMg) \(peak)")
            #expect(abs(measure.secondsOverThreshold - over) <= 6 * step, "\(measure.secondsOverThreshold) \(over)")
        }
        #expect(measures[0].secondsOverThreshold > 3600)
    }

    @Test func csvQuotesOnlyWhatNeedsIt() {
        let drink = Drink(
            uuid: UUID(uuidString: "6F1C3B1E-3F55-4B0B-9C1E-7A2D8E4B5C01")!, mgCaffeine: 64.5,
            date: utc("2025-07-01T10:00:00Z"), version: 2, type: .singleEspresso, source: "say \"hi\", then\nleave")
        #expect(
            DrinkCSV.row(drink, in: berlin)
                == "6F1C3B1E-3F55-4B0B-9C1E-7A2D8E4B5C01,2025-07-01T12:00:00+02:00,64.5,singleEspresso,2,\"say \"\"hi\"\", then\nleave\"\r\n"
        )
        #expect(DrinkCSV.field("plain") == "plain" && DrinkCSV.field("a,b") == "\"a,b\"" && DrinkCSV.field("") == "")
    }

    /// OWASP's CSV injection: a client's text that a spreadsheet would run is written as text, and read back whole.
    @Test func csvWritesAFormulaAsTextAndTheReaderHasItBack() {
        let formula = Drink(
            uuid: UUID(uuidString: "6F1C3B1E-3F55-4B0B-9C1E-7A2D8E4B5C02")!, mgCaffeine: 64,
            date: utc("2025-07-01T10:00:00Z"), type: .singleEspresso, source: "=HYPERLINK(\"http://x\",\"y\")")
        #expect(DrinkCSV.row(formula, in: berlin).hasSuffix(",1,\"'=HYPERLINK(\"\"http://x\"\",\"\"y\"\")\"\r\n"))
        for text in ["=1+1", "+1", "-1", "@SUM(A1)", "\tx", "\rx", "'quoted", "''", "plain", "", "a=b"] {
            let written = DrinkCSV.text(text)
            #expect(DrinkCSV.text(of: written) == text, "\(text)")
            #expect(written.first.map { !"=+-@\t\r".contains($0) } ?? true, "\(text) is written as \(written)")
        }
    }
}
