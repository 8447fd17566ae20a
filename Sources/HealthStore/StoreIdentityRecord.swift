import CoffeeDomain
import Foundation

/// The store's identity as `meta` keeps it (docs/protocol.md §13): the UUID
/// in two integers (`store_hi`, `store_lo`), `epoch`, whether the store is
/// a standby's (`standby`: a start without `follow` then promotes it, once),
/// and whether its identity was made for a store that already held changes
/// when a build first kept one (`identity_upgraded`: a standby's such store
/// takes its primary's identity instead of refusing it).
///
/// No schema change: a build that does not know these rows ignores them.
enum StoreIdentityRecord {
    /// What `meta` says, or nil for a store that has no identity yet.
    static func read(_ db: some RecordConnection) throws -> (identity: StoreIdentity, standby: Bool, upgraded: Bool)? {
        guard let epoch = try db.scalarSQL("SELECT value FROM meta WHERE key = 'epoch'"),
            let hi = try db.scalarSQL("SELECT value FROM meta WHERE key = 'store_hi'"),
            let lo = try db.scalarSQL("SELECT value FROM meta WHERE key = 'store_lo'")
        else { return nil }
        let standby = try db.scalarSQL("SELECT value FROM meta WHERE key = 'standby'") ?? 0
        let upgraded = try db.scalarSQL("SELECT value FROM meta WHERE key = 'identity_upgraded'") ?? 0
        return (StoreIdentity(store: uuid(hi, lo), epoch: epoch), standby != 0, upgraded != 0)
    }

    /// Writes `identity` and the two flags, in the caller's transaction.
    static func write(
        _ identity: StoreIdentity, standby: Bool, upgraded: Bool = false, to db: some RecordConnection
    ) throws {
        let (hi, lo) = halves(identity.store)
        for (key, value) in [
            ("store_hi", hi), ("store_lo", lo), ("epoch", identity.epoch), ("standby", standby ? 1 : 0),
            ("identity_upgraded", upgraded ? 1 : 0),
        ] {
            try db.executeSQL(
                "INSERT INTO meta(key, value) VALUES ('\(key)', \(value)) ON CONFLICT(key) DO UPDATE SET value = excluded.value")
        }
    }

    /// The identity of the store in `db` as it opens: made when it has none
    /// (epoch 1; flagged `upgraded` when it already held changes), one epoch
    /// more when a standby's store opens as a primary (a promotion, once),
    /// flagged a standby's when it opens as one. Returns what it did, for the log.
    static func open(_ db: some RecordConnection, asStandby: Bool, anchor: Int64) throws -> (
        identity: StoreIdentity, upgraded: Bool, event: String?
    ) {
        var event: String?
        let kept = try read(db)
        var (identity, standby, upgraded) = kept ?? (StoreIdentity.new(), false, anchor > 0)
        var changed = kept == nil
        if kept == nil { event = upgraded ? "an identity made for a store that had none" : "a new store" }
        if standby, !asStandby {
            identity.epoch += 1
            standby = false
            changed = true
            event = "a standby's store promoted: its history goes on under a new epoch"
        } else if asStandby, !standby {
            standby = true
            changed = true
        }
        if changed {
            let (made, flagged, isNew) = (identity, standby, upgraded)
            try db.inTransaction { try Self.write(made, standby: flagged, upgraded: isNew, to: db) }
        }
        return (identity, upgraded, event)
    }

    static func halves(_ uuid: UUID) -> (Int64, Int64) {
        withUnsafeBytes(of: uuid.uuid) { raw in
            (
                Int64(bigEndian: raw.loadUnaligned(fromByteOffset: 0, as: Int64.self)),
                Int64(bigEndian: raw.loadUnaligned(fromByteOffset: 8, as: Int64.self))
            )
        }
    }

    static func uuid(_ hi: Int64, _ lo: Int64) -> UUID {
        var bytes = uuid_t(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &bytes) { raw in
            raw.storeBytes(of: hi.bigEndian, toByteOffset: 0, as: Int64.self)
            raw.storeBytes(of: lo.bigEndian, toByteOffset: 8, as: Int64.self)
        }
        return UUID(uuid: bytes)
    }
}
