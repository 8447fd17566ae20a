import CoffeeDomain
import Foundation

/// The history page's picture (docs/protocol.md §15), as SVG: the last
/// days as bars of the mg taken in against the daily limit's line, and the
/// last weeks as a heat map (a column a week, Monday at the top), each day's
/// cell coloured by its mg against the limit. Every bar and cell carries its
/// day and mg as `data-*` attributes, so that tests read what is drawn.
public struct HistoryChart: Sendable {
    public var dailyLimitMg: Double
    public var calendar: HistoryCalendar

    public static let width = 960.0
    static let barsTop = 64.0
    static let barsHeight = 240.0
    static let left = 64.0
    static let right = 28.0
    static let heatTop = 380.0
    static let cell = 26.0
    static let empty = "#eceff1"
    /// How many of the last days are bars.
    public static let barDays = 30
    /// How many of the last weeks the heat map shows.
    public static let heatWeeks = 26

    public init(dailyLimitMg: Double, calendar: HistoryCalendar) {
        self.dailyLimitMg = dailyLimitMg
        self.calendar = calendar
    }

    /// The picture of `days` (day buckets, oldest first, ending with today's).
    public func svg(_ days: [HistoryBucket]) -> String {
        let height = Self.heatTop + 7 * Self.cell + 44
        let open = Self.element(
            "svg",
            [
                ("xmlns", "http://www.w3.org/2000/svg"), ("viewBox", "0 0 \(Int(Self.width)) \(Int(height))"),
                ("width", "\(Int(Self.width))"), ("height", "\(Int(height))"), ("font-family", ChartCanvas.font),
            ], open: true)
        let background = Self.element("rect", [("width", "100%"), ("height", "100%"), ("fill", "#ffffff")])
        return open + background + bars(Array(days.suffix(Self.barDays))) + heatMap(days) + "</svg>\n"
    }

    /// One element: its attributes and text escaped; `open` leaves it open for children.
    static func element(_ name: String, _ attributes: [(String, String)], text: String? = nil, open: Bool = false)
        -> String
    {
        let head = "<\(name)" + attributes.map { " \($0.0)=\"\(ChartCanvas.escape($0.1))\"" }.joined()
        if open { return head + ">" }
        guard let text else { return head + "/>" }
        return head + ">" + ChartCanvas.escape(text) + "</\(name)>"
    }

    static func label(
        _ text: String, x: Double, y: Double, size: Int = 11, anchor: String = "end", fill: String = ChartCanvas.muted
    )
        -> String
    {
        element(
            "text", [("x", "\(x)"), ("y", "\(y)"), ("font-size", "\(size)"), ("text-anchor", anchor), ("fill", fill)],
            text: text)
    }

    static func heading(_ id: String, _ text: String, y: Double) -> String {
        element(
            "text",
            [
                ("id", id), ("x", "\(left)"), ("y", "\(y)"), ("font-size", "20"), ("font-weight", "600"),
                ("fill", ChartCanvas.ink),
            ], text: text)
    }

    func day(_ date: Date) -> String { String(calendar.localTime(date).prefix(10)) }

    func colour(_ mg: Double) -> String {
        if mg > dailyLimitMg { return ChartCanvas.red }
        if mg >= dailyLimitMg * 0.75 { return ChartCanvas.yellow }
        return ChartCanvas.green
    }

    func bars(_ days: [HistoryBucket]) -> String {
        let top = Self.barsTop
        let baseline = top + Self.barsHeight
        let highest = max(dailyLimitMg * 1.25, days.map(\.mg).max() ?? 0)
        let scale = ((highest * 1.1) / 100).rounded(.up) * 100
        func y(_ mg: Double) -> Double { baseline - mg / scale * Self.barsHeight }
        var out = Self.heading("bars-title", "Caffeine by day, the last \(days.count) days", y: 36)
        for mg in stride(from: 0.0, through: scale, by: scale > 1000 ? 500 : 100) {
            out += Self.element(
                "line",
                [
                    ("x1", "\(Self.left)"), ("x2", "\(Self.width - Self.right)"), ("y1", "\(y(mg))"), ("y2", "\(y(mg))"),
                    ("stroke", Self.empty),
                ])
            out += Self.label("\(Int(mg))", x: Self.left - 8, y: y(mg) + 4)
        }
        let slot = (Self.width - Self.left - Self.right) / Double(max(days.count, 1))
        for (index, bucket) in days.enumerated() {
            let x = Self.left + Double(index) * slot + slot * 0.15
            let label = day(bucket.start)
            let bar: [(String, String)] = [
                ("class", "day"), ("data-day", label), ("data-mg", "\(bucket.mg)"), ("data-drinks", "\(bucket.drinks)"),
                ("x", "\(x)"), ("y", "\(y(bucket.mg))"), ("width", "\(slot * 0.7)"), ("height", "\(baseline - y(bucket.mg))"),
                ("fill", colour(bucket.mg)),
            ]
            let title = Self.element("title", [], text: "\(label): \(Int(bucket.mg.rounded())) mg, \(bucket.drinks) drinks")
            out += Self.element("rect", bar, open: true) + title + "</rect>"
            if index % 5 == days.count % 5 {
                out += Self.label(String(label.suffix(5)), x: x + slot * 0.35, y: baseline + 16, anchor: "middle")
            }
        }
        let limit = y(dailyLimitMg)
        out += Self.element(
            "line",
            [
                ("id", "limit"), ("data-mg", "\(dailyLimitMg)"), ("x1", "\(Self.left)"), ("x2", "\(Self.width - Self.right)"),
                ("y1", "\(limit)"), ("y2", "\(limit)"), ("stroke", ChartCanvas.red), ("stroke-width", "2"),
                ("stroke-dasharray", "6 4"),
            ])
        // A white halo, so that the words stay readable over a bar.
        out += Self.element(
            "text",
            [
                ("x", "\(Self.width - Self.right)"), ("y", "\(limit - 6)"), ("font-size", "12"), ("text-anchor", "end"),
                ("fill", ChartCanvas.red), ("stroke", "#ffffff"), ("stroke-width", "4"), ("paint-order", "stroke"),
            ], text: "daily limit \(Int(dailyLimitMg)) mg")
        return out
    }

    func heatMap(_ days: [HistoryBucket]) -> String {
        var out = Self.heading("heat-title", "The last \(Self.heatWeeks) weeks", y: Self.heatTop - 16)
        for (row, name) in ["Mon", "", "Wed", "", "Fri", "", "Sun"].enumerated() where !name.isEmpty {
            out += Self.label(name, x: Self.left - 8, y: Self.heatTop + Double(row) * Self.cell + 17)
        }
        // What the colours say, under the map.
        let legendY = Self.heatTop + 7 * Self.cell + 24
        var legendX = Self.left
        let limit = Int(dailyLimitMg)
        for (fill, words) in [
            (Self.empty, "no drink"), (ChartCanvas.green, "under \(limit * 3 / 4) mg"),
            (ChartCanvas.yellow, "up to \(limit) mg"), (ChartCanvas.red, "over \(limit) mg"),
        ] {
            out += Self.element(
                "rect",
                [("x", "\(legendX)"), ("y", "\(legendY - 11)"), ("width", "14"), ("height", "14"), ("rx", "3"), ("fill", fill)])
            out += Self.label(words, x: legendX + 20, y: legendY, size: 12, anchor: "start")
            legendX += 40 + Double(words.count) * 7
        }
        guard let last = days.last else { return out }
        let firstWeek = calendar.start(of: .week, holding: last.start) - Double(Self.heatWeeks - 1) * 7 * 86_400
        let weekStart = calendar.start(of: .week, holding: firstWeek + 12 * 3600)
        for bucket in days where bucket.start >= weekStart {
            let week = calendar.start(of: .week, holding: bucket.start)
            let column = Int((week.timeIntervalSince(weekStart) / (7 * 86_400)).rounded())
            let row = calendar.dayOfWeek(bucket.start)
            guard (0..<Self.heatWeeks).contains(column) else { continue }
            let opacity = bucket.drinks == 0 ? 1 : min(1, 0.35 + 0.65 * bucket.mg / max(dailyLimitMg, 1))
            let cell: [(String, String)] = [
                ("class", "cell"), ("data-day", day(bucket.start)), ("data-mg", "\(bucket.mg)"),
                ("x", "\(Self.left + Double(column) * (Self.cell + 4))"), ("y", "\(Self.heatTop + Double(row) * Self.cell)"),
                ("width", "\(Self.cell - 3)"), ("height", "\(Self.cell - 3)"), ("rx", "4"),
                ("fill", bucket.drinks == 0 ? Self.empty : colour(bucket.mg)), ("fill-opacity", "\(opacity)"),
            ]
            let title = Self.element("title", [], text: "\(day(bucket.start)): \(Int(bucket.mg.rounded())) mg")
            out += Self.element("rect", cell, open: true) + title + "</rect>"
        }
        return out
    }
}
