extension Sequence where Element == UInt8 {
    /// The bytes in lower-case hex, two digits each: a digest as tokens' files and signatures write it.
    public var lowercaseHex: String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        for byte in self {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
