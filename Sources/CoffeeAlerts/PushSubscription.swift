import CoffeeDomain
import Foundation
import Synchronization

/// A browser's Web Push subscription (docs/protocol.md §17): where its push
/// service takes messages for it, and the keys a message is encrypted to.
/// Kept in the store's settings (scope `push`, one row a subscription, its
/// id the name), so it is in the feed and on a standby like the rest of
/// what the person set; each one is a receiver of the outbox (`push:ID`).
public struct PushSubscription: Sendable, Hashable {
    public var endpoint: String
    /// The browser's P-256 public key, uncompressed (65 bytes).
    public var p256dh: [UInt8]
    /// The browser's authentication secret (16 bytes).
    public var auth: [UInt8]
    /// When it was registered (RFC 3339).
    public var created: String

    /// The settings' scope the subscriptions are kept under.
    public static let scope = "push"
    /// How its receiver's name in the outbox begins.
    public static let receiverPrefix = "push:"

    /// Its id: the first 128 bits of the SHA-256 of its endpoint, in hex, so
    /// that registering the same endpoint again replaces it.
    public var id: String { Self.id(endpoint: endpoint) }

    public static func id(endpoint: String) -> String {
        String(WebPush.sha256(Array(endpoint.utf8)).lowercaseHex.prefix(32))
    }

    public var receiver: String { Self.receiverPrefix + id }

    /// The origin of the endpoint (`https://push.example.net`): the VAPID token's audience.
    public var origin: String {
        guard let url = URL(string: endpoint), let scheme = url.scheme, let host = url.host else { return endpoint }
        let port = url.port.map { ":\($0)" } ?? ""
        return "\(scheme)://\(host)\(port)"
    }

    public init(endpoint: String, p256dh: [UInt8], auth: [UInt8], created: String) {
        self.endpoint = endpoint
        self.p256dh = p256dh
        self.auth = auth
        self.created = created
    }

    /// A body as `PushSubscription.toJSON()` writes it (`{"endpoint", "keys": {"p256dh", "auth"}}`),
    /// checked; `expirationTime` is ignored.
    public init(registering body: JSONValue, now: Date) throws(ValidationError) {
        guard case .string(let endpoint)? = body[member: "endpoint"] else {
            throw ValidationError(field: "endpoint", rule: "must be the push service's URL, a string")
        }
        guard endpoint.utf8.count <= 2048, let url = URL(string: endpoint), ["https", "http"].contains(url.scheme ?? ""),
            url.host?.isEmpty == false
        else { throw ValidationError(field: "endpoint", rule: "must be an https:// URL of at most 2048 bytes") }
        guard case .string(let key)? = body[member: "keys"]?[member: "p256dh"], let p256dh = Base64URL.decode(key),
            p256dh.count == 65, WebPush.isPublicKey(p256dh)
        else { throw ValidationError(field: "keys.p256dh", rule: "must be a P-256 public key, base64url (65 bytes)") }
        guard case .string(let secret)? = body[member: "keys"]?[member: "auth"], let auth = Base64URL.decode(secret),
            auth.count == 16
        else { throw ValidationError(field: "keys.auth", rule: "must be the 16-byte secret, base64url") }
        self.init(endpoint: endpoint, p256dh: p256dh, auth: auth, created: RFC3339.string(now))
    }

    /// As the store keeps it (the settings row's JSON value).
    public var stored: String {
        JSONValue.object([
            ("endpoint", .string(endpoint)), ("p256dh", .string(Base64URL.encode(p256dh))),
            ("auth", .string(Base64URL.encode(auth))), ("created", .string(created)),
        ]).serialized()
    }

    /// A stored row read back; nil for a removed one (`null`) or one this build cannot read.
    public init?(stored text: String) {
        guard let value = try? JSONReader.parse(Data(text.utf8)), case .string(let endpoint)? = value[member: "endpoint"],
            case .string(let key)? = value[member: "p256dh"], let p256dh = Base64URL.decode(key),
            case .string(let secret)? = value[member: "auth"], let auth = Base64URL.decode(secret)
        else { return nil }
        let created = if case .string(let c)? = value[member: "created"] { c } else { "" }
        self.init(endpoint: endpoint, p256dh: p256dh, auth: auth, created: created)
    }

    /// What an admin's list shows: no keys.
    public var listed: JSONValue {
        .object([("id", .string(id)), ("endpoint", .string(endpoint)), ("created", .string(created))])
    }

    /// The subscriptions the store keeps now, by id.
    public static func all(in settings: LiveSettings) -> [String: PushSubscription] {
        var all: [String: PushSubscription] = [:]
        for (id, text) in settings.current.stored[scope] ?? [:] {
            if let subscription = PushSubscription(stored: text) { all[id] = subscription }
        }
        return all
    }
}

/// The subscriptions the store keeps, read once for each change of the
/// settings (their anchor), not for every push: a thousand phones told of
/// one alert read the rows once.
public final class PushSubscriptionBook: Sendable {
    let settings: LiveSettings
    private let read = Mutex<(anchor: Int64, all: [String: PushSubscription])>((-1, [:]))

    public init(settings: LiveSettings) { self.settings = settings }

    /// Every subscription now, by id.
    public var all: [String: PushSubscription] {
        let anchor = settings.current.anchor
        if let held = read.withLock({ $0.anchor == anchor ? $0.all : nil }) { return held }
        let all = PushSubscription.all(in: settings)
        read.withLock { $0 = (anchor, all) }
        return all
    }
}
