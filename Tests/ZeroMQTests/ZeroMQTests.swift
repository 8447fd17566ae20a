import Foundation
import Testing

@testable import ZeroMQ

@Suite("ZeroMQ wrapper", .timeLimit(.minutes(2)))
struct ZeroMQTests {
    /// Two PAIR sockets connected over inproc (each keeps the context alive).
    static func pair() throws -> (ZMQSocket, ZMQSocket) {
        let context = ZMQContext()
        let path = "inproc://pair-\(UUID().uuidString)"
        let a = try ZMQSocket(context, .pair)
        let b = try ZMQSocket(context, .pair)
        try a.bind(path)
        try b.connect(path)
        return (a, b)
    }

    @Test func bindToPortZeroReportsTheRealEndpoint() throws {
        let context = ZMQContext()
        let socket = try ZMQSocket(context, .router)
        defer { socket.close() }
        try socket.bind("tcp://127.0.0.1:*")
        let endpoint = socket.lastEndpoint
        #expect(endpoint.hasPrefix("tcp://127.0.0.1:"))
        #expect(Int(endpoint.split(separator: ":").last!)! > 0)
    }

    @Test func takenPortFailsNamingTheEndpoint() throws {
        let context = ZMQContext()
        let first = try ZMQSocket(context, .pull)
        defer { first.close() }
        try first.bind("tcp://127.0.0.1:*")
        let endpoint = first.lastEndpoint
        let second = try ZMQSocket(context, .pull)
        defer { second.close() }
        #expect {
            try second.bind(endpoint)
        } throws: { error in
            let e = error as! ZMQError
            return e.errno == EADDRINUSE && e.description.contains(endpoint)
        }
    }

    @Test func multipartRoundTripAndDontWait() throws {
        let (a, b) = try Self.pair()
        defer {
            a.close()
            b.close()
        }
        #expect(try b.receive(dontWait: true) == nil)
        try a.send([Data("topic".utf8), Data(), Data([0, 1, 2])])
        let ready = try ZMQSocket.poll([.socket(b)], timeoutMs: 2000)
        #expect(ready == [true])
        #expect(try b.receive() == [Data("topic".utf8), Data(), Data([0, 1, 2])])
    }

    /// Frames lent in place: short ones (kept inside zmq_msg_t itself),
    /// empty and long ones all read back intact, however many frames.
    @Test func lentFramesReadIntact() throws {
        let (a, b) = try Self.pair()
        defer {
            a.close()
            b.close()
        }
        let frames = [Data("short".utf8), Data(), Data((0..<1000).map { UInt8($0 % 251) })] + (0..<9).map { Data([UInt8($0)]) }
        try a.send(frames)
        #expect(try ZMQSocket.poll([.socket(b)], timeoutMs: 2000).first == true)
        let lent = try b.receive(dontWait: true) { $0.map { Data($0) } }
        #expect(lent == frames)
        #expect(try b.receive(dontWait: true) { $0.count } == nil)
    }

    @Test func mailboxWakesAPollAndCountsDrops() throws {
        let mailbox = try Mailbox<Int>(capacity: 2)
        #expect(try ZMQSocket.poll([.fd(mailbox.fd)], timeoutMs: 0) == [false])
        #expect(mailbox.post(1))
        #expect(mailbox.post(2))
        #expect(!mailbox.post(3))
        #expect(mailbox.dropped == 1)
        #expect(try ZMQSocket.poll([.fd(mailbox.fd)], timeoutMs: 1000) == [true])
        #expect(mailbox.drain() == [1, 2])
        #expect(try ZMQSocket.poll([.fd(mailbox.fd)], timeoutMs: 0) == [false])
    }

    @Test func socketLoopOwnsItsSocketAndStops() async throws {
        let context = ZMQContext()
        let path = "inproc://loop-\(UUID().uuidString)"
        let loop = try SocketLoop<String>(name: "test")
        let (stream, continuation) = AsyncStream.makeStream(of: String.self)
        try await loop.start {
            let socket = try ZMQSocket(context, .pull)
            try socket.bind(path)
            return .init(
                sockets: [socket],
                readable: { _ in
                    while let frames = try? socket.receive(dontWait: true) {
                        continuation.yield(String(decoding: frames[0], as: UTF8.self))
                    }
                },
                received: { messages in for m in messages { continuation.yield("mail:" + m) } },
                finish: { continuation.finish() })
        }
        let push = try ZMQSocket(context, .push)
        try push.connect(path)
        try push.send([Data("hello".utf8)])
        loop.mailbox.post("x")
        var got: Set<String> = []
        for await item in stream {
            got.insert(item)
            if got.count == 2 { break }
        }
        #expect(got == ["hello", "mail:x"])
        push.close()
        await loop.stop()
    }

    @Test func stoppingALoopThatNeverStartedReturns() async throws {
        try await SocketLoop<Int>(name: "idle").stop()
    }

    @Test func curveKeyPairIsZ85() throws {
        guard ZMQContext.hasCurve else { return }
        let pair = try CurveKeyPair.generate()
        #expect(pair.publicKey.count == 40 && pair.secretKey.count == 40)
        #expect(pair.publicKey != pair.secretKey)
    }
}
