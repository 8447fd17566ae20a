import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Checks a property list's shape before Foundation sees it, so that no file
/// can make Foundation's recursive parsers run off the end of a thread's
/// stack (an XML plist about 10,000 `<array>`s deep did: SIGSEGV).
///
/// What it takes, and what it refuses by name:
/// - binary (`bplist00`): the trailer, the offset table and every object
///   reachable from the top one must lie inside the file, every reference
///   must name an object, no container may hold itself, nothing may nest
///   deeper than `maxDepth`, and containers shared by others may not expand
///   the tree past one value per byte of the file (a "billion laughs");
/// - XML in UTF-8: arrays and dictionaries (and a `<plist>` inside one)
///   may nest at most `maxDepth` deep. Tags are read as Foundation's
///   scanner reads them (by prefix; a tag ends at its first `>`, and `/>`
///   makes it empty; `<?…?>`, `<!--…-->`, `<![CDATA[…]]>` and
///   `<!DOCTYPE…>` hold none), and Foundation stops at the first close
///   tag that does not match its open tag, so the depth counted here is
///   never less than the depth Foundation recurses to;
/// - anything else (old-style OpenStep text, UTF-16 or UTF-32 text) is
///   refused: the inbox takes the two formats Apple's tools write.
///
/// Pure and allocation-light: one byte per binary object, nothing for XML;
/// time linear in the file's size.
public enum PropertyListCheck {
    /// Why a property list was refused, in words for `<name>.error.json`.
    public struct Refusal: Error, Equatable, Sendable, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    /// Checks `bytes`; returns when Foundation may be given them.
    public static func check(_ bytes: UnsafeRawBufferPointer, maxDepth: Int = JSONReader.maxDepth) throws(Refusal) {
        let magic: [UInt8] = Array("bplist".utf8)
        if bytes.count >= magic.count, zip(bytes.prefix(magic.count), magic).allSatisfy({ $0 == $1 }) {
            try Binary(bytes).checkDepth(maxDepth: maxDepth)
        } else {
            try checkXML(bytes, maxDepth: maxDepth)
        }
    }

    /// Checks `data`; returns when Foundation may be given it.
    public static func check(_ data: Data, maxDepth: Int = JSONReader.maxDepth) throws(Refusal) {
        try data.withUnsafeBytes { bytes in
            Result { () throws(Refusal) in try check(bytes, maxDepth: maxDepth) }
        }.get()
    }

    // MARK: XML

    static func checkXML(_ bytes: UnsafeRawBufferPointer, maxDepth: Int) throws(Refusal) {
        var i = 0
        let n = bytes.count
        if n >= 3, bytes[0] == 0xEF, bytes[1] == 0xBB, bytes[2] == 0xBF { i = 3 }  // a UTF-8 byte order mark
        while i < n, bytes[i] == 0x20 || bytes[i] == 0x09 || bytes[i] == 0x0A || bytes[i] == 0x0D { i += 1 }
        guard i < n, bytes[i] == UInt8(ascii: "<") else {
            throw Refusal("not a property list Apple's tools write: expected XML in UTF-8 (<?xml …) or binary (bplist00)")
        }
        guard index(of: 0, in: bytes, from: 0) == nil else {
            throw Refusal("property list text holds a NUL byte: only XML in UTF-8 is taken (not UTF-16 or UTF-32)")
        }
        var depth = 0
        while let open = index(of: UInt8(ascii: "<"), in: bytes, from: i) {
            i = open + 1
            guard i < n else { break }
            switch bytes[i] {
            case UInt8(ascii: "?"):
                i = skip(past: "?>", in: bytes, from: i + 1)
            case UInt8(ascii: "!"):
                if starts(with: "!--", in: bytes, at: i) {
                    i = skip(past: "-->", in: bytes, from: i + 3)
                } else if starts(with: "![CDATA[", in: bytes, at: i) {
                    i = skip(past: "]]>", in: bytes, from: i + 8)
                } else {
                    i = skip(past: ">", in: bytes, from: i + 1)  // <!DOCTYPE …>, ended where Foundation ends it
                }
            case UInt8(ascii: "/"):
                if isContainer(bytes, at: i + 1) { depth = max(0, depth - 1) }
                i = skip(past: ">", in: bytes, from: i + 1)
            default:
                let close = index(of: UInt8(ascii: ">"), in: bytes, from: i) ?? n
                i = close + 1
                guard isContainer(bytes, at: open + 1), close < n, bytes[close - 1] != UInt8(ascii: "/") else {
                    continue  // a value (<string>, <true/>…), an empty <array/>, or a tag Foundation refuses
                }
                depth += 1
                guard depth <= maxDepth + 1 else {  // the outer `<plist>` is not counted
                    throw Refusal("property list nests deeper than \(maxDepth) levels (at byte \(open)); refused")
                }
            }
        }
    }

    /// Whether the tag name at `i` is one Foundation recurses into: it
    /// matches tags by prefix, so `<arrayx>` is an array to it too.
    private static func isContainer(_ bytes: UnsafeRawBufferPointer, at i: Int) -> Bool {
        starts(with: "array", in: bytes, at: i) || starts(with: "dict", in: bytes, at: i)
            || starts(with: "plist", in: bytes, at: i)
    }

    private static func index(of byte: UInt8, in bytes: UnsafeRawBufferPointer, from start: Int) -> Int? {
        guard start < bytes.count, let base = bytes.baseAddress else { return nil }
        guard let found = memchr(base + start, Int32(byte), bytes.count - start) else { return nil }
        return base.distance(to: UnsafeRawPointer(found))
    }

    private static func starts(with text: StaticString, in bytes: UnsafeRawBufferPointer, at i: Int) -> Bool {
        let count = text.utf8CodeUnitCount
        guard i + count <= bytes.count else { return false }
        for k in 0..<count where bytes[i + k] != text.utf8Start[k] { return false }
        return true
    }

    /// The index just past the next `text` from `start`, or the end.
    private static func skip(past text: StaticString, in bytes: UnsafeRawBufferPointer, from start: Int) -> Int {
        let first = text.utf8Start[0]
        var i = start
        while let at = index(of: first, in: bytes, from: i) {
            if starts(with: text, in: bytes, at: at) { return at + text.utf8CodeUnitCount }
            i = at + 1
        }
        return bytes.count
    }

    // MARK: Binary

    /// A binary property list's trailer and offset table, checked.
    struct Binary {
        let bytes: UnsafeRawBufferPointer
        let offsetSize: Int
        let referenceSize: Int
        let objectCount: Int
        let top: Int
        let tableStart: Int

        init(_ bytes: UnsafeRawBufferPointer) throws(Refusal) {
            self.bytes = bytes
            guard bytes.count >= 8 + 1 + 32, bytes[6] == UInt8(ascii: "0"), bytes[7] == UInt8(ascii: "0") else {
                throw Refusal("binary property list is too short or not version 00")
            }
            let trailer = bytes.count - 32
            offsetSize = Int(bytes[trailer + 6])
            referenceSize = Int(bytes[trailer + 7])
            guard (1...8).contains(offsetSize), (1...8).contains(referenceSize) else {
                throw Refusal("binary property list trailer is corrupt (offset or reference size)")
            }
            let objects = Self.big(bytes, at: trailer + 8, size: 8)
            let top = Self.big(bytes, at: trailer + 16, size: 8)
            let table = Self.big(bytes, at: trailer + 24, size: 8)
            // Every count is checked against the file's size before any product is formed.
            guard objects >= 1, objects <= UInt64(trailer), top < objects, table >= 9, table <= UInt64(trailer),
                UInt64(trailer) - table >= objects * UInt64(offsetSize)
            else {
                throw Refusal("binary property list trailer is corrupt: its counts do not fit the file")
            }
            objectCount = Int(objects)
            self.top = Int(top)
            tableStart = Int(table)
        }

        static func big(_ bytes: UnsafeRawBufferPointer, at offset: Int, size: Int) -> UInt64 {
            var value: UInt64 = 0
            for k in 0..<size { value = value << 8 | UInt64(bytes[offset + k]) }
            return value
        }

        /// Where object `number` starts, checked to lie before the offset table.
        func offset(of number: Int) throws(Refusal) -> Int {
            let at = Self.big(bytes, at: tableStart + number * offsetSize, size: offsetSize)
            guard at >= 8, at < UInt64(tableStart) else {
                throw Refusal("binary property list object \(number) lies outside the file")
            }
            return Int(at)
        }

        /// A container's references (`first` is where they start, `count`
        /// of them), or nil for a leaf; every byte an object claims is
        /// checked to lie before the offset table.
        func references(of number: Int) throws(Refusal) -> (first: Int, count: Int)? {
            let start = try offset(of: number)
            let marker = bytes[start]
            let kind = marker >> 4
            let info = Int(marker & 0x0F)
            var end = start + 1
            func count() throws(Refusal) -> Int {
                guard info == 0x0F else { return info }
                guard end < tableStart, bytes[end] >> 4 == 0x1 else {
                    throw Refusal("binary property list object \(number) has a corrupt count")
                }
                let size = 1 << Int(bytes[end] & 0x0F)
                guard size <= 8, end + 1 + size <= tableStart else {
                    throw Refusal("binary property list object \(number) has a corrupt count")
                }
                let value = Self.big(bytes, at: end + 1, size: size)
                end += 1 + size
                guard value <= UInt64(tableStart) else {
                    throw Refusal("binary property list object \(number) claims \(value) entries, more than the file holds")
                }
                return Int(value)
            }
            var length = 0
            var children: Int?
            switch kind {
            case 0x0: length = 0  // null, booleans, fill
            case 0x1, 0x2: length = 1 << min(info, 5)  // integers, reals
            case 0x3: length = 8  // dates
            case 0x4, 0x5, 0x7: length = try count()  // data, ASCII and UTF-8 strings
            case 0x6: length = try count() * 2  // UTF-16 strings
            case 0x8: length = info + 1  // UIDs
            case 0xA, 0xB, 0xC: children = try count()  // arrays, ordered sets, sets
            case 0xD: children = try count() * 2  // dictionaries: keys, then values
            default: throw Refusal("binary property list object \(number) has an unknown type (0x\(String(marker, radix: 16)))")
            }
            if let children { length = children * referenceSize }
            guard length <= tableStart - end else {
                throw Refusal("binary property list object \(number) runs past the end of its data (its count lies)")
            }
            return children.map { (end, $0) }
        }

        func reference(_ first: Int, _ k: Int) throws(Refusal) -> Int {
            let value = Self.big(bytes, at: first + k * referenceSize, size: referenceSize)
            guard value < UInt64(objectCount) else {
                throw Refusal("binary property list refers to object \(value) of \(objectCount)")
            }
            return Int(value)
        }

        /// Walks the objects from the top one as the tree Foundation would
        /// build from them, without recursion: a container met again on its
        /// own path is a cycle, and a container shared by many others
        /// counts once for each, so a file of a few hundred bytes that
        /// would expand to 2^120 values (`A(k) = [A(k-1), A(k-1)]`) is
        /// refused when the walk passes one visit per byte of the file.
        func checkDepth(maxDepth: Int) throws(Refusal) {
            var onPath = [Bool](repeating: false, count: objectCount)
            struct Frame {
                let object: Int
                let first: Int
                let count: Int
                var next = 0
            }
            var path: [Frame] = []
            let budget = max(bytes.count, 1 << 16)
            var visits = 0
            func enter(_ object: Int) throws(Refusal) {
                guard !onPath[object] else { throw Refusal("binary property list object \(object) contains itself") }
                guard let (first, count) = try references(of: object) else { return }
                guard path.count < maxDepth else { throw Refusal("property list nests deeper than \(maxDepth) levels; refused") }
                onPath[object] = true
                path.append(Frame(object: object, first: first, count: count))
            }
            try enter(top)
            while let frame = path.last {
                guard frame.next < frame.count else {
                    onPath[frame.object] = false
                    path.removeLast()
                    continue
                }
                path[path.count - 1].next += 1
                visits += 1
                guard visits <= budget else {
                    throw Refusal(
                        "binary property list shares containers so that it expands to more values than its \(bytes.count) bytes hold; refused"
                    )
                }
                try enter(try reference(frame.first, frame.next))
            }
        }
    }
}
