/// Why the store refused or failed. A struct around a private code, so that
/// cases can be added without breaking callers.
public struct StoreError: Error, CustomStringConvertible, Sendable, Equatable {
    enum Code: Sendable, Equatable {
        case anchorExpired
        case closed
        case corrupt
        case newerSchema
        case io
        case inUse
        case unavailable
        case outOfOrder
    }

    let code: Code
    public let message: String

    public static func anchorExpired(requested: Int64, purged: Int64) -> StoreError {
        StoreError(
            code: .anchorExpired,
            message:
                "anchor \(requested) has expired: tombstones up to anchor \(purged) were purged; resync from anchor null")
    }
    public static let closed = StoreError(code: .closed, message: "the store is closed")
    static func corrupt(_ path: String, _ detail: String) -> StoreError {
        StoreError(
            code: .corrupt,
            message: "\(path) is not a usable coffee-tracker database (\(detail)); it was left untouched")
    }
    static func newerSchema(_ path: String, found: Int64, supported: Int64) -> StoreError {
        StoreError(
            code: .newerSchema,
            message:
                "\(path) has schema version \(found), newer than this program supports (\(supported)); it was left untouched — run a newer coffee-tracker"
        )
    }
    static func io(_ detail: String) -> StoreError { StoreError(code: .io, message: detail) }
    static func inUse(_ path: String) -> StoreError {
        StoreError(
            code: .inUse,
            message: "\(path) is in use by another process (another coffee-tracker serve on the same data directory?)")
    }

    /// The store cannot write now (disk full, I/O error, read-only file
    /// system); nothing of the batch was stored.
    public static func unavailable(_ reason: String) -> StoreError {
        StoreError(code: .unavailable, message: "the store cannot write now (\(reason)); nothing was stored, try again later")
    }

    /// A standby's change whose anchor is not after the store's (docs/protocol.md §11).
    static func outOfOrder(_ anchor: Int64, after held: Int64) -> StoreError {
        StoreError(
            code: .outOfOrder, message: "a change at anchor \(anchor) is not after the store's anchor \(held); nothing was stored"
        )
    }

    public var isAnchorExpired: Bool { code == .anchorExpired }
    public var isUnavailable: Bool { code == .unavailable }
    public var isClosed: Bool { code == .closed }
    public var isCorrupt: Bool { code == .corrupt }
    public var isNewerSchema: Bool { code == .newerSchema }
    public var isInUse: Bool { code == .inUse }
    public var isOutOfOrder: Bool { code == .outOfOrder }

    public var description: String { message }
}
