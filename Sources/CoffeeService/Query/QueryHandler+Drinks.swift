import CoffeeDomain
import Foundation
import HealthStore

/// `drinks` (docs/protocol.md §15): a range of the person's drinks, or a page of them.
extension QueryHandler {
    /// `drinks`' longest range (§15).
    static let maxDrinksRange: TimeInterval = 366 * 86_400

    /// `drinks` (§15): the live drinks dated from `from` to `to`, oldest
    /// first; with `limit`, a page of them, over any range.
    func drinks(_ request: QueryRequest) async throws -> JSONValue {
        let to = try Self.date(request.to, field: "to") ?? clock.now()
        let from = try Self.date(request.from, field: "from") ?? to - 24 * 3600
        guard from <= to else { throw QueryError(.badRequest, "from must not be after to", field: "from") }
        guard let limit = try Self.limit(request.limit) else {
            if case .value = request.after { throw QueryError(.badRequest, "after needs a limit", field: "after") }
            guard to.timeIntervalSince(from) <= Self.maxDrinksRange else {
                throw QueryError(
                    .badRequest, "the range from from to to must be at most 366 days (or give a limit)", field: "from")
            }
            let drinks = try await store.drinks(datedIn: from...to)
            return .object([
                ("ok", true), ("from", .string(RFC3339.string(from))), ("to", .string(RFC3339.string(to))),
                ("drinks", .array(drinks.map { WireFormat.json($0) })),
            ])
        }
        // A page: from `from` (after the drink `after` of that date), at most `limit`, and whether more follow.
        let fromMs = Int64((from.timeIntervalSince1970 * 1000).rounded(.down))
        let cursor: DrinkCursor
        switch request.after {
        case .absent: cursor = .before(dateMs: fromMs)
        case .wrongType: throw QueryError(.badRequest, "after must be a UUID", field: "after")
        case .value(let text):
            guard let uuid = UUIDText.parse(text) else { throw QueryError(.badRequest, "after must be a UUID", field: "after") }
            cursor = DrinkCursor(dateMs: Int64((from.timeIntervalSince1970 * 1000).rounded()), uuid: uuid)
        }
        let page = try await store.drinks(after: cursor, limit: limit)
        let drinks = page.drinks.prefix { $0.date <= to }
        return .object([
            ("ok", true), ("from", .string(RFC3339.string(from))), ("to", .string(RFC3339.string(to))),
            ("drinks", .array(drinks.map { WireFormat.json($0) })),
            ("more", .bool(page.next != nil && drinks.count == page.drinks.count)),
        ])
    }
}
