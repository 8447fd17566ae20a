import CoffeeDomain
import Foundation
import Syscall

#if canImport(Glibc)
    import Glibc
#endif

/// The inbox file being imported, recorded durably before its import
/// starts, so that a file which kills the process cannot keep it down: a
/// start-up that finds the record of a file that was already being imported
/// once before (two deaths on the same file) moves it aside, while a single
/// death (kill -9, a power cut) only retries it.
///
/// One small file in the data directory (`importing.json`, private, not in
/// the inbox that other users write to), held open: `begin` writes it with
/// one `fdatasync`, `end` empties it without one. An `end` lost in a crash
/// leaves the record of a file that has already moved on, which names no
/// file in the inbox and is dropped at the next start.
final class ImportAttemptRecord {
    /// What the record names: a file by name and identity, and how many
    /// imports of it have begun without ending.
    struct Attempt: Equatable {
        var name: String
        var device: UInt64
        var inode: UInt64
        var size: Int64
        var count: Int

        /// The same file (not just the same name) as `info` describes.
        func isSameFile(_ name: String, _ info: stat) -> Bool {
            self.name == name && device == UInt64(info.st_dev) && inode == UInt64(info.st_ino)
                && size == Int64(info.st_size)
        }
    }

    let path: String
    private var fd: Int32 = -1

    init(path: String) { self.path = path }

    deinit { if fd >= 0 { Syscall.close(fd) } }

    /// The record left by the last process, if it names an import that did not end.
    func read() -> Attempt? {
        guard let data = FileManager.default.contents(atPath: path), data.contains(where: { $0 > 0x20 }),
            case .object(let members) = try? JSONReader.parse(data)
        else { return nil }
        var fields: [String: JSONValue] = [:]
        for (key, value) in members { fields[key] = value }
        guard case .string(let name) = fields["file"], case .int(let device) = fields["device"],
            case .int(let inode) = fields["inode"], case .int(let size) = fields["size"],
            case .int(let count) = fields["attempts"]
        else { return nil }
        return Attempt(name: name, device: UInt64(device), inode: UInt64(inode), size: size, count: Int(count))
    }

    /// Records, durably, that an import of `attempt` begins.
    ///
    /// - Throws: `SystemCallError` when it cannot be written or synced.
    func begin(_ attempt: Attempt) throws(SystemCallError) {
        if fd < 0 {
            let path = self.path
            fd = try Syscall.call("open", path) { open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600) }
            try DurableFile.syncFolder((path as NSString).deletingLastPathComponent)  // the name, once
        }
        let record = JSONValue.object([
            ("file", .string(attempt.name)), ("device", .int(Int64(bitPattern: attempt.device))),
            ("inode", .int(Int64(bitPattern: attempt.inode))), ("size", .int(attempt.size)),
            ("attempts", .int(Int64(attempt.count))),
        ])
        let fd = self.fd
        let detail = path
        try Syscall.call("ftruncate", detail) { ftruncate(fd, 0) }
        try Syscall.call("lseek", detail) { lseek(fd, 0, SEEK_SET) }
        let bytes = Array((record.serialized() + "\n").utf8)
        try bytes.withUnsafeBytes { raw in
            Result { () throws(SystemCallError) in try Syscall.writeAll(fd, raw, detail: detail) }
        }.get()
        try Syscall.call("fdatasync", detail) { fdatasync(fd) }
    }

    /// The import ended (imported, refused, or left for later): forgets it.
    func end() {
        if fd >= 0 { _ = ftruncate(fd, 0) }
    }

    /// Forgets a record left by an earlier process.
    func clear() {
        if fd >= 0 { _ = ftruncate(fd, 0) } else { _ = truncate(path, 0) }
    }
}
