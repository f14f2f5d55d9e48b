/* The kernel database's backends, under the logic of search/db.c. Private to search/.
 *
 * db.c holds everything both backends share, written once: the schema text, record
 * validation, uids, the best-record ranking, queries, export/import, merge and sync. It speaks
 * SQL through the small statement interface below; a backend turns it into its engine's calls:
 * db_sqlite.c (a file; busy waits and WAL) and db_pg.c (libpq; built when DRK_HAVE_POSTGRES).
 *
 * SQL passed to prepare numbers its parameters ?1, ?2, ... (the PostgreSQL backend writes them
 * $1, $2, ...) and uses only what both engines read alike; where they differ, db.c takes the
 * word from the backend (instr / strpos, min / LEAST, the schema's column types). */
#ifndef DRK_SEARCH_DB_INTERNAL_H
#define DRK_SEARCH_DB_INTERNAL_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "search/db.h"

#define DRK_SEARCH_DB_SCHEMA_VERSION 1

/* A prepared statement; each backend's own starts with this. */
typedef struct db_stmt {
  drk_search_db_t *db;
} db_stmt_t;

typedef enum db_step { DB_ROW, DB_DONE, DB_ERROR } db_step_t;

typedef struct db_backend {
  const char *name;                        /* "SQLite", "PostgreSQL": in messages */
  const char *instr, *least;               /* instr(a, b) / strpos(a, b); min(a, b) / LEAST(a, b) */
  const char *id_type, *real_type, *i64_type; /* the schema's column types */
  const char *begin_sql;                   /* a write transaction */
  /* Connects to where (a file, a URL) and brings the schema (schema_sql: several statements) to
   * the current version, creating it unless db->readonly; err names db->path. */
  bool (*open)(drk_search_db_t *db, const char *where, const char *schema_sql, char *err, size_t n);
  void (*close)(drk_search_db_t *db);
  void (*set_busy_timeout)(drk_search_db_t *db, int ms);
  /* Statements without parameters or results (several, for the schema); false: errmsg says why */
  bool (*exec)(drk_search_db_t *db, const char *sql);
  bool (*prepare)(drk_search_db_t *db, const char *sql, db_stmt_t **out);
  void (*bind_text)(db_stmt_t *st, int i, const char *s);
  void (*bind_int)(db_stmt_t *st, int i, int64_t v);
  void (*bind_real)(db_stmt_t *st, int i, double v);
  void (*bind_null)(db_stmt_t *st, int i);
  db_step_t (*step)(db_stmt_t *st);
  bool (*is_null)(db_stmt_t *st, int i);
  const char *(*col_text)(db_stmt_t *st, int i); /* "" for NULL; valid until the next step */
  int64_t (*col_int)(db_stmt_t *st, int i);
  double (*col_real)(db_stmt_t *st, int i);
  int64_t (*changes)(db_stmt_t *st); /* rows the statement wrote */
  void (*finalize)(db_stmt_t *st);
  const char *(*errmsg)(drk_search_db_t *db);
} db_backend_t;

struct drk_search_db {
  const db_backend_t *be;
  void *h;                /* the backend's connection */
  char path[PATH_MAX];    /* as given, a URL's password hidden: what messages name */
  char where[PATH_MAX];   /* as given: what the backend opens */
  bool readonly;
  bool in_txn;
  int busy_ms;
  long retries;    /* transactions run again */
  /* set by the backend with its error: */
  bool retry;      /* the transaction may succeed when run again (serialization, deadlock, lost connection) */
  bool constraint; /* a constraint refused the statement (unknown workload or target) */
  char msg[1024];  /* the backend's message where its engine keeps none */
};

extern const db_backend_t drk_db_sqlite;
#ifdef DRK_HAVE_POSTGRES
extern const db_backend_t drk_db_pg;
#endif

/* "path: what: message" into err; false. */
bool drk_db_fail(drk_search_db_t *db, char *err, size_t n, const char *what);
bool drk_db_failf(drk_search_db_t *db, char *err, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void drk_db_sleep_ms(int ms);
int64_t drk_db_now_ms(void);

#endif
