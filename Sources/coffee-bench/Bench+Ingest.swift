import CoffeeDomain
import CoffeeLogging
import CoffeeService
import Foundation
import HealthStore
import Synchronization
import ZeroMQ

#if canImport(Glibc)
    import Glibc
#endif

extension Bench {
    // MARK: 1. Bus ingest throughput

    struct Ingest {
        var eventsPerSecond: Double
        var cpuPer100k: Double
        var rssMB: Double
        var lost: Int64
    }

    func ingest(events: Int, perMessage: Int, curve: Bool = false) throws -> Ingest {
        try live("ingest", curve: curve) { s, subs, pub, base in
            try ingest(s, subs[0], pub, base, events: events, perMessage: perMessage)
        }
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
        let stored = try s.client().ping() - base
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
        let store = try HealthStore(
            configuration: .init(path: dir.appendingPathComponent("s.sqlite").path), logger: Logger(label: "bench"))
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
                store.submissions.submit(b) { _ in
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
}
