import CoffeeDomain
import CoffeeLifecycle
import CoffeeLogging
import Foundation
import HealthStore
import Synchronization
import ZeroMQ

/// The SUB socket of PROTOCOL.md §2, on a thread of its own (`ingest`).
///
/// Each wake-up reads what is waiting, validates every message whole, and
/// hands the valid ones to the store as one batch; the store's group commit
/// merges batches that queue during an fsync. A high-rate stream of
/// single-event messages thus becomes few large transactions. As a service
/// it drains what it submitted: a shutdown stops reading, then commits
/// every batch handed to the store.
public final class IngestEndpoint: Service {
    /// The ingest endpoint's settings, with the defaults of PROTOCOL.md §2 and §7.
    public struct Configuration: Sendable {
        /// Where to bind (`ingest.bind`); `tcp://host:*` picks a port.
        public var bind: [String] = ["tcp://127.0.0.1:5555"]
        /// Publishers that bind, to connect to (`ingest.connect`).
        public var connect: [String] = []
        /// ZeroMQ's receive queue (`ingest.receiveHighWaterMark`).
        public var receiveHighWaterMark = 200_000
        /// Larger messages are refused by the socket (`limits.maxMessageBytes`).
        public var maxMessageBytes = 1_048_576

        public init() {}
    }

    /// Stop reading (and let ZeroMQ queue) while this many changes await commit.
    static let maxBacklog = 200_000
    static let messagesPerWake = 4096
    /// A batch is handed to the store once it holds this many changes, so
    /// that commits stay under `HealthStore.announceLimit` and are announced
    /// whole (100-event messages made batches of 400,000, read back in pages).
    static let changesPerBatch = 5000

    public let name = "ingest"
    private let configuration: Configuration
    private let context: ZMQContext
    private let store: HealthStore
    private let decoder: BatchDecoder
    private let clock: any WallClock
    private let loop: SocketLoop<Int>
    private let counters: ServiceCounters
    private let deadLetters: DeadLetterFile
    private let endpoints = Mutex<[String]>([])
    private let logger = Logger(label: "ingest")
    private let warnings = RateLimiter(interval: 1)

    /// - Throws: `SystemCallError` when the mailbox's pipe cannot be made.
    public init(
        configuration: Configuration, context: ZMQContext, store: HealthStore, decoder: BatchDecoder,
        deadLetters: DeadLetterFile, counters: ServiceCounters, clock: any WallClock
    ) throws {
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
        try await loop.start { [self] in
            let socket = try ZMQSocket(context, .sub)
            try socket.setReceiveHighWaterMark(Int32(clamping: configuration.receiveHighWaterMark))
            try socket.setMaxMessageSize(Int64(configuration.maxMessageBytes))
            try socket.setReconnect(intervalMs: 100, maxMs: 5000)
            try socket.subscribe("drink.")
            let bound = try socket.bind(all: configuration.bind)
            self.endpoints.withLock { $0 = bound }
            for endpoint in bound { logger.info("ingest endpoint listening", ["endpoint": endpoint]) }
            for endpoint in configuration.connect {
                try socket.connect(endpoint)
                logger.info("ingest connecting", ["endpoint": endpoint])
            }
            return SocketLoop<Int>.Handler(
                sockets: [socket],
                readable: { _ in
                    if store.backlog > Self.maxBacklog {
                        // The store is behind: leave the messages in ZeroMQ's
                        // queue and sleep until its commits halve the backlog
                        // (at most 100 ms at a time, so a stop is noticed).
                        store.waitForBacklog(below: Self.maxBacklog / 2, timeout: .milliseconds(100))
                        return
                    }
                    self.readBatch(socket, decoder: decoder, now: clock.now(), store: store)
                })
        }
    }

    /// Runs until shutdown; then stops reading and commits every batch it
    /// handed to the store, so nothing counted as received is left behind.
    public func run() async throws {
        await gracefulShutdown()
        await loop.stop()
        await store.commitPending()
    }

    /// What one bus message turned out to be.
    private enum Outcome {
        case drinks([Drink])
        case deletions([Deletion])
        case rejected(DeadLetterFile.Entry)
    }

    private func readBatch(_ socket: ZMQSocket, decoder: BatchDecoder, now: Date, store: HealthStore) {
        var batch = WriteBatch()
        var rejected: [DeadLetterFile.Entry] = []
        for _ in 0..<Self.messagesPerWake {
            // Decoded straight from ZeroMQ's buffers; only a rejected body is copied.
            guard let outcome = try? socket.receive(dontWait: true, { Self.decode($0, decoder: decoder, now: now) }) else {
                break
            }
            switch outcome {
            case .drinks(let drinks):
                ServiceCounters.bump(counters.received, by: drinks.count)
                if !batch.acceptsDrinksInOrder {
                    submit(batch, store)
                    batch = WriteBatch()
                }
                batch.drinks += drinks
            case .deletions(let deletions):
                ServiceCounters.bump(counters.received, by: deletions.count)
                batch.deletions += deletions
            case .rejected(let entry):
                rejected.append(entry)
            }
            if batch.count >= Self.changesPerBatch {
                submit(batch, store)
                batch = WriteBatch()
            }
        }
        if !batch.isEmpty { submit(batch, store) }
        if !rejected.isEmpty { reject(rejected) }
    }

    private static let addTopic = Array("drink.add".utf8)
    private static let deleteTopic = Array("drink.delete".utf8)

    /// One message's frames: (topic, body) as two frames or one "topic body".
    private static func decode(_ frames: [UnsafeRawBufferPointer], decoder: BatchDecoder, now: Date) -> Outcome {
        let (topic, body) = split(frames)
        do throws(ValidationError) {
            guard let topic else {
                throw ValidationError(
                    rule: "message must be two frames (topic, body) or one frame \"topic body\"; got \(frames.count) frames")
            }
            if topic.elementsEqual(addTopic) { return .drinks(try decoder.drinks(json: body, now: now, source: "bus")) }
            if topic.elementsEqual(deleteTopic) { return .deletions(try decoder.deletions(json: body)) }
            throw ValidationError(
                rule: "unknown topic \"\(String(decoding: topic.prefix(64), as: UTF8.self))\"; expected drink.add or drink.delete"
            )
        } catch {
            let topicText = topic.map { String(decoding: $0, as: UTF8.self) } ?? ""
            return .rejected(.init(at: now, reason: error.description, topic: topicText, body: Data(body)))
        }
    }

    private func submit(_ batch: WriteBatch, _ store: HealthStore) {
        let counters = self.counters
        let logger = self.logger
        store.submit(batch) { result in
            switch result {
            case .success(let r):
                ServiceCounters.bump(counters.stored, by: r.added + r.deleted + r.unknown)
                ServiceCounters.bump(counters.duplicates, by: r.duplicates)
            case .failure(let error):
                logger.error("bus batch not stored", ["error": "\(error)", "changes": "\(batch.count)"])
            }
        }
    }

    private func reject(_ entries: [DeadLetterFile.Entry]) {
        ServiceCounters.bump(counters.rejected, by: entries.count)
        do {
            try deadLetters.append(entries)
        } catch {
            logger.error("could not write the dead-letter file", ["error": "\(error)", "path": deadLetters.path])
        }
        let suppressed = warnings.allow(count: entries.count)
        if let suppressed {
            logger.warning(
                "rejected bus message",
                ["reason": entries[0].reason, "topic": entries[0].topic, "suppressed": "\(suppressed)"])
        }
    }

    /// Topic and body from two frames, or from one frame "topic body"; a
    /// nil topic when the message has neither shape.
    static func split(_ frames: [UnsafeRawBufferPointer]) -> (UnsafeRawBufferPointer?, UnsafeRawBufferPointer) {
        if frames.count == 2 { return (frames[0], frames[1]) }
        if frames.count == 1, let space = frames[0].firstIndex(of: UInt8(ascii: " ")) {
            return (
                UnsafeRawBufferPointer(rebasing: frames[0][..<space]), UnsafeRawBufferPointer(rebasing: frames[0][(space + 1)...])
            )
        }
        return (nil, frames.last ?? UnsafeRawBufferPointer(start: nil, count: 0))
    }
}
