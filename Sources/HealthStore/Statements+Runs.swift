import CoffeeDomain
import Foundation
import SQLite

/// Runs of new drinks in one statement each (`HealthStore.write`, a
/// standby's `replicate`): SQLite's `VALUES` lists of a few sizes,
/// PostgreSQL's one insert over arrays of any length.
extension Statements {
    /// Stores `drinks` (a run as `SQLDialect.runLength` cuts it) as new
    /// records, at consecutive anchors from `firstAnchor`, in one statement;
    /// false, with nothing written, when a UUID among them has a record
    /// already or is among them twice (the caller then upserts them one by one).
    ///
    /// `OR IGNORE`, not a plain `INSERT` that aborts: a statement that may abort
    /// keeps a journal of every page it touches so that it can be undone, which
    /// doubled the cost of a row with random UUIDs (PostgreSQL's `ON CONFLICT DO
    /// NOTHING` likewise leaves the transaction usable). A skipped row shows in the
    /// count of changes; the rows stored with it are deleted again (their anchors are new).
    @_specialize(where Connection == Database)
    func insertNew(_ drinks: ArraySlice<Drink>, firstAnchor: Int64, now: Int64) throws -> Bool {
        try insertRun(drinks, anchors: firstAnchor..<firstAnchor + Int64(drinks.count), now: now)
    }

    /// `insertNew` at `anchors`, ascending, after every record's (a standby's: its primary's).
    @_specialize(where Connection == Database, Anchors == Range<Int64>)
    @_specialize(where Connection == Database, Anchors == ArraySlice<Int64>)
    func insertRun<Anchors: BidirectionalCollection<Int64>>(_ drinks: ArraySlice<Drink>, anchors: Anchors, now: Int64) throws
        -> Bool
    {
        let s: Statement
        if let arrays = arrayInsertStatement {
            s = arrays
            for (k, literal) in RecordArrays.literals(drinks, anchors: anchors).enumerated() {
                try s.bind(Int32(k + 1), literal)
            }
            try s.bind(8, now)
        } else {
            s = insertStatements[drinks.count]!
            for (k, (drink, anchor)) in zip(drinks, anchors).enumerated() {
                try bindRecord(drink, anchor: anchor, now: now, to: s, from: Int32(8 * k + 1))
            }
            try bindIndexed(Int32(8 * drinks.count + 1), to: s, anchor: anchors.last!)
        }
        try s.run()
        guard db.changes == drinks.count else {
            let undo = undoRunStatement!
            try undo.bind(1, anchors.first!)
            try undo.bind(2, anchors.last! + 1)
            try undo.run()
            db.forgetLastInsert()  // not a row of the undone run's, for `upsert`'s test
            runsUndone += 1
            return false
        }
        insertedInRuns += drinks.count
        return true
    }

    /// The UUIDs among `drinks` that have records or are there more than
    /// once, in one statement; nil where the dialect has no such lookup
    /// (SQLite's runs are short: they go one by one) or for a short run.
    func takenOrRepeated(_ drinks: ArraySlice<Drink>) throws -> Set<UUIDKey>? {
        guard drinks.count > 4, let sql = dialect.arrayLookup else { return nil }
        let s = try cached(sql)
        defer { s.reset() }
        try s.bind(1, RecordArrays.uuids(drinks))
        var found = Set<UUIDKey>()
        while try s.step() { found.insert(UUIDKey(s.uuid(0))) }
        var seen = Set<UUIDKey>(minimumCapacity: drinks.count)
        for drink in drinks where !seen.insert(UUIDKey(drink.uuid)).inserted { found.insert(UUIDKey(drink.uuid)) }
        return found
    }

    /// Binds a drink's record to the eight parameters from `first`: uuid,
    /// version, anchor, date, mg, type, source, and the time of the change.
    @_specialize(where Connection == Database)
    func bindRecord(_ drink: Drink, anchor: Int64, now: Int64, to s: Statement, from first: Int32) throws {
        try s.bind(first, uuid: drink.uuid)
        try s.bind(first + 1, drink.version)
        try s.bind(first + 2, anchor)
        try s.bind(first + 3, drink.epochMilliseconds)
        try s.bind(first + 4, drink.mgCaffeine)
        try s.bind(first + 5, drink.type?.rawValue)
        try s.bind(first + 6, drink.source)
        try s.bind(first + 7, now)
    }
}
