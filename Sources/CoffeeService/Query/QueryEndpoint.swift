import CoffeeLifecycle
import CoffeeLogging
import Foundation
import Synchronization
import ZeroMQ

/// The ROUTER socket of docs/protocol.md §4, on a thread of its own (`query`).
///
/// Each request becomes a child task of `run()` running the handler; its
/// reply comes back to the socket's thread through the loop's mailbox. REQ and DEALER clients
/// both work: everything before the last frame is the envelope, returned as
/// is. In a shutdown, new requests get `unavailable` while those in flight
/// finish (bounded by `Configuration.grace`).
public final class QueryEndpoint: Service {
    /// The query endpoint's settings, with the defaults of docs/protocol.md §4 and §7.
    public struct Configuration: Sendable {
        /// Where to bind (`query.bind`); `tcp://host:*` picks a port.
        public var bind: [String] = ["tcp://127.0.0.1:5557"]
        /// `limits.maxMessageBytes`: requests up to twice this are read so
        /// that `too_large` can be answered; beyond that the peer is disconnected.
        public var maxMessageBytes = IngestEndpoint.Configuration.defaultMaxMessageBytes
        /// How long a shutdown waits for requests in flight.
        public var grace: Duration = .seconds(3)
        /// A CURVE server under `security.curve`; nil for plaintext. Each
        /// request then carries its client's name to the handler.
        public var curve: CurveServerSettings?

        public init() {}
    }

    struct Reply: Sendable {
        var envelope: [Data]
        var body: Data
    }

    /// A request read on the socket's thread, for `run()` to answer.
    struct Request: Sendable {
        var envelope: [Data]
        var body: Data
        var caller: QueryHandler.Caller
        /// Read after the shutdown began: answered `unavailable`.
        var draining: Bool
    }

    public let name = "query"
    private let configuration: Configuration
    private let context: ZMQContext
    private let handler: QueryHandler
    private let loop: SocketLoop<Reply>
    private let inFlight = Atomic<Int>(0)
    private let draining = Atomic<Bool>(false)
    private let endpoints = Mutex<[String]>([])
    private let logger: Logger
    private let requests: AsyncStream<Request>
    private let incoming: AsyncStream<Request>.Continuation

    /// - Throws: `SystemCallError` when the mailbox's pipe cannot be made.
    public init(configuration: Configuration, context: ZMQContext, handler: QueryHandler, logger: Logger)
        throws
    {
        self.logger = logger
        self.configuration = configuration
        self.context = context
        self.handler = handler
        loop = try SocketLoop(name: "query")
        (requests, incoming) = AsyncStream.makeStream(of: Request.self)
    }

    /// The endpoints actually bound (with real ports for `:*` binds).
    public var boundEndpoints: [String] { endpoints.withLock { $0 } }

    /// Binds and starts answering.
    ///
    /// - Throws: `ZMQError` naming the endpoint when a bind fails.
    public func start() async throws {
        let (logger, configuration, context, incoming) = (logger, configuration, context, incoming)
        try await loop.start { [self] in
            let socket = try ZMQSocket(context, .router)
            try socket.setMaxMessageSize(Int64(configuration.maxMessageBytes) * 2)
            try socket.setSendHighWaterMark(100_000)
            try socket.setReceiveHighWaterMark(100_000)
            try socket.setLinger(ms: 1000)
            try socket.secure(configuration.curve)
            let bound = try socket.bind(all: configuration.bind)
            self.endpoints.withLock { $0 = bound }
            for endpoint in bound { logger.info("query endpoint listening", metadata: ["endpoint": "\(endpoint)"]) }
            return SocketLoop<Reply>.Handler(
                sockets: [socket],
                readable: { _ in
                    // Up to a batch per wake-up, so replies are never starved.
                    let authenticated = configuration.curve != nil
                    for _ in 0..<512 {
                        guard
                            let (frames, client) = try? socket.receive(
                                dontWait: true, userID: authenticated, { frames, user in (frames.map { Data($0) }, user) }),
                            let body = frames.last
                        else { break }
                        let envelope = Array(frames.dropLast())
                        self.inFlight.add(1, ordering: .relaxed)
                        incoming.yield(
                            Request(
                                envelope: envelope, body: body,
                                caller: authenticated ? .client(client ?? "") : .local,
                                draining: self.draining.load(ordering: .relaxed)))
                    }
                },
                received: { replies in
                    for reply in replies {
                        self.inFlight.subtract(1, ordering: .relaxed)
                        // A client that left is not an error; dontWait so a
                        // full peer queue never blocks the loop.
                        _ = try? socket.send(reply.envelope + [reply.body], dontWait: true)
                    }
                })
        }
    }

    /// Whether the socket loop's thread goes round within `timeout` (health, watchdog).
    public func answers(within timeout: Duration) async -> Bool { await loop.answers(within: timeout) }

    /// Answers each request in a child task until shutdown; then answers
    /// `unavailable`, lets requests in flight finish (bounded by `grace`),
    /// and closes.
    public func run() async throws {
        let (handler, mailbox) = (handler, loop.mailbox)
        await withDiscardingTaskGroup { group in
            group.addTask {
                await gracefulShutdown()
                self.draining.store(true, ordering: .relaxed)
                let clock = ContinuousClock()
                let deadline = clock.now + self.configuration.grace
                while self.inFlight.load(ordering: .relaxed) > 0 && clock.now < deadline {
                    try? await Task.sleep(for: .milliseconds(5))
                }
                await self.loop.stop()
                self.incoming.finish()
            }
            for await request in requests {
                group.addTask {
                    let reply = await handler.handle(request.body, draining: request.draining, caller: request.caller)
                    mailbox.post(Reply(envelope: request.envelope, body: reply))
                }
            }
        }
    }
}
