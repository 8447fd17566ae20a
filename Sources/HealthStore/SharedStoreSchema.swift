import CoffeeDomain
import PostgreSQL

/// A store's tables in PostgreSQL (docs/protocol.md §11): SQLite's schema
/// version 3 in PostgreSQL's types, the same names and columns, so that
/// `Statements` serves both. `meta`'s `anchor` row is the counter every
/// commit of every service takes its anchors from, under its row lock;
/// `schema` marks the tables as ours, with their version.
enum SharedStoreSchema {
    /// Version 2 adds the index of live drinks by date (SQLite's version 4),
    /// version 3 the settings' table (SQLite's version 5), version 4 the
    /// alerts' state and outbox (SQLite's version 6), version 5 their
    /// anchors and the rules' turns (SQLite's version 7).
    static let currentVersion: Int64 = 5

    static let schema = """
        CREATE TABLE meta(
            key   text PRIMARY KEY,
            value bigint NOT NULL
        );
        INSERT INTO meta(key, value) VALUES ('anchor', 0), ('purged_anchor', 0), ('schema', \(currentVersion));
        CREATE TABLE records(
            anchor     bigint PRIMARY KEY,
            uuid       uuid NOT NULL UNIQUE,
            version    bigint NOT NULL,
            deleted    integer NOT NULL,
            date_ms    bigint,
            mg         double precision,
            type       text,
            source     text,
            changed_ms bigint NOT NULL
        );
        CREATE INDEX tombstones_by_time ON records(changed_ms) WHERE deleted = 1;
        \(liveByDate)
        \(settingsTable)
        \(outboxTables)
        \(keptAnchors)
        """

    static let keptAnchors = """
        ALTER TABLE alert_state ADD COLUMN turns bigint NOT NULL DEFAULT 0;
        ALTER TABLE alert_state ADD COLUMN anchor bigint NOT NULL DEFAULT 0;
        ALTER TABLE outbox ADD COLUMN settled integer NOT NULL DEFAULT 0;
        ALTER TABLE outbox ADD COLUMN anchor bigint NOT NULL DEFAULT 0;
        UPDATE alert_state SET anchor = (SELECT value FROM meta WHERE key = 'anchor');
        UPDATE outbox SET anchor = (SELECT value FROM meta WHERE key = 'anchor');
        """

    static let outboxTables = """
        CREATE TABLE alert_state(
            rule   text PRIMARY KEY,
            active integer NOT NULL,
            key    text NOT NULL
        );
        CREATE TABLE outbox(
            id         text NOT NULL,
            receiver   text NOT NULL,
            body       text NOT NULL,
            created_ms bigint NOT NULL,
            attempts   bigint NOT NULL,
            next_ms    bigint NOT NULL,
            PRIMARY KEY(id, receiver)
        );
        """

    static let settingsTable = """
        CREATE TABLE settings(
            scope  text NOT NULL,
            name   text NOT NULL,
            value  text NOT NULL,
            anchor bigint NOT NULL,
            PRIMARY KEY(scope, name)
        );
        """

    static let liveByDate = "CREATE INDEX live_by_date ON records(date_ms, mg) WHERE deleted = 0;"

    /// Step n brings the tables from version n-1 to n, in the transaction that holds the advisory lock.
    static let migrations: [Int64: String] = [
        2: liveByDate + " UPDATE meta SET value = 2 WHERE key = 'schema';",
        3: settingsTable + " UPDATE meta SET value = 3 WHERE key = 'schema';",
        4: outboxTables + " UPDATE meta SET value = 4 WHERE key = 'schema';",
        5: keptAnchors + " UPDATE meta SET value = 5 WHERE key = 'schema';",
    ]

    /// One key for every coffee-tracker's advisory lock: services starting
    /// at once on one database make its tables and identity once.
    static let lockKey: Int64 = 0x436F_6654  // "CofT", as SQLite's application_id

    /// Creates the tables and the store's identity in an empty database, or
    /// checks that the tables there are ours and of a version this build knows.
    ///
    /// - Throws: `StoreError` naming what is wrong; the database is never
    ///   modified then.
    static func prepare(_ db: Connection) throws {
        let name = "PostgreSQL database at \(db.endpoint)"
        guard db.serverVersion >= 150_000 else {
            throw StoreError.corrupt(name, "PostgreSQL 15 or later is needed, the server is \(db.serverVersion)")
        }
        try db.transaction {
            try db.execute("SELECT pg_advisory_xact_lock(\(lockKey))")
            let tables =
                try db.scalar(
                    """
                    SELECT count(*) FROM pg_tables
                    WHERE schemaname = current_schema() AND tablename IN ('meta', 'records')
                    """) ?? 0
            if tables == 0 {
                try db.execute(schema)
                try StoreIdentityRecord.write(StoreIdentity.new(), standby: false, to: db)
                return
            }
            let version = tables == 2 ? try? db.scalar("SELECT value FROM meta WHERE key = 'schema'") : nil
            guard let version else {
                throw StoreError.corrupt(name, "tables meta and records that coffee-tracker did not make")
            }
            if version > currentVersion { throw StoreError.newerSchema(name, found: version, supported: currentVersion) }
            guard version < currentVersion else { return }
            for step in (version + 1)...currentVersion { try db.execute(migrations[step]!) }
        }
    }

    /// The database holds no change yet: what `migrate` needs.
    static func isEmpty(_ db: Connection) throws -> Bool {
        try db.scalar("SELECT value FROM meta WHERE key = 'anchor'") == 0
            && db.scalar("SELECT count(*) FROM records") == 0
    }
}
