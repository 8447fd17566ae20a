import Foundation

/// One drink: the seed's `Drink` (`mgCaffeine`, `date`, `uuid`) plus the
/// sync fields of docs/protocol.md §1.
///
/// Dates are held to whole milliseconds (see `Drink.normalized(_:)`), the
/// precision the store keeps and the protocol prints, so a drink reads back
/// equal to what was saved.
public struct Drink: Hashable, Sendable, Codable {
    public var uuid: UUID
    public var mgCaffeine: Double
    public var date: Date
    public var version: Int64
    public var type: DrinkType?
    public var source: String?

    public init(
        uuid: UUID = UUID(), mgCaffeine: Double, date: Date, version: Int64 = 1,
        type: DrinkType? = nil, source: String? = nil
    ) {
        self.uuid = uuid
        self.mgCaffeine = mgCaffeine
        self.date = Drink.normalized(date)
        self.version = version
        self.type = type
        self.source = source
    }

    /// `date` rounded to the nearest millisecond.
    public static func normalized(_ date: Date) -> Date {
        Date(timeIntervalSince1970: (date.timeIntervalSince1970 * 1000).rounded() / 1000)
    }

    /// Milliseconds since 1970, the store's representation of `date`.
    public var epochMilliseconds: Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }

    /// Oldest first; drinks at the same moment by UUID, so the order is total.
    public static func chronological(_ a: Drink, _ b: Drink) -> Bool {
        a.date != b.date ? a.date < b.date : UUIDText.precedes(a.uuid, b.uuid)
    }
}

/// A deletion request: docs/protocol.md §1 `{"uuid", "version"}`.
public struct Deletion: Hashable, Sendable {
    public var uuid: UUID
    public var version: Int64?

    public init(uuid: UUID, version: Int64? = nil) {
        self.uuid = uuid
        self.version = version
    }
}

/// A tombstone as reported by `changes`: the deleted UUID and its version.
public struct Tombstone: Hashable, Sendable {
    public var uuid: UUID
    public var version: Int64

    public init(uuid: UUID, version: Int64) {
        self.uuid = uuid
        self.version = version
    }
}
