import CoffeeDomain
import Foundation
import HealthStore

/// Why an inbox file was refused: what `<name>.error.json` says.
public struct InboxFileError: Error, CustomStringConvertible, Sendable, Equatable {
    public var message: String
    public var index: Int?
    public var line: Int?
    public var field: String?

    public init(_ message: String, index: Int? = nil, line: Int? = nil, field: String? = nil) {
        self.message = message
        self.index = index
        self.line = line
        self.field = field
    }

    init(_ error: ValidationError, prefix: String = "") {
        self.init(prefix + error.description, index: error.index, line: error.line, field: error.field)
    }

    public var description: String { message }
}

/// Reads the inbox's formats (PROTOCOL.md §5) into one all-or-nothing batch.
public struct InboxFileParser: Sendable {
    public enum Format: Sendable { case json, jsonLines, propertyList }

    public let decoder: BatchDecoder

    public init(decoder: BatchDecoder) {
        self.decoder = decoder
    }

    /// The format a name asks for, or nil for a name the inbox does not take.
    public static func format(of name: String) -> Format? {
        let lower = name.lowercased()
        if lower.hasSuffix(".json") { return .json }
        if lower.hasSuffix(".jsonl") || lower.hasSuffix(".ndjson") { return .jsonLines }
        if lower.hasSuffix(".plist") { return .propertyList }
        return nil
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
            return try document(now: now) { try PropertyListDecoder().decode(FileDocument.self, from: data) }
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

/// A whole-file document: an array of drinks, or `{"drinks": [...], "deleted": [...]}`.
struct FileDocument: Decodable {
    var drinks: [DrinkInput?] = []
    var deleted: [DeletionInput?] = []
    var isArray = false

    enum Key: String, CodingKey { case drinks, deleted }

    init(from decoder: any Decoder) throws {
        if let array = try? decoder.singleValueContainer().decode([Lenient<DrinkInput>].self) {
            drinks = array.map(\.value)
            isArray = true
            return
        }
        guard let c = try? decoder.container(keyedBy: Key.self), c.contains(.drinks) || c.contains(.deleted) else {
            throw InboxFileError(Self.shapeError)
        }
        do {
            drinks = try c.decodeIfPresent([Lenient<DrinkInput>].self, forKey: .drinks)?.map(\.value) ?? []
        } catch {
            throw InboxFileError(Self.drinksError, field: "drinks")
        }
        do {
            deleted = try c.decodeIfPresent([Lenient<DeletionInput>].self, forKey: .deleted)?.map(\.value) ?? []
        } catch {
            throw InboxFileError(Self.deletedError, field: "deleted")
        }
    }

    static let shapeError = "file must hold an array of drinks or {\"drinks\": [...], \"deleted\": [...]}"
    static let drinksError = "drinks must be an array of drink objects"
    static let deletedError = "deleted must be an array of deletion objects"
}

/// A whole-file JSON document read in one pass, element by element, each
/// drink validated as it is read: memory is the batch of drinks, not a tree
/// of the file (a 20 MB array of 200k drinks took about 7 times its size as
/// a tree, inputs and drinks at once).
///
/// Problems are reported as `FileDocument` and `document(now:_:)` report
/// them for a property list, whichever comes first in the file: text that
/// is not JSON, then the document's shape, then a `drinks` or `deleted` that
/// is not an array, then the first bad drink, then the first bad deletion.
struct JSONDocumentReader {
    let parser: InboxFileParser
    let now: Date

    func read(_ bytes: UnsafeRawBufferPointer) throws(InboxFileError) -> WriteBatch {
        let validator = parser.decoder.validator
        let drink = { (input: DrinkInput) throws(ValidationError) in
            try validator.drink(from: input, now: now, defaultSource: "inbox")
        }
        let deletion = { (input: DeletionInput) throws(ValidationError) in try validator.deletion(from: input) }
        var drinks = ValidatedElements<Drink>()
        var deletions = ValidatedElements<Deletion>()
        var isArray = false
        var shaped = false
        var drinksWrong = false
        var deletedWrong = false
        do throws(JSONReader.SyntaxError) {
            var c = JSONReader.Cursor(bytes)
            switch c.peek() {
            case UInt8(ascii: "["):
                isArray = true
                shaped = true
                try Self.array(&c, into: &drinks, wrongType: &drinksWrong, drink)
            case UInt8(ascii: "{"):
                try c.members { (key: JSONKey, c: inout JSONReader.Cursor) throws(JSONReader.SyntaxError) in
                    if key == "drinks" {
                        shaped = true
                        try Self.array(&c, into: &drinks, wrongType: &drinksWrong, drink)
                    } else if key == "deleted" {
                        shaped = true
                        try Self.array(&c, into: &deletions, wrongType: &deletedWrong, deletion)
                    } else {
                        _ = try c.value()
                    }
                }
            default:
                _ = try c.value()
            }
            try c.end()
        } catch {
            throw InboxFileError("file cannot be parsed (\(error))")
        }
        guard shaped else { throw InboxFileError(FileDocument.shapeError) }
        if drinksWrong { throw InboxFileError(FileDocument.drinksError, field: "drinks") }
        if deletedWrong { throw InboxFileError(FileDocument.deletedError, field: "deleted") }
        if let error = drinks.error { throw InboxFileError(error, prefix: isArray ? "" : "drinks ") }
        if let error = deletions.error { throw InboxFileError(error, prefix: "deleted ") }
        return WriteBatch(drinks: drinks.items, deletions: deletions.items)
    }

    /// The array of `drinks` or `deleted` (or the whole document), each
    /// element validated as it is read; null is none, anything else the
    /// wrong type. A name given twice: the last one counts.
    static func array<Input: JSONObjectInput, Output>(
        _ c: inout JSONReader.Cursor, into elements: inout ValidatedElements<Output>, wrongType: inout Bool,
        _ rule: (Input) throws(ValidationError) -> Output
    ) throws(JSONReader.SyntaxError) {
        elements = ValidatedElements()
        wrongType = false
        guard c.peek() == UInt8(ascii: "[") else {
            wrongType = try c.value() != .null
            return
        }
        try c.elements { (c: inout JSONReader.Cursor) throws(JSONReader.SyntaxError) in
            elements.add(try c.objectOrSkip(Input.self), rule)
        }
    }
}

/// Reads a JSON Lines file chunk by chunk, in order: memory is one read
/// piece (1 MiB) plus one chunk, whatever the file's size.
///
/// A chunk holds drinks, then deletions; it ends early where a drink follows
/// a deletion, because a batch applies its saves before its deletions and
/// the file's order must hold.
public final class JSONLinesReader: @unchecked Sendable {
    static let pieceSize = 1 << 20

    private let parser: InboxFileParser
    private let now: Date
    private let chunkSize: Int
    private let readPiece: () throws -> Data?
    /// What has been read and not yet handed out as lines, from `position`.
    private var buffer: [UInt8] = []
    private var position = 0
    private var atEnd = false
    private var lineNumber = 0
    /// A drink that followed a deletion: it opens the next chunk.
    private var carried: Drink?
    /// Drinks and deletions handed out so far.
    public private(set) var changesRead = 0

    /// Reads `file` from its current offset in pieces; does not close it.
    public init(file: FileHandle, parser: InboxFileParser, now: Date, chunkSize: Int = 5000) {
        self.parser = parser
        self.now = now
        self.chunkSize = chunkSize
        readPiece = { try file.read(upToCount: JSONLinesReader.pieceSize) }
    }

    /// Reads lines from bytes already in memory (a mapped file), in the
    /// same pieces as from a file, so the buffer never holds a copy of it all.
    public init(data: Data, parser: InboxFileParser, now: Date, chunkSize: Int = 5000) {
        self.parser = parser
        self.now = now
        self.chunkSize = chunkSize
        var offset = data.startIndex
        readPiece = {
            guard offset < data.endIndex else { return nil }
            let end = min(offset + JSONLinesReader.pieceSize, data.endIndex)
            defer { offset = end }
            return data[offset..<end]
        }
    }

    /// Where the next line lies in `buffer` (without its newline), valid
    /// until the next call; nil at the end.
    private func nextLine() throws -> Range<Int>? {
        while true {
            let newline = buffer.withUnsafeBytes { raw -> Int? in
                guard position < raw.count, let base = raw.baseAddress,
                    let found = memchr(base + position, Int32(UInt8(ascii: "\n")), raw.count - position)
                else { return nil }
                return base.distance(to: UnsafeRawPointer(found))
            }
            if let newline {
                defer { position = newline + 1 }
                return position..<newline
            }
            if atEnd {
                guard position < buffer.count else { return nil }
                defer { position = buffer.count }
                return position..<buffer.count
            }
            // Keep only the unfinished line, then read another piece.
            buffer.removeFirst(position)
            position = 0
            if let piece = try readPiece(), !piece.isEmpty { buffer.append(contentsOf: piece) } else { atEnd = true }
        }
    }

    /// The next chunk, or nil at the end of the file.
    ///
    /// - Throws: `InboxFileError` naming the line.
    public func nextChunk() throws(InboxFileError) -> WriteBatch? {
        var chunk = WriteBatch()
        if let carried { chunk.drinks.append(carried) }
        carried = nil
        while chunk.count < chunkSize {
            let range: Range<Int>?
            do {
                range = try nextLine()
            } catch {
                throw InboxFileError("file cannot be read (\(error))", line: lineNumber + 1)
            }
            guard let range else { break }
            lineNumber += 1
            let number = lineNumber
            let read = buffer.withUnsafeBytes { raw in
                Result { () throws(InboxFileError) in
                    try parser.line(UnsafeRawBufferPointer(rebasing: raw[range]), number: number, now: now)
                }
            }
            switch try read.get() {
            case .blank: break
            case .deletion(let deletion): chunk.deletions.append(deletion)
            case .drink(let drink):
                guard chunk.acceptsDrinksInOrder else {
                    carried = drink
                    return handOut(chunk)
                }
                chunk.drinks.append(drink)
            }
        }
        return chunk.isEmpty ? nil : handOut(chunk)
    }

    private func handOut(_ chunk: WriteBatch) -> WriteBatch {
        changesRead += chunk.count
        return chunk
    }

    /// For `HealthStore.applyStream`, whose source throws untyped.
    public func next() throws -> WriteBatch? { try nextChunk() }
}
