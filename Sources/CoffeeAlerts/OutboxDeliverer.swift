import CoffeeDomain
import CoffeeLifecycle
import CoffeeLogging
import Dispatch
import Foundation
import HealthStore
import Synchronization

/// Delivers one receiver's alerts from the outbox (docs/protocol.md §16), on
/// a thread of its own, since a POST blocks: the due items in batches, each
/// POSTed; a 2xx is delivered, a 5xx, a 408, a 429 or no answer is tried
/// again after a backoff that doubles up to `retryMax`, any other answer is
/// dropped at once, and an item older than `maxAge` is dropped; each
/// batch's outcome is one commit. A dropped item goes to `dropped` (the
/// dead-letter file) with its reason before it leaves the outbox.
///
/// Delivery is at least once: a 2xx is settled in the commit after its
/// batch, so a crash between the two sends it again (the receiver has its
/// `Idempotency-Key`); nothing that was answered 2xx is sent again otherwise.
public final class OutboxDeliverer: Service, Sendable {
    public struct Configuration: Sendable {
        /// Undelivered past this age, an alert is dropped (`alerts.maxAgeS`).
        public var maxAge: TimeInterval = 86_400
        /// The first retry's wait, doubled at each (`alerts.retryInitialS`).
        public var retryInitial: TimeInterval = 1
        /// The longest wait between tries (`alerts.retryMaxS`).
        public var retryMax: TimeInterval = 300
        /// Items taken from the outbox at a time.
        public var batch = 200
        /// How long a POST may take in all.
        public var timeout: TimeInterval = 10

        public init() {}
    }

    /// What it did, for the metrics and `stats`.
    public struct Counts: Sendable, Hashable {
        public var delivered = 0
        public var retried = 0
        public var dropped = 0
        /// Web Push subscriptions removed because their push service said they are gone (404, 410).
        public var removed = 0
        /// Why the last try failed, while the receiver fails; nil once it answers 2xx.
        public var failing: String?
        public var failingSince: Date?
    }

    public let name: String
    public let receiver: AlertReceiver
    let store: HealthStore
    let clock: any WallClock
    let configuration: Configuration
    let logger: Logger
    let dropped: @Sendable (OutboxItem, String) -> Void
    /// Of several services on one PostgreSQL database, only the lease's holder delivers (§16).
    let lease: TellerLease?
    /// Makes, on the deliverer's thread, what it POSTs through (libcurl's, or a test's), given the timeout.
    let makePoster: @Sendable (TimeInterval) -> any AlertPosting
    private let counts = Mutex(Counts())
    private let bell = DispatchSemaphore(value: 0)
    private let stopping = Atomic<Bool>(false)

    public convenience init(
        receiver: AlertReceiver, store: HealthStore, clock: any WallClock, configuration: Configuration = .init(),
        logger: Logger, lease: TellerLease? = nil, dropped: @escaping @Sendable (OutboxItem, String) -> Void
    ) {
        self.init(
            receiver: receiver, store: store, clock: clock, configuration: configuration, logger: logger, lease: lease,
            poster: { HTTPPoster(connectTimeoutMs: 5000, timeoutMs: Int($0 * 1000)) }, dropped: dropped)
    }

    init(
        receiver: AlertReceiver, store: HealthStore, clock: any WallClock, configuration: Configuration, logger: Logger,
        lease: TellerLease?, poster: @escaping @Sendable (TimeInterval) -> any AlertPosting,
        dropped: @escaping @Sendable (OutboxItem, String) -> Void
    ) {
        name = "alerts-" + receiver.name
        self.receiver = receiver
        self.store = store
        self.clock = clock
        self.configuration = configuration
        self.logger = logger
        self.dropped = dropped
        self.lease = lease
        makePoster = poster
    }

    public var current: Counts { counts.withLock { $0 } }

    /// New items are in the outbox: look now.
    public func wake() { bell.signal() }

    public func run() async throws {
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await gracefulShutdown()
                self.stopping.store(true, ordering: .relaxed)
                self.bell.signal()
            }
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                let thread = Thread {
                    self.loop()
                    done.resume()
                }
                thread.name = name
                thread.start()
            }
            group.cancelAll()
        }
    }

    private var nowMs: Int64 { Int64((clock.now().timeIntervalSince1970 * 1000).rounded()) }
    private var isStopping: Bool { stopping.load(ordering: .relaxed) }

    private func loop() {
        let poster = makePoster(configuration.timeout)
        while !isStopping {
            guard lease?.isHeld ?? true else {  // another service delivers; taking the lease wakes this one
                _ = bell.wait(timeout: .now() + 1)
                continue
            }
            let due: [OutboxItem]
            do {
                let (name, now, limit) = (receiver.name, nowMs, configuration.batch)
                if case .push = receiver {
                    due = try store.blocking {
                        try $0.dueAlerts(receiversPrefixed: PushSubscription.receiverPrefix, nowMs: now, limit: limit)
                    }
                } else {
                    due = try store.blocking { try $0.dueAlerts(receiver: name, nowMs: now, limit: limit) }
                }
            } catch {
                if (error as? StoreError)?.isClosed == true { return }
                logger.warning("could not read the outbox; trying again in a second", metadata: ["error": "\(error)"])
                _ = bell.wait(timeout: .now() + 1)
                continue
            }
            if due.isEmpty {
                _ = bell.wait(timeout: .now() + waitForNextDue())
                continue
            }
            deliver(due, with: poster)
        }
    }

    /// Seconds until the receiver's next item is due (an hour at most; a wake comes sooner).
    private func waitForNextDue() -> Double {
        let receiver = self.receiver
        guard
            let next = try? store.blocking({
                try $0.outboxSummary().filter { receiver.owns($0.key) }.map(\.value.nextMs).min()
            })
        else { return 3600 }
        return min(3600, max(0.001, Double(next - nowMs) / 1000))
    }

    private func deliver(_ due: [OutboxItem], with poster: any AlertPosting) {
        var done: [OutboxItem] = []
        var retried: [OutboxItem] = []
        // Counted once the batch's commit below holds them: `stats` never
        // counts what the outbox does not show (a batch whose commit fails
        // is tried, and counted, again). Whether the receiver fails is its
        // state now, and is shown at once.
        var delivered = 0
        for item in due where !isStopping {
            let now = nowMs
            if Double(now - item.createdMs) / 1000 > configuration.maxAge {
                drop(item, "undelivered after \(item.attempts) tries in \(Int(configuration.maxAge)) s (alerts.maxAgeS)")
                done.append(item)
                continue
            }
            let request: AlertReceiver.Request
            do {
                guard let made = try receiver.delivery(item, now: clock.now()) else {
                    done.append(item)  // its subscription was removed since: nobody to tell
                    continue
                }
                request = made
            } catch {
                drop(item, "could not be made: \(error)")
                done.append(item)
                continue
            }
            switch poster.post(request.url, headers: request.headers, body: request.body) {
            case .answered(let status) where (200..<300).contains(status):
                done.append(item)
                delivered += 1
                counts.withLock {
                    $0.failing = nil
                    $0.failingSince = nil
                }
            case .answered(let status) where (status == 404 || status == 410) && receiver.isPush:
                // The push service says the subscription is gone: it goes, and its alerts with it.
                remove(item.receiver)
                done.append(item)
            case .answered(let status) where status == 408 || status == 429 || status >= 500:
                retried.append(retry(item, now: now, because: "answered HTTP \(status)"))
            case .answered(let status):
                drop(item, "\(receiver.url) refused it: HTTP \(status)")
                done.append(item)
            case .failed(let reason):
                retried.append(retry(item, now: now, because: reason))
            }
        }
        do {
            try store.blocking { [done, retried] in try $0.settleAlerts(done: done, retried: retried) }
            count(delivered: delivered, retried: retried.count)
        } catch {
            // The outbox still holds them: they are tried again (a delivered one once more).
            logger.error("could not settle deliveries in the outbox", metadata: ["error": "\(error)"])
            _ = bell.wait(timeout: .now() + 1)
        }
    }

    /// Removes the subscription of `receiver` (`push:ID`) from the store (§17).
    private func remove(_ receiver: String) {
        let id = String(receiver.dropFirst(PushSubscription.receiverPrefix.count))
        do {
            _ = try store.blocking { try $0.writeSettings(scope: PushSubscription.scope, [(id, "null")]) }
            counts.withLock { $0.removed += 1 }
            logger.notice("a push subscription is gone (its push service said so); removed", metadata: ["id": "\(id)"])
        } catch {
            logger.error("could not remove a push subscription", metadata: ["id": "\(id)", "error": "\(error)"])
        }
    }

    /// The item with one more try and its next time, after a backoff
    /// doubling up to `retryMax`; the receiver fails from now, which is said
    /// when it starts.
    private func retry(_ item: OutboxItem, now: Int64, because reason: String) -> OutboxItem {
        var next = item
        next.attempts += 1
        let wait = min(configuration.retryMax, configuration.retryInitial * pow(2, Double(item.attempts)))
        next.nextMs = now + Int64(wait * 1000)
        let first = counts.withLock { counts -> Bool in
            defer {
                counts.failing = reason
                if counts.failingSince == nil { counts.failingSince = clock.now() }
            }
            return counts.failing == nil
        }
        if first {
            logger.warning(
                "an alert receiver fails; its alerts wait in the outbox and are tried again",
                metadata: ["receiver": "\(receiver.name)", "url": "\(receiver.url)", "reason": "\(reason)"])
        }
        return next
    }

    /// A batch's tries, counted after its commit.
    private func count(delivered: Int, retried: Int) {
        guard delivered + retried > 0 else { return }
        counts.withLock {
            $0.delivered += delivered
            $0.retried += retried
        }
    }

    private func drop(_ item: OutboxItem, _ reason: String) {
        dropped(item, reason)
        counts.withLock { $0.dropped += 1 }
        logger.error(
            "an alert was dropped", metadata: ["receiver": "\(receiver.name)", "id": "\(item.id)", "reason": "\(reason)"])
    }
}
