import SQLite

/// The store's tables, and how a database file is brought up to date.
///
/// `PRAGMA application_id` marks the file as ours; `PRAGMA user_version` is
/// the schema version. A later version adds a step to `migrations`.
enum StoreSchema {
    /// "CofT" in ASCII.
    static let applicationID: Int64 = 0x436F_6654
    static let currentVersion: Int64 = 9

    /// The current schema, for a new file.
    ///
    /// Version 2 keys records by anchor (the rowid) with a unique index on
    /// the UUID: a new drink appends to the table and adds a narrow entry to
    /// the UUID index. Version 1 kept whole rows in a B-tree keyed by random
    /// UUIDs, so every insert landed on a random leaf and split full-width
    /// pages. Version 3 drops version 2's index of live drinks by date
    /// (`live_by_date`): a third B-tree that every new drink wrote, so a
    /// commit of one drink wrote three pages where two do. Nothing on the
    /// live path read it: the model holds its window of drinks in memory and
    /// follows the commits; only a rebuild of that window, and a model or
    /// picture of a time it does not hold, read drinks by date, and they
    /// scan the table. See the README's benchmarks for the before/after.
    /// Version 4 brings it back: a person's history (docs/protocol.md §15)
    /// sums drinks by date over years, a range of that index per bucket,
    /// where a scan per bucket would read the table thousands of times.
    /// Version 5 adds the person's settings and catalogue (`settingsTable`),
    /// version 6 the alerts' state and outbox (`outboxTables`), version 7
    /// their anchors and the rules' turns (`keptAnchors`), so that the feed
    /// and a standby carry them (docs/protocol.md §15, "In the feed").
    /// Version 8 adds `deleted` to the index by date, so that it covers
    /// history's read (see `liveByDate`). Version 9 lets a small commit
    /// leave its drinks out of that index for a later commit to add
    /// (`deferredDateIndex`).
    static let schema = """
        CREATE TABLE meta(
            key   TEXT PRIMARY KEY,
            value INTEGER NOT NULL
        ) WITHOUT ROWID;
        INSERT INTO meta(key, value) VALUES ('anchor', 0), ('purged_anchor', 0);
        \(recordsTable)
        \(tombstonesByTime)
        \(settingsTable)
        \(outboxTables)
        \(keptAnchors)
        \(deferredDateIndex)
        """

    /// Version 9: a drink's `indexed` says whether the index by date holds
    /// it. A commit of a few changes writes its drinks with 0, so that it
    /// writes two B-trees, not three (the table's last leaf and a leaf of
    /// the UUIDs'); a later commit sets them to 1, a thousand or so at once
    /// or with any larger commit (`DateIndexDeferral`), and moves
    /// `date_indexed` to the highest anchor. Every live drink not in the index has an anchor
    /// above `date_indexed`: a read by date takes the index's range and
    /// those few rows by anchor (`SQLDialect.liveByDate`). Existing rows are
    /// indexed (the default), and `date_indexed` starts at their highest anchor.
    static let deferredDateIndex = """
        ALTER TABLE records ADD COLUMN indexed INTEGER NOT NULL DEFAULT 1;
        \(liveByDate)
        INSERT INTO meta(key, value) VALUES ('date_indexed', (SELECT coalesce(max(anchor), 0) FROM records));
        """

    /// Version 7: the anchor of the change that wrote each rule's state and
    /// outbox row, the rules' turns, and settled outbox rows kept.
    static let keptAnchors = """
        ALTER TABLE alert_state ADD COLUMN turns INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE alert_state ADD COLUMN anchor INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE outbox ADD COLUMN settled INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE outbox ADD COLUMN anchor INTEGER NOT NULL DEFAULT 0;
        UPDATE alert_state SET anchor = (SELECT value FROM meta WHERE key = 'anchor');
        UPDATE outbox SET anchor = (SELECT value FROM meta WHERE key = 'anchor');
        """

    /// The alerts' state and outbox (version 6; docs/protocol.md §16).
    static let outboxTables = """
        CREATE TABLE alert_state(
            rule   TEXT PRIMARY KEY,
            active INTEGER NOT NULL,
            key    TEXT NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE outbox(
            id         TEXT NOT NULL,
            receiver   TEXT NOT NULL,
            body       TEXT NOT NULL,
            created_ms INTEGER NOT NULL,
            attempts   INTEGER NOT NULL,
            next_ms    INTEGER NOT NULL,
            PRIMARY KEY(id, receiver)
        ) WITHOUT ROWID;
        """

    /// The person's settings and catalogue (version 5; docs/protocol.md §15):
    /// a row per name, with the anchor of the change that wrote it.
    static let settingsTable = """
        CREATE TABLE settings(
            scope  TEXT NOT NULL,
            name   TEXT NOT NULL,
            value  TEXT NOT NULL,     -- JSON
            anchor INTEGER NOT NULL,
            PRIMARY KEY(scope, name)
        ) WITHOUT ROWID;
        """

    /// Live drinks by date with their mg (version 4; version 2 had the date
    /// alone): history's sums and its curve read the index, never the table.
    /// Version 8 adds `deleted`, always 0 here (no byte of content in a
    /// SQLite record): history's query names it, and SQLite 3.40 takes an
    /// index as covering only when it holds every column the query names,
    /// the partial index's own condition included, so that version 4's
    /// index read each drink's row from the table as well. Version 9 holds
    /// only the drinks marked `indexed`, and names that column for the same reason.
    static let liveByDate =
        "CREATE INDEX live_by_date ON records(date_ms, mg, deleted, indexed) WHERE deleted = 0 AND indexed = 1;"

    /// Version 8's index by date.
    static let liveByDateV8 = "CREATE INDEX live_by_date ON records(date_ms, mg, deleted) WHERE deleted = 0;"

    /// Version 4's index by date.
    static let liveByDateV4 = "CREATE INDEX live_by_date ON records(date_ms, mg) WHERE deleted = 0;"

    /// Version 2's records: the table, its index of live drinks by date and
    /// that of tombstones (what migration 2 creates; migration 3 drops the first).
    static let recordsV2 = """
        \(recordsTable)
        CREATE INDEX live_by_date ON records(date_ms) WHERE deleted = 0;
        \(tombstonesByTime)
        """

    /// Tombstones by the time of their change: what the purge reads.
    static let tombstonesByTime = "CREATE INDEX tombstones_by_time ON records(changed_ms) WHERE deleted = 1;"

    /// One row per UUID: a live drink or a tombstone, at the anchor of the
    /// change that wrote it (versions 2 and 3).
    static let recordsTable = """
        CREATE TABLE records(
            anchor     INTEGER PRIMARY KEY,  -- anchor of the change that wrote this row
            uuid       BLOB NOT NULL UNIQUE, -- 16 bytes
            version    INTEGER NOT NULL,
            deleted    INTEGER NOT NULL,     -- 0 live, 1 tombstone
            date_ms    INTEGER,              -- drink date, ms since 1970 (NULL for tombstones)
            mg         REAL,
            type       TEXT,
            source     TEXT,
            changed_ms INTEGER NOT NULL      -- wall time of that change, for tombstone retention
        );
        """

    /// Version 1's records table, kept so that tests can build a version-1 file.
    static let recordsV1 = """
        CREATE TABLE records(
            uuid       BLOB PRIMARY KEY,
            version    INTEGER NOT NULL,
            deleted    INTEGER NOT NULL,
            anchor     INTEGER NOT NULL,
            date_ms    INTEGER,
            mg         REAL,
            type       TEXT,
            source     TEXT,
            changed_ms INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE UNIQUE INDEX records_by_anchor ON records(anchor);
        CREATE INDEX live_by_date ON records(date_ms) WHERE deleted = 0;
        CREATE INDEX tombstones_by_time ON records(changed_ms) WHERE deleted = 1;
        """

    /// Step n brings a database from version n-1 to n. (Version 1 files
    /// were created whole; a new file gets `schema`.)
    static let migrations: [Int64: String] = [
        2: """
        ALTER TABLE records RENAME TO records_v1;
        DROP INDEX records_by_anchor;
        DROP INDEX live_by_date;
        DROP INDEX tombstones_by_time;
        \(recordsV2)
        INSERT INTO records(anchor, uuid, version, deleted, date_ms, mg, type, source, changed_ms)
            SELECT anchor, uuid, version, deleted, date_ms, mg, type, source, changed_ms FROM records_v1 ORDER BY anchor;
        DROP TABLE records_v1;
        """,
        3: "DROP INDEX live_by_date;",
        4: liveByDateV4,
        5: settingsTable,
        6: outboxTables,
        7: keptAnchors,
        8: "DROP INDEX live_by_date; \(liveByDateV8)",
        9: "DROP INDEX live_by_date; \(deferredDateIndex)",
    ]

    /// Creates or migrates the schema of `db` at `path`.
    ///
    /// - Throws: `StoreError` if the file belongs to another program, is
    ///   corrupt, or has a newer schema than this build knows; the file is
    ///   never modified in those cases.
    /// The anchor a store holds everything up to: its records' highest
    /// (each change's anchor is its record's rowid), or the one `meta` keeps
    /// when a purge removed that record.
    static func anchor(of db: Database) throws(SQLiteError) -> Int64 {
        let kept = try db.scalar("SELECT value FROM meta WHERE key = 'anchor'") ?? 0
        return max(kept, try db.scalar("SELECT max(anchor) FROM records") ?? 0)
    }

    static func prepare(_ db: Database, path: String) throws {
        let appID: Int64
        let version: Int64
        do {
            appID = try db.scalar("PRAGMA application_id") ?? 0
            version = try db.scalar("PRAGMA user_version") ?? 0
        } catch {
            throw error.isCorruption ? StoreError.corrupt(path, error.message) : error
        }
        if version > currentVersion { throw StoreError.newerSchema(path, found: version, supported: currentVersion) }
        if appID != applicationID {
            let tables = try db.scalar("SELECT count(*) FROM sqlite_schema") ?? 0
            guard appID == 0 && tables == 0 else {
                throw StoreError.corrupt(path, "application_id \(appID) with \(tables) tables: not ours")
            }
        }
        guard version < currentVersion else { return }
        try db.transaction {
            if version == 0 {
                try db.execute("PRAGMA application_id = \(applicationID)")
                try db.execute(schema)
            } else {
                for step in (version + 1)...currentVersion {
                    try db.execute(migrations[step]!)
                }
            }
            try db.execute("PRAGMA user_version = \(currentVersion)")
        }
    }
}
