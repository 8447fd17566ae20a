import Foundation
import Testing

@testable import CoffeeDomain

/// A seeded generator, so a failing sequence can be replayed.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

@Suite("CaffeineIndex: the model kept incrementally equals the model computed whole", .timeLimit(.minutes(2)))
struct CaffeineIndexTests {
    static func relativeError(_ a: Double, _ b: Double) -> Double {
        a == b ? 0 : abs(a - b) / max(abs(a), abs(b), 1e-300)
    }

    /// Compares the index with `CaffeineModel.snapshot` over the same drinks.
    static func agree(_ index: inout CaffeineIndex, _ held: [UUID: Drink], at: Date, _ note: String) {
        let exact = index.model.snapshot(of: Array(held.values), at: at, anchor: 1)
        let fast = index.snapshot(at: at, anchor: 1)
        #expect(
            relativeError(fast.mgCaffeine, exact.mgCaffeine) < 1e-9 || abs(fast.mgCaffeine - exact.mgCaffeine) < 1e-9, "\(note)")
        #expect(relativeError(fast.cupsToday, exact.cupsToday) < 1e-9 || abs(fast.cupsToday - exact.cupsToday) < 1e-12, "\(note)")
        #expect(fast.drinksToday == exact.drinksToday, "\(note)")
        #expect(fast.level == exact.level && fast.cupsLevel == exact.cupsLevel, "\(note)")
        #expect(
            zip(fast.timeline, exact.timeline).allSatisfy {
                $0.date == $1.date
                    && (relativeError($0.mgCaffeine, $1.mgCaffeine) < 1e-9 || abs($0.mgCaffeine - $1.mgCaffeine) < 1e-9)
            }, "\(note)")
    }

    @Test(arguments: ["UTC", "America/New_York", "Asia/Kolkata", "Australia/Adelaide", "Europe/Berlin"])
    func longRandomSequencesAgreeWithTheExactModel(zone: String) {
        var rng = SplitMix(state: UInt64(bitPattern: Int64(zone.hashValue)) | 1)
        let model = CaffeineModel(halfLifeHours: 5, timeZone: TimeZone(identifier: zone)!)
        // Across the end of daylight saving time in Europe and the US (late October / early November 2026).
        var now = Date(timeIntervalSince1970: 1_793_000_000)
        var index = CaffeineIndex(model: model, reference: now)
        var held: [UUID: Drink] = [:]
        for step in 0..<4000 {
            let roll = Double.random(in: 0..<1, using: &rng)
            if roll < 0.55 || held.isEmpty {
                // A drink from the last 30 hours to 10 minutes ahead, at a random second and millisecond.
                let drink = Drink(
                    mgCaffeine: Double.random(in: 1...400, using: &rng),
                    date: now + Double.random(in: -30 * 3600...600, using: &rng).rounded(.down) + 0.001 * Double(step % 1000))
                held[drink.uuid] = drink
                // A new UUID, as the store says of a new record: half go in without a slot.
                if step % 2 == 0 { index.insertNew(drink) } else { index.insert(drink) }
            } else if roll < 0.7 {
                let uuid = held.keys.randomElement(using: &rng)!
                held[uuid] = nil
                index.remove(uuid)
            } else if roll < 0.8 {
                // A new version: another dose and date for the same UUID.
                let old = held.values.randomElement(using: &rng)!
                let replaced = Drink(
                    uuid: old.uuid, mgCaffeine: Double.random(in: 1...400, using: &rng),
                    date: old.date + Double.random(in: -7200...7200, using: &rng), version: old.version + 1, source: "test")
                held[old.uuid] = replaced
                index.insert(replaced)
            } else if roll < 0.97 {
                // Time passes: drinks leave the window, future ones come due, midnights pass.
                now += Double.random(in: 1...1800, using: &rng)
            } else {
                // The holder prunes what is too old to matter (ModelState does once a minute).
                let cutoff = now - CaffeineModel.retention
                held = held.filter { $0.value.date >= cutoff }
                index.removeAll(datedBefore: cutoff)
            }
            if step % 20 == 0 { Self.agree(&index, held, at: now, "\(zone) step \(step)") }
            #expect(index.count == held.count, "\(zone) step \(step)")
            if step % 100 == 0 {
                // What it holds, leavers and replaced versions left out (what the model cache saves).
                #expect(index.drinks.count == held.count && Set(index.drinks) == Set(held.values), "\(zone) step \(step)")
            }
        }
        #expect(index.count == held.count)
    }

    /// The prune lets go of drinks that never got a slot where they lie,
    /// beside slotted ones of the same minute; those left are still found.
    @Test func drinksWithoutASlotArePrunedWhereTheyLie() {
        let now = Date(timeIntervalSince1970: 1_793_000_000)
        var index = CaffeineIndex(model: CaffeineModel(halfLifeHours: 5, timeZone: TimeZone(identifier: "UTC")!), reference: now)
        // The cutoff falls 20 s into its minute: three drinks before it and one after share that minute.
        let cutoff = now - CaffeineModel.retention
        let old = [-10.0, -5, -3].map { Drink(mgCaffeine: 50, date: cutoff + $0) }
        let recent =
            [Drink(mgCaffeine: 60, date: cutoff + 5)] + (0..<2).map { Drink(mgCaffeine: 80, date: now - 3600 + Double($0)) }
        index.insert(old[0])
        for drink in old[1...] + recent { index.insertNew(drink) }
        #expect(index.count == 6)
        index.removeAll(datedBefore: cutoff)
        #expect(index.count == 3 && Set(index.drinks) == Set(recent))
        index.remove(recent[0].uuid)
        #expect(index.count == 2 && Set(index.drinks) == Set(recent[1...]))
        Self.agree(&index, Dictionary(uniqueKeysWithValues: recent[1...].map { ($0.uuid, $0) }), at: now, "after the prune")
    }

    @Test func theSharedVectorsComeOutTheSame() throws {
        let url = try #require(Bundle.module.url(forResource: "model", withExtension: "json", subdirectory: "Vectors"))
        let vectors = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
        let drinks = try #require(vectors["drinks"] as? [[String: Any]]).map { d in
            Drink(
                uuid: UUID(uuidString: d["uuid"] as! String)!, mgCaffeine: (d["mgCaffeine"] as! NSNumber).doubleValue,
                date: RFC3339.parse(d["date"] as! String)!, version: 1, source: nil)
        }
        let held = Dictionary(uniqueKeysWithValues: drinks.map { ($0.uuid, $0) })
        for case let c as [String: Any] in vectors["cases"] as? [Any] ?? [] {
            let zone = try #require(TimeZone(identifier: c["timeZone"] as! String))
            let model = CaffeineModel(halfLifeHours: (c["halfLifeHours"] as! NSNumber).doubleValue, timeZone: zone)
            var index = CaffeineIndex(model: model, reference: drinks[0].date)
            for drink in drinks { index.insert(drink) }
            let at = try #require(RFC3339.parse(c["at"] as! String))
            Self.agree(&index, held, at: at, "vector \(c["timeZone"]!) at \(c["at"]!)")
            let expected = try #require(c["expected"] as? [String: Any])
            let snapshot = index.snapshot(at: at, anchor: 1)
            #expect(abs(snapshot.mgCaffeine - (expected["mgCaffeine"] as! NSNumber).doubleValue) < 1e-6)
            if let cups = expected["cupsToday"] as? NSNumber {
                #expect(abs(snapshot.cupsToday - cups.doubleValue) < 1e-6)
                #expect(snapshot.drinksToday == (expected["drinksToday"] as! NSNumber).intValue)
            }
        }
    }

    /// A drink dated ahead, given a new version again and again, is in a
    /// minute no snapshot reads: its replaced versions must not pile up.
    @Test func replacedVersionsDoNotPileUpWhereNoSnapshotReads() {
        let model = CaffeineModel(halfLifeHours: 5, timeZone: TimeZone(identifier: "UTC")!)
        let now = Date(timeIntervalSince1970: 1_796_000_000)
        var index = CaffeineIndex(model: model, reference: now)
        index.insert(Drink(mgCaffeine: 5, date: now + 3600))  // so that the minute never empties
        let uuid = UUID()
        for version in 1...10_000 {
            index.insert(Drink(uuid: uuid, mgCaffeine: Double(version % 300 + 1), date: now + 3600, version: Int64(version)))
        }
        #expect(index.count == 2)
        #expect(index.entryCount <= 2 * 2 + 16 + 1)
        #expect(Set(index.drinks.map(\.version)) == [10_000, 1])
        // Its sums are the final versions' once it comes due.
        let exact = model.snapshot(of: index.drinks, at: now + 7200, anchor: 1)
        #expect(abs(index.snapshot(at: now + 7200, anchor: 1).mgCaffeine - exact.mgCaffeine) < 1e-9)
    }

    /// What the incremental index is for: a snapshot reads minutes, not drinks.
    @Test func aSnapshotReadsMinutesNotDrinks() {
        let model = CaffeineModel(halfLifeHours: 5, timeZone: TimeZone(identifier: "UTC")!)
        let now = Date(timeIntervalSince1970: 1_796_000_000)
        var index = CaffeineIndex(model: model, reference: now)
        for i in 0..<20_000 { index.insert(Drink(mgCaffeine: 1, date: now - Double(i))) }
        let snapshot = index.snapshot(at: now, anchor: 1)
        #expect(snapshot.drinksToday == min(20_000, Int(now.timeIntervalSince(model.startOfDay(at: now))) + 1))
    }

    /// A snapshot reads the held minutes, sorted, when fewer minutes hold
    /// drinks than lie between the window's start and now, and walks those
    /// minutes otherwise: the two read the same minutes in the same order,
    /// so they agree to the bit. Sparse (a few drinks over 30 hours) and
    /// dense (a drink every 61 or 90 s: 1,000 and 1,400 held minutes, still
    /// fewer than the 1,441 walked, so the held ones are sorted), and one
    /// with more held minutes than that (every 40 s), which walks both ways.
    @Test(arguments: [(3, 1), (40, 1), (1_000, 90), (1_400, 61), (4_000, 40)])
    func theHeldMinutesReadInOrderEqualTheWalkToTheBit(drinks: Int, spacingSeconds: Int) {
        var rng = SplitMix(state: UInt64(drinks * 7919 + spacingSeconds))
        let model = CaffeineModel(halfLifeHours: 5, timeZone: TimeZone(identifier: "Europe/Berlin")!)
        let now = Date(timeIntervalSince1970: 1_793_000_000)
        var index = CaffeineIndex(model: model, reference: now)
        for i in 0..<drinks {
            // Spread back from ten minutes ahead; sparse runs at random seconds over 30 hours.
            let back = spacingSeconds > 1 ? Double(i * spacingSeconds) : Double.random(in: 0...(30 * 3600), using: &rng)
            let drink = Drink(mgCaffeine: Double.random(in: 1...400, using: &rng), date: now + 600 - back.rounded(.down))
            if i % 2 == 0 { index.insertNew(drink) } else { index.insert(drink) }
        }
        for step in 0..<12 {
            let at = now + Double(step) * 1_234.5
            var (held, walked) = (index, index)
            let read = held.snapshot(at: at, anchor: 1)
            let same = read == walked.snapshot(at: at, anchor: 1, walkingEveryMinute: true)  // no 287-point dump on failure
            #expect(same, "\(drinks) drinks, step \(step)")
            #expect(read.drinksToday > 0 || drinks < 10)
        }
    }
}
