import CoffeeDomain
import Foundation
import Synchronization
import ZeroMQ

/// What a follower holds: the anchor it has applied, every live drink at
/// that anchor, and the model of that anchor once one has arrived.
public struct FeedState: Sendable {
    public var anchor: Int64 = 0
    public var drinks: [UUID: Drink] = [:]
    /// The model of `anchor`, or nil until one arrives.
    public var model: ModelSnapshot?
    /// Changes applied from `changes` messages and pages so far (a rate, for benchmarks).
    public var applied = 0
    /// Times the follower read `changes` from the query endpoint: the first
    /// sync, then once per gap, silence or expired anchor.
    public var resyncs = 0
    /// The service went silent, or could not be reached: the follower is
    /// finding it again. Yielded once when it begins; the next state
    /// after the resync clears it.
    public var reconnecting = false

    public init() {}
}

/// The Clone pattern of PROTOCOL.md §3 in one call (§10): subscribes to
/// `changes`, `model` and `heartbeat` first, then reads `changes` from null
/// page by page; drops what was queued at or below its anchor and applies
/// each `changes` whose `previousAnchor` is its anchor. It resyncs from its
/// anchor on a gap, on a `model` or `heartbeat` ahead of it, and after three
/// heartbeat intervals of silence (reconnecting, and asking `locate` for the
/// endpoints again: a restarted service may have bound new ports); from null
/// on `anchor_expired`, or when the store is behind it.
///
/// The loop runs on a thread of its own (its sockets block); the states
/// come out as an `AsyncThrowingStream` that keeps the newest state a slow
/// consumer has not taken, so a consumer is never flooded and never behind
/// by more than one state. A burst of `changes` is applied whole, then
/// yielded as one state. Ending the iteration stops the thread.
public enum FeedFollower {
    /// Where the service is now: called at the start and after each silence.
    public typealias Locate = @Sendable () throws -> (query: String, updates: String)

    /// - Parameters:
    ///   - timeout: how long without reaching the service before the stream
    ///     ends with `QueryClient.Failure`; nil waits for ever.
    ///   - requestTimeout: how long one query may take before it counts as silence.
    public static func follow(
        locate: @escaping Locate, curve: ClientCurve? = nil, timeout: Duration? = nil, requestTimeout: TimeInterval = 5
    ) -> AsyncThrowingStream<FeedState, any Error> {
        let (stream, continuation) = AsyncThrowingStream.makeStream(
            of: FeedState.self, throwing: (any Error).self, bufferingPolicy: .bufferingNewest(1))
        let stopped = Atomic<Bool>(false)
        continuation.onTermination = { _ in stopped.store(true, ordering: .relaxed) }
        let thread = Thread {
            Thread.current.name = "follower"
            var loop = FollowLoop(
                locate: locate, curve: curve, timeout: timeout, requestTimeout: requestTimeout,
                stopped: { stopped.load(ordering: .relaxed) })
            do {
                try loop.run { continuation.yield($0) }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        thread.start()
        return stream
    }
}

/// The follower's loop, on its thread.
struct FollowLoop {
    let locate: FeedFollower.Locate
    let curve: ClientCurve?
    let timeout: Duration?
    let requestTimeout: TimeInterval
    let stopped: () -> Bool
    static let page = 10_000
    /// While changes keep coming, at most one state per interval: each
    /// state the consumer holds makes the follower's next write copy every
    /// drink (copy on write), so a state per burst at full speed spent most
    /// of the follower's time copying. The first change after a pause comes
    /// out at once.
    static let stateInterval = Duration.milliseconds(50)

    private let context = ZMQContext()
    private var state = FeedState()
    private var synced = false
    private var heartbeatInterval = 1.0
    private var lastHeartbeat: ContinuousClock.Instant?
    private var endpoints: (query: String, updates: String) = ("", "")
    private var client: QueryClient?

    init(
        locate: @escaping FeedFollower.Locate, curve: ClientCurve?, timeout: Duration?, requestTimeout: TimeInterval,
        stopped: @escaping () -> Bool
    ) {
        self.locate = locate
        self.curve = curve
        self.timeout = timeout
        self.requestTimeout = requestTimeout
        self.stopped = stopped
    }

    mutating func run(_ yield: (FeedState) -> Void) throws {
        var reachable = ContinuousClock.now
        var socket = try subscribe()
        defer { socket.close() }
        var needSync = true
        // Changes applied but not yet yielded: a burst of messages becomes one
        // state, yielded once the socket has nothing more ready. (A state per
        // message made the consumer's copy of `drinks` and the follower's
        // next write copy the whole dictionary each time.)
        var unyielded = false
        var lastYield = ContinuousClock.now - Self.stateInterval
        while !stopped() {
            if needSync {
                do {
                    try resync()
                } catch let refusal as QueryClient.Refusal {
                    throw refusal  // a refusal other than an expired anchor is not silence: say so
                } catch {
                    try giveUpAfter(reachable)
                    reconnecting(yield)
                    socket.close()
                    socket = try subscribe()  // finds the service again
                    continue
                }
                reachable = .now
                needSync = false
                state.reconnecting = false
                yield(state)
                unyielded = false
            }
            if unyielded {
                // Nothing more ready, and a state's interval since the last:
                // yield. Less than that: wait out the rest for more changes.
                let rest = lastYield + Self.stateInterval - .now
                let waitMs = rest > .zero ? Int(rest.components.attoseconds / 1_000_000_000_000_000) + 1 : 0
                if try ZMQSocket.poll([.socket(socket)], timeoutMs: waitMs).first != true {
                    yield(state)
                    lastYield = .now
                    unyielded = false
                }
            }
            let silence = max(3 * heartbeatInterval, 1)
            // Short polls, so that a stop is noticed; silence is counted across them.
            let deadline = ContinuousClock.now + .milliseconds(Int64(silence * 1000))
            var frames: [Data]?
            while frames == nil, !stopped(), ContinuousClock.now < deadline {
                if try ZMQSocket.poll([.socket(socket)], timeoutMs: 200).first == true {
                    frames = try socket.receive(dontWait: true)
                }
            }
            if stopped() { return }
            guard let frames, frames.count == 2 else {
                // Silence: the service restarted (perhaps elsewhere) or the
                // network went away. Reconnect, and resync from here.
                try giveUpAfter(reachable)
                reconnecting(yield)
                socket.close()
                socket = try subscribe()
                needSync = true
                continue
            }
            reachable = .now
            let topic = String(decoding: frames[0], as: UTF8.self)
            if topic == "changes" {
                // Read in place: every message at full speed comes this way.
                guard let changes = try? frames[1].withUnsafeBytes({ try Changes(json: $0) }) else {
                    needSync = true  // a message it cannot read may have held a change
                    continue
                }
                guard changes.anchor > state.anchor else { continue }  // queued before the resync's reply
                guard changes.previousAnchor == state.anchor else {
                    needSync = true  // a gap: something was missed
                    continue
                }
                apply(changes)
                state.anchor = changes.anchor
                state.model = nil
                unyielded = true
                continue
            }
            guard let message = try? JSONReader.parse(frames[1]), let anchor = try? message.member("anchor").integer()
            else { continue }
            switch topic {
            case "model":
                if anchor > state.anchor {
                    needSync = true  // the changes up to it come first: they were lost
                } else if anchor == state.anchor, let model = try? WireFormat.snapshot(message) {
                    state.model = model
                    yield(state)
                    unyielded = false
                }
            case "heartbeat":
                let now = ContinuousClock.now
                if let last = lastHeartbeat {
                    let seconds = Double((now - last).components.attoseconds) / 1e18 + Double((now - last).components.seconds)
                    heartbeatInterval = min(max(seconds, 0.1), 60)
                }
                lastHeartbeat = now
                if anchor > state.anchor { needSync = true }
            default:
                continue
            }
        }
    }

    private mutating func reconnecting(_ yield: (FeedState) -> Void) {
        guard !state.reconnecting else { return }
        state.reconnecting = true
        yield(state)
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
        client = made
        return made
    }

    /// Reads `changes` from the anchor held (from null the first time, or
    /// after `anchor_expired`), page by page, then asks for the model.
    private mutating func resync() throws {
        state.resyncs += 1
        do {
            try read(from: synced ? state.anchor : nil)
        } catch let refusal as QueryClient.Refusal where refusal.code == "anchor_expired" {
            try read(from: nil)
        } catch {
            client = nil
            throw error
        }
        let model = try? query().model()
        state.model = model?.anchor == state.anchor ? model : nil
    }

    private mutating func read(from start: Int64?) throws {
        var page = try query().changes(since: start, limit: Self.page)
        if let start, page.anchor < start {
            return try read(from: nil)  // the store is behind what is held (restored, or a new one)
        }
        var drinks = start == nil ? [:] : state.drinks
        var applied = 0
        while true {
            for drink in page.added { drinks[drink.uuid] = drink }
            for tombstone in page.deleted { drinks[tombstone.uuid] = nil }
            applied += page.added.count + page.deleted.count
            if !page.hasMore { break }
            page = try query().changes(since: page.anchor, limit: Self.page)
        }
        state.drinks = drinks
        state.anchor = page.anchor
        state.applied += applied
        state.model = nil
        synced = true
    }

    private mutating func apply(_ changes: Changes) {
        for drink in changes.added { state.drinks[drink.uuid] = drink }
        for tombstone in changes.deleted { state.drinks[tombstone.uuid] = nil }
        state.applied += changes.added.count + changes.deleted.count
    }
}
