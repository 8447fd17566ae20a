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
        #expect(APIRoutes.resolve(method: "GET", path: "/api/v1/drinks") == .methodNotAllowed(allow: "POST"))
        #expect(APIRoutes.resolve(method: "DELETE", path: "/api/v1/drinks/A/B") == .notFound)
        #expect(APIRoutes.resolve(method: "DELETE", path: "/api/v1/drinks/AB") == .operation(.delete, segment: "AB"))
        #expect(APIRoutes.resolve(method: "HEAD", path: "/api/v1/model") == .operation(.model, segment: nil))
    }
}
