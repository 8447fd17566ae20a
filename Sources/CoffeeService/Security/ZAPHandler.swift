import CoffeeLifecycle
import CoffeeLogging
import Foundation
import Synchronization
import ZeroMQ

/// The ZAP handler (ZeroMQ RFC 27) on a thread of its own (`zap`): libzmq
/// asks it, at every CURVE handshake on the service's endpoints, whether the
/// client's key may connect, and it answers from the clients directory.
///
/// A key is admitted on an endpoint when its certificate is in the
/// directory and holds the endpoint's role (ingest: publish, updates:
/// subscribe, query: read or write); the connection then carries the
/// client's name as ZeroMQ's `User-Id`. Each denial is counted and logged
/// at warning, rate-limited, with the endpoint, the key's first 8
/// characters and the peer's address. It starts before every endpoint, so
/// no handshake happens without it.
public final class ZAPHandler: Service {
    public static let endpoint = "inproc://zeromq.zap.01"

    public let name = "zap"
    private let context: ZMQContext
    private let registry: ClientRegistry
    private let counters: ServiceCounters
    private let loop: SocketLoop<Int>
    private let logger: Logger
    private let warnings = RateLimiter(interval: 1)

    /// - Throws: `SystemCallError` when the loop's mailbox cannot be made.
    public init(
        context: ZMQContext, registry: ClientRegistry, counters: ServiceCounters, logger: Logger
    ) throws {
        self.logger = logger
        self.context = context
        self.registry = registry
        self.counters = counters
        loop = try SocketLoop(name: "zap")
    }

    /// The role a client needs on `domain`'s endpoint; nil for a domain of
    /// no endpoint of ours.
    static func admits(_ roles: Set<Role>, on domain: String) -> Bool {
        switch domain {
        case "ingest": roles.contains(.publish)
        case "updates": roles.contains(.subscribe)
        case "query": roles.contains(.read) || roles.contains(.write)
        default: false
        }
    }

    /// The reply to one ZAP request's frames (RFC 27): version, request id,
    /// domain, address, identity, mechanism, credentials. Pure, for tests.
    func reply(to frames: [Data]) -> [Data] {
        guard frames.count >= 6, frames[0] == Data("1.0".utf8) else {
            // Not a ZAP request we understand: deny without a reply shape to guess.
            return [
                Data("1.0".utf8), frames.count > 1 ? frames[1] : Data(), Data("500".utf8), Data("malformed ZAP request".utf8),
                Data(), Data(),
            ]
        }
        let domain = String(decoding: frames[2], as: UTF8.self)
        let address = String(decoding: frames[3], as: UTF8.self)
        let mechanism = String(decoding: frames[5], as: UTF8.self)
        func answer(_ code: String, _ text: String, user: String = "") -> [Data] {
            [Data("1.0".utf8), frames[1], Data(code.utf8), Data(text.utf8), Data(user.utf8), Data()]
        }
        guard mechanism == "CURVE", frames.count >= 7, let key = CurveKeyPair.z85(frames[6]) else {
            deny(domain: domain, key: "-", address: address, reason: "not a CURVE handshake (\(mechanism))")
            return answer("400", "CURVE required")
        }
        guard let client = registry.client(publicKey: key) else {
            deny(domain: domain, key: key, address: address, reason: "key not in the clients directory")
            return answer("400", "unknown key")
        }
        guard Self.admits(client.roles, on: domain) else {
            deny(domain: domain, key: key, address: address, reason: "client \(client.name) lacks the role for \(domain)")
            return answer("400", "role missing")
        }
        return answer("200", "OK", user: client.name)
    }

    private func deny(domain: String, key: String, address: String, reason: String) {
        ServiceCounters.bump(counters.authDenied)
        switch domain {
        case "ingest": ServiceCounters.bump(counters.authDeniedIngest)
        case "updates": ServiceCounters.bump(counters.authDeniedUpdates)
        default: ServiceCounters.bump(counters.authDeniedQuery)
        }
        if let suppressed = warnings.allow(count: 1) {
            logger.warning(
                "connection denied",
                metadata: [
                    "endpoint": "\(domain)", "key": "\(String(key.prefix(8)))", "peer": "\(address)", "reason": "\(reason)",
                    "suppressed": "\(suppressed)",
                ])
        }
    }

    /// Binds the ZAP endpoint in the service's context.
    public func start() async throws {
        let context = self.context
        try await loop.start { [self] in
            let socket = try ZMQSocket(context, .rep)
            try socket.setLinger(ms: 0)
            try socket.bind(Self.endpoint)
            return SocketLoop<Int>.Handler(
                sockets: [socket],
                readable: { _ in
                    while let frames = try? socket.receive(dontWait: true) {
                        _ = try? socket.send(self.reply(to: frames))
                    }
                })
        }
    }

    /// Whether the socket loop's thread goes round within `timeout` (health, watchdog).
    public func answers(within timeout: Duration) async -> Bool { await loop.answers(within: timeout) }

    public func run() async throws {
        await gracefulShutdown()
        await loop.stop()
    }
}
