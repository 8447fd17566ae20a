import CPostgreSQL
import Glibc

/// The rows of one result, as text (libpq's text format), freed with it.
public final class ResultSet {
    let handle: OpaquePointer

    init(_ handle: OpaquePointer) { self.handle = handle }
    deinit { PQclear(handle) }

    public var rows: Int { Int(PQntuples(handle)) }

    /// Rows an INSERT, UPDATE or DELETE touched; 0 for anything else.
    public var affectedRows: Int {
        Int(String(cString: PQcmdTuples(handle))) ?? 0
    }

    public func isNull(_ row: Int, _ column: Int) -> Bool { PQgetisnull(handle, Int32(row), Int32(column)) == 1 }

    public func string(_ row: Int, _ column: Int) -> String? {
        guard !isNull(row, column) else { return nil }
        return String(cString: PQgetvalue(handle, Int32(row), Int32(column)))
    }

    /// The value as an integer: parsed from its text without a String.
    public func int64(_ row: Int, _ column: Int) -> Int64 {
        guard !isNull(row, column), let text = PQgetvalue(handle, Int32(row), Int32(column)) else { return 0 }
        return strtoll(text, nil, 10)
    }

    public func double(_ row: Int, _ column: Int) -> Double {
        guard !isNull(row, column), let text = PQgetvalue(handle, Int32(row), Int32(column)) else { return 0 }
        return strtod(text, nil)
    }

    /// `body` with the value's bytes (its text), valid only during the call.
    public func withText<T>(_ row: Int, _ column: Int, _ body: (UnsafeRawBufferPointer) -> T) -> T {
        let length = Int(PQgetlength(handle, Int32(row), Int32(column)))
        return body(UnsafeRawBufferPointer(start: PQgetvalue(handle, Int32(row), Int32(column)), count: length))
    }
}

extension ResultSet {
    /// The command's tag: "COMMIT", "INSERT 0 3", "ROLLBACK"…
    public var status: String { String(cString: PQcmdStatus(handle)) }
}
