import CoffeeLogging
import Foundation
import Synchronization
import Testing

@testable import CoffeeService

/// `MemoryReclaimer`: trims after growth, and stops trimming memory in use.
@Suite("Memory reclaimer", .timeLimit(.minutes(1)))
struct MemoryReclaimerTests {
    /// An allocator whose RSS the test sets; a trim gives back what is free.
    final class FakeAllocator: Sendable {
        struct State {
            var inUse = 30 << 20
            var free = 0
            var trims = 0
            var fixed = false
        }
        let state = Mutex(State())

        var allocator: MemoryReclaimer.Allocator {
            MemoryReclaimer.Allocator(
                residentBytes: { self.state.withLock { $0.inUse + $0.free } },
                trim: {
                    self.state.withLock {
                        $0.free = 0
                        $0.trims += 1
                    }
                },
                fixThresholds: { self.state.withLock { $0.fixed = true } })
        }
        func set(inUse: Int? = nil, free: Int? = nil) {
            state.withLock {
                if let inUse { $0.inUse = inUse }
                if let free { $0.free = free }
            }
        }
        var trims: Int { state.withLock { $0.trims } }
    }

    @Test func trimsAfterGrowthAndOnlyThen() async throws {
        let fake = FakeAllocator()
        let reclaimer = MemoryReclaimer(allocator: fake.allocator, growthBeforeTrim: 8 << 20, logger: Logger(label: "test"))
        try await reclaimer.start()
        #expect(fake.state.withLock { $0.fixed })
        reclaimer.reclaimIfGrown()
        #expect(fake.trims == 0)  // nothing grew
        fake.set(free: 4 << 20)
        reclaimer.reclaimIfGrown()
        #expect(fake.trims == 0)  // under the growth allowed
        fake.set(free: 120 << 20)  // a burst freed, kept by the allocator
        reclaimer.reclaimIfGrown()
        #expect(fake.trims == 1 && fake.state.withLock { $0.free } == 0)
        reclaimer.reclaimIfGrown()
        #expect(fake.trims == 1)  // back at the floor
    }

    /// Memory in use is not trimmed for ever: a trim that gives nothing
    /// back raises the floor; freeing it later is trimmed again.
    @Test func memoryInUseRaisesTheFloor() async throws {
        let fake = FakeAllocator()
        let reclaimer = MemoryReclaimer(allocator: fake.allocator, growthBeforeTrim: 8 << 20, logger: Logger(label: "test"))
        try await reclaimer.start()
        fake.set(inUse: 200 << 20)  // a large model, say
        reclaimer.reclaimIfGrown()
        reclaimer.reclaimIfGrown()
        reclaimer.reclaimIfGrown()
        #expect(fake.trims == 1)
        fake.set(free: 50 << 20)
        reclaimer.reclaimIfGrown()
        #expect(fake.trims == 2)
    }

    /// A trim in the middle of a burst does not hide the memory freed after it.
    @Test func aTrimDuringABurstKeepsTheLowerFloor() async throws {
        let fake = FakeAllocator()
        let reclaimer = MemoryReclaimer(allocator: fake.allocator, growthBeforeTrim: 8 << 20, logger: Logger(label: "test"))
        try await reclaimer.start()
        fake.set(inUse: 70 << 20, free: 40 << 20)  // mid-burst: much in use, some freed
        reclaimer.reclaimIfGrown()
        #expect(fake.trims == 1)
        fake.set(inUse: 30 << 20, free: 40 << 20)  // the burst is over
        reclaimer.reclaimIfGrown()
        #expect(fake.trims == 2 && fake.allocator.residentBytes() == 30 << 20)
    }

    @Test func glibcReportsThisProcessesRSS() {
        let rss = MemoryReclaimer.Allocator.glibc.residentBytes()
        #expect(rss > 1 << 20 && rss < 8 << 30)
    }
}
