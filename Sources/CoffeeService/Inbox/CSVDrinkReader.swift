import CoffeeDomain
import Foundation
import HealthStore

/// Reads a CSV file of drinks (docs/protocol.md §5) chunk by chunk, in order:
/// the service's own export (its header `uuid,date,mgCaffeine,type,version,
/// source`: each drink with its UUID, version, type and source, the `'` of
/// a formula taken off), or another app's `date,mg` columns (names in
/// `dateColumns` and `mgColumns`; `type` and `source` optional), whose drinks
/// get version-5 UUIDs of their content, so that a second drop adds nothing.
/// Each row is read by the bus's drink rules (a JSON Lines line's, given the
/// fields as they are); a row that breaks one fails the file, naming its
/// line and field.
final class CSVDrinkReader: InboxFileReader, @unchecked Sendable {
    /// A date column's names (any case): the first found is the date.
    static let dateColumns = ["date", "datetime", "date/time", "time", "timestamp", "start", "startdate", "when"]
    /// A caffeine column's names, in mg.
    static let mgColumns = ["mg", "mgcaffeine", "caffeine", "caffeine (mg)", "caffeine_mg", "caffeinemg", "amount (mg)"]
    static let typeColumns = ["type", "drink"]
    /// The namespace of the UUIDs of another app's rows.
    static let rowsNamespace = UUID(uuidString: "5D0C4E1A-6B7C-4F3E-9A51-2C8E0B7D3F64")!

    private let records: CSVRecords
    private let parser: InboxFileParser
    private let now: Date
    private let chunkSize: Int
    private let timeZone: TimeZone
    /// Which field holds what, from the header.
    private var columns: (date: Int, mg: Int, uuid: Int?, version: Int?, type: Int?, source: Int?, count: Int)?
    private(set) var changesRead = 0
    var bytesRead: Int64 { records.bytesRead }

    init(records: CSVRecords, parser: InboxFileParser, now: Date, chunkSize: Int) {
        self.records = records
        self.parser = parser
        self.now = now
        self.chunkSize = chunkSize
        timeZone = parser.decoder.validator.settings?.person.timeZone ?? TimeZone(identifier: "UTC")!
    }

    func next() throws(InboxFileError) -> WriteBatch? {
        if columns == nil { try readHeader() }
        var chunk = WriteBatch()
        while chunk.count < chunkSize, let (fields, line) = try records.next() {
            if fields.allSatisfy({ Self.trimmed($0).isEmpty }) { continue }  // a blank row
            chunk.drinks.append(try drink(fields, line: line))
        }
        changesRead += chunk.count
        return chunk.isEmpty ? nil : chunk
    }

    private func readHeader() throws(InboxFileError) {
        guard let (fields, line) = try records.next() else { throw InboxFileError("the file is empty: no header row") }
        var names = fields.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        if let first = names.first, first.hasPrefix("\u{FEFF}") { names[0] = String(first.dropFirst()) }  // a BOM
        func find(_ accepted: [String]) -> Int? { accepted.lazy.compactMap { names.firstIndex(of: $0) }.first }
        guard let date = find(Self.dateColumns) else {
            throw InboxFileError(
                "line \(line): the header names no date column (\(Self.dateColumns.joined(separator: ", ")))", line: line)
        }
        guard let mg = find(Self.mgColumns) else {
            throw InboxFileError(
                "line \(line): the header names no caffeine column in mg (\(Self.mgColumns.joined(separator: ", ")))",
                line: line)
        }
        columns = (
            date, mg, names.firstIndex(of: "uuid"), names.firstIndex(of: "version"), find(Self.typeColumns),
            names.firstIndex(of: "source"), names.count
        )
    }

    /// A row as a drink, through the drink rules of a JSON Lines line.
    private func drink(_ fields: [String], line: Int) throws(InboxFileError) -> Drink {
        let c = columns!
        guard fields.count == c.count else {
            throw InboxFileError("line \(line): \(fields.count) fields where the header has \(c.count)", line: line)
        }
        let mgText = Self.trimmed(fields[c.mg])
        guard let mg = Double(mgText), mg.isFinite else {
            throw InboxFileError(
                "line \(line): mgCaffeine: \"\(mgText.prefix(40))\" is not a number", line: line, field: "mgCaffeine")
        }
        let dateText = Self.trimmed(fields[c.date])
        guard let date = RFC3339.parse(dateText) ?? Self.localDate(dateText, in: timeZone) else {
            throw InboxFileError(
                "line \(line): date: \"\(dateText.prefix(40))\" is not a date (RFC 3339, or YYYY-MM-DD HH:MM[:SS] in the person's zone)",
                line: line, field: "date")
        }
        let type = c.type.map { DrinkCSV.text(of: Self.trimmed(fields[$0])) } ?? ""
        let source = c.source.map { DrinkCSV.text(of: fields[$0]) } ?? ""
        // The drink rules of a JSON Lines line, given the fields as they are read.
        var input = DrinkInput()
        input.date = .value(.date(date))
        input.mgCaffeine = .value(mg)
        if let uuid = c.uuid {
            input.uuid = .value(fields[uuid])
        } else {
            let name = "\(RFC3339.string(date))|\(JSONValue.double(mg).serialized())|\(type)|\(source)"
            input.parsedUUID = NameBasedUUID.v5(namespace: Self.rowsNamespace, name: name)
        }
        if let version = c.version {
            let text = Self.trimmed(fields[version])
            guard let number = Int64(text) else {
                throw InboxFileError(
                    "line \(line): version: \"\(text.prefix(20))\" is not an integer", line: line, field: "version")
            }
            input.version = .value(Double(number))
        }
        // Another app's drink names are its own: one is kept when it names a drink of the catalogue.
        if !type.isEmpty, c.uuid != nil || isCatalogued(type) { input.type = .value(type) }
        if !source.isEmpty { input.source = .value(source) }
        do throws(ValidationError) {
            return try parser.decoder.validator.drink(from: input, now: now, defaultSource: "inbox")
        } catch {
            throw InboxFileError(error.at(line: line))
        }
    }

    /// `text` without the spaces around it (most fields have none: no copy then).
    static func trimmed(_ text: String) -> String {
        guard text.first == " " || text.last == " " || text.first == "\t" || text.last == "\t" else { return text }
        return text.trimmingCharacters(in: .whitespaces)
    }

    private func isCatalogued(_ name: String) -> Bool {
        guard let type = DrinkType(rawValue: name) else { return false }
        return type.isBuiltIn || parser.decoder.validator.settings?.entry(type) != nil
    }

    /// `YYYY-MM-DD HH:MM[:SS]` (or with a `T`) in `zone`; nil when it is not one.
    static func localDate(_ text: String, in zone: TimeZone) -> Date? {
        let parts = text.replacingOccurrences(of: "T", with: " ").split(separator: " ")
        guard parts.count == 2 else { return nil }
        let day = parts[0].split(separator: "-").compactMap { Int($0) }
        let time = parts[1].split(separator: ":").compactMap { Int($0) }
        guard day.count == 3, parts[0].count == 10, time.count == 2 || time.count == 3 else { return nil }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        let components = DateComponents(
            year: day[0], month: day[1], day: day[2], hour: time[0], minute: time[1], second: time.count == 3 ? time[2] : 0)
        guard (1...12).contains(day[1]), (1...31).contains(day[2]), (0...23).contains(time[0]), (0...59).contains(time[1]),
            (0...59).contains(components.second!)
        else { return nil }
        return calendar.date(from: components)
    }
}

extension InboxFormat {
    /// CSV: the service's own export, or another app's `date,mg` (§5).
    public static let csv = InboxFormat("CSV", extensions: [".csv"], streams: true) { input, context throws(InboxFileError) in
        let records: CSVRecords =
            switch input {
            case .file(let file): CSVRecords(file: file)
            case .bytes(let data): CSVRecords(data: data)
            }
        return CSVDrinkReader(records: records, parser: context.parser, now: context.now, chunkSize: context.chunkSize)
    }
}
