import CSQLite
import Foundation

/// SQLite's own name for "the bytes stay where they are until the binding
/// is cleared" (`BindArena`): a C macro Swift cannot import.
// swift-format-ignore: AlwaysUseLowerCamelCase
let SQLITE_STATIC: sqlite3_destructor_type? = nil

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
            #if TEST_HOOKS
                if let injected = commitFailure?() { throw injected }  // a COMMIT that fails
            #endif
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

    /// Rows changed by every INSERT, UPDATE and DELETE since the connection opened.
    public var totalChanges: Int { Int(sqlite3_total_changes64(handle)) }

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

    /// Copies every frame of the WAL into the main file (a passive
    /// checkpoint: it waits for no reader). Returns the frames in the WAL
    /// and those now in the main file; equal when no reader of an older
    /// snapshot held some back.
    public func checkpoint() throws(SQLiteError) -> (frames: Int32, checkpointed: Int32) {
        var frames: Int32 = 0
        var checkpointed: Int32 = 0
        let rc = sqlite3_wal_checkpoint_v2(handle, nil, SQLITE_CHECKPOINT_PASSIVE, &frames, &checkpointed)
        guard rc == SQLITE_OK else { throw SQLiteError(code: rc, message: lastMessage, context: "checkpointing \(path)") }
        return (frames, checkpointed)
    }

    /// The WAL's automatic checkpoint: after a commit that leaves at least
    /// `pages` frames in it; 0 turns it off, so that nothing but an explicit
    /// `checkpoint()` (or a close) writes the main file.
    public func setAutoCheckpoint(pages: Int32) throws(SQLiteError) {
        let rc = sqlite3_wal_autocheckpoint(handle, pages)
        guard rc == SQLITE_OK else { throw SQLiteError(code: rc, message: lastMessage, context: "wal_autocheckpoint") }
    }

    /// Whether closing the last connection checkpoints the WAL into the main
    /// file (SQLite's default) or leaves it for the next open to read.
    public func setCheckpointOnClose(_ on: Bool) {
        _ = csqlite_set_checkpoint_on_close(handle, on ? 1 : 0)
    }

    #if TEST_HOOKS
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
    #endif
}
