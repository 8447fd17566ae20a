import CoffeeLogging
import Foundation
import Glibc
import PostgreSQL
import Synchronization

/// Listens, on a connection and a thread of its own, for the commits of
/// every service sharing the store (PostgreSQL's LISTEN/NOTIFY; each commit
/// notifies `channel` at COMMIT), and wakes the store to announce them.
///
/// A notification only wakes: what to announce is read from the database
/// (`HealthStore.catchUpShared`), so one lost or coalesced costs nothing but
/// time; one of an anchor the store announced already (its own commit's)
/// wakes nothing. The listener also wakes the store every `idleWake` and
/// after each reconnection. A lost connection is reported (`onLost`: the store then
/// answers `unavailable` until it can write again) and connected again with
/// backoff, from 0.1 s doubling to 5 s.
final class SharedStoreListener: @unchecked Sendable {
    /// The channel a shared store's commits notify.
    static let channel = "coffee_tracker_commits"
    /// How often the store is woken without a notification.
    static let idleWake: Duration = .seconds(5)

    private let conninfo: String
    private let logger: Logger
    /// Called on the listener's thread to wake the store; set before `start`.
    var wake: @Sendable () -> Void = {}
    /// The last anchor the store announced: a notification of an anchor at
    /// or below it (the store's own commit, most often) wakes nothing.
    var announced: @Sendable () -> Int64 = { 0 }
    /// Called on the listener's thread when its connection is lost.
    var onLost: (@Sendable (String) -> Void)?
    private let stopping = Atomic<Bool>(false)
    private var thread: Thread?
    private let finished = DispatchSemaphore(value: 0)

    init(conninfo: String, logger: Logger) {
        self.conninfo = conninfo
        self.logger = logger
    }

    func start() {
        let thread = Thread { [self] in
            run()
            finished.signal()
        }
        thread.name = "store-listener"
        self.thread = thread
        thread.start()
    }

    /// Stops the thread and waits for it (at most one poll or one step of
    /// the backoff, 0.2 s, or a connection attempt).
    func stop() {
        guard thread != nil, !stopping.exchange(true, ordering: .relaxed) else { return }
        finished.wait()
    }

    /// Some notification names an anchor the store has not announced (or
    /// none that can be read).
    private func isNews(_ notifications: [(channel: String, payload: String)]) -> Bool {
        guard !notifications.isEmpty else { return false }
        let newest = notifications.map { Int64($0.payload) ?? .max }.max()!
        return newest > announced()
    }

    private func run() {
        var connection: Connection?
        var backoff = 0.1
        var lastWake = ContinuousClock.now
        while !stopping.load(ordering: .relaxed) {
            guard let listening = connection else {
                do {
                    let c = try Connection(conninfo: conninfo)
                    try c.execute("LISTEN \(Self.channel)")
                    connection = c
                    backoff = 0.1
                    wake()  // whatever was committed while no one listened
                    lastWake = .now
                } catch {
                    let until = ContinuousClock.now + .milliseconds(Int64(backoff * 1000))
                    while ContinuousClock.now < until, !stopping.load(ordering: .relaxed) {
                        Thread.sleep(forTimeInterval: 0.1)  // a stop waits for one step, not the backoff
                    }
                    backoff = min(backoff * 2, 5)
                }
                continue
            }
            var pollfd = pollfd(fd: listening.socket, events: Int16(POLLIN), revents: 0)
            let ready = poll(&pollfd, 1, 200)
            do {
                if ready > 0, try isNews(listening.notifications()) || !listening.isConnected {
                    wake()
                    lastWake = .now
                }
                guard listening.isConnected else { throw PostgreSQLError(message: "connection lost", context: "listening") }
            } catch {
                logger.warning(
                    "lost the connection that listens for other services' commits; connecting again",
                    metadata: ["error": "\(error)"])
                onLost?("the database is unreachable: \(error)")
                connection = nil
                continue
            }
            if ContinuousClock.now - lastWake > Self.idleWake {
                wake()
                lastWake = .now
            }
        }
        connection?.close()
    }
}
