/// A failure reported by libpq or the server, with what was being done.
public struct PostgreSQLError: Error, CustomStringConvertible, Sendable {
    /// The server's or libpq's message, without its trailing newline.
    public var message: String
    /// The five-character SQLSTATE of a server error; nil when there was no
    /// server to answer (a connection that failed or was lost).
    public var sqlState: String?
    public var context: String

    public init(message: String, sqlState: String? = nil, context: String) {
        self.message = message
        self.sqlState = sqlState
        self.context = context
    }

    /// The database cannot be reached: no connection, a connection lost, a
    /// server shutting down or starting up, or out of resources. A state the
    /// store is in until a reconnection succeeds, not a fault of the request.
    public var isUnavailable: Bool {
        guard let sqlState else { return true }
        // 08: connection exception; 57P01-57P03: admin/crash shutdown, cannot
        // connect now; 53: insufficient resources (disk full among them);
        // 58: system error (I/O); 25006: read-only transaction (a standby).
        return sqlState.hasPrefix("08") || sqlState.hasPrefix("53") || sqlState.hasPrefix("58")
            || ["57P01", "57P02", "57P03", "25006"].contains(sqlState)
    }

    /// A unique index refused a row.
    public var isUniqueViolation: Bool { sqlState == "23505" }

    public var description: String {
        "\(context): \(message)" + (sqlState.map { " (SQLSTATE \($0))" } ?? "")
    }
}
