import Foundation

/// One bucket of a person's history (docs/protocol.md §15): what `history`
/// answers, and what the history page draws.
public struct HistoryBucket: Sendable, Hashable {
    public var start: Date
    public var end: Date
    /// The mg of the live drinks dated in it, and how many they are.
    public var mg: Double
    public var drinks: Int
    /// The highest level in it, by §3's formula.
    public var peakMg: Double
    /// How long the level is above the sleep threshold in it.
    public var secondsOverThreshold: Double
    /// Its days whose mg is above the daily limit.
    public var daysOverLimit: Int

    public init(
        start: Date, end: Date, mg: Double = 0, drinks: Int = 0, peakMg: Double = 0, secondsOverThreshold: Double = 0,
        daysOverLimit: Int = 0
    ) {
        self.start = start
        self.end = end
        self.mg = mg
        self.drinks = drinks
        self.peakMg = peakMg
        self.secondsOverThreshold = secondsOverThreshold
        self.daysOverLimit = daysOverLimit
    }
}
