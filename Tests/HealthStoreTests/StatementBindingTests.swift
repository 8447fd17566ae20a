import Foundation
import Testing

@testable import SQLite

/// SQLite reads bound text and blobs in place until the bindings are
/// cleared (`BindArena`): every value must read back as bound, however many
/// were bound before the step, and a statement used again and again must
/// not keep more than one chunk.
@Suite("A statement's bound text and blobs", .timeLimit(.minutes(1)))
struct StatementBindingTests {
    @Test func valuesBoundPastTheFirstChunkReadBackAsBound() throws {
        let db = try Database(path: ":memory:")
        defer { db.close() }
        let select = try db.prepare("SELECT ?1, ?2, ?3, ?4, hex(?5), ?6, typeof(?7)")
        // 4 × 300 bytes of text outgrow the first chunks: the earlier values
        // must still be where SQLite was told they are.
        let texts = (0..<4).map { String(repeating: Character(UnicodeScalar(UInt8(65 + $0))), count: 300) }
        for (i, text) in texts.enumerated() { try select.bind(Int32(i + 1), text) }
        let uuid = UUID(uuidString: "8F0C2A5E-7B1D-4C3A-9E6F-0123456789AB")!
        try withUnsafeBytes(of: uuid.uuid) { try select.bind(5, bytes: $0) }
        try select.bind(6, "short é")
        try select.bind(7, bytes: UnsafeRawBufferPointer(start: nil, count: 0))
        #expect(try select.step())
        for (i, text) in texts.enumerated() { #expect(select.string(Int32(i)) == text) }
        #expect(select.string(4) == "8F0C2A5E7B1D4C3A9E6F0123456789AB")
        #expect(select.string(5) == "short é")
        #expect(select.string(6) == "null")
        select.reset()
    }

    @Test func aStatementUsedAgainKeepsOneChunk() throws {
        let db = try Database(path: ":memory:")
        defer { db.close() }
        try db.execute("CREATE TABLE t(a TEXT, b BLOB)")
        let insert = try db.prepare("INSERT INTO t VALUES (?1, ?2)")
        var kept: Set<Int> = []
        for n in 0..<1000 {
            try insert.bind(1, "drink \(n) from a source with a long name")
            try withUnsafeBytes(of: UUID().uuid) { try insert.bind(2, bytes: $0) }
            try insert.run()
            kept.insert(insert.boundCapacity)
        }
        // The first use grows to what one use needs; later uses reuse it.
        #expect(kept.count == 1)
        #expect(try db.scalar("SELECT count(DISTINCT a) FROM t") == 1000)
        #expect(try db.scalar("SELECT count(*) FROM t WHERE a LIKE 'drink 999 %' AND length(b) = 16") == 1)
    }
}
