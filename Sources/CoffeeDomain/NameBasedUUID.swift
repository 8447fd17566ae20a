import Foundation

/// Name-based UUIDs, version 5 (RFC 9562 §5.5): SHA-1 of a namespace's 16
/// bytes and a name's UTF-8, with the version and variant bits set. A Health
/// export's caffeine record gets one from its own fields, so the same record
/// always maps to the same drink (docs/protocol.md §5).
public enum NameBasedUUID {
    /// The namespace of Health export records (docs/protocol.md §5).
    public static let healthRecords = UUID(uuidString: "F04AACFF-1D25-4EB2-AA68-571E035447D9")!

    public static func v5(namespace: UUID, name: String) -> UUID {
        let n = namespace.uuid
        var message = [n.0, n.1, n.2, n.3, n.4, n.5, n.6, n.7, n.8, n.9, n.10, n.11, n.12, n.13, n.14, n.15]
        message += Array(name.utf8)
        var h = SHA1.digest(message)
        h[6] = (h[6] & 0x0F) | 0x50  // version 5
        h[8] = (h[8] & 0x3F) | 0x80  // RFC 9562 variant
        return UUID(uuid: (h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7], h[8], h[9], h[10], h[11], h[12], h[13], h[14], h[15]))
    }
}

/// SHA-1 (FIPS 180-4), for name-based UUIDs only: not for anything that
/// needs a secure hash. Foundation on Linux has no digest of its own.
public enum SHA1 {
    public static func digest(_ message: [UInt8]) -> [UInt8] {
        var h: (UInt32, UInt32, UInt32, UInt32, UInt32) = (0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476, 0xC3D2_E1F0)
        var padded = message
        padded.append(0x80)
        while padded.count % 64 != 56 { padded.append(0) }
        let bits = UInt64(message.count) * 8
        for shift in stride(from: 56, through: 0, by: -8) { padded.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift))) }
        var w = [UInt32](repeating: 0, count: 80)
        for block in stride(from: 0, to: padded.count, by: 64) {
            for i in 0..<16 {
                let j = block + i * 4
                w[i] = UInt32(padded[j]) << 24 | UInt32(padded[j + 1]) << 16 | UInt32(padded[j + 2]) << 8 | UInt32(padded[j + 3])
            }
            for i in 16..<80 {
                let x = w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]
                w[i] = x << 1 | x >> 31
            }
            var (a, b, c, d, e) = h
            for i in 0..<80 {
                let (f, k): (UInt32, UInt32)
                switch i {
                case 0..<20: (f, k) = ((b & c) | (~b & d), 0x5A82_7999)
                case 20..<40: (f, k) = (b ^ c ^ d, 0x6ED9_EBA1)
                case 40..<60: (f, k) = ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC)
                default: (f, k) = (b ^ c ^ d, 0xCA62_C1D6)
                }
                let t = (a << 5 | a >> 27) &+ f &+ e &+ k &+ w[i]
                (e, d, c, b, a) = (d, c, b << 30 | b >> 2, a, t)
            }
            h = (h.0 &+ a, h.1 &+ b, h.2 &+ c, h.3 &+ d, h.4 &+ e)
        }
        return [h.0, h.1, h.2, h.3, h.4].flatMap { v in (0..<4).map { UInt8(truncatingIfNeeded: v >> (24 - 8 * UInt32($0))) } }
    }
}
