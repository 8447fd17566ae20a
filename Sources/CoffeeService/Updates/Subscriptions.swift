import Foundation
import Synchronization
import ZeroMQ

/// The subscriptions an XPUB socket hands over (docs/protocol.md §3): each a
/// message of one byte, 1 to subscribe or 0 to unsubscribe, then the topic
/// prefix; with `ZMQ_XPUB_VERBOSER`, every one of them, so they can be
/// counted. Read only by the thread that holds the socket (the publisher's,
/// or one it lends it to).
final class Subscriptions: Sendable {
    /// Counts every subscription (`stats.subscribers`).
    private let counters: ServiceCounters
    /// Those whose prefix matches `changes` (the empty one included).
    private let changes = Atomic<Int>(0)
    /// The topic of `changes` messages, as sent.
    static let topic = Array("changes".utf8)

    init(counters: ServiceCounters) { self.counters = counters }

    /// Takes what the socket has handed over since the last call.
    func take(from socket: ZMQSocket) {
        while let frames = try? socket.receive(dontWait: true), let first = frames.first, let kind = first.first {
            let delta = kind == 1 ? 1 : -1
            counters.subscribers.add(delta, ordering: .relaxed)
            if Self.topic.starts(with: first.dropFirst()) { changes.add(delta, ordering: .relaxed) }
        }
    }

    /// Whether some subscriber would receive a `changes` message. With none
    /// counted, what the socket holds is taken first: a subscriber whose
    /// subscription ZeroMQ has applied is counted before the answer. (One
    /// that ZeroMQ applies in the moment between this and the send may miss
    /// that message, as a slow joiner does, and resyncs at the gap.)
    func wantChanges(_ socket: ZMQSocket) -> Bool {
        if changes.load(ordering: .relaxed) > 0 { return true }
        take(from: socket)
        return changes.load(ordering: .relaxed) > 0
    }
}
