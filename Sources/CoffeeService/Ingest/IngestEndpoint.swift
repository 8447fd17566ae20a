import CoffeeDomain
import Foundation
import HealthStore
import Logging
import Synchronization
import ZeroMQ

/// The SUB socket of PROTOCOL.md §2, on a thread of its own.
///
/// Each wake-up reads what is waiting, validates every message whole, and
/// hands the valid ones to the store as one batch; the store's group commit
/// merges batches that queue during an fsync. A high-rate stream of
/// single-event messages thus becomes few large transactions.
public final class IngestEndpoint: Sendable {
    /// Stop reading (and let ZeroMQ queue) while this many changes await commit.
    static let maxBacklog = 200_000
    static let messagesPerWake = 4096
    /// A batch is handed to the store once it holds this many changes, so
    /// that commits stay under `HealthStore.announceLimit` and are announced
    /// whole (100-event messages made batches of 400,000, read back in pages).
    static let changesPerBatch = 5000

    private let loop = SocketLoop<Int>(name: "ingest")
    private let counters: ServiceCounters
    private let deadLetters: DeadLetterFile
    private let endpoints = Mutex<[String]>([])
    private let logger = Logger(label: "ingest")
    private let warnings = RateLimiter(interval: 1)

    public init(counters: ServiceCounters, deadLetters: DeadLetterFile) {
        self.counters = counters
        self.deadLetters = deadLetters
    }

    public var boundEndpoints: [String] { endpoints.withLock { $0 } }

    public func start(
        context: ZMQContext, bind: [String], connect: [String], receiveHighWaterMark: Int, maxMessageBytes: Int,
        decoder: BatchDecoder, clock: any WallClock, store: HealthStore
    ) async throws {
        try await loop.start { [self] in
            let socket = try ZMQSocket(context, .sub)
            try socket.setReceiveHighWaterMark(Int32(clamping: receiveHighWaterMark))
            try socket.setMaxMessageSize(Int64(maxMessageBytes))
            try socket.setReconnect(intervalMs: 100, maxMs: 5000)
            try socket.subscribe("drink.")
            let bound = try socket.bind(all: bind)
            self.endpoints.withLock { $0 = bound }
            for endpoint in bound { logger.info("ingest endpoint listening", ["endpoint": endpoint]) }
            for endpoint in connect {
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

    public func stop() async { await loop.stop() }
}

/// Lets one log line through per interval; counts the rest.
final class RateLimiter: Sendable {
    private struct State {
        var last: Date = .distantPast
        var suppressed = 0
    }
    private let state = Mutex(State())
    let interval: TimeInterval

    init(interval: TimeInterval) { self.interval = interval }

    /// The number suppressed since the last line, when a line may be written now; nil otherwise.
    func allow(count: Int) -> Int? {
        state.withLock { s in
            let now = Date()
            if now.timeIntervalSince(s.last) >= interval {
                let n = s.suppressed + count - 1
                s.last = now
                s.suppressed = 0
                return n
            }
            s.suppressed += count
            return nil
        }
    }
}
