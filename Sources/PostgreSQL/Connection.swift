import CPostgreSQL
import Foundation

/// One libpq connection. Not thread-safe: one owner at a time (the store's
/// thread, or the listener's).
///
/// Prepared statements belong to a session: after `reconnect()` they are
/// prepared again at their next use (`PreparedStatement` compares `session`).
public final class Connection {
    let handle: OpaquePointer
    public let conninfo: String
    /// Goes up at every new session, so that statements know to prepare again.
    public private(set) var session = 0
    /// Rows that the last command run through this connection inserted,
    /// updated or deleted.
    public internal(set) var changes = 0
    private var statementNames = 0

    /// How long, in seconds, an attempt to connect waits for the server when
    /// `conninfo` names no `connect_timeout`. libpq's own default is to wait
    /// as long as the kernel does (minutes, for a host that drops packets),
    /// and the store's thread, or a service waiting for its database at
    /// start, would wait with it, deaf to a stop.
    public static let defaultConnectTimeout = 10

    /// Connects with libpq's keyword/value or URI `conninfo`, with
    /// `connect_timeout` set to `connectTimeout` unless `conninfo` sets it.
    ///
    /// - Throws: `PostgreSQLError` (unavailable) when the server cannot be
    ///   reached, refuses the connection or does not answer in time;
    ///   libpq's message says why.
    public init(conninfo: String, connectTimeout: Int = Connection.defaultConnectTimeout) throws(PostgreSQLError) {
        // Settings before the expanded `dbname` (all of `conninfo`) give way
        // to what it names itself (libpq reads the arrays in order).
        let connected = Self.withCStrings(["connect_timeout", "dbname", nil]) { keywords in
            Self.withCStrings([String(connectTimeout), conninfo, nil]) { values in
                PQconnectdbParams(keywords, values, 1)
            }
        }
        guard let handle = connected else {
            throw PostgreSQLError(message: "out of memory", context: "connecting")
        }
        self.handle = handle
        self.conninfo = conninfo
        guard PQstatus(handle) == CONNECTION_OK else {
            // Thrown from a whole instance: its deinit finishes the handle.
            throw PostgreSQLError(message: lastMessage, context: "connecting to PostgreSQL")
        }
    }

    private var isClosed = false

    deinit { close() }

    /// Ends the session now, rather than when the last reference goes.
    /// Using the connection afterwards is a programming error.
    public func close() {
        guard !isClosed else { return }
        isClosed = true
        PQfinish(handle)
    }

    public var isConnected: Bool { PQstatus(handle) == CONNECTION_OK }

    /// Connects again (a new session); true once connected.
    @discardableResult
    public func reconnect() -> Bool {
        PQreset(handle)
        session += 1
        return isConnected
    }

    /// The value the connection uses for a libpq setting (`connect_timeout`,
    /// `host`…), nil when it has none.
    public func setting(_ keyword: String) -> String? {
        guard let options = PQconninfo(handle) else { return nil }
        defer { PQconninfoFree(options) }
        var option = options
        while let name = option.pointee.keyword {
            if String(cString: name) == keyword { return option.pointee.val.map { String(cString: $0) } }
            option += 1
        }
        return nil
    }

    /// The server's version as an integer (150004 for 15.4).
    public var serverVersion: Int { Int(PQserverVersion(handle)) }

    /// Host and port of the session, for log lines.
    public var endpoint: String {
        let host = PQhost(handle).map { String(cString: $0) } ?? "?"
        let port = PQport(handle).map { String(cString: $0) } ?? "?"
        return host.hasPrefix("/") ? "\(host) (port \(port))" : "\(host):\(port)"
    }

    /// Runs one or more statements (the simple query protocol); returns the
    /// last statement's result.
    @discardableResult
    public func execute(_ sql: String) throws(PostgreSQLError) -> ResultSet {
        try check(PQexec(handle, sql), context: sql)
    }

    /// Runs one statement with `$1`… parameters given as text (nil for NULL).
    @discardableResult
    public func query(_ sql: String, _ parameters: [String?] = []) throws(PostgreSQLError) -> ResultSet {
        let result = Self.withCStrings(parameters) { values in
            PQexecParams(handle, sql, Int32(values.count), nil, values, nil, nil, 0)
        }
        return try check(result, context: sql)
    }

    /// The first column of the first row as an integer, if any.
    public func scalar(_ sql: String, _ parameters: [String?] = []) throws(PostgreSQLError) -> Int64? {
        let result = try query(sql, parameters)
        guard result.rows > 0 else { return nil }
        return result.int64(0, 0)
    }

    /// A name no other statement of this connection has.
    func nextStatementName() -> String {
        statementNames += 1
        return "s\(statementNames)"
    }

    func prepare(name: String, sql: String) throws(PostgreSQLError) {
        _ = try check(PQprepare(handle, name, sql, 0, nil), context: sql)
    }

    func executePrepared(name: String, parameters: [String?], sql: String) throws(PostgreSQLError) -> ResultSet {
        let result = Self.withCStrings(parameters) { values in
            PQexecPrepared(handle, name, Int32(values.count), values, nil, nil, 0)
        }
        return try check(result, context: sql)
    }

    /// The socket to poll for notifications; -1 without a connection.
    public var socket: Int32 { PQsocket(handle) }

    /// Reads what the server sent and returns the notifications among it,
    /// channel and payload.
    ///
    /// - Throws: when the connection is lost.
    public func notifications() throws(PostgreSQLError) -> [(channel: String, payload: String)] {
        guard PQconsumeInput(handle) == 1 else {
            throw PostgreSQLError(message: lastMessage, context: "reading notifications")
        }
        var received: [(String, String)] = []
        while let notify = PQnotifies(handle) {
            received.append((String(cString: notify.pointee.relname), String(cString: notify.pointee.extra)))
            PQfreemem(notify)
        }
        return received
    }

    var lastMessage: String {
        String(cString: PQerrorMessage(handle)).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A result that succeeded, or the error it carries (freed either way).
    private func check(_ result: OpaquePointer?, context: String) throws(PostgreSQLError) -> ResultSet {
        guard let result else {
            throw PostgreSQLError(message: lastMessage, context: "running \(context.prefix(80))")
        }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
            let set = ResultSet(result)
            changes = set.affectedRows
            return set
        default:
            let message = String(cString: PQresultErrorMessage(result)).trimmingCharacters(in: .whitespacesAndNewlines)
            let state = cpq_sqlstate(result).map { String(cString: $0) }
            PQclear(result)
            // A lost connection leaves a result with libpq's message and no SQLSTATE.
            throw PostgreSQLError(
                message: message.isEmpty ? lastMessage : message, sqlState: isConnected ? state : nil,
                context: "running \(context.prefix(80))")
        }
    }

    /// Calls `body` with the values as C strings (nil for NULL), valid only
    /// during the call: one buffer for all of them.
    static func withCStrings<R>(_ values: [String?], _ body: ([UnsafePointer<CChar>?]) -> R) -> R {
        var buffer: [CChar] = []
        var offsets: [Int?] = []
        offsets.reserveCapacity(values.count)
        for value in values {
            guard let value else {
                offsets.append(nil)
                continue
            }
            offsets.append(buffer.count)
            buffer.append(contentsOf: value.utf8CString)
        }
        return buffer.withUnsafeBufferPointer { base in
            body(offsets.map { $0.map { UnsafePointer(base.baseAddress! + $0) } })
        }
    }
}

extension Connection {
    /// Runs `body` inside `BEGIN … COMMIT`, rolling back if it throws. A
    /// connection that was lost is connected again first.
    ///
    /// - Throws: what `body` threw; `PostgreSQLError` when the database
    ///   cannot be reached, or when COMMIT did not commit (a transaction
    ///   that failed inside ends in ROLLBACK, which PostgreSQL does not
    ///   report as an error).
    public func transaction<T>(_ body: () throws -> T) throws -> T {
        try transaction(opening: nil, { _ in try body() }, closing: { nil })
    }

    /// `transaction(_:)` with statements sent in the round trips of BEGIN
    /// and COMMIT: `opening` (its result is `body`'s argument) right after
    /// BEGIN, and what `closing` returns (asked after `body`; parameters
    /// written into the text) right before COMMIT.
    public func transaction<T>(
        opening: String?, _ body: (ResultSet?) throws -> T, closing: () -> String?
    ) throws -> T {
        if !isConnected, !reconnect() {
            throw PostgreSQLError(message: lastMessage, context: "connecting again to PostgreSQL")
        }
        let opened = try execute(opening.map { "BEGIN; \($0)" } ?? "BEGIN")
        do {
            let value = try body(opening == nil ? nil : opened)
            let status = try execute(closing().map { "\($0); COMMIT" } ?? "COMMIT").status
            guard status == "COMMIT" else {
                throw PostgreSQLError(message: "COMMIT ended in \(status)", context: "committing")
            }
            return value
        } catch {
            if isConnected { _ = try? execute("ROLLBACK") }
            throw error
        }
    }
}
