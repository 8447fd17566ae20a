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
    /// The store's identity `anchor` belongs to (docs/protocol.md §13): nil
    /// until the first read, or from a service that does not say.
    public var identity: StoreIdentity?
    /// Times the follower found another store or epoch (a restore, a
    /// promotion, another service) and read everything again from null:
    /// a consumer says so once each time it goes up.
    public var identityChanges = 0
    /// What the person set (docs/protocol.md §15, "In the feed"): by scope
    /// (`person`, `catalogue`), each name's value as it was written (`null`:
    /// the default put back), from the first page on. A name not here has
    /// the service's default (`QueryClient.settings()` gives those in force).
    public var settings: [String: [String: JSONValue]] = [:]

    public init() {}

    /// Takes the `settings` rows of a reply or message into `settings`, each at its anchor.
    static func take(_ kept: KeptRows, into settings: inout [String: [String: JSONValue]]) {
        for row in kept.settings.sorted(by: { $0.anchor < $1.anchor }) {
            settings[row.scope, default: [:]][row.name] = (try? JSONReader.parse(Data(row.value.utf8))) ?? .null
        }
    }
}

/// The Clone pattern of docs/protocol.md §3 in one call (§10): subscribes to
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
                target: ClientFeed { continuation.yield($0) }, locate: locate, curve: curve, timeout: timeout,
                requestTimeout: requestTimeout, stopped: { stopped.load(ordering: .relaxed) })
            do {
                try loop.run()
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        thread.start()
        return stream
    }
}

/// A client's copy of the feed: every live drink by UUID, yielded as
/// `FeedState`s.
struct ClientFeed: FeedTarget {
    let yield: (FeedState) -> Void
    var state = FeedState()
    /// Read from null once: later resyncs start from the anchor held.
    var synced = false
    /// Changes applied since the last state yielded.
    var unshown = false
    static let page = 10_000
    /// While changes keep coming, at most one state per interval: each
    /// state the consumer holds makes the follower's next write copy every
    /// drink (copy on write), so a state per burst at full speed spent most
    /// of the follower's time copying. The first change after a pause comes
    /// out at once.
    static var settleInterval: Duration { .milliseconds(50) }

    init(yield: @escaping (FeedState) -> Void) { self.yield = yield }

    var anchor: Int64 { state.anchor }
    var identity: StoreIdentity? { state.identity }

    /// Reads `changes` from the anchor held (from null the first time, or
    /// after `anchor_expired`), page by page, then asks for the model.
    mutating func resync(_ client: QueryClient) throws {
        state.resyncs += 1
        do {
            try read(from: synced ? state.anchor : nil, client)
        } catch let refusal as QueryClient.Refusal where refusal.code == "anchor_expired" {
            try read(from: nil, client)
        }
        let model = try? client.model()
        state.model = model?.anchor == state.anchor ? model : nil
        state.reconnecting = false
        show()
    }

    private mutating func show() {
        unshown = false
        yield(state)
    }

    private mutating func read(from start: Int64?, _ client: QueryClient) throws {
        var page = try client.changes(since: start, limit: Self.page)
        if let start, page.anchor < start || isAnotherHistory(page.identity) {
            // Another store or epoch, or one behind what is held: what is
            // held means nothing there. Read it all again.
            return try read(from: nil, client)
        }
        var drinks = start == nil ? [:] : state.drinks
        var settings = start == nil ? [:] : state.settings
        var applied = 0
        while true {
            for drink in page.added { drinks[drink.uuid] = drink }
            for tombstone in page.deleted { drinks[tombstone.uuid] = nil }
            FeedState.take(page.kept, into: &settings)
            applied += page.added.count + page.deleted.count
            if !page.hasMore { break }
            let next = try client.changes(since: page.anchor, limit: Self.page)
            if next.identity != page.identity { return try read(from: nil, client) }  // changed while paging
            page = next
        }
        if isAnotherHistory(page.identity) { state.identityChanges += 1 }
        state.identity = page.identity
        state.drinks = drinks
        state.settings = settings
        state.anchor = page.anchor
        state.applied += applied
        state.model = nil
        synced = true
    }

    private func isAnotherHistory(_ identity: StoreIdentity?) -> Bool {
        guard let identity, let held = state.identity else { return false }
        return identity != held
    }

    mutating func apply(_ changes: Changes) {
        for drink in changes.added { state.drinks[drink.uuid] = drink }
        for tombstone in changes.deleted { state.drinks[tombstone.uuid] = nil }
        FeedState.take(changes.kept, into: &state.settings)
        state.applied += changes.added.count + changes.deleted.count
        state.anchor = changes.anchor
        state.model = nil
        unshown = true
    }

    mutating func model(_ model: ModelSnapshot) {
        state.model = model
        show()
    }

    mutating func settled() {
        if unshown { show() }
    }

    mutating func lost() {
        guard !state.reconnecting else { return }
        state.reconnecting = true
        show()
    }
}
