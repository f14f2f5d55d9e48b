/* The kernel version database on SQLite (search/db.h). The command line is db_main.c. */
#include "search/db.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pwd.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ir/support.h"
#include "search/json.h"

#define DB_SCHEMA_VERSION 1

struct drk_search_db {
  sqlite3 *h;
  char path[PATH_MAX];
  bool readonly;
  bool in_txn;
  int busy_ms;
};

static const char *schema_sql =
    "CREATE TABLE IF NOT EXISTS drkc_meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS workloads("
    "  key TEXT PRIMARY KEY, kind TEXT NOT NULL DEFAULT '', description TEXT NOT NULL DEFAULT '',"
    "  first_seen INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS targets("
    "  key TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, arch TEXT NOT NULL, sms INTEGER, sm_mhz INTEGER,"
    "  mem_mhz INTEGER, bw_gbs REAL, l2_bytes INTEGER, driver TEXT, cuda TEXT, name TEXT,"
    "  first_seen INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS records("
    "  id INTEGER PRIMARY KEY, uid TEXT NOT NULL UNIQUE,"
    "  workload TEXT NOT NULL REFERENCES workloads(key), target TEXT NOT NULL REFERENCES targets(key),"
    "  kernel TEXT NOT NULL DEFAULT '', schedule TEXT NOT NULL,"
    "  valid INTEGER NOT NULL, reason TEXT NOT NULL DEFAULT '',"
    "  time_us REAL, tflops REAL, gbs REAL, energy_j REAL, mem_bytes REAL, error REAL,"
    "  reward REAL, w_alpha REAL, w_beta REAL, w_gamma REAL, w_delta REAL,"
    "  drkc_version TEXT NOT NULL, host TEXT NOT NULL DEFAULT '', created INTEGER NOT NULL,"
    "  model TEXT NOT NULL DEFAULT '', user TEXT NOT NULL DEFAULT '', tags TEXT NOT NULL DEFAULT '',"
    "  stable INTEGER NOT NULL DEFAULT 0 CHECK (stable = 0 OR valid = 1),"
    "  policy TEXT NOT NULL DEFAULT '', trial INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX IF NOT EXISTS records_key ON records(workload, target, drkc_version);";

#define RECORD_COLS                                                                                              \
  "id, uid, workload, target, kernel, schedule, valid, reason, time_us, tflops, gbs, energy_j, mem_bytes, error, " \
  "reward, w_alpha, w_beta, w_gamma, w_delta, drkc_version, host, created, model, user, tags, stable, policy, trial"
/* the columns without id, for inserts and copies */
#define RECORD_DATA_COLS                                                                                       \
  "uid, workload, target, kernel, schedule, valid, reason, time_us, tflops, gbs, energy_j, mem_bytes, error, " \
  "reward, w_alpha, w_beta, w_gamma, w_delta, drkc_version, host, created, model, user, tags, stable, policy, trial"
/* best first: the order of drk_search_db_best (and of prune's ranking among valid records) */
#define BEST_ORDER "valid DESC, stable DESC, (time_us > 0) DESC, time_us ASC, reward DESC, id ASC"

static bool db_fail(drk_search_db_t *db, char *err, size_t n, const char *what) {
  snprintf(err, n, "%s: %s: %s", db ? db->path : "?", what, db && db->h ? sqlite3_errmsg(db->h) : "no database");
  return false;
}

static bool db_failf(drk_search_db_t *db, char *err, size_t n, const char *fmt, ...) {
  int w = snprintf(err, n, "%s: ", db->path);
  if (w >= 0 && (size_t)w < n) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + w, n - (size_t)w, fmt, ap);
    va_end(ap);
  }
  return false;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool is_busy(int rc) {
  rc &= 0xff;
  return rc == SQLITE_BUSY || rc == SQLITE_LOCKED;
}

/* sqlite3_exec, retried while another process holds a lock (the busy handler covers most
 * waits; WAL recovery and schema changes can still report busy at once). */
static int exec_retry(drk_search_db_t *db, const char *sql) {
  int64_t deadline = now_ms() + db->busy_ms;
  for (int delay = 1;; delay = delay < 64 ? delay * 2 : 64) {
    int rc = sqlite3_exec(db->h, sql, NULL, NULL, NULL);
    if (!is_busy(rc) || now_ms() > deadline) return rc;
    sleep_ms(delay);
  }
}

static int step_retry(drk_search_db_t *db, sqlite3_stmt *st) {
  int64_t deadline = now_ms() + db->busy_ms;
  for (int delay = 1;; delay = delay < 64 ? delay * 2 : 64) {
    int rc = sqlite3_step(st);
    if (!is_busy(rc) || now_ms() > deadline) return rc;
    sqlite3_reset(st);
    sleep_ms(delay);
  }
}

static bool prepare(drk_search_db_t *db, const char *sql, sqlite3_stmt **st, char *err, size_t n) {
  int64_t deadline = now_ms() + db->busy_ms;
  for (int delay = 1;; delay = delay < 64 ? delay * 2 : 64) {
    int rc = sqlite3_prepare_v2(db->h, sql, -1, st, NULL);
    if (rc == SQLITE_OK) return true;
    if (!is_busy(rc) || now_ms() > deadline) return db_fail(db, err, n, "preparing a statement");
    sleep_ms(delay);
  }
}

static void bind_text(sqlite3_stmt *st, int i, const char *s) { sqlite3_bind_text(st, i, s ? s : "", -1, SQLITE_TRANSIENT); }
static void bind_real_known(sqlite3_stmt *st, int i, double x) {
  if (x < 0 || !isfinite(x)) sqlite3_bind_null(st, i);
  else sqlite3_bind_double(st, i, x);
}

static void col_text(sqlite3_stmt *st, int i, char *dst, size_t cap) {
  const unsigned char *s = sqlite3_column_text(st, i);
  snprintf(dst, cap, "%s", s ? (const char *)s : "");
}
static double col_real_known(sqlite3_stmt *st, int i) {
  return sqlite3_column_type(st, i) == SQLITE_NULL ? -1 : sqlite3_column_double(st, i);
}

/* tags are stored as ",a,b," (so a tag is found with instr) and shown as "a,b" */
static void tags_from_db(const char *s, char *dst, size_t cap) {
  size_t len = strlen(s);
  if (len >= 2 && s[0] == ',' && s[len - 1] == ',') s++, len -= 2;
  if (len >= cap) len = cap - 1;
  memcpy(dst, s, len);
  dst[len] = 0;
}
static void tags_to_db(const char *s, char *dst, size_t cap) {
  if (!s || !*s) snprintf(dst, cap, "%s", "");
  else snprintf(dst, cap, ",%s,", s);
}

static void record_from_row(sqlite3_stmt *st, drk_search_record_t *r) {
  memset(r, 0, sizeof *r);
  int c = 0;
  r->id = sqlite3_column_int64(st, c++);
  col_text(st, c++, r->uid, sizeof r->uid);
  col_text(st, c++, r->workload, sizeof r->workload);
  col_text(st, c++, r->target, sizeof r->target);
  col_text(st, c++, r->kernel, sizeof r->kernel);
  col_text(st, c++, r->schedule, sizeof r->schedule);
  r->valid = sqlite3_column_int(st, c++) != 0;
  col_text(st, c++, r->reason, sizeof r->reason);
  r->time_us = col_real_known(st, c++);
  r->tflops = col_real_known(st, c++);
  r->gbs = col_real_known(st, c++);
  r->energy_j = col_real_known(st, c++);
  r->mem_bytes = col_real_known(st, c++);
  r->error = col_real_known(st, c++);
  r->reward = sqlite3_column_double(st, c++);
  for (int i = 0; i < 4; i++) r->weights[i] = sqlite3_column_double(st, c++);
  col_text(st, c++, r->drkc_version, sizeof r->drkc_version);
  col_text(st, c++, r->host, sizeof r->host);
  r->created = sqlite3_column_int64(st, c++);
  col_text(st, c++, r->model, sizeof r->model);
  col_text(st, c++, r->user, sizeof r->user);
  char tags[sizeof r->tags + 2];
  col_text(st, c++, tags, sizeof tags);
  tags_from_db(tags, r->tags, sizeof r->tags);
  r->stable = sqlite3_column_int(st, c++) != 0;
  col_text(st, c++, r->policy, sizeof r->policy);
  r->trial = sqlite3_column_int(st, c++);
}

void drk_search_record_init(drk_search_record_t *r) {
  memset(r, 0, sizeof *r);
  r->time_us = r->tflops = r->gbs = r->energy_j = r->mem_bytes = r->error = -1;
  snprintf(r->drkc_version, sizeof r->drkc_version, "%s", DRK_VERSION_STRING);
  r->created = (int64_t)time(NULL);
  char host[256] = "";
  if (gethostname(host, sizeof host - 1) != 0) host[0] = 0;
  host[sizeof host - 1] = 0;
  snprintf(r->host, sizeof r->host, "%s", host);
  const char *user = getenv("USER");
  if (!user || !*user) {
    struct passwd *pw = getpwuid(getuid());
    user = pw ? pw->pw_name : "";
  }
  snprintf(r->user, sizeof r->user, "%s", user);
}

/* ---- open, close, transactions ---- */
static bool db_init_schema(drk_search_db_t *db, char *err, size_t n) {
  /* a file that SQLite opens is not yet one of ours: look before creating anything */
  sqlite3_stmt *st;
  if (!prepare(db, "SELECT count(*), sum(name = 'drkc_meta') FROM sqlite_master WHERE type = 'table'", &st, err, n))
    return false;
  int rc = step_retry(db, st);
  long tables = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
  long meta = rc == SQLITE_ROW ? sqlite3_column_int64(st, 1) : 0;
  sqlite3_finalize(st);
  if (rc != SQLITE_ROW) {
    if ((rc & 0xff) == SQLITE_NOTADB) return db_failf(db, err, n, "not a drkc kernel database (not an SQLite file)");
    return db_fail(db, err, n, "reading the schema");
  }
  if (tables > 0 && !meta) return db_failf(db, err, n, "not a drkc kernel database (an SQLite file without drkc_meta)");
  if (meta) {
    if (!prepare(db, "SELECT value FROM drkc_meta WHERE key = 'schema'", &st, err, n)) return false;
    rc = step_retry(db, st);
    int v = rc == SQLITE_ROW ? atoi((const char *)sqlite3_column_text(st, 0)) : 0;
    sqlite3_finalize(st);
    if (v > DB_SCHEMA_VERSION)
      return db_failf(db, err, n, "database schema %d is newer than this drkc's (%d): use a newer drkc", v,
                      DB_SCHEMA_VERSION);
    if (v == DB_SCHEMA_VERSION) return true;
  }
  if (db->readonly) return db_failf(db, err, n, "empty database (nothing tuned yet)");
  if (exec_retry(db, "BEGIN IMMEDIATE") != SQLITE_OK) return db_fail(db, err, n, "creating the schema");
  if (exec_retry(db, schema_sql) != SQLITE_OK ||
      exec_retry(db, "INSERT OR IGNORE INTO drkc_meta(key, value) VALUES ('schema', '1')") != SQLITE_OK) {
    db_fail(db, err, n, "creating the schema");
    sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
    return false;
  }
  if (exec_retry(db, "COMMIT") != SQLITE_OK) {
    db_fail(db, err, n, "creating the schema");
    sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
    return false;
  }
  return true;
}

bool drk_search_db_open(const char *path, bool readonly, drk_search_db_t **out, char *err, size_t n) {
  drk_search_db_t *db = calloc(1, sizeof *db);
  if (!db) {
    snprintf(err, n, "%s: out of memory", path);
    return false;
  }
  snprintf(db->path, sizeof db->path, "%s", path);
  db->readonly = readonly;
  db->busy_ms = 30000;
  struct stat sb;
  if (readonly && stat(path, &sb) != 0) {
    snprintf(err, n, "%s: no such database (%s)", path, strerror(errno));
    free(db);
    return false;
  }
  if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
    snprintf(err, n, "%s: not a regular file", path);
    free(db);
    return false;
  }
  int flags = (readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) | SQLITE_OPEN_NOMUTEX;
  if (sqlite3_open_v2(path, &db->h, flags, NULL) != SQLITE_OK) {
    db_fail(db, err, n, "cannot open");
    drk_search_db_close(db);
    return false;
  }
  sqlite3_extended_result_codes(db->h, 1);
  sqlite3_busy_timeout(db->h, db->busy_ms);
  if (!readonly) {
    /* WAL: readers do not block the writer, and a commit is one append; FULL: a commit is on
     * disk when it returns (a kill -9 or a power cut after it loses nothing) */
    sqlite3_stmt *st;
    if (!prepare(db, "PRAGMA journal_mode=WAL", &st, err, n)) {
      if (strstr(err, "not a database")) db_failf(db, err, n, "not a drkc kernel database (not an SQLite file)");
      drk_search_db_close(db);
      return false;
    }
    int rc = step_retry(db, st);
    bool wal = rc == SQLITE_ROW && !strcmp((const char *)sqlite3_column_text(st, 0), "wal");
    sqlite3_finalize(st);
    if (!wal) {
      if ((rc & 0xff) == SQLITE_NOTADB) db_failf(db, err, n, "not a drkc kernel database (not an SQLite file)");
      else if (rc == SQLITE_ROW) db_failf(db, err, n, "cannot use WAL mode (a network file system?)");
      else db_fail(db, err, n, "setting WAL mode");
      drk_search_db_close(db);
      return false;
    }
    if (exec_retry(db, "PRAGMA synchronous=FULL") != SQLITE_OK || exec_retry(db, "PRAGMA foreign_keys=ON") != SQLITE_OK) {
      db_fail(db, err, n, "setting synchronous mode");
      drk_search_db_close(db);
      return false;
    }
  }
  if (!db_init_schema(db, err, n)) {
    drk_search_db_close(db);
    return false;
  }
  *out = db;
  return true;
}

void drk_search_db_close(drk_search_db_t *db) {
  if (!db) return;
  if (db->in_txn) sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
  sqlite3_close_v2(db->h);
  free(db);
}

void drk_search_db_set_busy_timeout(drk_search_db_t *db, int ms) {
  db->busy_ms = ms < 0 ? 0 : ms;
  sqlite3_busy_timeout(db->h, db->busy_ms);
}

const char *drk_search_db_path(const drk_search_db_t *db) { return db->path; }

bool drk_search_db_begin(drk_search_db_t *db, char *err, size_t n) {
  if (db->in_txn) return db_failf(db, err, n, "a transaction is already open");
  if (exec_retry(db, "BEGIN IMMEDIATE") != SQLITE_OK) return db_fail(db, err, n, "beginning a transaction");
  db->in_txn = true;
  return true;
}

bool drk_search_db_commit(drk_search_db_t *db, char *err, size_t n) {
  if (!db->in_txn) return db_failf(db, err, n, "no transaction to commit");
  if (exec_retry(db, "COMMIT") != SQLITE_OK) {
    db_fail(db, err, n, "committing");
    sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
    db->in_txn = false;
    return false;
  }
  db->in_txn = false;
  return true;
}

bool drk_search_db_rollback(drk_search_db_t *db, char *err, size_t n) {
  if (!db->in_txn) return db_failf(db, err, n, "no transaction to roll back");
  db->in_txn = false;
  if (sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL) != SQLITE_OK) return db_fail(db, err, n, "rolling back");
  return true;
}

/* Runs body inside a transaction of its own unless one is open. */
typedef bool (*txn_body_fn)(drk_search_db_t *db, void *ctx, char *err, size_t n);
static bool in_txn(drk_search_db_t *db, txn_body_fn body, void *ctx, char *err, size_t n) {
  if (db->in_txn) return body(db, ctx, err, n);
  if (exec_retry(db, "BEGIN IMMEDIATE") != SQLITE_OK) return db_fail(db, err, n, "beginning a transaction");
  db->in_txn = true; /* puts inside body join this transaction */
  bool ok = body(db, ctx, err, n);
  db->in_txn = false;
  if (!ok) {
    sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
    return false;
  }
  if (exec_retry(db, "COMMIT") != SQLITE_OK) {
    db_fail(db, err, n, "committing");
    sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
    return false;
  }
  return true;
}

/* ---- puts ---- */
static bool check_key(drk_search_db_t *db, const char *what, const char *key, size_t len, char *err, size_t n) {
  if (!key || strlen(key) != len || strspn(key, "0123456789abcdef") != len)
    return db_failf(db, err, n, "%s key '%s' is not %zu hex digits", what, key ? key : "", len);
  return true;
}

typedef struct put_workload_ctx {
  const char *key, *kind, *desc;
} put_workload_ctx_t;

static bool put_workload_body(drk_search_db_t *db, void *vctx, char *err, size_t n) {
  put_workload_ctx_t *c = vctx;
  sqlite3_stmt *st;
  if (!prepare(db,
               "INSERT INTO workloads(key, kind, description, first_seen) VALUES (?1, ?2, ?3, ?4) "
               "ON CONFLICT(key) DO UPDATE SET description = excluded.description, kind = excluded.kind "
               "WHERE workloads.description = '' AND excluded.description != ''",
               &st, err, n))
    return false;
  bind_text(st, 1, c->key);
  bind_text(st, 2, c->kind);
  bind_text(st, 3, c->desc);
  sqlite3_bind_int64(st, 4, (sqlite3_int64)time(NULL));
  int rc = step_retry(db, st);
  sqlite3_finalize(st);
  return rc == SQLITE_DONE || db_fail(db, err, n, "storing a workload");
}

bool drk_search_db_put_workload(drk_search_db_t *db, const char *key, const char *kind, const char *description,
                                char *err, size_t n) {
  if (!check_key(db, "workload", key, 32, err, n)) return false;
  put_workload_ctx_t c = {key, kind, description};
  return in_txn(db, put_workload_body, &c, err, n);
}

typedef struct put_target_ctx {
  const drk_search_target_t *t;
  const char *key, *fp;
} put_target_ctx_t;

static bool put_target_body(drk_search_db_t *db, void *vctx, char *err, size_t n) {
  put_target_ctx_t *c = vctx;
  sqlite3_stmt *st;
  if (!prepare(db,
               "INSERT OR IGNORE INTO targets(key, fingerprint, arch, sms, sm_mhz, mem_mhz, bw_gbs, l2_bytes, driver, "
               "cuda, name, first_seen) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
               &st, err, n))
    return false;
  const drk_search_target_t *t = c->t;
  bind_text(st, 1, c->key);
  bind_text(st, 2, c->fp);
  bind_text(st, 3, t->arch);
  sqlite3_bind_int(st, 4, t->sms);
  sqlite3_bind_int(st, 5, t->sm_mhz);
  sqlite3_bind_int(st, 6, t->mem_mhz);
  sqlite3_bind_double(st, 7, t->bw_gbs);
  sqlite3_bind_int64(st, 8, t->l2_bytes);
  bind_text(st, 9, t->driver);
  bind_text(st, 10, t->cuda);
  bind_text(st, 11, t->name);
  sqlite3_bind_int64(st, 12, (sqlite3_int64)time(NULL));
  int rc = step_retry(db, st);
  sqlite3_finalize(st);
  return rc == SQLITE_DONE || db_fail(db, err, n, "storing a target");
}

bool drk_search_db_put_target(drk_search_db_t *db, const drk_search_target_t *t, char out_key[17], char *err,
                              size_t n) {
  char key[17], fp[512];
  drk_search_target_key(t, key);
  drk_search_target_format(t, fp, sizeof fp);
  put_target_ctx_t c = {t, key, fp};
  if (!in_txn(db, put_target_body, &c, err, n)) return false;
  if (out_key) memcpy(out_key, key, 17);
  return true;
}

static void make_uid(const drk_search_record_t *r, char out[33]) {
  static uint64_t counter;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t parts[4] = {(uint64_t)ts.tv_sec, (uint64_t)ts.tv_nsec, (uint64_t)getpid(), ++counter};
  uint64_t a = drk_hash_fnv1a(parts, sizeof parts, 0xcbf29ce484222325ull);
  uint64_t b = drk_hash_fnv1a(parts, sizeof parts, 0x84222325cbf29ce4ull);
  a = drk_hash_fnv1a(r->host, strlen(r->host), a);
  b = drk_hash_fnv1a(r->schedule, strlen(r->schedule), b);
  b = drk_hash_fnv1a(r->workload, strlen(r->workload), b);
  snprintf(out, 33, "%016llx%016llx", (unsigned long long)a, (unsigned long long)b);
}

static bool insert_record(drk_search_db_t *db, drk_search_record_t *r, bool *out_added, char *err, size_t n) {
  sqlite3_stmt *st;
  if (!prepare(db,
               "INSERT OR IGNORE INTO records(" RECORD_DATA_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, "
               "?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27)",
               &st, err, n))
    return false;
  int c = 1;
  char tags[sizeof r->tags + 2];
  tags_to_db(r->tags, tags, sizeof tags);
  bind_text(st, c++, r->uid);
  bind_text(st, c++, r->workload);
  bind_text(st, c++, r->target);
  bind_text(st, c++, r->kernel);
  bind_text(st, c++, r->schedule);
  sqlite3_bind_int(st, c++, r->valid);
  bind_text(st, c++, r->reason);
  bind_real_known(st, c++, r->time_us);
  bind_real_known(st, c++, r->tflops);
  bind_real_known(st, c++, r->gbs);
  bind_real_known(st, c++, r->energy_j);
  bind_real_known(st, c++, r->mem_bytes);
  bind_real_known(st, c++, r->error);
  sqlite3_bind_double(st, c++, isfinite(r->reward) ? r->reward : 0);
  for (int i = 0; i < 4; i++) sqlite3_bind_double(st, c++, r->weights[i]);
  bind_text(st, c++, r->drkc_version);
  bind_text(st, c++, r->host);
  sqlite3_bind_int64(st, c++, r->created);
  bind_text(st, c++, r->model);
  bind_text(st, c++, r->user);
  bind_text(st, c++, tags);
  sqlite3_bind_int(st, c++, r->stable && r->valid);
  bind_text(st, c++, r->policy);
  sqlite3_bind_int(st, c++, r->trial);
  int rc = step_retry(db, st);
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) {
    if ((rc & 0xff) == SQLITE_CONSTRAINT)
      return db_failf(db, err, n, "record of workload %s / target %s: %s (store the workload and target first)",
                      r->workload, r->target, sqlite3_errmsg(db->h));
    return db_fail(db, err, n, "storing a record");
  }
  *out_added = sqlite3_changes(db->h) > 0;
  if (*out_added) {
    r->id = sqlite3_last_insert_rowid(db->h);
    return true;
  }
  if (!prepare(db, "SELECT id FROM records WHERE uid = ?1", &st, err, n)) return false;
  bind_text(st, 1, r->uid);
  rc = step_retry(db, st);
  r->id = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
  sqlite3_finalize(st);
  return true;
}

typedef struct put_record_ctx {
  drk_search_record_t *r;
  bool added;
} put_record_ctx_t;

static bool put_record_body(drk_search_db_t *db, void *vctx, char *err, size_t n) {
  put_record_ctx_t *c = vctx;
  return insert_record(db, c->r, &c->added, err, n);
}

static bool check_tags(drk_search_db_t *db, const char *tags, char *err, size_t n) {
  for (const char *p = tags; *p; p++)
    if (!(isalnum((unsigned char)*p) || strchr("_.=:+-/,", *p)))
      return db_failf(db, err, n, "tag text '%s': letters, digits and _ . = : + - / only (commas between tags)", tags);
  return true;
}

bool drk_search_db_put_record(drk_search_db_t *db, drk_search_record_t *r, char *err, size_t n) {
  if (!check_key(db, "workload", r->workload, 32, err, n) || !check_key(db, "target", r->target, 16, err, n) ||
      !check_tags(db, r->tags, err, n))
    return false;
  if (!r->schedule[0]) return db_failf(db, err, n, "a record needs its schedule text");
  if (!r->drkc_version[0]) return db_failf(db, err, n, "a record needs its drkc version");
  if (!r->uid[0]) make_uid(r, r->uid);
  put_record_ctx_t c = {r, false};
  return in_txn(db, put_record_body, &c, err, n);
}

static bool exec_one_id(drk_search_db_t *db, const char *sql, int64_t id, const char *text, char *err, size_t n,
                        int *changes) {
  sqlite3_stmt *st;
  if (!prepare(db, sql, &st, err, n)) return false;
  sqlite3_bind_int64(st, 1, id);
  if (text) bind_text(st, 2, text);
  int rc = step_retry(db, st);
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return db_fail(db, err, n, "updating a record");
  *changes = sqlite3_changes(db->h);
  return true;
}

bool drk_search_db_set_stable(drk_search_db_t *db, int64_t id, bool stable, char *err, size_t n) {
  int ch;
  if (!exec_one_id(db, stable ? "UPDATE records SET stable = 1 WHERE id = ?1 AND valid = 1"
                              : "UPDATE records SET stable = 0 WHERE id = ?1",
                   id, NULL, err, n, &ch))
    return false;
  if (ch == 0) {
    sqlite3_stmt *st;
    if (!prepare(db, "SELECT valid FROM records WHERE id = ?1", &st, err, n)) return false;
    sqlite3_bind_int64(st, 1, id);
    int rc = step_retry(db, st);
    bool exists = rc == SQLITE_ROW;
    sqlite3_finalize(st);
    return exists ? db_failf(db, err, n, "record %lld is invalid: it cannot be stable", (long long)id)
                  : db_failf(db, err, n, "no record %lld", (long long)id);
  }
  return true;
}

bool drk_search_db_tag(drk_search_db_t *db, int64_t id, const char *tag, bool remove, char *err, size_t n) {
  if (!tag || !*tag || strchr(tag, ',')) return db_failf(db, err, n, "a tag is one non-empty word without commas");
  if (!check_tags(db, tag, err, n)) return false;
  char wrapped[300];
  snprintf(wrapped, sizeof wrapped, ",%s,", tag);
  int ch;
  /* tags are ",a,b,": adding appends ",tag," minus one comma; removing cuts ",tag" */
  const char *sql = remove ? "UPDATE records SET tags = CASE WHEN replace(tags, ?2, ',') = ',' THEN '' "
                             "ELSE replace(tags, ?2, ',') END WHERE id = ?1"
                           : "UPDATE records SET tags = CASE WHEN tags = '' THEN ?2 "
                             "WHEN instr(tags, ?2) > 0 THEN tags ELSE tags || substr(?2, 2) END WHERE id = ?1";
  if (!exec_one_id(db, sql, id, wrapped, err, n, &ch)) return false;
  if (ch == 0) return db_failf(db, err, n, "no record %lld", (long long)id);
  return true;
}

/* ---- queries ---- */
static bool query_one(drk_search_db_t *db, const char *sql, const char *a, const char *b, const char *c,
                      drk_search_record_t *out, bool *found, char *err, size_t n) {
  sqlite3_stmt *st;
  if (!prepare(db, sql, &st, err, n)) return false;
  bind_text(st, 1, a);
  bind_text(st, 2, b);
  if (c) bind_text(st, 3, c);
  int rc = step_retry(db, st);
  *found = rc == SQLITE_ROW;
  if (*found) record_from_row(st, out);
  sqlite3_finalize(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return db_fail(db, err, n, "looking up the best record");
  return true;
}

drk_search_db_lookup_t drk_search_db_best(drk_search_db_t *db, const char *workload, const char *target,
                                          const char *drkc_version, drk_search_record_t *out, char *err, size_t n) {
  const char *usable = " valid = 1 AND stable = 1 AND time_us > 0 ";
  char sql[1024];
  bool found;
  drk_search_record_t r;
  snprintf(sql, sizeof sql,
           "SELECT " RECORD_COLS " FROM records WHERE workload = ?1 AND target = ?2 AND drkc_version = ?3 AND %s "
           "ORDER BY " BEST_ORDER " LIMIT 1",
           usable);
  if (!query_one(db, sql, workload, target, drkc_version, &r, &found, err, n)) return DRK_SEARCH_DB_FAILED;
  if (found) {
    *out = r;
    return DRK_SEARCH_DB_FOUND;
  }
  snprintf(sql, sizeof sql,
           "SELECT " RECORD_COLS " FROM records WHERE workload = ?1 AND target = ?2 AND drkc_version != ?3 AND %s "
           "ORDER BY " BEST_ORDER " LIMIT 1",
           usable);
  if (!query_one(db, sql, workload, target, drkc_version, &r, &found, err, n)) return DRK_SEARCH_DB_FAILED;
  if (found) {
    *out = r;
    return DRK_SEARCH_DB_OTHER_VERSION;
  }
  snprintf(sql, sizeof sql,
           "SELECT " RECORD_COLS " FROM records WHERE workload = ?1 AND target != ?2 AND %s "
           "ORDER BY (drkc_version = ?3) DESC, " BEST_ORDER " LIMIT 1",
           usable);
  if (!query_one(db, sql, workload, target, drkc_version, &r, &found, err, n)) return DRK_SEARCH_DB_FAILED;
  if (found) {
    *out = r;
    return DRK_SEARCH_DB_OTHER_TARGET;
  }
  return DRK_SEARCH_DB_NONE;
}

const char *drk_search_db_lookup_name(drk_search_db_lookup_t l) {
  switch (l) {
    case DRK_SEARCH_DB_FOUND: return "found";
    case DRK_SEARCH_DB_NONE: return "none";
    case DRK_SEARCH_DB_OTHER_VERSION: return "other drkc version only";
    case DRK_SEARCH_DB_OTHER_TARGET: return "other target only";
    case DRK_SEARCH_DB_FAILED: return "failed";
  }
  return "?";
}

bool drk_search_db_query(drk_search_db_t *db, const drk_search_query_t *q,
                         bool (*each)(void *ctx, const drk_search_record_t *r), void *ctx, char *err, size_t n) {
  char sql[2048];
  int w = snprintf(sql, sizeof sql, "SELECT " RECORD_COLS " FROM records WHERE 1");
  const char *binds[6];
  int nb = 0;
#define ADD(cond, val)                                                  \
  do {                                                                  \
    w += snprintf(sql + w, sizeof sql - (size_t)w, " AND " cond, nb + 1); \
    binds[nb++] = (val);                                                \
  } while (0)
  if (q && q->workload) ADD("workload = ?%d", q->workload);
  if (q && q->target) ADD("target = ?%d", q->target);
  if (q && q->drkc_version) ADD("drkc_version = ?%d", q->drkc_version);
  if (q && q->tag) ADD("instr(tags, ',' || ?%d || ',') > 0", q->tag);
  if (q && q->kind) ADD("workload IN (SELECT key FROM workloads WHERE kind = ?%d)", q->kind);
#undef ADD
  if (q && q->valid_only) w += snprintf(sql + w, sizeof sql - (size_t)w, " AND valid = 1");
  if (q && q->stable_only) w += snprintf(sql + w, sizeof sql - (size_t)w, " AND stable = 1");
  if (q && q->id > 0) w += snprintf(sql + w, sizeof sql - (size_t)w, " AND id = %lld", (long long)q->id);
  w += snprintf(sql + w, sizeof sql - (size_t)w, " ORDER BY %s", q && q->best_first ? BEST_ORDER : "id ASC");
  if (q && q->limit > 0) snprintf(sql + w, sizeof sql - (size_t)w, " LIMIT %ld", q->limit);
  sqlite3_stmt *st;
  if (!prepare(db, sql, &st, err, n)) return false;
  for (int i = 0; i < nb; i++) bind_text(st, i + 1, binds[i]);
  int rc;
  while ((rc = step_retry(db, st)) == SQLITE_ROW) {
    drk_search_record_t r;
    record_from_row(st, &r);
    if (!each(ctx, &r)) {
      rc = SQLITE_DONE;
      break;
    }
  }
  sqlite3_finalize(st);
  return rc == SQLITE_DONE || db_fail(db, err, n, "reading records");
}

bool drk_search_db_workload(drk_search_db_t *db, const char *key, char *kind, size_t kind_n, char *desc,
                            size_t desc_n) {
  sqlite3_stmt *st;
  char err[16];
  if (!prepare(db, "SELECT kind, description FROM workloads WHERE key = ?1", &st, err, sizeof err)) return false;
  bind_text(st, 1, key);
  bool found = step_retry(db, st) == SQLITE_ROW;
  if (found) {
    if (kind) col_text(st, 0, kind, kind_n);
    if (desc) col_text(st, 1, desc, desc_n);
  }
  sqlite3_finalize(st);
  return found;
}

bool drk_search_db_target(drk_search_db_t *db, const char *key, drk_search_target_t *out) {
  sqlite3_stmt *st;
  char err[600];
  if (!prepare(db, "SELECT fingerprint FROM targets WHERE key = ?1", &st, err, sizeof err)) return false;
  bind_text(st, 1, key);
  bool found = step_retry(db, st) == SQLITE_ROW;
  char fp[512] = "";
  if (found) col_text(st, 0, fp, sizeof fp);
  sqlite3_finalize(st);
  return found && drk_search_target_parse(fp, out, err, sizeof err);
}

bool drk_search_db_workloads(drk_search_db_t *db, bool (*each)(void *ctx, const char *key, const char *kind,
                                                               const char *desc),
                             void *ctx, char *err, size_t n) {
  sqlite3_stmt *st;
  if (!prepare(db, "SELECT key, kind, description FROM workloads ORDER BY first_seen, key", &st, err, n)) return false;
  int rc;
  while ((rc = step_retry(db, st)) == SQLITE_ROW)
    if (!each(ctx, (const char *)sqlite3_column_text(st, 0), (const char *)sqlite3_column_text(st, 1),
              (const char *)sqlite3_column_text(st, 2))) {
      rc = SQLITE_DONE;
      break;
    }
  sqlite3_finalize(st);
  return rc == SQLITE_DONE || db_fail(db, err, n, "reading workloads");
}

/* ---- export / import ---- */
typedef struct export_ctx {
  drk_search_db_t *db;
  FILE *out;
} export_ctx_t;

static bool export_one(void *vctx, const drk_search_record_t *r) {
  export_ctx_t *c = vctx;
  FILE *o = c->out;
  char kind[64] = "", desc[1024] = "", fp[512] = "";
  drk_search_db_workload(c->db, r->workload, kind, sizeof kind, desc, sizeof desc);
  drk_search_target_t t;
  if (drk_search_db_target(c->db, r->target, &t)) drk_search_target_format(&t, fp, sizeof fp);
  fputs("{\"uid\":", o);
  drk_json_str(o, r->uid);
  fputs(",\"workload\":", o);
  drk_json_str(o, r->workload);
  fputs(",\"kind\":", o);
  drk_json_str(o, kind);
  fputs(",\"description\":", o);
  drk_json_str(o, desc);
  fputs(",\"target\":", o);
  drk_json_str(o, r->target);
  fputs(",\"fingerprint\":", o);
  drk_json_str(o, fp);
  fputs(",\"kernel\":", o);
  drk_json_str(o, r->kernel);
  fputs(",\"schedule\":", o);
  drk_json_str(o, r->schedule);
  fprintf(o, ",\"valid\":%s,\"reason\":", r->valid ? "true" : "false");
  drk_json_str(o, r->reason);
  static const char *names[] = {"time_us", "tflops", "gbs", "energy_j", "mem_bytes", "error"};
  const double vals[] = {r->time_us, r->tflops, r->gbs, r->energy_j, r->mem_bytes, r->error};
  for (int i = 0; i < 6; i++) {
    fprintf(o, ",\"%s\":", names[i]);
    drk_json_num_known(o, vals[i]);
  }
  fputs(",\"reward\":", o);
  drk_json_num(o, r->reward);
  fputs(",\"weights\":[", o);
  for (int i = 0; i < 4; i++) {
    if (i) fputc(',', o);
    drk_json_num(o, r->weights[i]);
  }
  fputs("],\"drkc_version\":", o);
  drk_json_str(o, r->drkc_version);
  fputs(",\"host\":", o);
  drk_json_str(o, r->host);
  fprintf(o, ",\"created\":%lld,\"model\":", (long long)r->created);
  drk_json_str(o, r->model);
  fputs(",\"user\":", o);
  drk_json_str(o, r->user);
  fputs(",\"tags\":", o);
  drk_json_str(o, r->tags);
  fprintf(o, ",\"stable\":%s,\"policy\":", r->stable ? "true" : "false");
  drk_json_str(o, r->policy);
  fprintf(o, ",\"trial\":%d}\n", r->trial);
  return !ferror(o);
}

bool drk_search_db_export(drk_search_db_t *db, const drk_search_query_t *q, FILE *out, char *err, size_t n) {
  export_ctx_t c = {db, out};
  if (!drk_search_db_query(db, q, export_one, &c, err, n)) return false;
  if (fflush(out) != 0 || ferror(out)) {
    snprintf(err, n, "writing the export: %s", strerror(errno));
    return false;
  }
  return true;
}

/* A string field of o into dst (cap); required: missing is an error. */
static bool jfield_str(const drk_json_object_t *o, const char *key, bool required, char *dst, size_t cap, char *why,
                       size_t n) {
  const drk_json_field_t *f = drk_json_get(o, key);
  if (!f || f->kind == DRK_JSON_NULL) {
    if (required) {
      snprintf(why, n, "missing \"%s\"", key);
      return false;
    }
    dst[0] = 0;
    return true;
  }
  if (f->kind != DRK_JSON_STR) {
    snprintf(why, n, "\"%s\" is not a string", key);
    return false;
  }
  if (strlen(f->str) >= cap) {
    snprintf(why, n, "\"%s\" is longer than %zu characters", key, cap - 1);
    return false;
  }
  snprintf(dst, cap, "%s", f->str);
  return true;
}

static bool jfield_num(const drk_json_object_t *o, const char *key, double *dst, char *why, size_t n) {
  const drk_json_field_t *f = drk_json_get(o, key);
  if (!f || f->kind == DRK_JSON_NULL) {
    *dst = -1;
    return true;
  }
  if (f->kind != DRK_JSON_NUM) {
    snprintf(why, n, "\"%s\" is not a number", key);
    return false;
  }
  *dst = f->num;
  return true;
}

static bool jfield_bool(const drk_json_object_t *o, const char *key, bool required, bool *dst, char *why, size_t n) {
  const drk_json_field_t *f = drk_json_get(o, key);
  if (!f) {
    if (required) {
      snprintf(why, n, "missing \"%s\"", key);
      return false;
    }
    *dst = false;
    return true;
  }
  if (f->kind != DRK_JSON_BOOL) {
    snprintf(why, n, "\"%s\" is not true or false", key);
    return false;
  }
  *dst = f->b;
  return true;
}

typedef struct import_ctx {
  FILE *in;
  const char *path;
  long added, skipped;
} import_ctx_t;

/* One exported line into the database. */
static bool import_line(drk_search_db_t *db, const drk_json_object_t *o, bool *added, char *why, size_t n) {
  static const char *known[] = {"uid",      "workload", "kind",     "description", "target",    "fingerprint",
                                "kernel",   "schedule", "valid",    "reason",      "time_us",   "tflops",
                                "gbs",      "energy_j", "mem_bytes", "error",      "reward",    "weights",
                                "drkc_version", "host", "created",  "model",       "user",      "tags",
                                "stable",   "policy",   "trial"};
  for (int i = 0; i < o->n; i++) {
    bool ok = false;
    for (size_t k = 0; k < sizeof known / sizeof known[0] && !ok; k++) ok = !strcmp(o->f[i].key, known[k]);
    if (!ok) {
      snprintf(why, n, "unknown field \"%s\"", o->f[i].key);
      return false;
    }
  }
  drk_search_record_t r;
  memset(&r, 0, sizeof r);
  char kind[64], desc[1024], fp[512];
  double reward, created, trial;
  if (!jfield_str(o, "uid", true, r.uid, sizeof r.uid, why, n)) return false;
  if (strlen(r.uid) != 32 || strspn(r.uid, "0123456789abcdef") != 32) {
    snprintf(why, n, "\"uid\" '%s' is not 32 hex digits", r.uid);
    return false;
  }
  if (!jfield_str(o, "workload", true, r.workload, sizeof r.workload, why, n) ||
      !jfield_str(o, "kind", false, kind, sizeof kind, why, n) ||
      !jfield_str(o, "description", false, desc, sizeof desc, why, n) ||
      !jfield_str(o, "target", true, r.target, sizeof r.target, why, n) ||
      !jfield_str(o, "fingerprint", true, fp, sizeof fp, why, n) ||
      !jfield_str(o, "kernel", false, r.kernel, sizeof r.kernel, why, n) ||
      !jfield_str(o, "schedule", true, r.schedule, sizeof r.schedule, why, n) ||
      !jfield_bool(o, "valid", true, &r.valid, why, n) ||
      !jfield_str(o, "reason", false, r.reason, sizeof r.reason, why, n) ||
      !jfield_num(o, "time_us", &r.time_us, why, n) || !jfield_num(o, "tflops", &r.tflops, why, n) ||
      !jfield_num(o, "gbs", &r.gbs, why, n) || !jfield_num(o, "energy_j", &r.energy_j, why, n) ||
      !jfield_num(o, "mem_bytes", &r.mem_bytes, why, n) || !jfield_num(o, "error", &r.error, why, n) ||
      !jfield_num(o, "reward", &reward, why, n) ||
      !jfield_str(o, "drkc_version", true, r.drkc_version, sizeof r.drkc_version, why, n) ||
      !jfield_str(o, "host", false, r.host, sizeof r.host, why, n) || !jfield_num(o, "created", &created, why, n) ||
      !jfield_str(o, "model", false, r.model, sizeof r.model, why, n) ||
      !jfield_str(o, "user", false, r.user, sizeof r.user, why, n) ||
      !jfield_str(o, "tags", false, r.tags, sizeof r.tags, why, n) ||
      !jfield_bool(o, "stable", false, &r.stable, why, n) ||
      !jfield_str(o, "policy", false, r.policy, sizeof r.policy, why, n) || !jfield_num(o, "trial", &trial, why, n))
    return false;
  r.reward = reward;
  r.created = created < 0 ? 0 : (int64_t)created;
  r.trial = trial < 0 ? 0 : (int)trial;
  const drk_json_field_t *wf = drk_json_get(o, "weights");
  if (wf && wf->kind != DRK_JSON_NULL) {
    if (wf->kind != DRK_JSON_ARRAY || wf->n_array != 4) {
      snprintf(why, n, "\"weights\" is not an array of 4 numbers");
      return false;
    }
    for (int i = 0; i < 4; i++) r.weights[i] = wf->array[i];
  }
  drk_search_target_t t;
  char e[600];
  if (!drk_search_target_parse(fp, &t, e, sizeof e)) {
    snprintf(why, n, "\"fingerprint\": %s", e);
    return false;
  }
  char key[17];
  drk_search_target_key(&t, key);
  if (strcmp(key, r.target) != 0) {
    snprintf(why, n, "\"target\" %s is not the key of its fingerprint (%s)", r.target, key);
    return false;
  }
  if (r.stable && !r.valid) {
    snprintf(why, n, "an invalid record marked stable");
    return false;
  }
  if (!drk_search_db_put_workload(db, r.workload, kind, desc, e, sizeof e) ||
      !drk_search_db_put_target(db, &t, NULL, e, sizeof e) || !insert_record(db, &r, added, e, sizeof e)) {
    snprintf(why, n, "%s", e);
    return false;
  }
  return true;
}

static bool import_body(drk_search_db_t *db, void *vctx, char *err, size_t n) {
  import_ctx_t *c = vctx;
  size_t cap = 4096;
  char *line = malloc(cap);
  if (!line) return db_failf(db, err, n, "out of memory");
  long lineno = 0;
  bool ok = true;
  for (;;) {
    size_t len = 0;
    int ch;
    while ((ch = fgetc(c->in)) != EOF && ch != '\n') {
      if (len + 2 > cap) {
        char *nl = realloc(line, cap *= 2);
        if (!nl) {
          free(line);
          return db_failf(db, err, n, "out of memory");
        }
        line = nl;
      }
      line[len++] = (char)ch;
    }
    if (ch == EOF && len == 0) break;
    line[len] = 0;
    lineno++;
    char *s = line;
    while (*s == ' ' || *s == '\t' || *s == '\r') s++;
    if (!*s) continue;
    if (strlen(s) != len - (size_t)(s - line)) {
      snprintf(err, n, "%s:%ld: error: a NUL byte in the line", c->path, lineno);
      ok = false;
      break;
    }
    drk_json_object_t o;
    char why[700];
    if (!drk_json_parse_object(s, &o, why, sizeof why)) {
      snprintf(err, n, "%s:%ld: error: not a JSON object: %s", c->path, lineno, why);
      ok = false;
      break;
    }
    bool added = false;
    bool lok = import_line(db, &o, &added, why, sizeof why);
    drk_json_object_free(&o);
    if (!lok) {
      snprintf(err, n, "%s:%ld: error: %s", c->path, lineno, why);
      ok = false;
      break;
    }
    if (added) c->added++;
    else c->skipped++;
  }
  if (ok && ferror(c->in)) {
    snprintf(err, n, "%s: error: read failed: %s", c->path, strerror(errno));
    ok = false;
  }
  free(line);
  return ok;
}

bool drk_search_db_import(drk_search_db_t *db, FILE *in, const char *path, long *out_added, long *out_skipped,
                          char *err, size_t n) {
  import_ctx_t c = {in, path, 0, 0};
  if (!in_txn(db, import_body, &c, err, n)) return false;
  if (out_added) *out_added = c.added;
  if (out_skipped) *out_skipped = c.skipped;
  return true;
}

/* ---- merge / prune ---- */
typedef struct merge_ctx {
  long added, skipped;
} merge_ctx_t;

static bool merge_body(drk_search_db_t *db, void *vctx, char *err, size_t n) {
  merge_ctx_t *c = vctx;
  if (exec_retry(db,
                 "INSERT INTO workloads(key, kind, description, first_seen) "
                 "SELECT key, kind, description, first_seen FROM other.workloads WHERE true "
                 "ON CONFLICT(key) DO UPDATE SET first_seen = min(workloads.first_seen, excluded.first_seen), "
                 "description = CASE WHEN workloads.description = '' THEN excluded.description "
                 "ELSE workloads.description END, "
                 "kind = CASE WHEN workloads.kind = '' THEN excluded.kind ELSE workloads.kind END") != SQLITE_OK ||
      exec_retry(db, "INSERT OR IGNORE INTO targets SELECT * FROM other.targets") != SQLITE_OK)
    return db_fail(db, err, n, "merging workloads and targets");
  sqlite3_stmt *st;
  if (!prepare(db, "SELECT count(*) FROM other.records", &st, err, n)) return false;
  long total = step_retry(db, st) == SQLITE_ROW ? (long)sqlite3_column_int64(st, 0) : 0;
  sqlite3_finalize(st);
  if (exec_retry(db, "INSERT OR IGNORE INTO records(" RECORD_DATA_COLS ") SELECT " RECORD_DATA_COLS
                     " FROM other.records ORDER BY id") != SQLITE_OK)
    return db_fail(db, err, n, "merging records");
  c->added = sqlite3_changes(db->h);
  c->skipped = total - c->added;
  /* a record confirmed (stable) in either database is stable in the union */
  if (exec_retry(db, "UPDATE records SET stable = 1 WHERE stable = 0 AND valid = 1 AND uid IN "
                     "(SELECT uid FROM other.records WHERE stable = 1)") != SQLITE_OK)
    return db_fail(db, err, n, "merging stable flags");
  return true;
}

bool drk_search_db_merge(drk_search_db_t *db, const char *other_path, long *out_added, long *out_skipped, char *err,
                         size_t n) {
  if (db->in_txn) return db_failf(db, err, n, "merge inside an open transaction");
  char a[PATH_MAX], b[PATH_MAX];
  if (realpath(db->path, a) && realpath(other_path, b) && !strcmp(a, b))
    return db_failf(db, err, n, "merging a database into itself");
  /* the other file is checked (and its WAL applied) by opening it as a database first */
  drk_search_db_t *other;
  if (!drk_search_db_open(other_path, true, &other, err, n)) return false;
  drk_search_db_close(other);
  sqlite3_stmt *st;
  if (!prepare(db, "ATTACH DATABASE ?1 AS other", &st, err, n)) return false;
  bind_text(st, 1, other_path);
  int rc = step_retry(db, st);
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return db_fail(db, err, n, "attaching the other database");
  merge_ctx_t c = {0, 0};
  bool ok = in_txn(db, merge_body, &c, err, n);
  exec_retry(db, "DETACH DATABASE other");
  if (!ok) return false;
  if (out_added) *out_added = c.added;
  if (out_skipped) *out_skipped = c.skipped;
  return true;
}

typedef struct prune_ctx {
  int keep;
  bool dry_run;
  long deleted;
} prune_ctx_t;

static bool prune_body(drk_search_db_t *db, void *vctx, char *err, size_t n) {
  prune_ctx_t *c = vctx;
  const char *ranked = "(SELECT id FROM (SELECT id, valid, ROW_NUMBER() OVER (PARTITION BY workload, target, "
                       "drkc_version ORDER BY " BEST_ORDER ") AS rk FROM records) WHERE valid = 0 OR rk > ?1)";
  char sql[1024];
  snprintf(sql, sizeof sql, c->dry_run ? "SELECT count(*) FROM %s" : "DELETE FROM records WHERE id IN %s", ranked);
  sqlite3_stmt *st;
  if (!prepare(db, sql, &st, err, n)) return false;
  sqlite3_bind_int(st, 1, c->keep);
  int rc = step_retry(db, st);
  if (c->dry_run && rc == SQLITE_ROW) {
    c->deleted = (long)sqlite3_column_int64(st, 0);
    rc = SQLITE_DONE;
  } else if (rc == SQLITE_DONE) {
    c->deleted = sqlite3_changes(db->h);
  }
  sqlite3_finalize(st);
  return rc == SQLITE_DONE || db_fail(db, err, n, "pruning");
}

bool drk_search_db_prune(drk_search_db_t *db, int keep, bool dry_run, long *out_deleted, char *err, size_t n) {
  if (keep < 1) return db_failf(db, err, n, "prune keeps at least 1 record per key, not %d", keep);
  prune_ctx_t c = {keep, dry_run, 0};
  if (!in_txn(db, prune_body, &c, err, n)) return false;
  if (out_deleted) *out_deleted = c.deleted;
  return true;
}
