import CoffeeDomain
import Foundation
import HealthStore
import Testing

@testable import CoffeeService

/// Whole-file JSON documents are read in one pass, drink by drink
/// (`JSONDocumentReader`), and must accept and refuse exactly what the
/// property-list path (`FileDocument`, decoded by Foundation) does.
@Suite("Inbox JSON documents, read in one pass", .timeLimit(.minutes(2)))
struct InboxDocumentTests {
    static let u1 = "6B1A4C2E-8F3D-4E5A-9B7C-1D2E3F4A5B6C"
    static let u2 = "0E9F8A7B-6C5D-4E3F-8A1B-2C3D4E5F6A7B"
    static let d1 = #"{"uuid":"\#(u1)","mgCaffeine":95,"date":"2026-11-29T08:00:00Z"}"#
    static let d2 = #"{"uuid":"\#(u2)","mgCaffeine":64.5,"date":1796025600,"type":"singleEspresso","version":2}"#
    static let bad = #"{"uuid":"\#(u2)","mgCaffeine":-1,"date":"2026-11-29T08:00:00Z"}"#

    static let documents = [
        "[\(d1),\(d2)]",
        "[]",
        #"{"drinks":[\#(d1)],"deleted":[{"uuid":"\#(u2)"}]}"#,
        #"{"deleted":[{"uuid":"\#(u1)","version":3}]}"#,
        #"{"drinks":null}"#,
        #"{"drinks":[\#(d1)],"meta":{"exported":[1,2,{"x":null}]}}"#,
        "{}",
        #"{"other":1}"#,
        "7",
        #""drinks""#,
        #"{"drinks":5}"#,
        #"{"drinks":{"a":1}}"#,
        #"{"drinks":[\#(d1)],"deleted":"x"}"#,
        #"{"deleted":"x","drinks":[\#(bad)]}"#,
        #"{"drinks":5,"deleted":7}"#,
        "[\(d1),7,\(d2)]",
        "[\(d1),\(bad)]",
        #"{"deleted":[{"uuid":"nope"}],"drinks":[\#(bad)]}"#,
        #"{"deleted":[{"uuid":"nope"}],"drinks":[\#(d1)]}"#,
        #"{"drinks":[\#(d1), null]}"#,
        " \n[\(d2)] \n",
    ]

    let parser = InboxFileParser(decoder: BatchDecoder())
    let now = RFC3339.parse("2026-11-29T12:00:00Z")!

    func outcome(_ read: () throws(InboxFileError) -> WriteBatch) -> String {
        do throws(InboxFileError) {
            let batch = try read()
            return "drinks \(batch.drinks) deletions \(batch.deletions)"
        } catch {
            return "error \(error.message) index \(error.index.map(String.init) ?? "-") field \(error.field ?? "-")"
        }
    }

    @Test(arguments: documents) func agreesWithTheDecodablePath(_ text: String) {
        let data = Data(text.utf8)
        let streamed = outcome { () throws(InboxFileError) in try parser.parse(data, format: .json, now: now) }
        let reference = outcome { () throws(InboxFileError) in
            try parser.document(now: now) { try JSONDecoder().decode(FileDocument.self, from: data) }
        }
        #expect(streamed == reference)
        #expect(!streamed.isEmpty)
    }

    /// Text that is not JSON is refused as such, wherever it is, even after
    /// a bad drink; the error says where.
    @Test func syntaxErrorsComeFirstAndSayWhere() {
        for text in ["[\(Self.d1),", "[\(Self.bad),]", #"{"drinks":[\#(Self.d1)]"#, "[\(Self.d1)] x", ""] {
            let streamed = outcome { () throws(InboxFileError) in try parser.parse(Data(text.utf8), format: .json, now: now) }
            #expect(streamed.hasPrefix("error file cannot be parsed ("), "\(text)")
            #expect(streamed.contains("at byte"), "\(text)")
        }
    }

    /// A name given twice refuses the file, naming the name (docs/protocol.md §2).
    @Test func aRepeatedNameRefusesTheFile() throws {
        let text = #"{"drinks":[\#(Self.d1)],"drinks":[\#(Self.d1)],"deleted":[]}"#
        #expect {
            try parser.parse(Data(text.utf8), format: .json, now: now)
        } throws: { error in
            "\(error)".contains(#"key "drinks" is given twice"#)
        }
    }

    /// Many drinks, read in order, each validated.
    @Test func aLargeArrayKeepsItsOrder() throws {
        let uuids = (0..<5000).map { _ in UUID() }
        let text =
            "["
            + uuids.map { #"{"uuid":"\#($0.uuidString)","mgCaffeine":80,"date":"2026-11-29T08:00:00Z"}"# }
            .joined(separator: ",\n") + "]"
        let batch = try parser.parse(Data(text.utf8), format: .json, now: now)
        #expect(batch.drinks.map(\.uuid) == uuids)
    }
    /// Each JSON Lines line is read once, without a tree, as both a drink
    /// and a deletion; the outcome equals reading the line's tree and
    /// choosing by its `delete` member, as the inbox did before.
    @Test func jsonLinesLinesAgreeWithTheTree() {
        let lines = [
            Self.d1, Self.d2, Self.bad, #"{"delete":"\#(Self.u1)"}"#, #"{"delete":null}"#, #"{"delete":7}"#,
            #"{"delete":"x","uuid":"\#(Self.u2)","version":3}"#, #"{"uuid":"\#(Self.u1)","version":2}"#,
            #"{"uuid":"\#(Self.u1)","mgCaffeine":5,"date":"2026-11-29T08:00:00Z","delete":false}"#,
            "7", "[]", #""x""#, "{", #"{"a":1,}"#, #"{"uuid":"\#(Self.u1)"} x"#, "  {}  ",
        ]
        func reference(_ text: String) -> String {
            do throws(ValidationError) {
                let value: JSONValue
                do throws(JSONReader.SyntaxError) {
                    value = try JSONReader.parse(Data(text.utf8))
                } catch {
                    throw ValidationError(rule: "line is not valid JSON (\(error))")
                }
                guard case .object = value else { throw ValidationError(rule: "each line must be one JSON object") }
                if value[member: "delete"] != nil {
                    return "\(try parser.decoder.validator.deletion(from: DeletionInput(json: value)))"
                }
                return "\(try parser.decoder.validator.drink(from: DrinkInput(json: value), now: now, defaultSource: "inbox"))"
            } catch {
                return InboxFileError(error.at(line: 4)).message
            }
        }
        for text in lines {
            let read = Array(text.utf8).withUnsafeBytes { raw in
                Result { () throws(InboxFileError) in try parser.line(raw, number: 4, now: now) }
            }
            let streamed: String
            switch read {
            case .success(.drink(let drink)): streamed = "\(drink)"
            case .success(.deletion(let deletion)): streamed = "\(deletion)"
            case .success(.blank): streamed = "blank"
            case .failure(let error): streamed = error.message
            }
            #expect(streamed == reference(text), "\(text)")
        }
    }
}
