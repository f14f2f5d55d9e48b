/* The kernel database on SQLite (search/db_internal.h): a file in WAL mode, synchronous=FULL,
 * writers waiting for each other (busy timeout, BEGIN IMMEDIATE, retried busy steps). */
#include <errno.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "search/db_internal.h"

typedef struct sq_stmt {
  db_stmt_t base;
  sqlite3_stmt *s;
} sq_stmt_t;

static sqlite3 *H(drk_search_db_t *db) { return db->h; }

static bool is_busy(int rc) {
  rc &= 0xff;
  return rc == SQLITE_BUSY || rc == SQLITE_LOCKED;
}

/* sqlite3_exec, retried while another process holds a lock (the busy handler covers most
 * waits; WAL recovery and schema changes can still report busy at once). */
static int exec_retry(drk_search_db_t *db, const char *sql) {
  int64_t deadline = drk_db_now_ms() + db->busy_ms;
  for (int delay = 1;; delay = delay < 64 ? delay * 2 : 64) {
    int rc = sqlite3_exec(H(db), sql, NULL, NULL, NULL);
    if (!is_busy(rc) || drk_db_now_ms() > deadline) return rc;
    drk_db_sleep_ms(delay);
  }
}

static void note_error(drk_search_db_t *db, int rc) { db->constraint = (rc & 0xff) == SQLITE_CONSTRAINT; }

static bool sq_exec(drk_search_db_t *db, const char *sql) {
  int rc = exec_retry(db, sql);
  note_error(db, rc);
  return rc == SQLITE_OK;
}

static bool sq_prepare(drk_search_db_t *db, const char *sql, db_stmt_t **out) {
  sq_stmt_t *st = calloc(1, sizeof *st);
  if (!st) return false;
  st->base.db = db;
  int64_t deadline = drk_db_now_ms() + db->busy_ms;
  for (int delay = 1;; delay = delay < 64 ? delay * 2 : 64) {
    int rc = sqlite3_prepare_v2(H(db), sql, -1, &st->s, NULL);
    if (rc == SQLITE_OK) {
      *out = &st->base;
      return true;
    }
    if (!is_busy(rc) || drk_db_now_ms() > deadline) {
      free(st);
      return false;
    }
    drk_db_sleep_ms(delay);
  }
}

static sqlite3_stmt *S(db_stmt_t *st) { return ((sq_stmt_t *)st)->s; }

static void sq_bind_text(db_stmt_t *st, int i, const char *s) {
  sqlite3_bind_text(S(st), i, s ? s : "", -1, SQLITE_TRANSIENT);
}
static void sq_bind_int(db_stmt_t *st, int i, int64_t v) { sqlite3_bind_int64(S(st), i, (sqlite3_int64)v); }
static void sq_bind_real(db_stmt_t *st, int i, double v) { sqlite3_bind_double(S(st), i, v); }
static void sq_bind_null(db_stmt_t *st, int i) { sqlite3_bind_null(S(st), i); }

static db_step_t sq_step(db_stmt_t *st) {
  drk_search_db_t *db = st->db;
  int64_t deadline = drk_db_now_ms() + db->busy_ms;
  for (int delay = 1;; delay = delay < 64 ? delay * 2 : 64) {
    int rc = sqlite3_step(S(st));
    if (rc == SQLITE_ROW) return DB_ROW;
    if (rc == SQLITE_DONE) return DB_DONE;
    if (!is_busy(rc) || drk_db_now_ms() > deadline) {
      note_error(db, rc);
      return DB_ERROR;
    }
    sqlite3_reset(S(st));
    drk_db_sleep_ms(delay);
  }
}

static bool sq_is_null(db_stmt_t *st, int i) { return sqlite3_column_type(S(st), i) == SQLITE_NULL; }
static const char *sq_col_text(db_stmt_t *st, int i) {
  const unsigned char *s = sqlite3_column_text(S(st), i);
  return s ? (const char *)s : "";
}
static int64_t sq_col_int(db_stmt_t *st, int i) { return sqlite3_column_int64(S(st), i); }
static double sq_col_real(db_stmt_t *st, int i) { return sqlite3_column_double(S(st), i); }
static int64_t sq_changes(db_stmt_t *st) { return sqlite3_changes(H(st->db)); }
static void sq_finalize(db_stmt_t *st) {
  if (!st) return;
  sqlite3_finalize(S(st));
  free(st);
}

static const char *sq_errmsg(drk_search_db_t *db) { return db->h ? sqlite3_errmsg(H(db)) : "no database"; }

static bool not_sqlite(drk_search_db_t *db, char *err, size_t n) {
  return drk_db_failf(db, err, n, "not a drkc kernel database (not an SQLite file)");
}

static void sq_set_busy_timeout(drk_search_db_t *db, int ms) { sqlite3_busy_timeout(H(db), ms); }

/* Brings the schema to the current version (a file that SQLite opens is not yet one of ours:
 * look before creating anything). */
static bool sq_init_schema(drk_search_db_t *db, const char *schema_sql, char *err, size_t n) {
  sqlite3_stmt *st;
  int rc = sqlite3_prepare_v2(H(db), "SELECT count(*), sum(name = 'drkc_meta') FROM sqlite_master WHERE type = 'table'",
                              -1, &st, NULL);
  if (rc != SQLITE_OK) {
    if ((rc & 0xff) == SQLITE_NOTADB) return not_sqlite(db, err, n);
    return drk_db_fail(db, err, n, "reading the schema");
  }
  rc = sqlite3_step(st);
  long tables = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
  long meta = rc == SQLITE_ROW ? sqlite3_column_int64(st, 1) : 0;
  sqlite3_finalize(st);
  if (rc != SQLITE_ROW) {
    if ((rc & 0xff) == SQLITE_NOTADB) return not_sqlite(db, err, n);
    return drk_db_fail(db, err, n, "reading the schema");
  }
  if (tables > 0 && !meta)
    return drk_db_failf(db, err, n, "not a drkc kernel database (an SQLite file without drkc_meta)");
  if (meta) {
    if (sqlite3_prepare_v2(H(db), "SELECT value FROM drkc_meta WHERE key = 'schema'", -1, &st, NULL) != SQLITE_OK)
      return drk_db_fail(db, err, n, "reading the schema");
    rc = sqlite3_step(st);
    int v = rc == SQLITE_ROW ? atoi((const char *)sqlite3_column_text(st, 0)) : 0;
    sqlite3_finalize(st);
    if (v > DRK_SEARCH_DB_SCHEMA_VERSION)
      return drk_db_failf(db, err, n, "database schema %d is newer than this drkc's (%d): use a newer drkc", v,
                          DRK_SEARCH_DB_SCHEMA_VERSION);
    if (v == DRK_SEARCH_DB_SCHEMA_VERSION) return true;
  }
  if (db->readonly) return drk_db_failf(db, err, n, "empty database (nothing tuned yet)");
  if (exec_retry(db, "BEGIN IMMEDIATE") != SQLITE_OK) return drk_db_fail(db, err, n, "creating the schema");
  if (exec_retry(db, schema_sql) != SQLITE_OK ||
      exec_retry(db, "INSERT OR IGNORE INTO drkc_meta(key, value) VALUES ('schema', '1')") != SQLITE_OK ||
      exec_retry(db, "COMMIT") != SQLITE_OK) {
    drk_db_fail(db, err, n, "creating the schema");
    sqlite3_exec(H(db), "ROLLBACK", NULL, NULL, NULL);
    return false;
  }
  return true;
}

static void sq_close(drk_search_db_t *db) {
  if (db->h) sqlite3_close_v2(H(db));
  db->h = NULL;
}

static bool sq_open(drk_search_db_t *db, const char *path, const char *schema_sql, char *err, size_t n) {
  struct stat sb;
  if (db->readonly && stat(path, &sb) != 0) {
    snprintf(err, n, "%s: no such database (%s)", path, strerror(errno));
    return false;
  }
  if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
    snprintf(err, n, "%s: not a regular file", path);
    return false;
  }
  sqlite3 *h = NULL;
  int flags = (db->readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) | SQLITE_OPEN_NOMUTEX;
  int orc = sqlite3_open_v2(path, &h, flags, NULL);
  db->h = h;
  if (orc != SQLITE_OK) {
    drk_db_fail(db, err, n, "cannot open");
    return false;
  }
  sqlite3_extended_result_codes(h, 1);
  sqlite3_busy_timeout(h, db->busy_ms);
  if (!db->readonly) {
    /* WAL: readers do not block the writer, and a commit is one append; FULL: a commit is on
     * disk when it returns (a kill -9 or a power cut after it loses nothing) */
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(h, "PRAGMA journal_mode=WAL", -1, &st, NULL) != SQLITE_OK) {
      if (strstr(sqlite3_errmsg(h), "not a database"))
        return not_sqlite(db, err, n);
      return drk_db_fail(db, err, n, "setting WAL mode");
    }
    int64_t deadline = drk_db_now_ms() + db->busy_ms;
    int rc;
    for (int delay = 1;; delay = delay < 64 ? delay * 2 : 64) {
      rc = sqlite3_step(st);
      if (!is_busy(rc) || drk_db_now_ms() > deadline) break;
      sqlite3_reset(st);
      drk_db_sleep_ms(delay);
    }
    bool wal = rc == SQLITE_ROW && !strcmp((const char *)sqlite3_column_text(st, 0), "wal");
    sqlite3_finalize(st);
    if (!wal) {
      if ((rc & 0xff) == SQLITE_NOTADB) return not_sqlite(db, err, n);
      if (rc == SQLITE_ROW) return drk_db_failf(db, err, n, "cannot use WAL mode (a network file system?)");
      return drk_db_fail(db, err, n, "setting WAL mode");
    }
    if (exec_retry(db, "PRAGMA synchronous=FULL") != SQLITE_OK || exec_retry(db, "PRAGMA foreign_keys=ON") != SQLITE_OK)
      return drk_db_fail(db, err, n, "setting synchronous mode");
  }
  return sq_init_schema(db, schema_sql, err, n);
}

const db_backend_t drk_db_sqlite = {
    .name = "SQLite",
    .instr = "instr",
    .least = "min",
    .id_type = "INTEGER PRIMARY KEY",
    .real_type = "REAL",
    .i64_type = "INTEGER",
    .begin_sql = "BEGIN IMMEDIATE",
    .open = sq_open,
    .close = sq_close,
    .set_busy_timeout = sq_set_busy_timeout,
    .exec = sq_exec,
    .prepare = sq_prepare,
    .bind_text = sq_bind_text,
    .bind_int = sq_bind_int,
    .bind_real = sq_bind_real,
    .bind_null = sq_bind_null,
    .step = sq_step,
    .is_null = sq_is_null,
    .col_text = sq_col_text,
    .col_int = sq_col_int,
    .col_real = sq_col_real,
    .changes = sq_changes,
    .finalize = sq_finalize,
    .errmsg = sq_errmsg,
};
