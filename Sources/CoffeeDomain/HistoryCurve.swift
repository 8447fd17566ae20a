import Foundation

/// A history bucket's peak level and its time above the sleep threshold,
/// by §3's formula exactly as the live model has it (`CaffeineModel`): each
/// drink of the 24 hours up to a moment counts, halved every half-life.
///
/// Between two moments where a drink comes in or leaves that window the
/// level only falls, so a bucket's peak is at its start or at one of its
/// drinks, and the time it stays above the threshold after such a moment
/// has a closed form: `halfLife · log2(level / threshold)`, cut at the next
/// moment. The level is summed whole at each bucket's start, then carried
/// from moment to moment (one decay, plus the drinks that come, less those
/// that leave): linear in the drinks. Pure; the doses are passed in.
public struct HistoryCurve: Sendable {
    public let model: CaffeineModel
    public let thresholdMg: Double

    public init(model: CaffeineModel, thresholdMg: Double) {
        self.model = model
        self.thresholdMg = thresholdMg
    }

    /// How far back of a bucket drinks still count: the model's window.
    public static var lookBack: TimeInterval { CaffeineModel.window }

    /// A drink as the curve needs it: when, and how much.
    public struct Dose: Sendable, Hashable {
        public var date: Date
        public var mg: Double

        public init(date: Date, mg: Double) {
            self.date = date
            self.mg = mg
        }
    }

    public struct Measure: Sendable, Hashable {
        /// The mg of the doses dated from the bucket's start up to, not including, its end.
        public var mg: Double
        /// How many they are.
        public var drinks: Int
        public var peakMg: Double
        public var secondsOverThreshold: Double
    }

    /// Each bucket's measure, from `doses` in date order, which must hold
    /// every drink dated from the first bucket's start less `lookBack` to
    /// the last bucket's end: its sums, read off the doses in one pass
    /// beside the curve's (one read of the store serves both), and its
    /// peak and time over the threshold.
    public func measure(_ buckets: [DateInterval], doses: [Dose]) -> [Measure] {
        let halfLife = model.halfLifeHours * 3600
        let window = CaffeineModel.window
        func decay(_ seconds: TimeInterval) -> Double { exp2(-seconds / halfLife) }
        let leaving = decay(window)  // what is left of a drink when it leaves the window
        var measures: [Measure] = []
        measures.reserveCapacity(buckets.count)
        var first = 0  // the first dose that may count in this bucket
        for bucket in buckets {
            let start = bucket.start
            while first < doses.count, doses[first].date < start - window { first += 1 }
            // At the start: the model's level, then what leaves at that very moment.
            var level = 0.0
            var entering = first  // the next dose to come into the window
            var exiting = first  // the next dose to leave it
            var mg = 0.0
            var drinks = 0
            while entering < doses.count, doses[entering].date <= start {
                level += doses[entering].mg * decay(start.timeIntervalSince(doses[entering].date))
                if doses[entering].date == start {
                    mg += doses[entering].mg
                    drinks += 1
                }
                entering += 1
            }
            var peak = level
            while exiting < entering, doses[exiting].date + window <= start {
                level -= doses[exiting].mg * leaving
                exiting += 1
            }
            var over = 0.0
            var moment = start
            func stretch(to next: Date) {
                guard let falls = CaffeineModel.secondsToFall(from: level, to: thresholdMg, halfLife: halfLife) else { return }
                over += min(next.timeIntervalSince(moment), falls)
            }
            while true {
                let comes = entering < doses.count && doses[entering].date < bucket.end ? doses[entering].date : nil
                let goes = exiting < entering ? doses[exiting].date + window : nil
                let next: Date
                switch (comes, goes) {
                case (let c?, let g?): next = min(c, g)
                case (let c?, nil): next = c
                case (nil, let g?): next = g
                case (nil, nil): next = bucket.end
                }
                guard next < bucket.end else { break }
                stretch(to: next)
                level *= decay(next.timeIntervalSince(moment))
                moment = next
                var arrived = false
                while entering < doses.count, doses[entering].date == next {
                    level += doses[entering].mg
                    mg += doses[entering].mg
                    drinks += 1
                    entering += 1
                    arrived = true
                }
                // A drink counts at its own moment with those exactly 24 hours older still in.
                if arrived { peak = max(peak, level) }
                while exiting < entering, doses[exiting].date + window <= next {
                    level -= doses[exiting].mg * leaving
                    exiting += 1
                }
                if level < 0 { level = 0 }  // rounding, when the last drink leaves
            }
            stretch(to: bucket.end)
            measures.append(Measure(mg: mg, drinks: drinks, peakMg: peak, secondsOverThreshold: over))
        }
        return measures
    }

}
