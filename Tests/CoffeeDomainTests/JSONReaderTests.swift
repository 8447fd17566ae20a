import Foundation
import Testing

@testable import CoffeeDomain

@Suite("JSONReader: strict RFC 8259, agreeing with Foundation", .timeLimit(.minutes(2)))
struct JSONReaderTests {
    static let valid: [(String, JSONValue)] = [
        (#"{}"#, .object([])),
        (#"[]"#, .array([])),
        (
            #" { "a" : [ 1 , -2 , 3.5 , 1e3 , -0.25E-2 ] } "#,
            .object([("a", .array([.int(1), .int(-2), .double(3.5), .double(1000), .double(-0.0025)]))])
        ),
        (#"[true,false,null]"#, .array([.bool(true), .bool(false), .null])),
        (#""a\u00e9\ud83d\ude00\n\t\"\\\/""#, .string("aé😀\n\t\"\\/")),
        ("\"caf\u{e9} \u{1F600}\"", .string("café 😀")),
        (#"9223372036854775807"#, .int(.max)),
        (#"9223372036854775808"#, .double(9_223_372_036_854_775_808)),
        ("\u{FEFF}{\"bom\":0}", .object([("bom", .int(0))])),
        (#"0"#, .int(0)),
        (#"-0.0"#, .double(-0.0)),
    ]

    static let invalid: [String] = [
        "", " ", "{", "[1,]", #"{"a":1,}"#, "01", "1.", "-", ".5", "1e", "+1", #""\x""#, "\"\u{01}\"",
        #""\ud800""#, #""\udc00x""#, #""\u12g4""#, "tru", "nul", "[1 2]", #"{"a" 1}"#, "{1:2}", #""abc"#, "1 2",
        "[1]]", "NaN", "Infinity", "1e999", "'a'", #"{"a":}"#,
    ]

    @Test(arguments: valid.indices) func readsValidText(_ i: Int) throws {
        let (text, expected) = Self.valid[i]
        let value = try JSONReader.parse(Data(text.utf8))
        #expect(value == expected, "\(text)")
        // Foundation agrees that it is JSON.
        #expect((try? JSONSerialization.jsonObject(with: Data(text.utf8), options: .fragmentsAllowed)) != nil)
    }

    /// What `JSONValue` writes, the reader reads back unchanged, control
    /// characters and all of Unicode included.
    @Test func writerAndReaderRoundTrip() throws {
        let all = (0..<0x80).map { Character(Unicode.Scalar(UInt8($0))) }
        let value = JSONValue.object([
            ("ascii", .string(String(all))), ("unicode", .string("é😀\u{2028}")), ("n", .double(0.1)), ("i", .int(-7)),
            ("nested", .array([.null, .bool(true), .object([])])),
        ])
        #expect(try JSONReader.parse(value.data()) == value)
        let foundation = try JSONSerialization.jsonObject(with: value.data()) as? [String: Any]
        #expect(foundation?["ascii"] as? String == String(all))
    }

    /// Numbers of up to 15 digits are read without text (one exact
    /// division); they must be the very Double that parsing the text gives,
    /// on both sides of that limit, and integers stay integers.
    @Test func numbersReadExactlyAsTheirText() throws {
        var rng = SystemRandomNumberGenerator()
        var texts = [
            "0.1", "0.3", "95.0", "-0.0", "123456789012345", "1234567890123456", "0.000000000000001", "9.999999999999999",
        ]
        for _ in 0..<20_000 {
            let digits = Int.random(in: 1...17, using: &rng)
            var text = String((0..<digits).map { _ in Character(String(Int.random(in: 0...9, using: &rng))) })
            while text.count > 1 && text.hasPrefix("0") { text.removeFirst() }
            let point = Int.random(in: 0..<text.count, using: &rng)
            if point > 0 { text.insert(".", at: text.index(text.startIndex, offsetBy: point)) }
            if text.hasPrefix(".") { text = "0" + text }
            texts.append(Bool.random(using: &rng) ? "-" + text : text)
        }
        for text in texts {
            let value = try JSONReader.parse(Data(text.utf8))
            if text.contains(".") {
                #expect(value == .double(Double(text)!) && (Double(text)!.sign == .minus) == text.hasPrefix("-"), "\(text)")
            } else {
                #expect(value == .int(Int64(text)!), "\(text)")
            }
        }
    }

    @Test(arguments: invalid) func refusesInvalidText(_ text: String) {
        #expect(throws: JSONReader.SyntaxError.self, "\(text)") { try JSONReader.parse(Data(text.utf8)) }
        // Foundation agrees, but for a number too large (which it reads as
        // infinity) and trailing commas (which RFC 8259 does not allow, and
        // Python's json, a common publisher, refuses too).
        let foundationAccepts = ["1e999", "[1,]", #"{"a":1,}"#]
        #expect(
            (try? JSONSerialization.jsonObject(with: Data(text.utf8), options: .fragmentsAllowed)) == nil
                || foundationAccepts.contains(text))
    }

    /// The bytes compared by length, then all of them: a prefix is not equal.
    @Test func sameBytesNeedsTheSameLengthAndEveryByte() {
        func same(_ a: [UInt8], _ b: [UInt8]) -> Bool {
            a.withUnsafeBytes { a in b.withUnsafeBytes { a.sameBytes(as: $0) } }
        }
        #expect(same(Array("drink.add".utf8), Array("drink.add".utf8)))
        #expect(!same(Array("drink.add".utf8), Array("drink.adds".utf8)))
        #expect(!same(Array("drink.add".utf8), Array("drink.ado".utf8)))
        #expect(!same(Array("Drink.add".utf8), Array("drink.add".utf8)))
        #expect(same([], []))
        #expect(!same([], [0]))
        #expect(UnsafeRawBufferPointer(start: nil, count: 0).sameBytes(as: UnsafeRawBufferPointer(start: nil, count: 0)))
    }

    /// A key given twice is refused, naming the key, wherever the names
    /// lie (in place, escaped, past the set's threshold); the configuration
    /// file's reading keeps both so that its error can name the key's path.
    @Test func aKeyGivenTwiceIsRefusedNamingIt() throws {
        let cases: [(String, String, Int)] = [
            (#"{"a":1,"a":2}"#, "a", 7),
            (#"{"op":"ping","op":"stats"}"#, "op", 13),
            (#"{"uuid":1,"u\u0075id":2}"#, "uuid", 10),
            (#"{"x":{"a":1},"y":{"a":2},"a":{"b":1,"b":2}}"#, "b", 36),
            (#"{"caf\u00e9":1,"café":2}"#, "café", 15),
            (#"{"":1,"":2}"#, "", 6),
        ]
        for (text, key, offset) in cases {
            #expect(throws: JSONReader.SyntaxError(message: "key \"\(key)\" is given twice", offset: offset), "\(text)") {
                try JSONReader.parse(Data(text.utf8))
            }
        }
        // Past the first 8 names, the ranges kept in an array.
        let twelve = (0..<12).map { "\"k\($0)\":\($0)" }.joined(separator: ",")
        #expect(throws: JSONReader.SyntaxError(message: "key \"k10\" is given twice", offset: 89)) {
            try JSONReader.parse(Data("{\(twelve),\"k10\":0}".utf8))
        }
        #expect(try JSONReader.parse(Data("{\(twelve),\"k100\":0}".utf8))[member: "k100"] == .int(0))
        // Many names: past 32 the names go into a set, and a repeat is still found.
        let many = (0..<100).map { "\"k\($0)\":\($0)" }.joined(separator: ",")
        #expect(try JSONReader.parse(Data("{\(many)}".utf8))[member: "k99"] == .int(99))
        #expect(throws: JSONReader.SyntaxError.self) { try JSONReader.parse(Data("{\(many),\"k7\":0}".utf8)) }
        // Kept on request: the last one counts.
        #expect(try JSONReader.parse(Data(#"{"a":1,"a":2}"#.utf8), duplicateKeys: .keep)[member: "a"] == .int(2))
    }

    @Test func refusesInvalidUTF8InStringsAndSaysWhere() {
        var bytes = Array(#"{"source":"x"#.utf8)
        bytes.append(0xFF)
        bytes += Array(#""}"#.utf8)
        #expect(throws: JSONReader.SyntaxError(message: "string is not valid UTF-8", offset: 10)) {
            try JSONReader.parse(Data(bytes))
        }
    }

    @Test func refusesDeepNestingWithoutExhaustingTheStack() {
        let deep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        #expect(throws: JSONReader.SyntaxError.self) { try JSONReader.parse(Data(deep.utf8)) }
        let fine = String(repeating: "[", count: JSONReader.maxDepth) + String(repeating: "]", count: JSONReader.maxDepth)
        #expect((try? JSONReader.parse(Data(fine.utf8))) != nil)
    }

    @Test func errorsNameTheProblemAndTheByte() {
        #expect(throws: JSONReader.SyntaxError(message: "expected ',' or '}' in object, found 'x'", offset: 7)) {
            try JSONReader.parse(Data(#"{"a":1 x}"#.utf8))
        }
    }

    /// The drink and deletion fields read from JSON by `JSONReader` validate
    /// exactly as those read by `JSONDecoder` through `Decodable` (the
    /// property-list path): same drink, or same error.
    @Test func drinkFieldsAgreeWithTheDecodablePath() throws {
        let uuid = "6B1A4C2E-8F3D-4E5A-9B7C-1D2E3F4A5B6C"
        let objects = [
            #"{"uuid":"\#(uuid)","mgCaffeine":95.5,"date":"2026-11-29T08:00:00Z"}"#,
            #"{"uuid":"\#(uuid)","mgCaffeine":95,"date":1796025600,"version":3,"type":"espresso","source":"s"}"#,
            #"{"uuid":"\#(uuid)","mgCaffeine":95,"date":1796025600.25,"version":2.5}"#,
            #"{"uuid":"\#(uuid)","mgCaffeine":"95","date":"2026-11-29T08:00:00Z"}"#,
            #"{"uuid":"\#(uuid)","mgCaffeine":null,"date":"2026-11-29T08:00:00Z"}"#,
            #"{"uuid":42,"mgCaffeine":95,"date":"2026-11-29T08:00:00Z"}"#,
            #"{"uuid":"\#(uuid)","mgCaffeine":95,"date":true}"#,
            #"{"uuid":"\#(uuid)","mgCaffeine":95,"date":"yesterday"}"#,
            #"{"uuid":"\#(uuid)","mgCaffeine":95,"date":"2026-11-29T08:00:00Z","type":7}"#,
            #"{"uuid":"\#(uuid)","date":"2026-11-29T08:00:00Z","type":"doubleEspresso"}"#,
            #"{"uuid":"\#(uuid)","date":"2026-11-29T08:00:00Z","type":"doubleEspress"}"#,
            #"{"uuid":"\#(uuid)","mgCaffeine":95,"date":"2026-11-29T08:00:00.5+01:00","type":"chocolate"}"#,
            #"{"uuid":"\#(uuid.lowercased())","mgCaffeine":95,"date":"2026-11-29 08:00:00Z","type":"smallCoffee"}"#,
            #"{"uuid":"\#(uuid.dropLast())","mgCaffeine":95,"date":"2026-11-29T08:00:00Z"}"#,
            #"{"uuid":"\#(uuid)","mgCaffeine":95,"date":"2026-11-29T08:00:00"}"#,
            #"{"uuid":"\#(uuid)","mgCaffeine":-1,"date":"2026-11-29T08:00:00Z"}"#,
            #"{"uuid":"\#(uuid)","mgCaffeine":95,"date":"2026-11-29T08:00:00Z","extra":{"x":[1,2]}}"#,
            #"{"mgCaffeine":95,"date":"2026-11-29T08:00:00Z"}"#,
            #"{}"#,
        ]
        for text in objects {
            let viaDecodable = try JSONDecoder().decode(DrinkInput.self, from: Data(text.utf8))
            let viaReader = DrinkInput(json: try JSONReader.parse(Data(text.utf8)))
            #expect(Self.outcome(viaReader) == Self.outcome(viaDecodable), "\(text)")
            let streamed = try Self.streamed(DrinkInput.self, text)
            #expect(streamed.map(Self.outcome) == [Self.outcome(viaDecodable), Self.outcome(viaDecodable)], "\(text)")
        }
        let deletions = [
            #"{"uuid":"\#(uuid)","version":4}"#, #"{"delete":"\#(uuid)"}"#, #"{"delete":7}"#, #"{"uuid":null,"delete":null}"#,
            #"{"uuid":"\#(uuid)","version":"4"}"#, #"{}"#,
        ]
        for text in deletions {
            let viaDecodable = try JSONDecoder().decode(DeletionInput.self, from: Data(text.utf8))
            let viaReader = DeletionInput(json: try JSONReader.parse(Data(text.utf8)))
            #expect(Self.outcome(viaReader) == Self.outcome(viaDecodable), "\(text)")
            let streamed = try Self.streamed(DeletionInput.self, text)
            #expect(streamed.map(Self.outcome) == [Self.outcome(viaDecodable), Self.outcome(viaDecodable)], "\(text)")
        }
    }

    /// What validating an input gives: the drink or deletion, or the error's words.
    static func outcome(_ input: DrinkInput) -> String {
        do throws(ValidationError) {
            let now = RFC3339.parse("2026-11-29T12:00:00Z")!
            return "\(try DrinkValidator().drink(from: input, now: now, defaultSource: "bus"))"
        } catch {
            return error.description
        }
    }

    static func outcome(_ input: DeletionInput) -> String {
        do throws(ValidationError) {
            return "\(try DrinkValidator().deletion(from: input))"
        } catch {
            return error.description
        }
    }

    /// One object, or an array of them, read with `JSONReader.Cursor` as
    /// the bus reads them; nil for a document of any other shape.
    static func objects<T: JSONObjectInput>(_: T.Type, _ text: String) throws -> (objects: [T?], isArray: Bool)? {
        try objects(T.self, Array(text.utf8))
    }

    static func objects<T: JSONObjectInput>(_: T.Type, _ text: [UInt8]) throws -> (objects: [T?], isArray: Bool)? {
        try text.withUnsafeBytes { bytes throws(JSONReader.SyntaxError) in
            var c = JSONReader.Cursor(bytes)
            var result: (objects: [T?], isArray: Bool)?
            switch c.peek() {
            case UInt8(ascii: "{"):
                result = ([try c.object(T.self)], false)
            case UInt8(ascii: "["):
                var items: [T?] = []
                try c.elements { (c: inout JSONReader.Cursor) throws(JSONReader.SyntaxError) in
                    items.append(try c.objectOrSkip(T.self))
                }
                result = (items, true)
            default:
                _ = try c.value()
            }
            try c.end()
            return result
        }
    }

    /// Each object read through the cursor, alone and in an array, gives
    /// what the tree gives.
    static func streamed<T: JSONObjectInput>(_: T.Type, _ text: String) throws -> [T] {
        let one = try objects(T.self, text)
        let array = try objects(T.self, "[\(text),\(text)]")
        #expect(one?.isArray == false && array?.isArray == true && array?.objects.count == 2)
        return (one?.objects ?? []).compactMap { $0 } + (array?.objects.dropFirst() ?? []).compactMap { $0 }
    }

    /// Member names are compared as bytes in place; names with escapes or
    /// non-ASCII bytes are decoded first. A name given twice is refused by
    /// the cursor with the tree reader's error, at the same byte.
    @Test func objectsReadNamesAsTheTreeDoes() throws {
        let uuid = "6B1A4C2E-8F3D-4E5A-9B7C-1D2E3F4A5B6C"
        let texts = [
            #"{"u\u0075id":"\#(uuid)","mgCaffeine":95,"date":"2026-11-29T08:00:00Z"}"#,
            #"{"uuid":"\#(uuid)","mgCaffeine":95,"date":"2026-11-29T08:00:00Z","caf\#u{e9}":1,"type":"blackTea"}"#,
            #"{"uuid":"\#(uuid)","mgCaffeine":95,"date":"2026-11-29T08:00:00Z","":0,"uuidx":"x","uui":"y"}"#,
        ]
        for text in texts {
            let tree = DrinkInput(json: try JSONReader.parse(Data(text.utf8)))
            #expect(
                try Self.streamed(DrinkInput.self, text).map(Self.outcome) == [Self.outcome(tree), Self.outcome(tree)], "\(text)")
        }
        let read = try texts.map { try Self.streamed(DrinkInput.self, $0)[0] }
        #expect(Self.outcome(read[0]).hasPrefix("Drink("))  // an escaped name is still "uuid"
        #expect(Self.outcome(read[1]).contains("blackTea"))  // a non-ASCII name is read and ignored
        #expect(Self.outcome(read[2]).hasPrefix("Drink("))  // names that only start like a field are not it
        let repeated = [
            #"{"uuid":"nope","mgCaffeine":95,"date":"2026-11-29T08:00:00Z","uuid":"\#(uuid)"}"#,
            #"{"uuid":"\#(uuid)","mgCaffeine":95,"date":"2026-11-29T08:00:00Z","mg\u0043affeine":"x"}"#,
        ]
        for text in repeated {
            var treeError: JSONReader.SyntaxError?
            do { _ = try JSONReader.parse(Data(text.utf8)) } catch { treeError = error }
            #expect(treeError?.message.contains("is given twice") == true, "\(text)")
            #expect(throws: treeError!, "\(text)") { _ = try Self.streamed(DrinkInput.self, text) }
        }
    }

    /// Elements that are not objects come back as nil, and a document that
    /// is neither an object nor an array as nil; text that is not JSON fails
    /// with the tree reader's error and offset.
    @Test func theCursorReportsShapesAndErrorsAsTheTreeDoes() throws {
        let mixed = try Self.objects(DeletionInput.self, #"[{"delete":"x"}, 7, [], {}]"#)
        #expect(mixed?.objects.map { $0 == nil } == [false, true, true, false])
        for scalar in ["7", #""text""#, "null", " true "] {
            #expect(try Self.objects(DrinkInput.self, scalar) == nil)
        }
        for text in Self.invalid + [#"{"a":1}x"#, #"[{"a":1},]"#, #"{"a\u00"}"#, #"{"a":1"#, #"[{"#] {
            var treeError: JSONReader.SyntaxError?
            do { _ = try JSONReader.parse(Data(text.utf8)) } catch { treeError = error }
            var streamError: JSONReader.SyntaxError?
            do { _ = try Self.objects(DrinkInput.self, text) } catch { streamError = error as? JSONReader.SyntaxError }
            #expect(streamError != nil && streamError == treeError, "\(text)")
        }
    }

    /// What a bus body that is not a valid batch is refused with: text that
    /// is not JSON first (the tree reader's words), then the shape, then the
    /// first bad element at its index; a lone object's error has no index.
    @Test func busBodiesAreRefusedInOrderOfPrecedence() {
        let decoder = BatchDecoder()
        let now = RFC3339.parse("2026-11-29T12:00:00Z")!
        func refusal(_ text: String) -> ValidationError? {
            do throws(ValidationError) {
                _ = try decoder.drinks(json: Data(text.utf8), now: now, source: "bus")
                return nil
            } catch {
                return error
            }
        }
        let good = #"{"uuid":"6B1A4C2E-8F3D-4E5A-9B7C-1D2E3F4A5B6C","mgCaffeine":95,"date":"2026-11-29T08:00:00Z"}"#
        let bad = #"{"uuid":"6B1A4C2E-8F3D-4E5A-9B7C-1D2E3F4A5B6C","mgCaffeine":-1,"date":"2026-11-29T08:00:00Z"}"#
        #expect(refusal("[\(good),\(good)]") == nil)
        #expect(refusal("[\(good),7,\(bad)]") == ValidationError(rule: "must be an object").at(index: 1))
        #expect(refusal("[\(good),\(bad)]")?.index == 1)
        #expect(refusal("[\(good),\(bad)]")?.field == "mgCaffeine")
        #expect(refusal(bad)?.index == nil)
        #expect(refusal(bad)?.field == "mgCaffeine")
        #expect(
            refusal("[\(bad),")
                == ValidationError(rule: "body is not valid JSON (unexpected end of input at byte \(bad.utf8.count + 2))"))
        #expect(refusal(" \n ") == ValidationError(rule: "body is empty; expected a JSON object or array"))
        #expect(refusal("7") == ValidationError(rule: "body must be a JSON object or array"))
        #expect(refusal("[\(bad)] x")?.rule.hasPrefix("body is not valid JSON (unexpected text after the JSON value") == true)
    }
    /// Thousands of near-misses: each seed document with one byte replaced,
    /// inserted or removed, at every position, with bytes a mutation is most
    /// likely to break or pass (quotes, brackets, commas, escapes, digits,
    /// non-ASCII). The cursor reading objects into inputs, as the bus and the
    /// inbox do, accepts exactly what the tree reader accepts and fails with
    /// the same error at the same byte. Deterministic: no randomness.
    @Test func cursorAndTreeAgreeOnEveryOneByteMutation() throws {
        let seeds = [
            #"{"uuid":"6B1A4C2E-8F3D-4E5A-9B7C-1D2E3F4A5B6C","mgCaffeine":95.5,"date":"2026-11-29T08:00:00Z"}"#,
            #"[{"delete":"x","version":2},{"u\u0075id":"é","a":[1,{"b":null}]},7,"s",true]"#,
            #"{"drinks":[{"mgCaffeine":-1e2}],"deleted":null}"#,
        ]
        let alphabet = Array(#"{}[]",:\"#.utf8) + Array("0-.eEtfnu ".utf8) + [0x00, 0x1F, 0x7F, 0xC3, 0xA9, 0xFF]
        var checked = 0
        for seed in seeds {
            let bytes = Array(seed.utf8)
            for position in 0...bytes.count {
                for b in alphabet {
                    var mutations: [[UInt8]] = []
                    var inserted = bytes
                    inserted.insert(b, at: position)
                    mutations.append(inserted)
                    if position < bytes.count {
                        var replaced = bytes
                        replaced[position] = b
                        mutations.append(replaced)
                        if b == alphabet[0] {
                            var removed = bytes
                            removed.remove(at: position)
                            mutations.append(removed)
                        }
                    }
                    for text in mutations {
                        var treeError: JSONReader.SyntaxError?
                        do { _ = try JSONReader.parse(Data(text)) } catch { treeError = error }
                        var cursorError: JSONReader.SyntaxError?
                        do { _ = try Self.objects(DrinkInput.self, text) } catch {
                            cursorError = error as? JSONReader.SyntaxError
                        }
                        #expect(cursorError == treeError, "\(String(decoding: text, as: UTF8.self))")
                        checked += 1
                    }
                }
            }
        }
        #expect(checked > 10_000)
    }
}
