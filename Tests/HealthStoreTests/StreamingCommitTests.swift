import CoffeeDomain
import Foundation
import Synchronization
import Testing

@testable import HealthStore

struct SourceFailure: Error {}

/// Hands out prepared batches, then nil; optionally throws instead of one.
final class BatchSource: Sendable {
    private let batches: Mutex<[WriteBatch]>
    private let failAt: Int?
    private let served = Atomic<Int>(0)

    init(_ batches: [WriteBatch], failAt: Int? = nil) {
        self.batches = Mutex(batches)
        self.failAt = failAt
    }

    func next() throws -> WriteBatch? {
        let n = served.add(1, ordering: .relaxed).newValue - 1
        if n == failAt { throw SourceFailure() }
        return batches.withLock { $0.isEmpty ? nil : $0.removeFirst() }
    }
}

@Suite("Streaming commits and large announcements", .timeLimit(.minutes(2)))
struct StreamingCommitTests {
    @Test func streamIsOneDurableCommit() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let store = try openStore(dir)
        let source = BatchSource((0..<5).map { i in WriteBatch(drinks: (0..<100).map { drink(at: Double(i * 100 + $0)) }) })
        let result = try await store.applyStream { try source.next() }
        #expect(result.added == 500 && result.anchor == 500)
        #expect(store.statistics().commits == 1)
        await store.close()
    }

    @Test func aThrowingSourceRollsEverythingBack() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let store = try openStore(dir)
        _ = try await store.save([drink()])
        let source = BatchSource([WriteBatch(drinks: [drink(), drink()]), WriteBatch(drinks: [drink()])], failAt: 1)
        await #expect(throws: SourceFailure.self) { try await store.applyStream { try source.next() } }
        #expect(await store.anchor == 1)
        #expect(try await store.changes(since: nil, limit: 10).added.count == 1)
        // The store carries on, anchors continuing without a gap.
        #expect(try await store.save([drink()]).anchor == 2)
        await store.close()
    }

    @Test func aCommitTooLargeToCarryIsAnnouncedWithoutItsChanges() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let store = try openStore(dir)
        let updates = await CommitRecorder(store)
        let n = HealthStore.announceLimit + 1
        _ = try await store.save((0..<n).map { drink(at: Double($0)) })
        _ = try await store.save([drink()])
        await store.close()
        let batches = updates.batches
        #expect(batches.count == 2)
        #expect(!batches[0].isComplete && batches[0].added.isEmpty && batches[0].anchor == Int64(n))
        #expect(batches[1].isComplete && batches[1].previousAnchor == Int64(n))
    }

    @Test func pagingThroughAnAnchorStopsThere() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let store = try openStore(dir)
        _ = try await store.save((0..<10).map { drink(at: Double($0)) })
        _ = try await store.save((0..<10).map { drink(at: Double($0)) })
        var page = try await store.changes(since: 0, limit: 4, through: 10)
        var seen = page.added.count
        while page.hasMore {
            page = try await store.changes(since: page.anchor, limit: 4, through: 10)
            seen += page.added.count
        }
        #expect(seen == 10 && page.anchor == 10)
        await store.close()
    }
}
