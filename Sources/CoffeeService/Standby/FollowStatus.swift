import Foundation
import Synchronization

/// How far a standby is behind its primary (docs/protocol.md §11): the
/// primary's anchor as last heard, and since when a change heard has waited
/// for its commit here; and whether its Web Push key is its primary's (§17).
/// Written by the follower's thread; read by `stats` and `/metrics`.
public final class FollowStatus: Sendable {
    /// The primary's update endpoint, for messages.
    public let primary: String
    /// This service's own Web Push public key (§17), base64url, and its file.
    public let pushKey: String
    let pushKeyPath: String

    /// This standby's Web Push key against its primary's (`stats.followPushKey`).
    public enum PushKeyComparison: String, Sendable {
        /// The primary's: a promotion keeps every phone's subscription.
        case same
        /// Another: promoted, it could tell no phone subscribed on the primary.
        case different
        /// Not asked yet, or the primary gave none.
        case unknown
    }

    private struct State {
        var primaryAnchor: Int64 = 0
        var anchor: Int64 = 0
        var behindSince: ContinuousClock.Instant?
        var pushKey = PushKeyComparison.unknown
    }
    private let state = Mutex(State())

    public init(primary: String, pushKey: String, pushKeyPath: String) {
        self.primary = primary
        self.pushKey = pushKey
        self.pushKeyPath = pushKeyPath
    }

    /// The primary's push key as its `pushKey` answered (nil: no answer).
    /// Returns the comparison when it differs from the one before.
    func compare(primaryPushKey: String?) -> PushKeyComparison? {
        let now: PushKeyComparison = primaryPushKey.map { $0 == pushKey ? .same : .different } ?? .unknown
        return state.withLock { s in
            defer { s.pushKey = now }
            return s.pushKey == now ? nil : now
        }
    }

    /// This standby's push key against its primary's, as last compared.
    public var pushKeyComparison: PushKeyComparison { state.withLock { $0.pushKey } }

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
