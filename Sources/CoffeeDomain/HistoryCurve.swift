import Foundation

/// A history bucket's peak level and its time above the sleep threshold,
/// by §3's formula exactly as the live model has it (`CaffeineModel`): each
/// drink of the 24 hours up to a moment counts, halved every half-life.
///
/// Between two moments where a drink comes in or leaves that window the
/// level only falls, so a bucket's peak is at its start or at one of its
/// drinks, and the time it stays above the threshold after such a moment
/// has a closed form: `halfLife · log2(level / threshold)`, cut at the next
/// moment. Pure; the drinks are passed in.
public struct HistoryCurve: Sendable {
    public let model: CaffeineModel
    public let thresholdMg: Double

    public init(model: CaffeineModel, thresholdMg: Double) {
        self.model = model
        self.thresholdMg = thresholdMg
    }

    /// How far back of a bucket drinks still count: the model's window.
    public static var lookBack: TimeInterval { CaffeineModel.window }

    public struct Measure: Sendable, Hashable {
        public var peakMg: Double
        public var secondsOverThreshold: Double
    }

    /// Each bucket's measure, from `drinks` in date order, which must hold
    /// every drink dated from the first bucket's start less `lookBack` to
    /// the last bucket's end.
    public func measure(_ buckets: [DateInterval], drinks: [Drink]) -> [Measure] {
        let halfLife = model.halfLifeHours * 3600
        var measures: [Measure] = []
        measures.reserveCapacity(buckets.count)
        var first = 0  // the first drink that may still count
        for bucket in buckets {
            while first < drinks.count, drinks[first].date < bucket.start - Self.lookBack { first += 1 }
            // The moments where the level can rise or drop inside the bucket.
            var moments: [Date] = [bucket.start]
            var k = first
            while k < drinks.count, drinks[k].date < bucket.end {
                let date = drinks[k].date
                if date > bucket.start { moments.append(date) }
                let leaves = date + CaffeineModel.window
                if leaves > bucket.start, leaves < bucket.end { moments.append(leaves) }
                k += 1
            }
            moments.sort()
            let inWindow = drinks[first..<k]
            var peak = model.mgCaffeine(inWindow, at: bucket.start)
            for drink in inWindow where drink.date >= bucket.start {
                peak = max(peak, model.mgCaffeine(inWindow, at: drink.date))
            }
            var over = 0.0
            for (index, moment) in moments.enumerated() {
                let until = index + 1 < moments.count ? moments[index + 1] : bucket.end
                guard until > moment else { continue }
                // Just after `moment`: a drink leaving the window at it no longer counts.
                var level = 0.0
                for drink in inWindow where drink.date <= moment && drink.date > moment - CaffeineModel.window {
                    level += model.remaining(mg: drink.mgCaffeine, taken: drink.date, at: moment)
                }
                guard level > thresholdMg else { continue }
                over += min(until.timeIntervalSince(moment), halfLife * log2(level / thresholdMg))
            }
            measures.append(Measure(peakMg: peak, secondsOverThreshold: over))
        }
        return measures
    }
}
