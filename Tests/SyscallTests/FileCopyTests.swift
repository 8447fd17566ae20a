import Foundation
import Syscall
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite("FileCopy: a file's first bytes into a new file, chunk by chunk", .timeLimit(.minutes(1)))
struct FileCopyTests {
    private let folder: URL = {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("ct-copy-\(UUID().uuidString)")
        try! FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }()

    /// A file of `bytes` bytes that repeat nowhere. Made 8 bytes at a time
    /// by a xorshift generator: a byte at a time from the system generator
    /// was a `getrandom` call per byte, seconds of both of the test pool's
    /// threads for these megabytes, which starved every other test (an HTTP
    /// route that had to answer within 5 s among them).
    private func source(bytes: Int) throws -> (path: String, data: Data) {
        var state = UInt64.random(in: 1...UInt64.max)
        var words = [UInt64](repeating: 0, count: (bytes + 7) / 8)
        for i in words.indices {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            words[i] = state
        }
        let data = words.withUnsafeBytes { Data($0.prefix(bytes)) }
        let path = folder.appendingPathComponent("source").path
        try data.write(to: URL(fileURLWithPath: path))
        return (path, data)
    }

    @Test(arguments: [true, false])
    func theCopyHoldsExactlyTheBytesAskedForChunkByChunk(inKernel: Bool) throws {
        defer { try? FileManager.default.removeItem(at: folder) }
        let whole = FileCopy.chunkBytes * 3 + 12_345
        let (path, data) = try source(bytes: whole)
        let target = folder.appendingPathComponent("copy").path
        var chunks = 0
        let asked = Int64(whole - 100)  // a prefix: what the file held when the copy began
        let copied = try FileCopy.copy(path, bytes: asked, to: target, kernel: inKernel, afterEachChunk: { chunks += 1 })
        #expect(copied == asked)
        #expect(chunks == 4)
        #expect(try Data(contentsOf: URL(fileURLWithPath: target)) == data.prefix(Int(asked)))
    }

    @Test func restingGivesEachChunkItsShareOfTheTimeItTook() throws {
        defer { try? FileManager.default.removeItem(at: folder) }
        let (path, data) = try source(bytes: FileCopy.chunkBytes * 2 + 1)
        let target = folder.appendingPathComponent("copy").path
        var rests: [Duration] = []
        var chunkEnds: [ContinuousClock.Instant] = []
        let began = ContinuousClock.now
        try FileCopy.copy(
            path, bytes: Int64(data.count), to: target, rest: 3, sleep: { rests.append($0) },
            afterEachChunk: { chunkEnds.append(.now) })
        #expect(rests.count == 3 && chunkEnds.count == 3)
        // Each rest is three times its chunk's time, which ended before the rest was asked for.
        let firstChunk = chunkEnds[0] - began
        #expect(rests[0] > .zero && rests[0] <= firstChunk * 3)
        #expect(rests.allSatisfy { $0 > .zero })
        #expect(try Data(contentsOf: URL(fileURLWithPath: target)) == data)
        var none: [Duration] = []
        try FileCopy.copy(path, bytes: 10, to: target + "-flat", sleep: { none.append($0) })
        #expect(none.isEmpty)
    }

    @Test func aSourceShorterThanAskedIsAnErrorThatSaysWhereItEnded() throws {
        defer { try? FileManager.default.removeItem(at: folder) }
        let (path, _) = try source(bytes: 5000)
        let target = folder.appendingPathComponent("copy").path
        #expect {
            try FileCopy.copy(path, bytes: 9000, to: target)
        } throws: { error in
            guard let error = error as? SystemCallError else { return false }
            return error.errno == ENODATA && error.detail.contains("ended at 5000 of 9000")
        }
    }

    @Test func anExistingTargetIsRefusedAndLeftAlone() throws {
        defer { try? FileManager.default.removeItem(at: folder) }
        let (path, _) = try source(bytes: 100)
        let target = folder.appendingPathComponent("copy").path
        try Data("mine".utf8).write(to: URL(fileURLWithPath: target))
        #expect {
            try FileCopy.copy(path, bytes: 100, to: target)
        } throws: { ($0 as? SystemCallError)?.errno == EEXIST }
        #expect(try Data(contentsOf: URL(fileURLWithPath: target)) == Data("mine".utf8))
    }

    @Test func aThreadsNiceValueIsItsOwn() async throws {
        let niceOfNewThread = await withCheckedContinuation { (done: CheckedContinuation<Int32, Never>) in
            Thread {
                try? Syscall.setThreadNice(7)
                errno = 0
                done.resume(returning: getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0))
            }.start()
        }
        #expect(niceOfNewThread == 7)
        #expect(getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0) != 7)
    }
}
