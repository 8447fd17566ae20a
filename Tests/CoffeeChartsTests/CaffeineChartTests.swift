import CoffeeDomain
import Foundation
import FoundationXML
import Testing

@testable import CoffeeCharts

@Suite("CaffeineChart: the curve and its picture", .timeLimit(.minutes(1)))
struct CaffeineChartTests {
    let now = Date(timeIntervalSince1970: 1_796_040_000)  // 2026-11-30T10:00:00Z
    let chart = CaffeineChart(model: CaffeineModel(halfLifeHours: 5, timeZone: TimeZone(identifier: "UTC")!))

    func drink(_ mg: Double, hoursAgo: Double) -> Drink {
        Drink(mgCaffeine: mg, date: now - hoursAgo * 3600, source: "test")
    }

    @Test func theCurveRunsFromTwelveHoursBackToADayAheadEveryFiveMinutes() {
        let points = chart.curve([drink(100, hoursAgo: 1)], now: now)
        #expect(points.count == 12 * 12 + 24 * 12 + 1)
        #expect(points.first?.date == now - 12 * 3600)
        #expect(points.last?.date == now + 24 * 3600)
    }

    /// The picture is drawn from the model's drinks, which keep
    /// `CaffeineModel.retention`: that must reach back to the chart's window.
    @Test func theModelsRetentionCoversTheChartsWindow() {
        #expect(CaffeineChart.window(at: now).lowerBound >= now - CaffeineModel.retention)
        #expect(CaffeineChart.window(at: now).upperBound == now)
    }

    @Test func aPastPointCountsOnlyTheDrinksDatedAtOrBeforeIt() {
        let drinks = [drink(100, hoursAgo: 6), drink(200, hoursAgo: 1)]
        let points = chart.curve(drinks, now: now)
        let model = chart.model
        for point in points where point.date <= now {
            #expect(abs(point.mgCaffeine - model.mgCaffeine(drinks, at: point.date)) < 1e-9)
        }
        // Before the first drink there is nothing; right after it, its dose.
        let before = points.first { $0.date == now - 7 * 3600 }
        #expect(before?.mgCaffeine == 0)
        // Ahead, the drinks that count now decay: one half-life later, half of now.
        let mgNow = model.mgCaffeine(drinks, at: now)
        let later = points.first { $0.date == now + 5 * 3600 }
        #expect(abs((later?.mgCaffeine ?? 0) - mgNow / 2) < 1e-9)
    }

    @Test func theSleepTimeIsHalfLivesOfTheRatioToTheThreshold() throws {
        let at = try #require(chart.sleepTime(mgNow: 200, now: now))
        #expect(abs(at.timeIntervalSince(now) - 2 * 5 * 3600) < 1e-6)  // 200 → 100 → 50: two half-lives
        #expect(chart.sleepTime(mgNow: 40, now: now) == nil)
    }

    @Test func thePictureIsWellFormedAndCarriesWhatItDraws() throws {
        let drinks = [drink(96, hoursAgo: 3), drink(128, hoursAgo: 1), drink(64, hoursAgo: 30)]  // the last is off the chart
        let svg = chart.svg(drinks, now: now)
        let document = try XMLDocument(data: Data(svg.utf8))
        let root = try #require(document.rootElement())
        #expect(root.name == "svg")
        func elements(_ xpath: String) throws -> [XMLElement] {
            try document.nodes(forXPath: xpath).compactMap { $0 as? XMLElement }
        }
        let curve = try #require(try elements("//*[@id='curve']").first)
        let d = try #require(attribute(curve, "d"))
        #expect(d.split(separator: "L").count == 433)
        let bands = try elements("//*[@class='band']").compactMap { attribute($0, "data-from") }
        #expect(bands == ["0", "200", "400"])
        let marks = try elements("//*[@class='drink']").compactMap { attribute($0, "data-mg") }
        #expect(marks == ["96", "128"])
        let sleep = try #require(try elements("//*[@id='sleep']").first.flatMap { attribute($0, "data-time") })
        let mgNow = chart.model.mgCaffeine(drinks, at: now)
        let expected = now + 5 * 3600 * log2(mgNow / 50)
        #expect(abs((RFC3339.parse(sleep) ?? .distantPast).timeIntervalSince(expected)) < 0.01)
        #expect(!svg.contains("<style") && !svg.contains("<script"))
    }

    /// FoundationXML on Linux does not find attributes by name in a document
    /// with a default namespace (`attribute(forName:)` is nil): look through them.
    func attribute(_ element: XMLElement, _ name: String) -> String? {
        element.attributes?.first { $0.name == name }?.stringValue
    }

    @Test func textFromOutsideIsEscaped() {
        #expect(ChartCanvas.escape(#"<a & "b">"#) == "&lt;a &amp; &quot;b&quot;&gt;")
    }
}
