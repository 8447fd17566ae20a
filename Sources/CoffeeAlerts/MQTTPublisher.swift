import CMosquitto
import CoffeeDomain
import CoffeeLifecycle
import CoffeeLogging
import Foundation
import Synchronization

/// Publishes the model's states to an MQTT broker as retained topics, with
/// Home Assistant's discovery configuration (docs/protocol.md §16), through
/// libmosquitto, whose own thread connects, reconnects with a backoff that
/// doubles up to a minute, and sends. The model's round only hands over the
/// newest states (`publish`): while the broker is away nothing queues, and
/// on each (re)connection the discovery, "online" and the newest states are
/// sent again, so a broker that lost them has them back. The broker's last
/// will says "offline".
public final class MQTTPublisher: Service, Sendable {
    public struct Configuration: Sendable {
        public var host: String
        public var port: Int
        public var caFile: String?
        public var username: String?
        public var password: String?
        public var keepalive: Int

        /// `mqtt.port`'s default: MQTT's own port.
        public static let defaultPort = 1883
        /// `mqtt.keepaliveS`'s default.
        public static let defaultKeepalive = 30

        public init(
            host: String, port: Int = Self.defaultPort, caFile: String? = nil, username: String? = nil,
            password: String? = nil, keepalive: Int = Self.defaultKeepalive
        ) {
            self.host = host
            self.port = port
            self.caFile = caFile
            self.username = username
            self.password = password
            self.keepalive = keepalive
        }
    }

    /// For the metrics, `stats` and `/readyz`.
    public struct Status: Sendable, Hashable {
        public var connected = false
        public var connections = 0
        public var published = 0
        /// Why it is not connected, while it is not.
        public var problem: String? = "connecting"
    }

    public let name = "mqtt"
    let configuration: Configuration
    let states: MQTTStates
    let logger: Logger
    /// libmosquitto's handle, from `start` until `run` ends, and the
    /// connection's status, under one lock: sends hold it, so that none
    /// uses the handle while it is destroyed.
    private let link = Mutex(Link())
    private struct Link: @unchecked Sendable {  // libmosquitto's calls are thread-safe
        var mosq: OpaquePointer?
        var status = Status()
        /// Each state topic's payload as published on this connection (`MQTTStates.changed`).
        var sent: [String: String] = [:]
    }
    /// The newest states: the model's turn sets them and rings, the sender
    /// (`run`) sends them when connected; each connection rings again.
    private let latest = LatestValue<[(topic: String, payload: String)]>([])

    /// Messages of the command topics (`drink.add`, `drink.delete`), on
    /// libmosquitto's thread: the bus's topic and the payload. Nil: the
    /// publisher subscribes to nothing (`mqtt.acceptDrinks` off).
    let commands: (@Sendable (String, [UInt8]) -> Void)?

    public init(
        configuration: Configuration, states: MQTTStates, logger: Logger,
        commands: (@Sendable (String, [UInt8]) -> Void)? = nil
    ) {
        self.configuration = configuration
        self.states = states
        self.logger = logger
        self.commands = commands
    }

    public var current: Status { link.withLock { $0.status } }

    public func start() async throws {
        mosquitto_lib_init()
        guard let mosq = mosquitto_new("\(states.node)_\(getpid())", true, Unmanaged.passUnretained(self).toOpaque()) else {
            throw MQTTError("mosquitto_new failed")
        }
        link.withLock { $0.mosq = mosq }
        if let username = configuration.username {
            try check(mosquitto_username_pw_set(mosq, username, configuration.password), "mqtt.username")
        }
        if let ca = configuration.caFile { try check(mosquitto_tls_set(mosq, ca, nil, nil, nil, nil), "mqtt.tls.caFile") }
        try check(
            mosquitto_will_set(mosq, states.availabilityTopic, 7, "offline", 1, true), "the last will")
        mosquitto_reconnect_delay_set(mosq, 1, 60, true)
        mosquitto_connect_callback_set(mosq) { _, object, code in
            MQTTPublisher.from(object).connected(code)
        }
        mosquitto_disconnect_callback_set(mosq) { _, object, code in
            MQTTPublisher.from(object).disconnected(code)
        }
        mosquitto_message_callback_set(mosq) { _, object, message in
            guard let message = message?.pointee, let topic = message.topic else { return }
            let payload = message.payload.map { Array(UnsafeRawBufferPointer(start: $0, count: Int(message.payloadlen))) } ?? []
            MQTTPublisher.from(object).received(String(cString: topic), payload)
        }
        // An unreachable broker is not an error: the loop keeps trying.
        let code = mosquitto_connect_async(mosq, configuration.host, Int32(configuration.port), Int32(configuration.keepalive))
        if code != MOSQ_ERR_SUCCESS.rawValue {
            let reason = String(cString: mosquitto_strerror(code))
            link.withLock { $0.status.problem = reason }
            logger.warning("the MQTT broker cannot be reached yet; trying again", metadata: ["reason": "\(reason)"])
        }
        try check(mosquitto_loop_start(mosq), "the MQTT thread")
    }

    /// Sends the newest states whenever they change or a connection comes,
    /// until the shutdown; then "offline", and the handle goes.
    public func run() async throws {
        onGracefulShutdown { [latest] in latest.finish() }
        while await latest.next() {
            if current.connected { send(latest.value, onlyChanged: true) }
        }
        if current.connected { send([(states.availabilityTopic, "offline")]) }
        // Taken out first: a send from now on (the model's last rounds, a callback) does nothing.
        guard
            let mosq = link.withLock({ link in
                defer { link.mosq = nil }
                return link.mosq
            })
        else { return }
        mosquitto_disconnect(mosq)
        mosquitto_loop_stop(mosq, false)
        mosquitto_destroy(mosq)
    }

    /// The newest model, on the model's turn: handed to the sender, which
    /// sends it when connected; a newer one replaces it unsent.
    public func publish(_ snapshot: ModelSnapshot, sleepThresholdMg: Double) {
        latest.set(states.states(snapshot, sleepThresholdMg: sleepThresholdMg))
    }

    /// Publishes `messages`, retained; with `onlyChanged`, the states whose
    /// payload this connection has not published already.
    private func send(_ messages: [(topic: String, payload: String)], onlyChanged: Bool = false) {
        link.withLock { link in
            guard let mosq = link.mosq else { return }
            for (topic, payload) in onlyChanged ? MQTTStates.changed(messages, since: link.sent) : messages {
                let bytes = Array(payload.utf8)
                if mosquitto_publish(mosq, nil, topic, Int32(bytes.count), bytes, 1, true) == MOSQ_ERR_SUCCESS.rawValue {
                    link.status.published += 1
                    if onlyChanged { link.sent[topic] = payload }
                }
            }
        }
    }

    private static func from(_ object: UnsafeMutableRawPointer?) -> MQTTPublisher {
        Unmanaged<MQTTPublisher>.fromOpaque(object!).takeUnretainedValue()
    }

    /// On libmosquitto's thread: the discovery and "online", then the sender
    /// is rung for the newest states.
    private func connected(_ code: Int32) {
        guard code == 0 else {
            let reason = String(cString: mosquitto_connack_string(code))
            link.withLock { $0.status.problem = reason }
            logger.warning("the MQTT broker refused the connection", metadata: ["reason": "\(reason)"])
            return
        }
        link.withLock {
            $0.status.connected = true
            $0.status.connections += 1
            $0.status.problem = nil
            $0.sent = [:]  // a broker that lost its retained messages gets every state again
        }
        logger.info("connected to the MQTT broker", metadata: ["host": "\(configuration.host)", "port": "\(configuration.port)"])
        send(states.discovery + [(states.availabilityTopic, "online")])
        latest.update { _ in }
        if commands != nil {
            link.withLock { link in
                guard let mosq = link.mosq else { return }
                for name in MQTTStates.commands { mosquitto_subscribe(mosq, nil, states.commandTopic(name), 1) }
            }
        }
    }

    /// A command topic's message, handed on as the bus's topic.
    private func received(_ topic: String, _ payload: [UInt8]) {
        guard let commands, let name = MQTTStates.commands.first(where: { states.commandTopic($0) == topic }) else { return }
        commands(name, payload)
    }

    private func disconnected(_ code: Int32) {
        let reason = code == 0 ? "disconnected" : "the connection was lost (\(String(cString: mosquitto_strerror(code))))"
        let was = link.withLock { link -> Bool in
            defer {
                // A broker's refusal (a wrong password) stays the reason while it refuses.
                if link.status.connected || link.status.problem == nil { link.status.problem = reason }
                link.status.connected = false
            }
            return link.status.connected
        }
        if was, code != 0 {
            logger.warning(
                "lost the MQTT broker; reconnecting, the states are sent again then", metadata: ["reason": "\(reason)"])
        }
    }

    private func check(_ code: Int32, _ what: String) throws {
        guard code == MOSQ_ERR_SUCCESS.rawValue else {
            throw MQTTError("\(what): \(String(cString: mosquitto_strerror(code)))")
        }
    }
}

/// An MQTT setting libmosquitto refused.
public struct MQTTError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
