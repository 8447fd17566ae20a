import CoffeeDomain
import Foundation
import HealthStore

extension QueryHandler {
    /// `POST /api/v1/drinks` (docs/protocol.md §12): `add` of a body that is
    /// one drink or an array of drinks, read in place as the bus reads its
    /// messages (no JSON tree), a missing `uuid` made; answered after the
    /// durable commit, with `add`'s reply.
    public func add(body: [UInt8], caller: Caller) async -> Outcome {
        await outcome { try await addBody(body, caller: caller) }
    }

    private func addBody(_ body: [UInt8], caller: Caller) async throws -> JSONValue {
        if let following {
            throw QueryError(.readOnly, "this service is a standby of \(following.primary): send drinks to the primary")
        }
        let now = clock.now()
        let drinks: [Drink]
        do throws(ValidationError) {
            drinks = try body.withUnsafeBytes { bytes in
                Result { () throws(ValidationError) in
                    try BatchDecoder.read(DrinkInput.self, json: bytes) { input throws(ValidationError) in
                        var input = input
                        if case .absent = input.uuid, input.parsedUUID == nil { input.parsedUUID = UUID() }
                        return try validator.drink(from: input, now: now, defaultSource: caller.source)
                    }
                }
            }.get()
        } catch {
            // A body that is not drinks at all is the request's fault; a drink that breaks a rule is named.
            if error.field == nil && error.index == nil { throw QueryError(.badRequest, error.description) }
            throw QueryError(.invalidDrink, error.description, index: error.index, field: error.field)
        }
        counters.received(drinks.count, over: caller.channel)
        return try await stored(drinks)
    }
}
