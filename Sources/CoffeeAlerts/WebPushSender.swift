import CoffeeDomain
import Foundation
import Synchronization

/// What a push of an alert is (docs/protocol.md §17): the alert's JSON
/// encrypted for the subscription (RFC 8291), POSTed to its endpoint with
/// `TTL`, `Urgency` and the service's VAPID token for the endpoint's origin
/// (RFC 8292), which expires in 12 hours.
public struct WebPushSender: Sendable {
    public let key: WebPush.Key
    /// The token's `sub`: who a push service tells of a problem.
    public let subject: String
    /// How long a push service may keep an alert for a phone that is away (`TTL`, seconds).
    public let timeToLive: Int
    /// The subscriptions the store keeps now, by id.
    let subscriptions: @Sendable () -> [String: PushSubscription]

    public init(
        key: WebPush.Key, subject: String, timeToLive: Int = 86_400,
        subscriptions: @escaping @Sendable () -> [String: PushSubscription]
    ) {
        self.key = key
        self.subject = subject
        self.timeToLive = timeToLive
        self.subscriptions = subscriptions
    }

    /// The token's lifetime: RFC 8292 allows at most 24 hours.
    static let tokenLifetime: TimeInterval = 12 * 3600
    /// A token is signed once for each push service and used this long
    /// (a thousand phones on one push service: one signature).
    static let tokenReuse: TimeInterval = 3600
    private let tokens = Tokens()
    private final class Tokens: Sendable {
        let byAudience = Mutex<[String: (token: String, signed: Date)]>([:])
    }

    /// The token for `audience`, signed again when the held one is an hour old.
    func token(audience: String, now: Date) throws -> String {
        if let held = tokens.byAudience.withLock({ $0[audience] }), now.timeIntervalSince(held.signed) < Self.tokenReuse,
            now >= held.signed
        {
            return held.token
        }
        let token = try key.token(audience: audience, expires: now + Self.tokenLifetime, subject: subject)
        tokens.byAudience.withLock { $0[audience] = (token, now) }
        return token
    }

    func request(_ item: OutboxItem, now: Date) throws -> AlertReceiver.Request? {
        let id = String(item.receiver.dropFirst(PushSubscription.receiverPrefix.count))
        guard let subscription = subscriptions()[id] else { return nil }
        let alert = try? JSONReader.parse(Data(item.body.utf8))
        // Crossing a limit is worth waking the phone for; the rest can wait for its next wake.
        let urgent: Bool =
            if case .string("fired")? = alert?[member: "event"], case .string(let rule)? = alert?[member: "rule"] {
                rule == "dailyLimit" || rule == "levelOver"
            } else { false }
        let token = try token(audience: subscription.origin, now: now)
        return AlertReceiver.Request(
            url: subscription.endpoint,
            headers: [
                ("Content-Type", "application/octet-stream"), ("Content-Encoding", "aes128gcm"),
                ("TTL", "\(timeToLive)"), ("Urgency", urgent ? "high" : "normal"),
                ("Authorization", "vapid t=\(token), k=\(key.publicKeyText)"),
            ],
            body: try WebPush.encrypt(Array(item.body.utf8), for: subscription))
    }
}
