import Foundation
import Synchronization

/// How far a standby is behind its primary (docs/protocol.md §11): the
/// primary's anchor as last heard, and since when a change heard has waited
/// for its commit here. Written by the follower's thread; read by `stats`
/// and `/metrics`.
public final class FollowStatus: Sendable {
    /// The primary's update endpoint, for messages.
    public let primary: String

    private struct State {
        var primaryAnchor: Int64 = 0
        var anchor: Int64 = 0
        var behindSince: ContinuousClock.Instant?
    }
    private let state = Mutex(State())

    public init(primary: String) { self.primary = primary }

    /// The primary's anchor, from a message, a heartbeat or a read.
    func heard(_ anchor: Int64, at now: ContinuousClock.Instant = .now) {
        state.withLock { s in
            s.primaryAnchor = max(s.primaryAnchor, anchor)
            if s.primaryAnchor > s.anchor, s.behindSince == nil { s.behindSince = now }
        }
    }

    /// The store holds everything up to `anchor`.
    func stored(_ anchor: Int64, at now: ContinuousClock.Instant = .now) {
        state.withLock { s in
            s.anchor = anchor
            s.primaryAnchor = max(s.primaryAnchor, anchor)
            // Caught up: nothing waits. Still behind: what is left arrived after what was just stored.
            s.behindSince = s.anchor >= s.primaryAnchor ? nil : min(s.behindSince ?? now, now)
        }
    }

    /// The primary's anchor as last heard (`followAnchor` in `stats`).
    public var followAnchor: Int64 { state.withLock { $0.primaryAnchor } }

    /// How long the oldest change heard from the primary but not yet stored
    /// has waited; 0 when in step.
    public func lagSeconds(now: ContinuousClock.Instant = .now) -> Double {
        guard let since = state.withLock({ $0.behindSince }) else { return 0 }
        let d = now - since
        return Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }
}
