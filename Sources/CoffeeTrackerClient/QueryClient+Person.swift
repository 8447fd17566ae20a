import CoffeeDomain
import Foundation

/// The calls of docs/protocol.md §15 (what a person goes by, their history)
/// and the operator's backup, with typed replies.
extension QueryClient {
    /// The person's settings the service goes by.
    public func settings() throws -> PersonSettings {
        let reply = try reply(.object([("op", .string(QueryOperation.settings.rawValue))]))
        return try decoded { try PersonSettings(reading: reply.member("settings")) }
    }

    /// Changes the settings `values` names (the `admin` role); `.null` puts
    /// a name's default back. Returns the settings after the durable commit.
    public func putSettings(_ values: [(name: String, value: JSONValue)]) throws -> PersonSettings {
        let reply = try reply(
            .object([
                ("op", .string(QueryOperation.putSettings.rawValue)),
                ("settings", .object(values.map { ($0.name, $0.value) })),
            ]))
        return try decoded { try PersonSettings(reading: reply.member("settings")) }
    }

    /// Every drink of the catalogue, retired ones too.
    public func catalogue() throws -> Catalogue {
        try decoded { try Catalogue(reply(.object([("op", .string(QueryOperation.catalogue.rawValue))]))) }
    }

    /// Adds or changes the entry `name`: its serving, retired or restored,
    /// or a rename of `renamedFrom`. Returns the catalogue after the commit.
    public func putCatalogue(
        _ name: String, mgCaffeine: Double? = nil, retired: Bool? = nil, renamedFrom: String? = nil
    ) throws -> Catalogue {
        var entry: [(String, JSONValue)] = []
        if let mgCaffeine { entry.append(("mgCaffeine", .double(mgCaffeine))) }
        if let retired { entry.append(("retired", .bool(retired))) }
        if let renamedFrom { entry.append(("renamedFrom", .string(renamedFrom))) }
        return try decoded {
            try Catalogue(
                reply(
                    .object([
                        ("op", .string(QueryOperation.putCatalogue.rawValue)), ("name", .string(name)),
                        ("entry", .object(entry)),
                    ])))
        }
    }

    /// The person's days, weeks or months (`by`: `day`, `week`, `month`)
    /// from `from` to `to`, local dates ("2025-01-31") or RFC 3339 times;
    /// nil: the service's defaults (the last 30 days).
    public func history(from: String? = nil, to: String? = nil, by: String = "day") throws -> History {
        var request: [(String, JSONValue)] = [("op", .string(QueryOperation.history.rawValue)), ("by", .string(by))]
        if let from { request.append(("from", .string(from))) }
        if let to { request.append(("to", .string(to))) }
        return try decoded { try History(reply(.object(request))) }
    }

    /// A consistent copy of the store into the service's backup folder, as `name` (the `write` role).
    public func backup(name: String) throws -> BackupResult {
        try decoded {
            try BackupResult(reply(.object([("op", .string(QueryOperation.backup.rawValue)), ("name", .string(name))])))
        }
    }
}

/// Web Push's calls (docs/protocol.md §17).
extension QueryClient {
    /// The service's Web Push public key, base64url.
    public func pushKey() throws -> String {
        let reply = try reply(.object([("op", .string(QueryOperation.pushKey.rawValue))]))
        return try decoded { try reply.member("publicKey").text() }
    }

    /// Registers a browser's subscription (`PushSubscription.toJSON()`'s
    /// `endpoint` and keys); returns its id.
    public func pushSubscribe(endpoint: String, p256dh: String, auth: String) throws -> String {
        let reply = try reply(
            .object([
                ("op", .string(QueryOperation.pushSubscribe.rawValue)),
                (
                    "subscription",
                    .object([
                        ("endpoint", .string(endpoint)),
                        ("keys", .object([("p256dh", .string(p256dh)), ("auth", .string(auth))])),
                    ])
                ),
            ]))
        return try decoded { try reply.member("id").text() }
    }

    /// Removes the subscription `id`: whether it was there.
    public func pushUnsubscribe(id: String) throws -> Bool {
        let reply = try reply(.object([("op", .string(QueryOperation.pushUnsubscribe.rawValue)), ("id", .string(id))]))
        return try decoded { try reply.member("removed").integer() == 1 }
    }

    /// Every subscription kept (the admin role): its id and endpoint.
    public func pushSubscriptions() throws -> [(id: String, endpoint: String)] {
        let reply = try reply(.object([("op", .string(QueryOperation.pushSubscriptions.rawValue))]))
        return try decoded {
            try reply.member("subscriptions").items().map { (try $0.member("id").text(), try $0.member("endpoint").text()) }
        }
    }
}
