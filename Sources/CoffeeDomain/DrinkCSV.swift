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
        var times = HistoryCalendar.LocalTimes(calendar)
        var out: [UInt8] = []
        write(drink, times: &times, into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// `row`'s bytes, appended to `out`: an export writes a million of
    /// these, with `times` kept from one to the next (drinks in date order).
    public static func write(_ drink: Drink, times: inout HistoryCalendar.LocalTimes, into out: inout [UInt8]) {
        UUIDText.write(drink.uuid, into: &out)
        out.append(comma)
        times.write(drink.date, into: &out)
        out.append(comma)
        JSONBytes.append(drink.mgCaffeine, to: &out)
        out.append(comma)
        if let type = drink.type { writeText(type.rawValue, into: &out) }
        out.append(comma)
        JSONBytes.append(drink.version, to: &out)
        out.append(comma)
        if let source = drink.source { writeText(source, into: &out) }
        out.append(contentsOf: lineEnd)
    }

    private static let comma = UInt8(ascii: ",")
    private static let quote = UInt8(ascii: "\"")
    private static let lineEnd: [UInt8] = [0x0D, 0x0A]

    /// `field(text(value))`'s bytes: behind a `'` when it could start a
    /// formula, quoted when it holds a comma, a quote or a line break.
    static func writeText(_ value: String, into out: inout [UInt8]) { writeField(text(value), into: &out) }

    /// `field(value)`'s bytes: as it is, or quoted with its quotes doubled.
    static func writeField(_ value: String, into out: inout [UInt8]) {
        let utf8 = value.utf8
        guard utf8.contains(where: { $0 == comma || $0 == quote || $0 == 0x0A || $0 == 0x0D }) else {
            out.append(contentsOf: utf8)
            return
        }
        out.append(quote)
        for byte in utf8 {
            out.append(byte)
            if byte == quote { out.append(quote) }
        }
        out.append(quote)
    }

    /// What a spreadsheet would take as the start of a formula, and the `'` that says "text".
    static let formulaStartBytes: Set<UInt8> = Set("=+-@\t\r'".utf8)

    /// A client's text made safe for a spreadsheet: behind a `'` when it could start a formula.
    public static func text(_ text: String) -> String {
        guard let first = text.utf8.first, formulaStartBytes.contains(first) else { return text }
        return "'" + text
    }

    /// A text field as it was before `text(_:)`: one leading `'` taken off.
    public static func text(of field: String) -> String {
        field.first == "'" ? String(field.dropFirst()) : field
    }

    /// `text` as a field: as it is, or quoted.
    public static func field(_ text: String) -> String {
        var out: [UInt8] = []
        writeField(text, into: &out)
        return String(decoding: out, as: UTF8.self)
    }
}
