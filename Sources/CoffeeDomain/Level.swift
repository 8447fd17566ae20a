/// The traffic-light level a complication draws.
public enum Level: String, Sendable, Hashable, Codable {
    case green, yellow, red

    /// Dose level: green below 200 mg, yellow below 400 mg, else red.
    public static func forDose(mg: Double) -> Level {
        mg < 200 ? .green : mg < 400 ? .yellow : .red
    }

    /// Cups level: green below 3 cups, yellow below 5, else red.
    public static func forCups(_ cups: Double) -> Level {
        cups < 3 ? .green : cups < 5 ? .yellow : .red
    }
}
