import CoffeeDomain
import Foundation
import Testing

/// `PropertyListCheck`: no property list reaches Foundation's recursive
/// parsers deeper than 128 levels, or with counts that do not fit the file.
@Suite("Property list check", .timeLimit(.minutes(2)))
struct PropertyListCheckTests {
    func refusal(_ data: Data) -> String? {
        do throws(PropertyListCheck.Refusal) {
            try PropertyListCheck.check(data)
            return nil
        } catch {
            return error.description
        }
    }

    static let xmlHead = """
        <?xml version="1.0" encoding="UTF-8"?>
        <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
        <plist version="1.0">

        """

    func xml(_ body: String) -> Data { Data((Self.xmlHead + body + "\n</plist>\n").utf8) }

    func nestedXML(_ depth: Int, inner: String = "<integer>1</integer>") -> Data {
        xml(String(repeating: "<array>", count: depth) + inner + String(repeating: "</array>", count: depth))
    }

    @Test(arguments: ["CoffeeTracker", "CoffeeTracker-xml", "CoffeeTracker-plistlib", "CoffeeTracker-plistlib-xml"])
    func theWatchAppsFilesPass(name: String) throws {
        let url = try #require(Bundle.module.url(forResource: "Vectors/\(name)", withExtension: "plist"))
        #expect(refusal(try Data(contentsOf: url)) == nil)
    }

    @Test func xmlNestingIsBoundedAt128Levels() throws {
        #expect(refusal(nestedXML(128)) == nil)
        #expect(refusal(nestedXML(128, inner: "<dict/>")) == nil)
        #expect(refusal(nestedXML(129))?.contains("deeper than 128 levels") == true)
        #expect(refusal(nestedXML(20_000))?.contains("deeper than 128 levels") == true)
        // What passes, Foundation reads (on this thread's stack).
        _ = try PropertyListSerialization.propertyList(from: nestedXML(128), format: nil)
        // Dictionaries count as arrays do, and Foundation takes tags by prefix.
        let dicts = String(repeating: "<dict><key>k</key>", count: 129) + "<true/>" + String(repeating: "</dict>", count: 129)
        #expect(refusal(xml(dicts)) != nil)
        #expect(refusal(xml(String(repeating: "<arrayx>", count: 200))) != nil)
        #expect(refusal(xml(String(repeating: "<plist>", count: 200))) != nil)
    }

    @Test func siblingsAndEmptyContainersDoNotAddUp() {
        #expect(
            refusal(xml("<array>" + String(repeating: "<array><integer>1</integer></array>", count: 10_000) + "</array>")) == nil)
        #expect(refusal(xml("<array>" + String(repeating: "<array/><dict/>", count: 10_000) + "</array>")) == nil)
    }

    /// A close tag where Foundation sees none must not lower the count.
    @Test(arguments: ["<!-- </array> -->", "<?pi </array> ?>", "<string><![CDATA[</array>]]></string>"])
    func closeTagsInsideCommentsAndTextDoNotCount(hidden: String) {
        #expect(refusal(xml(String(repeating: "<array>" + hidden, count: 200))) != nil)
        #expect(refusal(xml(String(repeating: "<array>" + hidden, count: 100))) == nil)
    }

    /// A tag ends at its first `>`, as Foundation's scanner ends it: a `/>`
    /// in a quoted attribute makes nothing empty.
    @Test func aQuotedSlashDoesNotMakeATagEmpty() {
        #expect(refusal(xml(String(repeating: "<array a=\"/>\">", count: 200))) == nil)  // each ends at "/>": empty
        #expect(refusal(xml(String(repeating: "<array a=\">/\">", count: 200))) != nil)
    }

    @Test(arguments: [
        ("(a, b)", "expected XML"), ("{a = b;}", "expected XML"), ("", "expected XML"),
        ("<\0p\0l\0i\0s\0t\0>\0", "NUL byte"),
    ])
    func otherTextIsRefusedByName(text: String, says: String) {
        #expect(refusal(Data(text.utf8))?.contains(says) == true)
        #expect(refusal(Data([0xFF, 0xFE] + Array(text.utf8))) != nil)  // UTF-16 with its mark
    }

    // MARK: Binary

    @Test func binaryNestingIsBoundedAt128Levels() throws {
        #expect(refusal(BinaryPlist.nested(128).data) == nil)
        #expect(refusal(BinaryPlist.nested(129).data)?.contains("deeper than 128 levels") == true)
        #expect(refusal(BinaryPlist.nested(100_000).data)?.contains("deeper than 128 levels") == true)
        _ = try PropertyListSerialization.propertyList(from: BinaryPlist.nested(128).data, format: nil)
    }

    /// `A(k) = [A(k-1), A(k-1)]`: k + 1 objects, 2^(k+1) values once
    /// expanded. Foundation's `PropertyListSerialization` expands it (the
    /// fuzzer found this); refused past one value per byte of the file.
    @Test func sharedContainersMayNotExpandPastTheFilesSize() throws {
        let small = BinaryPlist.doubling(12).data  // 8,190 values, shared: taken, and read
        #expect(refusal(small) == nil)
        _ = try PropertyListSerialization.propertyList(from: small, format: nil)
        #expect(refusal(BinaryPlist.doubling(120).data)?.contains("expands to more values") == true)
        // A leaf shared by every element is what real files do: taken.
        var sharedLeaf = BinaryPlist()
        sharedLeaf.objects = [.array(Array(repeating: 1, count: 5000)), .ascii("same")]
        #expect(refusal(sharedLeaf.data) == nil)
    }

    @Test func aContainerThatHoldsItselfIsRefused() {
        var selfLoop = BinaryPlist()
        selfLoop.objects = [.array([0])]
        #expect(refusal(selfLoop.data)?.contains("contains itself") == true)
        var twoLoop = BinaryPlist()
        twoLoop.objects = [.array([1]), .dict([(2, 0)]), .int(7)]
        #expect(refusal(twoLoop.data)?.contains("contains itself") == true)
    }

    @Test func countsThatLieAreRefused() {
        var plist = BinaryPlist()
        plist.objects = [.array([1, 1]), .int(1)]
        #expect(refusal(plist.data) == nil)

        // An array that claims 200 references, in a file of a few dozen bytes.
        var bytes = plist.data
        bytes[8] = 0xAF
        bytes.insert(contentsOf: [0x10, 200], at: 9)
        plist.fixTrailer(&bytes, shiftedBy: 2)
        #expect(refusal(bytes)?.contains("claims 200 entries") == true, "\(refusal(bytes) ?? "taken")")

        // An array that claims 2^62 references.
        bytes = plist.data
        bytes[8] = 0xAF
        bytes.insert(contentsOf: [0x13, 0x40, 0, 0, 0, 0, 0, 0, 0], at: 9)
        plist.fixTrailer(&bytes, shiftedBy: 9)
        #expect(refusal(bytes)?.contains("more than the file holds") == true)

        // A string longer than the file.
        var text = BinaryPlist()
        text.objects = [.array([1]), .ascii("hello")]
        bytes = text.data
        let at = BinaryPlist.headerSize + 3  // the array: marker and one two-byte reference
        #expect(bytes[at] == 0x55)
        bytes[at] = 0x5E
        #expect(refusal(bytes)?.contains("count lies") == true)
    }

    @Test func aTrailerThatLiesIsRefused() {
        var plist = BinaryPlist()
        plist.objects = [.array([1]), .int(1)]
        let good = plist.data
        let trailer = good.count - 32
        func with(_ offset: Int, _ value: UInt64) -> Data {
            var bytes = good
            for k in 0..<8 { bytes[trailer + offset + k] = UInt8(truncatingIfNeeded: value >> (56 - 8 * UInt64(k))) }
            return bytes
        }
        #expect(refusal(with(8, 1 << 40)) != nil)  // objects
        #expect(refusal(with(16, 5)) != nil)  // top object
        #expect(refusal(with(24, 1 << 60)) != nil)  // offset table
        #expect(refusal(with(24, 3)) != nil)  // offset table inside the header
        var badReference = good
        badReference[BinaryPlist.headerSize + 2] = 9  // the array's one reference, to object 9 of 2
        #expect(refusal(badReference)?.contains("refers to object 9") == true)
        #expect(refusal(good.prefix(20)) != nil)
        var badSizes = good
        badSizes[trailer + 6] = 0
        #expect(refusal(badSizes) != nil)
    }

    /// Random trees, written by Foundation in both formats: refused exactly
    /// when deeper than 128 levels, and read by Foundation when taken.
    @Test func randomTreesAreJudgedByTheirDepth() throws {
        var generator = SystemRandomNumberGenerator()
        for round in 0..<60 {
            let depth = round < 30 ? Int.random(in: 120...136, using: &generator) : Int.random(in: 1...20, using: &generator)
            var value: Any = Int.random(in: 0...1000, using: &generator)
            for level in 0..<depth {
                let sibling: Any = level.isMultiple(of: 3) ? "text \(level)" : [Double(level)]
                value = Bool.random(using: &generator) ? [value, sibling] as [Any] : ["k": value, "s": sibling] as [String: Any]
            }
            let trueDepth = depth  // a sibling is at most one level deep, and sits beside a deeper value
            for format in [PropertyListSerialization.PropertyListFormat.xml, .binary] {
                let data = try PropertyListSerialization.data(fromPropertyList: value, format: format, options: 0)
                let refused = refusal(data)
                #expect((refused != nil) == (trueDepth > 128), "depth \(trueDepth) \(format): \(refused ?? "taken")")
                if refused == nil { _ = try PropertyListSerialization.propertyList(from: data, format: nil) }
            }
        }
    }
}

/// A binary property list written by hand: two-byte references, four-byte offsets.
struct BinaryPlist {
    enum Object {
        case int(UInt8)
        case ascii(String)
        case array([Int])
        case dict([(Int, Int)])
    }
    var objects: [Object] = []
    static let headerSize = 8

    static func nested(_ depth: Int) -> BinaryPlist {
        var plist = BinaryPlist()
        plist.objects = (0..<depth).map { .array([$0 + 1]) } + [.int(1)]
        return plist
    }

    static func doubling(_ depth: Int) -> BinaryPlist {
        var plist = BinaryPlist()
        plist.objects = (0..<depth).map { .array([$0 + 1, $0 + 1]) } + [.int(1)]
        return plist
    }

    var data: Data {
        var out = Data("bplist00".utf8)
        var offsets: [Int] = []
        func reference(_ r: Int) { out += [UInt8(r >> 8 & 0xFF), UInt8(r & 0xFF)] }
        func marker(_ kind: UInt8, _ count: Int) {
            if count < 15 {
                out.append(kind << 4 | UInt8(count))
            } else {
                out += [kind << 4 | 0x0F, 0x11, UInt8(count >> 8), UInt8(count & 0xFF)]
            }
        }
        for object in objects {
            offsets.append(out.count)
            switch object {
            case .int(let v): out += [0x10, v]
            case .ascii(let s):
                marker(0x5, s.utf8.count)
                out += Array(s.utf8)
            case .array(let refs):
                marker(0xA, refs.count)
                refs.forEach(reference)
            case .dict(let pairs):
                marker(0xD, pairs.count)
                pairs.map(\.0).forEach(reference)
                pairs.map(\.1).forEach(reference)
            }
        }
        let table = out.count
        for o in offsets { out += withUnsafeBytes(of: UInt32(o).bigEndian, Array.init) }
        out += [0, 0, 0, 0, 0, 0, 4, 2]
        for v in [UInt64(objects.count), 0, UInt64(table)] { out += withUnsafeBytes(of: v.bigEndian, Array.init) }
        return out
    }

    /// After inserting `shift` bytes into object 0: every later offset and the table move.
    func fixTrailer(_ bytes: inout Data, shiftedBy shift: Int) {
        let trailer = bytes.count - 32
        let table = Int(bytes[trailer + 24..<trailer + 32].reduce(0) { $0 << 8 | UInt64($1) }) + shift
        for k in 1..<objects.count {
            let at = table + 4 * k
            let old = bytes[at..<at + 4].reduce(0) { $0 << 8 | UInt32($1) }
            bytes.replaceSubrange(at..<at + 4, with: withUnsafeBytes(of: (old + UInt32(shift)).bigEndian, Array.init))
        }
        bytes.replaceSubrange(
            trailer + 24..<trailer + 32, with: withUnsafeBytes(of: UInt64(table).bigEndian, Array.init))
    }
}
