import CoffeeDomain
import Foundation
import Testing

@Suite("Name-based UUIDs (RFC 9562 version 5) and SHA-1", .timeLimit(.minutes(1)))
struct NameBasedUUIDTests {
    func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    @Test func sha1MatchesFIPS180Vectors() {
        #expect(hex(SHA1.digest(Array("abc".utf8))) == "a9993e364706816aba3e25717850c26c9cd0d89d")
        #expect(hex(SHA1.digest([])) == "da39a3ee5e6b4b0d3255bfef95601890afd80709")
        let long = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"  // two blocks
        #expect(hex(SHA1.digest(Array(long.utf8))) == "84983e441c3bd26ebaae4aa1f95129e5e54670f1")
    }

    @Test func v5MatchesPythonsUUID5() {
        // uuid.uuid5(uuid.NAMESPACE_DNS, "python.org") in Python's standard library.
        let dns = UUID(uuidString: "6BA7B810-9DAD-11D1-80B4-00C04FD430C8")!
        #expect(NameBasedUUID.v5(namespace: dns, name: "python.org").uuidString == "886313E1-3B8A-5372-9B90-0C9AEE199E5D")
    }
}
