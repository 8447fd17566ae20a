import Foundation

/// UUID text without `sprintf` and `sscanf`.
///
/// Foundation on Linux formats `uuidString` with `uuid_unparse` (printf) and
/// parses `UUID(uuidString:)` with `uuid_parse` (scanf); a profile of bus
/// ingest showed those two at about 20% of the service's time.
public enum UUIDText {
    /// The RFC 4122 text form, upper-case, as `uuidString` gives it.
    public static func string(_ uuid: UUID) -> String {
        var out = [UInt8]()
        out.reserveCapacity(36)
        write(uuid, into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// `string(uuid)`'s 36 bytes, appended to `out` in one piece (the
    /// publisher writes one per drink it announces; appending byte by byte
    /// checked the array's uniqueness and capacity 36 times).
    public static func write(_ uuid: UUID, into out: inout [UInt8]) {
        var raw = uuid.uuid
        withUnsafeBytes(of: &raw) { bytes in
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 36) { text in
                var j = 0
                for (i, byte) in bytes.enumerated() {
                    if i == 4 || i == 6 || i == 8 || i == 10 {
                        text[j] = UInt8(ascii: "-")
                        j += 1
                    }
                    text[j] = hexDigit(byte >> 4)
                    text[j + 1] = hexDigit(byte & 0x0F)
                    j += 2
                }
                out.append(contentsOf: text)
            }
        }
    }

    /// 0…15 as an upper-case hex digit.
    private static func hexDigit(_ v: UInt8) -> UInt8 {
        v < 10 ? UInt8(ascii: "0") + v : UInt8(ascii: "A") + v - 10
    }

    /// Parses the 36-character form, either case; nil for anything else.
    public static func parse(_ text: String) -> UUID? {
        var text = text
        return text.withUTF8 { parse(bytes: $0) }
    }

    /// `parse(_:)` over UTF-8 bytes, filled into the UUID's own storage (a
    /// scratch array here was a heap allocation per bus message).
    public static func parse(bytes b: UnsafeBufferPointer<UInt8>) -> UUID? {
        guard b.count == 36, b[8] == 45, b[13] == 45, b[18] == 45, b[23] == 45 else { return nil }
        var raw: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        let valid = withUnsafeMutableBytes(of: &raw) { out -> Bool in
            var i = 0
            var n = 0
            while i < 36 {
                if i == 8 || i == 13 || i == 18 || i == 23 {
                    i += 1
                    continue
                }
                guard let hi = nibble(b[i]), let lo = nibble(b[i + 1]) else { return false }
                out[n] = hi << 4 | lo
                n += 1
                i += 2
            }
            return true
        }
        return valid ? UUID(uuid: raw) : nil
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case 48...57: c - 48
        case 65...70: c - 55
        case 97...102: c - 87
        default: nil
        }
    }

    /// Byte order, for a stable tie-break when sorting.
    public static func precedes(_ a: UUID, _ b: UUID) -> Bool {
        var x = a.uuid
        var y = b.uuid
        return withUnsafeBytes(of: &x) { xa in
            withUnsafeBytes(of: &y) { ya in xa.lexicographicallyPrecedes(ya) }
        }
    }
}
