/* The kernel database on PostgreSQL through libpq (search/db_internal.h; built when
 * DRK_POSTGRES is on).
 *
 * A statement is run with PQexecParams when first stepped, its parameters sent as text with
 * their types (text, int8, float8; NULL untyped), its rows read from the result. Doubles go
 * both ways as 17 significant digits / extra_float_digits = 3, so a value read back is the
 * value stored (export after sync is byte for byte the SQLite one's).
 *
 * Errors: the server's SQLSTATE says what db.c may do next: 40001 (serialization failure),
 * 40P01 (deadlock) and a lost connection (class 08, or the connection gone) mark the
 * transaction worth running again (db->retry); class 23 is a constraint (db->constraint). A
 * connection found broken outside a transaction is re-established (PQreset) before the next
 * statement, so a long tune outlives a server restart; inside one, the transaction fails and
 * db.c's retry starts it over on the new connection. */
#include <libpq-fe.h>
#include <stdlib.h>
#include <string.h>

#include "search/db_internal.h"

#define PG_MAX_PARAMS 32
#define PG_TEXT_OID 25
#define PG_INT8_OID 20
#define PG_FLOAT8_OID 701
/* pg_advisory_xact_lock's key while the schema is created: "drkc" */
#define PG_SCHEMA_LOCK "1685220195"

typedef struct pg_stmt {
  db_stmt_t base;
  char *sql; /* ?N written $N */
  char *vals[PG_MAX_PARAMS];
  Oid types[PG_MAX_PARAMS];
  int np;
  PGresult *res;
  int row, nrows;
  bool ran;
  int64_t changes;
} pg_stmt_t;

static PGconn *C(drk_search_db_t *db) { return db->h; }

static void ignore_notice(void *arg, const char *message) {
  (void)arg;
  (void)message;
}

/* The server's or libpq's message, one line, into db->msg; the flags from the SQLSTATE. */
static void note_error(drk_search_db_t *db, const PGresult *res) {
  const char *m = res ? PQresultErrorMessage(res) : "";
  if (!m || !*m) m = PQerrorMessage(C(db));
  if (!m || !*m) m = "unknown error";
  snprintf(db->msg, sizeof db->msg, "%s", m);
  size_t len = strlen(db->msg);
  while (len && (db->msg[len - 1] == '\n' || db->msg[len - 1] == ' ')) db->msg[--len] = 0;
  for (char *p = db->msg; *p; p++)
    if (*p == '\n') *p = ' ';
  const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
  bool lost = PQstatus(C(db)) != CONNECTION_OK || (state && !strncmp(state, "08", 2));
  db->retry = lost || (state && (!strcmp(state, "40001") || !strcmp(state, "40P01")));
  db->constraint = state && !strncmp(state, "23", 2);
}

/* What every session sets: exact doubles, no NOTICE chatter, UTF-8; read-only when opened so. */
static bool session_setup(drk_search_db_t *db) {
  PQsetNoticeProcessor(C(db), ignore_notice, NULL);
  const char *sql = db->readonly ? "SET extra_float_digits = 3; SET client_min_messages = warning; "
                                   "SET client_encoding = 'UTF8'; SET default_transaction_read_only = on"
                                 : "SET extra_float_digits = 3; SET client_min_messages = warning; "
                                   "SET client_encoding = 'UTF8'";
  PGresult *res = PQexec(C(db), sql);
  bool ok = res && PQresultStatus(res) == PGRES_COMMAND_OK;
  if (!ok) note_error(db, res);
  PQclear(res);
  return ok;
}

/* Outside a transaction a broken connection is made again; false when it cannot be. */
static bool ensure_connected(drk_search_db_t *db) {
  if (PQstatus(C(db)) == CONNECTION_OK) return true;
  if (db->in_txn) return false;
  PQreset(C(db));
  if (PQstatus(C(db)) != CONNECTION_OK) {
    note_error(db, NULL);
    return false;
  }
  return session_setup(db);
}

static bool pg_exec(drk_search_db_t *db, const char *sql) {
  if (!ensure_connected(db)) {
    note_error(db, NULL);
    return false;
  }
  PGresult *res = PQexec(C(db), sql);
  ExecStatusType s = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
  bool ok = s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK;
  if (!ok) note_error(db, res);
  /* COMMIT of a transaction that had failed answers ROLLBACK, without an error */
  if (ok && !strcmp(sql, "COMMIT") && !strcmp(PQcmdStatus(res), "ROLLBACK")) {
    snprintf(db->msg, sizeof db->msg, "the transaction was rolled back (a statement in it failed)");
    db->retry = false;
    ok = false;
  }
  PQclear(res);
  return ok;
}

static bool pg_prepare(drk_search_db_t *db, const char *sql, db_stmt_t **out) {
  pg_stmt_t *st = calloc(1, sizeof *st);
  if (!st || !(st->sql = strdup(sql))) {
    free(st);
    snprintf(db->msg, sizeof db->msg, "out of memory");
    return false;
  }
  st->base.db = db;
  /* ?N -> $N outside quoted text; the count of parameters is the largest N */
  bool quoted = false;
  for (char *p = st->sql; *p; p++) {
    if (*p == '\'') quoted = !quoted;
    if (quoted || *p != '?' || p[1] < '0' || p[1] > '9') continue;
    *p = '$';
    int k = atoi(p + 1);
    if (k > PG_MAX_PARAMS) {
      snprintf(db->msg, sizeof db->msg, "a statement with parameter $%d (at most %d)", k, PG_MAX_PARAMS);
      free(st->sql);
      free(st);
      return false;
    }
    if (k > st->np) st->np = k;
  }
  *out = &st->base;
  return true;
}

static pg_stmt_t *P(db_stmt_t *st) { return (pg_stmt_t *)st; }

static void set_param(db_stmt_t *s, int i, const char *text, Oid type) {
  pg_stmt_t *st = P(s);
  if (i < 1 || i > PG_MAX_PARAMS) return;
  free(st->vals[i - 1]);
  st->vals[i - 1] = text ? strdup(text) : NULL;
  st->types[i - 1] = type;
  if (i > st->np) st->np = i;
}

static void pg_bind_text(db_stmt_t *st, int i, const char *s) { set_param(st, i, s ? s : "", PG_TEXT_OID); }
static void pg_bind_int(db_stmt_t *st, int i, int64_t v) {
  char b[32];
  snprintf(b, sizeof b, "%lld", (long long)v);
  set_param(st, i, b, PG_INT8_OID);
}
static void pg_bind_real(db_stmt_t *st, int i, double v) {
  char b[40];
  snprintf(b, sizeof b, "%.17g", v);
  set_param(st, i, b, PG_FLOAT8_OID);
}
static void pg_bind_null(db_stmt_t *st, int i) { set_param(st, i, NULL, 0); }

/* Runs the statement; outside a transaction, once more on a connection made again. */
static bool run(pg_stmt_t *st) {
  drk_search_db_t *db = st->base.db;
  for (int attempt = 0;; attempt++) {
    if (!ensure_connected(db)) {
      note_error(db, NULL);
      return false;
    }
    st->res = PQexecParams(C(db), st->sql, st->np, st->types, (const char *const *)st->vals, NULL, NULL, 0);
    ExecStatusType s = st->res ? PQresultStatus(st->res) : PGRES_FATAL_ERROR;
    if (s == PGRES_TUPLES_OK || s == PGRES_COMMAND_OK) {
      st->nrows = PQntuples(st->res);
      const char *ct = PQcmdTuples(st->res);
      st->changes = ct && *ct ? atoll(ct) : 0;
      return true;
    }
    note_error(db, st->res);
    PQclear(st->res);
    st->res = NULL;
    if (attempt > 0 || db->in_txn || PQstatus(C(db)) == CONNECTION_OK) return false;
  }
}

static db_step_t pg_step(db_stmt_t *s) {
  pg_stmt_t *st = P(s);
  if (!st->ran) {
    st->ran = true;
    st->row = -1;
    if (!run(st)) return DB_ERROR;
  }
  if (!st->res) return DB_ERROR;
  if (++st->row < st->nrows) return DB_ROW;
  return DB_DONE;
}

static bool pg_is_null(db_stmt_t *s, int i) {
  pg_stmt_t *st = P(s);
  return !st->res || st->row < 0 || st->row >= st->nrows || PQgetisnull(st->res, st->row, i);
}
static const char *pg_col_text(db_stmt_t *s, int i) {
  pg_stmt_t *st = P(s);
  if (pg_is_null(s, i)) return "";
  return PQgetvalue(st->res, st->row, i);
}
static int64_t pg_col_int(db_stmt_t *s, int i) { return pg_is_null(s, i) ? 0 : atoll(pg_col_text(s, i)); }
static double pg_col_real(db_stmt_t *s, int i) { return pg_is_null(s, i) ? 0 : strtod(pg_col_text(s, i), NULL); }
static int64_t pg_changes(db_stmt_t *s) { return P(s)->changes; }

static void pg_finalize(db_stmt_t *s) {
  if (!s) return;
  pg_stmt_t *st = P(s);
  PQclear(st->res);
  for (int i = 0; i < PG_MAX_PARAMS; i++) free(st->vals[i]);
  free(st->sql);
  free(st);
}

static const char *pg_errmsg(drk_search_db_t *db) { return db->msg[0] ? db->msg : "unknown error"; }

static void pg_set_busy_timeout(drk_search_db_t *db, int ms) { (void)db, (void)ms; }

static void pg_close(drk_search_db_t *db) {
  if (db->h) PQfinish(C(db));
  db->h = NULL;
}

/* One row of a query without parameters; false (db->msg set) on an error. */
static PGresult *query_row(drk_search_db_t *db, const char *sql) {
  PGresult *res = PQexec(C(db), sql);
  if (res && PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1) return res;
  if (res && PQresultStatus(res) == PGRES_TUPLES_OK) snprintf(db->msg, sizeof db->msg, "no row from: %s", sql);
  else note_error(db, res);
  PQclear(res);
  return NULL;
}

/* Brings the schema to the current version: in the connection's current schema, a database
 * (schema) with other tables and no drkc_meta is not ours; creating happens under an advisory
 * lock so that writers starting at once create it once. */
static bool pg_init_schema(drk_search_db_t *db, const char *schema_sql, char *err, size_t n) {
  PGresult *res = query_row(db,
                            "SELECT count(*), count(*) FILTER (WHERE table_name = 'drkc_meta'), current_schema() "
                            "FROM information_schema.tables WHERE table_schema = current_schema()");
  if (!res) return drk_db_fail(db, err, n, "reading the schema");
  long tables = atol(PQgetvalue(res, 0, 0)), meta = atol(PQgetvalue(res, 0, 1));
  bool no_schema = PQgetisnull(res, 0, 2);
  PQclear(res);
  if (no_schema)
    return drk_db_failf(db, err, n, "no schema to keep the tables in (search_path names none that exists)");
  if (tables > 0 && !meta)
    return drk_db_failf(db, err, n,
                        "not a drkc kernel database (a PostgreSQL database with %ld tables and no drkc_meta; give "
                        "drkc an empty database, or a schema of its own: options=-csearch_path%%3Ddrkc in the URL)",
                        tables);
  if (meta) {
    res = query_row(db, "SELECT value FROM drkc_meta WHERE key = 'schema'");
    int v = res ? atoi(PQgetvalue(res, 0, 0)) : 0;
    PQclear(res);
    if (v > DRK_SEARCH_DB_SCHEMA_VERSION)
      return drk_db_failf(db, err, n, "database schema %d is newer than this drkc's (%d): use a newer drkc", v,
                          DRK_SEARCH_DB_SCHEMA_VERSION);
    if (v == DRK_SEARCH_DB_SCHEMA_VERSION) return true;
  }
  if (db->readonly) return drk_db_failf(db, err, n, "empty database (nothing tuned yet)");
  /* the lock is the session's, taken before the transaction: a SERIALIZABLE transaction's
   * snapshot would otherwise predate the other creator's commit */
  if (!pg_exec(db, "SELECT pg_advisory_lock(" PG_SCHEMA_LOCK ")"))
    return drk_db_fail(db, err, n, "creating the schema");
  bool ok = false;
  for (int attempt = 0; attempt < 5 && !ok; attempt++) {
    ok = pg_exec(db, "BEGIN") && pg_exec(db, schema_sql) &&
         pg_exec(db, "INSERT INTO drkc_meta(key, value) VALUES ('schema', '1') ON CONFLICT(key) DO NOTHING") &&
         pg_exec(db, "COMMIT");
    if (!ok) {
      drk_db_fail(db, err, n, "creating the schema");
      bool retry = db->retry;
      PGresult *r = PQexec(C(db), "ROLLBACK");
      PQclear(r);
      if (!retry) break;
      drk_db_sleep_ms(20 << attempt);
    }
  }
  PGresult *r = PQexec(C(db), "SELECT pg_advisory_unlock(" PG_SCHEMA_LOCK ")");
  PQclear(r);
  return ok;
}

static bool pg_open(drk_search_db_t *db, const char *where, const char *schema_sql, char *err, size_t n) {
  /* the URL's own settings override these (expand_dbname: later keywords win) */
  const char *const keys[] = {"connect_timeout", "fallback_application_name", "dbname", NULL};
  const char *const vals[] = {"20", "drkc", where, NULL};
  PGconn *conn = PQconnectdbParams(keys, vals, 1);
  db->h = conn;
  if (!conn) {
    snprintf(err, n, "%s: cannot connect: out of memory", db->path);
    return false;
  }
  if (PQstatus(conn) != CONNECTION_OK) {
    note_error(db, NULL);
    return drk_db_failf(db, err, n, "cannot connect: %s", db->msg);
  }
  if (!session_setup(db)) return drk_db_fail(db, err, n, "setting up the session");
  return pg_init_schema(db, schema_sql, err, n);
}

const db_backend_t drk_db_pg = {
    .name = "PostgreSQL",
    .instr = "strpos",
    .least = "LEAST",
    .id_type = "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
    .real_type = "DOUBLE PRECISION",
    .i64_type = "BIGINT",
    .begin_sql = "BEGIN",
    .open = pg_open,
    .close = pg_close,
    .set_busy_timeout = pg_set_busy_timeout,
    .exec = pg_exec,
    .prepare = pg_prepare,
    .bind_text = pg_bind_text,
    .bind_int = pg_bind_int,
    .bind_real = pg_bind_real,
    .bind_null = pg_bind_null,
    .step = pg_step,
    .is_null = pg_is_null,
    .col_text = pg_col_text,
    .col_int = pg_col_int,
    .col_real = pg_col_real,
    .changes = pg_changes,
    .finalize = pg_finalize,
    .errmsg = pg_errmsg,
};
