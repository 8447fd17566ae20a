import CSQLite
import Foundation

/// SQLite's own name for "copy the bytes now": a C macro Swift cannot import.
// swift-format-ignore: AlwaysUseLowerCamelCase
let SQLITE_TRANSIENT = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// One SQLite connection. Not thread-safe: one owner at a time
/// (the store's executor thread).
public final class Database {
    let handle: OpaquePointer
    public let path: String

    /// Process-wide settings, made once before the first connection opens.
    private static let configured: Int32 = csqlite_disable_memory_statistics()

    /// Opens (or creates) the database at `path`.
    public init(path: String, readOnly: Bool = false) throws(SQLiteError) {
        _ = Self.configured
        var db: OpaquePointer?
        let flags =
            (readOnly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)) | SQLITE_OPEN_NOMUTEX
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close(db)
            throw SQLiteError(code: rc, message: message, context: "opening \(path)")
        }
        handle = db
        self.path = path
        sqlite3_extended_result_codes(db, 1)
    }

    private var isClosed = false
    /// `BEGIN IMMEDIATE` and `COMMIT`, compiled once: parsing them for
    /// every commit showed in profiles of one commit per drink.
    private var begin: Statement?
    private var commit: Statement?

    deinit {
        close()
    }

    /// Closes the connection now (releasing its locks), rather than when the
    /// last reference goes; statements must be finalized first. Using the
    /// database afterwards is a programming error.
    public func close() {
        guard !isClosed else { return }
        isClosed = true
        begin = nil
        commit = nil
        sqlite3_close_v2(handle)
    }

    /// Runs one or more statements that return no rows.
    public func execute(_ sql: String) throws(SQLiteError) {
        var errmsg: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &errmsg)
        if rc != SQLITE_OK {
            let message = errmsg.map { String(cString: $0) } ?? lastMessage
            sqlite3_free(errmsg)
            throw SQLiteError(code: rc, message: message, context: "executing \(sql.prefix(80))")
        }
    }

    /// A compiled statement, to be reused.
    public func prepare(_ sql: String) throws(SQLiteError) -> Statement {
        var stmt: OpaquePointer?
        let rc = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &stmt, nil)
        guard rc == SQLITE_OK, let stmt else {
            throw SQLiteError(code: rc, message: lastMessage, context: "preparing \(sql.prefix(80))")
        }
        return Statement(stmt, database: self, sql: sql)
    }

    /// Runs `body` inside `BEGIN IMMEDIATE … COMMIT`, rolling back if it throws.
    public func transaction<T>(_ body: () throws -> T) throws -> T {
        if begin == nil {
            begin = try prepare("BEGIN IMMEDIATE")
            commit = try prepare("COMMIT")
        }
        try begin!.run()
        do {
            let result = try body()
            if let injected = commitFailure?() { throw injected }  // tests only: a COMMIT that fails
            try commit!.run()
            return result
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    /// The first column of the first row of a query, as an integer.
    public func scalar(_ sql: String) throws(SQLiteError) -> Int64? {
        let statement = try prepare(sql)
        guard try statement.step() else { return nil }
        return statement.isNull(0) ? nil : statement.int64(0)
    }

    /// Rows changed by the last INSERT, UPDATE or DELETE.
    public var changes: Int { Int(sqlite3_changes(handle)) }

    /// The rowid of the last row inserted (an UPSERT's update leaves it alone).
    public var lastInsertRowID: Int64 {
        get { sqlite3_last_insert_rowid(handle) }
        set { sqlite3_set_last_insert_rowid(handle, newValue) }
    }

    /// The single text result of a PRAGMA or query, such as `PRAGMA journal_mode=WAL`.
    public func text(_ sql: String) throws(SQLiteError) -> String? {
        let statement = try prepare(sql)
        guard try statement.step() else { return nil }
        return statement.string(0)
    }

    var lastMessage: String { String(cString: sqlite3_errmsg(handle)) }

    /// The hook's closure, kept alive while SQLite holds a pointer to it.
    private final class CommitHook {
        let body: () -> Bool
        init(_ body: @escaping () -> Bool) { self.body = body }
    }
    private var commitHook: CommitHook?

    /// Asked before every COMMIT of `transaction`: an error it returns fails
    /// the transaction as a COMMIT that failed with it would (rolled back,
    /// thrown), so that tests can fill the disk at the moment they choose
    /// (the commit hook fails a COMMIT only with SQLITE_CONSTRAINT). nil in
    /// the service.
    @_spi(Testing) public var commitFailure: (() -> SQLiteError?)?

    /// For tests only: calls `hook` inside every COMMIT on this connection,
    /// before the commit takes effect (and before its fsync). Blocking in it
    /// holds the commit; returning false fails it (SQLite rolls it back and
    /// COMMIT throws). nil removes the hook.
    @_spi(Testing) public func setCommitHook(_ hook: (() -> Bool)?) {
        commitHook = hook.map(CommitHook.init)
        guard let commitHook else {
            sqlite3_commit_hook(handle, nil, nil)
            return
        }
        let context = Unmanaged.passUnretained(commitHook).toOpaque()
        sqlite3_commit_hook(
            handle,
            { context in
                // SQLite: a non-zero return turns the COMMIT into a ROLLBACK.
                Unmanaged<CommitHook>.fromOpaque(context!).takeUnretainedValue().body() ? 0 : 1
            }, context)
    }
}

/// SQLite's online backup API: copies a database page by page into another,
/// a few pages per `step`, so that its owner can go on writing between
/// steps. Writes made through the source's own connection meanwhile are
/// carried into the copy as they happen; when `step` returns true the copy
/// equals the source at that moment. Not thread-safe: used by the source's
/// owner only.
public final class OnlineBackup {
    private let backup: OpaquePointer
    private let target: Database
    private var finished = false

    /// Starts copying `source` into `target` (a new, empty database).
    public init(from source: Database, into target: Database) throws(SQLiteError) {
        guard let backup = sqlite3_backup_init(target.handle, "main", source.handle, "main") else {
            throw SQLiteError(
                code: sqlite3_errcode(target.handle), message: target.lastMessage, context: "backup to \(target.path)")
        }
        self.backup = backup
        self.target = target
    }

    /// Copies up to `pages` more pages; true when the copy is whole.
    /// SQLite's busy and locked answers are not errors here: the next step
    /// tries again.
    public func step(pages: Int32) throws(SQLiteError) -> Bool {
        let rc = sqlite3_backup_step(backup, pages)
        switch rc {
        case SQLITE_DONE: return true
        case SQLITE_OK, SQLITE_BUSY, SQLITE_LOCKED: return false
        default:
            throw SQLiteError(code: rc, message: target.lastMessage, context: "backup to \(target.path)")
        }
    }

    /// Pages still to copy, and in all, as of the last step.
    public var progress: (remaining: Int32, total: Int32) {
        (sqlite3_backup_remaining(backup), sqlite3_backup_pagecount(backup))
    }

    deinit {
        if !finished { sqlite3_backup_finish(backup) }
    }

    /// Releases SQLite's backup object; after a step returned true.
    public func finish() throws(SQLiteError) {
        guard !finished else { return }
        finished = true
        let rc = sqlite3_backup_finish(backup)
        guard rc == SQLITE_OK else {
            throw SQLiteError(code: rc, message: target.lastMessage, context: "backup to \(target.path)")
        }
    }
}
