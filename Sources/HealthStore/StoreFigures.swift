import Synchronization

/// What `HealthStore.statistics()` and `faultDescription` give, kept for any
/// thread: set by the store as they change (a commit, a purge, a fault
/// begun or left), read without waiting for the store's thread, which an
/// inbox file holds for the whole file (`stats`, `/metrics`, `/readyz`).
final class StoreFigures: Sendable {
    let anchor = Atomic<Int64>(0)
    let purgedAnchor = Atomic<Int64>(0)
    let commits = Atomic<Int64>(0)
    let fault = Mutex<String?>(nil)
}
