import CoffeeDomain
import Foundation
import HealthStore

/// Reads the inbox's formats (PROTOCOL.md §5) into one all-or-nothing batch.
public struct InboxFileParser: Sendable {
    /// The inbox's formats (PROTOCOL.md §5), each with its names: the one
    /// list the importer, `coffee-tracker import` and the help read.
    public enum Format: Sendable, CaseIterable {
        case json, jsonLines, propertyList
        /// An Apple Health export: its `export.xml`, or the `export.zip` holding it.
        case healthExport, healthExportZip

        public var extensions: [String] {
            switch self {
            case .json: [".json"]
            case .jsonLines: [".jsonl", ".ndjson"]
            case .propertyList: [".plist"]
            case .healthExport: [".xml"]
            case .healthExportZip: [".zip"]
            }
        }

        /// Read as a stream into the store's one commit (memory does not
        /// grow with the file), rather than parsed whole.
        public var streams: Bool {
            switch self {
            case .json, .propertyList: false
            case .jsonLines, .healthExport, .healthExportZip: true
            }
        }

        /// Whether `limits.maxExportBytes` bounds it, rather than `limits.maxFileBytes`.
        public var isHealthExport: Bool { self == .healthExport || self == .healthExportZip }

        /// "`.json`, `.jsonl`, …, `.zip`", for messages and help.
        public static var names: String { allCases.flatMap(\.extensions).joined(separator: ", ") }
    }

    public let decoder: BatchDecoder

    public init(decoder: BatchDecoder) {
        self.decoder = decoder
    }

    /// The format a name asks for, or nil for a name the inbox does not take.
    public static func format(of name: String) -> Format? {
        let lower = name.lowercased()
        return Format.allCases.first { format in format.extensions.contains { lower.hasSuffix($0) } }
    }

    /// Names left alone until renamed: dot-files and files still being written.
    public static func isIgnored(_ name: String) -> Bool {
        name.hasPrefix(".") || name.hasSuffix("~")
            || [".tmp", ".part", ".partial"].contains { name.lowercased().hasSuffix($0) }
    }

    /// Parses `data` as `format`.
    public func parse(_ data: Data, format: Format, now: Date) throws(InboxFileError) -> WriteBatch {
        switch format {
        case .json:
            guard String(validating: data, as: UTF8.self) != nil else { throw InboxFileError("file is not valid UTF-8") }
            return try data.withUnsafeBytes { bytes in
                Result { () throws(InboxFileError) in try JSONDocumentReader(parser: self, now: now).read(bytes) }
            }.get()
        case .propertyList:
            // Foundation's parsers recurse: the shape is checked first, so
            // that no file can run them off the end of the stack.
            do throws(PropertyListCheck.Refusal) {
                try PropertyListCheck.check(data)
            } catch {
                throw InboxFileError(error.description)
            }
            return try document(now: now) { try PropertyListDecoder().decode(FileDocument.self, from: data) }
        case .healthExport, .healthExportZip:
            throw InboxFileError("a Health export is read as a stream, never whole")
        case .jsonLines:
            // Whole, for callers that want one batch; `JSONLinesReader` streams.
            let reader = JSONLinesReader(data: data, parser: self, now: now)
            var all = WriteBatch()
            while let chunk = try reader.nextChunk() {
                guard all.acceptsDrinksInOrder || chunk.drinks.isEmpty else {
                    throw InboxFileError("a drink after a deletion cannot be merged into one batch; stream the file instead")
                }
                all.drinks += chunk.drinks
                all.deletions += chunk.deletions
            }
            return all
        }
    }

    /// What one line of a JSON Lines file holds.
    enum Line: Sendable {
        case blank
        case drink(Drink)
        case deletion(Deletion)
    }

    /// One line of a JSON Lines file: a drink, or `{"delete": "<uuid>"}`,
    /// read in place.
    func line(_ bytes: UnsafeRawBufferPointer, number: Int, now: Date) throws(InboxFileError) -> Line {
        guard bytes.contains(where: { $0 > 0x20 }) else { return .blank }  // blank lines are fine
        // Only a line with non-ASCII bytes can be invalid UTF-8.
        if bytes.contains(where: { $0 >= 0x80 }), String(validating: bytes.bindMemory(to: UInt8.self), as: UTF8.self) == nil {
            throw InboxFileError("line \(number): not valid UTF-8", line: number)
        }
        do throws(ValidationError) {
            let line: LineInput?
            do throws(JSONReader.SyntaxError) {
                var c = JSONReader.Cursor(bytes)
                line = try c.objectOrSkip(LineInput.self)
                try c.end()
            } catch {
                throw ValidationError(rule: "line is not valid JSON (\(error))")
            }
            guard let line else { throw ValidationError(rule: "each line must be one JSON object") }
            if line.isDeletion { return .deletion(try decoder.validator.deletion(from: line.deletion)) }
            return .drink(try decoder.validator.drink(from: line.drink, now: now, defaultSource: "inbox"))
        } catch {
            throw InboxFileError(error.at(line: number))
        }
    }

    /// One JSON Lines object, read once (no tree) as both a drink and a
    /// deletion: it is a deletion when it has a `delete` member.
    struct LineInput: JSONObjectInput {
        var drink = DrinkInput()
        var deletion = DeletionInput()
        var isDeletion = false

        mutating func take(_ key: JSONKey, _ value: JSONValue) {
            if key == "delete" { isDeletion = true }
            drink.take(key, value)
            deletion.take(key, value)
        }
    }

    /// A whole document decoded by `decode` (a property list; JSON too, in
    /// tests, as the reference `JSONDocumentReader` is held to).
    func document(now: Date, _ decode: () throws -> FileDocument) throws(InboxFileError) -> WriteBatch {
        let doc: FileDocument
        do {
            doc = try decode()
        } catch let error as InboxFileError {
            throw error
        } catch {
            throw InboxFileError("file cannot be parsed (\(BatchDecoder.describe(error)))")
        }
        var batch = WriteBatch()
        do throws(ValidationError) {
            batch.drinks = try decoder.validate(doc.drinks, isArray: true) { input throws(ValidationError) in
                try decoder.validator.drink(from: input, now: now, defaultSource: "inbox")
            }
        } catch {
            throw InboxFileError(error, prefix: doc.isArray ? "" : "drinks ")
        }
        do throws(ValidationError) {
            batch.deletions = try decoder.validate(doc.deleted, isArray: true) { input throws(ValidationError) in
                try decoder.validator.deletion(from: input)
            }
        } catch {
            throw InboxFileError(error, prefix: "deleted ")
        }
        return batch
    }
}
