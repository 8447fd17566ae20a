import CoffeeDomain
import CoffeeLogging
import Foundation
import HealthStore
import Testing
import ZeroMQ

@testable import CoffeeService

/// The publisher writes `changes` only for someone who subscribed to it
/// (docs/protocol.md §3): a commit nobody would receive is not encoded,
/// and a subscriber that comes gets the next one.
@Suite("The publisher's subscriptions", .timeLimit(.minutes(1)))
struct SubscriptionsTests {
    typealias Held = EndpointTests.Held

    /// Receives on `held` on a thread of its own until a message of `topic`
    /// whose JSON says `anchor`, or 100 messages, or a receive timeout.
    func received(_ held: Held, _ topic: String, anchor: Int) async throws -> [String: Any]? {
        try await withCheckedThrowingContinuation { continuation in
            Thread {
                continuation.resume(
                    with: Result {
                        for _ in 0..<100 {
                            guard let frames = try held.socket.receive(), frames.count == 2 else { return nil }
                            guard frames[0] == Data(topic.utf8),
                                let message = try JSONSerialization.jsonObject(with: frames[1]) as? [String: Any]
                            else { continue }
                            if message["anchor"] as? Int == anchor { return message }
                        }
                        return nil
                    })
            }.start()
        }
    }

    func subscriber(_ rig: EndpointTests.Rig, _ endpoint: String, _ topics: String...) throws -> Held {
        let held = Held(try ZMQSocket(rig.context, .sub))
        try held.socket.setReceiveTimeout(ms: 5000)
        for topic in topics { try held.socket.subscribe(topic) }
        try held.socket.connect(endpoint)
        return held
    }

    @Test func commitsNobodySubscribesToAreNotWrittenAndASubscriberGetsTheNext() async throws {
        let rig = try EndpointTests.Rig()
        let (broadcaster, configuration) = try rig.broadcaster()
        try await rig.running(broadcaster) {
            // A subscriber of heartbeats alone: two commits, one of them too large to carry its changes.
            let beats = try subscriber(rig, configuration.bind[0], "heartbeat")
            defer { beats.socket.close() }
            try #require(try await received(beats, "heartbeat", anchor: 0) != nil)
            let day = Date(timeIntervalSince1970: 1_796_000_000)
            _ = try await rig.store.save([Drink(mgCaffeine: 64, date: day)])
            let large = (0..<(HealthStore.announceLimit + 1)).map { Drink(mgCaffeine: 1, date: day - Double($0)) }
            _ = try await rig.store.save(large)
            let after = Int(await rig.store.anchor)
            // The heartbeats carry the anchor on, though no `changes` was written.
            #expect(try await received(beats, "heartbeat", anchor: after) != nil)
            #expect(broadcaster.publishDelay.snapshot().count == 0)
            #expect(rig.counters.subscribers.load(ordering: .relaxed) == 1)
            // A subscriber of `changes` gets the next commit, chained to what went before.
            // (Its heartbeat shows its subscriptions applied: they went in order on one pipe.)
            let changes = try subscriber(rig, configuration.bind[0], "changes", "heartbeat")
            defer { changes.socket.close() }
            try #require(try await received(changes, "heartbeat", anchor: after) != nil)
            _ = try await rig.store.save([Drink(mgCaffeine: 32, date: day)])
            let message = try #require(try await received(changes, "changes", anchor: after + 1))
            #expect(message["previousAnchor"] as? Int == after)
            #expect(broadcaster.publishDelay.snapshot().count == 1)
            #expect(rig.counters.subscribers.load(ordering: .relaxed) == 3)
        }
        await rig.cleanup()
    }
}
