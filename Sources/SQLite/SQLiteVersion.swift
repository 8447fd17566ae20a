import CSQLite

/// The SQLite library this process runs on.
public enum SQLiteVersion {
    public static var text: String { String(cString: sqlite3_libversion()) }
}
