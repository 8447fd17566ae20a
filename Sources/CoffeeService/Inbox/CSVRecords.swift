import Foundation

/// Reads CSV (RFC 4180) record by record, in pieces: memory is one piece
/// (1 MiB) plus one record, whatever the file's size. A field may be quoted,
/// its quotes doubled, and hold commas and line breaks; records end with CRLF
/// or LF. Each record comes with the line it begins on.
final class CSVRecords {
    static let pieceSize = FilePieces.size

    private let pieces: FilePieces
    private var buffer: [UInt8] = []
    private var position = 0
    private var atEnd = false
    /// The line the next record begins on.
    private var line = 1
    private(set) var bytesRead: Int64 = 0

    init(file: FileHandle) { pieces = FilePieces(file: file) }

    init(data: Data) { pieces = FilePieces(data: data) }

    /// The next record's fields and the line it begins on; nil at the end.
    func next() throws(InboxFileError) -> (fields: [String], line: Int)? {
        while true {
            if let (fields, end, breaks) = try record(from: position) {
                let start = line
                line += breaks
                position = end
                return (fields, start)
            }
            if atEnd { return nil }
            buffer.removeFirst(position)
            position = 0
            do {
                if let piece = try pieces.next(), !piece.isEmpty {
                    buffer.append(contentsOf: piece)
                    bytesRead += Int64(piece.count)
                } else {
                    atEnd = true
                }
            } catch {
                throw InboxFileError("line \(line): the file cannot be read (\(error))", line: line)
            }
        }
    }

    /// The record from `start` when the buffer holds all of it (or the file
    /// ends in it): its fields, where it ends, how many line breaks it spans.
    private func record(from start: Int) throws(InboxFileError) -> ([String], Int, Int)? {
        guard start < buffer.count else { return nil }
        var fields: [String] = []
        var field: [UInt8] = []
        var quoted = false
        var breaks = 0
        var i = start
        func finish() throws(InboxFileError) {
            guard let text = String(validating: field, as: UTF8.self) else {
                throw InboxFileError("line \(line + breaks): not valid UTF-8", line: line + breaks)
            }
            fields.append(text)
            field.removeAll(keepingCapacity: true)
        }
        while i < buffer.count {
            let c = buffer[i]
            if quoted {
                if c == UInt8(ascii: "\"") {
                    if i + 1 < buffer.count {
                        if buffer[i + 1] == UInt8(ascii: "\"") {
                            field.append(c)
                            i += 2
                        } else {
                            quoted = false
                            i += 1
                        }
                        continue
                    }
                    guard atEnd else { return nil }  // a doubled quote may follow in the next piece
                    quoted = false
                    i += 1
                    continue
                }
                if c == UInt8(ascii: "\n") { breaks += 1 }
                field.append(c)
                i += 1
                continue
            }
            switch c {
            case UInt8(ascii: ","):
                try finish()
                i += 1
            case UInt8(ascii: "\"") where field.isEmpty:
                quoted = true
                i += 1
            case UInt8(ascii: "\r"), UInt8(ascii: "\n"):
                if c == UInt8(ascii: "\r") {
                    guard i + 1 < buffer.count || atEnd else { return nil }
                    if i + 1 < buffer.count, buffer[i + 1] == UInt8(ascii: "\n") { i += 1 }
                }
                try finish()
                return (fields, i + 1, breaks + 1)
            default:
                field.append(c)
                i += 1
            }
        }
        guard atEnd else { return nil }
        if quoted { throw InboxFileError("line \(line): a quoted field is not closed", line: line) }
        try finish()
        return (fields, buffer.count, breaks)
    }
}
