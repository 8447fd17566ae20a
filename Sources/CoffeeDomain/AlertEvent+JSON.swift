import Foundation

extension AlertEvent {
    /// The alert as the webhook's body, the `alert` message (docs/protocol.md
    /// §16) and the outbox keep it: `id` is its idempotency key.
    public func json(id: String) -> JSONValue {
        .object([
            ("id", .string(id)), ("rule", .string(rule.rawValue)), ("event", .string(fired ? "fired" : "cleared")),
            ("at", .string(RFC3339.string(at))), ("title", .string(title)), ("message", .string(message)),
            ("mgCaffeine", .double((mgCaffeine * 10).rounded() / 10)), ("mgToday", .double((mgToday * 10).rounded() / 10)),
            ("limitMg", .double(limitMg)), ("key", .string(key)), ("anchor", .int(anchor)),
        ])
    }
}
