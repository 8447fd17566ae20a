import Foundation
import SQLite
import Syscall

#if canImport(Glibc)
    import Glibc
#endif

/// A copy of the store taken while it runs (PROTOCOL.md §11, Backups).
public struct BackupResult: Sendable, Equatable {
    /// The anchor the copy holds everything up to.
    public var anchor: Int64
    public var bytes: Int64
}

extension HealthStore {
    /// Pages copied per step of a backup: 32 pages of 4 KiB, about a quarter
    /// of a millisecond of the store's thread, after which queued commits
    /// run. A commit that arrives during a step waits for it: during
    /// back-to-back backups of a 1M-drink store the 1k/s median was 9 ms
    /// with 1,024 pages, 2.2-2.9 ms with 128, 0.8-0.9 ms with 32, against
    /// 0.5 ms without backups, at 0.85 of `sqlite3 .backup`'s rate.
    public static let backupStepPages: Int32 = 32

    /// The copy's page cache, in KiB: what it holds before it spills to its
    /// file, so at most what one window of its write-behind carries.
    static let backupCacheKiB = 512

    /// Writes a consistent copy of the store to `path`, which must not
    /// exist, while the store goes on taking commits.
    ///
    /// The store holds its file under SQLite's exclusive locking mode, so no
    /// other connection can read it: the copy is made by SQLite's online
    /// backup API on the store's own connection, `backupStepPages` pages per
    /// step on the store's thread, commits running between steps (their
    /// writes carried into the copy as they happen). When the last step
    /// returns, the copy equals the store at that moment, and its anchor
    /// says which. The copy is written beside `path` under a temporary name;
    /// on a thread of its own it is switched to one self-contained file
    /// (journal mode DELETE), fsynced, linked into place (never replacing a
    /// file of that name) and its folder fsynced, so that a crash leaves
    /// either no backup or a whole one. Returns once the copy is durable.
    ///
    /// - Throws: `SystemCallError` with `EEXIST` when `path` exists;
    ///   `SQLiteError`, `StoreError` or `SystemCallError` naming what
    ///   failed otherwise. Nothing is left at `path` then.
    public nonisolated func backup(to path: String) async throws -> BackupResult {
        guard !FileManager.default.fileExists(atPath: path) else {
            throw SystemCallError(call: "backup", detail: path, errno: EEXIST)
        }
        let folder = (path as NSString).deletingLastPathComponent
        let partial = (folder as NSString).appendingPathComponent(".\((path as NSString).lastPathComponent).partial")
        try? FileManager.default.removeItem(atPath: partial)  // a crashed backup's leftover
        do {
            try await copyPages(into: partial)
            return try await Self.onThread("backup") { try Self.seal(partial, as: path) }
        } catch {
            try? FileManager.default.removeItem(atPath: partial)
            throw error
        }
    }

    /// The stepped copy, on the store's thread. After a step that made the
    /// file grow (its cache spilled), the copy waits, off the store's
    /// thread, for its write-behind (`WriteBehind`): the commits queued
    /// meanwhile run then, and a copy faster than the disk is held to the
    /// disk's pace instead of piling up dirty pages that every commit's
    /// fsync would queue behind.
    private func copyPages(into partial: String) async throws {
        guard let db else { throw StoreError.closed }
        let target = try Database(path: partial)
        defer { target.close() }
        // The copy is sealed and fsynced as a whole afterwards: no journal
        // and no fsync of its own while pages go in on the store's thread.
        try target.execute("PRAGMA journal_mode = OFF")
        try target.execute("PRAGMA synchronous = OFF")
        // The copy's pages reach its file when its cache spills: a small
        // cache keeps each window of the write-behind small.
        try target.execute("PRAGMA cache_size = -\(Self.backupCacheKiB)")
        let backup = try OnlineBackup(from: db, into: target)
        let writeBehind = try WriteBehind(path: partial)
        while try !backup.step(pages: Self.backupStepPages) {
            if writeBehind.grew {
                await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                    Self.writeBehindQueue.async {
                        writeBehind.advance()
                        done.resume()
                    }
                }
            } else {
                await Task.yield()  // nothing new in the file: the commits queued meanwhile run
            }
            guard self.db != nil else { throw StoreError.closed }
        }
        try backup.finish()
    }

    /// Where backups wait for their write-behind: never the store's thread.
    private static let writeBehindQueue = DispatchQueue(label: "backup-write-behind", qos: .utility)

    /// Makes the copy one self-contained durable file at `path`.
    private static func seal(_ partial: String, as path: String) throws -> BackupResult {
        let copy = try Database(path: partial)
        let anchor = try StoreSchema.anchor(of: copy)
        // The source's WAL mode came with its header: one file, nothing beside it.
        try copy.execute("PRAGMA journal_mode = DELETE")
        copy.close()
        let bytes = try DurableFile.syncFile(partial)
        // A link, not a rename: a backup of the same name made meanwhile is never replaced.
        try Syscall.call("link", "\(partial) to \(path)") { link(partial, path) }
        try? FileManager.default.removeItem(atPath: partial)
        try DurableFile.syncFolder((path as NSString).deletingLastPathComponent)
        return BackupResult(anchor: anchor, bytes: bytes)
    }

    /// Runs `work` on a new thread named `name`: blocking file work kept off
    /// the store's thread and the cooperative pool.
    static func onThread<T: Sendable>(_ name: String, _ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let thread = Thread { continuation.resume(with: Result { try work() }) }
            thread.name = name
            thread.start()
        }
    }
}
