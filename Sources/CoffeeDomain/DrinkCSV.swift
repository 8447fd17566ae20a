import Foundation

/// Live drinks as CSV that a spreadsheet opens as it is (docs/protocol.md
/// §15; RFC 4180): a header row, CRLF line ends, a field quoted when it
/// holds a comma, a quote or a line break, its quotes doubled. Dates in the
/// person's time zone with their offset; numbers as the JSON wire writes them.
public enum DrinkCSV {
    public static let header = "uuid,date,mgCaffeine,type,version,source\r\n"

    /// One drink's row, its line end included.
    public static func row(_ drink: Drink, in calendar: HistoryCalendar) -> String {
        var mg: [UInt8] = []
        JSONBytes.append(drink.mgCaffeine, to: &mg)
        let fields = [
            drink.uuid.uuidString, calendar.localTime(drink.date), String(decoding: mg, as: UTF8.self),
            drink.type?.rawValue ?? "", String(drink.version), drink.source ?? "",
        ]
        return fields.map(field).joined(separator: ",") + "\r\n"
    }

    /// `text` as a field: as it is, or quoted.
    public static func field(_ text: String) -> String {
        guard text.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return text }
        return "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}
