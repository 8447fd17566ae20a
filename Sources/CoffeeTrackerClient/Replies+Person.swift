import CoffeeDomain
import Foundation

/// `catalogue`'s and `putCatalogue`'s reply (docs/protocol.md §15): every
/// entry, retired ones too, and the anchor of the last change.
public struct Catalogue: Sendable, Equatable {
    public var anchor: Int64
    public var entries: [DrinkCatalogue.Entry]

    public init(_ reply: JSONValue) throws(WireFormat.DecodingError) {
        anchor = try reply.member("anchor").integer()
        entries = try reply.member("drinks").items().map { item throws(WireFormat.DecodingError) in
            let name = try item.member("name").text()
            guard let type = DrinkType(rawValue: name) else { throw WireFormat.DecodingError("not a drink's name: \(name)") }
            return DrinkCatalogue.Entry(
                type: type, mgCaffeine: try item.member("mgCaffeine").number(), retired: try item.member("retired").bool())
        }
    }

    /// The entry named `name`, retired or not.
    public subscript(_ name: String) -> DrinkCatalogue.Entry? { entries.first { $0.type.rawValue == name } }
}

/// `history`'s reply (docs/protocol.md §15): the person's days, weeks or
/// months in their zone, with the settings it was computed by.
public struct History: Sendable, Equatable {
    /// One day, week or month.
    public struct Bucket: Sendable, Equatable {
        public var start: Date
        public var end: Date
        /// 23 or 25 on a day the clocks change.
        public var hours: Double
        public var mg: Double
        public var cups: Double
        public var drinks: Int
        public var peakMg: Double
        public var hoursOverSleepThreshold: Double
        public var daysOverLimit: Int
    }

    /// `day`, `week` or `month`.
    public var by: String
    public var timeZone: String
    public var dailyLimitMg: Double
    public var buckets: [Bucket]

    public init(_ reply: JSONValue) throws(WireFormat.DecodingError) {
        by = try reply.member("by").text()
        timeZone = try reply.member("timeZone").text()
        dailyLimitMg = try reply.member("dailyLimitMg").number()
        buckets = try reply.member("buckets").items().map { item throws(WireFormat.DecodingError) in
            Bucket(
                start: try Self.date(item.member("start")), end: try Self.date(item.member("end")),
                hours: try item.member("hours").number(), mg: try item.member("mg").number(),
                cups: try item.member("cups").number(), drinks: Int(try item.member("drinks").integer()),
                peakMg: try item.member("peakMg").number(),
                hoursOverSleepThreshold: try item.member("hoursOverSleepThreshold").number(),
                daysOverLimit: Int(try item.member("daysOverLimit").integer()))
        }
    }

    private static func date(_ value: JSONValue) throws(WireFormat.DecodingError) -> Date {
        let text = try value.text()
        guard let date = RFC3339.parse(text) else { throw WireFormat.DecodingError("not an RFC 3339 time: \(text)") }
        return date
    }
}

/// `backup`'s reply (docs/protocol.md §4): the file written and the anchor it holds.
public struct BackupResult: Sendable, Equatable {
    public var anchor: Int64
    public var bytes: Int64
    /// The copy's path on the service's machine.
    public var file: String

    public init(_ reply: JSONValue) throws(WireFormat.DecodingError) {
        anchor = try reply.member("anchor").integer()
        bytes = try reply.member("bytes").integer()
        file = try reply.member("file").text()
    }
}

extension PersonSettings {
    /// The settings of a `settings` or `putSettings` reply's `settings` (or `defaults`) member.
    public init(reading values: JSONValue) throws(WireFormat.DecodingError) {
        let zone = try values.member("timeZone").text()
        guard let timeZone = TimeZone(identifier: zone) else { throw WireFormat.DecodingError("unknown time zone \"\(zone)\"") }
        self.init(
            model: CaffeineModel(halfLifeHours: try values.member("halfLifeHours").number(), timeZone: timeZone),
            sleepThresholdMg: try values.member("sleepThresholdMg").number(),
            dailyLimitMg: try values.member("dailyLimitMg").number())
        timeZoneName = zone
        if let level = try values.optionalMember("levelOverMg") { levelOverMg = try level.number() }
        if let bedtime = try values.optionalMember("bedtime") {
            let text = try bedtime.text()
            self.bedtime = text == "off" ? nil : text
        }
    }
}
