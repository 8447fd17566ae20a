import Foundation
import Logging
import Synchronization
import ZeroMQ

/// The ROUTER socket of PROTOCOL.md §4, on a thread of its own.
///
/// Each request becomes a task running the handler; its reply comes back to
/// the socket's thread through the loop's mailbox. REQ and DEALER clients
/// both work: everything before the last frame is the envelope, returned as is.
public final class QueryEndpoint: Sendable {
    struct Reply: Sendable {
        var envelope: [Data]
        var body: Data
    }

    private let loop = SocketLoop<Reply>(name: "query")
    private let inFlight = Atomic<Int>(0)
    private let endpoints = Mutex<[String]>([])
    private let logger = Logger(label: "query")

    public init() {}

    /// The endpoints actually bound (with real ports for `:*` binds).
    public var boundEndpoints: [String] { endpoints.withLock { $0 } }

    /// Binds and starts answering.
    ///
    /// - Throws: `ZMQError` naming the endpoint when a bind fails.
    public func start(context: ZMQContext, bind: [String], maxMessageBytes: Int, handler: QueryHandler) async throws {
        let mailbox = loop.mailbox
        let logger = self.logger
        try await loop.start { [self] in
            let socket = try ZMQSocket(context, .router)
            // Requests up to twice the limit are read so that `too_large` can
            // be answered; beyond that the peer is disconnected.
            try socket.setMaxMessageSize(Int64(maxMessageBytes) * 2)
            try socket.setSendHighWaterMark(100_000)
            try socket.setReceiveHighWaterMark(100_000)
            try socket.setLinger(ms: 1000)
            let bound = try socket.bind(all: bind)
            self.endpoints.withLock { $0 = bound }
            for endpoint in bound { logger.info("query endpoint listening", ["endpoint": endpoint]) }
            return SocketLoop<Reply>.Handler(
                sockets: [socket],
                readable: { _ in
                    // Up to a batch per wake-up, so replies are never starved.
                    for _ in 0..<512 {
                        guard let frames = try? socket.receive(dontWait: true), let body = frames.last else { break }
                        let envelope = Array(frames.dropLast())
                        self.inFlight.add(1, ordering: .relaxed)
                        Task {
                            let reply = await handler.handle(body)
                            mailbox.post(Reply(envelope: envelope, body: reply))
                        }
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

    /// Lets requests in flight finish (bounded by `grace`), then closes.
    public func stop(grace: Duration = .seconds(3)) async {
        let clock = ContinuousClock()
        let deadline = clock.now + grace
        while inFlight.load(ordering: .relaxed) > 0 && clock.now < deadline {
            try? await Task.sleep(for: .milliseconds(5))
        }
        await loop.stop()
    }
}
