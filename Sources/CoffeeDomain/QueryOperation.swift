/// The service's operations (docs/protocol.md §4), in one place: each one's
/// name on the query endpoint, whether it writes (and so needs the `write`
/// role under CURVE or a token), whether a standby refuses it (§11), and its
/// routes on the HTTP endpoint's JSON API (§12). The query endpoint, the
/// `/api/v1` routes, the command line and the typed clients all go by it, so
/// that an operation is added here.
public enum QueryOperation: String, CaseIterable, Sendable {
    case ping, changes, model, add, delete, stats, backup
    /// The live drinks dated in a range (§15): what a person's page lists and edits.
    case drinks
    /// The person's days, weeks or months (§15).
    case history
    /// The person's settings (§15), and changing them (the `admin` role).
    case settings, putSettings
    /// The person's drinks catalogue (§15), and adding or changing an entry.
    case catalogue, putCatalogue
    /// Web Push (§17): the service's public key, a browser's subscription
    /// registered and removed (the `read` role: a phone that reads may be told),
    /// and the list of them (the `admin` role).
    case pushKey, pushSubscribe, pushUnsubscribe, pushSubscriptions

    /// It changes the store (or writes a file): the `write` role.
    public var writes: Bool {
        switch self {
        case .add, .delete, .backup, .putCatalogue, .putSettings: true
        case .ping, .changes, .model, .stats, .drinks, .history, .settings, .catalogue: false
        // They change the store, but only what this reader is told: `read` is enough.
        case .pushKey, .pushSubscribe, .pushUnsubscribe, .pushSubscriptions: false
        }
    }

    /// It changes what the person goes by: the `admin` role, not `write`.
    public var administers: Bool { self == .putSettings || self == .pushSubscriptions }

    /// A standby (§11) answers it `read_only`: its store follows its primary's.
    public var refusedOnStandby: Bool {
        [.add, .delete, .putSettings, .putCatalogue, .pushSubscribe, .pushUnsubscribe].contains(self)
    }

    /// Its routes under `/api/v1` (§12); none for `backup`, which is the operator's.
    public var routes: [APIRoute] {
        switch self {
        case .ping: [APIRoute("GET", "ping")]
        case .changes: [APIRoute("GET", "changes")]
        case .model: [APIRoute("GET", "model")]
        case .stats: [APIRoute("GET", "stats")]
        case .add: [APIRoute("POST", "drinks")]
        case .drinks: [APIRoute("GET", "drinks")]
        case .history: [APIRoute("GET", "history")]
        case .settings: [APIRoute("GET", "settings")]
        case .putSettings: [APIRoute("PUT", "settings")]
        case .catalogue: [APIRoute("GET", "catalogue")]
        case .putCatalogue: [APIRoute("PUT", "catalogue/{name}")]
        case .delete: [APIRoute("DELETE", "drinks/{uuid}"), APIRoute("POST", "deletions")]
        case .backup: []
        case .pushKey: [APIRoute("GET", "push/key")]
        case .pushSubscribe: [APIRoute("POST", "push/subscriptions")]
        case .pushUnsubscribe: [APIRoute("DELETE", "push/subscriptions/{id}")]
        case .pushSubscriptions: [APIRoute("GET", "push/subscriptions")]
        }
    }

    /// "ping, changes, …, catalogue or putCatalogue".
    public static var names: String {
        let all = allCases.map(\.rawValue)
        return all.dropLast().joined(separator: ", ") + " or " + all.last!
    }
}

/// One route of the JSON API: a method and a path under `/api/v1/`, where
/// `{uuid}` or `{name}` stands for a path segment.
public struct APIRoute: Sendable, Equatable {
    public var method: String
    public var path: String

    public init(_ method: String, _ path: String) {
        self.method = method
        self.path = path
    }

    public static let prefix = "/api/v1/"

    /// The segment `{uuid}` stands for when `requestPath` (under the prefix) is this route's path; nil when it is not.
    public func match(_ requestPath: Substring) -> Substring?? {
        guard let brace = path.firstIndex(of: "{") else { return requestPath == path[...] ? .some(nil) : nil }
        let head = path[..<brace]
        guard requestPath.hasPrefix(head) else { return nil }
        let rest = requestPath.dropFirst(head.count)
        return rest.isEmpty || rest.contains("/") ? nil : .some(rest)
    }
}
