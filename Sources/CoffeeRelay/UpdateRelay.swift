import CoffeeLifecycle
import CoffeeLogging
import Foundation
import Synchronization
import ZeroMQ

/// `coffee-tracker relay` (docs/protocol.md §11): one update endpoint forwarded
/// to many subscribers by libzmq's own proxy, XSUB to XPUB, on a thread of
/// its own (`relay-proxy`). Every message passes unchanged, so `changes`
/// chains stay whole through any number of relays.
///
/// Beside the proxy, a second thread (`relay`) keeps the ZeroMQ guide's last
/// value cache: it reads the proxy's capture (a copy of every frame) to keep
/// the last `model` and to count, and owns an XPUB that the proxy's XSUB
/// also connects to. The XSUB passes each subscription up to that XPUB as to
/// the service, so a new subscriber's subscription reaches the relay's
/// thread after the proxy's XPUB has registered it; the thread then
/// publishes the cached model through the proxy, and the new subscriber has
/// it at once (the others get it again, the same model).
///
/// The relay subscribes upstream to everything itself, so the cache and the
/// counts hold whoever is connected. A drain (SIGTERM) stops the proxy and
/// gives the subscribers `drainMs` to take what is queued for them.
public final class UpdateRelay: Service {
    public struct Configuration: Sendable {
        /// The update endpoint followed: a service's, or another relay's.
        public var from: String
        public var bind: [String]
        /// As a CURVE client of `from`: the server's public key and our pair.
        public var upstreamKeys: (serverKey: String, publicKey: String, secretKey: String)?
        /// As a CURVE server to its subscribers (ZAP domain `updates`).
        public var downstreamCurve: CurveServerSettings?
        /// Messages queued per subscriber (and upstream) before dropping.
        public var highWaterMark: Int32 = 10_000
        public var drainMs: Int32 = 2000
        /// How often the counts are logged.
        public var reportInterval: Duration = .seconds(60)

        public init(from: String, bind: [String]) {
            self.from = from
            self.bind = bind
        }
    }

    /// What the relay has forwarded and seen, for its log and tests.
    public struct Counts: Sendable, Equatable, CustomStringConvertible {
        public var changes = 0
        public var models = 0
        public var heartbeats = 0
        public var other = 0
        public var subscriptions = 0
        /// Cached models sent to a new subscriber.
        public var lastValueSends = 0
        /// `changes` whose `previousAnchor` was not the anchor before:
        /// messages lost upstream, before the relay (libzmq drops at a
        /// full queue and says nothing; the chain shows it).
        public var upstreamGaps = 0

        mutating func add(_ other: Counts) {
            changes += other.changes
            models += other.models
            heartbeats += other.heartbeats
            self.other += other.other
            subscriptions += other.subscriptions
            lastValueSends += other.lastValueSends
            upstreamGaps += other.upstreamGaps
        }

        public var description: String {
            "changes=\(changes) models=\(models) heartbeats=\(heartbeats) other=\(other) subscriptions=\(subscriptions) lastValueSends=\(lastValueSends) upstreamGaps=\(upstreamGaps)"
        }
    }

    public let name = "relay"
    private let configuration: Configuration
    private let context: ZMQContext
    private let logger: Logger
    private let id = UUID().uuidString
    private let loop: SocketLoop<Command>
    private let counts = Mutex(Counts())
    private let proxyEnded = Mutex<(done: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))
    private let bound = Mutex<[String]>([])

    private enum Command: Sendable { case terminate }

    public init(configuration: Configuration, context: ZMQContext, logger: Logger) throws {
        self.configuration = configuration
        self.context = context
        self.logger = logger
        loop = try SocketLoop(name: "relay")
    }

    public var current: Counts { counts.withLock { $0 } }
    /// The endpoints bound, with the ports the system chose for `:0` or `*`.
    public var endpoints: [String] { bound.withLock { $0 } }

    private var captureEndpoint: String { "inproc://relay-capture-\(id)" }
    private var controlEndpoint: String { "inproc://relay-control-\(id)" }
    private var lastValueEndpoint: String { "inproc://relay-last-value-\(id)" }

    public func start() async throws {
        let configuration = configuration
        let context = context
        let (capture, control, lastValue) = (captureEndpoint, controlEndpoint, lastValueEndpoint)
        try await loop.start { [self] in
            let captureSocket = try ZMQSocket(context, .pair)
            try captureSocket.setReceiveHighWaterMark(0)  // the proxy waits rather than lose a count
            try captureSocket.bind(capture)
            let controlSocket = try ZMQSocket(context, .pair)
            try controlSocket.bind(control)
            let lastValueSocket = try ZMQSocket(context, .xpub)
            try lastValueSocket.setXPubVerbose(true)
            try lastValueSocket.bind(lastValue)
            var cachedModel: Data?
            var lastAnchor: Int64?
            var nextReport = ContinuousClock.now + configuration.reportInterval
            return SocketLoop<Command>.Handler(
                sockets: [captureSocket, lastValueSocket, controlSocket],
                readable: { index in
                    switch index {
                    case 0:
                        // Counted here and published once per wake-up: the
                        // capture sees every message, and a lock per message
                        // was a share of the relay's CPU beside a bare proxy.
                        var tally = Counts()
                        while (try? captureSocket.receive(
                            dontWait: true,
                            { frames in
                                Self.captured(frames, into: &tally, model: &cachedModel, lastAnchor: &lastAnchor)
                            })) != nil
                        {}
                        self.counts.withLock { $0.add(tally) }
                    case 1:
                        while let frames = try? lastValueSocket.receive(dontWait: true) {
                            guard let first = frames.first?.first, first == 1, let model = cachedModel else { continue }
                            let prefix = frames[0].dropFirst()
                            guard Data("model".utf8).starts(with: prefix) else { continue }
                            if (try? lastValueSocket.send([Data("model".utf8), model], dontWait: true)) == true {
                                self.counts.withLock { $0.lastValueSends += 1 }
                            }
                        }
                    default:
                        _ = try? controlSocket.receive(dontWait: true)  // STATISTICS replies, unused
                    }
                },
                received: { commands in
                    for case .terminate in commands { _ = try? controlSocket.send([Data("TERMINATE".utf8)]) }
                },
                tick: {
                    let now = ContinuousClock.now
                    if now >= nextReport {
                        self.report()
                        nextReport = now + configuration.reportInterval
                    }
                    let left = nextReport - now
                    return max(1, Int(left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000))
                })
        }

        // The proxy's sockets: made and bound here, so that a bad endpoint
        // fails the start; used only by the proxy's thread after this.
        let frontend = try ZMQSocket(context, .xsub)
        try frontend.setReceiveHighWaterMark(configuration.highWaterMark)
        if let keys = configuration.upstreamKeys {
            try frontend.setCurveClient(serverKey: keys.serverKey, publicKey: keys.publicKey, secretKey: keys.secretKey)
        }
        try frontend.setReconnect(intervalMs: 100, maxMs: 2000)
        try frontend.connect(configuration.from)
        try frontend.connect(lastValue)
        _ = try frontend.send([Data([1])])  // everything, whoever is subscribed below
        let backend = try ZMQSocket(context, .xpub)
        try backend.setXPubVerbose(true)  // every subscription up, so each new subscriber gets the cached model
        try backend.setSendHighWaterMark(configuration.highWaterMark)
        try backend.setLinger(ms: configuration.drainMs)
        if let curve = configuration.downstreamCurve {
            try backend.setZapDomain(curve.domain)
            try backend.setCurveServer(secretKey: curve.secretKey)
        }
        let endpoints = try backend.bind(all: configuration.bind)
        bound.withLock { $0 = endpoints }
        let captureSide = try ZMQSocket(context, .pair)
        try captureSide.setSendHighWaterMark(0)
        try captureSide.connect(capture)
        let controlSide = try ZMQSocket(context, .pair)
        try controlSide.connect(control)
        let sockets = ProxySockets(frontend: frontend, backend: backend, capture: captureSide, control: controlSide)
        let thread = Thread { [self] in
            do throws(ZMQError) {
                try ZMQProxy.runSteerable(
                    frontend: sockets.frontend, backend: sockets.backend, capture: sockets.capture, control: sockets.control)
            } catch {
                if !error.isTerminated { logger.error("the proxy stopped", metadata: ["error": "\(error)"]) }
            }
            sockets.close()
            let waiter = proxyEnded.withLock { state in
                state.done = true
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume()
        }
        thread.name = "relay-proxy"
        thread.start()
        logger.info("relaying", metadata: ["from": "\(configuration.from)", "bind": "\(endpoints.joined(separator: ","))"])
    }

    public func run() async throws {
        await gracefulShutdown()
        loop.mailbox.post(.terminate)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = proxyEnded.withLock { state in
                if !state.done { state.waiter = continuation }
                return state.done
            }
            if done { continuation.resume() }
        }
        await loop.stop()
        report()
    }

    /// Logs the counts (every `reportInterval`, on SIGUSR1, and at the end).
    public func report() {
        logger.notice("relay counts", metadata: ["counts": "\(current)"])
    }

    /// One message the proxy forwarded, its frames lent by libzmq:
    /// counted; a model cached (the one copy made); a `changes` chain checked.
    static func captured(
        _ frames: [UnsafeRawBufferPointer], into tally: inout Counts, model: inout Data?, lastAnchor: inout Int64?
    ) {
        guard let topic = frames.first else { return }
        if frames.count == 1, let first = topic.first, first == 0 || first == 1 {
            if first == 1 { tally.subscriptions += 1 }
            return
        }
        if topic.elementsEqual("changes".utf8) {
            tally.changes += 1
            if frames.count > 1, let (anchor, previous) = anchors(Data(frames[1].prefix(80))) {
                if let lastAnchor, lastAnchor != previous { tally.upstreamGaps += 1 }
                lastAnchor = anchor
            }
        } else if topic.elementsEqual("model".utf8) {
            tally.models += 1
            if frames.count > 1 { model = Data(frames[1]) }
        } else if topic.elementsEqual("heartbeat".utf8) {
            tally.heartbeats += 1
        } else {
            tally.other += 1
        }
    }

    /// `anchor` and `previousAnchor` from the head of a `changes` body,
    /// which the service writes first (`{"anchor":N,"previousAnchor":M,…`),
    /// without parsing the rest; nil for any other shape.
    static func anchors(_ body: Data) -> (anchor: Int64, previous: Int64)? {
        // The store's identity may come first (docs/protocol.md §13):
        // `{"store":"…","epoch":N,"anchor":…,"previousAnchor":…`.
        let head = body.prefix(160)
        func number(after key: String) -> Int64? {
            guard let range = head.firstRange(of: Data(key.utf8)) else { return nil }
            let digits = head[range.upperBound...].prefix { $0 >= 0x30 && $0 <= 0x39 }
            return Int64(String(decoding: digits, as: UTF8.self))
        }
        let anchor =
            number(after: #"{"anchor":"#) ?? (head.starts(with: Data(#"{"store":"#.utf8)) ? number(after: #","anchor":"#) : nil)
        guard let anchor, let previous = number(after: #","previousAnchor":"#) else { return nil }
        return (anchor, previous)
    }
}

/// The proxy's four sockets, handed to its thread once and closed there.
private final class ProxySockets: @unchecked Sendable {
    let frontend: ZMQSocket
    let backend: ZMQSocket
    let capture: ZMQSocket
    let control: ZMQSocket

    init(frontend: ZMQSocket, backend: ZMQSocket, capture: ZMQSocket, control: ZMQSocket) {
        (self.frontend, self.backend, self.capture, self.control) = (frontend, backend, capture, control)
    }

    func close() {
        for socket in [frontend, capture, control, backend] { socket.close() }
    }
}
