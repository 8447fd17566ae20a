/// A failed SQLite call: the result code, SQLite's message, and what we were doing.
public struct SQLiteError: Error, CustomStringConvertible, Sendable {
    public let code: Int32
    public let message: String
    public let context: String

    public init(code: Int32, message: String, context: String) {
        self.code = code
        self.message = message
        self.context = context
    }

    /// True for `SQLITE_CORRUPT` and `SQLITE_NOTADB`: the file is not a usable database.
    public var isCorruption: Bool { code & 0xFF == 11 || code & 0xFF == 26 }
    /// SQLITE_BUSY or SQLITE_LOCKED: another connection holds the lock.
    public var isBusy: Bool { code & 0xFF == 5 || code & 0xFF == 6 }
    /// The storage refused a write: SQLITE_FULL (disk or quota full),
    /// SQLITE_IOERR (an I/O error), SQLITE_READONLY (a read-only file
    /// system) or SQLITE_CANTOPEN (a journal or WAL file cannot be made).
    /// A state to wait out, not a property of the data written.
    public var isStorageFault: Bool { [13, 10, 8, 14].contains(code & 0xFF) }

    public var description: String { "\(context): \(message) (SQLite code \(code))" }
}
