import Foundation

extension ClientCommands {
    /// A history reply (docs/protocol.md §15) as a table for people.
    static func table(history reply: [String: Any]) -> String {
        let buckets = reply["buckets"] as? [[String: Any]] ?? []
        let by = reply["by"] as? String ?? "day"
        let threshold = formatNumber((reply["sleepThresholdMg"] as? NSNumber)?.doubleValue ?? 0)
        let limit = formatNumber((reply["dailyLimitMg"] as? NSNumber)?.doubleValue ?? 0)
        func number(_ row: [String: Any], _ key: String) -> Double { (row[key] as? NSNumber)?.doubleValue ?? 0 }
        func padded(_ text: String, _ width: Int) -> String { String(repeating: " ", count: max(0, width - text.count)) + text }
        var lines = [
            "\(by.padding(toLength: 18, withPad: " ", startingAt: 0))\(padded("mg", 8))\(padded("cups", 7))"
                + "\(padded("drinks", 8))\(padded("peak mg", 9))\(padded("h > \(threshold) mg", 12))  days > \(limit) mg"
        ]
        for row in buckets {
            let start = (row["start"] as? String ?? "?").prefix(10)
            let hours = number(row, "hours")
            let label = hours == 24 || by != "day" ? String(start) : "\(start) (\(formatNumber(hours)) h)"
            lines.append(
                label.padding(toLength: 18, withPad: " ", startingAt: 0) + padded(formatNumber(number(row, "mg")), 8)
                    + padded(String(format: "%.1f", number(row, "cups")), 7)
                    + padded(String(Int(number(row, "drinks"))), 8) + padded(formatNumber(number(row, "peakMg").rounded()), 9)
                    + padded(String(format: "%.1f", number(row, "hoursOverSleepThreshold")), 12)
                    + "  " + (Int(number(row, "daysOverLimit")) > 0 ? "\(Int(number(row, "daysOverLimit")))" : ""))
        }
        lines.append("\(buckets.count) \(by)s in \(reply["timeZone"] ?? "?"), half-life \(reply["halfLifeHours"] ?? "?") h")
        return lines.joined(separator: "\n")
    }
}
