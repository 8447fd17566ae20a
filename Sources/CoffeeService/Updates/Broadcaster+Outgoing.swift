import Foundation
import HealthStore

extension Broadcaster {
    /// What the publisher's mailbox carries.
    enum Outgoing: Sendable {
        case message(topic: String, body: Data)
        /// A commit as the store made it, resolved and encoded as `changes`
        /// on the publisher's thread rather than on the store's.
        case commit(CommittedBatch)
        /// A commit too large to carry its changes: read back from the store
        /// page by page (`PageReading`), so memory is one page and the
        /// store's commit does not wait for it.
        case pages(CommittedBatch)
        /// A page of such a commit, read on the store's thread: the changes
        /// after `previous`.
        case page(Result<ChangeSet, any Error>, of: CommittedBatch, after: Int64)
        /// Called once everything posted before it has been sent.
        case barrier(@Sendable () -> Void)
    }
}
