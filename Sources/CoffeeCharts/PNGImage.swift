/// An RGBA picture written as a PNG (ISO/IEC 15948): the app's icons
/// (docs/protocol.md §17). The pixel data goes in zlib's stored (not
/// compressed) blocks, so no compressor is needed: an icon of flat colours
/// is a few hundred kB at 512 px, sent once to a phone that keeps it.
public struct PNGImage: Sendable {
    public let width: Int
    public let height: Int
    /// Row after row, four bytes a pixel: red, green, blue, alpha.
    public var rgba: [UInt8]

    public init(width: Int, height: Int, fill: (red: UInt8, green: UInt8, blue: UInt8, alpha: UInt8) = (0, 0, 0, 0)) {
        self.width = width
        self.height = height
        rgba = [UInt8](repeating: 0, count: width * height * 4)
        for i in 0..<(width * height) {
            (rgba[4 * i], rgba[4 * i + 1], rgba[4 * i + 2], rgba[4 * i + 3]) = fill
        }
    }

    public subscript(x: Int, y: Int) -> (red: UInt8, green: UInt8, blue: UInt8, alpha: UInt8) {
        get {
            let i = 4 * (y * width + x)
            return (rgba[i], rgba[i + 1], rgba[i + 2], rgba[i + 3])
        }
        set {
            let i = 4 * (y * width + x)
            (rgba[i], rgba[i + 1], rgba[i + 2], rgba[i + 3]) = newValue
        }
    }

    /// The file's bytes.
    public var png: [UInt8] {
        var out: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        var header: [UInt8] = []
        Self.append32(UInt32(width), to: &header)
        Self.append32(UInt32(height), to: &header)
        header += [8, 6, 0, 0, 0]  // 8 bits a channel, RGBA, deflate, the one filter method, no interlace
        Self.chunk("IHDR", header, to: &out)
        Self.chunk("IDAT", zlibStored(), to: &out)
        Self.chunk("IEND", [], to: &out)
        return out
    }

    /// Each row behind its filter byte (0: none), in a zlib stream of stored blocks.
    private func zlibStored() -> [UInt8] {
        let rowBytes = width * 4
        var raw: [UInt8] = []
        raw.reserveCapacity(height * (rowBytes + 1))
        for y in 0..<height {
            raw.append(0)
            raw += rgba[(y * rowBytes)..<((y + 1) * rowBytes)]
        }
        var out: [UInt8] = [0x78, 0x01]  // deflate, a 32 K window, no dictionary, the fastest level
        var offset = 0
        repeat {
            let count = min(65_535, raw.count - offset)
            let last: UInt8 = offset + count == raw.count ? 1 : 0
            out += [last, UInt8(count & 0xFF), UInt8(count >> 8), UInt8(~count & 0xFF), UInt8((~count >> 8) & 0xFF)]
            out += raw[offset..<(offset + count)]
            offset += count
        } while offset < raw.count
        Self.append32(Self.adler32(raw), to: &out)
        return out
    }

    private static func chunk(_ type: String, _ data: [UInt8], to out: inout [UInt8]) {
        append32(UInt32(data.count), to: &out)
        let typed = Array(type.utf8) + data
        out += typed
        append32(crc32(typed), to: &out)
    }

    private static func append32(_ value: UInt32, to out: inout [UInt8]) {
        out += [UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)]
    }

    private static let crcTable: [UInt32] = (0..<256).map { n in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 == 1 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    /// The CRC-32 of PNG's chunks (and of zip, gzip).
    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var c: UInt32 = 0xFFFF_FFFF
        for byte in bytes { c = crcTable[Int((c ^ UInt32(byte)) & 0xFF)] ^ (c >> 8) }
        return c ^ 0xFFFF_FFFF
    }

    /// zlib's checksum of the uncompressed data.
    static func adler32(_ bytes: [UInt8]) -> UInt32 {
        var a: UInt32 = 1
        var b: UInt32 = 0
        for byte in bytes {
            a = (a + UInt32(byte)) % 65_521
            b = (b + a) % 65_521
        }
        return b << 16 | a
    }
}
