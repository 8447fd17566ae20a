import Foundation

/// The model's sums, kept per minute of drink date as drinks come and go,
/// so that a snapshot costs the same with 10 drinks in the window or
/// 100,000: it reads at most the 1,560 minutes of the window and the local
/// day, not the drinks.
///
/// Caffeine is a sum of exponential decays, so a drink's share of the dose
/// at any time `at` is `mg · 2^((date − T)/h) · 2^((T − at)/h)`: the first
/// factor is fixed once the drink is known (`T` is a reference time), the
/// second is common to all drinks. Each minute keeps the sum of the first
/// factor, the sum of mg and a count, plus its drinks. Minutes wholly inside
/// the window (or the local day) are read from their sums; the one or two
/// minutes where a boundary falls are read drink by drink, exactly. A minute
/// that lost or replaced a drink is summed again from its drinks before it
/// is read (subtracting would let rounding drift), and every sum is made
/// again from the drinks when the reference moves (every 12 hours of `at`),
/// so the result stays within a few ulps of `CaffeineModel.snapshot`.
public struct CaffeineIndex: Sendable {
    public let model: CaffeineModel

    /// Where a held drink is: its minute, and which of that minute's
    /// entries is the current one.
    private struct Slot: Sendable {
        var minute: Int64
        var serial: Int
    }

    private struct Entry: Sendable {
        var drink: Drink
        /// Its UUID's slot's serial (from 1); `unslotted` for a drink put in
        /// by `insertNew` that has no slot yet (held, its UUID in no slot),
        /// `let go` for such a drink pruned before it got one.
        var serial: Int
    }

    private static let unslotted = 0
    private static let letGo = -1

    private struct Minute: Sendable {
        var weighted = 0.0
        var mg = 0.0
        /// Every drink put in this minute, in order, with some that have
        /// left since (their serial is no longer their UUID's slot):
        /// appending costs no hashing, and `resum` drops the leavers
        /// before the minute is read.
        var entries: [Entry] = []
        /// How many of `entries` are held.
        var held = 0
        /// A drink left or was replaced since the sums were made.
        var stale = false

        mutating func add(_ entry: Entry, weight: Double) {
            entries.append(entry)
            held += 1
            weighted += weight
            mg += entry.drink.mgCaffeine
        }

        /// Its drinks, once `resum` has dropped the leavers (a minute is
        /// read only when not stale).
        var drinks: some Sequence<Drink> { entries.lazy.map(\.drink) }
    }

    private var minutes: [Int64: Minute] = [:]
    /// Each held drink's place: one lookup by UUID per insert or remove.
    private var slots: [UUIDKey: Slot] = [:]
    /// Held drinks put in by `insertNew` that have no slot yet.
    private var unslottedCount = 0
    private var nextSerial = 0
    /// The reference time `T` of the weights.
    private var reference: Date
    /// The days of the model's zone, today remembered: where today starts.
    private let days: LocalDays

    public init(model: CaffeineModel, reference: Date = Date()) {
        self.model = model
        self.reference = reference
        days = LocalDays(timeZone: model.timeZone)
    }

    public var count: Int { slots.count + unslottedCount }

    /// The held drinks, in no order.
    public var drinks: [Drink] {
        var all: [Drink] = []
        all.reserveCapacity(slots.count)
        for minute in minutes.values {
            for entry in minute.entries where isHeld(entry) { all.append(entry.drink) }
        }
        return all
    }

    private var halfLife: Double { model.halfLifeHours * 3600 }

    private static func minute(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 / 60).rounded(.down)) }

    private func weight(_ drink: Drink) -> Double {
        drink.mgCaffeine * pow(2, drink.date.timeIntervalSince(reference) / halfLife)
    }

    private func isHeld(_ entry: Entry) -> Bool {
        switch entry.serial {
        case Self.unslotted: true
        case Self.letGo: false
        default: slots[UUIDKey(entry.drink.uuid)]?.serial == entry.serial
        }
    }

    /// Holds `drink`, replacing whatever its UUID held.
    public mutating func insert(_ drink: Drink) {
        giveSlots()
        let m = Self.minute(drink.date)
        nextSerial += 1
        if let old = slots.updateValue(Slot(minute: m, serial: nextSerial), forKey: UUIDKey(drink.uuid)) { leave(old.minute) }
        let weight = weight(drink)
        minutes[m, default: Minute()].add(Entry(drink: drink, serial: nextSerial), weight: weight)
    }

    /// Holds `drink`, whose UUID the index does not hold (the store wrote
    /// it as a new record, `CommittedBatch.writesOnlyNewRecords`): no
    /// lookup by UUID, and no slot until a removal or a replacement needs
    /// one (`giveSlots`), so that a stream of new drinks costs no hashing.
    public mutating func insertNew(_ drink: Drink) {
        unslottedCount += 1
        minutes[Self.minute(drink.date), default: Minute()].add(
            Entry(drink: drink, serial: Self.unslotted), weight: weight(drink))
    }

    /// Gives every drink put in by `insertNew` its slot, so that a UUID can
    /// be found again: once per drink at most.
    private mutating func giveSlots() {
        guard unslottedCount > 0 else { return }
        var i = minutes.startIndex
        while i != minutes.endIndex {
            let m = minutes.keys[i]
            for k in minutes.values[i].entries.indices where minutes.values[i].entries[k].serial == Self.unslotted {
                nextSerial += 1
                minutes.values[i].entries[k].serial = nextSerial
                slots[UUIDKey(minutes.values[i].entries[k].drink.uuid)] = Slot(minute: m, serial: nextSerial)
            }
            i = minutes.index(after: i)
        }
        unslottedCount = 0
    }

    /// Lets go of the drink with `uuid`, if held.
    public mutating func remove(_ uuid: UUID) {
        giveSlots()
        removeSlotted(uuid)
    }

    private mutating func removeSlotted(_ uuid: UUID) {
        guard let slot = slots.removeValue(forKey: UUIDKey(uuid)) else { return }
        leave(slot.minute)
    }

    /// One of minute `m`'s drinks is no longer held there. A minute that no
    /// snapshot reads (one dated ahead, say, given new versions again and
    /// again) is compacted once leavers outnumber its drinks, so its
    /// entries stay within twice what it holds.
    private mutating func leave(_ m: Int64) {
        minutes[m]!.held -= 1
        if minutes[m]!.held == 0 {
            minutes[m] = nil
        } else {
            minutes[m]!.stale = true
            if minutes[m]!.entries.count > 2 * minutes[m]!.held + 16 { resum(m) }
        }
    }

    /// Entries kept, leavers included (for tests of the bound above).
    var entryCount: Int { minutes.values.reduce(0) { $0 + $1.entries.count } }

    /// Lets go of every drink dated before `cutoff`.
    /// A drink without a slot is let go where it lies, so that the prune
    /// (once a minute) gives none a slot.
    public mutating func removeAll(datedBefore cutoff: Date) {
        let last = Self.minute(cutoff)
        for m in Array(minutes.keys) where m <= last {
            guard var minute = minutes[m] else { continue }
            var slotted: [UUID] = []
            var letGo = 0
            for k in minute.entries.indices where minute.entries[k].drink.date < cutoff && isHeld(minute.entries[k]) {
                if minute.entries[k].serial == Self.unslotted {
                    minute.entries[k].serial = Self.letGo
                    letGo += 1
                } else {
                    slotted.append(minute.entries[k].drink.uuid)
                }
            }
            minutes[m] = minute
            unslottedCount -= letGo
            for _ in 0..<letGo { leave(m) }
            for uuid in slotted { removeSlotted(uuid) }
        }
    }

    /// Drops everything.
    public mutating func removeAll() {
        minutes = [:]
        slots = [:]
        unslottedCount = 0
    }

    /// Drops minute `m`'s leavers and makes its sums again from its drinks.
    private mutating func resum(_ m: Int64) {
        var minute = minutes.removeValue(forKey: m)!
        minute.entries.removeAll { !isHeld($0) }
        minute.weighted = 0
        minute.mg = 0
        for entry in minute.entries {
            minute.weighted += weight(entry.drink)
            minute.mg += entry.drink.mgCaffeine
        }
        minute.stale = false
        minutes[m] = minute
    }

    /// Makes every sum again from the drinks, against `reference`.
    public mutating func rebuild(reference: Date) {
        self.reference = reference
        for m in Array(minutes.keys) { resum(m) }
    }

    /// The model at `at`, as `CaffeineModel.snapshot` computes it from the
    /// same drinks. Mutating only to bring stale sums (and a reference more
    /// than 12 hours from `at`) up to date.
    public mutating func snapshot(at: Date, anchor: Int64) -> ModelSnapshot {
        snapshot(at: at, anchor: anchor, walkingEveryMinute: false)
    }

    /// `snapshot(at:anchor:)`. The minutes read are those held between the
    /// window's start (or local midnight) and `at`, in ascending order:
    /// found by walking that range (up to 1,560 lookups) when most of its
    /// minutes hold drinks, or else from the held minutes, sorted, so that
    /// a round with ten drinks does not look up 1,560 empty minutes. Both
    /// visit the same minutes in the same order, so the sums are the same
    /// to the bit (`walkingEveryMinute` forces the walk, for the tests).
    mutating func snapshot(at: Date, anchor: Int64, walkingEveryMinute: Bool) -> ModelSnapshot {
        if abs(at.timeIntervalSince(reference)) > 12 * 3600 { rebuild(reference: at) }
        let start = at - CaffeineModel.window
        let midnight = days.day(holding: at).start
        let (first, dayFirst, last) = (Self.minute(start), Self.minute(midnight), Self.minute(at))
        let low = min(first, dayFirst)
        var read: [Int64] = []
        if walkingEveryMinute || Int64(minutes.count) >= last - low + 1 {
            for m in low...last where minutes[m] != nil { read.append(m) }
        } else {
            for m in minutes.keys where m >= low && m <= last { read.append(m) }
            read.sort()
        }
        var weighted = 0.0
        var exactNow = 0.0
        var mgToday = 0.0
        var drinksToday = 0
        for m in read {
            if minutes[m]!.stale { resum(m) }
            let minute = minutes[m]!
            // The dose: whole minutes from their sums, boundary minutes drink by drink.
            if m > first && m < last {
                weighted += minute.weighted
            } else if m >= first {
                for drink in minute.drinks where model.counts(drink, at: at) {
                    exactNow += model.remaining(mg: drink.mgCaffeine, taken: drink.date, at: at)
                }
            }
            // Today: the same, from local midnight.
            if m > dayFirst && m < last {
                mgToday += minute.mg
                drinksToday += minute.held
            } else if m >= dayFirst {
                for drink in minute.drinks where drink.date >= midnight && drink.date <= at {
                    mgToday += drink.mgCaffeine
                    drinksToday += 1
                }
            }
        }
        let mgNow = exactNow + weighted * pow(2, reference.timeIntervalSince(at) / halfLife)
        return model.snapshot(mgNow: mgNow, mgToday: mgToday, drinksToday: drinksToday, at: at, anchor: anchor)
    }
}
