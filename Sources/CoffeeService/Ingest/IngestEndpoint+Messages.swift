import CoffeeDomain
import Foundation
import HealthStore

/// What one bus message is (docs/protocol.md §2): its topic and body, read in
/// place from ZeroMQ's buffers, and the drinks, deletions or dead letter
/// they make.
extension IngestEndpoint {
    /// What one bus message turned out to be.
    enum Outcome {
        case drinks([Drink])
        case deletions([Deletion])
        case rejected(DeadLetterFile.Entry)
    }

    static let addTopic = Array("drink.add".utf8)
    static let deleteTopic = Array("drink.delete".utf8)

    /// One message's frames: (topic, body) as two frames or one "topic body".
    /// Under CURVE (`registry` set), `client` is its connection's `User-Id`;
    /// a client no longer admitted (removed by a reload) is `unauthorized`,
    /// and an admitted one's drinks default to `source` "bus:<name>".
    /// `channel` is the drinks' default `source` (`mqtt` for the broker's command topics, §16).
    static func decode(
        _ frames: [UnsafeRawBufferPointer], decoder: BatchDecoder, now: Date, client: String? = nil,
        registry: ClientRegistry? = nil, channel: String = "bus"
    ) -> Outcome {
        let (topic, body) = split(frames)
        var source = channel
        if let registry {
            guard let client, let admitted = registry.client(named: client), admitted.roles.contains(.publish) else {
                let topicText = topic.map { String(decoding: $0, as: UTF8.self) } ?? ""
                let reason =
                    "unauthorized: client \(client ?? "(none)") is not admitted to publish (its key was removed or its roles changed)"
                return .rejected(
                    .init(at: now, reason: reason, topic: topicText, body: Data(body), frames: frames.map { Data($0) }))
            }
            source = "bus:" + admitted.name
        }
        do throws(ValidationError) {
            guard let topic else {
                throw ValidationError(
                    rule: "message must be two frames (topic, body) or one frame \"topic body\"; got \(frames.count) frames")
            }
            if addTopic.withUnsafeBytes({ topic.sameBytes(as: $0) }) {
                return .drinks(try decoder.drinks(json: body, now: now, source: source))
            }
            if deleteTopic.withUnsafeBytes({ topic.sameBytes(as: $0) }) { return .deletions(try decoder.deletions(json: body)) }
            throw ValidationError(
                rule: "unknown topic \"\(String(decoding: topic.prefix(64), as: UTF8.self))\"; expected drink.add or drink.delete"
            )
        } catch {
            let topicText = topic.map { String(decoding: $0, as: UTF8.self) } ?? ""
            return .rejected(
                .init(at: now, reason: error.description, topic: topicText, body: Data(body), frames: frames.map { Data($0) }))
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
