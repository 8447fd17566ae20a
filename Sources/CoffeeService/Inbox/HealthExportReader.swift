import CHealthXML
import CoffeeDomain
import Foundation
import HealthStore

/// An Apple Health export read as a stream (docs/protocol.md §5): libxml2's
/// `xmlTextReader` pulls the XML from `HealthExportSource` in 64 KiB pieces
/// and holds one element at a time, so memory does not grow with the file.
/// Each `Record` of caffeine becomes a drink; every other element is skipped
/// whole (`xmlTextReaderNext`), its attributes never made into strings.
///
/// `next()` hands out batches for the store's one-commit stream (as JSON
/// Lines does); a caffeine record that breaks a drink rule is skipped and
/// counted in `summary`. The formats are in `HealthExportReader+Format.swift`. A document that is not well-formed, or whose root is
/// not `HealthData`, fails the file.
///
/// Unchecked `Sendable`: one thread at a time uses it, handed over by
/// `BatchHandoff` (the reader's thread while it reads, the importer's once
/// `take()` has returned nil), as `JSONLinesReader`.
public final class HealthExportReader: InboxFileReader, @unchecked Sendable {
    static let caffeineType = "HKQuantityTypeIdentifierDietaryCaffeine"
    static let batchSize = 1000

    private let source: HealthExportSource
    private let validator: DrinkValidator
    private let now: Date
    private var reader: OpaquePointer?
    private var tally = ImportSummary()
    public var summary: ImportSummary? { tally }
    public private(set) var changesRead = 0
    private var started = false
    private var done = false

    init(source: HealthExportSource, validator: DrinkValidator, now: Date) throws(InboxFileError) {
        self.source = source
        self.validator = validator
        self.now = now
        let context = Unmanaged.passUnretained(source).toOpaque()
        reader = ct_health_open(
            { context, buffer, length in
                guard let context, let buffer else { return -1 }
                return Int32(Unmanaged<HealthExportSource>.fromOpaque(context).takeUnretainedValue().read(buffer, Int(length)))
            }, context)
        guard reader != nil else { throw InboxFileError("the XML reader could not be made (out of memory)") }
    }

    deinit {
        ct_health_free(reader)
    }

    /// Bytes of the file (or of the zip's XML) read so far.
    public var bytesRead: Int64 { source.bytesRead }

    /// The next batch of drinks; nil at the end of the document.
    ///
    /// - Throws: `InboxFileError` with the line for a document that is not
    ///   well-formed, or not a Health export.
    public func next() throws(InboxFileError) -> WriteBatch? {
        guard let reader, !done else { return nil }
        if !started {
            started = true
            try root(reader)
        }
        var batch = WriteBatch()
        while batch.drinks.count < Self.batchSize {
            let status = ct_health_next_child(reader)
            guard status == 1 else {
                done = true
                try failIfBroken(status)
                break
            }
            if ct_health_is(reader, "Record") != 0 { record(reader, into: &batch) }
        }
        changesRead += batch.count
        return batch.drinks.isEmpty && done ? nil : batch
    }

    /// The root element must be `HealthData`.
    private func root(_ reader: OpaquePointer) throws(InboxFileError) {
        let status = ct_health_root(reader)
        try failIfBroken(status)
        guard status == 1 else { throw InboxFileError("the file holds no XML element: not an Apple Health export") }
        guard ct_health_is(reader, "HealthData") != 0 else {
            var name = [CChar](repeating: 0, count: 128)
            ct_health_name(reader, &name, Int32(name.count))
            throw InboxFileError(
                "not an Apple Health export: the root element is <\(Self.text(name))>, not <HealthData>",
                line: Int(ct_health_line(reader)))
        }
    }

    private func failIfBroken(_ status: Int32) throws(InboxFileError) {
        guard status < 0 else { return }
        if let sourceError = source.lastError { throw InboxFileError(sourceError) }
        let message = String(cString: ct_health_error(reader))
        let line = Int(ct_health_error_line(reader))
        throw InboxFileError(
            "not well-formed XML: \(message.isEmpty ? "the XML reader stopped" : message)", line: line > 0 ? line : nil)
    }

    /// One `Record`: counted; a caffeine record becomes a drink, or is skipped with its reason.
    private func record(_ reader: OpaquePointer, into batch: inout WriteBatch) {
        tally.records += 1
        guard ct_health_attribute_is(reader, "type", Self.caffeineType) != 0 else { return }
        tally.caffeineRecords += 1
        let line = Int(ct_health_line(reader))
        do throws(ValidationError) {
            batch.drinks.append(
                try drink(
                    source: attribute(reader, "sourceName"), start: attribute(reader, "startDate"),
                    value: attribute(reader, "value"), unit: attribute(reader, "unit")))
        } catch {
            tally.skip(line, error.description)
        }
    }

    private var scratch = [CChar](repeating: 0, count: 4096)

    /// An attribute of the current element ("" when absent or over 4 KiB).
    private func attribute(_ reader: OpaquePointer, _ name: String) -> String {
        let length = ct_health_attribute(reader, name, &scratch, Int32(scratch.count))
        return length < 0 ? "" : String(decoding: scratch.prefix(Int(length)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private static func text(_ chars: [CChar]) -> String {
        String(decoding: chars.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The drink of a caffeine record (docs/protocol.md §5), under the drink rules.
    func drink(source: String, start: String, value: String, unit: String) throws(ValidationError) -> Drink {
        guard let amount = Double(value) else {
            throw ValidationError(field: "value", rule: "must be a number, got \"\(value)\"")
        }
        let mg: Double
        switch unit {
        case "mg": mg = amount
        case "g": mg = amount * 1000
        default: throw ValidationError(field: "unit", rule: "must be mg or g, got \"\(unit)\"")
        }
        guard let date = HealthDate.parse(start) else {
            throw ValidationError(field: "startDate", rule: "must be a date such as 2024-01-02 08:15:00 +0100, got \"\(start)\"")
        }
        let uuid = NameBasedUUID.v5(namespace: NameBasedUUID.healthRecords, name: "\(source)|\(start)|\(value)|\(unit)")
        let input = DrinkInput(
            json: .object([
                ("uuid", .string(uuid.uuidString)), ("mgCaffeine", .double(mg)), ("date", .string(RFC3339.string(date))),
                ("source", .string("health:\(source)")),
            ]))
        return try validator.drink(from: input, now: now, defaultSource: "inbox")
    }
}
