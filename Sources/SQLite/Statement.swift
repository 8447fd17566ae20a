import CSQLite
import Foundation

/// A prepared statement. Bind with 1-based indexes, read columns 0-based.
public final class Statement {
    let handle: OpaquePointer
    unowned let database: Database
    let sql: String
    /// Where text and blobs are bound from, until `reset()`.
    private var arena = BindArena()

    init(_ handle: OpaquePointer, database: Database, sql: String) {
        self.handle = handle
        self.database = database
        self.sql = sql
    }

    deinit { sqlite3_finalize(handle) }

    /// Resets the statement and clears its bindings, ready for the next use.
    public func reset() {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
        arena.rewind()
    }

    /// Bytes the statement keeps until the next `reset()` (for tests).
    var boundCapacity: Int { arena.capacity }

    public func bind(_ index: Int32, _ value: Int64) throws(SQLiteError) {
        try check(sqlite3_bind_int64(handle, index, value), "binding \(index)")
    }

    public func bind(_ index: Int32, _ value: Double) throws(SQLiteError) {
        try check(sqlite3_bind_double(handle, index, value), "binding \(index)")
    }

    public func bind(_ index: Int32, _ value: String?) throws(SQLiteError) {
        guard var value else { return try check(sqlite3_bind_null(handle, index), "binding \(index)") }
        // withUTF8 lends a native string's own bytes (passing the String to
        // the C parameter copied it into a new array for every bind); the
        // arena keeps a copy for SQLite to read in place.
        let (text, count) = value.withUTF8 { (arena.keep(UnsafeRawBufferPointer($0)), $0.count) }
        try check(
            sqlite3_bind_text(handle, index, text.assumingMemoryBound(to: CChar.self), Int32(count), SQLITE_STATIC),
            "binding \(index)")
    }

    /// A buffer without an address binds NULL, as SQLite's own call does.
    public func bind(_ index: Int32, bytes: UnsafeRawBufferPointer) throws(SQLiteError) {
        let blob = bytes.baseAddress == nil ? nil : arena.keep(bytes)
        try check(sqlite3_bind_blob(handle, index, blob, Int32(bytes.count), SQLITE_STATIC), "binding \(index)")
    }

    public func bindNull(_ index: Int32) throws(SQLiteError) {
        try check(sqlite3_bind_null(handle, index), "binding \(index)")
    }

    /// Advances; true while there is a row to read.
    public func step() throws(SQLiteError) -> Bool {
        let rc = sqlite3_step(handle)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default:
            throw SQLiteError(code: rc, message: database.lastMessage, context: "running \(sql.prefix(80))")
        }
    }

    /// Runs a statement that returns no rows, then resets it.
    public func run() throws(SQLiteError) {
        defer { reset() }
        _ = try step()
    }

    public func isNull(_ column: Int32) -> Bool { sqlite3_column_type(handle, column) == SQLITE_NULL }
    public func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }
    public func double(_ column: Int32) -> Double { sqlite3_column_double(handle, column) }

    public func string(_ column: Int32) -> String? {
        guard let text = sqlite3_column_text(handle, column) else { return nil }
        return String(cString: text)
    }

    /// Calls `body` with the blob's bytes, valid only during the call.
    public func withBlob<T>(_ column: Int32, _ body: (UnsafeRawBufferPointer) -> T) -> T {
        let pointer = sqlite3_column_blob(handle, column)
        let count = Int(sqlite3_column_bytes(handle, column))
        return body(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    /// `what` is built only on failure: formatting "binding 3" for every
    /// bind cost the store's thread about 3% of its time per drink.
    private func check(_ rc: Int32, _ what: @autoclosure () -> String) throws(SQLiteError) {
        guard rc == SQLITE_OK else {
            throw SQLiteError(code: rc, message: database.lastMessage, context: "\(what()) of \(sql.prefix(80))")
        }
    }
}
