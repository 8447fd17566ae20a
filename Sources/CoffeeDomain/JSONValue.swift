import Foundation

/// A JSON document to write, with object keys kept in the order given.
///
/// Output is built by hand rather than through `JSONSerialization` so that
/// keys keep a stable, readable order and numbers print in their shortest form.
public enum JSONValue: Sendable, Hashable, ExpressibleByStringLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByIntegerLiteral
{
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([(String, JSONValue)])
    /// A value already written as compact JSON (`WireFormat.drinksArray`),
    /// copied out as it is: a page of thousands of drinks written straight
    /// to bytes rather than through a tree of their members. Only ever
    /// written; a reader never makes one.
    case encoded([UInt8])

    public init(stringLiteral value: String) { self = .string(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }

    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool { lhs.serialized() == rhs.serialized() }
    public func hash(into hasher: inout Hasher) { hasher.combine(serialized()) }

    /// Compact JSON text.
    public func serialized() -> String { String(decoding: bytes(), as: UTF8.self) }

    /// Compact JSON as UTF-8 bytes.
    public func data() -> Data { Data(bytes()) }

    func bytes() -> [UInt8] {
        var out: [UInt8] = []
        // A reply's pages are written already: room for them, not doubling up to them.
        var encoded = 0
        if case .object(let members) = self {
            for case (_, .encoded(let bytes)) in members { encoded += bytes.count }
        }
        out.reserveCapacity(256 + encoded)
        write(to: &out)
        return out
    }

    /// Appends compact JSON to `out`, byte by byte: building a `String` cost
    /// the broadcaster most of its time in `String` appends.
    public func write(to out: inout [UInt8]) {
        switch self {
        case .null: JSONBytes.append("null", to: &out)
        case .bool(let b): out += (b ? "true" : "false").utf8
        case .int(let i): JSONBytes.append(i, to: &out)
        case .double(let d): JSONBytes.append(d, to: &out)
        case .string(let s): JSONValue.quote(s, into: &out)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                item.write(to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            for (i, (key, value)) in members.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                JSONValue.quote(key, into: &out)
                out.append(UInt8(ascii: ":"))
                value.write(to: &out)
            }
            out.append(UInt8(ascii: "}"))
        case .encoded(let bytes):
            out += bytes
        }
    }

    /// A JSON string: UTF-8 passes through; quote, backslash and control
    /// characters are escaped.
    static func quote(_ s: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        // Most strings (UUIDs, dates, sources) need no escape: copied whole.
        let plain = s.utf8.withContiguousStorageIfAvailable { bytes -> Bool in
            guard !bytes.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) else {
                return false
            }
            out.append(contentsOf: bytes)
            return true
        }
        if plain == true {
            out.append(UInt8(ascii: "\""))
            return
        }
        for byte in s.utf8 {
            switch byte {
            case UInt8(ascii: "\""): JSONBytes.append(#"\""#, to: &out)
            case UInt8(ascii: "\\"): JSONBytes.append(#"\\"#, to: &out)
            case 0x0A: JSONBytes.append(#"\n"#, to: &out)
            case 0x0D: JSONBytes.append(#"\r"#, to: &out)
            case 0x09: JSONBytes.append(#"\t"#, to: &out)
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                JSONBytes.append(#"\u00"#, to: &out)
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0xF)])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}
