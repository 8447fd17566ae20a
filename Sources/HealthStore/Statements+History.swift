import CoffeeDomain
import Foundation

/// History's reads (docs/protocol.md §15): the sums per day and the doses
/// of the curve, both from the index of live drinks by date (`live_by_date`,
/// which holds the date and the mg), never the table.
extension Statements {
    /// Per range, the mg and the number of live drinks dated from its
    /// start up to (not including) its end: a range of `live_by_date` each.
    /// SQLite runs one statement per range, in process; PostgreSQL takes
    /// all the ranges in one statement (their bounds as two arrays, a
    /// `LATERAL` sum per range), so that ten years by day are one round
    /// trip, not 3,653.
    func intake(ranges: [(from: Int64, to: Int64)]) throws -> [(mg: Double, count: Int)] {
        let p = dialect.p
        guard dialect == .postgresql else {
            let s = try cached(
                """
                SELECT coalesce(sum(mg), 0), count(*) FROM records
                WHERE deleted = 0 AND date_ms >= \(p(1)) AND date_ms < \(p(2))
                """)
            return try ranges.map { range in
                try s.bind(1, range.from)
                try s.bind(2, range.to)
                defer { s.reset() }
                guard try s.step() else { return (0, 0) }
                return (s.double(0), Int(s.int64(1)))
            }
        }
        guard !ranges.isEmpty else { return [] }
        let s = try cached(
            """
            SELECT day.mg, day.n FROM unnest(\(p(1))::bigint[], \(p(2))::bigint[]) WITH ORDINALITY AS b(lo, hi, i)
            CROSS JOIN LATERAL (
                SELECT coalesce(sum(mg), 0) AS mg, count(*) AS n FROM records
                WHERE deleted = 0 AND date_ms >= b.lo AND date_ms < b.hi
            ) AS day ORDER BY b.i
            """)
        func literal(_ bound: KeyPath<(from: Int64, to: Int64), Int64>) -> String {
            var out: [UInt8] = [UInt8(ascii: "{")]
            out.reserveCapacity(ranges.count * 14 + 2)
            for (index, range) in ranges.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                JSONBytes.append(range[keyPath: bound], to: &out)
            }
            out.append(UInt8(ascii: "}"))
            return String(decoding: out, as: UTF8.self)
        }
        try s.bind(1, literal(\.from))
        try s.bind(2, literal(\.to))
        defer { s.reset() }
        var sums: [(mg: Double, count: Int)] = []
        sums.reserveCapacity(ranges.count)
        while try s.step() { sums.append((s.double(0), Int(s.int64(1)))) }
        return sums
    }

    /// The date and mg of the live drinks dated from `from` to `to`, both
    /// included, in date order: what history's curve needs, read from the
    /// index (`live_by_date` holds both) without the table.
    func doses(from: Int64, to: Int64) throws -> [(dateMs: Int64, mg: Double)] {
        let p = dialect.p
        let s = try cached(
            """
            SELECT date_ms, mg FROM records
            WHERE deleted = 0 AND date_ms >= \(p(1)) AND date_ms <= \(p(2)) ORDER BY date_ms
            """)
        try s.bind(1, from)
        try s.bind(2, to)
        defer { s.reset() }
        var doses: [(dateMs: Int64, mg: Double)] = []
        while try s.step() { doses.append((s.int64(0), s.double(1))) }
        return doses
    }
}
