import CoffeeDomain
import CoffeeModel
import Foundation

/// `model` (docs/protocol.md §4): the model now or at a time, from the
/// model's owner when the drinks it holds cover it, else from the store.
extension QueryHandler {
    func modelReply(_ request: QueryRequest) async throws -> JSONValue {
        let at = try Self.date(request.at, field: "at")
        let snapshot: ModelSnapshot
        if let held = await model.snapshot(at: at) {  // after every commit made before this request
            snapshot = held
        } else {
            // A time the held drinks do not cover: ask the store.
            let at = at ?? clock.now()
            let drinks = try await store.drinks(datedIn: (at - CaffeineModel.retention)...at)
            snapshot = caffeine.snapshot(of: drinks, at: at, anchor: await store.anchor)
        }
        return .object([("ok", true)] + WireFormat.members(snapshot))
    }
}
