import CoffeeDomain
import Foundation

/// What an upsert did.
enum RecordUpsert {
    /// A new record.
    case inserted
    /// A newer version over a record (live or a tombstone).
    case replaced
    /// Nothing: the record's version was not lower.
    case unchanged
}

/// A record as a page of changes reads it.
struct RecordRow {
    var anchor: Int64
    var change: CommittedBatch.Change
}

/// The statements as the store calls them, whichever database holds it.
protocol RecordStatements: AnyObject, Sendable {
    var dialect: SQLDialect { get }
    var insertedInRuns: Int { get }
    var runsUndone: Int { get }
    func transaction<T>(_ body: () throws -> T) throws -> T
    /// Whether the commit under way leaves its drinks out of SQLite's index
    /// by date (`DateIndexDeferral`); false again once it ends.
    var deferringDateIndex: Bool { get set }
    func lockAnchor() -> Int64?
    func advanceAnchor(to anchor: Int64)
    func upsert(_ drink: Drink, anchor: Int64, now: Int64) throws -> RecordUpsert
    func insertNew(_ drinks: ArraySlice<Drink>, firstAnchor: Int64, now: Int64) throws -> Bool
    func insertRun(_ drinks: ArraySlice<Drink>, anchors: ArraySlice<Int64>, now: Int64) throws -> Bool
    func lookup(_ uuid: UUID) throws -> (Int64, Bool)?
    func takenOrRepeated(_ drinks: ArraySlice<Drink>) throws -> Set<UUIDKey>?
    func tombstone(_ uuid: UUID, version: Int64, anchor: Int64, now: Int64) throws
    func setMeta(_ key: String, _ value: Int64) throws
    func meta(_ key: String) throws -> Int64?
    func changes(after anchor: Int64, through end: Int64, liveOnly: Bool, limit: Int) throws -> [RecordRow]
    func drinks(from: Int64, to: Int64) throws -> [Drink]
    func drinks(after cursor: DrinkCursor?, limit: Int) throws -> (drinks: [Drink], next: DrinkCursor?)
    func doses(from: Int64, to: Int64) throws -> [(dateMs: Int64, mg: Double)]
    func highestExpiredTombstone(before cutoff: Int64) throws -> Int64?
    func purgeTombstones(before cutoff: Int64) throws -> Int
    func replicate(_ change: CommittedBatch.Change, anchor: Int64, now: Int64) throws
    func purgeTombstones(through anchor: Int64) throws
    func deleteAllRecords() throws
    func settingsRows() throws -> [(scope: String, name: String, value: String, anchor: Int64)]
    func putSetting(scope: String, name: String, value: String, anchor: Int64) throws
    func alertStates() throws -> [OutboxRuleState]
    func alertStateRows(after anchor: Int64?, through end: Int64) throws -> [KeptRows.RuleState]
    func putAlertState(_ state: OutboxRuleState, anchor: Int64) throws
    func putOutboxItem(_ item: OutboxItem, settled: Bool, anchor: Int64) throws
    func retryOutboxItem(_ item: OutboxItem) throws
    func outboxRows(after anchor: Int64?, through end: Int64) throws -> [KeptRows.Alert]
    func purgeSettledAlerts(before cutoff: Int64) throws
    func keptRows(after anchor: Int64?, through end: Int64) throws -> KeptRows
    func deleteAllKeptRows() throws
    func putKept(_ kept: KeptRows) throws
    func outboxItems(receiver: String, prefix: Bool, dueBy nowMs: Int64, limit: Int) throws -> [OutboxItem]
    func outboxSummary() throws -> [String: (count: Int, nextMs: Int64)]
    func finalize()
    func closeConnection()
}

extension RecordStatement {
    /// The drink of a row whose columns 4 to 7 are `date_ms, mg, type,
    /// source`, as every read of records selects them.
    func drink(uuid: UUID, version: Int64) -> Drink {
        Drink(
            uuid: uuid, mgCaffeine: double(5), date: Date(timeIntervalSince1970: Double(int64(4)) / 1000),
            version: version, type: string(6).flatMap(DrinkType.init(rawValue:)), source: string(7))
    }
}
