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
        ByteSegment.writing(into: &out, capacity: 36) { $0.put(uuid: uuid) }
    }

    /// 0…15 as an upper-case hex digit.
    fileprivate static func hexDigit(_ v: UInt8) -> UInt8 {
        v < 10 ? UInt8(ascii: "0") + v : UInt8(ascii: "A") + v - 10
    }

    /// Parses the 36-character form, either case; nil for anything else.
    public static func parse(_ text: String) -> UUID? {
        var text = text
        return text.withUTF8 { parse(bytes: $0) }
    }

    /// `parse(_:)` over UTF-8 bytes: the 32 digits are read into two
    /// integers without a branch per digit, and any byte that is not a hex
    /// digit (or a dash out of place) makes it nil.
    public static func parse(bytes b: UnsafeBufferPointer<UInt8>) -> UUID? {
        guard b.count == 36, b[8] == 45, b[13] == 45, b[18] == 45, b[23] == 45 else { return nil }
        var bad: UInt8 = 0
        func digits(_ range: Range<Int>, into value: inout UInt64) {
            for i in range {
                let c = b[i]
                let digit = c &- 48  // '0'...'9' → 0...9
                let letter = (c | 0x20) &- 97  // 'a'...'f' or 'A'...'F' → 0...5
                let isDigit = digit < 10
                bad |= isDigit || letter < 6 ? 0 : 1
                value = value << 4 | UInt64(isDigit ? digit : letter &+ 10)
            }
        }
        var high: UInt64 = 0
        var low: UInt64 = 0
        digits(0..<8, into: &high)
        digits(9..<13, into: &high)
        digits(14..<18, into: &high)
        digits(19..<23, into: &low)
        digits(24..<36, into: &low)
        guard bad == 0 else { return nil }
        func byte(_ v: UInt64, _ k: UInt64) -> UInt8 { UInt8(truncatingIfNeeded: v >> (56 - 8 * k)) }
        return UUID(
            uuid: (
                byte(high, 0), byte(high, 1), byte(high, 2), byte(high, 3), byte(high, 4), byte(high, 5), byte(high, 6),
                byte(high, 7), byte(low, 0), byte(low, 1), byte(low, 2), byte(low, 3), byte(low, 4), byte(low, 5),
                byte(low, 6), byte(low, 7)
            ))
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

extension ByteSegment {
    /// Puts `UUIDText.string(uuid)`'s 36 bytes.
    public mutating func put(uuid: UUID) {
        var raw = uuid.uuid
        withUnsafeBytes(of: &raw) { bytes in
            put(width: 36) { text in
                var j = 0
                for (i, byte) in bytes.enumerated() {
                    if i == 4 || i == 6 || i == 8 || i == 10 {
                        text[j] = UInt8(ascii: "-")
                        j += 1
                    }
                    text[j] = UUIDText.hexDigit(byte >> 4)
                    text[j + 1] = UUIDText.hexDigit(byte & 0x0F)
                    j += 2
                }
            }
        }
    }
}
