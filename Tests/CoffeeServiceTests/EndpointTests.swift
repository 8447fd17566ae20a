import CoffeeDomain
import CoffeeLifecycle
import CoffeeLogging
import CoffeeModel
import Foundation
import HealthStore
import Synchronization
import Testing
import ZeroMQ

@testable import CoffeeService

#if canImport(Glibc)
    import Glibc
#endif

/// The query endpoint, the publisher and the HTTP endpoint, each alone over
/// real sockets of its own (the integration tests drive them all together).
@Suite("Endpoints, one at a time", .timeLimit(.minutes(1)))
struct EndpointTests {
    /// A folder, a store, and a group that runs `services` until `finish`.
    final class Rig: Sendable {
        let dir: URL
        let store: HealthStore
        let context = ZMQContext()
        let counters = ServiceCounters()

        init() throws {
            dir = FileManager.default.temporaryDirectory.appendingPathComponent("ct-ep-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            var configuration = HealthStore.Configuration(path: dir.appendingPathComponent("s.sqlite").path)
            configuration.settingsDefaults = PersonSettings(model: CaffeineModel(timeZone: TimeZone(identifier: "UTC")!))
            store = try HealthStore(configuration: configuration, logger: Logger(label: "test"))
        }

        func socket(_ name: String) -> String { "ipc://\(dir.path)/\(name).sock" }

        func handler() async throws -> QueryHandler {
            let model = ModelService(
                store: store, cache: nil, clock: SystemClock(), logger: Logger(label: "test"))
            try await model.start()  // loads, and follows the store's commits
            return QueryHandler(
                store: store, model: model, validator: DrinkValidator(), counters: counters,
                clock: SystemClock(), maxMessageBytes: 1000, logger: Logger(label: "test"))
        }

        /// Starts `service`, runs `body`, then shuts it down and waits for its drain.
        func running(_ service: any Service, _ body: () async throws -> Void) async throws {
            try await service.start()
            let signal = ShutdownSignal()
            let run = Task { try await ShutdownSignal.$current.withValue(signal) { try await service.run() } }
            do {
                try await body()
            } catch {
                signal.trigger()
                try? await run.value
                throw error
            }
            signal.trigger()
            try await run.value
        }

        /// A publisher of the rig's store, on an endpoint of its own, with heartbeats every 50 ms.
        func broadcaster() throws -> (Broadcaster, Broadcaster.Configuration) {
            var configuration = Broadcaster.Configuration()
            configuration.bind = [socket("updates")]
            configuration.heartbeatInterval = .milliseconds(50)
            let broadcaster = try Broadcaster(
                configuration: configuration, context: context, store: store, counters: counters,
                logger: Logger(label: "test"))
            return (broadcaster, configuration)
        }

        func cleanup() async {
            await store.close()
            try? FileManager.default.removeItem(at: dir)
        }
    }

    /// Runs `body` (a client's blocking socket calls) on a thread of its
    /// own: blocked on the cooperative pool (two threads here), it would
    /// starve the endpoint's own tasks, and other tests'.
    func blocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try body() }) }.start()
        }
    }

    func json(_ data: Data) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    @Test func theQueryEndpointAnswersREQAndDEALERClientsAndRefusesWhatIsTooLarge() async throws {
        let rig = try Rig()
        var configuration = QueryEndpoint.Configuration()
        configuration.bind = [rig.socket("query")]
        configuration.maxMessageBytes = 1000
        let endpoint = try QueryEndpoint(
            configuration: configuration, context: rig.context, handler: try await rig.handler(), logger: Logger(label: "test"))
        let address = configuration.bind[0]
        try await rig.running(endpoint) {
            #expect(endpoint.boundEndpoints == configuration.bind)
            #expect(await endpoint.answers(within: .seconds(1)))
            let (ping, large, dealerFrames) = try await blocking { () throws -> (Data?, Data?, [Data]?) in
                let req = try ZMQSocket(rig.context, .req)
                defer { req.close() }
                try req.setReceiveTimeout(ms: 5000)
                try req.connect(address)
                _ = try req.send([Data(#"{"op":"ping"}"#.utf8)])
                let ping = try req.receive()?.last
                _ = try req.send([Data(#"{"op":"ping","pad":""#.utf8) + Data(repeating: 0x61, count: 1500) + Data(#""}"#.utf8)])
                let large = try req.receive()?.last
                // A DEALER's envelope (an empty delimiter and an id) comes back as it was sent.
                let dealer = try ZMQSocket(rig.context, .dealer)
                defer { dealer.close() }
                try dealer.setReceiveTimeout(ms: 5000)
                try dealer.connect(address)
                _ = try dealer.send([Data(), Data("id-7".utf8), Data(#"{"op":"stats"}"#.utf8)])
                return (ping, large, try dealer.receive())
            }
            let pong = try json(try #require(ping))
            #expect(pong["ok"] as? Bool == true && pong["anchor"] as? Int == 0)
            let tooLarge = try json(try #require(large))
            #expect((tooLarge["error"] as? [String: Any])?["code"] as? String == "too_large")
            let frames = try #require(dealerFrames)
            #expect(frames.count == 3 && frames[1] == Data("id-7".utf8))
            #expect(try json(frames[2])["ok"] as? Bool == true)
        }
        await rig.cleanup()
    }

    /// One socket used by one thread at a time, handed over with the
    /// memory barriers of thread start and continuation (as libzmq allows).
    final class Held: @unchecked Sendable {
        let socket: ZMQSocket
        init(_ socket: ZMQSocket) { self.socket = socket }
    }

    @Test func thePublisherSendsEachCommitsChangesAndHeartbeats() async throws {
        let rig = try Rig()
        let (broadcaster, configuration) = try rig.broadcaster()
        try await rig.running(broadcaster) {
            let held = Held(try ZMQSocket(rig.context, .sub))
            let sub = held.socket
            defer { sub.close() }
            try sub.setReceiveTimeout(ms: 5000)
            try sub.subscribe("")
            try sub.connect(configuration.bind[0])
            // The first heartbeat proves the subscription is in place.
            let subscribed = try await blocking { () throws -> Bool in
                for _ in 0..<100 where try held.socket.receive()?.first == Data("heartbeat".utf8) { return true }
                return false
            }
            try #require(subscribed)
            let d = Drink(mgCaffeine: 64, date: Date(timeIntervalSince1970: 1_796_000_000), source: "test")
            _ = try await rig.store.save([d])
            let body = try await blocking { () throws -> Data? in
                for _ in 0..<100 {
                    guard let frames = try held.socket.receive() else { return nil }
                    if frames[0] == Data("changes".utf8) { return frames[1] }
                }
                return nil
            }
            let message = try json(try #require(body))
            #expect(message["anchor"] as? Int == 1 && message["previousAnchor"] as? Int == 0)
            let added = try #require(message["added"] as? [[String: Any]])
            #expect(added.first?["uuid"] as? String == d.uuid.uuidString)
        }
        await rig.cleanup()
    }

    /// A commit too large to carry its changes is read back page by page
    /// while the publisher goes on; what is committed after it must not
    /// overtake its pages (the anchors chain), nor be lost.
    @Test func aLargeCommitsPagesGoOutInOrderBeforeWhatFollowsIt() async throws {
        let rig = try Rig()
        let (broadcaster, configuration) = try rig.broadcaster()
        try await rig.running(broadcaster) {
            let held = Held(try ZMQSocket(rig.context, .sub))
            defer { held.socket.close() }
            try held.socket.setReceiveTimeout(ms: 5000)
            try held.socket.subscribe("changes")
            try held.socket.subscribe("heartbeat")
            try held.socket.connect(configuration.bind[0])
            let subscribed = try await blocking { () throws -> Bool in
                for _ in 0..<100 where try held.socket.receive()?.first == Data("heartbeat".utf8) { return true }
                return false
            }
            try #require(subscribed)
            let start = Date(timeIntervalSince1970: 1_796_000_000)
            let large = (0..<(HealthStore.announceLimit + 2_000)).map {
                Drink(mgCaffeine: 10, date: start.addingTimeInterval(Double($0)), source: "test")
            }
            _ = try await rig.store.save(large)
            for i in 0..<3 {
                _ = try await rig.store.save([
                    Drink(mgCaffeine: 20, date: start.addingTimeInterval(-Double(i + 1)), source: "test")
                ])
            }
            let last = Int64(large.count + 3)
            let chain = try await blocking { () throws -> [(Int, Int, Int)] in
                var chain: [(Int, Int, Int)] = []
                while let frames = try held.socket.receive() {
                    guard frames[0] == Data("changes".utf8),
                        let m = try JSONSerialization.jsonObject(with: frames[1]) as? [String: Any],
                        let anchor = m["anchor"] as? Int, let previous = m["previousAnchor"] as? Int
                    else { continue }
                    chain.append((previous, anchor, (m["added"] as? [Any])?.count ?? 0))
                    if anchor >= Int(last) { break }
                }
                return chain
            }
            #expect(chain.count >= 5, "expected at least 3 pages and 3 small commits: \(chain)")
            var expected = 0
            for (previous, anchor, _) in chain {
                #expect(previous == expected, "the chain broke: \(chain.map { "\($0.0)->\($0.1)" })")
                expected = anchor
            }
            #expect(expected == Int(last))
            #expect(chain.map(\.2).reduce(0, +) == Int(last))
            #expect(chain.allSatisfy { $0.2 <= Broadcaster.pageSize })
        }
        await rig.cleanup()
    }

    /// Requests are answered through the route, two on one kept-alive connection; a head over
    /// the limit is refused 431 and the connection closed, so a request behind it is never answered.
    @Test func theHTTPEndpointAnswersThroughItsRouteAndRefusesOversizedHeads() async throws {
        let rig = try Rig()
        var configuration = HTTPEndpoint.Configuration()
        configuration.bind = "127.0.0.1:0"
        let endpoint = try HTTPEndpoint(configuration: configuration, logger: Logger(label: "test")) { request in
            request.path == "/hello"
                ? HTTPResponse(status: 200, body: "\(request.method) hello \(request.query["n"] ?? "")\n")
                : HTTPResponse(status: 404, body: "no\n")
        }
        try await rig.running(endpoint) {
            let address = try #require(endpoint.boundAddress)
            let port = try #require(UInt16(address.split(separator: ":").last ?? ""))
            let two = try await blocking {
                try Self.exchange(
                    port,
                    "GET /hello?n=1 HTTP/1.1\r\nHost: x\r\n\r\nGET /hello?n=2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            }
            #expect(two.hasPrefix("HTTP/1.1 200") && two.contains("GET hello 1\n") && two.hasSuffix("GET hello 2\n"), "\(two)")
            let other = try await blocking {
                try Self.exchange(port, "GET /other HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            }
            #expect(other.hasPrefix("HTTP/1.1 404"), "\(other)")
            let huge =
                "GET /hello HTTP/1.1\r\nHost: x\r\nX: " + String(repeating: "a", count: 9_000)
                + "\r\n\r\nGET /hello?n=behind HTTP/1.1\r\nHost: x\r\n\r\n"
            let refused = try await blocking { try Self.exchange(port, huge) }
            #expect(refused.hasPrefix("HTTP/1.1 431") && !refused.contains("hello behind"), "\(refused)")
        }
        await rig.cleanup()
    }

    /// Sends `request` to 127.0.0.1:`port`; returns all that comes back before the server closes.
    static func exchange(_ port: UInt16, _ request: String) throws -> String {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return "no socket" }
        defer { close(fd) }
        // Generous: the whole suite runs its tests at once on two cores, and
        // a CI run once saw the first answer come after more than 5 s.
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { return "not connected" }
        _ = Array(request.utf8).withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var reply: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n <= 0 { break }
            reply += buffer[0..<n]
        }
        return String(decoding: reply, as: UTF8.self)
    }
}
