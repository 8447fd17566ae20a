/// The bytes a statement's text and blob parameters are bound from, kept
/// until its bindings are cleared: SQLite reads them in place
/// (`SQLITE_STATIC`) instead of copying each value into an allocation of
/// its own (`SQLITE_TRANSIENT`, three per drink stored: its UUID, type and
/// source; bench/README.md, session 27).
///
/// A chunk, once handed out, never moves while its bindings stand: when
/// it is full a larger one is added beside it, and `rewind()`, called
/// after the bindings are cleared, keeps only the largest.
struct BindArena: ~Copyable {
    private var chunks: [UnsafeMutableRawBufferPointer] = []
    /// Bytes used of the last chunk.
    private var used = 0

    init() {}

    deinit {
        for chunk in chunks { chunk.deallocate() }
    }

    /// Bytes in chunks held now: what a statement keeps between uses.
    var capacity: Int { chunks.reduce(0) { $0 + $1.count } }

    /// A copy of `bytes` that stays where it is until `rewind()`.
    mutating func keep(_ bytes: UnsafeRawBufferPointer) -> UnsafeRawPointer {
        if chunks.isEmpty || chunks[chunks.count - 1].count - used < bytes.count {
            let size = max(bytes.count, 2 * (chunks.last?.count ?? 128))
            chunks.append(.allocate(byteCount: size, alignment: 16))
            used = 0
        }
        let target = chunks[chunks.count - 1].baseAddress! + used
        if let source = bytes.baseAddress { target.copyMemory(from: source, byteCount: bytes.count) }
        used += bytes.count
        return UnsafeRawPointer(target)
    }

    /// Every copy is free to reuse: nothing may read one after this.
    mutating func rewind() {
        used = 0
        guard chunks.count > 1 else { return }
        let largest = chunks.removeLast()
        for chunk in chunks { chunk.deallocate() }
        chunks = [largest]
    }
}
