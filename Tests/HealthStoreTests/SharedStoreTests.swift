import CoffeeDomain
import CoffeeLogging
import CoffeeTestKit
import Foundation
import PostgreSQL
import Synchronization
import Testing

@testable import HealthStore

/// A store in PostgreSQL that several services share (docs/protocol.md §11):
/// anchors from the counter row, every change announced by every store in
/// anchor order with whole chains, replies only after COMMIT.
@Suite(
    "A store several services share (PostgreSQL)", .timeLimit(.minutes(2)),
    .enabled(if: TestDatabase.server != nil, "needs COFFEE_TRACKER_TEST_POSTGRES (make test starts a server)"))
struct SharedStoreTests {
    func open(_ conninfo: String) throws -> HealthStore {
        var configuration = HealthStore.Configuration(path: "/nonexistent/unused.sqlite", clock: ManualClock(t0))
        configuration.postgresql = conninfo
        configuration.faultRetryInterval = .milliseconds(100)
        return try HealthStore(configuration: configuration, logger: Logger(label: "test"))
    }

    /// Waits, at most `seconds`, for `condition`.
    func eventually(_ seconds: Double = 20, _ condition: () async -> Bool) async -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if await condition() { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    /// Every change of a chain of batches, (anchor, uuid); nil where the chain breaks.
    func chain(_ batches: [CommittedBatch]) -> [(Int64, UUID)]? {
        var previous: Int64 = 0
        var changes: [(Int64, UUID)] = []
        for batch in batches {
            guard batch.previousAnchor == previous else { return nil }
            changes += batch.log.indices.map { (batch.anchor(at: $0), batch.log[$0].uuid) }
            previous = batch.anchor
        }
        return changes
    }

    @Test func twoStoresOnOneDatabaseTakeGaplessAnchorsAndBothAnnounceEveryChangeInOrder() async throws {
        let dir = TemporaryDirectory(.postgresql)
        defer { dir.cleanup() }
        let (a, b) = (try open(dir.postgresql!), try open(dir.postgresql!))
        #expect(a.identity == b.identity)
        let (seenByA, seenByB) = (await CommitRecorder(a), await CommitRecorder(b))
        let written = try await withThrowingTaskGroup(of: [UUID].self) { group in
            for (k, store) in [a, b, a, b].enumerated() {
                group.addTask {
                    var uuids: [UUID] = []
                    for round in 0..<40 {
                        let drinks = (0...(round + k) % 3).map { _ in drink(at: Double(round)) }
                        _ = try await store.save(drinks)
                        uuids += drinks.map(\.uuid)
                    }
                    return uuids
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        let end = Int64(written.count)
        #expect(await a.anchor <= end)
        #expect(await eventually { seenByA.batches.last?.anchor == end && seenByB.batches.last?.anchor == end })
        let (chainA, chainB) = (chain(seenByA.batches), chain(seenByB.batches))
        #expect(chainA != nil && chainB != nil, "a chain broke")
        // Gapless: anchors 1…end, one change each, every drink once; the same in both.
        #expect(chainA?.map(\.0) == Array(1...end))
        #expect(Set(chainA?.map(\.1) ?? []) == Set(written))
        #expect(chainA?.map(\.1) == chainB?.map(\.1))
        // Each announced the other's commits too: neither saw only its own.
        #expect(seenByA.batches.count > 1 && seenByB.batches.count > 1)
        let read = try await b.changes(since: 0, limit: 10_000)
        #expect(read.addedAnchors.sorted() == Array(1...end))
        await a.close()
        await b.close()
    }

    /// A commit that PostgreSQL holds at COMMIT (waiting for a synchronous
    /// standby that never comes: the tests' server names one) is neither
    /// replied to nor announced until COMMIT returns.
    /// Tables of schema version 1 (no index by date, no settings) are
    /// brought to the current version by the first store that opens them:
    /// the index of live drinks by date and the settings' table are made,
    /// the rows kept, history's sums answer, settings are written.
    @Test func versionOneTablesComeToTheCurrentVersion() async throws {
        let conninfo = TestDatabase.create()
        let first = try open(conninfo)
        _ = try await first.save([drink(mg: 96, at: 0), drink(mg: 64, at: 60)])
        await first.close()
        let db = try Connection(conninfo: conninfo)
        _ = try db.execute(
            "DROP INDEX live_by_date; DROP TABLE settings; DROP TABLE alert_state; DROP TABLE outbox; UPDATE meta SET value = 1 WHERE key = 'schema'"
        )
        #expect(try db.scalar("SELECT count(*) FROM pg_indexes WHERE indexname = 'live_by_date'") == 0)
        let store = try open(conninfo)
        #expect(try db.scalar("SELECT count(*) FROM pg_indexes WHERE indexname = 'live_by_date'") == 1)
        #expect(try db.scalar("SELECT value FROM meta WHERE key = 'schema'") == SharedStoreSchema.currentVersion)
        #expect(try await store.doses(datedIn: t0...(t0 + 3600)).map(\.mg) == [96, 64])
        #expect(try await store.writeSettings(scope: "person", [("dailyLimitMg", "300")]).anchor == 3)
        await store.close()
        db.close()
    }

    @Test func aReplyAndAnAnnouncementWaitForCOMMIT() async throws {
        let dir = TemporaryDirectory(.postgresql)
        defer { dir.cleanup() }
        let admin = try Connection(conninfo: dir.postgresql!)
        guard try admin.query("SHOW synchronous_standby_names").string(0, 0) == "ghost" else {
            Issue.record("the tests' server must name a synchronous standby that never comes (make test's does)")
            return
        }
        try await open(dir.postgresql!).close()  // the tables and identity, committed without waiting
        let store = try open(dir.postgresql! + " options='-c synchronous_commit=on'")
        let recorder = await CommitRecorder(store)
        let replied = Atomic<Bool>(false)
        let reply = Task {
            let result = try await store.save([drink()])
            replied.store(true, ordering: .releasing)
            return result
        }
        // COMMIT is waiting for the standby.
        #expect(
            await eventually {
                (try? admin.scalar("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'")) == 1
            })
        try await Task.sleep(for: .milliseconds(300))
        let repliedEarly = replied.load(ordering: .acquiring)
        #expect(!repliedEarly, "replied before COMMIT returned")
        #expect(recorder.batches.isEmpty, "announced before COMMIT returned")
        // Released: the commit is durable here, and COMMIT returns.
        try admin.execute("SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE wait_event = 'SyncRep'")
        let result = try await reply.value
        #expect(result.anchor == 1 && result.added == 1)
        #expect(recorder.batches.map(\.anchor) == [1])
        admin.close()
        await store.close()
    }
}
