import Foundation
import SQLite
import Syscall

#if canImport(Glibc)
    import Glibc
#endif

/// A copy of the store taken while it runs (docs/protocol.md §11, Backups).
public struct BackupResult: Sendable, Equatable {
    /// The anchor the copy holds everything up to.
    public var anchor: Int64
    public var bytes: Int64
}

extension HealthStore {
    /// The WAL's automatic checkpoint, in pages: SQLite's default, put back
    /// when the last backup has copied the main file.
    static let autoCheckpointPages: Int32 = 1000

    /// How long a backup's copy rests after each chunk, as a multiple of the
    /// time the chunk took (`FileCopy.copy(rest:)`): the copy has the disk
    /// a quarter of the time, the store's commits the rest. Flat out, a 100 MB
    /// store copied in 55 ms here, 5 times `sqlite3 .backup`'s rate, and back
    /// to back such copies took the 1k/s p99 from 1-3 ms to 5-11 ms.
    static let backupRest = 3.0

    /// Writes a consistent copy of the store to `path`, which must not
    /// exist, while the store goes on taking commits.
    ///
    /// In WAL mode only a checkpoint writes the main file; commits append to
    /// the WAL. So on the store's thread the WAL is checkpointed whole into
    /// the main file, which then equals the store at the current anchor, and
    /// checkpoints stop; a thread of its own copies the main file (in the
    /// kernel, `FileCopy`, handed to the disk as it goes) while commits go
    /// on into the WAL, and checkpoints start again when it is done. The
    /// store's thread spends one checkpoint on a backup, and no commit waits
    /// for the copy. (SQLite's online backup API, the way before, copied on
    /// the store's thread, so every commit during a backup waited for a
    /// step: the 1k/s median went from 0.5 to 0.8-0.9 ms, and the store's
    /// exclusive lock leaves no second connection to copy from.) The copy's
    /// thread runs at a lower CPU priority and in the idle I/O class
    /// (`IOPriority.idle`), so that commits come first on both.
    ///
    /// The copy is written beside `path` under a temporary name, switched to
    /// one self-contained file (journal mode DELETE), fsynced, linked into
    /// place (never replacing a file of that name) and its folder fsynced,
    /// so that a crash leaves either no backup or a whole one. Returns once
    /// the copy is durable.
    ///
    /// - Throws: `SystemCallError` with `EEXIST` when `path` exists;
    ///   `SQLiteError`, `StoreError` or `SystemCallError` naming what
    ///   failed otherwise. Nothing is left at `path` then.
    public nonisolated func backup(to path: String) async throws -> BackupResult {
        guard !isShared else { throw StoreError.io("a store in PostgreSQL is backed up with pg_dump or pg_basebackup") }
        guard !FileManager.default.fileExists(atPath: path) else {
            throw SystemCallError(call: "backup", detail: path, errno: EEXIST)
        }
        let folder = (path as NSString).deletingLastPathComponent
        let partial = (folder as NSString).appendingPathComponent(".\((path as NSString).lastPathComponent).partial")
        try? FileManager.default.removeItem(atPath: partial)  // a crashed backup's leftover
        do {
            let (bytes, afterChunk) = try await freezeMainFile()
            let copied = await Result {
                try await Self.onThread("backup", background: true) {
                    try FileCopy.copy(
                        self.configuration.path, bytes: bytes, to: partial, rest: Self.backupRest,
                        afterEachChunk: afterChunk)
                }
            }
            await thawMainFile()
            _ = try copied.get()
            return try await Self.onThread("backup", background: true) { try Self.seal(partial, as: path) }
        } catch {
            try? FileManager.default.removeItem(atPath: partial)
            throw error
        }
    }

    /// Checkpoints the WAL whole into the main file and stops checkpoints
    /// until `thawMainFile`; returns the main file's length then.
    private func freezeMainFile() throws -> (bytes: Int64, afterChunk: @Sendable () -> Void) {
        guard let db else { throw StoreError.closed }
        let (frames, checkpointed) = try db.checkpoint()
        guard frames == checkpointed else {
            throw StoreError.io("\(configuration.path): checkpoint left \(frames - checkpointed) of \(frames) WAL frames")
        }
        if copiesOfMainFile == 0 { try db.setAutoCheckpoint(pages: 0) }
        copiesOfMainFile += 1
        var info = stat()
        guard stat(configuration.path, &info) == 0 else {
            let code = errno
            thawMainFile()
            throw SystemCallError(call: "stat", detail: configuration.path, errno: code)
        }
        #if TEST_HOOKS
            return (Int64(info.st_size), afterBackupChunk ?? {})
        #else
            return (Int64(info.st_size), {})
        #endif
    }

    /// Starts checkpoints again once no backup copies the main file.
    private func thawMainFile() {
        copiesOfMainFile -= 1
        if copiesOfMainFile == 0 { try? db?.setAutoCheckpoint(pages: Self.autoCheckpointPages) }
    }

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
    /// the store's thread and the cooperative pool. A `background` thread
    /// runs at nice 10 and in the idle I/O class: bulk work that gives way
    /// to the store's commits for the CPU and the disk.
    static func onThread<T: Sendable>(
        _ name: String, background: Bool = false, _ work: @escaping @Sendable () throws -> T
    ) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let thread = Thread {
                if background {
                    try? Syscall.setThreadNice(10)  // a hint: refused, the work runs all the same
                    continuation.resume(with: Result { try IOPriority.with(.idle) { try work() } })
                } else {
                    continuation.resume(with: Result { try work() })
                }
            }
            thread.name = name
            thread.start()
        }
    }
}

extension Result where Failure == any Error {
    /// The outcome of `body`, thrown or returned, as a value.
    init(catching body: () async throws -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}
