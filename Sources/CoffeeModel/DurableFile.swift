import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Whole-file writes that survive a crash: temp file, fsync, rename, fsync the folder.
///
/// `Data.write(options: .atomic)` fsyncs the file but not the folder after
/// its rename (DESIGN.md), so the new name could be lost on power failure.
public enum DurableFile {
    public struct Failure: Error, CustomStringConvertible {
        public let path: String
        public let operation: String
        public let errno: Int32
        public var description: String { "\(operation) \(path): \(String(cString: strerror(errno)))" }

        public init(path: String, operation: String, errno: Int32) {
            self.path = path
            self.operation = operation
            self.errno = errno
        }
    }

    /// Replaces the file at `url` with `data`, atomically and durably.
    ///
    /// - Parameter durable: false for a file that may be lost or stale after
    ///   a crash (a cache whose reader checks it): the replacement stays
    ///   atomic, but nothing is fsynced, so it puts no flush in the way of
    ///   the store's commits.
    public static func write(_ data: Data, to url: URL, durable: Bool = true) throws {
        let folder = url.deletingLastPathComponent().path
        let temp = folder + "/." + url.lastPathComponent + ".\(getpid()).tmp"
        let fd = open(temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw Failure(path: temp, operation: "creating", errno: errno) }
        var ok = true
        var failure: Failure?
        data.withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let n = Glibc.write(fd, bytes.baseAddress! + offset, bytes.count - offset)
                if n < 0 {
                    if errno == EINTR { continue }
                    failure = Failure(path: temp, operation: "writing", errno: errno)
                    ok = false
                    return
                }
                offset += n
            }
        }
        if ok && durable && fsync(fd) != 0 { failure = Failure(path: temp, operation: "syncing", errno: errno) }
        close(fd)
        if let failure {
            unlink(temp)
            throw failure
        }
        guard rename(temp, url.path) == 0 else {
            let e = errno
            unlink(temp)
            throw Failure(path: url.path, operation: "renaming into", errno: e)
        }
        if durable { try syncFolder(folder) }
    }

    /// fsyncs a folder, making renames and creations in it durable.
    public static func syncFolder(_ path: String) throws {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw Failure(path: path, operation: "opening folder", errno: errno) }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw Failure(path: path, operation: "syncing folder", errno: errno) }
    }
}
