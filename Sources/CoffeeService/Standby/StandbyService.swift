import CoffeeLifecycle
import CoffeeLogging
import CoffeeTrackerClient
import Foundation
import HealthStore
import Synchronization

/// A standby's follower of its primary (`follow` in the configuration,
/// docs/protocol.md §11), in the group where a primary's inputs are: a follow
/// loop on a thread of its own (its sockets and the store's commits block)
/// that stores each change under the primary's anchor. It survives the
/// primary's restarts by the loop's own resync; a refusal (a key without
/// the `subscribe` or `read` role) is logged and tried again every 5 s.
/// The drain stops the loop and waits for its last commit.
public final class StandbyService: Service {
    public var name: String { "standby" }
    public let status: FollowStatus
    private let follow: ServiceConfiguration.Follow
    private let curve: ClientCurve?
    private let store: HealthStore
    private let logger: Logger

    /// - Parameters:
    ///   - pushKey: this service's Web Push public key (§17), compared with the primary's.
    ///   - pushKeyPath: its file, which a warning names when the two differ.
    public init(
        follow: ServiceConfiguration.Follow, store: HealthStore, pushKey: String, pushKeyPath: String, logger: Logger
    ) throws {
        self.follow = follow
        self.store = store
        self.logger = logger
        curve = try ClientCurve.from(keyFile: follow.keyFile, serverKey: follow.serverKey, discovered: nil)
        status = FollowStatus(primary: follow.updates, pushKey: pushKey, pushKeyPath: pushKeyPath)
    }

    public func run() async throws {
        let stopped = Atomic<Bool>(false)
        let (ended, finished) = AsyncStream.makeStream(of: Void.self)
        let (store, status, logger, follow, curve) = (store, status, logger, follow, curve)
        let thread = Thread {
            Thread.current.name = "standby"
            defer { finished.finish() }
            logger.notice("following the primary", metadata: ["query": "\(follow.query)", "updates": "\(follow.updates)"])
            var refused: String?
            while !stopped.load(ordering: .relaxed) {
                do {
                    var loop = FollowLoop(
                        target: try StandbyReplica(store: store, status: status, adopt: follow.adopt, logger: logger),
                        locate: { (follow.query, follow.updates) }, curve: curve, timeout: nil, requestTimeout: 5,
                        stopped: { stopped.load(ordering: .relaxed) })
                    try loop.run()
                } catch let refusal as FeedRefusal {
                    // Another history (docs/protocol.md §13): said once, tried again every 5 s quietly.
                    if refused != refusal.description {
                        logger.warning("\(refusal.description); trying again every 5 s")
                        refused = refusal.description
                    }
                    let until = ContinuousClock.now + .seconds(5)
                    while !stopped.load(ordering: .relaxed), ContinuousClock.now < until { usleep(50_000) }
                    continue
                } catch {
                    logger.error("cannot follow the primary; trying again in 5 s", metadata: ["error": "\(error)"])
                    let until = ContinuousClock.now + .seconds(5)
                    while !stopped.load(ordering: .relaxed), ContinuousClock.now < until { usleep(50_000) }
                }
            }
        }
        thread.start()
        await gracefulShutdown()
        stopped.store(true, ordering: .relaxed)
        for await _ in ended {}
    }
}
