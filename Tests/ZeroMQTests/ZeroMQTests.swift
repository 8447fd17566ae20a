import Foundation
import Synchronization
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

    /// Two byte arrays go as one message of two frames (the publisher's
    /// `changes`); with `dontWait`, a message that would block is refused
    /// whole, its first frame included.
    @Test func twoFramesFromBytes() throws {
        let (a, b) = try Self.pair()
        defer {
            a.close()
            b.close()
        }
        let body = (0..<300).map { UInt8($0 % 251) }
        #expect(try a.send(Array("changes".utf8), body, dontWait: true))
        #expect(try a.send([], [7]))
        #expect(try ZMQSocket.poll([.socket(b)], timeoutMs: 2000) == [true])
        #expect(try b.receive(dontWait: true) == [Data("changes".utf8), Data(body)])
        #expect(try b.receive(dontWait: true) == [Data(), Data([7])])
        #expect(try b.receive(dontWait: true) == nil)

        let context = ZMQContext()
        let lonely = try ZMQSocket(context, .push)  // no peer: a send would block
        defer { lonely.close() }
        try lonely.bind("inproc://lonely-\(UUID().uuidString)")
        #expect(try !lonely.send(Array("changes".utf8), body, dontWait: true))
    }

    /// A poll set kept from wait to wait answers for each wait anew.
    @Test func aPollSetAnswersEachWaitAnew() throws {
        let (a, b) = try Self.pair()
        defer {
            a.close()
            b.close()
        }
        let mailbox = try Mailbox<Int>()
        var set = ZMQSocket.PollSet([.socket(b), .fd(mailbox.fd)])
        try set.wait(timeoutMs: 0)
        #expect(!set.isReadable(0) && !set.isReadable(1))
        try a.send([Data("one".utf8)])
        try set.wait(timeoutMs: 2000)
        #expect(set.isReadable(0) && !set.isReadable(1))
        _ = try b.receive(dontWait: true)
        mailbox.post(1)
        try set.wait(timeoutMs: 2000)
        #expect(!set.isReadable(0) && set.isReadable(1))
        _ = mailbox.drain()
        try set.wait(timeoutMs: 0)
        #expect(!set.isReadable(0) && !set.isReadable(1))
    }

    @Test func mailboxWakesAPollAndCountsDrops() throws {
        let mailbox = try Mailbox<Int>(capacity: 2)
        #expect(try ZMQSocket.poll([.fd(mailbox.fd)], timeoutMs: 0) == [false])
        #expect(mailbox.count == 0)
        #expect(mailbox.post(1))
        #expect(mailbox.post(2))
        #expect(!mailbox.post(3))
        #expect(mailbox.count == 2)
        #expect(mailbox.dropped == 1)
        #expect(try ZMQSocket.poll([.fd(mailbox.fd)], timeoutMs: 1000) == [true])
        #expect(mailbox.drain() == [1, 2])
        #expect(mailbox.count == 0)
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

    /// A lendable loop whose one PAIR socket sends what is posted and
    /// yields what it reads.
    static func lendableLoop(
        _ context: ZMQContext, _ path: String, read: @escaping @Sendable (String) -> Void,
        block: DispatchSemaphore? = nil
    ) async throws -> SocketLoop<String> {
        let loop = try SocketLoop<String>(name: "lendable", lendable: true)
        try await loop.start {
            let socket = try ZMQSocket(context, .pair)
            try socket.bind(path)
            return .init(
                sockets: [socket],
                readable: { _ in
                    while let frames = try? socket.receive(dontWait: true) { read(String(decoding: frames[0], as: UTF8.self)) }
                },
                received: { messages in
                    for m in messages {
                        if m == "block" { block?.wait() } else { _ = try? socket.send([Data(m.utf8)]) }
                    }
                })
        }
        return loop
    }

    /// Sends made here (`runIfIdle`) and through the mailbox arrive in the
    /// order they were made: a borrower never overtakes a posted message.
    /// The loop still notices what its socket receives, though the
    /// borrower's sends may consume its descriptor's signal.
    @Test func aLendableLoopKeepsOrderAndStillReads() async throws {
        let context = ZMQContext()
        let path = "inproc://lend-\(UUID().uuidString)"
        let (stream, continuation) = AsyncStream.makeStream(of: String.self)
        let loop = try await Self.lendableLoop(context, path, read: { continuation.yield($0) })
        let peer = try ZMQSocket(context, .pair)
        try peer.setReceiveTimeout(ms: 10_000)
        try peer.connect(path)
        var lent = 0
        for i in 0..<3000 {
            let text = "\(i)"
            // Every tenth through the mailbox, and a pause now and then so
            // that the loop is sometimes idle, sometimes still draining.
            if i % 10 == 5 { usleep(300) }
            if i % 10 == 0 || !loop.runIfIdle({ sockets in _ = try? sockets[0].send([Data(text.utf8)]) }) {
                loop.mailbox.post(text)
            } else {
                lent += 1
            }
            if i == 1500 { try peer.send([Data("from the peer".utf8)]) }
        }
        var order: [Int] = []
        while order.count < 3000, let frames = try peer.receive() {
            order.append(Int(String(decoding: frames[0], as: UTF8.self)) ?? -1)
        }
        let firstOutOfOrder = order.indices.first { order[$0] != $0 }
        #expect(order.count == 3000 && firstOutOfOrder == nil, "out of order from \(firstOutOfOrder ?? -1)")
        #expect(lent > 0)
        var heard: String?
        for await text in stream {
            heard = text
            break
        }
        #expect(heard == "from the peer")
        peer.close()
        await loop.stop()
    }

    /// A message that arrives while a borrower sends is still read by the
    /// loop, with no other wake-up to help: the borrower's send may have
    /// consumed the descriptor's signal, so it has the loop look again.
    @Test func aLoopReadsWhatArrivesWhileABorrowerSends() async throws {
        let context = ZMQContext()
        let path = "inproc://lend-read-\(UUID().uuidString)"
        let heard = Mutex<Set<String>>([])
        let loop = try await Self.lendableLoop(context, path, read: { text in heard.withLock { _ = $0.insert(text) } })
        let peer = try ZMQSocket(context, .pair)
        try peer.connect(path)
        for round in 0..<200 {
            try peer.send([Data("ping \(round)".utf8)])
            var sent = false
            while !sent {
                sent = loop.runIfIdle { sockets in
                    for _ in 0..<20 { _ = try? sockets[0].send([Data("x".utf8)], dontWait: true) }
                }
            }
            while (try? peer.receive(dontWait: true)) != nil {}  // so that the loop's queue never fills
            let deadline = ContinuousClock.now + .seconds(3)
            while !heard.withLock({ $0.contains("ping \(round)") }), ContinuousClock.now < deadline { usleep(100) }
            guard heard.withLock({ $0.contains("ping \(round)") }) else {
                Issue.record("the loop never read ping \(round); it heard \(heard.withLock { $0.count }) pings")
                break
            }
        }
        peer.close()
        await loop.stop()
    }

    /// A loop handling a wake-up, or one that is not lendable, lends nothing.
    @Test func aBusyOrPlainLoopLendsNothing() async throws {
        let context = ZMQContext()
        let block = DispatchSemaphore(value: 0)
        let loop = try await Self.lendableLoop(context, "inproc://busy-\(UUID().uuidString)", read: { _ in }, block: block)
        loop.mailbox.post("block")
        // Until the loop is inside its handler, an idle loop may lend.
        var refused = false
        for _ in 0..<5000 where !refused {
            refused = !loop.runIfIdle { _ in }
            if !refused { usleep(200) }
        }
        #expect(refused)
        #expect(!loop.runIfIdle { _ in Issue.record("ran while the loop was busy") })
        block.signal()
        await loop.stop()
        #expect(!loop.runIfIdle { _ in Issue.record("ran on a stopped loop") })

        let plain = try SocketLoop<String>(name: "plain")
        try await plain.start { .init(sockets: []) }
        #expect(!plain.runIfIdle { _ in Issue.record("a plain loop lent its sockets") })
        await plain.stop()
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
