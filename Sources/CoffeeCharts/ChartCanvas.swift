import CoffeeDomain
import Foundation

/// The SVG of `CaffeineChart`, element by element: scales from time and mg
/// to pixels, and the parts of the picture in the order they are painted.
/// Every part carries an `id` or `class` and its values as `data-*`
/// attributes, so that tests (and scripts) read what is drawn.
struct ChartCanvas {
    static let width = 960.0
    static let height = 440.0
    static let left = 64.0
    static let right = 28.0
    static let top = 72.0
    static let bottom = 44.0

    static let green = "#2e7d32"
    static let yellow = "#f9a825"
    static let red = "#c62828"
    static let ink = "#263238"
    static let muted = "#78909c"
    static let font = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif"

    let now: Date
    let start: Date
    let end: Date
    let timeZone: TimeZone
    var maxMg = 500.0
    private var parts: [String] = []

    init(now: Date, timeZone: TimeZone) {
        self.now = now
        self.timeZone = timeZone
        start = now - CaffeineChart.before
        end = now + CaffeineChart.after
    }

    /// The mg axis reaches past the highest value and the red band's start, in steps of 100.
    mutating func fitMg(_ highest: Double) {
        maxMg = max(500, (highest * 1.1 / 100).rounded(.up) * 100)
    }

    func x(_ date: Date) -> Double {
        Self.left + (date.timeIntervalSince(start) / end.timeIntervalSince(start)) * (Self.width - Self.left - Self.right)
    }

    func y(_ mg: Double) -> Double {
        let plot = Self.height - Self.top - Self.bottom
        return Self.top + plot - min(max(mg, 0), maxMg) / maxMg * plot
    }

    mutating func title(_ text: String, detail: String, level: Level) {
        let colour = Self.colour(level)
        parts.append(
            ##"<circle cx="\##(Self.left + 8)" cy="30" r="8" fill="\##(colour)"/>"##
                + ##"<text id="title" x="\##(Self.left + 24)" y="36" font-size="22" font-weight="600" fill="\##(Self.ink)">\##(Self.escape(text))</text>"##
                + ##"<text x="\##(Self.width - Self.right)" y="36" font-size="14" text-anchor="end" fill="\##(Self.muted)">\##(Self.escape(detail))</text>"##
        )
    }

    /// Green below 200 mg, yellow below 400, red above (docs/protocol.md §3's levels).
    mutating func bands() {
        for (from, to, colour) in [(0.0, 200.0, "#e8f5e9"), (200.0, 400.0, "#fff8e1"), (400.0, maxMg, "#ffebee")] {
            parts.append(
                ##"<rect class="band" data-from="\##(Int(from))" data-to="\##(Int(to))" x="\##(Self.left)" y="\##(f(y(to)))" width="\##(f(Self.width - Self.left - Self.right))" height="\##(f(y(from) - y(to)))" fill="\##(colour)"/>"##
            )
        }
    }

    /// Hour ticks every 3 hours (local time of the model's zone) and mg ticks every 100 (200 past 1000).
    mutating func axes() {
        let stepMg = maxMg > 1000 ? 200.0 : 100.0
        var mg = 0.0
        while mg <= maxMg {
            let at = f(y(mg))
            parts.append(
                ##"<line class="mg-tick" data-mg="\##(Int(mg))" x1="\##(Self.left)" y1="\##(at)" x2="\##(Self.width - Self.right)" y2="\##(at)" stroke="#cfd8dc" stroke-width="\##(mg == 200 || mg == 400 ? 1.2 : 0.6)"/>"##
                    + ##"<text x="\##(Self.left - 8)" y="\##(f(y(mg) + 4))" font-size="12" text-anchor="end" fill="\##(Self.muted)">\##(Int(mg))</text>"##
            )
            mg += stepMg
        }
        parts.append(
            ##"<text x="14" y="\##(f(Self.top + (Self.height - Self.top - Self.bottom) / 2))" font-size="12" fill="\##(Self.muted)" transform="rotate(-90 14 \##(f(Self.top + (Self.height - Self.top - Self.bottom) / 2)))" text-anchor="middle">mg caffeine</text>"##
        )
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        var hour = calendar.dateInterval(of: .hour, for: start)?.end ?? start
        let base = Self.height - Self.bottom
        while hour <= end {
            let h = calendar.component(.hour, from: hour)
            if h % 3 == 0 {
                let at = f(x(hour))
                parts.append(
                    ##"<line class="hour-tick" x1="\##(at)" y1="\##(f(base))" x2="\##(at)" y2="\##(f(base + 5))" stroke="\##(Self.muted)"/>"##
                        + ##"<text x="\##(at)" y="\##(f(base + 20))" font-size="12" text-anchor="middle" fill="\##(Self.muted)">\##(String(format: "%02d:00", h))</text>"##
                )
            }
            hour += 3600
        }
        parts.append(
            ##"<line x1="\##(Self.left)" y1="\##(f(base))" x2="\##(Self.width - Self.right)" y2="\##(f(base))" stroke="\##(Self.muted)"/>"##
        )
    }

    mutating func curve(_ points: [ModelSnapshot.Point]) {
        guard let first = points.first, let last = points.last else { return }
        let line = points.map { "\(f(x($0.date))),\(f(y($0.mgCaffeine)))" }.joined(separator: " L")
        let base = f(Self.height - Self.bottom)
        parts.append(
            ##"<path id="area" d="M\##(f(x(first.date))),\##(base) L\##(line) L\##(f(x(last.date))),\##(base) Z" fill="#5c6bc0" fill-opacity="0.12"/>"##
                + ##"<path id="curve" data-points="\##(points.count)" d="M\##(line)" fill="none" stroke="#3949ab" stroke-width="2.5" stroke-linejoin="round"/>"##
        )
    }

    /// The threshold as a dashed line, and when the curve falls under it.
    mutating func threshold(_ mg: Double, until: Date?) {
        let at = f(y(mg))
        parts.append(
            ##"<line id="threshold" data-mg="\##(Self.number(mg))" x1="\##(Self.left)" y1="\##(at)" x2="\##(Self.width - Self.right)" y2="\##(at)" stroke="\##(Self.muted)" stroke-dasharray="6 4"/>"##
        )
        guard let until else {
            parts.append(
                ##"<text id="sleep" x="\##(f(x(now) + 8))" y="\##(f(y(mg) - 8))" font-size="13" fill="\##(Self.ink)">under \##(Self.number(mg)) mg now</text>"##
            )
            return
        }
        let label = "under \(Self.number(mg)) mg at \(clock(until))" + (until > end ? " (after this chart)" : "")
        let pin = f(x(min(until, end)))
        parts.append(
            ##"<g id="sleep" data-time="\##(RFC3339.string(until))"><circle cx="\##(pin)" cy="\##(at)" r="5" fill="#ffffff" stroke="\##(Self.ink)" stroke-width="2"/>"##
                + ##"<text x="\##(pin)" y="\##(f(y(mg) - 12))" font-size="13" text-anchor="\##(until > now + 18 * 3600 ? "end" : "middle")" fill="\##(Self.ink)">\##(Self.escape(label))</text></g>"##
        )
    }

    mutating func nowLine() {
        let at = f(x(now))
        parts.append(
            ##"<line id="now" x1="\##(at)" y1="\##(f(Self.top - 6))" x2="\##(at)" y2="\##(f(Self.height - Self.bottom))" stroke="\##(Self.ink)" stroke-width="1.5"/>"##
                + ##"<text x="\##(at)" y="\##(f(Self.top - 12))" font-size="13" font-weight="600" text-anchor="middle" fill="\##(Self.ink)">now \##(clock(now))</text>"##
        )
    }

    /// A drink: a dot on the curve at its date, its mg above it.
    mutating func mark(_ drink: Drink, at mg: Double) {
        let cx = f(x(drink.date))
        let cy = f(y(mg))
        parts.append(
            ##"<g class="drink" data-mg="\##(Self.number(drink.mgCaffeine))" data-date="\##(RFC3339.string(drink.date))"><line x1="\##(cx)" y1="\##(cy)" x2="\##(cx)" y2="\##(f(Self.height - Self.bottom))" stroke="#3949ab" stroke-opacity="0.35"/><circle cx="\##(cx)" cy="\##(cy)" r="5" fill="#3949ab" stroke="#ffffff" stroke-width="1.5"/>"##
                + ##"<text x="\##(cx)" y="\##(f(y(mg) - 10))" font-size="12" text-anchor="middle" fill="\##(Self.ink)">\##(Self.number(drink.mgCaffeine)) mg</text></g>"##
        )
    }

    func document(mgNow: Double) -> String {
        ##"<?xml version="1.0" encoding="UTF-8"?>"## + "\n"
            + ##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 \##(Int(Self.width)) \##(Int(Self.height))" width="\##(Int(Self.width))" height="\##(Int(Self.height))" font-family="\##(Self.font)" data-now="\##(RFC3339.string(now))" data-mg-now="\##(Self.number(mgNow))" role="img" aria-label="Caffeine from 12 hours ago to 24 hours ahead">"##
            + "<title>Caffeine from 12 hours ago to 24 hours ahead</title>"
            + ##"<rect width="100%" height="100%" fill="#ffffff"/>"## + parts.joined() + "</svg>\n"
    }

    func clock(_ date: Date) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        let c = calendar.dateComponents([.hour, .minute], from: date)
        return String(format: "%02d:%02d", c.hour ?? 0, c.minute ?? 0)
    }

    private func f(_ value: Double) -> String { String(format: "%.1f", value) }

    static func number(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(format: "%.1f", value)
    }

    static func mg(_ value: Double) -> String { "\(Int(value.rounded())) mg" }

    static func colour(_ level: Level) -> String {
        switch level {
        case .green: green
        case .yellow: yellow
        case .red: red
        }
    }

    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }
}
