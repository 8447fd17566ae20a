import SQLite

/// SQLite's index by date, written by a later commit for a small one
/// (`DateIndexDeferral`, `StoreSchema.deferredDateIndex`).
extension Statements {
    /// Binds a drink's `indexed` at `index`: 0 while the commit defers.
    @_specialize(where Connection == Database)
    func bindIndexed(_ index: Int32, to s: Statement, anchor: Int64) throws {
        try s.bind(index, dateIndex.wrote(at: anchor))
    }

    var deferringDateIndex: Bool {
        get { dateIndex.deferring }
        set { dateIndex.deferring = newValue }
    }

    /// Runs `body` in one SQLite transaction that, once enough rows lie
    /// above `date_indexed`, ends by putting the drinks left out into the
    /// index and moving `date_indexed` to the highest anchor.
    func transactionSettlingDateIndex<T>(_ body: () throws -> T) throws -> T {
        defer { dateIndex.deferring = false }
        if dateIndex.through == nil { dateIndex.opened(through: try meta("date_indexed") ?? 0) }
        let before = db.totalChanges
        var rows = 0
        var movedTo: Int64?
        let value = try db.inTransaction {
            let value = try body()
            rows = db.totalChanges - before
            movedTo = try settleDateIndex(after: rows)
            return value
        }
        dateIndex.committed(rows: rows, movedTo: movedTo)
        return value
    }

    /// The drinks left out put into the index, and `date_indexed` moved to
    /// the highest anchor, if `DateIndexDeferral` says so; the new `date_indexed`.
    private func settleDateIndex(after rows: Int) throws -> Int64? {
        let (settle, anchors) = dateIndex.settles(after: rows)
        guard settle else { return nil }
        if let anchors {
            let s = try cached(
                "UPDATE records SET indexed = 1 WHERE anchor BETWEEN ?1 AND ?2 AND indexed = 0 AND deleted = 0")
            try s.bind(1, anchors.lowerBound)
            try s.bind(2, anchors.upperBound)
            try s.run()
        }
        let top = try cached("SELECT max(anchor) FROM records")  // prepared once: every larger commit asks
        defer { top.reset() }
        let highest = try top.step() && !top.isNull(0) ? top.int64(0) : 0
        guard highest > dateIndex.through ?? 0 else { return nil }
        try setMeta("date_indexed", highest)
        return highest
    }
}

extension Statements {
    /// What `read` makes of each live drink whose date `condition` holds,
    /// in `order` (`before` in Swift), at most `limit` of them: the reads
    /// of `SQLDialect.liveByDate`, each bound by `bind`, merged. Inlined,
    /// so that each caller's rows are its own type, not a generic one that
    /// is copied through its value witnesses, a call per row.
    @inline(__always)
    func liveByDate<Row>(
        _ columns: String, where condition: String, order: String, limit: (parameter: String, count: Int)? = nil,
        bind: (Statement) throws -> Void, read: (Statement) -> Row, before: (Row, Row) -> Bool
    ) throws -> [Row] {
        var rows: [Row] = []
        for sql in dialect.liveByDate(columns, where: condition, order: order, limit: limit?.parameter) {
            let s = try cached(sql)
            defer { s.reset() }
            try bind(s)
            if rows.isEmpty {  // the first read, or after one that found nothing: nothing to merge
                if let limit { rows.reserveCapacity(limit.count) }
                while try s.step() { rows.append(read(s)) }
            } else {
                var left: [Row] = []
                while try s.step() { left.append(read(s)) }
                rows = Self.merged(rows, left, before: before)
            }
        }
        if let limit, rows.count > limit.count { rows.removeLast(rows.count - limit.count) }
        return rows
    }

    /// `a` and `b`, each in order, as one (`a`'s first among equals).
    static func merged<Row>(_ a: [Row], _ b: [Row], before: (Row, Row) -> Bool) -> [Row] {
        guard !b.isEmpty else { return a }
        var out: [Row] = []
        out.reserveCapacity(a.count + b.count)
        var (i, j) = (a.startIndex, b.startIndex)
        while i < a.endIndex && j < b.endIndex {
            if before(b[j], a[i]) {
                out.append(b[j])
                j += 1
            } else {
                out.append(a[i])
                i += 1
            }
        }
        out += a[i...]
        out += b[j...]
        return out
    }
}
