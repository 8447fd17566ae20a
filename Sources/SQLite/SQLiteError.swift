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

    public var description: String { "\(context): \(message) (SQLite code \(code))" }
}
