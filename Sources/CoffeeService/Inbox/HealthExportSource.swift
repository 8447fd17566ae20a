import CArchive
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Where a Health export's XML comes from, read in pieces: the `.xml` file
/// itself, or `apple_health_export/export.xml` inside the `.zip` (through
/// libarchive, which reads Zip64 and data descriptors as it streams: no
/// temporary copy, no central directory held). Bytes read so far are counted
/// for progress.
final class HealthExportSource {
    private let fd: Int32
    private var archive: OpaquePointer?
    private(set) var bytesRead: Int64 = 0
    /// The XML file as it is.
    init(xml fd: Int32) {
        self.fd = fd
    }

    /// The export inside a zip: `apple_health_export/export.xml` (or, in an
    /// archive zipped again by hand, any entry whose path ends with it).
    ///
    /// - Throws: `InboxFileError` when the zip cannot be read or holds no export.
    init(zip fd: Int32) throws(InboxFileError) {
        self.fd = fd
        guard let a = archive_read_new() else { throw InboxFileError("zip: out of memory") }
        archive = a
        archive_read_support_format_zip(a)
        archive_read_support_filter_none(a)
        guard archive_read_open_fd(a, fd, 1 << 16) == ARCHIVE_OK else {
            throw InboxFileError("not a zip archive: \(Self.message(a))")
        }
        var entry: OpaquePointer?
        while true {
            let status = archive_read_next_header(a, &entry)
            if status == ARCHIVE_EOF {
                throw InboxFileError("the zip holds no apple_health_export/export.xml: not an Apple Health export")
            }
            guard status == ARCHIVE_OK || status == ARCHIVE_WARN, let entry else {
                throw InboxFileError("the zip cannot be read: \(Self.message(a))")
            }
            let path = archive_entry_pathname(entry).map { String(cString: $0) } ?? ""
            if path == "apple_health_export/export.xml" || path.hasSuffix("/apple_health_export/export.xml") { return }
            archive_read_data_skip(a)
        }
    }

    deinit {
        if let archive { archive_read_free(archive) }
    }

    /// Reads up to `count` bytes into `buffer`: 0 at the end, -1 on an error
    /// (`lastError` says which).
    func read(_ buffer: UnsafeMutableRawPointer, _ count: Int) -> Int {
        let n: Int
        if let archive {
            n = archive_read_data(archive, buffer, count)
            if n < 0 { lastError = "the zip is damaged or truncated: \(Self.message(archive))" }
        } else {
            repeat { n0 = Glibc.read(fd, buffer, count) } while n0 < 0 && errno == EINTR
            n = n0
            if n < 0 { lastError = "read failed: \(String(cString: strerror(errno)))" }
        }
        if n > 0 { bytesRead += Int64(n) }
        return n
    }
    private var n0 = 0
    private(set) var lastError: String?

    private static func message(_ a: OpaquePointer) -> String {
        archive_error_string(a).map { String(cString: $0) } ?? "unknown error"
    }
}
