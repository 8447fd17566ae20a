import CoffeeDomain
import Foundation
import HealthStore

/// `GET /api/v1/export.csv` (docs/protocol.md §15): every live drink.
extension QueryHandler {
    /// Drinks read from the store at once: a page, a read of its own.
    static let exportPage = 2_000

    /// Every live drink as CSV, a body sent as it is made: the first page
    /// read now, so that a store that cannot be read is answered with its
    /// error (§12) rather than a body cut short.
    func exportCSV() async throws -> HTTPBodyStream {
        let first = try await store.drinks(after: nil, limit: Self.exportPage)
        return HTTPBodyStream { write in try await self.exportCSV(from: first, write) }
    }

    /// Writes every live drink as CSV through `write`, a page at a time as
    /// it is read (`HealthStore.drinks(after:limit:)`), so that neither the
    /// store nor the body is ever held whole: the next page is read only
    /// once the client has taken most of the one before. Stops when `write`
    /// says the client is gone.
    func exportCSV(from first: (drinks: [Drink], next: DrinkCursor?), _ write: HTTPBodyStream.Writer) async throws {
        var times = HistoryCalendar.LocalTimes(HistoryCalendar(timeZone: settings.person.timeZone))
        var out = Array(DrinkCSV.header.utf8)
        out.reserveCapacity(Self.exportPage * 100)
        var page = first
        while true {
            for drink in page.drinks { DrinkCSV.write(drink, times: &times, into: &out) }
            guard await write(out), let cursor = page.next else { return }
            out.removeAll(keepingCapacity: true)
            page = try await store.drinks(after: cursor, limit: Self.exportPage)
        }
    }
}
