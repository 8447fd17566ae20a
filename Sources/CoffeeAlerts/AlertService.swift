import CoffeeDomain
import CoffeeLifecycle
import CoffeeLogging
import CoffeeModel
import Foundation
import HealthStore

#if canImport(Glibc)
    import Glibc
#endif

/// Decides what to tell the person (docs/protocol.md §16): the rules
/// (`AlertRules`) over each model the model service publishes, and again
/// when the curve crosses a limit with no drink (a timer on the injected
/// clock, set from the model's curve). An alert is written to the outbox
/// with the rules' new state in one durable commit, then announced (the
/// `alert` message) and handed to the receivers' deliverers. A restart
/// reads the state back, so nothing is told twice; a crash before the
/// commit decides it again from the model.
public actor AlertService: Service {
    public nonisolated let name = "alerts"
    let store: HealthStore
    let model: ModelService
    let rules: AlertRules.Configuration
    /// The outbox's receivers by name: an alert gets a row for each.
    let receivers: [String]
    /// Each Web Push subscription the store keeps is a receiver too (`push:ID`, §17).
    let pushes: Bool
    let wallClock: any WallClock
    let timerClock: any Clock<Duration>
    let logger: Logger
    /// Called after the commit with each alert's JSON (the `alert` message).
    let announce: @Sendable (JSONValue) -> Void
    /// Called after a commit that put items in the outbox.
    let wakeDeliverers: @Sendable () -> Void
    /// Of several services on one PostgreSQL database, only the lease's holder tells (§16).
    let lease: TellerLease?

    var state: [AlertRule: AlertStatus] = [:]
    /// How many alerts each rule has told: the next one's turn, from which its id is derived.
    var turns: [AlertRule: Int64] = [:]
    private var timer: Task<Void, Never>?
    /// When `timer` rings (wall clock); nil once it rang or when none is set.
    private var timerDate: Date?
    /// The person's days, today remembered across models (`LocalDays`).
    private var days: LocalDays?
    /// Alerts decided so far, for `stats`.
    public private(set) var told = 0

    /// The newest model published, and whether the timer rang.
    private struct Arrived {
        var snapshot: ModelSnapshot?
        var timerRang = false
        /// The teller's lease was taken: the rules' state is read again first (another service's).
        var leaseTaken = false
    }
    private nonisolated let arrived = LatestValue(Arrived())

    public init(
        store: HealthStore, model: ModelService, rules: AlertRules.Configuration,
        receivers: [String], wallClock: any WallClock, timerClock: any Clock<Duration> = ContinuousClock(), logger: Logger,
        announce: @escaping @Sendable (JSONValue) -> Void, wakeDeliverers: @escaping @Sendable () -> Void,
        lease: TellerLease? = nil, pushes: Bool = false
    ) {
        self.pushes = pushes
        self.store = store
        self.model = model
        self.rules = rules
        self.receivers = receivers
        self.wallClock = wallClock
        self.timerClock = timerClock
        self.logger = logger
        self.announce = announce
        self.wakeDeliverers = wakeDeliverers
        self.lease = lease
    }

    /// Reads the rules' state from the store.
    public func start() async throws {
        try await readState()
        lease?.observe { [weak self] taken in if taken { self?.ringLeaseTaken() } }
    }

    private func readState() async throws {
        (state, turns) = ([:], [:])
        for row in try await store.alertStates() {
            guard let rule = AlertRule(rawValue: row.rule) else { continue }
            state[rule] = AlertStatus(active: row.active, key: row.key)
            turns[rule] = row.turns
        }
    }

    /// An alert's id (docs/protocol.md §16): derived from the store, the
    /// rule, its turn, the event and the key, so that the same turn decided
    /// again (after a crash, or on a promoted standby) has the same id.
    static func id(store: UUID, _ event: AlertEvent, turn: Int64) -> String {
        let name = "alert/\(event.rule.rawValue)/\(turn)/\(event.fired ? "fired" : "cleared")/\(event.key)"
        return NameBasedUUID.v5(namespace: store, name: name).uuidString
    }

    /// A model was published: only queues and rings (it is called on the model's turn).
    public nonisolated func observe(_ snapshot: ModelSnapshot) {
        arrived.update { $0.snapshot = snapshot }
    }

    public func run() async throws {
        onGracefulShutdown { [arrived] in arrived.finish() }
        while await arrived.next() { await look() }
        timer?.cancel()
    }

    /// The rules over the newest model, or over the model now when the timer rang.
    func look() async {
        guard lease?.isHeld ?? true else { return }  // another service tells; the newest model waits
        let taken = arrived.take(reset: Arrived())
        let (timerRang, leaseTaken) = (taken.timerRang, taken.leaseTaken)
        if timerRang { timerDate = nil }
        var snapshot = taken.snapshot
        if leaseTaken {
            // The teller before this one decided up to here: go on from its state, with the model now.
            do { try await readState() } catch {
                logger.error("could not read the rules' state; trying again at the next model", metadata: ["error": "\(error)"])
                arrived.amend { $0.leaseTaken = true }  // no ring: the next model finds it
                return
            }
            wakeDeliverers()
        }
        if timerRang || leaseTaken, let now = await model.snapshot() { snapshot = now }
        guard let snapshot else { return }
        await evaluate(snapshot)
    }

    /// Decides, writes, announces; then sets the timer for the next crossing.
    func evaluate(_ snapshot: ModelSnapshot) async {
        // The person's level limit and bedtime (docs/protocol.md §15), as the store holds them now.
        let rules = AlertRules(configuration: self.rules, settings: store.liveSettings.person, days: days)
        days = rules.days
        var next = state
        let events = rules.evaluate(snapshot, state: &next)
        if next != state {
            let nowMs = Int64((wallClock.now().timeIntervalSince1970 * 1000).rounded())
            var nextTurns = turns
            let alerts = events.map { event -> (AlertEvent, String) in
                let turn = nextTurns[event.rule, default: 0] + 1
                nextTurns[event.rule] = turn
                return (event, Self.id(store: store.identity.store, event, turn: turn))
            }
            let pushReceivers = pushes ? PushSubscription.all(in: store.liveSettings).values.map(\.receiver).sorted() : []
            var items: [OutboxItem] = []
            for (event, id) in alerts {
                let body = event.json(id: id).serialized()
                for receiver in receivers + pushReceivers {
                    items.append(OutboxItem(id: id, receiver: receiver, body: body, createdMs: nowMs, nextMs: nowMs))
                }
            }
            let changed = next.filter { state[$0.key] != $0.value || turns[$0.key] != nextTurns[$0.key] }.map {
                OutboxRuleState(
                    rule: $0.key.rawValue, active: $0.value.active, key: $0.value.key, turns: nextTurns[$0.key, default: 0])
            }
            do {
                try await store.recordAlerts(states: changed, items: items, told: !alerts.isEmpty)
            } catch {
                // Nothing was written: the next model decides it again.
                logger.error("could not write alerts to the outbox", metadata: ["error": "\(error)"])
                return
            }
            #if TEST_HOOKS
                if !alerts.isEmpty, ProcessInfo.processInfo.environment["COFFEE_TRACKER_TEST_KILL_AFTER_ALERT"] != nil {
                    kill(getpid(), SIGKILL)  // a crash right after the outbox's commit
                }
            #endif
            state = next
            turns = nextTurns
            told += alerts.count
            for (event, id) in alerts {
                logger.notice(
                    "alert: \(event.title)",
                    metadata: ["rule": "\(event.rule.rawValue)", "event": "\(event.fired ? "fired" : "cleared")"])
                announce(event.json(id: id))
            }
            if !items.isEmpty { wakeDeliverers() }
        }
        schedule(rules.nextCheck(snapshot, state: state))
    }

    /// Rings at `date` (wall clock), measured on the timer's clock. A timer
    /// set to ring no later is kept: ringing early only looks again and sets
    /// the next. At 1,000 drinks a second each model moves the crossing on
    /// a little, and a timer made and cancelled ten times a second woke the
    /// pool's threads for nothing.
    private func schedule(_ date: Date?) {
        if let date, let timerDate, timerDate <= date { return }
        timer?.cancel()
        timerDate = date
        guard let date else { return }
        let wait = Duration.milliseconds(Int64(max(0, date.timeIntervalSince(wallClock.now())) * 1000))
        timer = Self.ring(after: wait, on: timerClock) { [weak self] in self?.ringTimer() }
    }

    /// A task that runs `body` once `wait` has passed on `clock`, counted
    /// from now: the deadline is fixed here, not when the task first runs
    /// (a clock that moves meanwhile would put it off).
    private static func ring<C: Clock>(after wait: Duration, on clock: C, _ body: @escaping @Sendable () -> Void)
        -> Task<Void, Never> where C.Duration == Duration
    {
        let deadline = clock.now.advanced(by: wait)
        return Task {
            do { try await clock.sleep(until: deadline, tolerance: nil) } catch { return }
            body()
        }
    }

    private nonisolated func ringLeaseTaken() {
        arrived.update { $0.leaseTaken = true }
    }

    private nonisolated func ringTimer() {
        arrived.update { $0.timerRang = true }
    }

    /// The rules' state, for tests.
    public var current: [AlertRule: AlertStatus] { state }
}
