import CoffeeDomain
import CoffeeLifecycle
import CoffeeLogging
import Foundation
import HealthStore
import Synchronization
import ZeroMQ

/// The SUB socket of docs/protocol.md §2, on a thread of its own (`ingest`).
///
/// Each wake-up reads what is waiting, validates every message whole, and
/// hands the valid ones to the store as one batch; the store's group commit
/// merges batches that queue during an fsync. A high-rate stream of
/// single-event messages thus becomes few large transactions. A light
/// wake-up with the store idle commits on this thread instead (the leader
/// of the group commit), saving the store's thread a wake-up per event. As a service
/// it drains what it submitted: a shutdown stops reading, then commits
/// every batch handed to the store.
public final class IngestEndpoint: Service {
    /// The ingest endpoint's settings, with the defaults of docs/protocol.md §2 and §7.
    public struct Configuration: Sendable {
        /// Where to bind (`ingest.bind`); `tcp://host:*` picks a port.
        public var bind: [String] = ["tcp://127.0.0.1:5555"]
        /// Publishers that bind, to connect to (`ingest.connect`); with a
        /// `serverKey`, as their CURVE client with `clientKeys`.
        public var connect: [ServiceConfiguration.ConnectEntry] = []
        /// ZeroMQ's receive queue (`ingest.receiveHighWaterMark`).
        public var receiveHighWaterMark = 200_000
        /// Larger messages are refused by the socket (`limits.maxMessageBytes`).
        public var maxMessageBytes = Self.defaultMaxMessageBytes
        /// `limits.maxMessageBytes`' default (1 MiB), for every endpoint that reads messages.
        public static let defaultMaxMessageBytes = 1_048_576
        /// The bound endpoints as a CURVE server (`security.curve`); nil for plaintext.
        public var curve: CurveServerSettings?
        /// The service's own key pair, for connects that carry a `serverKey`.
        public var clientKeys: CurveKeyPair?

        public init() {}
    }

    /// Stop reading (and let ZeroMQ queue) while this many changes await commit.
    static let maxBacklog = 200_000
    static let messagesPerWake = 4096
    /// A batch is handed to the store once it holds this many changes, so
    /// that commits stay under `HealthStore.announceLimit` and are announced
    /// whole (100-event messages made batches of 400,000, read back in pages),
    /// and so that the store starts on a commit while the rest is read: it
    /// takes every batch staged by then into one commit, so commits are no
    /// smaller, but at full speed with 10-event messages 1,000 ran 6% faster
    /// than 5,000, in 6% less CPU (bench/README.md, session 27).
    static let changesPerBatch = 1000
    /// A wake-up that read at most this many changes commits them on this
    /// thread when the store is idle (`Submissions.commitStaged(here:)`):
    /// at a low rate, one thread does receive, commit and announce, as the
    /// one-thread peers do. Past it, the store's thread commits while this
    /// one reads on, as group commit at a high rate needs.
    static let leadLimit = 64

    public let name = "ingest"
    private let configuration: Configuration
    private let context: ZMQContext
    /// The store's producer side: all the bus needs of it.
    private let store: Submissions
    private let decoder: BatchDecoder
    private let clock: any WallClock
    private let loop: SocketLoop<Int>
    private let counters: ServiceCounters
    private let deadLetters: DeadLetterFile
    private let endpoints = Mutex<[String]>([])
    private let logger: Logger
    private let warnings = RateLimiter(interval: 1)
    /// The admitted clients, checked per message under CURVE (a key removed
    /// by a reload keeps its connection until it reconnects).
    private let registry: ClientRegistry?

    /// - Throws: `SystemCallError` when the mailbox's pipe cannot be made.
    public init(
        configuration: Configuration, context: ZMQContext, store: Submissions, decoder: BatchDecoder,
        deadLetters: DeadLetterFile, counters: ServiceCounters, clock: any WallClock, registry: ClientRegistry? = nil,
        logger: Logger
    ) throws {
        self.logger = logger
        self.registry = registry
        self.configuration = configuration
        self.context = context
        self.store = store
        self.decoder = decoder
        self.deadLetters = deadLetters
        self.counters = counters
        self.clock = clock
        loop = try SocketLoop(name: "ingest")
    }

    public var boundEndpoints: [String] { endpoints.withLock { $0 } }

    /// Binds and connects, and starts reading.
    ///
    /// - Throws: `ZMQError` naming the endpoint when a bind or connect fails.
    public func start() async throws {
        let (configuration, context, store, decoder, clock) = (configuration, context, store, decoder, clock)
        let deadLetters = self.deadLetters
        try await loop.start { [self] in
            func subscriber() throws -> ZMQSocket {
                let socket = try ZMQSocket(context, .sub)
                try socket.setReceiveHighWaterMark(Int32(clamping: configuration.receiveHighWaterMark))
                try socket.setMaxMessageSize(Int64(configuration.maxMessageBytes))
                try socket.setReconnect(intervalMs: 100, maxMs: 5000)
                try socket.subscribe("drink.")
                return socket
            }
            // Socket 0 binds (a CURVE server under security.curve, its
            // messages checked against the clients directory); connects get
            // sockets of their own: plaintext ones share one, and each
            // publisher's server key needs its own CURVE client socket.
            var sockets = [try subscriber()]
            try sockets[0].secure(configuration.curve)
            let bound = try sockets[0].bind(all: configuration.bind)
            self.endpoints.withLock { $0 = bound }
            for endpoint in bound { logger.info("ingest endpoint listening", metadata: ["endpoint": "\(endpoint)"]) }
            var plain: ZMQSocket?
            for entry in configuration.connect {
                let socket: ZMQSocket
                if let serverKey = entry.serverKey, let keys = configuration.clientKeys {
                    socket = try subscriber()
                    try socket.setCurveClient(serverKey: serverKey, publicKey: keys.publicKey, secretKey: keys.secretKey)
                    sockets.append(socket)
                } else if let plain {
                    socket = plain
                } else {
                    socket = try subscriber()
                    plain = socket
                    sockets.append(socket)
                }
                try socket.connect(entry.endpoint)
                logger.info(
                    "ingest connecting",
                    metadata: ["endpoint": "\(entry.endpoint)", "curve": "\(entry.serverKey == nil ? "no" : "yes")"])
            }
            let authenticated = configuration.curve != nil
            var nextDeadLetterRetry = ContinuousClock.now
            return SocketLoop<Int>.Handler(
                sockets: sockets,
                readable: { index in
                    if store.isFaulted || deadLetters.isBacklogged {
                        // The store (or the dead-letter file) cannot write:
                        // take nothing more, so messages wait in ZeroMQ's
                        // queue and then the publishers'; look again shortly.
                        usleep(50_000)
                        return
                    }
                    if store.backlog > Self.maxBacklog {
                        // The store is behind: leave the messages in ZeroMQ's
                        // queue and sleep until its commits halve the backlog
                        // (at most 100 ms at a time, so a stop is noticed).
                        store.waitForBacklog(below: Self.maxBacklog / 2, timeout: .milliseconds(100))
                        return
                    }
                    self.readBatch(
                        sockets[index], decoder: decoder, now: clock.now(), store: store,
                        authenticated: authenticated && index == 0)
                },
                tick: {
                    // Dead letters that could not be written are tried again once a second.
                    guard deadLetters.hasPending else { return -1 }
                    if ContinuousClock.now >= nextDeadLetterRetry {
                        self.writeHeldDeadLetters()
                        nextDeadLetterRetry = ContinuousClock.now + .seconds(1)
                    }
                    return deadLetters.hasPending ? 1000 : -1
                })
        }
    }

    /// Whether the socket loop's thread goes round within `timeout` (health, watchdog).
    public func answers(within timeout: Duration) async -> Bool { await loop.answers(within: timeout) }

    /// Runs until shutdown; then stops reading and commits every batch it
    /// handed to the store, so nothing counted as received is left behind.
    public func run() async throws {
        await gracefulShutdown()
        await loop.stop()
        if store.isFaulted {
            // The batches it took are held in memory: give the storage a
            // few seconds to come back before they are lost with the process.
            logger.warning(
                "draining while the store cannot write; waiting up to 10 s for it", metadata: ["held": "\(store.backlog)"])
        }
        let lost = await store.drain(patience: .seconds(10))
        if lost > 0 {
            logger.error("bus input taken but not stored: the store could not write", metadata: ["changes": "\(lost)"])
        }
        writeHeldDeadLetters()
    }

    /// - Parameter authenticated: the socket is a CURVE server: each
    ///   message's `User-Id` names its client, who must still be admitted.
    private func readBatch(_ socket: ZMQSocket, decoder: BatchDecoder, now: Date, store: Submissions, authenticated: Bool) {
        let registry = authenticated ? self.registry : nil
        var batch = WriteBatch()
        var rejected: [DeadLetterFile.Entry] = []
        var read = 0  // changes
        for _ in 0..<Self.messagesPerWake {
            // Decoded straight from ZeroMQ's buffers; only a rejected body is copied.
            guard
                let outcome = try? socket.receive(
                    dontWait: true, userID: registry != nil,
                    { frames, user in Self.decode(frames, decoder: decoder, now: now, client: user, registry: registry) })
            else {
                break
            }
            switch outcome {
            case .drinks(let drinks):
                read += drinks.count
                counters.received(drinks.count, over: .bus)
                if !batch.acceptsDrinksInOrder {
                    stage(batch, store)
                    batch = WriteBatch()
                }
                // The first message's array itself: `+=` onto an empty one was a copy per light wake-up.
                if batch.drinks.isEmpty { batch.drinks = drinks } else { batch.drinks += drinks }
            case .deletions(let deletions):
                read += deletions.count
                counters.received(deletions.count, over: .bus)
                if batch.deletions.isEmpty { batch.deletions = deletions } else { batch.deletions += deletions }
            case .rejected(let entry):
                rejected.append(entry)
            }
            if batch.count >= Self.changesPerBatch {
                stage(batch, store)
                batch = WriteBatch()
            }
        }
        if !batch.isEmpty { stage(batch, store) }
        // A light wake-up commits here when the store is idle (no hand-off
        // to its thread); a heavy one hands over, so that the next read
        // overlaps the commit.
        store.commitStaged(here: read <= Self.leadLimit)
        if !rejected.isEmpty { reject(rejected) }
    }

    private func stage(_ batch: WriteBatch, _ store: Submissions) {
        let counters = self.counters
        let logger = self.logger
        store.stage(batch) { result in
            switch result {
            case .success(let r):
                ServiceCounters.bump(counters.stored, by: r.added + r.deleted + r.unknown)
                ServiceCounters.bump(counters.duplicates, by: r.duplicates)
            case .failure(let error):
                logger.error("bus batch not stored", metadata: ["error": "\(error)", "changes": "\(batch.count)"])
            }
        }
    }

    private func reject(_ entries: [DeadLetterFile.Entry]) {
        // Counted once written and synced (or held to be written), never before.
        defer { ServiceCounters.bump(counters.rejected, by: entries.count) }
        do {
            try deadLetters.append(entries)
        } catch {
            logger.error(
                "could not write the dead-letter file; holding the entries to write later",
                metadata: ["error": "\(error)", "path": "\(deadLetters.path)", "held": "\(deadLetters.pendingCount)"])
        }
        let suppressed = warnings.allow(count: entries.count)
        if let suppressed {
            logger.warning(
                "rejected bus message",
                metadata: ["reason": "\(entries[0].reason)", "topic": "\(entries[0].topic)", "suppressed": "\(suppressed)"])
        }
    }

    private func writeHeldDeadLetters() {
        guard deadLetters.hasPending else { return }
        do {
            try deadLetters.append([])
            logger.notice("wrote the held dead letters", metadata: ["path": "\(deadLetters.path)"])
        } catch {}  // still failing: logged when it began
    }
}
