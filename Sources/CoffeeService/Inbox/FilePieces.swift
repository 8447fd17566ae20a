import Foundation

/// A streamed file's bytes in pieces of at most 1 MiB, from an open file
/// or from bytes already in memory (a mapped file), so that a reader's
/// buffer never holds a copy of it all: the JSON Lines and CSV readers'.
struct FilePieces {
    static let size = 1 << 20

    /// The next piece; nil or empty at the end.
    let next: () throws -> Data?

    /// From `file`'s current offset; does not close it.
    init(file: FileHandle) { next = { try file.read(upToCount: FilePieces.size) } }

    init(data: Data) {
        var offset = data.startIndex
        next = {
            guard offset < data.endIndex else { return nil }
            let end = min(offset + FilePieces.size, data.endIndex)
            defer { offset = end }
            return data[offset..<end]
        }
    }
}
