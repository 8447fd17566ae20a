import Foundation
import Testing

@testable import CoffeeDomain

/// `WireFormat`'s decoding is the inverse of its encoding: what the service
/// writes, a client reads back as it was.
@Suite("WireFormat decoding, the inverse of encoding", .timeLimit(.minutes(1)))
struct WireDecodingTests {
    func roundTrip(_ value: JSONValue) throws -> JSONValue {
        try JSONReader.parse(value.data())
    }

    @Test func everyDrinkComesBackAsItWasWritten() throws {
        var rng = SplitMix(state: 42)
        for i in 0..<500 {
            let drink = Drink(
                mgCaffeine: Double(rng.next() % 100_000) / 100 + 0.01,
                date: Date(timeIntervalSince1970: 946_684_800 + Double(rng.next() % 1_000_000_000) / 1000 * 1000),
                version: Int64(rng.next() % 9) + 1,
                type: i % 3 == 0 ? DrinkType.builtIn[Int(rng.next() % UInt64(DrinkType.builtIn.count))] : nil,
                source: i % 2 == 0 ? "bus \(i) \"quoted\" ☕" : nil)
            #expect(try WireFormat.drink(roundTrip(WireFormat.json(drink))) == drink)
            // The byte writer the broadcaster uses reads back the same.
            var bytes: [UInt8] = []
            WireFormat.write(drink, into: &bytes)
            #expect(try WireFormat.drink(JSONReader.parse(Data(bytes))) == drink)
        }
    }

    @Test func tombstonesAndTheModelComeBack() throws {
        let tombstone = Tombstone(uuid: UUID(), version: 7)
        #expect(try WireFormat.tombstone(roundTrip(WireFormat.json(tombstone))) == tombstone)
        let drinks = [Drink(mgCaffeine: 128, date: Date(timeIntervalSince1970: 1_796_000_000), source: "t")]
        let model = CaffeineModel(halfLifeHours: 5, timeZone: TimeZone(identifier: "UTC")!)
            .snapshot(of: drinks, at: Date(timeIntervalSince1970: 1_796_003_600), anchor: 9)
        let back = try WireFormat.snapshot(roundTrip(.object(WireFormat.members(model))))
        #expect(back.anchor == 9 && back.at == model.at && back.mgCaffeine == model.mgCaffeine)
        #expect(back.level == model.level && back.cupsLevel == model.cupsLevel && back.drinksToday == model.drinksToday)
        #expect(back.timeline.count == 287)
        for (a, b) in zip(back.timeline, model.timeline) {
            #expect(a.date == b.date && abs(a.mgCaffeine - b.mgCaffeine) <= 5e-7)  // rounded to a nanogram on the wire
        }
    }

    /// The `model` message's byte writer gives the bytes of the tree its
    /// members make, for models of many drinks, times and half-lives.
    /// A `changes` reply's drinks, written straight to bytes, are the bytes
    /// of the tree of their members, over random pages (sizes, types,
    /// sources with quotes and non-ASCII text, versions, anchors).
    @Test func aPagesDrinksAreTheTreesBytes() throws {
        var rng = SplitMix(state: 11)
        for round in 0..<60 {
            let drinks = (0..<Int(rng.next() % 40)).map { i in
                Drink(
                    mgCaffeine: Double(rng.next() % 80_000) / 100,
                    date: Date(timeIntervalSince1970: 1_700_000_000 + Double(rng.next() % 90_000_000) / 1000),
                    version: Int64(rng.next() % 4) + 1,
                    type: i % 3 == 0 ? DrinkType.builtIn[Int(rng.next() % UInt64(DrinkType.builtIn.count))] : nil,
                    source: i % 4 == 0 ? "phone \(round) \"☕\" \\ é" : nil)
            }
            let anchors = drinks.indices.map { Int64(round * 1000 + $0 * 3 + 1) }
            let tree = JSONValue.array(zip(drinks, anchors).map { WireFormat.json($0, anchor: $1) })
            let written = WireFormat.drinksArray(drinks, anchors: anchors)
            #expect(written.serialized() == tree.serialized())
            let tombstones = (0..<Int(rng.next() % 20)).map { _ in
                Tombstone(uuid: UUID(), version: Int64(rng.next() % 1_000_000_000_000) + 1)
            }
            let tombstoneAnchors = tombstones.indices.map { Int64(round) * 10_000_000_000 + Int64($0) }
            let deleted = WireFormat.tombstonesArray(tombstones, anchors: tombstoneAnchors)
            #expect(
                deleted.serialized()
                    == JSONValue.array(zip(tombstones, tombstoneAnchors).map { WireFormat.json($0, anchor: $1) }).serialized())
            let reply = JSONValue.object([
                ("ok", true), ("added", written), ("deleted", deleted), ("anchor", .int(anchors.last ?? 0)),
            ])
            let parsed = try JSONReader.parse(reply.data())
            #expect(try parsed.member("added").items().map(WireFormat.drink) == drinks)
            #expect(try parsed.member("deleted").items().map(WireFormat.tombstone) == tombstones)
        }
    }

    /// Integers and numbers written straight to bytes read as `String`
    /// writes them (whole numbers without a fraction, `null` when not
    /// finite), at the edges and at random.
    @Test func numbersAreWrittenAsStringWritesThem() {
        var rng = SplitMix(state: 5)
        var integers: [Int64] = [0, 1, -1, 9, 10, -10, 99, 100, -100, .max, .min, .max - 1, .min + 1]
        for _ in 0..<2000 { integers.append(Int64(bitPattern: rng.next()) >> (rng.next() % 64)) }
        for value in integers {
            var out: [UInt8] = [7]
            JSONBytes.append(value, to: &out)
            #expect(out == [7] + Array(String(value).utf8), "\(value)")
        }
        var doubles: [Double] = [0, -0.0, 0.5, -2.25, 95, 1e15, 1e15 - 1, -1e15 + 1, 1e-7, 1e300, .infinity, -.infinity, .nan]
        for _ in 0..<2000 {
            doubles.append(Double(Int64(bitPattern: rng.next()) >> (rng.next() % 64)) / [1, 4, 1000][Int(rng.next() % 3)])
        }
        for value in doubles {
            var out: [UInt8] = []
            JSONBytes.append(value, to: &out)
            let expected =
                !value.isFinite ? "null" : value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
            #expect(String(decoding: out, as: UTF8.self) == expected, "\(value)")
        }
    }

    /// A timeline's caffeine written from its millionths reads as the
    /// rounded number written in its shortest form does: at the edges
    /// (1e-4, where Swift starts writing an exponent; 1e9), across every
    /// magnitude a level has, and at random.
    @Test func millionthsAreWrittenAsTheRoundedNumberIs() {
        var rng = SplitMix(state: 11)
        var values: [Double] = [
            0, -0.0, 1e-7, 4.9e-7, 5e-7, 0.00005, 0.0000999, 0.00009951, 0.0001, 0.000100001, 0.00015, 0.5, 1, 95,
            95.0000004, 95.0000005, 123.456789, -0.5, -1.5, -0.000123, 999_999_999.999999, 1e9, 1e9 + 0.5, 1e12, .nan,
            .infinity,
        ]
        for _ in 0..<20_000 {
            let magnitude = pow(10, Double(rng.next() % 14) - 5)  // 1e-5 … 1e8
            values.append(Double(rng.next() % 1_000_000_000) / 1e9 * magnitude)
        }
        for value in values {
            var out: [UInt8] = [7]
            JSONBytes.append(millionths: value, to: &out)
            var expected: [UInt8] = [7]
            JSONBytes.append(WireFormat.timelineMg(value), to: &expected)
            #expect(out == expected, "\(value)")
            if out != expected { return }
        }
    }

    @Test func theModelMessageIsTheTreesBytes() throws {
        var rng = SplitMix(state: 7)
        for i in 0..<40 {
            let at = Date(timeIntervalSince1970: 1_796_000_000 + Double(rng.next() % 10_000_000) / 1000)
            let drinks = (0..<(i % 7)).map { _ in
                Drink(mgCaffeine: Double(rng.next() % 40_000) / 100, date: at - Double(rng.next() % 100_000), source: nil)
            }
            var model = CaffeineModel(halfLifeHours: [5, 4.5, 1 / 3][i % 3], timeZone: TimeZone(identifier: "UTC")!)
                .snapshot(of: drinks, at: at, anchor: Int64(rng.next() % 1_000_000))
            if i % 2 == 1 { model.identity = StoreIdentity(store: UUID(), epoch: Int64(i)) }
            #expect(WireFormat.modelMessage(model) == Array(JSONValue.object(WireFormat.members(model)).data()))
            let back = try WireFormat.snapshot(JSONReader.parse(Data(WireFormat.modelMessage(model))))
            #expect(back.identity == model.identity)
        }
    }

    @Test func whatCannotBeReadIsNamed() {
        #expect(throws: WireFormat.DecodingError("missing \"date\"")) {
            try WireFormat.drink(.object([("uuid", .string(UUID().uuidString)), ("mgCaffeine", .int(5))]))
        }
        #expect(throws: WireFormat.DecodingError("not a UUID: \"x\"")) {
            try WireFormat.tombstone(.object([("uuid", "x")]))
        }
    }
}
