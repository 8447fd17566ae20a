import CoffeeDomain
import Foundation
import HealthStore

/// `GET /api/v1/export.csv` (docs/protocol.md §15): every live drink.
extension QueryHandler {
    /// Read a year at a time (a range of the index by date), so that a
    /// large store is never held as drinks all at once; the text is (an
    /// `HTTPResponse` streams only events), about 80 bytes a drink.
    func exportCSV() async throws -> String {
        let calendar = HistoryCalendar(timeZone: settings.person.timeZone)
        var csv = DrinkCSV.header
        // From 1970 (or an earlier limits.earliestDate): a limit raised since leaves older drinks stored.
        var start = min(validator.limits.earliestDate, Date(timeIntervalSince1970: 0))
        let end = clock.now() + validator.limits.maxFutureSkew + 1
        while start < end {
            let stop = min(end, start + 366 * 86_400)
            for drink in try await store.drinks(datedIn: start...stop) where drink.date < stop {
                csv += DrinkCSV.row(drink, in: calendar)
            }
            start = stop
        }
        return csv
    }
}
