import CoffeeDomain
import Foundation
import ZeroMQ

/// What a follow loop keeps in step with a service (docs/protocol.md §3, §10):
/// a client's copy of the feed (`FeedFollower`), or a standby's store.
public protocol FeedTarget {
    /// Every change up to this anchor is held.
    var anchor: Int64 { get }
    /// The store's identity `anchor` belongs to (docs/protocol.md §13); nil
    /// until known. A message of another resyncs.
    var identity: StoreIdentity? { get }
    /// Brings what is held up to the service's anchor through `client`:
    /// first, and after a gap, a silence, or a `model` or `heartbeat` ahead.
    mutating func resync(_ client: QueryClient) throws
    /// A `changes` message that follows on from `anchor`.
    mutating func apply(_ changes: Changes) throws
    /// The `model` of `anchor`.
    mutating func model(_ model: ModelSnapshot)
    /// The service's anchor, as a message or heartbeat gave it.
    mutating func heard(anchor: Int64)
    /// Changes were applied and nothing more is ready: a state to show, or
    /// a batch to commit. While changes keep coming, called at most once
    /// per `settleInterval`.
    mutating func settled() throws
    /// The service went silent, or could not be reached: it is being found again.
    mutating func lost()
    static var settleInterval: Duration { get }
}

/// The target will not follow what it found (a standby and a primary of
/// another store, docs/protocol.md §13): it ends the loop, as a refusal does.
public struct FeedRefusal: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

extension FeedTarget {
    public mutating func model(_ model: ModelSnapshot) {}
    public mutating func heard(anchor: Int64) {}
    public mutating func lost() {}
}

/// The Clone pattern of docs/protocol.md §3 on a thread of its own (its sockets
/// block): subscribes to `changes`, `model` and `heartbeat` first, then
/// lets its target resync through the query endpoint; drops what was
/// queued at or below the target's anchor and applies each `changes` whose
/// `previousAnchor` is that anchor. It resyncs on a gap, on a `model` or
/// `heartbeat` ahead of the target, on a message it cannot read or apply,
/// and after three heartbeat intervals of silence (reconnecting, and asking
/// `locate` for the endpoints again: a restarted service may have bound new
/// ports).
public struct FollowLoop<Target: FeedTarget> {
    public private(set) var target: Target
    let locate: FeedFollower.Locate
    let curve: ClientCurve?
    let timeout: Duration?
    let requestTimeout: TimeInterval
    let stopped: () -> Bool

    private let context = ZMQContext()
    private var heartbeatInterval = 1.0
    private var lastHeartbeat: ContinuousClock.Instant?
    private var endpoints: (query: String, updates: String) = ("", "")
    private var client: QueryClient?

    /// - Parameters:
    ///   - timeout: how long without reaching the service before `run`
    ///     throws `QueryClient.Failure`; nil waits for ever.
    ///   - requestTimeout: how long one query may take before it counts as silence.
    ///   - stopped: polled; true ends `run`.
    public init(
        target: Target, locate: @escaping FeedFollower.Locate, curve: ClientCurve?, timeout: Duration?,
        requestTimeout: TimeInterval, stopped: @escaping () -> Bool
    ) {
        self.target = target
        self.locate = locate
        self.curve = curve
        self.timeout = timeout
        self.requestTimeout = requestTimeout
        self.stopped = stopped
    }

    /// Follows until `stopped()`; throws a refusal other than an expired
    /// anchor (the target's resync decides about those), or a failure past `timeout`.
    public mutating func run() throws {
        var reachable = ContinuousClock.now
        var socket = try subscribe()
        defer { socket.close() }
        var needSync = true
        // Changes applied but not yet settled: a burst of messages becomes
        // one state (or one commit), once the socket has nothing more ready.
        var unsettled = false
        var lastSettled = ContinuousClock.now - Target.settleInterval
        while !stopped() {
            if needSync {
                do {
                    if unsettled { try target.settled() }
                    unsettled = false
                    try target.resync(query())
                } catch let refusal as QueryClient.Refusal {
                    throw refusal  // not silence: say so
                } catch let refusal as FeedRefusal {
                    throw refusal
                } catch {
                    client = nil
                    try giveUpAfter(reachable)
                    target.lost()
                    pause()
                    socket.close()
                    socket = try subscribe()  // finds the service again
                    continue
                }
                reachable = .now
                needSync = false
            }
            // A burst is read without a poll per message: the next one, if it is there.
            var frames = try Self.next(socket)
            if frames == nil, unsettled {
                // Nothing more ready, and a settle interval since the last:
                // settle. Less than that: wait out the rest for more changes.
                let rest = lastSettled + Target.settleInterval - .now
                let waitMs = rest > .zero ? Int(rest.components.attoseconds / 1_000_000_000_000_000) + 1 : 0
                if waitMs > 0, try ZMQSocket.poll([.socket(socket)], timeoutMs: waitMs).first == true {
                    frames = try Self.next(socket)
                }
                if frames == nil {
                    do {
                        try target.settled()
                    } catch {
                        needSync = true  // what was applied could not be kept: read it again
                    }
                    lastSettled = .now
                    unsettled = false
                    if needSync { continue }
                }
            }
            let silence = max(3 * heartbeatInterval, 1)
            // Short polls, so that a stop is noticed; silence is counted across them.
            let deadline = ContinuousClock.now + .milliseconds(Int64(silence * 1000))
            while frames == nil, !stopped(), ContinuousClock.now < deadline {
                if try ZMQSocket.poll([.socket(socket)], timeoutMs: 200).first == true {
                    frames = try Self.next(socket)
                }
            }
            if stopped() { break }
            guard let frames, case .message(let topic, let body) = frames else {
                // Silence: the service restarted (perhaps elsewhere) or the
                // network went away. Reconnect, and resync from here.
                try giveUpAfter(reachable)
                target.lost()
                socket.close()
                socket = try subscribe()
                needSync = true
                continue
            }
            reachable = .now
            if case .changes(let read) = body {
                guard let changes = read else {
                    needSync = true  // a message it cannot read may have held a change
                    continue
                }
                if isAnotherHistory(changes.identity) {
                    needSync = true  // restored, promoted or another store: the resync decides
                    continue
                }
                target.heard(anchor: changes.anchor)
                guard changes.anchor > target.anchor else { continue }  // queued before the resync's reply
                guard changes.previousAnchor == target.anchor else {
                    needSync = true  // a gap: something was missed
                    continue
                }
                do {
                    try target.apply(changes)
                    unsettled = true
                } catch {
                    needSync = true
                }
                continue
            }
            guard case .other(let message?) = body, let anchor = try? message.member("anchor").integer() else { continue }
            if isAnotherHistory(StoreIdentity.read(message)) {
                needSync = true
                continue
            }
            target.heard(anchor: anchor)
            switch topic {
            case "model":
                if anchor > target.anchor {
                    needSync = true  // the changes up to it come first: they were lost
                } else if anchor == target.anchor, let model = try? WireFormat.snapshot(message) {
                    target.model(model)
                }
            case "heartbeat":
                let now = ContinuousClock.now
                if let last = lastHeartbeat {
                    let seconds = Double((now - last).components.attoseconds) / 1e18 + Double((now - last).components.seconds)
                    heartbeatInterval = min(max(seconds, 0.1), 60)
                }
                lastHeartbeat = now
                if anchor > target.anchor { needSync = true }
            default:
                continue
            }
        }
        if unsettled { try? target.settled() }
    }

    /// Whether a message's identity is another than the target's: both known, and different.
    private func isAnotherHistory(_ identity: StoreIdentity?) -> Bool {
        guard let identity, let held = target.identity else { return false }
        return identity != held
    }

    /// A message as read: `changes` decoded in place from ZeroMQ's buffer
    /// (nil when it cannot be read), any other topic's body as JSON.
    enum Incoming {
        case message(topic: String, Body)
        /// Not two frames.
        case malformed
    }

    enum Body {
        case changes(Changes?)
        case other(JSONValue?)
    }

    /// The next message if one is there, read without copying its frames.
    static func next(_ socket: ZMQSocket) throws -> Incoming? {
        try socket.receive(dontWait: true) { frames -> Incoming in
            guard frames.count == 2 else { return .malformed }
            let topic = String(decoding: frames[0], as: UTF8.self)
            if topic == "changes" { return .message(topic: topic, .changes(try? Changes(json: frames[1]))) }
            return .message(topic: topic, .other(try? JSONReader.parse(frames[1])))
        }
    }

    /// After a failed resync: a moment before the next, so that a refusal
    /// that comes at once (a store that cannot write) is not a busy loop.
    private func pause() {
        let until = ContinuousClock.now + .milliseconds(200)
        while !stopped(), ContinuousClock.now < until { usleep(20_000) }
    }

    private mutating func subscribe() throws -> ZMQSocket {
        if let found = try? locate() { endpoints = found }
        client = nil  // a fresh query socket too: a late reply never answers the next request
        let socket = try ZMQSocket(context, .sub)
        try socket.setLinger(ms: 0)
        try socket.secure(curve)
        for topic in ["changes", "model", "heartbeat"] { try socket.subscribe(topic) }
        try socket.connect(endpoints.updates)
        return socket
    }

    private func giveUpAfter(_ reachable: ContinuousClock.Instant) throws {
        guard let timeout, ContinuousClock.now - reachable > timeout else { return }
        throw QueryClient.Failure(description: "no word from \(endpoints.updates) or \(endpoints.query) in \(timeout)")
    }

    private mutating func query() throws -> QueryClient {
        if let client { return client }
        let made = try QueryClient(endpoint: endpoints.query, timeout: requestTimeout, curve: curve)
        made.interrupted = stopped
        client = made
        return made
    }
}
