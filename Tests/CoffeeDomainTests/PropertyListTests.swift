import CoffeeDomain
import Foundation
import Testing

/// The watch app's own `CoffeeTracker.plist`: an array of `{mgCaffeine, date, uuid}`.
@Suite("CoffeeTracker.plist", .timeLimit(.minutes(2)))
struct PropertyListTests {
    /// The sample app's `Drink`, exactly as it encodes.
    struct SampleDrink: Codable {
        var mgCaffeine: Double
        var date: Date
        var uuid: UUID
    }

    func decode(_ data: Data) throws -> [Drink] {
        let inputs = try PropertyListDecoder().decode([DrinkInput].self, from: data)
        let validator = DrinkValidator()
        return try inputs.map { try validator.drink(from: $0, now: .distantFuture, defaultSource: "inbox") }
    }

    @Test(arguments: ["CoffeeTracker", "CoffeeTracker-xml"])
    func vectorFileReads(name: String) throws {
        let url = Bundle.module.url(forResource: "Vectors/\(name)", withExtension: "plist")!
        let drinks = try decode(Data(contentsOf: url))
        #expect(
            drinks.map(\.uuid.uuidString) == [
                "6F1C3B1E-3F55-4B0B-9C1E-7A2D8E4B5C01", "0B8E5A52-1D2C-4C3F-8F6A-2E9B7D1C4A02",
                "C7D2E1F0-5A4B-4C3D-9E8F-1A2B3C4D5E03",
            ])
        #expect(drinks.map(\.mgCaffeine) == [96, 128, 64])
        #expect(RFC3339.string(drinks[0].date) == "2026-11-29T12:30:00.000Z")
    }

    /// Made by Python's plistlib (Vectors/make_plistlib_fixture.py): naive
    /// UTC dates, a lower-case UUID, a fractional second.
    @Test(arguments: ["CoffeeTracker-plistlib", "CoffeeTracker-plistlib-xml"])
    func writtenByPythonsPlistlibReads(name: String) throws {
        let url = Bundle.module.url(forResource: "Vectors/\(name)", withExtension: "plist")!
        let drinks = try decode(Data(contentsOf: url))
        #expect(drinks.map(\.mgCaffeine) == [96, 128, 47.5])
        #expect(drinks[2].uuid.uuidString == "D4E5F6A7-B8C9-4DAE-9FB0-3B4C5D6E7F08")
        #expect(
            drinks.map { RFC3339.string($0.date) } == [
                "2026-11-29T12:30:00.000Z", "2026-11-29T09:40:00.000Z", "2026-11-28T23:30:15.000Z",
            ])
    }

    /// Found by `make fuzz` (plist): a binary property list whose date is a
    /// double far past any year that can be written crashed the service while
    /// it wrote the date into the error. Such a date is refused, naming it.
    @Test func aDateBeyondAnyYearIsRefusedNotACrash() throws {
        for seconds in [1e200, -1e200, 2e11, .greatestFiniteMagnitude] {
            let data = try PropertyListEncoder().encode([
                SampleDrink(mgCaffeine: 96, date: Date(timeIntervalSince1970: seconds), uuid: UUID())
            ])
            #expect {
                try decode(data)
            } throws: { error in
                "\(error)".contains("date") && "\(error)".contains("plausible")
            }
        }
    }

    @Test func writtenByFoundationsEncoderReads() throws {
        let sample = [
            SampleDrink(mgCaffeine: 64, date: Date(timeIntervalSince1970: 1_796_000_000.5), uuid: UUID()),
            SampleDrink(mgCaffeine: 18, date: Date(timeIntervalSince1970: 1_796_003_600), uuid: UUID()),
        ]
        let encoder = PropertyListEncoder()
        encoder.outputFormat = .binary
        let drinks = try decode(try encoder.encode(sample))
        #expect(drinks.map(\.uuid) == sample.map(\.uuid))
        #expect(drinks.map(\.date) == sample.map(\.date))
        #expect(drinks.map(\.mgCaffeine) == [64, 18])
    }
}
