import CoffeeDomain
import Foundation
import Testing

@Suite("Validation and decoding (docs/protocol.md §1)", .timeLimit(.minutes(2)))
struct ValidationTests {
    let now = RFC3339.parse("2026-11-29T13:00:00Z")!
    let decoder = BatchDecoder()
    let id = "6F1C3B1E-3F55-4B0B-9C1E-7A2D8E4B5C01"

    func drinks(_ json: String) throws(ValidationError) -> [Drink] {
        try decoder.drinks(json: Data(json.utf8), now: now, source: "bus")
    }

    func error(_ json: String) -> ValidationError? {
        do {
            _ = try drinks(json)
            return nil
        } catch { return error }
    }

    @Test func fullDrinkDecodes() throws {
        let d = try drinks(
            #"{"uuid":"\#(id.lowercased())","mgCaffeine":96,"date":"2026-11-29T09:15:00.250+01:00","type":"smallCoffee","version":3,"source":"phone","extra":1}"#
        )
        #expect(d.count == 1)
        #expect(d[0].uuid.uuidString == id)
        #expect(RFC3339.string(d[0].date) == "2026-11-29T08:15:00.250Z")
        #expect(d[0].version == 3 && d[0].type == .smallCoffee && d[0].source == "phone")
    }

    @Test func typeGivesServingSizeAndEpochDatesWork() throws {
        let d = try drinks(#"[{"uuid":"\#(id)","type":"doubleEspresso","date":1795950000}]"#)
        #expect(d[0].mgCaffeine == 128)
        #expect(d[0].date == Date(timeIntervalSince1970: 1_795_950_000))
        #expect(d[0].source == "bus" && d[0].version == 1)
    }

    @Test(arguments: [
        (#"{"mgCaffeine":5,"date":"2026-11-29T08:00:00Z"}"#, "uuid", "is required"),
        (#"{"uuid":"nope","mgCaffeine":5,"date":"2026-11-29T08:00:00Z"}"#, "uuid", "must be a UUID"),
        (#"{"uuid":"ID","date":"2026-11-29T08:00:00Z"}"#, "mgCaffeine", "is required unless type"),
        (#"{"uuid":"ID","mgCaffeine":-5,"date":"2026-11-29T08:00:00Z"}"#, "mgCaffeine", "must be > 0, got -5"),
        (#"{"uuid":"ID","mgCaffeine":0,"date":"2026-11-29T08:00:00Z"}"#, "mgCaffeine", "must be > 0"),
        (#"{"uuid":"ID","mgCaffeine":1001,"date":"2026-11-29T08:00:00Z"}"#, "mgCaffeine", "must be <= 1000"),
        (#"{"uuid":"ID","mgCaffeine":"5","date":"2026-11-29T08:00:00Z"}"#, "mgCaffeine", "must be a number"),
        (#"{"uuid":"ID","mgCaffeine":5}"#, "date", "is required"),
        (#"{"uuid":"ID","mgCaffeine":5,"date":"2026-11-29 08:00"}"#, "date", "RFC 3339"),
        (#"{"uuid":"ID","mgCaffeine":5,"date":"2026-11-29T08:00:00"}"#, "date", "RFC 3339"),
        (#"{"uuid":"ID","mgCaffeine":5,"date":"2026-02-30T08:00:00Z"}"#, "date", "RFC 3339"),
        (#"{"uuid":"ID","mgCaffeine":5,"date":"2026-11-29T13:05:01Z"}"#, "date", "in the future"),
        (#"{"uuid":"ID","type":"latte","date":"2026-11-29T08:00:00Z"}"#, "type", "must be a drink of the catalogue"),
        (#"{"uuid":"ID","type":"oat latte","date":"2026-11-29T08:00:00Z"}"#, "type", "must be a letter, then"),
        (#"{"uuid":"ID","mgCaffeine":5,"date":"2026-11-29T08:00:00Z","version":0}"#, "version", "must be >= 1"),
        (#"{"uuid":"ID","mgCaffeine":5,"date":"2026-11-29T08:00:00Z","version":1.5}"#, "version", "must be an integer"),
        (
            #"{"uuid":"ID","mgCaffeine":5,"date":"2026-11-29T08:00:00Z","source":"\#(String(repeating: "x", count: 129))"}"#,
            "source", "at most 128 bytes"
        ),
        (#"{"uuid":"ID","mgCaffeine":5,"date":"2026-11-29T08:00:00Z","source":"a\u0000b"}"#, "source", "U+0000"),
    ])
    func ruleBreakingFieldIsNamed(json: String, field: String, rule: String) {
        let e = error(json.replacingOccurrences(of: "ID", with: id))
        #expect(e?.field == field)
        #expect(e?.rule.contains(rule) == true, "\(String(describing: e))")
    }

    @Test func exactlyAtSkewLimitIsAccepted() throws {
        #expect(try drinks(#"{"uuid":"\#(id)","mgCaffeine":5,"date":"2026-11-29T13:05:00Z"}"#).count == 1)
    }

    @Test func arrayErrorNamesTheElementAndNothingIsReturned() {
        let e = error(
            #"[{"uuid":"\#(id)","mgCaffeine":5,"date":"2026-11-29T08:00:00Z"}, 7, {"uuid":"\#(id)","mgCaffeine":-1,"date":"2026-11-29T08:00:00Z"}]"#
        )
        #expect(e?.index == 1)
        #expect(e?.description == "element 1: must be an object")
    }

    @Test func messageNamesElementFieldAndRule() {
        let e = error(#"[{"uuid":"\#(id)","mgCaffeine":-5,"date":"2026-11-29T08:00:00Z"}]"#)
        #expect(e?.description == "element 0: mgCaffeine must be > 0, got -5")
    }

    @Test(arguments: ["", "nope", "42", "{\"uuid\":", "[1,"])
    func malformedBodies(body: String) {
        #expect(error(body) != nil)
    }

    @Test func deletions() throws {
        let d = try decoder.deletions(json: Data(#"[{"uuid":"\#(id)","version":2},{"uuid":"\#(id)"}]"#.utf8))
        #expect(d == [Deletion(uuid: UUID(uuidString: id)!, version: 2), Deletion(uuid: UUID(uuidString: id)!)])
        #expect(throws: ValidationError.self) { try decoder.deletions(json: Data(#"{"version":2}"#.utf8)) }
    }

    @Test func rfc3339RoundTripsAndRejectsJunk() {
        #expect(RFC3339.string(RFC3339.parse("2026-11-29T09:15:00.250+01:00")!) == "2026-11-29T08:15:00.250Z")
        #expect(RFC3339.string(RFC3339.parse("2024-02-29T23:59:59.9996-00:30")!) == "2024-03-01T00:30:00.000Z")
        #expect(RFC3339.string(Date(timeIntervalSince1970: -1)) == "1969-12-31T23:59:59.000Z")
        for junk in [
            "2026-13-01T00:00:00Z", "2026-11-29T24:00:00Z", "2026-11-29T08:00:00+1:00", "2026-11-29T08:00:00.Z",
            "2026-11-29T08:00:00Zjunk", "2023-02-29T08:00:00Z",
        ] {
            #expect(RFC3339.parse(junk) == nil, "\(junk)")
        }
    }

    /// The hand-written form agrees with Foundation's ISO 8601 formatter
    /// (UTC, milliseconds) over whole-millisecond dates from 1900 to 2200,
    /// picked by a fixed-seed generator, and reads back to the same instant.
    @Test func rfc3339StringMatchesFoundation() {
        let formatter = ISO8601DateFormatter()
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        let first: Int64 = -2_208_988_800_000  // 1900-01-01
        let span: UInt64 = 9_467_280_000_000  // to 2200-01-01
        for _ in 0..<2000 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let millis = first + Int64(state % span)
            let date = Date(timeIntervalSince1970: Double(millis) / 1000)
            let text = RFC3339.string(date)
            #expect(text == formatter.string(from: date), "\(millis)")
            #expect(RFC3339.parse(text).map { Int64(($0.timeIntervalSince1970 * 1000).rounded()) } == millis)
        }
    }

    @Test func uuidTextMatchesFoundationBothWays() {
        for _ in 0..<1000 {
            let u = UUID()
            #expect(UUIDText.string(u) == u.uuidString)
            #expect(UUIDText.parse(u.uuidString) == u)
            #expect(UUIDText.parse(u.uuidString.lowercased()) == u)
        }
        for junk in [
            "", "6F1C3B1E-3F55-4B0B-9C1E-7A2D8E4B5C0", "6F1C3B1E-3F55-4B0B-9C1E-7A2D8E4B5C0G",
            "6F1C3B1E3F55-4B0B-9C1E-7A2D8E4B5C011", "{6F1C3B1E-3F55-4B0B-9C1E-7A2D8E4B5C}",
            "6F1C3B1E-3F55-4B0B-9C1E-7A2D8E4B5C0Z", "GF1C3B1E-3F55-4B0B-9C1E-7A2D8E4B5C01",
        ] {
            #expect(UUIDText.parse(junk) == nil, "\(junk)")
        }
        // Every byte in every place: a hex digit in a digit's place reads as
        // that digit; anything else there, or anything but a dash in a
        // dash's place, is refused.
        let valid = Array("6F1C3B1E-3F55-4B0B-9C1E-7A2D8E4B5C01".utf8)
        let hex = Array("0123456789ABCDEFabcdef".utf8)
        for place in valid.indices {
            for byte in UInt8.min...UInt8.max {
                var text = valid
                text[place] = byte
                let parsed = text.withUnsafeBufferPointer { UUIDText.parse(bytes: $0) }
                let isDash = [8, 13, 18, 23].contains(place)
                if isDash ? byte == 45 : hex.contains(byte) {
                    #expect(parsed == UUID(uuidString: String(decoding: text, as: UTF8.self)), "byte \(byte) at \(place)")
                    #expect(parsed != nil)
                } else {
                    #expect(parsed == nil, "byte \(byte) at \(place)")
                }
            }
        }
        let a = UUID(uuidString: "00000000-0000-0000-0000-000000000001")!
        let b = UUID(uuidString: "00000000-0000-0000-0000-000000000002")!
        #expect(UUIDText.precedes(a, b) && !UUIDText.precedes(b, a) && !UUIDText.precedes(a, a))
    }

    @Test func wireFormatOfADrink() {
        let d = Drink(
            uuid: UUID(uuidString: id)!, mgCaffeine: 143.2, date: RFC3339.parse("2026-11-29T08:15:00Z")!, version: 2,
            type: .mediumCoffee, source: "bus")
        #expect(
            WireFormat.json(d).serialized()
                == #"{"uuid":"\#(id)","mgCaffeine":143.2,"date":"2026-11-29T08:15:00.000Z","version":2,"type":"mediumCoffee","source":"bus"}"#
        )
    }

    /// The byte writer the broadcaster uses gives exactly the bytes of the
    /// JSONValue tree, for every shape of drink; a `changes` message reads
    /// back as the tree it stands for.
    @Test func byteWriterMatchesTheTree() throws {
        let drinks = [
            Drink(
                uuid: UUID(), mgCaffeine: 143.2, date: RFC3339.parse("2026-11-29T08:15:00.123Z")!, version: 2,
                type: .mediumCoffee, source: "bus"),
            Drink(uuid: UUID(), mgCaffeine: 95, date: Date(timeIntervalSince1970: -86_400.5), version: 9_007_199_254_740_993),
            Drink(uuid: UUID(), mgCaffeine: 0.1, date: Date(timeIntervalSince1970: 0), source: "caf\u{e9} \"quoted\"\n\u{1}"),
            Drink(uuid: UUID(), mgCaffeine: 1e-7, date: RFC3339.parse("9999-12-31T23:59:59.999Z")!, type: .chocolate),
        ]
        for d in drinks {
            var bytes: [UInt8] = []
            WireFormat.write(d, into: &bytes)
            #expect(bytes == Array(WireFormat.json(d).data()))
            bytes = []
            WireFormat.write(d, anchor: 41, into: &bytes)
            #expect(bytes == Array(WireFormat.json(d, anchor: 41).data()))
            #expect(try JSONReader.parse(Data(bytes)).member("anchor") == .int(41))
        }
        let tombstones = [Tombstone(uuid: UUID(), version: 3)]
        let identity = StoreIdentity(store: UUID(), epoch: 3)
        let message = WireFormat.changesMessage(
            identity: identity, anchor: 13, previousAnchor: 8, added: drinks, addedAnchors: [9, 10, 11, 12],
            deleted: tombstones, deletedAnchors: [13])
        let tree = JSONValue.object(
            identity.members + [
                ("anchor", .int(13)), ("previousAnchor", .int(8)),
                ("added", .array(zip(drinks, [9, 10, 11, 12]).map { WireFormat.json($0, anchor: $1) })),
                ("deleted", .array(tombstones.map { WireFormat.json($0, anchor: 13) })),
            ])
        #expect(try JSONReader.parse(Data(message)) == tree)
        #expect(String(decoding: message, as: UTF8.self) == tree.serialized())
    }
}
