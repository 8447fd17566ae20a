import Foundation

/// Dates as Apple Health's export and Health Auto Export write them:
/// `2024-01-02 08:15:00 +0100` (`yyyy-MM-dd HH:mm:ss Z`).
public enum HealthDate {
    public static func parse(_ text: String) -> Date? {
        let parts = text.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[2].count == 5, let sign = parts[2].first, sign == "+" || sign == "-" else { return nil }
        let zone = parts[2]
        let offset = "\(sign)\(zone.dropFirst().prefix(2)):\(zone.suffix(2))"
        return RFC3339.parse("\(parts[0])T\(parts[1])\(offset)")
    }
}
