import CoffeeDomain
import Foundation

/// What the MQTT publisher says (docs/protocol.md §16), pure: the state
/// topics of a model, and Home Assistant's discovery configuration of each
/// sensor, so that the sensors appear by themselves.
public struct MQTTStates: Sendable {
    /// One sensor: its object id, its name, and how Home Assistant reads it.
    struct Sensor {
        var object: String
        var name: String
        var unit: String?
        var deviceClass: String?
        var stateClass: String?
        var icon: String
        var options: [String]?
    }

    static let sensors = [
        Sensor(object: "caffeine", name: "Caffeine", unit: "mg", stateClass: "measurement", icon: "mdi:coffee"),
        Sensor(
            object: "level", name: "Caffeine level", deviceClass: "enum", icon: "mdi:traffic-light",
            options: ["green", "yellow", "red"]),
        Sensor(object: "today", name: "Caffeine today", unit: "mg", stateClass: "measurement", icon: "mdi:coffee-outline"),
        Sensor(object: "cups_today", name: "Cups today", unit: "cups", stateClass: "measurement", icon: "mdi:cup"),
        Sensor(object: "under_threshold_at", name: "Under the sleep threshold at", deviceClass: "timestamp", icon: "mdi:sleep"),
    ]

    /// `mqtt.topicPrefix` and `mqtt.discoveryPrefix`.
    public let topicPrefix: String
    public let discoveryPrefix: String
    /// The device's id: the store's, so that two stores are two devices and a restart is the same one.
    public let node: String
    public let version: String

    public init(topicPrefix: String, discoveryPrefix: String, store: UUID, version: String) {
        self.topicPrefix = topicPrefix
        self.discoveryPrefix = discoveryPrefix
        node = "coffee_tracker_" + UUIDText.string(store).replacingOccurrences(of: "-", with: "").lowercased()
        self.version = version
    }

    /// "online" while connected, "offline" as the broker's last will.
    public var availabilityTopic: String { "\(topicPrefix)/\(node)/availability" }

    public func stateTopic(_ object: String) -> String { "\(topicPrefix)/\(node)/\(object)" }

    /// A command topic (`drink.add`, `drink.delete`): the bus's topics under the node (§16).
    public func commandTopic(_ name: String) -> String { "\(topicPrefix)/\(node)/\(name)" }

    /// The bus's topics that the broker's command topics stand for.
    public static let commands = ["drink.add", "drink.delete"]

    /// Each sensor's discovery topic and configuration, retained.
    public var discovery: [(topic: String, payload: String)] {
        Self.sensors.map { sensor in
            var members: [(String, JSONValue)] = [
                ("name", .string(sensor.name)), ("unique_id", .string("\(node)_\(sensor.object)")),
                ("object_id", .string("coffee_tracker_\(sensor.object)")), ("state_topic", .string(stateTopic(sensor.object))),
                ("availability_topic", .string(availabilityTopic)), ("icon", .string(sensor.icon)),
            ]
            if let unit = sensor.unit { members.append(("unit_of_measurement", .string(unit))) }
            if let deviceClass = sensor.deviceClass { members.append(("device_class", .string(deviceClass))) }
            if let stateClass = sensor.stateClass { members.append(("state_class", .string(stateClass))) }
            if let options = sensor.options { members.append(("options", .array(options.map { .string($0) }))) }
            members.append(
                (
                    "device",
                    .object([
                        ("identifiers", .array([.string(node)])), ("name", .string("Coffee Tracker")),
                        ("manufacturer", .string("coffee-tracker")), ("model", .string("coffee-tracker")),
                        ("sw_version", .string(version)),
                    ])
                ))
            return ("\(discoveryPrefix)/sensor/\(node)/\(sensor.object)/config", JSONValue.object(members).serialized())
        }
    }

    /// Of `states`, those whose payload is not what `sent` says the broker
    /// holds, retained, for their topic: a model comes ten times a second at
    /// 1,000 drinks a second and every minute at rest, and most of its five
    /// states are as they were. A new connection starts `sent` afresh.
    public static func changed(
        _ states: [(topic: String, payload: String)], since sent: [String: String]
    ) -> [(topic: String, payload: String)] {
        states.filter { sent[$0.topic] != $0.payload }
    }

    /// Each state topic's value for `snapshot`, as Home Assistant reads it.
    public func states(_ snapshot: ModelSnapshot, sleepThresholdMg: Double) -> [(topic: String, payload: String)] {
        func number(_ v: Double, _ places: Double) -> String { JSONValue.double((v * places).rounded() / places).serialized() }
        let mg = snapshot.mgCaffeine
        let under =
            snapshot.at
            + (CaffeineModel.secondsToFall(from: mg, to: sleepThresholdMg, halfLife: snapshot.halfLifeHours * 3600) ?? 0)
        return [
            (stateTopic("caffeine"), number(mg, 10)), (stateTopic("level"), snapshot.level.rawValue),
            (stateTopic("today"), number(snapshot.cupsToday * CaffeineModel.mgPerCup, 10)),
            (stateTopic("cups_today"), number(snapshot.cupsToday, 100)),
            (
                stateTopic("under_threshold_at"),
                RFC3339.string(Date(timeIntervalSince1970: under.timeIntervalSince1970.rounded()))
            ),
        ]
    }
}
