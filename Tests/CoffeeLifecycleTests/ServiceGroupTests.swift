import CoffeeLifecycle
import CoffeeLogging
import CoffeeTestKit
import Synchronization
import Testing

/// What the mock services did, in order: "start a", "run a", "stop a".
final class Journal: Sendable {
    private let lines = Mutex<[String]>([])
    func add(_ line: String) { lines.withLock { $0.append(line) } }
    var entries: [String] { lines.withLock { $0 } }
}

/// A service that records its life; it can fail to start, fail while
/// running, or stop on its own.
struct MockService: Service {
    enum Behaviour: Sendable {
        case normal
        case failsToStart
        case failsAfterStart
        case returnsEarly
    }
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    let name: String
    let journal: Journal
    var behaviour: Behaviour = .normal

    func start() async throws {
        if behaviour == .failsToStart { throw Failure(description: "port taken") }
        journal.add("start \(name)")
    }

    func run() async throws {
        journal.add("run \(name)")
        switch behaviour {
        case .failsAfterStart: throw Failure(description: "disk on fire")
        case .returnsEarly: return
        case .normal, .failsToStart: break
        }
        await gracefulShutdown()
        // A drain that takes a moment: the next service must wait for it.
        try? await Task.sleep(for: .milliseconds(5))
        journal.add("stop \(name)")
    }
}

/// Runs `group` until `onStarted`, then triggers a shutdown; returns what `run` threw.
private func runThenShutDown(_ group: ServiceGroup) async -> (any Error)? {
    do {
        try await group.run { group.triggerGracefulShutdown() }
        return nil
    } catch {
        return error
    }
}

@Suite("ServiceGroup: ordered start, reverse-order graceful shutdown", .timeLimit(.minutes(1)))
struct ServiceGroupTests {
    @Test func servicesStartInOrderAndStopInReverse() async throws {
        let journal = Journal()
        let group = ServiceGroup(
            services: ["a", "b", "c"].map { MockService(name: $0, journal: journal) }, logger: Logger(label: "test"))
        #expect(await runThenShutDown(group) == nil)
        let entries = journal.entries
        #expect(entries.filter { $0.hasPrefix("start") } == ["start a", "start b", "start c"])
        #expect(entries.filter { $0.hasPrefix("stop") } == ["stop c", "stop b", "stop a"])
        // Every start comes before any stop, and each service ran.
        #expect(entries.lastIndex { $0.hasPrefix("start") }! < entries.firstIndex { $0.hasPrefix("stop") }!)
        #expect(Set(entries.filter { $0.hasPrefix("run") }) == ["run a", "run b", "run c"])
    }

    /// A group runs once: a second `run()` is refused, and no service starts again.
    @Test func aSecondRunIsRefused() async throws {
        let journal = Journal()
        let group = ServiceGroup(services: [MockService(name: "a", journal: journal)], logger: Logger(label: "test"))
        #expect(await runThenShutDown(group) == nil)
        let error = await runThenShutDown(group)
        #expect("\(error.map { "\($0)" } ?? "")".contains("runs once"))
        #expect(journal.entries.filter { $0 == "start a" }.count == 1)
    }

    @Test func onStartedRunsOnlyOnceEveryServiceHasStarted() async throws {
        let journal = Journal()
        let group = ServiceGroup(
            services: ["a", "b"].map { MockService(name: $0, journal: journal) }, logger: Logger(label: "test"))
        try await group.run {
            journal.add("all started")
            group.triggerGracefulShutdown()
        }
        let entries = journal.entries
        #expect(entries.firstIndex(of: "all started")! > entries.firstIndex(of: "start b")!)
    }

    /// `store`, then `name` behaving as `behaviour`, then `inbox`, in one group.
    func group(_ journal: Journal, between name: String, _ behaviour: MockService.Behaviour) -> ServiceGroup {
        ServiceGroup(
            services: [
                MockService(name: "store", journal: journal),
                MockService(name: name, journal: journal, behaviour: behaviour),
                MockService(name: "inbox", journal: journal),
            ], logger: Logger(label: "test"))
    }

    @Test func aServiceThatFailsToStartIsNamedAndThoseAfterItNeverStart() async throws {
        let journal = Journal()
        let group = group(journal, between: "query", .failsToStart)
        let error = await runThenShutDown(group) as? ServiceGroupError
        #expect(error?.service == "query")
        #expect(error?.isStartFailure == true)
        #expect(error?.description == "query could not start: port taken")
        // The one started before it was shut down; the one after never started, nor was stopped.
        #expect(journal.entries.contains("stop store"))
        #expect(!journal.entries.contains { $0.hasSuffix("inbox") })
    }

    @Test func aServiceThatFailsWhileRunningEndsTheGroupAndIsNamed() async throws {
        let journal = Journal()
        let group = group(journal, between: "ingest", .failsAfterStart)
        do {
            try await group.run()  // no shutdown is ever requested: the failure ends it
            Issue.record("the group should have thrown")
        } catch let error as ServiceGroupError {
            #expect(error.service == "ingest")
            #expect(!error.isStartFailure)
            #expect(error.description == "ingest failed: disk on fire")
        }
        #expect(journal.entries.filter { $0.hasPrefix("stop") } == ["stop inbox", "stop store"])
    }

    @Test func aServiceThatReturnsBeforeItIsAskedEndsTheGroup() async throws {
        let journal = Journal()
        let group = ServiceGroup(
            services: [
                MockService(name: "store", journal: journal),
                MockService(name: "model", journal: journal, behaviour: .returnsEarly),
            ], logger: Logger(label: "test"))
        do {
            try await group.run()
            Issue.record("the group should have thrown")
        } catch let error as ServiceGroupError {
            #expect(error.service == "model")
            #expect(error.description.contains("stopped on its own"))
        }
        #expect(journal.entries.contains("stop store"))
    }

    @Test func aShutdownRequestedBeforeRunStartsNothing() async throws {
        let journal = Journal()
        let group = ServiceGroup(services: [MockService(name: "a", journal: journal)], logger: Logger(label: "test"))
        group.triggerGracefulShutdown()
        try await group.run()
        #expect(journal.entries.isEmpty)
    }

    /// A drain that never ends by itself (it waits for cancellation) is
    /// cancelled at the group's deadline, with every service still running
    /// (the store, not yet asked, among them), and the error names them.
    @Test func aDrainPastTheDeadlineIsCancelledAndNamed() async throws {
        let journal = Journal()
        struct Hangs: Service {
            let name = "hangs"
            let journal: Journal
            func run() async throws {
                await gracefulShutdown()
                while !Task.isCancelled { try? await Task.sleep(for: .seconds(3600)) }
                journal.add("cancelled hangs")
            }
        }
        let clock = TestClock()
        let group = ServiceGroup(
            services: [MockService(name: "store", journal: journal), Hangs(journal: journal)],
            maximumGracefulShutdownDuration: .seconds(30), clock: clock, logger: Logger(label: "test"))
        let run = Task { await runThenShutDown(group) }
        // The deadline's timer sleeps on the test clock: move it past 30 s until the drain ends.
        var error: (any Error)?
        for _ in 0..<2000 {
            clock.advance(by: .seconds(31))
            try await Task.sleep(for: .milliseconds(5))
            if journal.entries.contains("stop store") { break }
        }
        error = await run.value
        #expect(Set(journal.entries.suffix(2)) == ["cancelled hangs", "stop store"])
        #expect("\(error.map { "\($0)" } ?? "")".contains("deadline; cancelled the services still running: store, hangs"))
    }

    /// Without a deadline passing, the drain is graceful: nothing is cancelled.
    @Test func aDrainWithinTheDeadlineEndsNormally() async throws {
        let journal = Journal()
        let group = ServiceGroup(
            services: [MockService(name: "a", journal: journal), MockService(name: "b", journal: journal)],
            maximumGracefulShutdownDuration: .seconds(60), logger: Logger(label: "test"))
        #expect(await runThenShutDown(group) == nil)
        #expect(journal.entries.suffix(2) == ["stop b", "stop a"])
    }

    @Test func cancellationStopsEveryServiceAtOnce() async throws {
        let journal = Journal()
        let group = ServiceGroup(
            services: ["a", "b"].map { MockService(name: $0, journal: journal) }, logger: Logger(label: "test"))
        let (started, startedContinuation) = AsyncStream.makeStream(of: Void.self)
        let task = Task { try await group.run { startedContinuation.yield() } }
        for await _ in started { break }
        task.cancel()
        try await task.value
        #expect(Set(journal.entries.filter { $0.hasPrefix("stop") }) == ["stop a", "stop b"])
    }
}

@Suite("Timers on an injected clock", .timeLimit(.minutes(1)))
struct TimerTests {
    @Test func repeatUntilShutdownTicksAsTheClockMovesAndStopsAtShutdown() async throws {
        let clock = TestClock()
        let ticks = Mutex(0)
        let (ticked, tickedContinuation) = AsyncStream.makeStream(of: Int.self)
        let signal = ShutdownSignal()
        let task = Task {
            await ShutdownSignal.$current.withValue(signal) {
                await repeatUntilShutdown(every: .seconds(60), on: clock) {
                    tickedContinuation.yield(
                        ticks.withLock { n in
                            n += 1
                            return n
                        })
                }
            }
        }
        var iterator = ticked.makeAsyncIterator()
        await clock.waitForSleepers(1)
        clock.advance(by: .seconds(59))
        #expect(ticks.withLock { $0 } == 0)  // not yet due
        clock.advance(by: .seconds(1))
        #expect(await iterator.next() == 1)
        await clock.waitForSleepers(1)
        clock.advance(by: .seconds(60))
        #expect(await iterator.next() == 2)
        signal.trigger()
        await task.value  // returns although the timer is asleep
        #expect(ticks.withLock { $0 } == 2)
    }

    @Test func sleepUnlessShutdownEndsEarlyOnShutdown() async {
        let signal = ShutdownSignal()
        let task = Task {
            await ShutdownSignal.$current.withValue(signal) {
                await sleepUnlessShutdown(for: .seconds(3600), on: ContinuousClock())
            }
        }
        signal.trigger()
        await task.value
    }
}
