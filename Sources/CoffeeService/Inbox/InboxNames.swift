import Foundation
import Syscall

#if canImport(Glibc)
    import Glibc
#endif

/// File names as the inbox meets them: raw bytes from the folder, which
/// need not be UTF-8, and names that must still fit the file system's
/// 255-byte limit once `failed/` adds `.error.json` to them.
enum InboxNames {
    /// One entry of the folder.
    enum Entry: Equatable {
        /// A name in UTF-8.
        case text(String)
        /// A name that is not valid UTF-8, as its bytes.
        case undecodable([UInt8])
    }

    /// The longest name one folder entry may have (`NAME_MAX`).
    static let maxBytes = 255
    /// What a moved name leaves room for: `.error.json` and a `.NNNN` suffix for a taken name.
    static let reserved = ".error.json".utf8.count + 6

    /// The folder's entries, `.` and `..` left out, by their raw names.
    ///
    /// - Throws: `SystemCallError` when the folder cannot be read.
    static func list(_ folder: String) throws(SystemCallError) -> [Entry] {
        guard let dir = opendir(folder) else {
            throw SystemCallError(call: "opendir", detail: folder, errno: errno)
        }
        defer { closedir(dir) }
        var entries: [Entry] = []
        while let entry = readdir(dir) {
            let bytes = withUnsafeBytes(of: entry.pointee.d_name) { raw in Array(raw.prefix { $0 != 0 }) }
            if bytes == [0x2E] || bytes == [0x2E, 0x2E] { continue }
            if let name = String(validating: bytes, as: UTF8.self) {
                entries.append(.text(name))
            } else {
                entries.append(.undecodable(bytes))
            }
        }
        return entries
    }

    /// A name that is not UTF-8, shown in ASCII: every byte outside
    /// printable ASCII, and `%` itself, as `%XX`.
    static func escaped(_ bytes: [UInt8]) -> String {
        var out = ""
        for byte in bytes {
            if byte >= 0x20, byte < 0x7F, byte != UInt8(ascii: "%") {
                out.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                out += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return out
    }

    /// `name`, or a shorter one that leaves room for `reserved` more bytes
    /// within `maxBytes`: its start, cut on a character boundary, a
    /// hash of the whole name (so two long names that start alike stay
    /// apart), and its extension.
    static func fitted(_ name: String) -> String {
        let budget = maxBytes - reserved
        guard name.utf8.count > budget else { return name }
        var ext = ""
        if let dot = name.lastIndex(of: "."), name.utf8.distance(from: dot, to: name.endIndex) <= 16 {
            ext = String(name[dot...])
        }
        let tag = "~" + String(fnv1a(name.utf8), radix: 16).leftPadded(to: 16)
        var start = ""
        for character in name {
            if start.utf8.count + character.utf8.count + tag.utf8.count + ext.utf8.count > budget { break }
            start.append(character)
        }
        return start + tag + ext
    }

    /// 64-bit FNV-1a: a stable hash of a name, the same in every process.
    static func fnv1a(_ bytes: some Sequence<UInt8>) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return hash
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
