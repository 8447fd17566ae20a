import CoffeeDomain
import Foundation
import SQLite
import Syscall

#if canImport(Glibc)
    import Glibc
#endif

/// What `restore` did.
public struct RestoreResult: Sendable, Equatable {
    /// The anchor the restored store holds everything up to.
    public var anchor: Int64
    /// Where the store it replaced now is; nil when there was none.
    public var kept: String?
    /// The restored store's identity: the backup's `store`, and an epoch
    /// above both the backup's and the replaced store's (docs/protocol.md §13).
    public var identity: StoreIdentity
}

/// Why a file cannot be restored, in words for the person restoring.
public struct RestoreRefusal: Error, CustomStringConvertible {
    public let description: String
}

extension HealthStore {
    /// Checks `backup` (SQLite's integrity check; ours by `application_id`,
    /// a schema this build reads) and puts a copy of it in place of the store
    /// at `storePath`, with no moment without a store there: the old one is
    /// linked under `<store>.before-restore-<time>` first (its WAL
    /// checkpointed into it), then the checked copy, fsynced, is renamed over
    /// it, and the folder fsynced. Only while no service holds the store:
    /// the caller takes the data directory's lock.
    ///
    /// - Throws: `RestoreRefusal` for a file that is not a whole store of
    ///   ours (nothing is changed then); `SQLiteError` or `SystemCallError`
    ///   naming what failed.
    public static func restore(from backup: String, to storePath: String, now: Date = Date()) throws -> RestoreResult {
        let anchor = try check(backup)
        let folder = (storePath as NSString).deletingLastPathComponent
        let incoming = storePath + ".restoring"
        try? FileManager.default.removeItem(atPath: incoming)
        defer { try? FileManager.default.removeItem(atPath: incoming) }
        try FileManager.default.copyItem(atPath: backup, toPath: incoming)
        // The history the restore starts: the backup's store, under an
        // epoch above the backup's and the replaced store's, so that
        // restoring one backup twice never repeats a pair and a follower of
        // either sees the change.
        let replaced = FileManager.default.fileExists(atPath: storePath) ? (try? Self.storedIdentity(at: storePath)) ?? nil : nil
        let copy = try Database(path: incoming)
        let backed = try StoreIdentityRecord.read(copy)?.identity
        let identity = StoreIdentity(
            store: backed?.store ?? replaced?.store ?? UUID(), epoch: max(backed?.epoch ?? 0, replaced?.epoch ?? 0) + 1)
        try copy.transaction { try StoreIdentityRecord.write(identity, standby: false, to: copy) }
        // One file: whatever journal the copy was left in, nothing beside it.
        try copy.execute("PRAGMA journal_mode = DELETE")
        copy.close()
        try DurableFile.syncFile(incoming)

        var kept: String?
        if FileManager.default.fileExists(atPath: storePath) {
            // The old store whole in its main file: its WAL checkpointed, so
            // that neither its -wal nor its -shm is needed beside the kept copy.
            let old = try Database(path: storePath)
            try old.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            try old.execute("PRAGMA journal_mode = DELETE")
            old.close()
            let stamp = FileNameStamp.string(now)
            // Two restores in one second keep both stores they replaced.
            var keptPath = "\(storePath).before-restore-\(stamp)"
            var n = 1
            while FileManager.default.fileExists(atPath: keptPath) {
                n += 1
                keptPath = "\(storePath).before-restore-\(stamp)-\(n)"
            }
            try Syscall.call("link", "\(storePath) to \(keptPath)") { link(storePath, keptPath) }
            kept = keptPath
        }
        for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: storePath + suffix) }
        try Syscall.call("rename", "\(incoming) to \(storePath)") { rename(incoming, storePath) }
        try DurableFile.syncFolder(folder)
        return RestoreResult(anchor: anchor, kept: kept, identity: identity)
    }

    /// The identity kept in the store at `path`, read without changing it
    /// (opened for writing all the same: a store in WAL mode may need its
    /// log read in, which a read-only open without `-shm` cannot).
    static func storedIdentity(at path: String) throws -> StoreIdentity? {
        let db = try Database(path: path)
        defer { db.close() }
        return try StoreIdentityRecord.read(db)?.identity
    }

    /// The anchor of a whole store of ours at `path`, or why it is not one.
    static func check(_ path: String) throws -> Int64 {
        guard FileManager.default.isReadableFile(atPath: path) else {
            throw RestoreRefusal(description: "\(path) cannot be read")
        }
        let db: Database
        do {
            db = try Database(path: path, readOnly: true)
            _ = try db.scalar("PRAGMA schema_version")
        } catch {
            throw RestoreRefusal(description: "\(path) is not an SQLite database (\(error))")
        }
        defer { db.close() }
        let integrity = (try? db.text("PRAGMA integrity_check")) ?? "unreadable"
        guard integrity == "ok" else {
            throw RestoreRefusal(description: "\(path) fails SQLite's integrity check: \(integrity.prefix(200))")
        }
        let application = (try? db.scalar("PRAGMA application_id")) ?? 0
        guard application == StoreSchema.applicationID else {
            throw RestoreRefusal(
                description: "\(path) is an SQLite database but not a coffee-tracker store (application_id \(application))")
        }
        let version = (try? db.scalar("PRAGMA user_version")) ?? 0
        guard version >= 1, version <= StoreSchema.currentVersion else {
            throw RestoreRefusal(
                description:
                    "\(path) has schema version \(version); this build reads 1 to \(StoreSchema.currentVersion): restore it with a build that knows it"
            )
        }
        guard let anchor = try? StoreSchema.anchor(of: db) else {
            throw RestoreRefusal(description: "\(path) lacks the store's tables (meta, records)")
        }
        return anchor
    }

}

/// A time for a file name (ISO 8601's basic format, UTC): `20261201T153000Z`.
enum FileNameStamp {
    static func string(_ date: Date) -> String {
        var t = time_t(date.timeIntervalSince1970)
        var parts = tm()
        gmtime_r(&t, &parts)
        return String(
            format: "%04d%02d%02dT%02d%02d%02dZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday, parts.tm_hour,
            parts.tm_min, parts.tm_sec)
    }
}
