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
        try pub.secure(s.clientCurve)
        try pub.connect(s.endpoints["ingest"]![0])
        let client = try s.client()
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
        try sub.secure(s.clientCurve)
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
        _ name: String, subscribers: Int = 1, curve: Bool = false,
        _ body: (ServiceProcess, [ZMQSocket], ZMQSocket, Int64) throws -> T
    ) throws -> T {
        // Earlier runs leave tens of megabytes of dirty pages; their
        // write-back would otherwise land in this run's fsyncs (a full bench
        // once showed p99 136 ms at 1k/s where a run alone shows 1.5 ms).
        sync()
        let s = try ServiceProcess(binary: binary, folder: folder(name), curve: curve)
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
        let base = try s.client().ping()
        return try body(s, subs, pub, base)
    }
}
