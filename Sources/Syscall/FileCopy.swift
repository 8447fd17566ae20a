import CLinux

#if canImport(Glibc)
    import Glibc
#endif

/// Copies the first bytes of a file that nobody writes meanwhile into a new
/// file, a chunk at a time, handing each chunk to the disk as it goes
/// (`WriteBehind`): at most two chunks of the copy are in flight, and none
/// stays in the page cache. Inside the kernel (`copy_file_range(2)`) where
/// the two files' file systems allow it, by `pread`/`pwrite` otherwise.
///
/// Nothing here makes the copy durable: its owner fsyncs it.
public enum FileCopy {
    /// Bytes per chunk: one window of the write-behind.
    public static let chunkBytes = 1 << 20

    /// Copies `bytes` bytes of `source` into `target`, which must not exist
    /// (it is created with mode 0644 less the umask). `afterEachChunk` runs
    /// after each chunk is started on its way to the disk (tests hold a copy
    /// there). Returns the bytes copied.
    ///
    /// - Parameters:
    ///   - rest: after each chunk the copy rests `rest` times as long as the
    ///     chunk took, its wait for the disk included, through `sleep`: 3
    ///     gives the disk's writes to others three quarters of the time,
    ///     whatever the disk's speed. 0 copies flat out.
    ///   - kernel: false copies through this process's memory even where
    ///     `copy_file_range` would serve (tests of that path).
    /// - Throws: `SystemCallError` naming the call and the file; `EEXIST`
    ///   when `target` exists; `ENODATA` when `source` ends before `bytes`.
    @discardableResult
    public static func copy(
        _ source: String, bytes: Int64, to target: String, rest: Double = 0, kernel: Bool = true,
        sleep: (Duration) -> Void = FileCopy.sleep, afterEachChunk: () -> Void = {}
    ) throws(SystemCallError) -> Int64 {
        let input = try Syscall.call("open", source) { open(source, O_RDONLY | O_CLOEXEC) }
        defer { Syscall.close(input) }
        let output = try Syscall.call("open", target) {
            open(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode_t(0o644))
        }
        defer { Syscall.close(output) }
        let writeBehind = try WriteBehind(path: target)
        var inKernel = kernel
        var buffer: UnsafeMutableRawBufferPointer?
        defer { buffer?.deallocate() }
        var done: Int64 = 0
        while done < bytes {
            let began = ContinuousClock.now
            let want = min(Int64(chunkBytes), bytes - done)
            var copied: Int64 = 0
            while copied < want {
                var from = done + copied
                var to = from
                let n: Int64
                if inKernel {
                    n = clinux_copy_file_range(input, &from, output, &to, want - copied)
                    if n == -1 {
                        let code = errno
                        if code == EINTR { continue }
                        if [EXDEV, EINVAL, ENOSYS, EOPNOTSUPP].contains(code) {
                            inKernel = false  // another file system, or one that cannot: through memory
                            continue
                        }
                        throw SystemCallError(call: "copy_file_range", detail: "\(source) to \(target)", errno: code)
                    }
                } else {
                    if buffer == nil { buffer = .allocate(byteCount: chunkBytes, alignment: 4096) }
                    let space = buffer!
                    let offset = from
                    let read = try Syscall.call("pread", source) {
                        pread(input, space.baseAddress, Int(want - copied), off_t(offset))
                    }
                    try Syscall.writeAll(output, UnsafeRawBufferPointer(rebasing: space[..<read]), at: offset, detail: target)
                    n = Int64(read)
                }
                guard n > 0 else {
                    throw SystemCallError(
                        call: "copy", detail: "\(source) ended at \(done + copied) of \(bytes) bytes", errno: ENODATA)
                }
                copied += n
            }
            done += copied
            writeBehind.advance()
            if rest > 0 { sleep((ContinuousClock.now - began) * rest) }
            afterEachChunk()
        }
        return done
    }

    /// Blocks the calling thread for `duration`.
    public static func sleep(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        var request = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
        var left = timespec()
        while nanosleep(&request, &left) == -1 && errno == EINTR { request = left }
    }
}
