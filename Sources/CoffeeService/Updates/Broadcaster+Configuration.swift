import ZeroMQ

extension Broadcaster {
    /// The update endpoint's settings, with the defaults of docs/protocol.md §3 and §7.
    public struct Configuration: Sendable {
        /// Where to bind (`updates.bind`); `tcp://host:*` picks a port.
        public var bind: [String] = ["tcp://127.0.0.1:5556"]
        /// ZeroMQ's per-subscriber queue (`updates.sendHighWaterMark`).
        public var sendHighWaterMark = 100_000
        /// How often a heartbeat goes out (`publish.heartbeatIntervalS`).
        public var heartbeatInterval: Duration = .seconds(1)
        /// Messages waiting for the publisher's thread before new ones are
        /// dropped (counted in `updatesDropped`).
        public var queueCapacity = 100_000
        /// How long a shutdown waits for queued messages to be sent.
        public var drainTimeout: Duration = .seconds(30)
        /// A CURVE server under `security.curve`; nil for plaintext.
        public var curve: CurveServerSettings?
        /// A subscriber whose connection carries nothing back for this long
        /// (ZMTP heartbeats: one that stopped reading until its TCP window
        /// closed cannot even answer a ping) is disconnected, and the
        /// messages queued for it are freed. It reconnects by itself.
        public var stuckSubscriberTimeout: Duration = .seconds(10)

        public init() {}
    }
}
