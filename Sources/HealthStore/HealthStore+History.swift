import CoffeeDomain
import Foundation

/// History: the drinks by date, in the store (docs/protocol.md §15).
extension HealthStore {
    /// The date and mg of the live drinks dated in `range`, oldest first:
    /// what history's sums and curve are computed from
    /// (`HistoryCurve.measure`), read from the index of live drinks by date
    /// (`live_by_date` covers both), on SQLite and PostgreSQL alike; on
    /// SQLite with the drinks not in it yet, by anchor (`DateIndexDeferral`).
    public func doses(datedIn range: ClosedRange<Date>) throws -> [HistoryCurve.Dose] {
        guard isOpen else { throw StoreError.closed }
        return try reading {
            try statements.doses(
                from: Int64((range.lowerBound.timeIntervalSince1970 * 1000).rounded(.down)),
                to: Int64((range.upperBound.timeIntervalSince1970 * 1000).rounded(.up))
            ).map { HistoryCurve.Dose(date: Date(timeIntervalSince1970: Double($0.dateMs) / 1000), mg: $0.mg) }
        }
    }
}
