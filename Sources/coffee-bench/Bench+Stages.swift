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
        let identity = StoreIdentity.new()
        let encodeRate = (0..<5).map { _ in
            let t0 = now()
            for (i, drink) in decoded.enumerated() {
                bytes +=
                    WireFormat.changesMessage(
                        identity: identity, anchor: Int64(i + 1), previousAnchor: Int64(i), added: [drink],
                        addedAnchors: [Int64(i + 1)],
                        deleted: [], deletedAnchors: []
                    ).count
            }
            return Double(events) / (now() - t0)
        }.max()!
        precondition(bytes > 0)
        return (decodeRate, encodeRate)
    }

    /// One model round's work on the model's side: a snapshot of the
    /// window and its `model` message, with `drinks` in the window (dated
    /// over the last 20 hours, as a day of drinking is). Microseconds per
    /// round, the best of five passes of 200 rounds.
    func modelRound(drinks: Int) -> Double {
        let model = CaffeineModel(halfLifeHours: 5, timeZone: TimeZone(identifier: "UTC")!)
        let at = Date()
        var index = CaffeineIndex(model: model, reference: at)
        for i in 0..<drinks {
            index.insert(Drink(mgCaffeine: 64, date: at - 20 * 3600 * Double(i) / Double(max(1, drinks))))
        }
        var bytes = 0
        return (0..<5).map { _ in
            let t0 = now()
            for round in 0..<200 {
                let snapshot = index.snapshot(at: at + Double(round) * 0.1, anchor: Int64(round))
                bytes += WireFormat.modelMessage(snapshot).count  // as the service encodes it
            }
            return (now() - t0) / 200 * 1e6
        }.min()!
    }
}
