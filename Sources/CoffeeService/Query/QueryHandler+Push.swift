import CoffeeAlerts
import CoffeeDomain
import Foundation

/// Web Push's operations (docs/protocol.md §17): the key a page subscribes
/// with, and the subscriptions, kept in the store's settings (scope `push`).
extension QueryHandler {
    private func key() throws(QueryError) -> WebPush.Key {
        guard let pushKey else { throw QueryError(.unavailable, "this service has no push key") }
        return pushKey
    }

    /// `pushKey`: the public key, base64url, as `PushManager.subscribe` takes it.
    func pushKeyReply() throws -> JSONValue {
        .object([("ok", true), ("publicKey", .string(try key().publicKeyText))])
    }

    /// `pushSubscribe`: a browser's subscription (`PushSubscription.toJSON()`), checked, then kept.
    func pushSubscribe(_ request: JSONValue) async throws -> JSONValue {
        _ = try key()
        let subscription: PushSubscription
        do throws(ValidationError) {
            subscription = try PushSubscription(registering: request[member: "subscription"] ?? .null, now: clock.now())
        } catch {
            let field = error.field.map { "subscription." + $0 } ?? "subscription"
            throw QueryError(.badRequest, "\(field): \(error.rule)", field: field)
        }
        let after = try await store.writeSettings(
            scope: PushSubscription.scope, [(subscription.id, subscription.stored)])
        return .object([("ok", true), ("id", .string(subscription.id)), ("anchor", .int(after.anchor))])
    }

    /// `pushUnsubscribe`: the subscription `id` removed; one that is not there is `unknown`.
    func pushUnsubscribe(_ request: JSONValue) async throws -> JSONValue {
        guard case .string(let id)? = request[member: "id"], !id.isEmpty else {
            throw QueryError(.badRequest, "id must be the subscription's id, a string", field: "id")
        }
        guard PushSubscription.all(in: settings)[id] != nil else {
            return .object([("ok", true), ("removed", 0), ("anchor", .int(await store.anchor))])
        }
        let after = try await store.writeSettings(scope: PushSubscription.scope, [(id, "null")])
        return .object([("ok", true), ("removed", 1), ("anchor", .int(after.anchor))])
    }

    /// `pushSubscriptions`: every subscription kept, without its keys, oldest first.
    func pushSubscriptionsReply() throws -> JSONValue {
        let all = PushSubscription.all(in: settings).values.sorted { ($0.created, $0.id) < ($1.created, $1.id) }
        return .object([
            ("ok", true), ("publicKey", .string(try key().publicKeyText)), ("subscriptions", .array(all.map(\.listed))),
        ])
    }
}
