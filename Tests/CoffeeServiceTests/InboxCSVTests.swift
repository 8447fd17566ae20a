import CoffeeDomain
import Foundation
import HealthStore
import Testing

@testable import CoffeeService

/// CSV in the inbox (docs/protocol.md §5): records as RFC 4180 has them,
/// across the reader's pieces; the service's export read back whole; another
/// app's `date,mg` with UUIDs of their content; a bad row naming its line.
@Suite("CSV in the inbox")
struct InboxCSVTests {
    let parser = InboxFileParser(decoder: BatchDecoder())
    let now = RFC3339.parse("2026-01-01T00:00:00Z")!

    func records(_ text: String) throws -> [([String], Int)] {
        let reader = CSVRecords(data: Data(text.utf8))
        var all: [([String], Int)] = []
        while let (fields, line) = try reader.next() { all.append((fields, line)) }
        return all
    }

    func drinks(_ text: String, chunkSize: Int = 5000) throws -> [Drink] {
        let reader = try InboxFormat.csv.reader(
            for: .bytes(Data(text.utf8)), .init(parser: parser, now: now, chunkSize: chunkSize))
        var all: [Drink] = []
        while let batch = try reader.next() { all += batch.drinks }
        #expect(reader.changesRead == all.count)
        return all
    }

    @Test func recordsQuoteCommasQuotesAndLineBreaksAndEndWithCRLFOrLF() throws {
        let read = try records("a,b\r\n\"x,1\",\"say \"\"hi\"\"\nthen\"\nlast,\"\"")
        #expect(read.map(\.0) == [["a", "b"], ["x,1", "say \"hi\"\nthen"], ["last", ""]])
        #expect(read.map(\.1) == [1, 2, 4])  // the quoted line break counts
        #expect(throws: InboxFileError.self) { try records("a\n\"open") }
    }

    @Test func aRecordAcrossTheReadersPiecesIsWhole() throws {
        // A quoted field that straddles the 1 MiB piece boundary, a doubled quote at it.
        let long = String(repeating: "x", count: CSVRecords.pieceSize - 8)
        let read = try records("h\n\"\(long)\"\"y\"\r\nz\n")
        #expect(read.count == 3 && read[1].0 == [long + "\"y"] && read[2].0 == ["z"])
    }

    @Test func theExportReadsBackWithItsUUIDsVersionsAndAFormulaAsItWas() throws {
        let calendar = HistoryCalendar(timeZone: TimeZone(identifier: "Europe/Berlin")!)
        let original = [
            Drink(mgCaffeine: 64.5, date: now - 3600, version: 3, type: .singleEspresso, source: "=HYPERLINK(\"x\",\"y\")"),
            Drink(mgCaffeine: 96, date: now - 60, type: nil, source: "say \"hi\", then\nleave"),
        ]
        let csv = DrinkCSV.header + original.map { DrinkCSV.row($0, in: calendar) }.joined()
        #expect(try drinks(csv) == original)
    }

    @Test func anotherAppsDateAndMgGetUUIDsOfTheirContent() throws {
        let csv = "Date,Caffeine (mg),Drink\n2025-12-31 08:00,95,smallCoffee\n2025-12-31T09:30:00Z,40,Latte\n"
        let first = try drinks(csv)
        #expect(first.map(\.mgCaffeine) == [95, 40])
        #expect(first[0].date == RFC3339.parse("2025-12-31T08:00:00Z"))  // no zone in the settings: UTC
        // A drink of the catalogue is kept; another app's own name (Latte) is not a type here.
        #expect(first[0].type == .smallCoffee && first[1].type == nil && first[0].version == 1)
        #expect(try drinks(csv).map(\.uuid) == first.map(\.uuid))  // the same rows, the same drinks
        #expect(Set(first.map(\.uuid)).count == 2)
    }

    @Test func aBadRowNamesItsLineAndField() {
        func failure(_ csv: String) -> InboxFileError? {
            do {
                _ = try drinks(csv, chunkSize: 2)
                return nil
            } catch {
                return error as? InboxFileError
            }
        }
        let rows = (1...5).map { "2025-12-31T0\($0):00:00Z,10\n" }.joined()
        let bad = failure("date,mg\n" + rows + "2025-12-31T07:00:00Z,lots\n")
        #expect(bad?.line == 7 && bad?.field == "mgCaffeine")
        #expect(failure("date,mg\n" + rows + "yesterday,5\n")?.field == "date")
        #expect(failure("date,mg\n2025-12-31T07:00:00Z,5000\n")?.line == 2)  // over limits.maxMgCaffeine
        #expect(failure("date,mg\n2025-12-31T07:00:00Z,5,x\n")?.message.contains("3 fields") == true)
        #expect(failure("when,amount\n1,2\n")?.message.contains("caffeine column") == true)
    }
}
