#if canImport(Glibc)
    import Glibc
#endif

/// An exclusive lock on a folder, held for a process's life: `flock` on a
/// lock file in it. The service holds its data directory's, so that a second
/// service on the same store, or `coffee-tracker restore` while one runs, is
/// refused rather than let loose on a live store. The kernel drops the lock
/// when the process ends, however it ends.
public final class DirectoryLock: Sendable {
    public static let fileName = "coffee-tracker.lock"
    private let fd: Int32

    /// Takes the lock, without waiting.
    ///
    /// - Throws: `SystemCallError` with `EWOULDBLOCK` when another process
    ///   holds it; another errno when the lock file cannot be made.
    public init(directory: String) throws(SystemCallError) {
        let path = directory.hasSuffix("/") ? directory + Self.fileName : directory + "/" + Self.fileName
        let fd = try Syscall.call("open", path) { open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600) }
        do {
            try Syscall.call("flock", path) { flock(fd, LOCK_EX | LOCK_NB) }
        } catch {
            Syscall.close(fd)
            throw error
        }
        self.fd = fd
    }

    /// Takes the lock, or returns nil when another process holds it.
    ///
    /// - Throws: `SystemCallError` when the lock file cannot be made or locked
    ///   for another reason.
    public static func take(directory: String) throws(SystemCallError) -> DirectoryLock? {
        do {
            return try DirectoryLock(directory: directory)
        } catch {
            if error.errno == EWOULDBLOCK { return nil }
            throw error
        }
    }

    deinit { Syscall.close(fd) }
}
