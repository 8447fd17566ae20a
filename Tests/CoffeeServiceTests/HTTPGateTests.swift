import CoffeeLogging
import Foundation
import Testing

@testable import CoffeeService

@Suite("The HTTP endpoint's gate and the JSON API's routes (docs/protocol.md §12)", .timeLimit(.minutes(1)))
struct HTTPGateTests {
    func admitted(_ gate: HTTPGate, _ request: HTTPRequest) -> Bool {
        if case .admitted = gate.admit(request) { return true }
        return false
    }

    /// Without tokens the JSON API is this machine's; the page follows the bind rule, as in v3.
    @Test func withoutTokensTheJSONAPIAnswersLoopbackPeersOnly() {
        let gate = HTTPGate(configuration: .init(), counters: ServiceCounters(), logger: Logger(label: "test"))
        #expect(admitted(gate, HTTPRequest(method: "GET", target: "/api/v1/ping", peer: "127.0.0.1")))
        #expect(admitted(gate, HTTPRequest(method: "GET", target: "/api/v1/ping", peer: "::1")))
        #expect(!admitted(gate, HTTPRequest(method: "GET", target: "/api/v1/ping", peer: "192.0.2.7")))
        #expect(!admitted(gate, HTTPRequest(method: "POST", target: "/api/v1/drinks", peer: "192.0.2.7")))
        #expect(admitted(gate, HTTPRequest(method: "GET", target: "/model.svg", peer: "192.0.2.7")))
        // Behind a trusted proxy the client is the one it forwarded for.
        let proxied = HTTPGate(
            configuration: .init(trustedProxies: ["127.0.0.1"]), counters: ServiceCounters(), logger: Logger(label: "test"))
        let forwarded = HTTPRequest(
            method: "GET", target: "/api/v1/ping", headers: ["x-forwarded-for": "203.0.113.4, 192.0.2.7"], peer: "127.0.0.1")
        #expect(!admitted(proxied, forwarded))
        #expect(proxied.client(forwarded) == "192.0.2.7")
        #expect(gate.client(forwarded) == "127.0.0.1")  // not trusted: the peer
    }

    /// Each route's role comes from its operation: writes need `write`.
    @Test func theRolesComeFromTheOperations() {
        func role(_ method: String, _ path: String) -> TokenRole? {
            HTTPGate.role(for: HTTPRequest(method: method, target: path))
        }
        #expect(role("GET", "/api/v1/ping") == .read && role("GET", "/api/v1/changes") == .read)
        #expect(role("POST", "/api/v1/drinks") == .write && role("POST", "/api/v1/deletions") == .write)
        #expect(role("DELETE", "/api/v1/drinks/0C4A") == .write && role("POST", "/api/v1/health-auto-export") == .write)
        #expect(role("GET", "/metrics") == .metrics && role("GET", "/healthz") == nil && role("GET", "/") == .read)
        #expect(APIRoutes.resolve(method: "GET", path: "/api/v1/drinks") == .operation(.drinks, segment: nil))
        #expect(role("GET", "/api/v1/drinks") == .read)
        #expect(APIRoutes.resolve(method: "PUT", path: "/api/v1/drinks") == .methodNotAllowed(allow: "POST, GET"))
        #expect(APIRoutes.resolve(method: "DELETE", path: "/api/v1/drinks/A/B") == .notFound)
        #expect(APIRoutes.resolve(method: "DELETE", path: "/api/v1/drinks/AB") == .operation(.delete, segment: "AB"))
        #expect(APIRoutes.resolve(method: "HEAD", path: "/api/v1/model") == .operation(.model, segment: nil))
    }

    /// docs/protocol.md §15: a write that names another origin is refused,
    /// another port of the same host included; reads and programs (no
    /// `Origin`) pass; under TLS the own origin is https.
    @Test func aWriteFromAnotherOriginIsRefused() {
        let gate = HTTPGate(configuration: .init(), counters: ServiceCounters(), logger: Logger(label: "test"))
        func write(_ origin: String?, method: String = "POST", host: String = "127.0.0.1:5580") -> HTTPRequest {
            var headers = ["host": host]
            if let origin { headers["origin"] = origin }
            return HTTPRequest(method: method, target: "/api/v1/drinks", headers: headers, peer: "127.0.0.1")
        }
        #expect(admitted(gate, write("http://127.0.0.1:5580")))
        #expect(admitted(gate, write(nil)))
        #expect(!admitted(gate, write("http://127.0.0.1:8000")))
        #expect(!admitted(gate, write("http://evil.example")))
        #expect(!admitted(gate, write("null")))
        #expect(!admitted(gate, write("http://127.0.0.1:8000", method: "DELETE")))
        #expect(admitted(gate, write("http://127.0.0.1:8000", method: "GET")))
        if case .refused(let answer) = gate.admit(write("http://127.0.0.1:8000")) {
            #expect(answer.status == 403 && answer.body.contains("another origin (http://127.0.0.1:8000)"))
        }
        let tls = HTTPGate(configuration: .init(tls: true), counters: ServiceCounters(), logger: Logger(label: "test"))
        #expect(admitted(tls, write("https://127.0.0.1:5580")))
        #expect(!admitted(tls, write("http://127.0.0.1:5580")))
    }
}
