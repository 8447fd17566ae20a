import CoffeeDomain
import Foundation
import HealthStore

/// Reads a JSON Lines file chunk by chunk, in order: memory is one read
/// piece (1 MiB) plus one chunk, whatever the file's size.
///
/// A chunk holds drinks, then deletions; it ends early where a drink follows
/// a deletion, because a batch applies its saves before its deletions and
/// the file's order must hold.
public final class JSONLinesReader: InboxFileReader, @unchecked Sendable {
    static let pieceSize = FilePieces.size

    private let parser: InboxFileParser
    private let now: Date
    private let chunkSize: Int
    private let pieces: FilePieces
    /// What has been read and not yet handed out as lines, from `position`.
    private var buffer: [UInt8] = []
    private var position = 0
    private var atEnd = false
    private var lineNumber = 0
    /// A drink that followed a deletion: it opens the next chunk.
    private var carried: Drink?
    /// Drinks and deletions handed out so far.
    public private(set) var changesRead = 0
    public private(set) var bytesRead: Int64 = 0

    /// Reads `file` from its current offset in pieces; does not close it.
    public init(file: FileHandle, parser: InboxFileParser, now: Date, chunkSize: Int = 5000) {
        self.parser = parser
        self.now = now
        self.chunkSize = chunkSize
        pieces = FilePieces(file: file)
    }

    /// Reads lines from bytes already in memory (a mapped file), in the
    /// same pieces as from a file, so the buffer never holds a copy of it all.
    public init(data: Data, parser: InboxFileParser, now: Date, chunkSize: Int = 5000) {
        self.parser = parser
        self.now = now
        self.chunkSize = chunkSize
        pieces = FilePieces(data: data)
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
            if let piece = try pieces.next(), !piece.isEmpty {
                buffer.append(contentsOf: piece)
                bytesRead += Int64(piece.count)
            } else {
                atEnd = true
            }
        }
    }

    /// The next chunk, or nil at the end of the file.
    ///
    /// - Throws: `InboxFileError` naming the line.
    public func next() throws(InboxFileError) -> WriteBatch? {
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
}
