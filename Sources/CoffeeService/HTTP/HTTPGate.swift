import CoffeeDomain
import CoffeeLogging
import Foundation
import Synchronization

/// Who may pass the HTTP endpoint (docs/protocol.md §12): tokens with
/// roles, the cookie a browser logs in with, and a minute's 429 for an
/// address past 20 failures in a minute. Every request meets it before its
/// route; `/healthz` and `/readyz` pass untouched.
final class HTTPGate: Sendable {
    struct Configuration: Sendable {
        /// Nil: no tokens (v3): every route as before, for loopback peers only (the bind rule).
        var tokens: TokenRegistry?
        /// Proxies whose `X-Forwarded-For` and `X-Forwarded-Proto` are believed.
        var trustedProxies: Set<String> = []
        /// The endpoint serves TLS itself.
        var tls = false
        /// Failures that an address may make in `lockout`; after the last of them, it is refused for `lockout`.
        var maxFailures = 20
        var lockout: Duration = .seconds(60)
    }

    /// The cookie `GET /login` sets.
    static let cookieName = "ct_token"

    private let configuration: Configuration
    private let counters: ServiceCounters
    private let logger: Logger
    private let failures = Mutex<[String: FailureRecord]>([:])

    private struct FailureRecord {
        var times: [ContinuousClock.Instant] = []
        var blockedUntil: ContinuousClock.Instant?
        var lastLogged: ContinuousClock.Instant?
        var unlogged = 0
    }

    init(configuration: Configuration, counters: ServiceCounters, logger: Logger) {
        self.configuration = configuration
        self.counters = counters
        self.logger = logger
    }

    /// The role a request needs; nil for none. The JSON API's routes need
    /// their operation's (`write` for one that writes).
    static func role(for request: HTTPRequest) -> TokenRole? {
        if APIRoutes.isAPI(request.path) { return APIRoutes.resolve(method: request.method, path: request.path).role }
        switch request.path {
        // The manifest and its icons are the same for every service, and a
        // browser fetches the icons without the login cookie (§17).
        case "/healthz", "/readyz", "/login", "/manifest.webmanifest": return nil
        case let path where LivePage.icons[path] != nil: return nil
        case "/metrics": return .metrics
        default: return .read
        }
    }

    /// Whether a request may go on to its route, and under which token.
    enum Admission {
        /// On: the token's name (nil without tokens).
        case admitted(token: String?)
        case refused(HTTPResponse)
    }

    /// Whether the request came over TLS: the endpoint's own, or a trusted proxy's.
    func isSecure(_ request: HTTPRequest) -> Bool {
        configuration.tls
            || (configuration.trustedProxies.contains(request.peer) && request.header("x-forwarded-proto") == "https")
    }

    /// The client's address: the peer, or behind a trusted proxy the last address it forwarded for.
    func client(_ request: HTTPRequest) -> String {
        guard configuration.trustedProxies.contains(request.peer), let forwarded = request.header("x-forwarded-for"),
            let last = forwarded.split(separator: ",").last
        else { return request.peer }
        return last.trimmingCharacters(in: .whitespaces)
    }

    /// Whether `request` may go on to its route.
    func admit(_ request: HTTPRequest, now: ContinuousClock.Instant = .now) -> Admission {
        let required = Self.role(for: request)
        if required == nil, request.path != "/login" { return .admitted(token: nil) }
        let address = client(request)
        if let retry = blockedFor(address, now: now) {
            return .refused(
                Self.error(
                    429, "too_many_requests", "too many failed tokens from \(address); try again in \(retry) s",
                    headers: ["Retry-After": "\(retry)"]))
        }
        if let refusal = crossOriginRefusal(request) { return .refused(refusal) }
        guard let tokens = configuration.tokens else {
            if request.path == "/login" {
                return .refused(Self.error(404, "not_found", "no tokens: security.tokensDirectory is not set"))
            }
            // Without tokens the JSON API is this machine's only (the page, as in v3, follows the bind rule).
            if APIRoutes.isAPI(request.path), !SecuritySetup.isLoopback("tcp://\(address):0") {
                return .refused(
                    Self.error(
                        401, "unauthenticated", "the JSON API answers other hosts only with tokens (security.tokensDirectory)",
                        headers: ["WWW-Authenticate": "Bearer"]))
            }
            return .admitted(token: nil)
        }
        if request.path == "/login" { return .refused(login(request, tokens, address, now: now)) }
        guard let presented = Self.presentedToken(request) else {
            return .refused(
                Self.error(
                    401, "unauthenticated", "this endpoint needs a token: Authorization: Bearer TOKEN",
                    headers: ["WWW-Authenticate": "Bearer"]))
        }
        guard let token = tokens.token(matching: presented) else {
            failed(address, now: now)
            return .refused(
                Self.error(
                    401, "unauthenticated", "the token matches none held (revoked, or mistyped)",
                    headers: ["WWW-Authenticate": #"Bearer error="invalid_token""#]))
        }
        if let required, !token.roles.contains(required) {
            return .refused(
                Self.error(
                    403, "forbidden",
                    "token \(token.name) lacks the role \(required.rawValue) that \(request.method) \(request.path) needs"))
        }
        return .admitted(token: token.name)
    }

    /// docs/protocol.md §15: a write (any method but GET and HEAD) that
    /// names another origin is refused, and one that the login cookie
    /// authenticates must name its origin. `SameSite=Strict` alone lets a
    /// page on another port of the same host through (the same site), and
    /// without tokens the API takes any loopback peer: a form posted by any
    /// site the person visits.
    func crossOriginRefusal(_ request: HTTPRequest) -> HTTPResponse? {
        guard request.method != "GET", request.method != "HEAD" else { return nil }
        let own = (isSecure(request) ? "https://" : "http://") + (request.header("host") ?? "")
        if let origin = request.header("origin") {
            guard origin.lowercased() != own.lowercased() else { return nil }
            return Self.error(
                403, "forbidden", "a write from another origin (\(origin)) is refused: this endpoint is \(own)")
        }
        if configuration.tokens != nil, request.header("authorization") == nil, Self.presentedToken(request) != nil {
            return Self.error(403, "forbidden", "a write with the login cookie must carry Origin (a browser sends it)")
        }
        return nil
    }

    /// `GET /login?token=T`: the cookie set, then `/` without the token in the address.
    private func login(_ request: HTTPRequest, _ tokens: TokenRegistry, _ address: String, now: ContinuousClock.Instant)
        -> HTTPResponse
    {
        guard let presented = request.query["token"], !presented.isEmpty else {
            return Self.error(400, "bad_request", "GET /login?token=TOKEN")
        }
        guard tokens.token(matching: presented) != nil else {
            failed(address, now: now)
            return Self.error(
                401, "unauthenticated", "the token matches none held (revoked, or mistyped)",
                headers: ["WWW-Authenticate": #"Bearer error="invalid_token""#])
        }
        var cookie = "\(Self.cookieName)=\(presented); HttpOnly; SameSite=Strict; Path=/; Max-Age=31536000"
        if isSecure(request) { cookie += "; Secure" }
        return HTTPResponse(
            status: 303, body: "logged in; on to /\n",
            headers: ["Location": "/", "Set-Cookie": cookie, "Cache-Control": "no-store"])
    }

    /// The bearer token, or the login cookie's.
    static func presentedToken(_ request: HTTPRequest) -> String? {
        if let authorization = request.header("authorization") {
            let parts = authorization.split(separator: " ", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == "bearer" { return parts[1].trimmingCharacters(in: .whitespaces) }
            return ""  // another scheme: presented, and matches none
        }
        guard let cookies = request.header("cookie") else { return nil }
        for cookie in cookies.split(separator: ";") {
            let pair = cookie.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
            if pair.count == 2, pair[0] == cookieName { return String(pair[1]) }
        }
        return nil
    }

    /// How many seconds `address` stays refused, or nil.
    private func blockedFor(_ address: String, now: ContinuousClock.Instant) -> Int? {
        failures.withLock { table in
            guard let until = table[address]?.blockedUntil else { return nil }
            guard now < until else {
                table[address] = nil
                return nil
            }
            let left = until - now
            return max(1, Int(left.components.seconds) + (left.components.attoseconds > 0 ? 1 : 0))
        }
    }

    /// A token that matched none: counted, logged (at most once per address every 10 s), and past
    /// the limit the address is refused for a while.
    private func failed(_ address: String, now: ContinuousClock.Instant) {
        ServiceCounters.bump(counters.authDenied)
        ServiceCounters.bump(counters.authDeniedHTTP)
        let (log, suppressed) = failures.withLock { table -> (Bool, Int) in
            if table.count > 10_000 { table = table.filter { $0.value.blockedUntil.map { now < $0 } ?? false } }
            var record = table[address] ?? FailureRecord()
            record.times = record.times.filter { now - $0 < configuration.lockout } + [now]
            if record.times.count >= configuration.maxFailures { record.blockedUntil = now + configuration.lockout }
            var log = false
            if record.lastLogged.map({ now - $0 >= .seconds(10) }) ?? true {
                log = true
                record.lastLogged = now
            }
            let suppressed = record.unlogged
            record.unlogged = log ? 0 : record.unlogged + 1
            table[address] = record
            return (log, suppressed)
        }
        if log {
            logger.warning(
                "http request with an unknown token refused",
                metadata: ["address": "\(address)", "token": "unknown", "suppressed": "\(suppressed)"])
        }
    }

    /// An error answer with §12's body: `{"ok": false, "error": {"code", "message"}}`.
    static func error(_ status: Int, _ code: String, _ message: String, headers: [String: String] = [:]) -> HTTPResponse {
        let body = "{\"ok\":false,\"error\":{\"code\":\"\(code)\",\"message\":\(quoted(message))}}\n"
        return HTTPResponse(status: status, contentType: "application/json", body: body, headers: headers)
    }

    private static func quoted(_ text: String) -> String { JSONValue.string(text).serialized() }
}
