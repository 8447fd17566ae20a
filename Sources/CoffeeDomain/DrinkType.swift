/// The drinks the Coffee Tracker sample offers, with their serving sizes.
public enum DrinkType: String, Sendable, Codable, CaseIterable, Hashable {
    case smallCoffee, mediumCoffee, largeCoffee
    case singleEspresso, doubleEspresso, quadEspresso
    case blackTea, greenTea, softDrink, energyDrink, chocolate

    /// The type whose raw value is `name`, compared in place.
    public init?(name: UnsafeBufferPointer<UInt8>) {
        for type in Self.allCases {
            var raw = type.rawValue
            if raw.withUTF8({ $0.elementsEqual(name) }) {
                self = type
                return
            }
        }
        return nil
    }

    /// Caffeine in one serving, in milligrams (docs/protocol.md §1).
    public var mgCaffeinePerServing: Double {
        switch self {
        case .smallCoffee: 96
        case .mediumCoffee: 144
        case .largeCoffee: 192
        case .singleEspresso: 64
        case .doubleEspresso: 128
        case .quadEspresso: 256
        case .blackTea: 47
        case .greenTea: 28
        case .softDrink: 22
        case .energyDrink: 29
        case .chocolate: 18
        }
    }
}
