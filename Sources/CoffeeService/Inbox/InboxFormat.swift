import CoffeeDomain
import Foundation
import HealthStore

/// One of the inbox's formats (docs/protocol.md §5): its names, the limit on its
/// size, whether it streams, and how a file of it is read. The importer,
/// `coffee-tracker import` and the help all read `all`; nothing else names
/// a format. Adding one is a value of this type beside its reader (as
/// `healthExport` is, in `HealthExportReader+Format.swift`) and one line
/// in `all`.
public struct InboxFormat: Sendable, Equatable, CustomStringConvertible {
    /// What a reader reads: an open file (from its current offset; the
    /// caller keeps it open while the reader lives), or bytes in memory.
    public enum Input {
        case file(FileHandle)
        case bytes(Data)
    }

    /// Which of `limits.*` bounds a file's size.
    public enum SizeLimit: Sendable {
        /// `limits.maxFileBytes`: read whole, or a stream of changes.
        case file
        /// `limits.maxExportBytes`: exports of gigabytes, most of it skipped.
        case export
    }

    /// What a reader is given: the drink rules, the time, and how many
    /// changes a batch may hold at most.
    public struct Context: Sendable {
        public var parser: InboxFileParser
        public var now: Date
        public var chunkSize: Int

        public init(parser: InboxFileParser, now: Date, chunkSize: Int = 5000) {
            self.parser = parser
            self.now = now
            self.chunkSize = chunkSize
        }
    }

    /// For messages: "JSON Lines", "an Apple Health export (zip)".
    public let description: String
    /// The names it is known by, lower case, with their dot.
    public let extensions: [String]
    /// Read as a stream into the store's one commit, on a thread of its own
    /// while the store writes (memory does not grow with the file); else
    /// read whole into one batch.
    public let streams: Bool
    /// A record that breaks a rule is skipped and listed in
    /// `<name>.summary.json` rather than failing the file (Health exports).
    public let skipsBadRecords: Bool
    public let sizeLimit: SizeLimit
    private let open: @Sendable (Input, Context) throws(InboxFileError) -> any InboxFileReader

    init(
        _ description: String, extensions: [String], streams: Bool, skipsBadRecords: Bool = false,
        sizeLimit: SizeLimit = .file,
        open: @escaping @Sendable (Input, Context) throws(InboxFileError) -> any InboxFileReader
    ) {
        self.description = description
        self.extensions = extensions
        self.streams = streams
        self.skipsBadRecords = skipsBadRecords
        self.sizeLimit = sizeLimit
        self.open = open
    }

    /// Every format the inbox takes, in the order the help lists them.
    public static let all: [InboxFormat] = [.json, .jsonLines, .propertyList, .csv, .healthExport, .healthExportZip]

    /// The format a name asks for, or nil for a name the inbox does not take.
    public static func of(_ name: String) -> InboxFormat? {
        let lower = name.lowercased()
        return all.first { format in format.extensions.contains { lower.hasSuffix($0) } }
    }

    /// "`.json`, `.jsonl`, …, `.zip`", for messages and help.
    public static var names: String { all.flatMap(\.extensions).joined(separator: ", ") }

    /// A reader of `input`. A format read whole reads it here.
    ///
    /// - Throws: `InboxFileError` for a file that is not of this format.
    public func reader(for input: Input, _ context: Context) throws(InboxFileError) -> any InboxFileReader {
        try open(input, context)
    }

    public static func == (a: InboxFormat, b: InboxFormat) -> Bool { a.extensions == b.extensions }
}

/// A file of one of the inbox's formats, read as batches of changes in the
/// file's order. Used by one thread at a time.
public protocol InboxFileReader: AnyObject, Sendable {
    /// The next batch; nil at the end of the file.
    ///
    /// - Throws: `InboxFileError` naming the line or element that fails the file.
    func next() throws(InboxFileError) -> WriteBatch?
    /// Drinks and deletions handed out so far.
    var changesRead: Int { get }
    /// Bytes of the file (or of a zip's XML) read so far, for progress.
    var bytesRead: Int64 { get }
    /// What `<name>.summary.json` says, for a format that skips bad records.
    var summary: ImportSummary? { get }
}

extension InboxFileReader {
    public var summary: ImportSummary? { nil }
}

/// What a format that skips bad records writes to `<name>.summary.json`
/// (besides `imported` and `duplicates`, which the commit knows).
public struct ImportSummary: Sendable {
    public var records = 0
    public var caffeineRecords = 0
    /// The first 100 records skipped, with their line and why.
    public var skipped: [(line: Int, reason: String)] = []
    public var skippedTotal = 0
    static let skippedListed = 100

    mutating func skip(_ line: Int, _ reason: String) {
        skippedTotal += 1
        if skipped.count < Self.skippedListed { skipped.append((line, reason)) }
    }
}

extension InboxFormat {
    public static let json = InboxFormat("JSON", extensions: [".json"], streams: false) { input, context throws(InboxFileError) in
        try WholeFileReader(input, context) { data, context throws(InboxFileError) in
            guard String(validating: data, as: UTF8.self) != nil else { throw InboxFileError("file is not valid UTF-8") }
            return try data.withUnsafeBytes { bytes in
                Result { () throws(InboxFileError) in
                    try JSONDocumentReader(parser: context.parser, now: context.now).read(bytes)
                }
            }.get()
        }
    }

    public static let jsonLines = InboxFormat("JSON Lines", extensions: [".jsonl", ".ndjson"], streams: true) {
        input, context throws(InboxFileError) in
        switch input {
        case .file(let file): JSONLinesReader(file: file, parser: context.parser, now: context.now, chunkSize: context.chunkSize)
        case .bytes(let data): JSONLinesReader(data: data, parser: context.parser, now: context.now, chunkSize: context.chunkSize)
        }
    }

    public static let propertyList = InboxFormat("a property list", extensions: [".plist"], streams: false) {
        input, context throws(InboxFileError) in
        try WholeFileReader(input, context) { data, context throws(InboxFileError) in
            // Foundation's parsers recurse: the shape is checked first, so
            // that no file can run them off the end of the stack.
            do throws(PropertyListCheck.Refusal) {
                try PropertyListCheck.check(data)
            } catch {
                throw InboxFileError(error.description)
            }
            return try context.parser.document(now: context.now) {
                try PropertyListDecoder().decode(FileDocument.self, from: data)
            }
        }
    }
}

/// A format read whole: the file is parsed when the reader is made, and
/// `next()` hands out the one batch.
final class WholeFileReader: InboxFileReader, @unchecked Sendable {
    private var batch: WriteBatch?
    private(set) var changesRead = 0
    let bytesRead: Int64

    init(
        _ input: InboxFormat.Input, _ context: InboxFormat.Context,
        parse: (Data, InboxFormat.Context) throws(InboxFileError) -> WriteBatch
    ) throws(InboxFileError) {
        let data: Data
        switch input {
        case .bytes(let bytes): data = bytes
        case .file(let file):
            do {
                data = try file.readToEnd() ?? Data()
            } catch {
                throw InboxFileError("file cannot be read (\(error))")
            }
        }
        bytesRead = Int64(data.count)
        batch = try parse(data, context)
    }

    func next() throws(InboxFileError) -> WriteBatch? {
        defer { batch = nil }
        changesRead += batch?.count ?? 0
        return batch
    }
}
