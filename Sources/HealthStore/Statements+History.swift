import CoffeeDomain
import Foundation

/// History's read (docs/protocol.md §15): the doses its sums and its curve
/// are computed from, from the index of live drinks by date (`live_by_date`,
/// which holds the date and the mg), never the table but for the few rows
/// a small commit left out of the index (`SQLDialect.liveByDate`).
extension Statements {
    /// The date and mg of the live drinks dated from `from` to `to`, both
    /// included, in date order: what history's curve needs, read from the
    /// index without the table (SQLite's holds `deleted` and `indexed` too,
    /// which the query names: without them, SQLite 3.40 read each drink's row).
    func doses(from: Int64, to: Int64) throws -> [(dateMs: Int64, mg: Double)] {
        let p = dialect.p
        return try liveByDate(
            "date_ms, mg", where: "date_ms >= \(p(1)) AND date_ms <= \(p(2))", order: "date_ms",
            bind: {
                try $0.bind(1, from)
                try $0.bind(2, to)
            }, read: { ($0.int64(0), $0.double(1)) }, before: { $0.dateMs < $1.dateMs })
    }
}
