import Foundation

/// A person's drinks (docs/protocol.md §15): §1's types with their servings
/// as the defaults, and what the person added, changed, renamed or retired,
/// as the store keeps it (scope `catalogue`: a name, then
/// `{"mgCaffeine", "retired"}`).
///
/// A retired entry is not offered (the page hides it) and cannot be logged
/// by its name alone, but stays: past drinks of that type, imports and
/// edits that give their mg keep it. A rename is a new entry and the old
/// one retired, in one change.
public struct DrinkCatalogue: Sendable, Hashable {
    public struct Entry: Sendable, Hashable {
        public var type: DrinkType
        /// One serving, in milligrams.
        public var mgCaffeine: Double
        public var retired: Bool

        public init(type: DrinkType, mgCaffeine: Double, retired: Bool) {
            self.type = type
            self.mgCaffeine = mgCaffeine
            self.retired = retired
        }

        /// One of §1's types.
        public var builtIn: Bool { type.isBuiltIn }

        /// As the store keeps it and the JSON API shows it.
        var stored: JSONValue { .object([("mgCaffeine", .double(mgCaffeine)), ("retired", .bool(retired))]) }

        public var json: JSONValue {
            .object([
                ("name", .string(type.rawValue)), ("mgCaffeine", .double(mgCaffeine)), ("retired", .bool(retired)),
                ("builtIn", .bool(builtIn)),
            ])
        }
    }

    /// §1's types in §1's order, then the person's own by name.
    public private(set) var entries: [Entry]
    private var index: [DrinkType: Int]

    /// The catalogue of §1's types, nothing changed.
    public static let standard = DrinkCatalogue(stored: [:])

    /// §1's types with `stored` (name and JSON value) over them; a row
    /// this build cannot read is left out.
    public init(stored: [String: String]) {
        var entries = DrinkType.builtIn.map { Entry(type: $0, mgCaffeine: $0.defaultServingMg!, retired: false) }
        var own: [Entry] = []
        for (name, text) in stored {
            guard let type = DrinkType(rawValue: name), let entry = Self.entry(type, text) else { continue }
            if let i = entries.firstIndex(where: { $0.type == type }) { entries[i] = entry } else { own.append(entry) }
        }
        entries += own.sorted { $0.type.rawValue < $1.type.rawValue }
        self.entries = entries
        index = Dictionary(uniqueKeysWithValues: entries.enumerated().map { ($0.element.type, $0.offset) })
    }

    private static func entry(_ type: DrinkType, _ text: String) -> Entry? {
        guard let value = try? JSONReader.parse(Data(text.utf8)) else { return nil }
        let mg: Double
        switch value[member: "mgCaffeine"] {
        case .int(let n)?: mg = Double(n)
        case .double(let d)?: mg = d
        default: return nil
        }
        guard mg > 0, mg.isFinite else { return nil }
        let retired = if case .bool(true)? = value[member: "retired"] { true } else { false }
        return Entry(type: type, mgCaffeine: mg, retired: retired)
    }

    /// The entry of `type`, retired or not; nil when the catalogue has none.
    public func entry(_ type: DrinkType) -> Entry? { index[type].map { entries[$0] } }

    /// What the page offers: the entries not retired.
    public var offered: [Entry] { entries.filter { !$0.retired } }

    public var json: JSONValue { .array(entries.map(\.json)) }

    /// The rows that `PUT /api/v1/catalogue/NAME` with `body` writes: the
    /// entry `name` (added or changed), and with `renamedFrom` that entry
    /// retired. Refused, naming the field, when the name is not well formed,
    /// a new entry has no `mgCaffeine`, a value is out of its range or of
    /// the wrong type, a member is unknown, or `renamedFrom` names no entry
    /// or `name` is taken.
    public func update(name: String, body: JSONValue, maxMgCaffeine: Double) throws(ValidationError) -> [(
        name: String, value: String
    )] {
        guard let type = DrinkType(rawValue: name) else {
            throw ValidationError(field: "name", rule: "must be \(DrinkType.nameRule), got \"\(name.prefix(80))\"")
        }
        guard case .object(let members) = body else {
            throw ValidationError(rule: "the body must be a JSON object: {\"mgCaffeine\", \"retired\"?, \"renamedFrom\"?}")
        }
        var mg: Double?
        var retired: Bool?
        var renamedFrom: DrinkType?
        for (member, value) in members {
            switch (member, value) {
            case ("mgCaffeine", .int(let n)): mg = Double(n)
            case ("mgCaffeine", .double(let d)): mg = d
            case ("mgCaffeine", _): throw ValidationError(field: member, rule: "must be a number")
            case ("retired", .bool(let b)): retired = b
            case ("retired", _): throw ValidationError(field: member, rule: "must be true or false")
            case ("renamedFrom", .string(let old)):
                guard let oldType = DrinkType(rawValue: old), entry(oldType) != nil else {
                    throw ValidationError(field: member, rule: "names no drink of the catalogue: \"\(old.prefix(80))\"")
                }
                renamedFrom = oldType
            case ("renamedFrom", _): throw ValidationError(field: member, rule: "must be a string")
            default:
                throw ValidationError(
                    field: member, rule: "is not a field of a catalogue entry (mgCaffeine, retired, renamedFrom)")
            }
        }
        if let mg {
            guard mg.isFinite, mg > 0, mg <= maxMgCaffeine else {
                throw ValidationError(
                    field: "mgCaffeine",
                    rule: "must be above 0 and at most \(JSONValue.double(maxMgCaffeine).serialized()) (limits.maxMgCaffeine)")
            }
        }
        var rows: [(name: String, value: String)] = []
        if let renamedFrom {
            guard renamedFrom != type else { throw ValidationError(field: "renamedFrom", rule: "is the entry's own name") }
            guard entry(type) == nil else {
                throw ValidationError(field: "name", rule: "\(name) is in the catalogue already: rename to a new name")
            }
            var old = entry(renamedFrom)!
            old.retired = true
            rows.append((renamedFrom.rawValue, old.stored.serialized()))
            mg = mg ?? old.mgCaffeine
        }
        let current = entry(type)
        guard let serving = mg ?? current?.mgCaffeine else {
            throw ValidationError(field: "mgCaffeine", rule: "is required for a new drink of the catalogue")
        }
        let updated = Entry(type: type, mgCaffeine: serving, retired: retired ?? current?.retired ?? false)
        rows.append((name, updated.stored.serialized()))
        return rows
    }
}
