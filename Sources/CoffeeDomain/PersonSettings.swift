import Foundation

/// What a person's tracker goes by (docs/protocol.md §15): the model's
/// half-life and time zone, the level under which sleep comes easily, and
/// the most caffeine they mean to take in a day. The configuration
/// (`model.*`) gives the defaults; what the person sets is kept in the store
/// (`LiveSettings`).
public struct PersonSettings: Sendable, Hashable {
    /// The half-life and the time zone: the model's.
    public var model: CaffeineModel
    /// A level under this lets a person sleep (`model.sleepThresholdMg`).
    public var sleepThresholdMg: Double
    /// The most a person means to take in a day (`model.dailyLimitMg`).
    public var dailyLimitMg: Double
    /// The level the `levelOver` rule tells of (docs/protocol.md §16); 0: the rule is off
    /// (`alerts.levelOverMg`).
    public var levelOverMg: Double = Self.defaultLevelOverMg
    /// The local time (`HH:MM`) the `bedtime` rule looks at; nil: off (`alerts.bedtime`).
    public var bedtime: String? = Self.defaultBedtime
    /// `bedtime` in minutes after local midnight.
    public var bedtimeMinutes: Int? { bedtime.flatMap(Self.minutes) }

    /// `model.dailyLimitMg`'s default: the amount health agencies give as safe for most adults.
    public static let defaultDailyLimitMg = 400.0
    /// `model.sleepThresholdMg`'s default.
    public static let defaultSleepThresholdMg = 50.0
    /// `alerts.levelOverMg`'s default.
    public static let defaultLevelOverMg = 300.0
    /// `alerts.bedtime`'s default.
    public static let defaultBedtime: String? = "23:00"

    /// Minutes after midnight of `HH:MM`; nil when it is not one.
    public static func minutes(_ text: String) -> Int? {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, parts.allSatisfy({ $0.count == 2 && $0.allSatisfy(\.isASCII) }), let h = Int(parts[0]),
            let m = Int(parts[1]), (0..<24).contains(h), (0..<60).contains(m)
        else { return nil }
        return h * 60 + m
    }

    public var timeZone: TimeZone { model.timeZone }
    /// The zone's name as it was given (`UTC` stays `UTC`, where Foundation's
    /// identifier for it is `GMT`).
    public var timeZoneName: String

    public init(
        model: CaffeineModel = CaffeineModel(), sleepThresholdMg: Double = Self.defaultSleepThresholdMg,
        dailyLimitMg: Double = Self.defaultDailyLimitMg
    ) {
        self.model = model
        timeZoneName = model.timeZone.identifier
        self.sleepThresholdMg = sleepThresholdMg
        self.dailyLimitMg = dailyLimitMg
    }
}

extension PersonSettings {
    /// The names a person sets (docs/protocol.md §15), as the store keeps
    /// them (scope `person`) and the JSON API shows them.
    public static let names = ["halfLifeHours", "sleepThresholdMg", "dailyLimitMg", "timeZone", "levelOverMg", "bedtime"]

    /// `defaults` (the configuration's) with what the store keeps over them:
    /// each name's JSON value; `null`, or a value this build cannot read, is the default.
    public init(defaults: PersonSettings, stored: [String: String]) {
        self = defaults
        func number(_ name: String) -> Double? {
            guard let text = stored[name], let value = try? JSONReader.parse(Data(text.utf8)) else { return nil }
            switch value {
            case .int(let n): return Double(n)
            case .double(let d): return d
            default: return nil
            }
        }
        if let v = number("halfLifeHours"), Self.halfLifeRange.contains(v) { model.halfLifeHours = v }
        if let v = number("sleepThresholdMg"), Self.sleepThresholdRange.contains(v) { sleepThresholdMg = v }
        if let v = number("dailyLimitMg"), Self.dailyLimitRange.contains(v) { dailyLimitMg = v }
        if let v = number("levelOverMg"), v == 0 || Self.dailyLimitRange.contains(v) { levelOverMg = v }
        if let text = stored["bedtime"], case .string(let time)? = try? JSONReader.parse(Data(text.utf8)),
            time == "off" || Self.minutes(time) != nil
        {
            bedtime = time == "off" ? nil : time
        }
        if let text = stored["timeZone"], case .string(let name)? = try? JSONReader.parse(Data(text.utf8)),
            let zone = Self.timeZone(named: name)
        {
            model.timeZone = zone
            timeZoneName = name
        }
    }

    /// The ranges the configuration's keys have too (`model.*`): above the
    /// lower bound, at most the upper.
    public static let halfLifeRange = 0.0.nextUp...48
    public static let sleepThresholdRange = 0.0.nextUp...1000
    public static let dailyLimitRange = 0.0.nextUp...100_000

    /// The zone of an IANA name (`Europe/Berlin`, `UTC`); nil for anything
    /// else, abbreviations and offsets included.
    public static func timeZone(named name: String) -> TimeZone? {
        guard name == "UTC" || TimeZone.knownTimeZoneIdentifiers.contains(name) else { return nil }
        return TimeZone(identifier: name)
    }

    /// The four values as the JSON API shows them.
    public var json: JSONValue {
        .object([
            ("halfLifeHours", .double(model.halfLifeHours)), ("sleepThresholdMg", .double(sleepThresholdMg)),
            ("dailyLimitMg", .double(dailyLimitMg)), ("timeZone", .string(timeZoneName)),
            ("levelOverMg", .double(levelOverMg)), ("bedtime", .string(bedtime ?? "off")),
        ])
    }

    /// The rows a `PUT /api/v1/settings` body writes: each name it gives
    /// with its JSON value (`null` puts the default back). A body that
    /// names nothing, an unknown name or a value out of its range is
    /// refused, naming the field; nothing is written then.
    public static func update(from body: JSONValue) throws(ValidationError) -> [(name: String, value: String)] {
        guard case .object(let members) = body else {
            throw ValidationError(rule: "the body must be a JSON object of \(names.joined(separator: ", "))")
        }
        var rows: [(name: String, value: String)] = []
        for (name, value) in members {
            guard names.contains(name) else {
                throw ValidationError(field: name, rule: "is not a setting; the settings are \(names.joined(separator: ", "))")
            }
            if case .null = value {
                rows.append((name, "null"))
                continue
            }
            if name == "timeZone" {
                guard case .string(let zone) = value else { throw ValidationError(field: name, rule: "must be a string") }
                guard timeZone(named: zone) != nil else {
                    throw ValidationError(
                        field: name, rule: "must be an IANA time zone name such as Europe/Berlin, got \"\(zone.prefix(64))\"")
                }
                rows.append((name, value.serialized()))
                continue
            }
            if name == "bedtime" {
                guard case .string(let time) = value, time == "off" || minutes(time) != nil else {
                    throw ValidationError(
                        field: name, rule: "must be a local time HH:MM (23:00) or \"off\", got \(value.serialized().prefix(64))")
                }
                rows.append((name, value.serialized()))
                continue
            }
            let range =
                name == "halfLifeHours" ? halfLifeRange : name == "sleepThresholdMg" ? sleepThresholdRange : dailyLimitRange
            let off = name == "levelOverMg" ? " (or 0, the rule off)" : ""
            let number: Double
            switch value {
            case .int(let n): number = Double(n)
            case .double(let d): number = d
            default: throw ValidationError(field: name, rule: "must be a number")
            }
            guard range.contains(number) || (name == "levelOverMg" && number == 0) else {  // 0: the rule off
                throw ValidationError(
                    field: name,
                    rule:
                        "must be above 0 and at most \(JSONValue.double(range.upperBound).serialized())\(off), got \(value.serialized())"
                )
            }
            rows.append((name, JSONValue.double(number).serialized()))
        }
        guard !rows.isEmpty else {
            throw ValidationError(rule: "the body names no setting; the settings are \(names.joined(separator: ", "))")
        }
        return rows
    }
}
