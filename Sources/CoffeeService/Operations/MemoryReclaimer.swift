import CMalloc
import CoffeeLifecycle
import CoffeeLogging
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Gives memory back after bursts of large input.
///
/// Measured (issue #21): after 17,000 hostile inputs with frames up to
/// 10 MB the service's own allocations were under 1 MB, yet its RSS stayed
/// near 170 MB: glibc kept the freed memory. Two things held it:
/// - glibc raises its mmap threshold to the size of each large block freed
///   (up to 32 MiB) and its trim threshold to twice that, so later large
///   buffers came from the arenas and the arenas never shrank. Fixed
///   thresholds (`start`) turn that off: blocks over 2 MiB are mapped and
///   unmapped on their own, and an arena's free top over 2 MiB is returned.
/// - free pages in the middle of an arena are returned only by
///   `malloc_trim`, which this service calls every few seconds when RSS has
///   grown by more than `growthBeforeTrim` since the last look.
public final class MemoryReclaimer: Service {
    public let name = "memory"

    /// The allocator's side, injected so that tests can count trims.
    public struct Allocator: Sendable {
        /// Resident set size, in bytes.
        public var residentBytes: @Sendable () -> Int
        /// Returns free memory to the system.
        public var trim: @Sendable () -> Void
        /// Fixes the mmap and trim thresholds.
        public var fixThresholds: @Sendable () -> Void

        public init(
            residentBytes: @escaping @Sendable () -> Int, trim: @escaping @Sendable () -> Void,
            fixThresholds: @escaping @Sendable () -> Void
        ) {
            self.residentBytes = residentBytes
            self.trim = trim
            self.fixThresholds = fixThresholds
        }

        /// glibc's, for this process.
        public static let glibc = Allocator(
            residentBytes: { Int(ProcessMetrics.residentBytes()) },
            trim: { _ = malloc_trim(0) },
            fixThresholds: {
                _ = mallopt(M_MMAP_THRESHOLD, MemoryReclaimer.largeBlockBytes)
                _ = mallopt(M_TRIM_THRESHOLD, MemoryReclaimer.largeBlockBytes)
            })
    }

    /// Blocks larger than this are mapped on their own; an arena's free top
    /// larger than this is returned. Above the JSON Lines reader's 1 MiB pieces.
    static let largeBlockBytes: Int32 = 2 << 20

    private let allocator: Allocator
    private let interval: Duration
    private let growthBeforeTrim: Int
    private let clock: any Clock<Duration>
    private let logger: Logger
    /// The floor growth is counted from (see `reclaimIfGrown`).
    private let baseline = Atomic<Int>(0)
    private let trims = Atomic<Int>(0)

    public init(
        allocator: Allocator = .glibc, interval: Duration = .seconds(5), growthBeforeTrim: Int = 8 << 20,
        clock: any Clock<Duration> = ContinuousClock(), logger: Logger
    ) {
        self.logger = logger
        self.allocator = allocator
        self.interval = interval
        self.growthBeforeTrim = growthBeforeTrim
        self.clock = clock
    }

    /// How many times memory was given back.
    public var trimCount: Int { trims.load(ordering: .relaxed) }

    public func start() async throws {
        allocator.fixThresholds()
        baseline.store(allocator.residentBytes(), ordering: .relaxed)
    }

    public func run() async throws {
        await repeatUntilShutdown(every: interval, on: clock) { self.reclaimIfGrown() }
    }

    /// Trims when RSS is more than `growthBeforeTrim` above its floor: the
    /// lowest RSS a trim left (or the RSS at start). A trim that gives back
    /// less than a MiB shows that the memory is in use, and RSS then
    /// becomes the floor, so a service that really grew is not trimmed
    /// again and again for nothing.
    public func reclaimIfGrown() {
        let before = allocator.residentBytes()
        let floor = baseline.load(ordering: .relaxed)
        guard before > floor + growthBeforeTrim else { return }
        allocator.trim()
        let after = allocator.residentBytes()
        baseline.store(before - after < 1 << 20 ? after : min(floor, after), ordering: .relaxed)
        trims.add(1, ordering: .relaxed)
        logger.debug("gave memory back", metadata: ["rssBefore": "\(before >> 20) MiB", "rssAfter": "\(after >> 20) MiB"])
    }
}
