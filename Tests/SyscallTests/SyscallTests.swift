import Foundation
import Syscall
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite("Syscall: one helper for raw system calls", .timeLimit(.minutes(2)))
struct SyscallTests {
    @Test func eintrIsRetriedUntilTheCallAnswers() throws {
        var calls = 0
        let result = try Syscall.call("fake") { () -> Int32 in
            calls += 1
            if calls < 3 {
                errno = EINTR
                return -1
            }
            return 7
        }
        #expect(result == 7 && calls == 3)
    }

    @Test func aFailureCarriesTheCallTheDetailAndErrno() {
        let path = "/nonexistent-\(UUID().uuidString)"
        #expect {
            try Syscall.call("open", path) { open(path, O_RDONLY) }
        } throws: { error in
            guard let error = error as? SystemCallError else { return false }
            return error.call == "open" && error.errno == ENOENT && error.description.contains(path)
                && error.description.contains("No such file")
        }
    }

    @Test func eagainOnANonBlockingDescriptorIsNilNotAnError() throws {
        var ends: [Int32] = [0, 0]
        try Syscall.call("pipe") { pipe(&ends) }
        defer { for end in ends { Syscall.close(end) } }
        try Syscall.addStatusFlags(ends[0], O_NONBLOCK)
        var byte: UInt8 = 0
        #expect(try Syscall.nonBlocking("read") { read(ends[0], &byte, 1) } == nil)
        let one: [UInt8] = [42]
        try one.withUnsafeBytes { try Syscall.writeAll(ends[1], $0) }
        #expect(try Syscall.nonBlocking("read") { read(ends[0], &byte, 1) } == 1)
        #expect(byte == 42)
    }

    @Test func noSpaceIsRecognised() {
        #expect(SystemCallError(call: "write", errno: ENOSPC).isNoSpace)
        #expect(!SystemCallError(call: "write", errno: EIO).isNoSpace)
    }
}
