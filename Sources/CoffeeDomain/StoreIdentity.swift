import Foundation

/// Which history an anchor belongs to (docs/protocol.md §13): `store`, made
/// when the store is created (kept by its backups and their restores, taken
/// by a standby from its primary), and `epoch`, which a restore and a
/// promotion raise. An anchor means something only beside them: a follower
/// that sees either change resyncs from null.
public struct StoreIdentity: Sendable, Hashable, CustomStringConvertible {
    public var store: UUID
    public var epoch: Int64

    public init(store: UUID, epoch: Int64) {
        self.store = store
        self.epoch = epoch
    }

    /// A new store's: a fresh UUID, epoch 1.
    public static func new() -> StoreIdentity { StoreIdentity(store: UUID(), epoch: 1) }

    /// `store` and `epoch`, as replies and messages carry them.
    public var members: [(String, JSONValue)] {
        [("store", .string(UUIDText.string(store))), ("epoch", .int(epoch))]
    }

    /// `"store":"…","epoch":N,` written straight to bytes, ahead of a message's other members.
    public func write(into out: inout [UInt8]) {
        JSONBytes.append(#""store":""#, to: &out)
        UUIDText.write(store, into: &out)
        JSONBytes.append(#"","epoch":"#, to: &out)
        JSONBytes.append(epoch, to: &out)
        out.append(UInt8(ascii: ","))
    }

    /// The identity a reply or message carries, or nil when it carries none
    /// (an older service) or carries it wrong.
    public static func read(_ object: JSONValue) -> StoreIdentity? {
        guard let text = try? object.member("store").text(), let store = UUIDText.parse(text),
            let epoch = try? object.member("epoch").integer()
        else { return nil }
        return StoreIdentity(store: store, epoch: epoch)
    }

    public var description: String { "\(UUIDText.string(store)) epoch \(epoch)" }
}
