import CoffeeDomain
import Foundation
import Testing

@testable import CoffeeAlerts

/// What the MQTT publisher says (docs/protocol.md §16), pure: the state
/// topics of a model and Home Assistant's discovery of each sensor.
@Suite("MQTT's states and discovery")
struct MQTTStatesTests {
    let states = MQTTStates(
        topicPrefix: "ct", discoveryPrefix: "homeassistant",
        store: UUID(uuidString: "0A1B2C3D-0000-4000-8000-00000000000F")!, version: "9.9.9")

    @Test func theNodeIsTheStoresIdAndEveryTopicIsUnderIt() {
        #expect(states.node == "coffee_tracker_0a1b2c3d00004000800000000000000f")
        #expect(states.availabilityTopic == "ct/\(states.node)/availability")
        #expect(states.commandTopic("drink.add") == "ct/\(states.node)/drink.add")
    }

    @Test func aModelsStatesAreRoundedAndTheThresholdTimeIsWhereTheCurveCrossesIt() {
        let at = RFC3339.parse("2025-06-02T10:00:00.000Z")!
        // 200 mg now, a five-hour half-life: under 50 mg after two half-lives, at 20:00.
        let snapshot = CaffeineModel(halfLifeHours: 5, timeZone: TimeZone(identifier: "UTC")!).snapshot(
            mgNow: 200, mgToday: 285, drinksToday: 3, at: at, anchor: 7)
        let values = Dictionary(
            uniqueKeysWithValues: states.states(snapshot, sleepThresholdMg: 50).map { ($0.topic, $0.payload) })
        #expect(values[states.stateTopic("caffeine")] == "200")
        #expect(values[states.stateTopic("level")] == "yellow")
        #expect(values[states.stateTopic("today")] == "285")
        #expect(values[states.stateTopic("cups_today")] == "2.97")  // 285 mg of 96 mg cups, to two places
        #expect(values[states.stateTopic("under_threshold_at")] == "2025-06-02T20:00:00.000Z")
        // A level to a tenth of a mg; already under the threshold: the time is now.
        let tenth = CaffeineModel(halfLifeHours: 5, timeZone: TimeZone(identifier: "UTC")!).snapshot(
            mgNow: 12.345, mgToday: 20, drinksToday: 1, at: at, anchor: 8)
        #expect(states.states(tenth, sleepThresholdMg: 50).first?.payload == "12.3")
        let low = CaffeineModel(halfLifeHours: 5, timeZone: TimeZone(identifier: "UTC")!).snapshot(
            mgNow: 20, mgToday: 20, drinksToday: 1, at: at, anchor: 8)
        #expect(states.states(low, sleepThresholdMg: 50).last?.payload == "2025-06-02T10:00:00.000Z")
    }

    /// A model's states against what the broker holds: only the ones that
    /// moved go out; against nothing held (a new connection), all five.
    @Test func onlyTheStatesThatMovedAreSentAgain() {
        let model = CaffeineModel(halfLifeHours: 5, timeZone: TimeZone(identifier: "UTC")!)
        let at = RFC3339.parse("2025-06-02T10:00:00.000Z")!
        let first = states.states(
            model.snapshot(mgNow: 150, mgToday: 150, drinksToday: 1, at: at, anchor: 1), sleepThresholdMg: 50)
        #expect(MQTTStates.changed(first, since: [:]).count == 5)
        let sent = Dictionary(uniqueKeysWithValues: first.map { ($0.topic, $0.payload) })
        #expect(MQTTStates.changed(first, since: sent).isEmpty)
        // A minute later, no drink: only the level in mg moved (the crossing is where it was).
        let later = states.states(
            model.snapshot(mgNow: 150 * pow(0.5, 60.0 / 18_000), mgToday: 150, drinksToday: 1, at: at + 60, anchor: 1),
            sleepThresholdMg: 50)
        #expect(MQTTStates.changed(later, since: sent).map(\.topic) == [states.stateTopic("caffeine")])
    }

    @Test func eachSensorIsDiscoveredOnceWithItsUnitClassAndTheDevice() throws {
        let discovery = states.discovery
        #expect(discovery.count == MQTTStates.sensors.count)
        #expect(Set(discovery.map(\.topic)).count == discovery.count)
        let caffeine = try #require(discovery.first { $0.topic == "homeassistant/sensor/\(states.node)/caffeine/config" })
        let config = try JSONReader.parse(Data(caffeine.payload.utf8))
        #expect(config[member: "unique_id"] == .string("\(states.node)_caffeine"))
        #expect(config[member: "state_topic"] == .string(states.stateTopic("caffeine")))
        #expect(config[member: "unit_of_measurement"] == .string("mg"))
        #expect(config[member: "availability_topic"] == .string(states.availabilityTopic))
        #expect(config[member: "device"]?[member: "sw_version"] == .string("9.9.9"))
        let level = try JSONReader.parse(Data(try #require(discovery.first { $0.topic.contains("/level/") }).payload.utf8))
        #expect(level[member: "device_class"] == .string("enum"))
        #expect(level[member: "options"] == .array([.string("green"), .string("yellow"), .string("red")]))
    }
}
