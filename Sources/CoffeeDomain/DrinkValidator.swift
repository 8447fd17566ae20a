import Foundation

/// The rules of docs/protocol.md §1, applied to decoded input.
///
/// Pure: the current time comes in as an argument, so the future-skew rule
/// is exact in tests.
public struct DrinkValidator: Sendable {
    /// Limits from the `limits` section of the configuration.
    public struct Limits: Sendable, Hashable {
        public var maxMgCaffeine: Double
        public var maxFutureSkew: TimeInterval
        /// No drink is dated before this (`limits.earliestDate`): a date of
        /// 1970 is almost always a zero where a date should be.
        public var earliestDate: Date

        /// 2000-01-01T00:00:00Z.
        public static let defaultEarliestDate = Date(timeIntervalSince1970: 946_684_800)

        public init(
            maxMgCaffeine: Double = 1000, maxFutureSkew: TimeInterval = 300, earliestDate: Date = Limits.defaultEarliestDate
        ) {
            self.maxMgCaffeine = maxMgCaffeine
            self.maxFutureSkew = maxFutureSkew
            self.earliestDate = earliestDate
        }
    }

    public static let maxSourceBytes = 128
    public var limits: Limits
    /// The person's catalogue (§15): which names a drink's `type` may take,
    /// and the serving a drink given by its type alone takes. Nil: §1's types.
    public var settings: LiveSettings?

    public init(limits: Limits = Limits(), settings: LiveSettings? = nil) {
        self.limits = limits
        self.settings = settings
    }

    /// The catalogue's entry of `type`.
    private func entry(_ type: DrinkType) -> DrinkCatalogue.Entry? {
        settings?.entry(type) ?? DrinkCatalogue.standard.entry(type)
    }

    /// A valid drink from `input`, or the first rule it breaks.
    ///
    /// - Parameters:
    ///   - now: the current time, for the future-skew rule.
    ///   - defaultSource: the channel (`bus`, `inbox`, `query`), used when
    ///     the input names no source.
    /// - Throws: `ValidationError` naming the field and the rule.
    public func drink(from input: DrinkInput, now: Date, defaultSource: String) throws(ValidationError) -> Drink {
        let uuid: UUID
        if let parsed = input.parsedUUID { uuid = parsed } else { uuid = try Self.uuid(input.uuid, field: "uuid") }

        var type = input.parsedType
        switch input.type {
        case .absent: break
        case .wrongType(let expected): throw ValidationError(field: "type", rule: "must be \(expected)")
        case .value(let name):
            guard let t = DrinkType(rawValue: name) else {
                throw ValidationError(field: "type", rule: "must be \(DrinkType.nameRule), got \"\(name.prefix(80))\"")
            }
            type = t
        }
        // §1's types are always in the catalogue; another name must be there too.
        if let type, !type.isBuiltIn, entry(type) == nil {
            throw ValidationError(
                field: "type", rule: "must be a drink of the catalogue (GET /api/v1/catalogue), got \"\(type.rawValue)\"")
        }

        let mg: Double
        switch input.mgCaffeine {
        case .absent:
            guard let type else {
                throw ValidationError(field: "mgCaffeine", rule: "is required unless type is given")
            }
            guard let serving = entry(type), !serving.retired else {
                throw ValidationError(
                    field: "type", rule: "\(type.rawValue) is retired from the catalogue: give mgCaffeine to log one")
            }
            mg = serving.mgCaffeine
        case .wrongType(let expected): throw ValidationError(field: "mgCaffeine", rule: "must be \(expected)")
        case .value(let v):
            guard v.isFinite else { throw ValidationError(field: "mgCaffeine", rule: "must be finite") }
            guard v > 0 else { throw ValidationError(field: "mgCaffeine", rule: "must be > 0, got \(Self.format(v))") }
            guard v <= limits.maxMgCaffeine else {
                throw ValidationError(
                    field: "mgCaffeine", rule: "must be <= \(Self.format(limits.maxMgCaffeine)), got \(Self.format(v))")
            }
            mg = v
        }

        let date: Date
        switch input.date {
        case .absent: throw ValidationError(field: "date", rule: "is required")
        case .wrongType(let expected): throw ValidationError(field: "date", rule: "must be \(expected)")
        case .value(let raw): date = try Self.date(raw, field: "date")
        }
        guard date >= limits.earliestDate else {
            throw ValidationError(
                field: "date",
                rule:
                    "must not be before limits.earliestDate (\(RFC3339.string(limits.earliestDate))), got \(RFC3339.string(date))"
            )
        }
        let skew = date.timeIntervalSince(now)
        guard skew <= limits.maxFutureSkew else {
            throw ValidationError(
                field: "date",
                rule: "must not be more than \(Self.format(limits.maxFutureSkew)) s in the future, got \(RFC3339.string(date))"
            )
        }

        let version = try Self.version(input.version)

        var source = defaultSource
        switch input.source {
        case .absent: break
        case .wrongType(let expected): throw ValidationError(field: "source", rule: "must be \(expected)")
        case .value(let s):
            guard s.utf8.count <= Self.maxSourceBytes else {
                throw ValidationError(field: "source", rule: "must be at most \(Self.maxSourceBytes) bytes, got \(s.utf8.count)")
            }
            // PostgreSQL's text cannot hold it: one rule for both stores.
            guard !s.utf8.contains(0) else { throw ValidationError(field: "source", rule: "must not contain U+0000") }
            source = s
        }

        return Drink(uuid: uuid, mgCaffeine: mg, date: date, version: version, type: type, source: source)
    }

    /// A valid deletion from `input`, or the first rule it breaks.
    public func deletion(from input: DeletionInput) throws(ValidationError) -> Deletion {
        let uuid = try Self.uuid(input.uuid, field: input.uuidKey)
        let version: Int64?
        if case .absent = input.version { version = nil } else { version = try Self.version(input.version) }
        return Deletion(uuid: uuid, version: version)
    }

    static func uuid(_ field: InputField<String>, field name: String) throws(ValidationError) -> UUID {
        switch field {
        case .absent: throw ValidationError(field: name, rule: "is required")
        case .wrongType(let expected): throw ValidationError(field: name, rule: "must be \(expected)")
        case .value(let text):
            guard let uuid = UUIDText.parse(text) else {
                throw ValidationError(field: name, rule: "must be a UUID (36 characters, RFC 4122), got \"\(text.prefix(64))\"")
            }
            return uuid
        }
    }

    static func version(_ field: InputField<Double>) throws(ValidationError) -> Int64 {
        switch field {
        case .absent: return 1
        case .wrongType(let expected): throw ValidationError(field: "version", rule: "must be \(expected)")
        case .value(let v):
            guard v.isFinite, v == v.rounded(), abs(v) < 9.0e15 else {
                throw ValidationError(field: "version", rule: "must be an integer, got \(format(v))")
            }
            guard v >= 1 else { throw ValidationError(field: "version", rule: "must be >= 1, got \(format(v))") }
            return Int64(v)
        }
    }

    public static func date(_ raw: InputDate, field: String) throws(ValidationError) -> Date {
        switch raw {
        case .date(let d):
            // A property list's date can be any double: one past the years
            // a date can be written in is refused here, not met later.
            let s = d.timeIntervalSince1970
            guard s.isFinite, abs(s) < 1.0e11 else {
                throw ValidationError(field: field, rule: "must be a plausible date, got \(format(s)) s from 1970")
            }
            return Drink.normalized(d)
        case .epochSeconds(let s):
            guard s.isFinite, abs(s) < 1.0e11 else {
                throw ValidationError(field: field, rule: "must be a plausible epoch time in seconds, got \(format(s))")
            }
            return Drink.normalized(Date(timeIntervalSince1970: s))
        case .rfc3339(let d):
            return Drink.normalized(d)
        case .text(let t):
            guard let d = RFC3339.parse(t) else {
                throw ValidationError(
                    field: field,
                    rule: "must be an RFC 3339 date with a zone, such as 2026-11-29T08:15:00Z, got \"\(t.prefix(64))\"")
            }
            return Drink.normalized(d)
        }
    }

    /// Numbers as people write them: `5`, not `5.0`.
    static func format(_ v: Double) -> String {
        if v.isFinite, v == v.rounded(), abs(v) < 1e15 { return String(Int64(v)) }
        return String(v)
    }
}
