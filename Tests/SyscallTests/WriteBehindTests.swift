import Foundation
import Syscall
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite("WriteBehind: a growing file handed to the disk as it is written", .timeLimit(.minutes(2)))
struct WriteBehindTests {
    static let window = 1 << 20

    /// A scratch file on a disk-backed file system (the page cache of tmpfs
    /// is its storage, so nothing is ever dropped there): beside the build.
    static func scratchFile() throws -> String {
        let folder = FileManager.default.currentDirectoryPath + "/.build/write-behind-tests"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let path = folder + "/\(UUID().uuidString)"
        #expect(FileManager.default.createFile(atPath: path, contents: nil))
        return path
    }

    /// Which of the file's pages in `range` are in the page cache.
    static func residentPages(_ path: String, _ range: Range<Int>) throws -> (resident: Int, of: Int) {
        let fd = try Syscall.call("open", path) { open(path, O_RDONLY | O_CLOEXEC) }
        defer { Syscall.close(fd) }
        let length = range.count
        guard let map = mmap(nil, length, PROT_READ, MAP_SHARED, fd, off_t(range.lowerBound)), map != MAP_FAILED
        else { throw SystemCallError(call: "mmap", detail: path, errno: errno) }
        defer { munmap(map, length) }
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        var vector = [UInt8](repeating: 0, count: (length + page - 1) / page)
        try Syscall.call("mincore", path) { mincore(map, length, &vector) }
        return (vector.filter { $0 & 1 != 0 }.count, vector.count)
    }

    static func append(_ fd: Int32, _ byte: UInt8, at offset: Int) throws {
        let bytes = [UInt8](repeating: byte, count: window)
        let written = try bytes.withUnsafeBytes { buffer in
            try Syscall.call("pwrite") { pwrite(fd, buffer.baseAddress, buffer.count, off_t(offset)) }
        }
        #expect(written == window)
    }

    @Test func aWindowIsOnTheDiskAndOutOfTheCacheOnceTheNextOneIsHandedOver() throws {
        let path = try Self.scratchFile()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let fd = try Syscall.call("open", path) { open(path, O_WRONLY | O_CLOEXEC) }
        defer { Syscall.close(fd) }
        let writeBehind = try WriteBehind(path: path)

        #expect(!writeBehind.grew)
        try Self.append(fd, 1, at: 0)
        #expect(writeBehind.grew)
        #expect(try Self.residentPages(path, 0..<Self.window).resident > 0, "just written: cached")
        writeBehind.advance()  // the first window's write-back starts; nothing to wait for yet
        #expect(!writeBehind.grew)
        try Self.append(fd, 2, at: Self.window)
        #expect(writeBehind.grew)
        writeBehind.advance()  // the first window is waited for and dropped

        let first = try Self.residentPages(path, 0..<Self.window)
        #expect(first.resident == 0, "\(first.resident) of \(first.of) pages of the first window still cached")
        writeBehind.advance()  // nothing new: nothing changes, nothing fails
        let data = try #require(FileManager.default.contents(atPath: path))
        #expect(data.count == 2 * Self.window)
        #expect(data.prefix(Self.window).allSatisfy { $0 == 1 } && data.suffix(Self.window).allSatisfy { $0 == 2 })
    }

    @Test func aFileThatIsNotThereIsNamed() {
        let path = "/nonexistent-\(UUID().uuidString)"
        #expect {
            _ = try WriteBehind(path: path)
        } throws: { error in
            (error as? SystemCallError)?.errno == ENOENT && "\(error)".contains(path)
        }
    }
}
