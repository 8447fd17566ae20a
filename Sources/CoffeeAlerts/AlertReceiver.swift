import CoffeeDomain
import Foundation
import HealthStore

/// Where alerts go (docs/protocol.md §16), and what each is sent as.
public enum AlertReceiver: Sendable {
    /// A JSON POST of the alert, with its idempotency key and an HMAC-SHA256
    /// signature of the body under the shared secret (as GitHub signs its webhooks).
    case webhook(url: String, secret: [UInt8])
    /// A POST to an ntfy topic: the message as the body, ntfy's `Title`,
    /// `Priority` and `Tags` headers, and a bearer token when one is given.
    case ntfy(url: String, token: String?)
    /// Every Web Push subscription the store keeps (docs/protocol.md §17),
    /// each a receiver of its own in the outbox (`push:ID`): the alert
    /// encrypted for it and sent to its push service with a VAPID token.
    case push(WebPushSender)

    /// One POST of an alert: where, with which header fields, what.
    public struct Request: Sendable {
        public var url: String
        public var headers: [(String, String)]
        public var body: [UInt8]
    }

    /// Its name in the outbox, the metrics and `stats`.
    public var name: String {
        switch self {
        case .webhook: "webhook"
        case .ntfy: "ntfy"
        case .push: "push"
        }
    }

    /// Where it POSTs, for the logs.
    public var url: String {
        switch self {
        case .webhook(let url, _), .ntfy(let url, _): url
        case .push: "each subscription's push service"
        }
    }

    public var isPush: Bool {
        if case .push = self { true } else { false }
    }

    /// Whether an outbox row's receiver is one of this one's.
    public func owns(_ receiver: String) -> Bool {
        switch self {
        case .webhook, .ntfy: receiver == name
        case .push: receiver.hasPrefix(PushSubscription.receiverPrefix)
        }
    }

    /// The POST of the outbox's `item`; nil when its receiver is gone (a
    /// subscription removed since the alert was decided).
    public func delivery(_ item: OutboxItem, now: Date) throws -> Request? {
        switch self {
        case .webhook(let url, _), .ntfy(let url, _):
            let (headers, body) = request(item)
            return Request(url: url, headers: headers, body: body)
        case .push(let sender):
            return try sender.request(item, now: now)
        }
    }

    /// The header that carries the webhook's signature: `sha256=` and the hex HMAC.
    public static let signatureHeader = "X-Coffee-Tracker-Signature"

    /// The request for the outbox's `item` (its body is the alert's JSON, its id the alert's).
    func request(_ item: OutboxItem) -> (headers: [(String, String)], body: [UInt8]) {
        let bytes = Array(item.body.utf8)
        switch self {
        case .push: preconditionFailure("a push's request is made per subscription by delivery(_:now:)")
        case .webhook(_, let secret):
            return (
                [
                    ("Content-Type", "application/json"), ("Idempotency-Key", item.id),
                    (Self.signatureHeader, "sha256=" + HTTPPoster.hmacSHA256(key: secret, bytes)),
                ], bytes
            )
        case .ntfy(_, let token):
            let alert = try? JSONReader.parse(Data(bytes))
            func text(_ name: String) -> String {
                if case .string(let s)? = alert?[member: name] { return s }
                return ""
            }
            let fired = text("event") == "fired"
            let (priority, tags): (String, String) =
                switch text("rule") {
                case "dailyLimit", "levelOver": fired ? ("4", "warning,coffee") : ("2", "white_check_mark,coffee")
                case "sleepThreshold": fired ? ("3", "zzz") : ("2", "coffee")
                default: fired ? ("3", "alarm_clock,coffee") : ("2", "white_check_mark")
                }
            var headers = [("Title", Self.headerSafe(text("title"))), ("Priority", priority), ("Tags", tags)]
            if let token { headers.append(("Authorization", "Bearer " + token)) }
            return (headers, Array(text("message").utf8))
        }
    }

    /// A header value without control characters (a line break would end the header).
    static func headerSafe(_ text: String) -> String {
        String(text.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }.map(Character.init))
    }
}
