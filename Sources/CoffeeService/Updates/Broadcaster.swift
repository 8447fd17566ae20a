import CoffeeDomain
import CoffeeLifecycle
import CoffeeLogging
import Foundation
import HealthStore
import Synchronization
import ZeroMQ

/// The PUB socket of docs/protocol.md §3, on a thread of its own (`updates`).
///
/// Producers post to a bounded mailbox, or send a small commit themselves
/// while the publisher is idle, and never wait: a slow or stuck
/// subscriber costs it messages (ZeroMQ's high-water mark), and a publisher
/// thread that falls behind drops from the mailbox, counted; neither ever
/// slows the store. Heartbeats come from the loop's own timer. As a service
/// it starts after the store (it follows its commits) and, in a shutdown,
/// sends everything it holds before it closes, while the store is still
/// open to page out a large commit.
public final class Broadcaster: Service {
    public let name = "updates"
    private let configuration: Configuration
    private let context: ZMQContext
    private let store: HealthStore
    private let loop: SocketLoop<Outgoing>
    /// The anchor of the last `changes` message sent: what heartbeats carry,
    /// so a heartbeat never claims an anchor whose changes are still queued.
    private let anchor = Atomic<Int64>(0)
    private let endpoints = Mutex<[String]>([])
    private let counters: ServiceCounters
    private let subscriptions: Subscriptions
    private let logger: Logger
    /// From an event's arrival at the store to its `changes` message being
    /// handed to ZeroMQ (docs/protocol.md §9).
    public let publishDelay = Histogram()
    /// A `changes` message's bytes, kept from one message to the next (ZeroMQ
    /// copies them): written only where the socket is used, on the loop's
    /// thread or a borrower's holding its lock, so the lock is never waited for.
    private let body = Mutex<[UInt8]>([])
    /// A body larger than this is not kept. A commit's `changes` (at most
    /// `HealthStore.announceLimit` changes, some 1.7 MB) fits: at full speed
    /// each commit of thousands of drinks found its body given back to the
    /// system and faulted its pages in again (a quarter of this thread's
    /// time). Larger blocks are mapped on their own anyway (`MemoryReclaimer`).
    static let keptBodyBytes = 2 << 20

    /// - Throws: `SystemCallError` when the mailbox's pipe cannot be made.
    public init(
        configuration: Configuration, context: ZMQContext, store: HealthStore, counters: ServiceCounters,
        logger: Logger
    ) throws {
        self.logger = logger
        self.configuration = configuration
        self.context = context
        self.store = store
        self.counters = counters
        subscriptions = Subscriptions(counters: counters)
        loop = try SocketLoop(name: "updates", mailboxCapacity: configuration.queueCapacity, lendable: true)
    }

    public var boundEndpoints: [String] { endpoints.withLock { $0 } }

    /// Binds, starts the heartbeats, and announces every commit from now on.
    ///
    /// - Throws: `ZMQError` naming the endpoint when a bind fails.
    public func start() async throws {
        anchor.store(await store.anchor, ordering: .relaxed)
        let logger = self.logger
        let configuration = self.configuration
        let context = self.context
        try await loop.start { [self] in
            let socket = try ZMQSocket(context, .xpub)
            try socket.setSendHighWaterMark(Int32(clamping: configuration.sendHighWaterMark))
            // Every subscribe and unsubscribe reaches us (not only the first
            // per topic), so `stats.subscribers` counts each subscription.
            try socket.setXPubVerboser(true)
            try socket.setLinger(ms: 500)
            let timeoutMs = Int32(clamping: configuration.stuckSubscriberTimeout.components.seconds * 1000)
            try socket.setHeartbeat(intervalMs: max(100, timeoutMs / 5), timeoutMs: max(500, timeoutMs))
            try socket.secure(configuration.curve)
            let bound = try socket.bind(all: configuration.bind)
            self.endpoints.withLock { $0 = bound }
            for endpoint in bound { logger.info("updates endpoint listening", metadata: ["endpoint": "\(endpoint)"]) }
            let clock = ContinuousClock()
            let interval = configuration.heartbeatInterval
            var nextBeat = clock.now
            let reading = PageReading()
            return SocketLoop<Outgoing>.Handler(
                sockets: [socket],
                readable: { _ in self.subscriptions.take(from: socket) },
                received: { messages in
                    for m in messages { self.handle(m, socket, reading) }
                },
                tick: {
                    let now = clock.now
                    if now >= nextBeat {
                        let body = JSONValue.object(
                            [
                                ("anchor", .int(self.anchor.load(ordering: .relaxed))),
                                ("at", .string(RFC3339.string(Date()))),
                            ] + self.store.identity.members)
                        _ = try? socket.send([Data("heartbeat".utf8), body.data()], dontWait: true)
                        nextBeat = now + interval
                    }
                    let wait = nextBeat - now
                    return max(1, Int(wait.components.seconds * 1000 + wait.components.attoseconds / 1_000_000_000_000_000))
                },
                // While a large commit is read, nothing may overtake its pages.
                lends: { reading.current == nil })
        }
        // Each commit is queued for publishing from the store's own thread.
        await store.observeCommits { [self] batch in self.announce(batch) }
    }

    /// Whether the socket loop's thread goes round within `timeout` (health, watchdog).
    public func answers(within timeout: Duration) async -> Bool { await loop.answers(within: timeout) }

    /// Runs until shutdown, then sends what is queued (large commits paged
    /// out from the store, which closes after this) and closes the socket.
    public func run() async throws {
        await gracefulShutdown()
        await sent(timeout: configuration.drainTimeout)
        await loop.stop()
    }

    /// Queues a message; never blocks. Drops (counted) when the queue is full.
    public func publish(_ topic: String, _ body: JSONValue) {
        post(.message(topic: topic, body: body.data()))
    }

    /// Queues a message already encoded (the model, encoded once for the bus and the page's event streams).
    public func publish(_ topic: String, encoded body: Data) {
        post(.message(topic: topic, body: body))
    }

    /// Queues the model as a `model` message.
    public func publish(_ snapshot: ModelSnapshot) {
        publish("model", .object(WireFormat.members(snapshot)))
    }

    private func post(_ outgoing: Outgoing) {
        if !loop.mailbox.post(outgoing) {
            ServiceCounters.bump(counters.updatesDropped)
        }
    }

    /// A commit of at most this many changes is published by the thread
    /// that committed it when the publisher is idle (`SocketLoop.runIfIdle`).
    static let sendHereLimit = 64

    /// Publishes a commit as `changes`. Called where the commit ran (a
    /// `HealthStore.CommitObserver`). A small commit, with the publisher
    /// idle and nothing queued before it, is encoded and sent right here:
    /// at a low rate one thread then receives, commits and publishes, with
    /// no wake-up of the publisher's. Anything else only queues, so the
    /// store's thread never encodes a large commit.
    func announce(_ batch: CommittedBatch) {
        if batch.isComplete, batch.log.count <= Self.sendHereLimit,
            loop.runIfIdle({ sockets in self.sendCommit(sockets[0], batch) })
        {
            return
        }
        post(batch.isComplete ? .commit(batch) : .pages(batch))
    }

    /// A commit whose changes it carries, as `changes` messages of at most
    /// `pageSize` changes (docs/protocol.md §3): a larger commit's pages chain.
    private func sendCommit(_ socket: ZMQSocket, _ commit: CommittedBatch) {
        guard subscriptions.wantChanges(socket) else { return passed(commit.anchor) }  // nobody to receive it
        commit.forEachPage(of: Self.pageSize) { batch in
            sendChanges(socket, anchor: batch.anchor, arrived: batch.arrived) { batch.writeChangesMessage(into: &$0) }
        }
    }

    /// Sends the `changes` message `write` appends to an empty body.
    private func sendChanges(
        _ socket: ZMQSocket, anchor newAnchor: Int64, arrived: ContinuousClock.Instant?,
        _ write: (inout [UInt8]) -> Void
    ) {
        defer { passed(newAnchor) }
        // Nobody to receive it: not written (a standby catching up with no screens, say).
        guard subscriptions.wantChanges(socket) else { return }
        body.withLock { body in
            body.removeAll(keepingCapacity: true)
            write(&body)
            _ = try? socket.send(Subscriptions.topic, body, dontWait: true)
            if body.capacity > Self.keptBodyBytes { body = [] }
        }
        if let arrived { publishDelay.observe(ContinuousClock.now - arrived) }
    }

    /// The heartbeats' anchor moves on to `newAnchor`, written or not.
    private func passed(_ newAnchor: Int64) {
        anchor.store(max(anchor.load(ordering: .relaxed), newAnchor), ordering: .relaxed)
    }

    /// A commit too large to carry its changes, read back from the store and
    /// published as several messages whose anchors chain (`previousAnchor` of
    /// each is the `anchor` of the one before), so no message grows with the
    /// commit. The publisher's thread never waits for a page: it asks the
    /// store for one, and whatever is posted meanwhile waits in `waiting`
    /// until the last page is out, so order holds. Used only on that thread.
    final class PageReading {
        /// The commit being read.
        var current: CommittedBatch?
        /// Posted while it is read; bounded as the mailbox is.
        var waiting: [Outgoing] = []
    }

    /// The most changes one `changes` message carries (docs/protocol.md §3).
    static let pageSize = 5000

    private func handle(_ outgoing: Outgoing, _ socket: ZMQSocket, _ reading: PageReading) {
        if reading.current != nil {
            switch outgoing {
            case .page: break
            case .barrier:
                return reading.waiting.append(outgoing)
            case .message, .commit, .pages:
                // As a full mailbox does: dropped and counted (a gap that subscribers resync over).
                guard reading.waiting.count < configuration.queueCapacity else {
                    return ServiceCounters.bump(counters.updatesDropped)
                }
                return reading.waiting.append(outgoing)
            }
        }
        switch outgoing {
        case .message(let topic, let body):
            _ = try? socket.send([Data(topic.utf8), body], dontWait: true)
        case .commit(let commit):
            sendCommit(socket, commit)
        case .barrier(let reached):
            reached()
        case .pages(let batch):
            guard subscriptions.wantChanges(socket) else { return passed(batch.anchor) }  // no pages read for nobody
            _ = readPage(of: batch, after: batch.previousAnchor, reading)
        case .page(let result, let batch, let previous):
            switch result {
            case .success(let page):
                let changes = page.anchored
                sendChanges(socket, anchor: page.anchor, arrived: batch.arrived) { body in
                    body = WireFormat.changesMessage(
                        identity: batch.identity, anchor: page.anchor, previousAnchor: previous, added: changes.added,
                        addedAnchors: changes.addedAnchors, deleted: changes.deleted,
                        deletedAnchors: changes.deletedAnchors, kept: changes.kept)
                }
                if page.hasMore, readPage(of: batch, after: page.anchor, reading) { return }
            case .failure(let error):
                // Closed or expired: subscribers see the gap and resync.
                logger.warning("could not page a large commit", metadata: ["error": "\(error)", "anchor": "\(batch.anchor)"])
            }
            reading.current = nil
            let waiting = reading.waiting
            reading.waiting = []
            for (i, next) in waiting.enumerated() {
                guard reading.current == nil else {  // another large commit: the rest wait for it
                    reading.waiting = Array(waiting[i...])
                    break
                }
                handle(next, socket, reading)
            }
        }
    }

    /// Asks the store for the page of `batch` after `previous`; it comes back
    /// through the mailbox, past its capacity (it is awaited, never dropped).
    /// False when the commit has no changes after `previous`.
    private func readPage(of batch: CommittedBatch, after previous: Int64, _ reading: PageReading) -> Bool {
        guard previous < batch.anchor else { return false }
        reading.current = batch
        let mailbox = loop.mailbox
        store.readChanges(since: previous, limit: Self.pageSize, through: batch.anchor) { result in
            mailbox.post(.page(result, of: batch, after: previous), evenIfFull: true)
        }
        return true
    }

    /// Returns once everything queued before the call has been handed to
    /// ZeroMQ, large commits paged out from the store included (so the store
    /// must still be open), or after `timeout` if the publisher is stuck.
    func sent(timeout: Duration) async {
        let waiter = Mutex<CheckedContinuation<Void, Never>?>(nil)
        let resume: @Sendable () -> Void = {
            waiter.withLock { slot in
                defer { slot = nil }
                return slot
            }?.resume()
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            waiter.withLock { $0 = continuation }
            if !loop.mailbox.post(.barrier(resume)) { resume() }  // a full queue has dropped already
            Task {
                try? await Task.sleep(for: timeout)
                resume()
            }
        }
    }
}
