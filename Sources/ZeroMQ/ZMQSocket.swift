import CZeroMQ
import Foundation

/// One ZeroMQ socket.
///
/// - Important: a socket belongs to one thread for its whole life. Create it,
///   use it and close it on that thread (see `SocketLoop`). The one
///   exception is libzmq's own: a socket may move between threads across a
///   full memory barrier, which `SocketLoop.runIfIdle` gives with a lock.
public final class ZMQSocket {
    public enum Kind: Sendable {
        case pub, sub, xpub, xsub, router, dealer, req, rep, push, pull, pair

        var raw: Int32 {
            switch self {
            case .pub: ZMQ_PUB
            case .sub: ZMQ_SUB
            case .xpub: ZMQ_XPUB
            case .xsub: ZMQ_XSUB
            case .router: ZMQ_ROUTER
            case .dealer: ZMQ_DEALER
            case .req: ZMQ_REQ
            case .rep: ZMQ_REP
            case .push: ZMQ_PUSH
            case .pull: ZMQ_PULL
            case .pair: ZMQ_PAIR
            }
        }
    }

    private(set) var handle: UnsafeMutableRawPointer?
    public let kind: Kind
    /// Kept so that the context outlives the socket: terminating a context
    /// waits for its open sockets, so dropping it first would hang.
    private let context: ZMQContext
    private var scratchMessages: [zmq_msg_t] = []
    private var scratchFrames: [UnsafeRawBufferPointer] = []

    public init(_ context: ZMQContext, _ kind: Kind) throws(ZMQError) {
        guard let h = zmq_socket(context.handle, kind.raw) else { throw ZMQError.last("creating a \(kind) socket") }
        handle = h
        self.kind = kind
        self.context = context
        // Bounded linger by default, so that closing never hangs shutdown.
        try setInt(ZMQ_LINGER, 500, "ZMQ_LINGER")
    }

    deinit { close() }

    /// Closes the socket; pending outgoing messages get the linger period.
    public func close() {
        if let h = handle { zmq_close(h) }
        handle = nil
    }

    // MARK: Endpoints

    /// Binds, failing with the endpoint named (a taken port is an error, never silent).
    public func bind(_ endpoint: String) throws(ZMQError) {
        guard zmq_bind(handle, endpoint) == 0 else { throw ZMQError.last("binding \(endpoint)") }
    }

    /// Binds every endpoint and returns the endpoints really bound (real
    /// ports for `:*`); the first failure throws, naming its endpoint.
    public func bind(all endpoints: [String]) throws(ZMQError) -> [String] {
        var bound: [String] = []
        for endpoint in endpoints {
            try bind(endpoint)
            bound.append(lastEndpoint)
        }
        return bound
    }

    public func connect(_ endpoint: String) throws(ZMQError) {
        guard zmq_connect(handle, endpoint) == 0 else { throw ZMQError.last("connecting to \(endpoint)") }
    }

    /// The endpoint last bound, with the real port when bound to `*` or 0.
    public var lastEndpoint: String {
        var buffer = [CChar](repeating: 0, count: 1024)
        var size = buffer.count
        guard zmq_getsockopt(handle, ZMQ_LAST_ENDPOINT, &buffer, &size) == 0 else { return "" }
        let bytes = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        return String(decoding: bytes, as: UTF8.self)
    }

    // MARK: Options

    public func setInt(_ option: Int32, _ value: Int32, _ name: String) throws(ZMQError) {
        var v = value
        guard zmq_setsockopt(handle, option, &v, MemoryLayout<Int32>.size) == 0 else {
            throw ZMQError.last("setting \(name) to \(value)")
        }
    }

    public func setInt64(_ option: Int32, _ value: Int64, _ name: String) throws(ZMQError) {
        var v = value
        guard zmq_setsockopt(handle, option, &v, MemoryLayout<Int64>.size) == 0 else {
            throw ZMQError.last("setting \(name) to \(value)")
        }
    }

    public func setBytes(_ option: Int32, _ value: [UInt8], _ name: String) throws(ZMQError) {
        let rc = value.withUnsafeBytes { zmq_setsockopt(handle, option, $0.baseAddress, $0.count) }
        guard rc == 0 else { throw ZMQError.last("setting \(name)") }
    }

    /// Send high-water mark: messages queued per peer before PUB drops or others block.
    public func setSendHighWaterMark(_ n: Int32) throws(ZMQError) { try setInt(ZMQ_SNDHWM, n, "ZMQ_SNDHWM") }
    public func setReceiveHighWaterMark(_ n: Int32) throws(ZMQError) { try setInt(ZMQ_RCVHWM, n, "ZMQ_RCVHWM") }
    /// How long pending messages may delay `close()`, in milliseconds.
    public func setLinger(ms: Int32) throws(ZMQError) { try setInt(ZMQ_LINGER, ms, "ZMQ_LINGER") }
    /// Largest inbound message; a peer that sends a bigger one is disconnected.
    public func setMaxMessageSize(_ bytes: Int64) throws(ZMQError) {
        try setInt64(ZMQ_MAXMSGSIZE, bytes, "ZMQ_MAXMSGSIZE")
    }
    public func subscribe(_ prefix: String) throws(ZMQError) { try setBytes(ZMQ_SUBSCRIBE, Array(prefix.utf8), "ZMQ_SUBSCRIBE") }
    public func setReceiveTimeout(ms: Int32) throws(ZMQError) { try setInt(ZMQ_RCVTIMEO, ms, "ZMQ_RCVTIMEO") }
    public func setSendTimeout(ms: Int32) throws(ZMQError) { try setInt(ZMQ_SNDTIMEO, ms, "ZMQ_SNDTIMEO") }
    /// ZMTP heartbeats: ping every `interval` ms, drop the peer after `timeout` ms of silence.
    public func setHeartbeat(intervalMs: Int32, timeoutMs: Int32) throws(ZMQError) {
        try setInt(ZMQ_HEARTBEAT_IVL, intervalMs, "ZMQ_HEARTBEAT_IVL")
        try setInt(ZMQ_HEARTBEAT_TIMEOUT, timeoutMs, "ZMQ_HEARTBEAT_TIMEOUT")
    }
    public func setReconnect(intervalMs: Int32, maxMs: Int32) throws(ZMQError) {
        try setInt(ZMQ_RECONNECT_IVL, intervalMs, "ZMQ_RECONNECT_IVL")
        try setInt(ZMQ_RECONNECT_IVL_MAX, maxMs, "ZMQ_RECONNECT_IVL_MAX")
    }
    /// XPUB: pass every subscribe up, not only the first per topic.
    public func setXPubVerbose(_ on: Bool) throws(ZMQError) {
        try setInt(ZMQ_XPUB_VERBOSE, on ? 1 : 0, "ZMQ_XPUB_VERBOSE")
    }
    /// XPUB: pass every subscribe and unsubscribe up, not only the first per topic.
    public func setXPubVerboser(_ on: Bool) throws(ZMQError) {
        try setInt(ZMQ_XPUB_VERBOSER, on ? 1 : 0, "ZMQ_XPUB_VERBOSER")
    }
    // MARK: Security (CurveZMQ, ZAP)

    /// Makes this socket a CURVE server with `secretKey` (Z85); a ZAP
    /// handler in the same context decides who may connect.
    public func setCurveServer(secretKey: String) throws(ZMQError) {
        try setInt(ZMQ_CURVE_SERVER, 1, "ZMQ_CURVE_SERVER")
        try setBytes(ZMQ_CURVE_SECRETKEY, Array(secretKey.utf8), "ZMQ_CURVE_SECRETKEY")
    }

    /// Makes this socket a CURVE client of the server whose public key is
    /// `serverKey`, with its own key pair (all Z85).
    public func setCurveClient(serverKey: String, publicKey: String, secretKey: String) throws(ZMQError) {
        try setBytes(ZMQ_CURVE_SERVERKEY, Array(serverKey.utf8), "ZMQ_CURVE_SERVERKEY")
        try setBytes(ZMQ_CURVE_PUBLICKEY, Array(publicKey.utf8), "ZMQ_CURVE_PUBLICKEY")
        try setBytes(ZMQ_CURVE_SECRETKEY, Array(secretKey.utf8), "ZMQ_CURVE_SECRETKEY")
    }

    /// The ZAP domain this socket's handshakes are checked under (RFC 27):
    /// how the ZAP handler tells the endpoints apart.
    public func setZapDomain(_ domain: String) throws(ZMQError) {
        try setBytes(ZMQ_ZAP_DOMAIN, Array(domain.utf8), "ZMQ_ZAP_DOMAIN")
    }

    /// ROUTER: fail sends to unknown peers instead of dropping them silently.
    public func setRouterMandatory(_ on: Bool) throws(ZMQError) {
        try setInt(ZMQ_ROUTER_MANDATORY, on ? 1 : 0, "ZMQ_ROUTER_MANDATORY")
    }

    // MARK: Messages

    /// Sends all frames as one multipart message.
    ///
    /// - Returns: false when `dontWait` is set and the message would block
    ///   (for PUB: never; PUB drops at the high-water mark instead).
    @discardableResult
    public func send(_ frames: [Data], dontWait: Bool = false) throws(ZMQError) -> Bool {
        for (i, frame) in frames.enumerated() {
            let sent = frame.withUnsafeBytes { send(frame: $0, first: i == 0, more: i < frames.count - 1, dontWait: dontWait) }
            guard try sent.get() else { return false }
        }
        return true
    }

    /// `send([Data(first), Data(second)])` without making either `Data` (or
    /// the array): the publisher's `changes` message, sent for every commit,
    /// cost three allocations and a copy of its body that way.
    @discardableResult
    public func send(_ first: [UInt8], _ second: [UInt8], dontWait: Bool = false) throws(ZMQError) -> Bool {
        guard try first.withUnsafeBytes({ send(frame: $0, first: true, more: true, dontWait: dontWait) }).get() else {
            return false
        }
        return try second.withUnsafeBytes { send(frame: $0, first: false, more: false, dontWait: dontWait) }.get()
    }

    /// One frame; false when it is the message's first, `dontWait` is set
    /// and it would block (a later frame never does once the first went).
    private func send(frame: UnsafeRawBufferPointer, first: Bool, more: Bool, dontWait: Bool) -> Result<Bool, ZMQError> {
        let flags: Int32 = (dontWait ? ZMQ_DONTWAIT : 0) | (more ? ZMQ_SNDMORE : 0)
        while zmq_send(handle, frame.baseAddress, frame.count, flags) < 0 {
            let error = ZMQError.last("sending")
            if error.isInterrupted { continue }
            if error.isAgain && first { return .success(false) }
            return .failure(error)
        }
        return .success(true)
    }

    public func send(_ strings: [String], dontWait: Bool = false) throws(ZMQError) -> Bool {
        try send(strings.map { Data($0.utf8) }, dontWait: dontWait)
    }

    /// Receives one whole multipart message.
    ///
    /// - Returns: nil when `dontWait` is set and nothing is waiting, or a
    ///   receive timeout passed.
    public func receive(dontWait: Bool = false) throws(ZMQError) -> [Data]? {
        try receive(dontWait: dontWait) { frames in frames.map { Data($0) } }
    }

    /// Receives one message and lends its frames to `body` without copying
    /// them; nil when `dontWait` and nothing waits. The buffers are valid
    /// only inside `body`. For the bus, where a copy per frame was a
    /// measurable share of the ingest thread.
    public func receive<R>(dontWait: Bool = false, _ body: ([UnsafeRawBufferPointer]) -> R) throws(ZMQError) -> R? {
        try receive(dontWait: dontWait, userID: false) { frames, _ in body(frames) }
    }

    /// `receive(dontWait:_:)` that also lends the message's `User-Id`
    /// property: the name a ZAP handler gave the peer's connection (nil
    /// without authentication, or when `userID` is false, which saves
    /// making a string per message).
    public func receive<R>(dontWait: Bool = false, userID: Bool, _ body: ([UnsafeRawBufferPointer], String?) -> R)
        throws(ZMQError) -> R?
    {
        // Reused from call to call (the socket has one thread): growing a
        // fresh array per message was an allocation or two per bus message.
        var messages = scratchMessages
        var frames = scratchFrames
        scratchMessages = []
        scratchFrames = []
        defer {
            for i in messages.indices { zmq_msg_close(&messages[i]) }
            messages.removeAll(keepingCapacity: true)
            frames.removeAll(keepingCapacity: true)
            scratchMessages = messages
            scratchFrames = frames
        }
        while true {
            var msg = zmq_msg_t()
            zmq_msg_init(&msg)
            let flags: Int32 = dontWait && messages.isEmpty ? ZMQ_DONTWAIT : 0
            let rc = zmq_msg_recv(&msg, handle, flags)
            if rc < 0 {
                zmq_msg_close(&msg)
                let error = ZMQError.last("receiving")
                if error.isInterrupted { continue }
                if error.isAgain && messages.isEmpty { return nil }
                throw error
            }
            messages.append(msg)
            if zmq_msg_more(&messages[messages.count - 1]) == 0 { break }
        }
        // zmq_msg_t is a fixed blob that may be moved while not in use; the
        // data pointers stay put (long messages live on the heap, short ones
        // are read here, after the array has stopped growing).
        for i in messages.indices {
            frames.append(UnsafeRawBufferPointer(start: zmq_msg_data(&messages[i]), count: zmq_msg_size(&messages[i])))
        }
        // The last frame came from the wire (a ROUTER prepends the first itself).
        let user = userID ? zmq_msg_gets(&messages[messages.count - 1], "User-Id").map { String(cString: $0) } : nil
        return body(frames, user)
    }

    // MARK: Polling

    /// The descriptor that becomes readable when `isReadable` (or whether
    /// the socket can send) may have changed (`ZMQ_FD`). Edge-triggered:
    /// any operation on the socket may consume its signal, so check
    /// `isReadable` after each one rather than trusting the descriptor alone.
    public var fileDescriptor: Int32 {
        var fd: Int32 = -1
        var size = MemoryLayout<Int32>.size
        _ = zmq_getsockopt(handle, ZMQ_FD, &fd, &size)
        return fd
    }

    /// Whether a message waits to be received now (`ZMQ_EVENTS`); asking
    /// also processes the socket's pending commands.
    public var isReadable: Bool {
        var events: Int32 = 0
        var size = MemoryLayout<Int32>.size
        guard zmq_getsockopt(handle, ZMQ_EVENTS, &events, &size) == 0 else { return false }
        return events & Int32(ZMQ_POLLIN) != 0
    }
}
