import CoffeeDomain
import CoffeeService
import Foundation
import HealthStore
import Synchronization
import Syscall
import ZeroMQ

#if canImport(Glibc)
    import Glibc
#endif

extension Bench {
    // MARK: 2. Latency and CPU at a steady rate

    struct Steady {
        var p50Ms: Double
        var p99Ms: Double
        var maxMs: Double
        var cpuPercent: Double
    }

    /// - Parameter scrapes: read `/metrics` this many times a second
    ///   meanwhile, from a thread of its own, as a Prometheus server would
    ///   (each read on a new connection).
    func steady(rate: Double, seconds: Double, recent: Bool = false, curve: Bool = false, scrapes: Double = 0) throws
        -> Steady
    {
        try live("latency", curve: curve) { s, subs, pub, base in
            let scraping = Atomic<Bool>(scrapes > 0)
            let scraped = Atomic<Int>(0)
            if scrapes > 0, let address = s.endpoints["http"]?.first {
                Thread.detachNewThread {
                    while scraping.load(ordering: .relaxed) {
                        if Self.httpGet(address, "/metrics")?.hasPrefix("HTTP/1.1 200") == true {
                            scraped.add(1, ordering: .relaxed)
                        }
                        usleep(UInt32(1_000_000 / scrapes))
                    }
                }
            }
            defer { scraping.store(false, ordering: .relaxed) }
            let cpu0 = s.cpuSeconds
            let t0 = now()
            let sender = PacedSender(pub, count: Int(rate * seconds), rate: rate, recent: recent)
            var latencies: [Double] = []
            _ = try waitForAnchor(subs[0], base + Int64(sender.count)) { msg, t in latencies += sender.lags(msg, receivedAt: t) }
            let cpu = s.cpuSeconds - cpu0
            return Steady(
                p50Ms: percentile(latencies, 0.5), p99Ms: percentile(latencies, 0.99), maxMs: latencies.max() ?? .nan,
                cpuPercent: cpu / (now() - t0) * 100)
        }
    }

    /// Baseline: one small write and fsync in the same file system.
    func fsyncLatency(samples: Int = 200) throws -> (p50: Double, p99: Double) {
        sync()  // as in live(): no earlier write-back in this measurement
        let dir = folder("fsync")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let path = dir.appendingPathComponent("f").path
        let fd = try Syscall.call("open", path) { open(path, O_WRONLY | O_CREAT | O_APPEND, 0o644) }
        defer { Syscall.close(fd) }
        var times: [Double] = []
        let line = Array(Bodies.drink().utf8)
        for _ in 0..<samples {
            let t = now()
            try line.withUnsafeBytes { try Syscall.writeAll(fd, $0, detail: path) }
            try Syscall.call("fsync", path) { fsync(fd) }
            times.append((now() - t) * 1000)
        }
        return (percentile(times, 0.5), percentile(times, 0.99))
    }

    /// Baseline for CPU at a steady rate: what `rate` small writes, each
    /// followed by fdatasync (as SQLite commits in WAL mode), cost one thread
    /// per second of wall time, in % of a core. Nothing else runs.
    func fsyncCPU(rate: Double, seconds: Double) throws -> Double {
        sync()  // as in live(): no earlier write-back in this measurement
        let dir = folder("fsync-cpu")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let path = dir.appendingPathComponent("f").path
        let fd = try Syscall.call("open", path) { open(path, O_WRONLY | O_CREAT | O_APPEND, 0o644) }
        defer { Syscall.close(fd) }
        let line = Array(Bodies.drink().utf8)
        func threadCPU() -> Double {
            var ts = timespec()
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
            return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
        }
        let c0 = threadCPU()
        let t0 = now()
        for i in 0..<Int(rate * seconds) {
            let due = t0 + Double(i) / rate
            while now() < due { usleep(UInt32(max(0, min(1000, (due - now()) * 1e6)))) }
            try line.withUnsafeBytes { try Syscall.writeAll(fd, $0, detail: path) }
            try Syscall.call("fdatasync", path) { fdatasync(fd) }
        }
        return (threadCPU() - c0) / (now() - t0) * 100
    }

    /// One HTTP GET on a new connection; the response's text, or nil.
    static func httpGet(_ address: String, _ path: String) -> String? {
        guard let colon = address.lastIndex(of: ":"), let port = UInt16(address[address.index(after: colon)...]) else {
            return nil
        }
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var sa = sockaddr_in()
        sa.sin_family = sa_family_t(AF_INET)
        sa.sin_port = port.bigEndian
        inet_pton(AF_INET, String(address[..<colon]), &sa.sin_addr)
        let connected = withUnsafePointer(to: &sa) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { return nil }
        let request = Array("GET \(path) HTTP/1.1\r\nHost: bench\r\n\r\n".utf8)
        guard (request.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }) == request.count else { return nil }
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = read(fd, &buffer, buffer.count)
            if n <= 0 { break }
            out += buffer[..<n]
        }
        return String(decoding: out, as: UTF8.self)
    }
}
