#ifndef CPOSTGRESQL_SHIM_H
#define CPOSTGRESQL_SHIM_H
#include <libpq-fe.h>

/// The SQLSTATE field of an error result: `PG_DIAG_SQLSTATE` is a character
/// macro, which Swift does not import.
static inline const char *cpq_sqlstate(const PGresult *result) {
    return PQresultErrorField(result, 'C');
}
#endif
