import Foundation

/// What the service tells the person (docs/protocol.md §16): four rules over
/// the model, each a condition that is on or off, told once when it turns
/// on (`fired`) and once when it turns off again (`cleared`). Pure and
/// clock-free: the time is the model's `at`.
public enum AlertRule: String, Sendable, CaseIterable, Hashable {
    /// The day's total is over the daily limit.
    case dailyLimit
    /// The level is over `alerts.levelOverMg`.
    case levelOver
    /// The level is at or under the sleep threshold: fine to sleep.
    case sleepThreshold
    /// At the next bedtime the level will still be over the sleep threshold.
    case bedtime
}

/// One rule's state, kept in the store so that a restart tells nothing twice.
public struct AlertStatus: Sendable, Hashable {
    /// The condition was last told as on.
    public var active: Bool
    /// What the condition is about: the local day (`dailyLimit`), the
    /// bedtime's day (`bedtime`), empty for the others. A new key starts
    /// the rule over, silently.
    public var key: String

    public init(active: Bool, key: String) {
        self.active = active
        self.key = key
    }
}

/// A rule turning on or off, with what to say.
public struct AlertEvent: Sendable, Hashable {
    public var rule: AlertRule
    /// True: the condition turned on; false: off again (`cleared`).
    public var fired: Bool
    /// The model's time.
    public var at: Date
    public var key: String
    public var title: String
    public var message: String
    /// The level, the day's total and the rule's limit when it was decided.
    public var mgCaffeine: Double
    public var mgToday: Double
    public var limitMg: Double
    /// The store anchor the model reflected (docs/protocol.md §3: every update message carries one).
    public var anchor: Int64 = 0
}

/// The rules as the configuration and the person's settings set them.
public struct AlertRules: Sendable {
    /// Which rules the configuration turns on; the level limit and the
    /// bedtime are the person's (`PersonSettings`, docs/protocol.md §15).
    public struct Configuration: Sendable, Hashable {
        public var dailyLimit = true
        public var sleepThreshold = true

        public init() {}
    }

    /// The level the `levelOver` rule tells of; nil: the rule is off (0 in the settings).
    var levelOverMg: Double? { settings.levelOverMg > 0 ? settings.levelOverMg : nil }
    /// Bedtime in minutes after local midnight; nil: the warning is off.
    var bedtimeMinutes: Int? { settings.bedtimeMinutes }

    /// A limit crossed must be left by this fraction of it before the rule
    /// can turn the other way: a level wavering round a limit tells once.
    public static let band = 0.1

    public var configuration: Configuration
    public var settings: PersonSettings
    /// The days of `settings`' zone; one kept across evaluations remembers
    /// today (`LocalDays`). Another zone's is not used.
    public let days: LocalDays

    public init(configuration: Configuration, settings: PersonSettings, days: LocalDays? = nil) {
        self.configuration = configuration
        self.settings = settings
        self.days = days.flatMap { $0.timeZone == settings.timeZone ? $0 : nil } ?? LocalDays(timeZone: settings.timeZone)
    }

    /// The rules that are on.
    public var enabled: [AlertRule] {
        AlertRule.allCases.filter { rule in
            switch rule {
            case .dailyLimit: configuration.dailyLimit
            case .levelOver: levelOverMg != nil
            case .sleepThreshold: configuration.sleepThreshold
            case .bedtime: bedtimeMinutes != nil
            }
        }
    }

    /// A rule's state before anything was told: off, but the sleep
    /// threshold, which a person starts under.
    public static func initial(_ rule: AlertRule, key: String = "") -> AlertStatus {
        AlertStatus(active: rule == .sleepThreshold, key: key)
    }

    /// The events of `snapshot`, with `state` brought up to it.
    public func evaluate(_ snapshot: ModelSnapshot, state: inout [AlertRule: AlertStatus]) -> [AlertEvent] {
        var events: [AlertEvent] = []
        for rule in enabled {
            let (condition, key) = self.condition(rule, snapshot)
            var status = state[rule] ?? Self.initial(rule, key: key)
            if status.key != key { status = Self.initial(rule, key: key) }
            if let condition, condition != status.active {
                status.active = condition
                events.append(event(rule, fired: condition, key: key, snapshot))
            }
            state[rule] = status
        }
        return events
    }

    /// What the day's total is, from the model's cups.
    static func mgToday(_ snapshot: ModelSnapshot) -> Double { snapshot.cupsToday * CaffeineModel.mgPerCup }

    /// The level `seconds` after the snapshot with no drink: the model's timeline's formula.
    func decayed(_ snapshot: ModelSnapshot, after seconds: TimeInterval) -> Double {
        snapshot.mgCaffeine * pow(0.5, seconds / (snapshot.halfLifeHours * 3600))
    }

    /// When the level falls to `mg` with no drink; nil when it is there already.
    func fallsTo(_ mg: Double, _ snapshot: ModelSnapshot) -> Date? {
        CaffeineModel.secondsToFall(from: snapshot.mgCaffeine, to: mg, halfLife: snapshot.halfLifeHours * 3600).map {
            snapshot.at + $0
        }
    }

    /// A rule's condition (nil inside its band: as it was) and its key.
    func condition(_ rule: AlertRule, _ s: ModelSnapshot) -> (Bool?, String) {
        switch rule {
        case .dailyLimit:
            return (Self.mgToday(s) > settings.dailyLimitMg, localDay(s.at))
        case .levelOver:
            let limit = levelOverMg ?? .infinity
            if s.mgCaffeine > limit { return (true, "") }
            return (s.mgCaffeine < limit * (1 - Self.band) ? false : nil, "")
        case .sleepThreshold:
            let threshold = settings.sleepThresholdMg
            if s.mgCaffeine <= threshold { return (true, "") }
            return (s.mgCaffeine > threshold * (1 + Self.band) ? false : nil, "")
        case .bedtime:
            let bed = nextBedtime(after: s.at)
            return (decayed(s, after: bed.timeIntervalSince(s.at)) > settings.sleepThresholdMg, localDay(bed))
        }
    }

    /// When the rules should be looked at again with no drink: a crossing
    /// of the curve, a new day, a bedtime passing; nil for never.
    public func nextCheck(_ snapshot: ModelSnapshot, state: [AlertRule: AlertStatus]) -> Date? {
        var times: [Date] = []
        for rule in enabled {
            let status = state[rule] ?? Self.initial(rule)
            switch rule {
            case .dailyLimit:
                times.append(nextMidnight(after: snapshot.at))
            case .levelOver:
                if status.active, let limit = levelOverMg,
                    let t = fallsTo(limit * (1 - Self.band), snapshot)
                {
                    times.append(t)
                }
            case .sleepThreshold:
                if !status.active, let t = fallsTo(settings.sleepThresholdMg, snapshot) { times.append(t) }
            case .bedtime:
                times.append(nextBedtime(after: snapshot.at))
            }
        }
        // A moment past the crossing, so that the level read then is over it.
        return times.min().map { $0 + 0.5 }
    }

    // MARK: - The person's calendar

    var calendar: Calendar {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = settings.timeZone
        return calendar
    }

    func localDay(_ date: Date) -> String { days.day(holding: date).key }

    func localTime(_ date: Date) -> String {
        let c = calendar.dateComponents([.hour, .minute], from: date)
        return String(format: "%02d:%02d", c.hour ?? 0, c.minute ?? 0)
    }

    func nextMidnight(after date: Date) -> Date { days.day(holding: date).end }

    /// The first bedtime after `date` in the person's zone.
    func nextBedtime(after date: Date) -> Date { days.next(minutesPastMidnight: bedtimeMinutes ?? 0, after: date) }

    // MARK: - What is said

    func event(_ rule: AlertRule, fired: Bool, key: String, _ s: ModelSnapshot) -> AlertEvent {
        let mg = Int(s.mgCaffeine.rounded())
        let today = Int(Self.mgToday(s).rounded())
        let threshold = Int(settings.sleepThresholdMg.rounded())
        let limit: Double
        let title: String
        let message: String
        switch (rule, fired) {
        case (.dailyLimit, true):
            limit = settings.dailyLimitMg
            title = "\(today) mg today"
            message = "\(today) mg of caffeine today, over your daily limit of \(Int(limit.rounded())) mg."
        case (.dailyLimit, false):
            limit = settings.dailyLimitMg
            title = "Back under \(Int(limit.rounded())) mg today"
            message = "\(today) mg of caffeine today, under your daily limit of \(Int(limit.rounded())) mg again."
        case (.levelOver, true):
            limit = levelOverMg ?? 0
            title = "Caffeine over \(Int(limit.rounded())) mg"
            message = "\(mg) mg of caffeine in the body now, over \(Int(limit.rounded())) mg."
        case (.levelOver, false):
            limit = levelOverMg ?? 0
            title = "Caffeine under \(Int(limit.rounded())) mg"
            message = "\(mg) mg of caffeine in the body now, back under \(Int(limit.rounded())) mg."
        case (.sleepThreshold, true):
            limit = settings.sleepThresholdMg
            title = "Under \(threshold) mg: fine to sleep"
            message = "Caffeine is under \(threshold) mg from \(localTime(s.at)) (\(mg) mg now): fine to sleep."
        case (.sleepThreshold, false):
            limit = settings.sleepThresholdMg
            let under = fallsTo(settings.sleepThresholdMg, s).map { " until \(localTime($0))" } ?? ""
            title = "Over \(threshold) mg again"
            message = "\(mg) mg of caffeine now: over \(threshold) mg\(under)."
        case (.bedtime, true):
            limit = settings.sleepThresholdMg
            let bed = nextBedtime(after: s.at)
            let then = Int(decayed(s, after: bed.timeIntervalSince(s.at)).rounded())
            let under = fallsTo(settings.sleepThresholdMg, s).map { "; under it from \(localTime($0))" } ?? ""
            title = "Not under \(threshold) mg by \(localTime(bed))"
            message = "With this drink you will not be under \(threshold) mg by \(localTime(bed)): \(then) mg then\(under)."
        case (.bedtime, false):
            limit = settings.sleepThresholdMg
            let bed = nextBedtime(after: s.at)
            let then = Int(decayed(s, after: bed.timeIntervalSince(s.at)).rounded())
            title = "Under \(threshold) mg by \(localTime(bed)) again"
            message = "You will be under \(threshold) mg by \(localTime(bed)) again: \(then) mg then."
        }
        return AlertEvent(
            rule: rule, fired: fired, at: s.at, key: key, title: title, message: message, mgCaffeine: s.mgCaffeine,
            mgToday: Self.mgToday(s), limitMg: limit, anchor: s.anchor)
    }
}
