#pragma once
#include <sqlite3.h>

/* Swift cannot call variadic C functions; these wrap the ones SiteKeep needs. */
static inline int sitekeep_sqlite_set_defensive(sqlite3 *db, int on) {
    return sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, on, (int *)0);
}
static inline int sitekeep_sqlite_set_trusted_schema(sqlite3 *db, int on) {
    return sqlite3_db_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, on, (int *)0);
}
/* SQLITE_TRANSIENT is a macro Swift does not import. */
static inline sqlite3_destructor_type sitekeep_sqlite_transient(void) {
    return SQLITE_TRANSIENT;
}
