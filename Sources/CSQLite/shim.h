#ifndef CSQLITE_SHIM_H
#define CSQLITE_SHIM_H
#include <sqlite3.h>

/// sqlite3_config is variadic, which Swift cannot call: this fixes the one
/// setting the store changes. Memory statistics take a process-wide mutex on
/// every allocation; nothing here reads them. Call before the first open.
static inline int csqlite_disable_memory_statistics(void) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

/// sqlite3_db_config is variadic too: whether closing the last connection
/// checkpoints the WAL into the main file (SQLite's default) or leaves it
/// for the next open to read.
static inline int csqlite_set_checkpoint_on_close(sqlite3 *db, int on) {
    return sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, on ? 0 : 1, (int *)0);
}
#endif
