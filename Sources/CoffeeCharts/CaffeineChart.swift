import CoffeeDomain
import Foundation

/// The seed's complication, drawn (docs/protocol.md §10): the caffeine curve from
/// 12 hours before now to 24 hours after, the level bands, each drink as a
/// mark with its mg, "now", hour and mg axes, and the time at which caffeine
/// falls under the sleep threshold. Pure: the drinks and "now" come in, an
/// SVG document comes out, so the page, the HTTP endpoint and the command
/// line draw the same picture, and tests read it.
///
/// The SVG uses presentation attributes only (no `<style>`, no script), so
/// it renders under `Content-Security-Policy: default-src 'self'` and in an `<img>`.
public struct CaffeineChart: Sendable {
    public var model: CaffeineModel
    /// `model.sleepThresholdMg` (default 50).
    public var sleepThresholdMg: Double
    public static let before: TimeInterval = 12 * 3600
    public static let after: TimeInterval = 24 * 3600

    public init(model: CaffeineModel, sleepThresholdMg: Double = PersonSettings.defaultSleepThresholdMg) {
        self.model = model
        self.sleepThresholdMg = sleepThresholdMg
    }

    /// The drinks a chart at `now` needs: those dated in the 24 h before its first point, up to now.
    public static func window(at now: Date) -> ClosedRange<Date> {
        (now - before - CaffeineModel.window)...now
    }

    /// One point every 5 minutes from 12 h before `now` to 24 h after. A
    /// past point is the model at its own time (the drinks dated in the 24 h
    /// up to it); `now` and later points decay the drinks that count now,
    /// as the timeline does.
    public func curve(_ drinks: [Drink], now: Date) -> [ModelSnapshot.Point] {
        let step = CaffeineModel.timelineStep
        let mgNow = model.mgCaffeine(drinks, at: now)
        let past = Int(Self.before / step)
        let ahead = Int(Self.after / step)
        return (-past...ahead).map { i in
            let date = now + Double(i) * step
            let mg = i < 0 ? model.mgCaffeine(drinks, at: date) : model.remaining(mg: mgNow, taken: now, at: date)
            return ModelSnapshot.Point(date: date, mgCaffeine: mg)
        }
    }

    /// When caffeine falls under the threshold, with one half-life for every
    /// drink: `halfLife × log2(mgNow / threshold)` after now; nil when it is
    /// under already.
    public func sleepTime(mgNow: Double, now: Date) -> Date? {
        CaffeineModel.secondsToFall(from: mgNow, to: sleepThresholdMg, halfLife: model.halfLifeHours * 3600).map { now + $0 }
    }

    /// The picture at `now` of `drinks` (any; those outside the 36 hours are left out).
    public func svg(_ drinks: [Drink], now: Date) -> String {
        var canvas = ChartCanvas(now: now, timeZone: model.timeZone)
        let points = curve(drinks, now: now)
        let shown = drinks.filter { $0.date >= now - Self.before && $0.date <= now }.sorted { $0.date < $1.date }
        let mgNow = model.mgCaffeine(drinks, at: now)
        let top = shown.map { model.mgCaffeine(drinks, at: $0.date) }.max() ?? 0
        canvas.fitMg(max(points.map(\.mgCaffeine).max() ?? 0, top))
        let level = Level.forDose(mg: mgNow)
        let cups = drinks.filter { $0.date >= model.startOfDay(at: now) && $0.date <= now }.reduce(0) { $0 + $1.mgCaffeine }
        canvas.title(
            "Caffeine \(ChartCanvas.mg(mgNow)) now · \(level.rawValue)",
            detail: String(format: "%.1f cups today · half-life %g h", cups / CaffeineModel.mgPerCup, model.halfLifeHours),
            level: level)
        canvas.bands()
        canvas.axes()
        canvas.curve(points)
        canvas.threshold(sleepThresholdMg, until: sleepTime(mgNow: mgNow, now: now))
        canvas.nowLine()
        for drink in shown { canvas.mark(drink, at: model.mgCaffeine(drinks, at: drink.date)) }
        return canvas.document(mgNow: mgNow)
    }
}
