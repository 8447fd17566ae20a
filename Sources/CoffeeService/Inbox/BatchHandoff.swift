import Foundation
import HealthStore

/// Batches read on a thread of their own and taken by the store's thread,
/// so that reading and decoding a file overlap with storing it.
///
/// At most `capacity` batches wait, which bounds memory whatever the file's
/// size. The producer's error reaches the taker, in order, after the batches
/// read before it; `abandon` stops the producer when the taker gives up.
final class BatchHandoff: @unchecked Sendable {
    private let condition = NSCondition()
    private let capacity: Int
    // All guarded by `condition`.
    private var queue: [WriteBatch] = []
    private var end: Result<Void, any Error>?
    private var abandoned = false

    init(capacity: Int = 4) {
        self.capacity = capacity
    }

    /// Starts a thread that calls `next` until it returns nil or throws.
    func start(name: String, _ next: @escaping @Sendable () throws -> WriteBatch?) {
        let thread = Thread { [self] in
            Thread.current.name = name
            do {
                while let batch = try next() {
                    guard put(batch) else { return }
                }
                finish(.success(()))
            } catch {
                finish(.failure(error))
            }
        }
        thread.start()
    }

    /// The next batch; nil once the producer is done; rethrows its error.
    /// Blocks while the producer is behind.
    func take() throws -> WriteBatch? {
        condition.lock()
        defer { condition.unlock() }
        while queue.isEmpty && end == nil { condition.wait() }
        if !queue.isEmpty {
            condition.broadcast()  // room for the producer
            return queue.removeFirst()
        }
        try end!.get()
        return nil
    }

    /// The taker will take no more: the producer stops at its next batch.
    func abandon() {
        condition.lock()
        abandoned = true
        queue = []
        condition.broadcast()
        condition.unlock()
    }

    /// Waits for room; false when abandoned.
    private func put(_ batch: WriteBatch) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while queue.count >= capacity && !abandoned { condition.wait() }
        guard !abandoned else { return false }
        queue.append(batch)
        condition.broadcast()
        return true
    }

    private func finish(_ result: Result<Void, any Error>) {
        condition.lock()
        end = result
        condition.broadcast()
        condition.unlock()
    }
}
