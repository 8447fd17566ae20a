import CoffeeDomain
import CoffeeService
import Foundation
import HealthStore
import Synchronization
import ZeroMQ

#if canImport(Glibc)
    import Glibc
#endif

/// Sends single-drink messages at a steady rate from a thread of its own,
/// recording when each UUID was sent.
final class PacedSender: @unchecked Sendable {
    let sent = Mutex<[String: Double]>([:])
    let count: Int

    /// - Parameter recent: date every drink in the last hour, so that all of
    ///   them land in the model's window (and its cache); otherwise over the past year.
    init(_ pub: ZMQSocket, count: Int, rate: Double, recent: Bool = false) {
        self.count = count
        let ids = (0..<count).map { _ in UUID() }
        let bodies = ids.map { Data(Bodies.drink($0, date: recent ? Bodies.recent : Bodies.historicalDate()).utf8) }
        let topic = Data("drink.add".utf8)
        let handoff = Handoff(pub)
        let t0 = now()
        let thread = Thread { [self] in
            for i in 0..<count {
                let due = t0 + Double(i) / rate
                while now() < due { usleep(UInt32(max(0, min(1000, (due - now()) * 1e6)))) }
                sent.withLock { $0[ids[i].uuidString] = now() }
                _ = try? handoff.socket.send([topic, bodies[i]])
            }
        }
        thread.start()
    }

    /// How long ago, in ms, the drinks of a `changes` message were sent.
    func lags(_ msg: JSONValue, receivedAt t: Double) -> [Double] {
        guard case .array(let added)? = msg[member: "added"] else { return [] }
        return added.compactMap { a in
            guard case .string(let u)? = a[member: "uuid"], let t1 = sent.withLock({ $0[u] }) else { return nil }
            return (t - t1) * 1000
        }
    }

    /// A `changes` body read with the service's own JSON reader: several
    /// times faster than JSONSerialization, which made the harness, not
    /// the service, the slow part of the fan-out measurement.
    static func message(_ body: Data) -> (msg: JSONValue, anchor: Int64)? {
        guard let msg = try? JSONReader.parse(body), case .int(let anchor)? = msg[member: "anchor"] else { return nil }
        return (msg, anchor)
    }
}

/// Hands a socket to one other thread, whole: the thread start is the memory
/// barrier libzmq asks for, and the giver does not touch it until that thread
/// has finished sending.
final class Handoff: @unchecked Sendable {
    let socket: ZMQSocket
    init(_ socket: ZMQSocket) { self.socket = socket }
}

func now() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

func percentile(_ values: [Double], _ p: Double) -> Double {
    guard !values.isEmpty else { return .nan }
    let sorted = values.sorted()
    return sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * p))]
}

/// What the measurements share: the binary, a scratch folder, a context.
struct Bench {
    let binary: String
    let scratch: URL
    let context = ZMQContext()

    func folder(_ name: String) -> URL {
        scratch.appendingPathComponent("\(name)-\(UUID().uuidString.prefix(8))")
    }

    /// A PUB connected to the ingest endpoint, past the slow-joiner window.
    func publisher(_ s: ServiceProcess) throws -> ZMQSocket {
        let pub = try ZMQSocket(context, .pub)
        try pub.setSendHighWaterMark(0)
        try pub.setLinger(ms: 2000)
        try pub.connect(s.endpoints["ingest"]![0])
        let client = try BenchClient(endpoint: s.endpoints["query"]![0])
        let before = try client.ping()
        let probe = Bodies.drink()
        let started = now()
        while try client.ping() == before {
            try pub.send([Data("drink.add".utf8), Data(probe.utf8)])
            usleep(5000)
            guard now() - started < 10 else { throw BenchError("publisher never got through") }
        }
        return pub
    }

    /// A SUB on the update endpoint for `topics`, past the slow-joiner window.
    func subscriber(_ s: ServiceProcess, topics: [String] = ["changes"]) throws -> ZMQSocket {
        let sub = try ZMQSocket(context, .sub)
        try sub.setReceiveHighWaterMark(0)
        try sub.setLinger(ms: 0)
        for t in topics + ["heartbeat"] { try sub.subscribe(t) }
        try sub.connect(s.endpoints["updates"]![0])
        let started = now()
        while now() - started < 10 {
            if try ZMQSocket.poll([.socket(sub)], timeoutMs: 100).first == true, try sub.receive(dontWait: true) != nil {
                return sub
            }
        }
        throw BenchError("no heartbeat")
    }

    /// Reads `changes` until the anchor reaches `target`; returns when it did.
    /// Without `each`, only the anchor is read from each message: parsing
    /// every message whole would take the harness a good part of a core,
    /// which the service under test would then not have.
    func waitForAnchor(
        _ sub: ZMQSocket, _ target: Int64, timeout: Double = 300, each: ((JSONValue, Double) -> Void)? = nil
    ) throws -> Double {
        let started = now()
        while now() - started < timeout {
            guard try ZMQSocket.poll([.socket(sub)], timeoutMs: 200).first == true else { continue }
            while let frames = try sub.receive(dontWait: true) {
                guard frames.count == 2, String(decoding: frames[0], as: UTF8.self) == "changes" else { continue }
                let t = now()
                let anchor: Int64
                if let each {
                    guard let (msg, a) = PacedSender.message(frames[1]) else { continue }
                    each(msg, t)
                    anchor = a
                } else {
                    anchor = Self.leadingAnchor(frames[1])
                }
                if anchor >= target { return t }
            }
        }
        throw BenchError("anchor \(target) not reached")
    }

    /// The number after the first `"anchor":` of a message body.
    static func leadingAnchor(_ body: Data) -> Int64 {
        let key = Array(#""anchor":"#.utf8)
        return body.withUnsafeBytes { raw -> Int64 in
            let bytes = raw.bindMemory(to: UInt8.self)
            guard bytes.count > key.count else { return 0 }
            for start in 0...(bytes.count - key.count) where bytes[start] == key[0] {
                guard (0..<key.count).allSatisfy({ bytes[start + $0] == key[$0] }) else { continue }
                var value: Int64 = 0
                var i = start + key.count
                while i < bytes.count, bytes[i] >= 48, bytes[i] <= 57 {
                    value = value * 10 + Int64(bytes[i] - 48)
                    i += 1
                }
                return value
            }
            return 0
        }
    }

    /// A service with a `changes` subscriber and a publisher past the
    /// slow-joiner window, and the anchor before the measurement; all closed after `body`.
    func live<T>(
        _ name: String, subscribers: Int = 1,
        _ body: (ServiceProcess, [ZMQSocket], ZMQSocket, Int64) throws -> T
    ) throws -> T {
        // Earlier runs leave tens of megabytes of dirty pages; their
        // write-back would otherwise land in this run's fsyncs (a full bench
        // once showed p99 136 ms at 1k/s where a run alone shows 1.5 ms).
        sync()
        let s = try ServiceProcess(binary: binary, folder: folder(name))
        try s.start()
        defer {
            s.stop()
            try? FileManager.default.removeItem(at: s.folder)  // nothing left to write back
        }
        let subs = try (0..<subscribers).map { _ in try subscriber(s) }
        let pub = try publisher(s)
        defer {
            pub.close()
            for sub in subs { sub.close() }
        }
        let base = try BenchClient(endpoint: s.endpoints["query"]![0]).ping()
        return try body(s, subs, pub, base)
    }

    // MARK: 1. Bus ingest throughput

    struct Ingest {
        var eventsPerSecond: Double
        var cpuPer100k: Double
        var rssMB: Double
        var lost: Int64
    }

    func ingest(events: Int, perMessage: Int) throws -> Ingest {
        try live("ingest") { s, subs, pub, base in try ingest(s, subs[0], pub, base, events: events, perMessage: perMessage) }
    }

    private func ingest(_ s: ServiceProcess, _ sub: ZMQSocket, _ pub: ZMQSocket, _ base: Int64, events: Int, perMessage: Int)
        throws -> Ingest
    {
        let bodies = (0..<(events / perMessage)).map { _ in
            Data((perMessage == 1 ? Bodies.historical() : Bodies.drinks(perMessage)).utf8)
        }
        let topic = Data("drink.add".utf8)
        let cpu0 = s.cpuSeconds
        let t0 = now()
        for body in bodies { try pub.send([topic, body]) }
        let t1 = try waitForAnchor(sub, base + Int64(events))
        let cpu = s.cpuSeconds - cpu0
        let stored = try BenchClient(endpoint: s.endpoints["query"]![0]).ping() - base
        return Ingest(
            eventsPerSecond: Double(events) / (t1 - t0), cpuPer100k: cpu / Double(events) * 100_000,
            rssMB: s.memory.rss, lost: Int64(events) - stored)
    }

    /// Baseline: raw libzmq PUB→SUB over ipc, same bodies, no service.
    func rawZeroMQ(events: Int, perMessage: Int) throws -> Double {
        let path = "ipc://\(folder("raw").path).sock"
        let sub = try ZMQSocket(context, .sub)
        try sub.setReceiveHighWaterMark(0)
        try sub.subscribe("")
        try sub.bind(path)
        let pub = try ZMQSocket(context, .pub)
        try pub.setSendHighWaterMark(0)
        try pub.connect(path)
        defer {
            pub.close()
            sub.close()
        }
        while true {  // slow joiner
            try pub.send([Data("probe".utf8)])
            if try ZMQSocket.poll([.socket(sub)], timeoutMs: 10).first == true { break }
        }
        while try sub.receive(dontWait: true) != nil {}
        let body = Data((perMessage == 1 ? Bodies.historical() : Bodies.drinks(perMessage)).utf8)
        let count = events / perMessage
        let topic = Data("drink.add".utf8)
        let t0 = now()
        let handoff = Handoff(pub)
        let sender = Thread {
            for _ in 0..<count { _ = try? handoff.socket.send([topic, body]) }
        }
        sender.start()
        var received = 0
        while received < count {
            if try ZMQSocket.poll([.socket(sub)], timeoutMs: 1000).first == true {
                while let m = try sub.receive(dontWait: true), m.count == 2 { received += 1 }
            }
        }
        return Double(events) / (now() - t0)
    }

    /// What the store alone does with `events` drinks.
    struct Ceiling {
        var eventsPerSecond: Double
        /// This process's CPU seconds (user and system) per 100k drinks:
        /// nothing else runs here meanwhile.
        var cpuPer100k: Double
    }

    /// Baseline: the store alone, same schema and settings, `events` drinks
    /// submitted at once in batches of `batch` (the path the bus takes, with
    /// group commit), no ZeroMQ, no JSON.
    func storageCeiling(events: Int, batch: Int) async throws -> Ceiling {
        sync()  // as in live(): no earlier write-back in this measurement
        let dir = folder("storage")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let store = try HealthStore(configuration: .init(path: dir.appendingPathComponent("s.sqlite").path))
        let batches = stride(from: 0, to: events, by: batch).map { _ in
            WriteBatch(
                drinks: (0..<batch).map { _ in
                    // Dated as the ingest runs' drinks are (Bodies.historical).
                    Drink(
                        mgCaffeine: 95.5, date: Date().addingTimeInterval(-Double.random(in: 60...(365 * 86_400))),
                        source: "bench")
                })
        }
        let cpu0 = processCPUSeconds()
        let t0 = now()
        let left = Atomic<Int>(batches.count)
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            for b in batches {
                store.submit(b) { _ in
                    if left.subtract(1, ordering: .relaxed).newValue == 0 { done.resume() }
                }
            }
        }
        let ceiling = Ceiling(
            eventsPerSecond: Double(events) / (now() - t0), cpuPer100k: (processCPUSeconds() - cpu0) / Double(events) * 100_000)
        await store.close()
        try? FileManager.default.removeItem(at: dir)
        return ceiling
    }

    /// User and system CPU seconds of this process so far.
    func processCPUSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    // MARK: 2. Latency and CPU at a steady rate

    struct Steady {
        var p50Ms: Double
        var p99Ms: Double
        var maxMs: Double
        var cpuPercent: Double
    }

    func steady(rate: Double, seconds: Double, recent: Bool = false) throws -> Steady {
        try live("latency") { s, subs, pub, base in
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
        let fd = open(dir.appendingPathComponent("f").path, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        defer { close(fd) }
        var times: [Double] = []
        let line = Array(Bodies.drink().utf8)
        for _ in 0..<samples {
            let t = now()
            _ = line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            fsync(fd)
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
        let fd = open(dir.appendingPathComponent("f").path, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        defer { close(fd) }
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
            _ = line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            fdatasync(fd)
        }
        return (threadCPU() - c0) / (now() - t0) * 100
    }

    // MARK: 3. Inbox import

    struct Import {
        var drinksPerSecond: Double
        var peakMB: Double
        var decodePerSecond: Double
    }

    func inboxImport(name: String, drinks: Int) throws -> Import {
        sync()  // as in live(): no earlier write-back in this measurement
        let s = try ServiceProcess(binary: binary, folder: folder("inbox"))
        try s.start()
        defer {
            s.stop()
            try? FileManager.default.removeItem(at: s.folder)
        }
        let file = s.folder.appendingPathComponent(name)
        let date = Date().addingTimeInterval(-40 * 3600)  // outside the model's window, as history is
        let uuids = (0..<drinks).map { _ in UUID() }
        let format = InboxFileParser.format(of: name)!
        switch format {
        case .jsonLines:
            var text = ""
            text.reserveCapacity(drinks * 100)
            for u in uuids { text += #"{"uuid":"\#(u.uuidString)","mgCaffeine":95.5,"date":"\#(RFC3339.string(date))"}"# + "\n" }
            try Data(text.utf8).write(to: file)
        case .json:
            let items = uuids.map { #"{"uuid":"\#($0.uuidString)","mgCaffeine":95.5,"date":"\#(RFC3339.string(date))"}"# }
            try Data(("[" + items.joined(separator: ",") + "]").utf8).write(to: file)
        case .propertyList:
            struct SampleDrink: Codable {
                var mgCaffeine: Double
                var date: Date
                var uuid: UUID
            }
            let encoder = PropertyListEncoder()
            encoder.outputFormat = .binary
            try encoder.encode(uuids.map { SampleDrink(mgCaffeine: 95.5, date: date, uuid: $0) }).write(to: file)
        }
        // Baseline: Foundation's decoder over the same file, in this process.
        let data = try Data(contentsOf: file)
        let d0 = now()
        switch format {
        case .jsonLines:
            let decoder = JSONDecoder()
            var start = data.startIndex
            while start < data.endIndex {
                let end = data[start...].firstIndex(of: 10) ?? data.endIndex
                if end > start { _ = try decoder.decode(DrinkInput.self, from: data[start..<end]) }
                start = end + 1
            }
        case .json: _ = try JSONDecoder().decode([DrinkInput].self, from: data)
        case .propertyList: _ = try PropertyListDecoder().decode([DrinkInput].self, from: data)
        }
        let decodeRate = Double(drinks) / (now() - d0)
        let target = s.inbox.appendingPathComponent("processed").appendingPathComponent(name)
        let t0 = now()
        guard rename(file.path, s.inbox.appendingPathComponent(name).path) == 0 else { throw BenchError("rename") }
        while !FileManager.default.fileExists(atPath: target.path) {
            usleep(20_000)
            guard now() - t0 < 600 else { throw BenchError("import of \(name) did not finish") }
        }
        return Import(drinksPerSecond: Double(drinks) / (now() - t0), peakMB: s.memory.peak, decodePerSecond: decodeRate)
    }

    // MARK: 4. Start-up with a large store

    func startup(drinks: Int) async throws -> (seconds: Double, idleMB: Double, emptySeconds: Double) {
        let empty = try ServiceProcess(binary: binary, folder: folder("empty"))
        let emptySeconds = try empty.start()
        empty.stop()
        let s = try ServiceProcess(binary: binary, folder: folder("startup"))
        try FileManager.default.createDirectory(at: s.data, withIntermediateDirectories: true)
        let store = try HealthStore(configuration: .init(path: s.data.appendingPathComponent("coffee-tracker.sqlite").path))
        let date = Date().addingTimeInterval(-40 * 3600)
        let remaining = Mutex(drinks)
        _ = try await store.applyStream {
            let n = remaining.withLock { r -> Int in
                let n = min(r, 10_000)
                r -= n
                return n
            }
            return n == 0 ? nil : WriteBatch(drinks: (0..<n).map { _ in Drink(mgCaffeine: 95.5, date: date) })
        }
        await store.close()
        let seconds = try s.start()
        sleep(1)
        let idle = s.memory.rss
        s.stop()
        return (seconds, idle, emptySeconds)
    }

    // MARK: 5. Fan-out

    func fanout(subscribers: Int, rate: Double, seconds: Double) throws -> (drops: Int, worstP99LagMs: Double) {
        try live("fanout", subscribers: subscribers) { s, subs, pub, base in
            let sender = PacedSender(pub, count: Int(rate * seconds), rate: rate)
            var lags = [[Double]](repeating: [], count: subscribers)
            var finished = Set<Int>()
            let items = subs.map { ZMQSocket.PollItem.socket($0) }
            let deadline = now() + seconds + 30
            while finished.count < subscribers && now() < deadline {
                let ready = try ZMQSocket.poll(items, timeoutMs: 200)
                for (i, r) in ready.enumerated() where r {
                    while let frames = try subs[i].receive(dontWait: true) {
                        let t = now()  // per message: one harness thread reads all 100 subscribers
                        guard frames.count == 2, String(decoding: frames[0], as: UTF8.self) == "changes",
                            let (msg, anchor) = PacedSender.message(frames[1])
                        else { continue }
                        lags[i] += sender.lags(msg, receivedAt: t)
                        if anchor >= base + Int64(sender.count) { finished.insert(i) }
                    }
                }
            }
            let drops = lags.reduce(0) { $0 + (sender.count - $1.count) }
            return (drops, lags.map { percentile($0, 0.99) }.max() ?? .nan)
        }
    }
}

extension Bench {
    // MARK: 6. Stages alone

    /// What one thread does per event, each stage alone in this process:
    /// reading and validating single-event bus bodies, and writing one-drink
    /// `changes` messages. Events per second of one thread, the best of
    /// five passes (a CPU-bound loop is only ever slowed by the machine).
    func stages(events: Int) -> (decodePerSecond: Double, encodePerSecond: Double) {
        let bodies = (0..<events).map { _ in Array(Bodies.historical().utf8) }
        let decoder = BatchDecoder()
        let at = Date()
        var decoded: [Drink] = []
        let decodeRate = (0..<5).map { _ in
            let t0 = now()
            decoded.removeAll(keepingCapacity: true)
            for body in bodies {
                body.withUnsafeBytes { raw in
                    if let drinks = try? decoder.drinks(json: raw, now: at, source: "bus") { decoded += drinks }
                }
            }
            return Double(events) / (now() - t0)
        }.max()!
        precondition(decoded.count == events, "the bench's own bodies must be valid")
        var bytes = 0
        let encodeRate = (0..<5).map { _ in
            let t0 = now()
            for (i, drink) in decoded.enumerated() {
                bytes +=
                    WireFormat.changesMessage(anchor: Int64(i + 1), previousAnchor: Int64(i), added: [drink], deleted: []).count
            }
            return Double(events) / (now() - t0)
        }.max()!
        precondition(bytes > 0)
        return (decodeRate, encodeRate)
    }
}
