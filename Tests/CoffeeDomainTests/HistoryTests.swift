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
        let measures = HistoryCurve(model: model, thresholdMg: 50).measure(days, drinks: drinks)
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
}
