import CoffeeDomain
import Foundation
import Testing

/// `UUIDKey` keys a dictionary as the UUID itself does, and its hash stays
/// keyed: UUIDs made to share any fold of their two words still spread.
@Suite("UUIDKey, a UUID's cheaper dictionary key", .timeLimit(.minutes(1)))
struct UUIDKeyTests {
    @Test func aDictionaryOfKeysHoldsWhatOneOfUUIDsHolds() {
        var rng = SplitMix(state: 3)
        let uuids = (0..<5000).map { _ in UUID() }
        var byUUID: [UUID: Int] = [:]
        var byKey: [UUIDKey: Int] = [:]
        for i in 0..<20_000 {
            let uuid = uuids[Int(rng.next() % UInt64(uuids.count))]
            if i % 5 == 4 {
                #expect(byUUID.removeValue(forKey: uuid) == byKey.removeValue(forKey: UUIDKey(uuid)))
            } else {
                #expect(byUUID.updateValue(i, forKey: uuid) == byKey.updateValue(i, forKey: UUIDKey(uuid)))
            }
        }
        #expect(byUUID.count == byKey.count)
        for (uuid, value) in byUUID { #expect(byKey[UUIDKey(uuid)] == value) }
        #expect(UUIDKey(uuids[0]) == UUIDKey(UUID(uuid: uuids[0].uuid)))
        #expect(UUIDKey(uuids[0]) != UUIDKey(uuids[1]))
    }

    @Test func uuidsMadeToCollideUnderAFoldStillSpread() {
        // Words equal (their xor 0), or swapped: a hash of high ^ low or of
        // high &+ low would give each set one value.
        var rng = SplitMix(state: 9)
        var equalWords = Set<Int>()
        var swapped = Set<Int>()
        for _ in 0..<1000 {
            let word = rng.next()
            let (a, b) = (rng.next(), rng.next())
            equalWords.insert(Self.key(word, word)._rawHashValue(seed: 0))
            swapped.insert(Self.key(a, b)._rawHashValue(seed: 0) ^ Self.key(b, a)._rawHashValue(seed: 0))
        }
        #expect(equalWords.count > 990)
        #expect(swapped.count > 990)
    }

    static func key(_ high: UInt64, _ low: UInt64) -> UUIDKey {
        var uuid = UUID().uuid
        withUnsafeMutableBytes(of: &uuid) {
            $0.storeBytes(of: high, as: UInt64.self)
            $0.storeBytes(of: low, toByteOffset: 8, as: UInt64.self)
        }
        return UUIDKey(UUID(uuid: uuid))
    }
}
