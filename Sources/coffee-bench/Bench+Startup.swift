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
    // MARK: 4. Start-up with a large store

    func startup(drinks: Int) async throws -> (seconds: Double, idleMB: Double, emptySeconds: Double) {
        let empty = try ServiceProcess(binary: binary, folder: folder("empty"))
        let emptySeconds = try empty.start()
        empty.stop()
        let s = try ServiceProcess(binary: binary, folder: folder("startup"))
        try FileManager.default.createDirectory(at: s.data, withIntermediateDirectories: true)
        let store = try HealthStore(
            configuration: .init(path: s.data.appendingPathComponent("coffee-tracker.sqlite").path),
            logger: Logger(label: "bench"))
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
}
