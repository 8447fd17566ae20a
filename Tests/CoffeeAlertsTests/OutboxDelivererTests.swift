import CoffeeDomain
import CoffeeLifecycle
import CoffeeLogging
import CoffeeTestKit
import Foundation
@_spi(Testing) import HealthStore
import Synchronization
import Testing

@testable import CoffeeAlerts

/// The outbox's deliverer (docs/protocol.md §16) over a real store, with a
/// poster of the test's own that answers what it is told to and keeps every
/// request, on an injected wall clock: a 2xx delivers, a 5xx, a 408, a 429 or
/// no answer is tried again after its backoff, any other status and an
/// alert past its age are dropped (to the dead-letter callback) and never
/// tried again.
@Suite("The outbox's deliverer", .timeLimit(.minutes(1)))
struct OutboxDelivererTests {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ct-deliverer-\(UUID().uuidString)")
    let wall = ManualClock(RFC3339.parse("2025-06-02T10:00:00Z")!)
    let logger = Logger(label: "test")

    /// Answers in order (the last one from then on), keeping each request.
    final class ScriptedPoster: AlertPosting, @unchecked Sendable {
        private let answers: Mutex<[HTTPPoster.Outcome]>
        private let sent = Mutex<[(url: String, headers: [(String, String)], body: [UInt8])]>([])

        init(_ answers: [HTTPPoster.Outcome]) { self.answers = Mutex(answers) }

        func post(_ url: String, headers: [(String, String)], body: [UInt8]) -> HTTPPoster.Outcome {
            sent.withLock { $0.append((url, headers, body)) }
            return answers.withLock { $0.count > 1 ? $0.removeFirst() : $0[0] }
        }

        var requests: [(url: String, headers: [(String, String)], body: [UInt8])] { sent.withLock { $0 } }
    }

    final class Dropped: Sendable {
        private let items = Mutex<[(id: String, reason: String)]>([])
        func append(_ item: OutboxItem, _ reason: String) { items.withLock { $0.append((item.id, reason)) } }
        var all: [(id: String, reason: String)] { items.withLock { $0 } }
    }

    var nowMs: Int64 { Int64(wall.now().timeIntervalSince1970 * 1000) }

    /// A store with `items` (made on the wall clock's `nowMs`, which stands still) in its outbox, a deliverer over it answering `answers`, running in a group.
    /// `before` runs on the store before the deliverer starts.
    func run(
        _ answers: [HTTPPoster.Outcome], items: [OutboxItem], before: (HealthStore) async -> Void = { _ in },
        _ body: (HealthStore, OutboxDeliverer, ScriptedPoster, Dropped) async throws -> Void
    ) async throws {
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try HealthStore(
            configuration: .init(path: dir.appendingPathComponent("s.sqlite").path, clock: wall), logger: logger)
        try await store.recordAlerts(states: [], items: items)
        await before(store)
        let poster = ScriptedPoster(answers)
        let dropped = Dropped()
        var configuration = OutboxDeliverer.Configuration()
        configuration.retryInitial = 10
        configuration.maxAge = 3600
        let deliverer = OutboxDeliverer(
            receiver: .webhook(url: "http://127.0.0.1:9/hook", secret: Array("s3cret".utf8)), store: store, clock: wall,
            configuration: configuration, logger: logger, lease: nil, poster: { _ in poster },
            dropped: { dropped.append($0, $1) })
        let group = ServiceGroup(services: [deliverer], logger: logger)
        let running = Task { try await group.run() }
        try await body(store, deliverer, poster, dropped)
        group.triggerGracefulShutdown()
        _ = try? await running.value
        await store.close()
    }

    func item(_ id: String, createdMs: Int64) -> OutboxItem {
        OutboxItem(id: id, receiver: "webhook", body: #"{"id":"\#(id)"}"#, createdMs: createdMs, nextMs: createdMs)
    }

    func eventually(_ what: String, _ condition: () async throws -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while try await !condition() {
            guard ContinuousClock.now < deadline else {
                Issue.record("\(what) did not come true in 10 s")
                return
            }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    @Test func aTwoHundredDeliversAndLeavesTheOutbox() async throws {
        try await run([.answered(204)], items: [item("A", createdMs: nowMs)]) { store, deliverer, poster, dropped in
            try await eventually("the delivery") { deliverer.current.delivered == 1 }
            #expect(try await store.dueAlerts(receiver: "webhook", nowMs: .max, limit: 10).isEmpty)
            #expect(poster.requests.count == 1 && dropped.all.isEmpty && deliverer.current.failing == nil)
        }
    }

    /// `stats` counts what the outbox shows: a try's outcome is counted once
    /// the batch's commit holds it, never before (here the commit is held);
    /// a receiver that fails is shown failing at once.
    @Test(arguments: [HTTPPoster.Outcome.answered(503), .answered(204)])
    func aTryIsCountedOnlyOnceItsOutcomeIsCommitted(_ answer: HTTPPoster.Outcome) async throws {
        let holding = Atomic<Bool>(true)
        let holdCommits: (HealthStore) async -> Void = { store in
            await store.setCommitHook {
                while holding.load(ordering: .relaxed) { usleep(1000) }
                return true
            }
        }
        try await run([answer], items: [item("A", createdMs: nowMs)], before: holdCommits) {
            store, deliverer, poster, dropped in
            try await eventually("the try") { poster.requests.count == 1 }
            try await Task.sleep(for: .milliseconds(200))
            #expect(deliverer.current.retried == 0 && deliverer.current.delivered == 0)  // sent, not yet committed
            if case .answered(503) = answer {
                #expect(deliverer.current.failing != nil)  // the receiver's state is shown at once
            }
            holding.store(false, ordering: .relaxed)
            try await eventually("the outcome counted") { deliverer.current.retried + deliverer.current.delivered == 1 }
            let waiting = try await store.dueAlerts(receiver: "webhook", nowMs: .max, limit: 10)
            #expect(waiting.map(\.attempts) == (deliverer.current.retried == 1 ? [1] : []))
        }
    }

    /// A batch whose commit fails is still in the outbox: it is sent again
    /// and counted then, once, not for the tries whose commits were lost.
    @Test func aBatchWhoseCommitFailedIsCountedOnlyWhenItsCommitHolds() async throws {
        let failOnce: (HealthStore) async -> Void = { await $0.failNextCommitsAsDiskFull(1) }
        try await run([.answered(204)], items: [item("A", createdMs: nowMs)], before: failOnce) {
            store, deliverer, poster, dropped in
            try await eventually("the delivery settled") {
                try await store.dueAlerts(receiver: "webhook", nowMs: .max, limit: 10).isEmpty
            }
            // The first try's commit failed: sent again (more than once while the store's fault lasts).
            #expect(poster.requests.count >= 2)
            #expect(deliverer.current.delivered == 1)
        }
    }

    @Test(arguments: [HTTPPoster.Outcome.answered(503), .answered(500), .answered(408), .answered(429), .failed("refused")])
    func aRetryableAnswerIsTriedAgainAfterItsBackoff(_ first: HTTPPoster.Outcome) async throws {
        try await run([first, .answered(200)], items: [item("A", createdMs: nowMs)]) { store, deliverer, poster, dropped in
            try await eventually("the retry counted") { deliverer.current.retried == 1 }
            let waiting = try await store.dueAlerts(receiver: "webhook", nowMs: .max, limit: 10)
            #expect(waiting.map(\.attempts) == [1] && waiting.first?.nextMs == nowMs + 10_000)  // retryInitialS
            #expect(deliverer.current.failing != nil)
            // Not before its time: nothing is sent while the clock stands still.
            deliverer.wake()
            try await Task.sleep(for: .milliseconds(50))
            #expect(poster.requests.count == 1)
            wall.advance(by: 10)
            deliverer.wake()
            try await eventually("the second try delivered") { deliverer.current.delivered == 1 }
            #expect(poster.requests.count == 2 && dropped.all.isEmpty && deliverer.current.failing == nil)
        }
    }

    @Test(arguments: [400, 401, 404, 410, 302])
    func anyOtherAnswerDropsItAtOnce(_ status: Int) async throws {
        try await run([.answered(status), .answered(200)], items: [item("A", createdMs: nowMs)]) {
            store, deliverer, poster, dropped in
            try await eventually("the drop") { dropped.all.count == 1 }
            #expect(dropped.all.first?.reason.contains("HTTP \(status)") == true)
            // The dead-letter file first, then the batch's commit takes it out of the outbox.
            try await eventually("the drop committed") {
                try await store.dueAlerts(receiver: "webhook", nowMs: .max, limit: 10).isEmpty
            }
            // Never tried again, however long.
            wall.advance(by: 3000)
            deliverer.wake()
            try await Task.sleep(for: .milliseconds(100))
            #expect(poster.requests.count == 1 && deliverer.current.dropped == 1 && deliverer.current.retried == 0)
        }
    }

    @Test func anAlertPastItsAgeIsDroppedUnsent() async throws {
        try await run([.answered(200)], items: [item("old", createdMs: nowMs - 3_601_000), item("new", createdMs: nowMs)]) {
            store, deliverer, poster, dropped in
            try await eventually("both settled") { deliverer.current.delivered == 1 && dropped.all.count == 1 }
            #expect(dropped.all.first?.id == "old" && dropped.all.first?.reason.contains("alerts.maxAgeS") == true)
            #expect(poster.requests.count == 1)
        }
    }

    /// The webhook's request: JSON, the idempotency key, and the body's HMAC-SHA256 (RFC 4231's
    /// first vector checks the digest itself); ntfy's: the message, its title, priority and tags, the token.
    @Test func theReceiversRequests() throws {
        #expect(
            HTTPPoster.hmacSHA256(key: [UInt8](repeating: 0x0B, count: 20), Array("Hi There".utf8))
                == "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7")
        let body = #"{"id":"A1","rule":"levelOver","event":"fired","title":"Over 300 mg\r\nX: y","message":"Now 320 mg."}"#
        let item = OutboxItem(id: "A1", receiver: "webhook", body: body, createdMs: 0, nextMs: 0)
        let (headers, sent) = AlertReceiver.webhook(url: "http://h/hook", secret: Array("k".utf8)).request(item)
        let named = Dictionary(headers, uniquingKeysWith: { a, _ in a })
        #expect(sent == Array(body.utf8))
        #expect(named["Content-Type"] == "application/json" && named["Idempotency-Key"] == "A1")
        #expect(named[AlertReceiver.signatureHeader] == "sha256=" + HTTPPoster.hmacSHA256(key: Array("k".utf8), sent))
        let (ntfyHeaders, message) = AlertReceiver.ntfy(url: "http://h/topic", token: "tk").request(item)
        let ntfy = Dictionary(ntfyHeaders, uniquingKeysWith: { a, _ in a })
        #expect(message == Array("Now 320 mg.".utf8))
        #expect(ntfy["Title"] == "Over 300 mgX: y")  // no line break can end the header
        #expect(ntfy["Priority"] == "4" && ntfy["Tags"] == "warning,coffee" && ntfy["Authorization"] == "Bearer tk")
        #expect(
            AlertReceiver.ntfy(url: "http://h/topic", token: nil).request(item).headers.allSatisfy { $0.0 != "Authorization" })
    }

    /// MQTT's state topics for a model, and each sensor's discovery configuration.
    @Test func theMQTTStates() throws {
        let store = UUID(uuidString: "0A1B2C3D-4E5F-4A6B-8C7D-9E0F1A2B3C4D")!
        let states = MQTTStates(topicPrefix: "ct", discoveryPrefix: "ha", store: store, version: "9.9")
        #expect(states.node == "coffee_tracker_0a1b2c3d4e5f4a6b8c7d9e0f1a2b3c4d")
        let at = RFC3339.parse("2025-06-02T10:00:00Z")!
        // 200 mg now with a 5-hour half-life: under 50 mg two half-lives on, at 20:00.
        let model = CaffeineModel(halfLifeHours: 5, timeZone: TimeZone(identifier: "UTC")!)
        let snapshot = model.snapshot(mgNow: 200, mgToday: 240, drinksToday: 2, at: at, anchor: 7)
        let values = Dictionary(states.states(snapshot, sleepThresholdMg: 50), uniquingKeysWith: { a, _ in a })
        let node = "ct/" + states.node
        #expect(values[node + "/caffeine"] == "200")
        #expect(values[node + "/level"] == "yellow" && values[node + "/today"] == "240")
        #expect(values[node + "/cups_today"] == "2.5")
        #expect(values[node + "/under_threshold_at"] == "2025-06-02T20:00:00.000Z")
        // Under the threshold already: now.
        let low = model.snapshot(mgNow: 20, mgToday: 20, drinksToday: 1, at: at, anchor: 8)
        #expect(
            Dictionary(states.states(low, sleepThresholdMg: 50), uniquingKeysWith: { a, _ in a })[node + "/under_threshold_at"]
                == "2025-06-02T10:00:00.000Z")
        let discovery = states.discovery
        #expect(discovery.count == 5 && discovery.allSatisfy { $0.topic.hasPrefix("ha/sensor/" + states.node + "/") })
        let level = try JSONReader.parse(Data(try #require(discovery.first { $0.topic.hasSuffix("/level/config") }).payload.utf8))
        #expect(level[member: "device_class"] == .string("enum"))
        #expect(level[member: "unique_id"] == .string(states.node + "_level"))
        #expect(level[member: "state_topic"] == .string(node + "/level"))
        #expect(level[member: "availability_topic"] == .string(states.availabilityTopic))
    }
}
