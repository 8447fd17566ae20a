/// A drink's type: one of the drinks the Coffee Tracker sample offers
/// (docs/protocol.md §1, `builtIn`), or a name the person added to their
/// catalogue (§15, `DrinkCatalogue`).
///
/// A name is a letter, then letters, digits, `_` or `-`, at most 64 bytes,
/// so that it stands in a URL's path as it is (`/api/v1/catalogue/NAME`).
/// Any such name reads back from the store and the wire, whether or not a
/// catalogue holds it now: a past drink of a retired or renamed type stays
/// readable. Which names a new drink may take is the catalogue's rule
/// (`DrinkValidator`).
public struct DrinkType: RawRepresentable, Sendable, Codable, Hashable {
    public let rawValue: String

    /// `rawValue` when it is a well-formed name.
    public init?(rawValue: String) {
        guard Self.isWellFormed(rawValue.utf8) else { return nil }
        self.rawValue = rawValue
    }

    private init(builtIn name: String) { rawValue = name }

    public static let smallCoffee = DrinkType(builtIn: "smallCoffee")
    public static let mediumCoffee = DrinkType(builtIn: "mediumCoffee")
    public static let largeCoffee = DrinkType(builtIn: "largeCoffee")
    public static let singleEspresso = DrinkType(builtIn: "singleEspresso")
    public static let doubleEspresso = DrinkType(builtIn: "doubleEspresso")
    public static let quadEspresso = DrinkType(builtIn: "quadEspresso")
    public static let blackTea = DrinkType(builtIn: "blackTea")
    public static let greenTea = DrinkType(builtIn: "greenTea")
    public static let softDrink = DrinkType(builtIn: "softDrink")
    public static let energyDrink = DrinkType(builtIn: "energyDrink")
    public static let chocolate = DrinkType(builtIn: "chocolate")

    /// §1's drink types, in §1's order: the catalogue's defaults.
    public static let builtIn: [DrinkType] = [
        smallCoffee, mediumCoffee, largeCoffee, singleEspresso, doubleEspresso, quadEspresso,
        blackTea, greenTea, softDrink, energyDrink, chocolate,
    ]

    /// The longest name, in bytes.
    public static let maxNameBytes = 64

    /// The type named `name`, read in place: one of §1's without making a
    /// string (the bus's common case), or any other well-formed name.
    public init?(name: UnsafeBufferPointer<UInt8>) {
        for type in Self.builtIn {
            var raw = type.rawValue
            if raw.withUTF8({ UnsafeRawBufferPointer($0).sameBytes(as: UnsafeRawBufferPointer(name)) }) {
                self = type
                return
            }
        }
        guard Self.isWellFormed(name) else { return nil }
        rawValue = String(decoding: name, as: UTF8.self)
    }

    /// A letter, then letters, digits, `_` or `-`; 1 to 64 bytes.
    static func isWellFormed(_ bytes: some Collection<UInt8>) -> Bool {
        guard let first = bytes.first, bytes.count <= maxNameBytes, isLetter(first) else { return false }
        return bytes.allSatisfy { isLetter($0) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x5F || $0 == 0x2D }
    }

    private static func isLetter(_ byte: UInt8) -> Bool { (byte | 0x20) >= 0x61 && (byte | 0x20) <= 0x7A }

    /// What a name must be, for errors.
    public static let nameRule = "a letter, then letters, digits, _ or -, at most 64 bytes"

    /// One of §1's types.
    public var isBuiltIn: Bool { defaultServingMg != nil }

    /// Caffeine in one serving of a §1 type, in milligrams (docs/protocol.md
    /// §1); nil for a name of the person's own. The catalogue's serving
    /// (`DrinkCatalogue`) is what a new drink takes: a person may change it.
    public var defaultServingMg: Double? {
        switch rawValue {
        case "smallCoffee": 96
        case "mediumCoffee": 144
        case "largeCoffee": 192
        case "singleEspresso": 64
        case "doubleEspresso": 128
        case "quadEspresso": 256
        case "blackTea": 47
        case "greenTea": 28
        case "softDrink": 22
        case "energyDrink": 29
        case "chocolate": 18
        default: nil
        }
    }
}
