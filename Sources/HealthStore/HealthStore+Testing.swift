#if TEST_HOOKS
    @_spi(Testing) import SQLite
    import Foundation
    import Synchronization

    /// What tests, and only tests, may reach: the store's own connection's
    /// settings, and a hook that holds or fails its commits, so that tests can
    /// see that nothing is acknowledged or announced before a commit is durable.
    /// Compiled into debug builds only (`TEST_HOOKS`): the shipped binary has none.
    @_spi(Testing) extension HealthStore {
        /// The settings of the store's own connection (a second connection
        /// would not show `synchronous`, which is per connection).
        public struct ConnectionSettings: Sendable, Equatable {
            /// `PRAGMA journal_mode`: "wal".
            public var journalMode: String
            /// `PRAGMA synchronous`: 2 is FULL (an fsync of the WAL per commit).
            public var synchronous: Int64
            /// `PRAGMA locking_mode`: "exclusive".
            public var lockingMode: String
        }

        public func connectionSettings() throws -> ConnectionSettings {
            guard let db else { throw StoreError.closed }
            return ConnectionSettings(
                journalMode: try db.text("PRAGMA journal_mode") ?? "",
                synchronous: try db.scalar("PRAGMA synchronous") ?? -1,
                lockingMode: try db.text("PRAGMA locking_mode") ?? "")
        }

        /// Calls `hook` on the store's thread inside every COMMIT, before it
        /// takes effect: blocking holds the commit, false fails it. nil removes it.
        public func setCommitHook(_ hook: (@Sendable () -> Bool)?) {
            db?.setCommitHook(hook)
        }

        /// Calls `hook` on a backup's copying thread after each chunk of the
        /// main file it copies (`FileCopy.chunkBytes`): blocking holds the copy
        /// while commits go on. nil removes it.
        public func setAfterBackupChunk(_ hook: (@Sendable () -> Void)?) {
            afterBackupChunk = hook
        }

        /// The first column of `sql`'s first row, read on the store's own
        /// connection (a second one finds the file locked).
        public func scalar(_ sql: String) throws -> Int64? {
            guard let db else { throw StoreError.closed }
            return try db.scalar(sql)
        }

        /// The WAL's automatic checkpoint now, in pages (0: off).
        public func autoCheckpointPages() throws -> Int64 {
            guard let db else { throw StoreError.closed }
            return try db.scalar("PRAGMA wal_autocheckpoint") ?? -1
        }

        /// Fails the next `count` commits (the fault's probe writes included)
        /// with SQLITE_FULL, as a disk that filled up at that moment would,
        /// after letting `passing` commits through.
        public func failNextCommitsAsDiskFull(_ count: Int, after passing: Int = 0) {
            let left = Mutex((pass: passing, fail: count))
            db?.commitFailure = {
                left.withLock { n -> SQLiteError? in
                    if n.pass > 0 {
                        n.pass -= 1
                        return nil
                    }
                    guard n.fail > 0 else { return nil }
                    n.fail -= 1
                    return SQLiteError(code: 13, message: "database or disk is full", context: "COMMIT (injected)")
                }
            }
        }

        /// Blocks the store's thread for `seconds`, as a wedged fsync would, so
        /// that tests can see the watchdog and health checks stop.
        public nonisolated func stallThread(for seconds: Double) {
            executor.run { usleep(UInt32(seconds * 1_000_000)) }
        }
    }
#endif
