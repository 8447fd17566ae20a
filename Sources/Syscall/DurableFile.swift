import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Whole-file writes that survive a crash: temp file, fsync, rename, fsync the folder.
///
/// `Data.write(options: .atomic)` fsyncs the file but not the folder after
/// its rename, so the new name could be lost on power failure.
/// Failures are `SystemCallError`s naming the call and the path.
public enum DurableFile {
    /// Replaces the file at `url` with `data`, atomically and durably.
    ///
    /// - Parameter durable: false for a file that may be lost or stale after
    ///   a crash (a cache whose reader checks it): the replacement stays
    ///   atomic, but nothing is fsynced, so it puts no flush in the way of
    ///   the store's commits.
    /// - Throws: `SystemCallError`; the temporary file is removed then.
    public static func write(_ data: Data, to url: URL, durable: Bool = true) throws(SystemCallError) {
        let folder = url.deletingLastPathComponent().path
        var tempName = "." + url.lastPathComponent + ".\(getpid()).tmp"
        if tempName.utf8.count > 255 { tempName = ".\(getpid()).durable.tmp" }  // beside a name near NAME_MAX
        let temp = folder + "/" + tempName
        let fd = try Syscall.call("open", temp) { open(temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644) }
        do throws(SystemCallError) {
            var failure: SystemCallError?
            data.withUnsafeBytes { bytes in
                do throws(SystemCallError) { try Syscall.writeAll(fd, bytes, detail: temp) } catch { failure = error }
            }
            if let failure { throw failure }
            if durable { try Syscall.call("fsync", temp) { fsync(fd) } }
            Syscall.close(fd)
            try Syscall.call("rename", "\(temp) to \(url.path)") { rename(temp, url.path) }
        } catch {
            Syscall.close(fd)  // a second close of a closed descriptor only fails with EBADF
            _ = unlink(temp)
            throw error
        }
        if durable { try syncFolder(folder) }
    }

    /// Creates `path` with `mode` (never replacing a file; the umask neither
    /// loosens nor tightens it), writes `text`, and syncs it and its folder.
    ///
    /// - Throws: `SystemCallError`; `EEXIST` when the file exists.
    public static func create(_ text: String, at path: String, mode: mode_t) throws(SystemCallError) {
        let fd = try Syscall.call("open", path) { open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode) }
        defer { Syscall.close(fd) }
        try Syscall.call("fchmod", path) { fchmod(fd, mode) }
        var failure: SystemCallError?
        Array(text.utf8).withUnsafeBytes { bytes in
            do throws(SystemCallError) { try Syscall.writeAll(fd, bytes, detail: path) } catch { failure = error }
        }
        if let failure { throw failure }
        try Syscall.call("fsync", path) { fsync(fd) }
        try syncFolder((path as NSString).deletingLastPathComponent.isEmpty ? "." : (path as NSString).deletingLastPathComponent)
    }

    /// fsyncs a file's contents; returns its size.
    @discardableResult
    public static func syncFile(_ path: String) throws(SystemCallError) -> Int64 {
        let fd = try Syscall.call("open", path) { open(path, O_RDONLY | O_CLOEXEC) }
        defer { Syscall.close(fd) }
        try Syscall.call("fsync", path) { fsync(fd) }
        var info = stat()
        try Syscall.call("fstat", path) { fstat(fd, &info) }
        return Int64(info.st_size)
    }

    /// fsyncs a folder, making renames and creations in it durable.
    public static func syncFolder(_ path: String) throws(SystemCallError) {
        let fd = try Syscall.call("open", path) { open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        defer { Syscall.close(fd) }
        try Syscall.call("fsync", path) { fsync(fd) }
    }
}
