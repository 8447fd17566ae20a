import CoffeeLifecycle
import CoffeeLogging
import Foundation
import PostgreSQL
import Synchronization

/// Which service tells the person (docs/protocol.md §16): of several services
/// on one PostgreSQL database, the one holding the session-level advisory
/// lock `lockKey` on a connection of its own (docs/postgresql.md). The others
/// try it every `retry`; a teller that dies ends its session, and with it the
/// lock, so another takes over. A lost connection loses the lease at once (the
/// lock may be another's by then). A store in a file has one service: it
/// always holds the lease.
public final class TellerLease: Service, Sendable {
    public let name = "teller"
    /// The advisory lock's key: "CofU", beside the schema's "CofT".
    public static let lockKey: Int64 = 0x436F_6655

    private let conninfo: String?
    private let retry: Duration
    private let logger: Logger
    private let held: Atomic<Bool>
    private let observers = Mutex<[@Sendable (Bool) -> Void]>([])
    private let stopping = Atomic<Bool>(false)

    /// - Parameter conninfo: the shared store's database; nil for a store of one service.
    public init(conninfo: String?, retry: Duration = .seconds(2), logger: Logger) {
        self.conninfo = conninfo
        self.retry = retry
        self.logger = logger
        held = Atomic(conninfo == nil)
    }

    /// This service tells now.
    public var isHeld: Bool { held.load(ordering: .acquiring) }

    /// `observer` is called with the new value each time the lease is taken or lost (on the lease's thread).
    public func observe(_ observer: @escaping @Sendable (Bool) -> Void) {
        observers.withLock { $0.append(observer) }
    }

    public func start() async throws {}

    public func run() async throws {
        guard let conninfo else { return await gracefulShutdown() }
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await gracefulShutdown()
                self.stopping.store(true, ordering: .relaxed)
            }
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                let thread = Thread {
                    self.loop(conninfo)
                    done.resume()
                }
                thread.name = "teller"
                thread.start()
            }
            group.cancelAll()
        }
    }

    private var isStopping: Bool { stopping.load(ordering: .relaxed) }

    private func loop(_ conninfo: String) {
        var connection: Connection?
        while !isStopping {
            do {
                let c = try connection ?? Connection(conninfo: conninfo)
                connection = c
                if isHeld {
                    _ = try c.scalar("SELECT 1")  // still the session that holds it
                } else if try c.scalar("SELECT pg_try_advisory_lock(\(Self.lockKey))::int") == 1 {
                    set(true)
                    logger.notice("this service tells the person now (it holds the teller's lock)")
                }
            } catch {
                if isHeld {
                    logger.warning(
                        "lost the teller's lock with its connection; another service may tell now",
                        metadata: ["error": "\(error)"])
                    set(false)
                }
                connection?.close()
                connection = nil
            }
            // Held: the session is looked at every second; not: the lock is tried every `retry`.
            let until = ContinuousClock.now + (isHeld ? .seconds(1) : retry)
            while ContinuousClock.now < until, !isStopping { Thread.sleep(forTimeInterval: 0.05) }
        }
        if isHeld { set(false) }
        connection?.close()  // the session ends, and the lock with it
    }

    private func set(_ value: Bool) {
        held.store(value, ordering: .releasing)
        for observer in observers.withLock({ $0 }) { observer(value) }
    }
}
