import CoffeeDomain
import Foundation

/// What a person took in over a stretch of time (docs/protocol.md §15).
public struct Intake: Sendable, Hashable {
    /// The mg of the live drinks dated in it.
    public var mg: Double
    /// How many they are.
    public var drinks: Int

    public init(mg: Double, drinks: Int) {
        self.mg = mg
        self.drinks = drinks
    }
}

/// History: sums over date ranges, in the store.
extension HealthStore {
    /// Per range, the mg and number of live drinks dated from its start up
    /// to (not including) its end: a range of the index of live drinks by
    /// date (`live_by_date`) each, on SQLite and PostgreSQL alike
    /// (`Statements.intake(ranges:)`).
    /// The date and mg of the live drinks dated in `range`, oldest first:
    /// history's curve, read from the index alone.
    public func doses(datedIn range: ClosedRange<Date>) throws -> [HistoryCurve.Dose] {
        guard isOpen else { throw StoreError.closed }
        return try reading {
            try statements.doses(
                from: Int64((range.lowerBound.timeIntervalSince1970 * 1000).rounded(.down)),
                to: Int64((range.upperBound.timeIntervalSince1970 * 1000).rounded(.up))
            ).map { HistoryCurve.Dose(date: Date(timeIntervalSince1970: Double($0.dateMs) / 1000), mg: $0.mg) }
        }
    }

    public func intake(in ranges: [DateInterval]) throws -> [Intake] {
        guard isOpen else { throw StoreError.closed }
        let bounds = ranges.map { range in
            (
                from: Int64((range.start.timeIntervalSince1970 * 1000).rounded(.up)),
                to: Int64((range.end.timeIntervalSince1970 * 1000).rounded(.up))
            )
        }
        return try reading { try statements.intake(ranges: bounds).map { Intake(mg: $0.mg, drinks: $0.count) } }
    }
}
