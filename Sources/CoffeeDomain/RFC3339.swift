import Foundation

/// RFC 3339 dates, parsed and printed without a formatter object.
///
/// `ISO8601DateFormatter` parses about 16 k dates/s on this kind of machine,
/// which alone would cap ingestion; this does the arithmetic
/// directly and is strict about what it accepts.
public enum RFC3339 {
    /// Parses `2026-11-29T08:15:00Z`, `2026-11-29T09:15:00.250+01:00` and the
    /// like. A zone (`Z` or `±HH:MM`) is required. Returns nil when the text
    /// is not such a date.
    public static func parse(_ text: String) -> Date? {
        var text = text
        return text.withUTF8 { parse(bytes: $0) }
    }

    public static func parse(bytes b: UnsafeBufferPointer<UInt8>) -> Date? {
        // Shortest form: YYYY-MM-DDTHH:MM:SSZ (20 bytes).
        guard b.count >= 20, b.count <= 64 else { return nil }
        func digits(_ at: Int, _ n: Int) -> Int? {
            var v = 0
            for i in at..<(at + n) {
                let c = b[i]
                guard c >= 48, c <= 57 else { return nil }
                v = v * 10 + Int(c - 48)
            }
            return v
        }
        guard let year = digits(0, 4), b[4] == UInt8(ascii: "-"),
            let month = digits(5, 2), b[7] == UInt8(ascii: "-"),
            let day = digits(8, 2),
            b[10] == UInt8(ascii: "T") || b[10] == UInt8(ascii: "t") || b[10] == UInt8(ascii: " "),
            let hour = digits(11, 2), b[13] == UInt8(ascii: ":"),
            let minute = digits(14, 2), b[16] == UInt8(ascii: ":"),
            let second = digits(17, 2)
        else { return nil }
        guard (1...12).contains(month), day >= 1, day <= daysInMonth(year: year, month: month),
            hour <= 23, minute <= 59, second <= 60
        else { return nil }

        var i = 19
        var fraction = 0.0
        if b[i] == UInt8(ascii: ".") {
            i += 1
            var scale = 0.1
            let start = i
            while i < b.count, b[i] >= 48, b[i] <= 57 {
                fraction += Double(b[i] - 48) * scale
                scale /= 10
                i += 1
            }
            guard i > start else { return nil }
        }
        guard i < b.count else { return nil }
        var offset = 0
        switch b[i] {
        case UInt8(ascii: "Z"), UInt8(ascii: "z"):
            guard i + 1 == b.count else { return nil }
        case UInt8(ascii: "+"), UInt8(ascii: "-"):
            guard i + 6 == b.count, let oh = digits(i + 1, 2), b[i + 3] == UInt8(ascii: ":"),
                let om = digits(i + 4, 2), oh <= 23, om <= 59
            else { return nil }
            offset = (oh * 3600 + om * 60) * (b[i] == UInt8(ascii: "+") ? 1 : -1)
        default:
            return nil
        }
        let days = daysFromCivil(year: year, month: month, day: day)
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset
        return Date(timeIntervalSince1970: Double(seconds) + fraction)
    }

    /// `2026-11-29T13:00:00.000Z`: UTC, milliseconds, rounded to the nearest.
    public static func string(_ date: Date) -> String {
        var out = [UInt8]()
        out.reserveCapacity(24)
        write(date, into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// `string(date)`'s 24 bytes, appended to `out` in one piece.
    public static func write(_ date: Date, into out: inout [UInt8]) {
        write(date, offset: nil, alwaysMilliseconds: true, into: &out)
    }

    /// `date` as RFC 3339: at `offset` seconds east of UTC with the offset
    /// written (`+01:00`), or in UTC with `Z` when `offset` is nil; the
    /// milliseconds always, or only when there are any.
    public static func write(_ date: Date, offset: Int?, alwaysMilliseconds: Bool, into out: inout [UInt8]) {
        ByteSegment.writing(into: &out, capacity: 29) {
            $0.put(date: date, offset: offset, alwaysMilliseconds: alwaysMilliseconds)
        }
    }

    static func daysInMonth(year: Int, month: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days since 1970-01-01 for a proleptic Gregorian date (Hinnant's algorithm).
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    static func civilFromDays(_ z: Int) -> (Int, Int, Int) {
        let z = z + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}

extension ByteSegment {
    /// Puts `RFC3339.write(date, offset:alwaysMilliseconds:)`'s bytes (at most 29).
    public mutating func put(date: Date, offset: Int?, alwaysMilliseconds: Bool) {
        let totalMillis = Int64((date.timeIntervalSince1970 * 1000).rounded()) + Int64(offset ?? 0) * 1000
        var days = totalMillis / 86_400_000
        var rest = totalMillis % 86_400_000
        if rest < 0 {
            rest += 86_400_000
            days -= 1
        }
        let (year, month, day) = RFC3339.civilFromDays(Int(days))
        let ms = Int(rest % 1000)
        let s = Int(rest / 1000)
        /// `v` in `width` decimal digits, then `separator` (none when nil).
        func number(_ v: Int, _ width: Int, _ separator: Unicode.Scalar?) {
            var v = v
            put(width: width) { text in
                for k in stride(from: width - 1, through: 0, by: -1) {
                    text[k] = UInt8(48 + v % 10)
                    v /= 10
                }
            }
            if let separator { put(byte: UInt8(ascii: separator)) }
        }
        number(year, 4, "-")
        number(month, 2, "-")
        number(day, 2, "T")
        number(s / 3600, 2, ":")
        number(s / 60 % 60, 2, ":")
        let fraction = alwaysMilliseconds || ms != 0
        number(s % 60, 2, fraction ? "." : nil)
        if fraction { number(ms, 3, nil) }
        if let offset {
            let minutes = abs(offset) / 60
            put(byte: UInt8(ascii: offset < 0 ? "-" : "+"))
            number(minutes / 60, 2, ":")
            number(minutes % 60, 2, nil)
        } else {
            put(byte: UInt8(ascii: "Z"))
        }
    }
}
