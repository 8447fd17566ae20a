import CoffeeDomain
import Foundation

/// A standby's writes (docs/protocol.md §11), and a migration's: each
/// change as another store made it, under its anchor.
extension Statements {
    /// Writes `change` under the primary's `anchor`, replacing any record of
    /// its UUID whatever its version: the primary applied the rules already,
    /// and the standby holds what the primary holds.
    func replicate(_ change: CommittedBatch.Change, anchor: Int64, now: Int64) throws {
        if replicaStatement == nil {
            let p = dialect.p
            let indexed = dialect.indexedColumn(value: "1")  // a standby's drinks go into its index at once
            replicaStatement = try db.statement(
                """
                INSERT INTO records(uuid, version, deleted, anchor, date_ms, mg, type, source, changed_ms\(indexed.column))
                VALUES (\(p(1)), \(p(2)), \(p(9)), \(p(3)), \(p(4)), \(p(5)), \(p(6)), \(p(7)), \(p(8))\(indexed.value))
                ON CONFLICT(uuid) DO UPDATE SET
                    version = excluded.version, deleted = excluded.deleted, anchor = excluded.anchor,
                    date_ms = excluded.date_ms, mg = excluded.mg, type = excluded.type,
                    source = excluded.source, changed_ms = excluded.changed_ms\(indexed.update)
                """)
        }
        let s = replicaStatement!
        switch change {
        case .added(let drink):
            try bindRecord(drink, anchor: anchor, now: now, to: s, from: 1)
            try s.bind(9, Int64(0))
        case .deleted(let tombstone):
            try s.bind(1, uuid: tombstone.uuid)
            try s.bind(2, tombstone.version)
            try s.bind(3, anchor)
            for column: Int32 in 4...7 { try s.bindNull(column) }
            try s.bind(8, now)
            try s.bind(9, Int64(1))
        }
        try s.run()
    }

    /// Tombstones at or below `anchor` gone: a standby following its primary's purge.
    func purgeTombstones(through anchor: Int64) throws {
        let s = try cached("DELETE FROM records WHERE deleted = 1 AND anchor <= \(dialect.p(1))")
        try s.bind(1, anchor)
        try s.run()
    }

    /// Every record gone: a standby about to take its primary's whole state.
    func deleteAllRecords() throws {
        try db.executeSQL("DELETE FROM records")
    }
}
