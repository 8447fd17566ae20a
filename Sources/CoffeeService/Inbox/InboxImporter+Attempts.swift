import CoffeeLogging
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The crash-loop breaker (`ImportAttemptRecord`): a file that stopped the
/// service twice while being imported is moved aside at the next start.
extension InboxImporter {
    static let crashLoopError =
        "the service stopped twice while importing this file; it was moved aside so that it cannot stop the service again"

    /// At start-up, before the first scan: reads what the last process was
    /// importing when it stopped. A file it had already begun once before
    /// moves to `failed/`; a file begun once is left to be tried again.
    public func recoverAbortedImport() {
        guard let attempts, let attempt = attempts.read() else { return }
        var info = stat()
        let path = inbox.appendingPathComponent(attempt.name).path
        guard lstat(path, &info) == 0, attempt.isSameFile(attempt.name, info) else {
            attempts.clear()  // it moved on before the stop, or was replaced
            return
        }
        if attempt.count >= 2 {
            logger.error(
                "the service stopped twice while importing an inbox file; moving it to failed/",
                metadata: ["file": "\(attempt.name)", "attempts": "\(attempt.count)"])
            refuse(attempt.name, InboxFileError(Self.crashLoopError))
            attempts.clear()
        } else {
            logger.warning(
                "the service stopped while importing an inbox file; trying it once more",
                metadata: ["file": "\(attempt.name)"])
        }
    }

    /// Records that the import of `name` begins, counting an import of the
    /// same file left unfinished by the last process. Returns the refusal
    /// for a file that already stopped the service twice.
    func beginAttempt(_ name: String, _ info: stat) -> InboxFileError? {
        guard let attempts else { return nil }
        var attempt = ImportAttemptRecord.Attempt(
            name: name, device: UInt64(info.st_dev), inode: UInt64(info.st_ino), size: Int64(info.st_size), count: 1)
        if let left = attempts.read(), left.isSameFile(name, info) { attempt.count = left.count + 1 }
        if attempt.count > 2 { return InboxFileError(Self.crashLoopError) }
        do {
            try attempts.begin(attempt)
        } catch {
            // Not the file's fault: it is imported all the same, unguarded.
            logger.error("cannot record the inbox import about to begin", metadata: ["file": "\(name)", "error": "\(error)"])
        }
        #if TEST_HOOKS
            if name == TestHooks.dieWhileImporting {
                logger.warning("test hook: dying while importing", metadata: ["file": "\(name)"])
                kill(getpid(), SIGKILL)
            }
        #endif
        return nil
    }
}
