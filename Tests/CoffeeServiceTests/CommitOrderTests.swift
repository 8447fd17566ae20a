import CoffeeDomain
import CoffeeLogging
import CoffeeModel
import Foundation
@_spi(Testing) import HealthStore
import Synchronization
import Testing
import ZeroMQ

@testable import CoffeeLifecycle
@testable import CoffeeService

/// Holds every commit of a store in its COMMIT (through the test-only hook)
/// until released, and tells when one arrives there.
final class CommitGate: Sendable {
    private let release = DispatchSemaphore(value: 0)
    private let opened = Atomic<Bool>(false)
    private let arrivedContinuation: AsyncStream<Void>.Continuation
    private let arrivals: AsyncStream<Void>
    private let allow: Bool
    /// The thread the first commit was held on (`pthread_self`), once one is.
    let heldOn = Atomic<UInt>(0)

    /// - Parameter allow: false fails each commit once it is released.
    init(allow: Bool = true) {
        (arrivals, arrivedContinuation) = AsyncStream.makeStream(of: Void.self)
        self.allow = allow
    }

    func install(on store: HealthStore) async {
        await store.setCommitHook { [self] in
            if !opened.load(ordering: .sequentiallyConsistent) {
                heldOn.store(UInt(pthread_self()), ordering: .sequentiallyConsistent)
                arrivedContinuation.yield()
                release.wait()  // on the store's thread: the commit is held here
            }
            return allow
        }
    }

    /// Returns once a commit is held.
    func held() async {
        for await _ in arrivals { return }
    }

    /// Lets the held commit and every later one through.
    func open() {
        opened.store(true, ordering: .sequentiallyConsistent)
        release.signal()
    }
}

/// What a store has announced to its commit observers (`changes`, the model).
final class Announcements: Sendable {
    private let batches = Mutex<[CommittedBatch]>([])
    init(_ store: HealthStore) async {
        await store.observeCommits { batch in self.batches.withLock { $0.append(batch) } }
    }
    var count: Int { batches.withLock { $0.count } }
}

/// A reply as a dictionary.
private func object(_ body: Data) throws -> [String: Any] {
    try #require(try JSONSerialization.jsonObject(with: body) as? [String: Any])
}

/// Long enough for a reply, an announcement or a move made too early to
/// happen while the commit is held; the tests fail if one does.
private let grace = Duration.milliseconds(150)

@Suite("Nothing is acknowledged or announced before its commit", .timeLimit(.minutes(1)))
struct CommitOrderTests {
    struct Setup {
        let dir: URL
        let store: HealthStore
        let model: ModelService
        let handler: QueryHandler
        let announced: Announcements

        init() async throws {
            dir = FileManager.default.temporaryDirectory.appendingPathComponent("ct-commit-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            var configuration = HealthStore.Configuration(path: dir.appendingPathComponent("s.sqlite").path)
            configuration.settingsDefaults = PersonSettings(model: CaffeineModel(timeZone: TimeZone(identifier: "UTC")!))
            store = try HealthStore(configuration: configuration, logger: Logger(label: "test"))
            model = ModelService(
                store: store, cache: nil, clock: SystemClock(), logger: Logger(label: "test"))
            try await model.start()  // loads, and follows the store's commits
            handler = QueryHandler(
                store: store, model: model, validator: DrinkValidator(), counters: ServiceCounters(),
                clock: SystemClock(), logger: Logger(label: "test"))
            announced = await Announcements(store)
        }

        func cleanup() async {
            await store.close()
            try? FileManager.default.removeItem(at: dir)
        }

        static let add = Data(
            #"{"op":"add","drinks":[{"uuid":"\#(UUID())","mgCaffeine":64,"date":"2026-11-29T08:00:00Z"}]}"#.utf8)
    }

    @Test func aQueryAddIsAnsweredAndAnnouncedOnlyAfterItsCommit() async throws {
        let s = try await Setup()
        let gate = CommitGate()
        await gate.install(on: s.store)
        let replied = Atomic<Bool>(false)
        let reply = Task {
            let body = await s.handler.handle(Setup.add)
            replied.store(true, ordering: .sequentiallyConsistent)
            return body
        }
        await gate.held()
        try await Task.sleep(for: grace)
        let answered = replied.load(ordering: .sequentiallyConsistent)
        #expect(!answered, "answered while the COMMIT was held")
        #expect(s.announced.count == 0, "announced (changes, model) while the COMMIT was held")
        #expect(await s.model.anchor == 0)
        gate.open()
        let json = try object(await reply.value)
        #expect(json["ok"] as? Bool == true && json["anchor"] as? Int == 1)
        #expect(s.announced.count == 1)
        await s.cleanup()
    }

    /// The bus's path: a submitted batch's completion (which counts it
    /// stored) runs only after its COMMIT.
    @Test func aSubmittedBatchIsCompletedOnlyAfterItsCommit() async throws {
        let s = try await Setup()
        let gate = CommitGate()
        await gate.install(on: s.store)
        let completed = Atomic<Bool>(false)
        let (done, doneContinuation) = AsyncStream.makeStream(of: Void.self)
        s.store.submissions.submit(WriteBatch(drinks: [Drink(mgCaffeine: 5, date: Date())])) { result in
            completed.store((try? result.get()) != nil, ordering: .sequentiallyConsistent)
            doneContinuation.yield()
        }
        await gate.held()
        try await Task.sleep(for: grace)
        let early = completed.load(ordering: .sequentiallyConsistent)
        #expect(!early, "completed while the COMMIT was held")
        gate.open()
        for await _ in done { break }
        let succeeded = completed.load(ordering: .sequentiallyConsistent)
        #expect(succeeded)
        await s.cleanup()
    }

    /// The leader path: a batch the bus stages and commits on its own
    /// thread while the store is idle is completed (counted stored) and
    /// announced (`changes`, the model) only after its COMMIT.
    @Test func aBatchCommittedByItsLeaderIsAnnouncedOnlyAfterItsCommit() async throws {
        let s = try await Setup()
        let gate = CommitGate()
        await gate.install(on: s.store)
        let completed = Atomic<Bool>(false)
        let (done, doneContinuation) = AsyncStream.makeStream(of: UInt.self)
        Thread {
            Thread.sleep(forTimeInterval: 0.05)  // the store's thread, idle by then: this thread leads
            s.store.submissions.stage(WriteBatch(drinks: [Drink(mgCaffeine: 5, date: Date())])) { result in
                completed.store((try? result.get()) != nil, ordering: .sequentiallyConsistent)
            }
            s.store.submissions.commitStaged(here: true)
            doneContinuation.yield(UInt(pthread_self()))
        }.start()
        await gate.held()
        try await Task.sleep(for: grace)
        let early = completed.load(ordering: .sequentiallyConsistent)
        #expect(!early, "completed while the COMMIT was held")
        #expect(s.announced.count == 0, "announced while the COMMIT was held")
        gate.open()
        var leader: UInt = 0
        for await thread in done {
            leader = thread
            break
        }
        #expect(gate.heldOn.load(ordering: .sequentiallyConsistent) == leader, "the commit did not run on the leader's thread")
        let succeeded = completed.load(ordering: .sequentiallyConsistent)
        #expect(succeeded)
        #expect(s.announced.count == 1)
        await s.cleanup()
    }

    @Test func aFailedCommitAnswersAnErrorAndAnnouncesNothing() async throws {
        let s = try await Setup()
        let gate = CommitGate(allow: false)
        await gate.install(on: s.store)
        gate.open()
        let json = try object(await s.handler.handle(Setup.add))
        #expect(json["ok"] as? Bool == false)
        #expect(s.announced.count == 0)
        #expect(await s.store.anchor == 0)
        await s.store.setCommitHook(nil)
        #expect(try await s.store.changes(since: 0, limit: 10).added.isEmpty)
        await s.cleanup()
    }

    static let files: [(name: String, body: String)] = [
        ("held.json", #"[{"uuid":"\#(UUID())","mgCaffeine":5,"date":"2026-11-29T08:00:00Z"}]"#),
        ("held.jsonl", #"{"uuid":"\#(UUID())","mgCaffeine":5,"date":"2026-11-29T08:00:00Z"}"# + "\n"),
    ]

    @Test(arguments: files)
    func anInboxFileMovesToProcessedOnlyAfterItsCommit(file: (name: String, body: String)) async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ct-commit-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let (inbox, store, importer) = try await InboxTests.importer(in: dir, settleTime: 0)
        let announced = await Announcements(store)
        try Data(file.body.utf8).write(to: inbox.appendingPathComponent(file.name))
        let gate = CommitGate()
        await gate.install(on: store)
        let imported = Task { await importer.importFile(named: file.name, writerDone: true) }
        await gate.held()
        try await Task.sleep(for: grace)
        #expect(FileManager.default.fileExists(atPath: inbox.appendingPathComponent(file.name).path))
        #expect(try FileManager.default.contentsOfDirectory(atPath: inbox.appendingPathComponent("processed").path).isEmpty)
        #expect(announced.count == 0)
        gate.open()
        await imported.value
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: inbox.appendingPathComponent("processed").path) == [file.name])
        #expect(announced.count == 1)
        await importer.close()
        await store.close()
    }

    @Test(arguments: files)
    func anInboxFileWhoseCommitFailsStaysInTheInbox(file: (name: String, body: String)) async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ct-commit-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let (inbox, store, importer) = try await InboxTests.importer(in: dir, settleTime: 0)
        let announced = await Announcements(store)
        try Data(file.body.utf8).write(to: inbox.appendingPathComponent(file.name))
        let gate = CommitGate(allow: false)
        await gate.install(on: store)
        gate.open()
        await importer.importFile(named: file.name, writerDone: true)
        #expect(FileManager.default.fileExists(atPath: inbox.appendingPathComponent(file.name).path))
        for folder in ["processed", "failed"] {
            #expect(try FileManager.default.contentsOfDirectory(atPath: inbox.appendingPathComponent(folder).path).isEmpty)
        }
        #expect(announced.count == 0)
        #expect(await store.anchor == 0)
        await importer.close()
        await store.close()
    }

    /// The bus's drain commits what it took: its `run()` returns only once
    /// every batch it handed to the store is durable, so the group's next
    /// steps (the model's last round, the publisher's last sends) see them.
    @Test func theBusDrainReturnsOnlyOnceEverythingItTookIsCommitted() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ct-drain-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try HealthStore(
            configuration: .init(path: dir.appendingPathComponent("s.sqlite").path), logger: Logger(label: "test"))
        let counters = ServiceCounters()
        let context = ZMQContext()
        var configuration = IngestEndpoint.Configuration()
        configuration.bind = ["ipc://\(dir.path)/ingest.sock"]
        let ingest = try IngestEndpoint(
            configuration: configuration, context: context, store: store.submissions, decoder: BatchDecoder(),
            deadLetters: DeadLetterFile(path: dir.appendingPathComponent("rejected.jsonl").path), counters: counters,
            clock: SystemClock(), logger: Logger(label: "test"))
        try await ingest.start()
        let gate = CommitGate()
        await gate.install(on: store)
        // A commit held on the store's thread keeps the store busy, so the
        // bus hands every batch over (an idle store would let the bus's own
        // thread commit, and hold it) and reads on.
        let blocker = Task { try await store.save([Drink(uuid: UUID(), mgCaffeine: 1, date: Date(), source: "test")]) }
        await gate.held()
        let publisher = try ZMQSocket(context, .pub)
        try publisher.connect(configuration.bind[0])
        // Past the slow joiner: send until the bus has taken some.
        let deadline = ContinuousClock.now + .seconds(20)
        while counters.received.value < 50, ContinuousClock.now < deadline {
            let body = #"{"uuid":"\#(UUID())","mgCaffeine":5,"date":"2026-11-29T08:00:00Z"}"#
            try publisher.send([Data("drink.add".utf8), Data(body.utf8)])
            try await Task.sleep(for: .milliseconds(2))
        }
        try #require(counters.received.value >= 50)
        let signal = ShutdownSignal()
        let drained = Atomic<Bool>(false)
        let run = Task {
            try await ShutdownSignal.$current.withValue(signal) { try await ingest.run() }
            drained.store(true, ordering: .sequentiallyConsistent)
        }
        signal.trigger()
        try await Task.sleep(for: grace)
        let returned = drained.load(ordering: .sequentiallyConsistent)
        #expect(!returned, "the drain returned while a commit it needs was held")
        gate.open()
        try await run.value
        #expect(store.submissions.backlog == 0)
        #expect(counters.stored.value == counters.received.value)
        #expect(await store.anchor == Int64(counters.received.value) + 1)
        _ = try await blocker.value
        publisher.close()
        await store.close()
    }
}
