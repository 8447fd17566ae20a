import CoffeeDomain
import CoffeeLogging
import CoffeeTrackerClient
import Foundation
@_spi(Testing) import HealthStore
import Synchronization
import Testing

@testable import CoffeeService

/// A standby's copy of its primary (docs/protocol.md §11) over a real query
/// endpoint: page by page, the next page read while the one before commits.
@Suite("A standby's copy", .timeLimit(.minutes(1)))
struct StandbyReplicaTests {
    /// A primary of more than two pages (`StandbyReplica.page`): new drinks,
    /// newer versions and deletions, so that it holds tombstones too.
    func fill(_ primary: HealthStore) async throws {
        for part in 0..<3 {
            let drinks = (0..<9_000).map { i in
                Drink(
                    mgCaffeine: 10 + Double(i % 90), date: Date(timeIntervalSince1970: 1_796_000_000 - Double(part * 9_000 + i)))
            }
            _ = try await primary.save(drinks)
            _ = try await primary.save(
                drinks.prefix(50).map {
                    var d = $0
                    d.version = 2
                    return d
                })
            _ = try await primary.delete(drinks.suffix(40).map { Deletion(uuid: $0.uuid) })
        }
    }

    func standbyStore(_ rig: EndpointTests.Rig) throws -> HealthStore {
        var configuration = HealthStore.Configuration(path: rig.dir.appendingPathComponent("standby.sqlite").path)
        configuration.faultRetryInterval = .milliseconds(20)
        return try HealthStore(configuration: configuration, logger: Logger(label: "test"))
    }

    /// Resyncs `replica` through a client of `address`, on a thread of its
    /// own (its socket blocks); returns it, and what the resync threw.
    func resync(_ replica: StandbyReplica, _ address: String) async -> (StandbyReplica, (any Error)?) {
        final class Box: @unchecked Sendable {
            var replica: StandbyReplica
            init(_ replica: StandbyReplica) { self.replica = replica }
        }
        let box = Box(replica)
        let error: (any Error)? = await withCheckedContinuation { continuation in
            Thread {
                do {
                    try box.replica.resync(QueryClient(endpoint: address, timeout: 20))
                    continuation.resume(returning: nil)
                } catch {
                    continuation.resume(returning: error)
                }
            }.start()
        }
        return (box.replica, error)
    }

    func endpoint(_ rig: EndpointTests.Rig) async throws -> QueryEndpoint {
        var configuration = QueryEndpoint.Configuration()
        configuration.bind = [rig.socket("query")]
        return try QueryEndpoint(
            configuration: configuration, context: rig.context, handler: try await rig.handler(), logger: Logger(label: "test"))
    }

    @Test func aNewStandbyTakesItsPrimaryPageByPageAndItsIdentityWithTheFirst() async throws {
        let rig = try EndpointTests.Rig()
        try await fill(rig.store)
        let standby = try standbyStore(rig)
        #expect(standby.identity != rig.store.identity)
        let endpoint = try await endpoint(rig)
        try await rig.running(endpoint) {
            let replica = try StandbyReplica(
                store: standby, status: FollowStatus(primary: "test", pushKey: "K", pushKeyPath: "vapid.pem"), adopt: false,
                logger: Logger(label: "test"))
            let (done, error) = await resync(replica, endpoint.boundEndpoints[0])
            #expect(error == nil)
            let primaryAnchor = await rig.store.anchor
            #expect(done.anchor == primaryAnchor && done.status.followAnchor == primaryAnchor)
            #expect(standby.identity == rig.store.identity)
            let (a, b) = (
                try await rig.store.changes(since: 0, limit: 100_000), try await standby.changes(since: 0, limit: 100_000)
            )
            #expect(b == a && a.deleted.count == 120)
            // One commit per page of the primary's records (27,000), not one for all.
            #expect(standby.statistics().commits == 3)
        }
        await standby.close()
        await rig.cleanup()
    }

    @Test func aCommitThatFailsMidCopyLeavesThePagesBeforeItAndTheNextResyncGoesOn() async throws {
        let rig = try EndpointTests.Rig()
        try await fill(rig.store)
        let standby = try standbyStore(rig)
        let endpoint = try await endpoint(rig)
        try await rig.running(endpoint) {
            var replica = try StandbyReplica(
                store: standby, status: FollowStatus(primary: "test", pushKey: "K", pushKeyPath: "vapid.pem"), adopt: false,
                logger: Logger(label: "test"))
            await standby.failNextCommitsAsDiskFull(1, after: 1)  // the first page commits, the second fails
            let error: (any Error)?
            (replica, error) = await resync(replica, endpoint.boundEndpoints[0])
            #expect(error is StoreError)
            let firstPage = try await rig.store.changes(since: 0, limit: StandbyReplica.page)
            #expect(await standby.anchor == firstPage.anchor && replica.anchor == firstPage.anchor)
            let held = try await standby.changes(since: 0, limit: 100_000)
            #expect(held.added == firstPage.added && held.deleted == firstPage.deleted)
            // The fault passes by itself (the store's probe); then the copy goes on from the page it holds.
            let deadline = ContinuousClock.now + .seconds(20)
            while standby.faultDescription != nil, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            let (done, again) = await resync(replica, endpoint.boundEndpoints[0])
            #expect(again == nil)
            #expect(done.anchor == (await rig.store.anchor))
            let (a, b) = (
                try await rig.store.changes(since: 0, limit: 100_000), try await standby.changes(since: 0, limit: 100_000)
            )
            #expect(b == a)
        }
        await standby.close()
        await rig.cleanup()
    }
}

/// A standby's Web Push key against its primary's (docs/protocol.md §17):
/// what `stats.followPushKey` says, and when it changes (which is when the
/// replica says so in the log).
@Suite("A standby's push key")
struct FollowPushKeyTests {
    @Test func eachAnswerComparesTheKeysAndOnlyAChangeIsReported() {
        let status = FollowStatus(primary: "test", pushKey: "BOwn", pushKeyPath: "/data/vapid.pem")
        #expect(status.pushKeyComparison == .unknown)
        #expect(status.compare(primaryPushKey: nil) == nil)  // still unknown: nothing to say
        #expect(status.compare(primaryPushKey: "BOther") == .different)
        #expect(status.pushKeyComparison == .different)
        #expect(status.compare(primaryPushKey: "BOther") == nil)  // said once, not at every reconnection
        #expect(status.compare(primaryPushKey: "BOwn") == .same)  // the primary's file copied here
        #expect(status.pushKeyComparison == .same)
        #expect(status.compare(primaryPushKey: nil) == .unknown)  // a primary with no key, or no answer
        #expect(status.pushKeyComparison == .unknown)
    }
}
