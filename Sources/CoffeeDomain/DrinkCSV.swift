import Foundation

/// Live drinks as CSV that a spreadsheet opens as it is (docs/protocol.md
/// §15; RFC 4180): a header row, CRLF line ends, a field quoted when it
/// holds a comma, a quote or a line break, its quotes doubled. Dates in the
/// person's time zone with their offset; numbers as the JSON wire writes them.
/// A text a client chose (`type`, `source`) that a spreadsheet would run as a
/// formula (it begins with `=`, `+`, `-`, `@`, a tab or a carriage return) is
/// written behind a `'`, as OWASP advises against CSV injection; one that
/// begins with `'` gets one more, so that `text(of:)` gives back every text.
public enum DrinkCSV {
    public static let header = "uuid,date,mgCaffeine,type,version,source\r\n"

    /// One drink's row, its line end included.
    public static func row(_ drink: Drink, in calendar: HistoryCalendar) -> String {
        var mg: [UInt8] = []
        JSONBytes.append(drink.mgCaffeine, to: &mg)
        let fields = [
            drink.uuid.uuidString, calendar.localTime(drink.date), String(decoding: mg, as: UTF8.self),
            text(drink.type?.rawValue ?? ""), String(drink.version), text(drink.source ?? ""),
        ]
        return fields.map(field).joined(separator: ",") + "\r\n"
    }

    /// What a spreadsheet would take as the start of a formula, and the `'` that says "text".
    static let formulaStarts: Set<Character> = ["=", "+", "-", "@", "\t", "\r", "'"]

    /// A client's text made safe for a spreadsheet: behind a `'` when it could start a formula.
    public static func text(_ text: String) -> String {
        guard let first = text.first, formulaStarts.contains(first) else { return text }
        return "'" + text
    }

    /// A text field as it was before `text(_:)`: one leading `'` taken off.
    public static func text(of field: String) -> String {
        field.first == "'" ? String(field.dropFirst()) : field
    }

    /// `text` as a field: as it is, or quoted.
    public static func field(_ text: String) -> String {
        guard text.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return text }
        return "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}
