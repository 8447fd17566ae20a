import Foundation

/// What a person's tracker goes by (docs/protocol.md §15): the model's
/// half-life and time zone, the level under which sleep comes easily, and
/// the most caffeine they mean to take in a day. This release takes them
/// from the configuration (`model.*`).
public struct PersonSettings: Sendable, Hashable {
    /// The half-life and the time zone: the model's.
    public var model: CaffeineModel
    /// A level under this lets a person sleep (`model.sleepThresholdMg`).
    public var sleepThresholdMg: Double
    /// The most a person means to take in a day (`model.dailyLimitMg`).
    public var dailyLimitMg: Double

    /// `model.dailyLimitMg`'s default: the amount health agencies give as safe for most adults.
    public static let defaultDailyLimitMg = 400.0
    /// `model.sleepThresholdMg`'s default.
    public static let defaultSleepThresholdMg = 50.0

    public var timeZone: TimeZone { model.timeZone }

    public init(
        model: CaffeineModel = CaffeineModel(), sleepThresholdMg: Double = Self.defaultSleepThresholdMg,
        dailyLimitMg: Double = Self.defaultDailyLimitMg
    ) {
        self.model = model
        self.sleepThresholdMg = sleepThresholdMg
        self.dailyLimitMg = dailyLimitMg
    }
}
