import CoffeeDomain
import CoffeeService
import Foundation
import HealthStore
import Synchronization
import ZeroMQ

#if canImport(Glibc)
    import Glibc
#endif

extension Bench {
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
