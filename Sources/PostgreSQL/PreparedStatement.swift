/// A statement prepared on its connection's session at first use (and again
/// after a reconnection), with SQLite's shape: bind with 1-based indexes,
/// `step` through the rows, read columns 0-based.
public final class PreparedStatement {
    unowned let connection: Connection
    public let sql: String
    private let name: String
    private var preparedIn = -1
    private var parameters: [String?]
    private var result: ResultSet?
    private var row = -1

    init(_ connection: Connection, sql: String, parameters: Int) {
        self.connection = connection
        self.sql = sql
        self.name = connection.nextStatementName()
        self.parameters = Array(repeating: nil, count: parameters)
    }

    public func bind(_ index: Int32, _ value: Int64) { set(index, String(value)) }
    /// Doubles as Swift writes them: the shortest text that reads back exactly.
    public func bind(_ index: Int32, _ value: Double) { set(index, "\(value)") }
    public func bind(_ index: Int32, _ value: String?) { set(index, value) }
    public func bindNull(_ index: Int32) { set(index, nil) }

    private func set(_ index: Int32, _ value: String?) {
        let i = Int(index) - 1
        if i >= parameters.count { parameters += Array(repeating: nil, count: i + 1 - parameters.count) }
        parameters[i] = value
    }

    /// Runs the statement at the first call, then advances through its rows;
    /// true while there is a row to read.
    public func step() throws(PostgreSQLError) -> Bool {
        if result == nil {
            try execute()
            row = 0
        } else {
            row += 1
        }
        return row < result!.rows
    }

    /// Runs a statement that returns no rows (or whose rows are not read), then resets it.
    public func run() throws(PostgreSQLError) {
        defer { reset() }
        try execute()
    }

    private func execute() throws(PostgreSQLError) {
        if preparedIn != connection.session {
            try connection.prepare(name: name, sql: sql)
            preparedIn = connection.session
        }
        result = try connection.executePrepared(name: name, parameters: parameters, sql: sql)
    }

    /// Ready for the next use, its parameters cleared.
    public func reset() {
        result = nil
        row = -1
        for i in parameters.indices { parameters[i] = nil }
    }

    public func isNull(_ column: Int32) -> Bool { result!.isNull(row, Int(column)) }
    public func int64(_ column: Int32) -> Int64 { result!.int64(row, Int(column)) }
    public func double(_ column: Int32) -> Double { result!.double(row, Int(column)) }
    public func string(_ column: Int32) -> String? { result!.string(row, Int(column)) }
    public func withText<T>(_ column: Int32, _ body: (UnsafeRawBufferPointer) -> T) -> T {
        result!.withText(row, Int(column), body)
    }
}

extension Connection {
    /// A statement with `$1`… parameters, prepared on the session at its first use.
    public func prepare(_ sql: String, parameters: Int = 0) -> PreparedStatement {
        PreparedStatement(self, sql: sql, parameters: parameters)
    }
}
