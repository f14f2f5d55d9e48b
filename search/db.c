/* The kernel version database (search/db.h): what its backends share, written once (the
 * schema, record validation, uids, the best-record ranking, queries, export/import, merge and
 * sync). The engines are search/db_sqlite.c and search/db_pg.c (db_internal.h); the command
 * line is db_main.c. */
#include "search/db.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ir/support.h"
#include "search/db_internal.h"
#include "search/json.h"

/* The schema, one text for both engines: @ID, @REAL and @I64 become the backend's types
 * (SQLite: INTEGER PRIMARY KEY, REAL, INTEGER; PostgreSQL: an identity BIGINT, DOUBLE
 * PRECISION, BIGINT). "user" is quoted: PostgreSQL reserves the word. */
static const char *schema_template =
    "CREATE TABLE IF NOT EXISTS drkc_meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS workloads("
    "  key TEXT PRIMARY KEY, kind TEXT NOT NULL DEFAULT '', description TEXT NOT NULL DEFAULT '',"
    "  first_seen @I64 NOT NULL);"
    "CREATE TABLE IF NOT EXISTS targets("
    "  key TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, arch TEXT NOT NULL, sms INTEGER, sm_mhz INTEGER,"
    "  mem_mhz INTEGER, bw_gbs @REAL, l2_bytes @I64, driver TEXT, cuda TEXT, name TEXT,"
    "  first_seen @I64 NOT NULL);"
    "CREATE TABLE IF NOT EXISTS records("
    "  id @ID, uid TEXT NOT NULL UNIQUE,"
    "  workload TEXT NOT NULL REFERENCES workloads(key), target TEXT NOT NULL REFERENCES targets(key),"
    "  kernel TEXT NOT NULL DEFAULT '', schedule TEXT NOT NULL,"
    "  valid INTEGER NOT NULL, reason TEXT NOT NULL DEFAULT '',"
    "  time_us @REAL, tflops @REAL, gbs @REAL, energy_j @REAL, mem_bytes @REAL, error @REAL,"
    "  reward @REAL, w_alpha @REAL, w_beta @REAL, w_gamma @REAL, w_delta @REAL,"
    "  drkc_version TEXT NOT NULL, host TEXT NOT NULL DEFAULT '', created @I64 NOT NULL,"
    "  model TEXT NOT NULL DEFAULT '', \"user\" TEXT NOT NULL DEFAULT '', tags TEXT NOT NULL DEFAULT '',"
    "  stable INTEGER NOT NULL DEFAULT 0 CHECK (stable = 0 OR valid = 1),"
    "  policy TEXT NOT NULL DEFAULT '', trial INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX IF NOT EXISTS records_key ON records(workload, target, drkc_version);";

#define RECORD_COLS                                                                                              \
  "id, uid, workload, target, kernel, schedule, valid, reason, time_us, tflops, gbs, energy_j, mem_bytes, error, " \
  "reward, w_alpha, w_beta, w_gamma, w_delta, drkc_version, host, created, model, \"user\", tags, stable, policy, trial"
/* the columns without id, for inserts */
#define RECORD_DATA_COLS                                                                                       \
  "uid, workload, target, kernel, schedule, valid, reason, time_us, tflops, gbs, energy_j, mem_bytes, error, " \
  "reward, w_alpha, w_beta, w_gamma, w_delta, drkc_version, host, created, model, \"user\", tags, stable, policy, trial"
/* best first: the order of drk_search_db_best (and of prune's ranking among valid records);
 * NULLS LAST: a record of unknown time after the timed ones in both engines (PostgreSQL sorts
 * NULL first in a descending order) */
#define BEST_ORDER "valid DESC, stable DESC, (time_us > 0) DESC NULLS LAST, time_us ASC, reward DESC, id ASC"
/* how often a transaction that failed on a serialization failure, a deadlock or a lost
 * connection is run again (within the busy timeout) */
#define TXN_ATTEMPTS 12

bool drk_db_fail(drk_search_db_t *db, char *err, size_t n, const char *what) {
  snprintf(err, n, "%s: %s: %s", db ? db->path : "?", what, db && db->h ? db->be->errmsg(db) : "no database");
  return false;
}

bool drk_db_failf(drk_search_db_t *db, char *err, size_t n, const char *fmt, ...) {
  int w = snprintf(err, n, "%s: ", db->path);
  if (w >= 0 && (size_t)w < n) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + w, n - (size_t)w, fmt, ap);
    va_end(ap);
  }
  return false;
}

void drk_db_sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

int64_t drk_db_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- statements: the backend's, with errors named ---- */
static bool prepare(drk_search_db_t *db, const char *sql, db_stmt_t **st, char *err, size_t n) {
  if (db->be->prepare(db, sql, st)) return true;
  return drk_db_fail(db, err, n, "preparing a statement");
}
static void finalize(db_stmt_t *st) { st->db->be->finalize(st); }
static db_step_t step(db_stmt_t *st) { return st->db->be->step(st); }
static void bind_text(db_stmt_t *st, int i, const char *s) { st->db->be->bind_text(st, i, s ? s : ""); }
static void bind_int(db_stmt_t *st, int i, int64_t v) { st->db->be->bind_int(st, i, v); }
static void bind_real(db_stmt_t *st, int i, double v) { st->db->be->bind_real(st, i, v); }
static void bind_real_known(db_stmt_t *st, int i, double x) {
  if (x < 0 || !isfinite(x)) st->db->be->bind_null(st, i);
  else bind_real(st, i, x);
}
static const char *col_str(db_stmt_t *st, int i) { return st->db->be->col_text(st, i); }
static void col_text(db_stmt_t *st, int i, char *dst, size_t cap) { snprintf(dst, cap, "%s", col_str(st, i)); }
static int64_t col_int(db_stmt_t *st, int i) { return st->db->be->col_int(st, i); }
static double col_real(db_stmt_t *st, int i) { return st->db->be->col_real(st, i); }
static double col_real_known(db_stmt_t *st, int i) { return st->db->be->is_null(st, i) ? -1 : col_real(st, i); }
static bool exec(drk_search_db_t *db, const char *sql) { return db->be->exec(db, sql); }

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

static void record_from_row(db_stmt_t *st, drk_search_record_t *r) {
  memset(r, 0, sizeof *r);
  int c = 0;
  r->id = col_int(st, c++);
  col_text(st, c++, r->uid, sizeof r->uid);
  col_text(st, c++, r->workload, sizeof r->workload);
  col_text(st, c++, r->target, sizeof r->target);
  col_text(st, c++, r->kernel, sizeof r->kernel);
  col_text(st, c++, r->schedule, sizeof r->schedule);
  r->valid = col_int(st, c++) != 0;
  col_text(st, c++, r->reason, sizeof r->reason);
  r->time_us = col_real_known(st, c++);
  r->tflops = col_real_known(st, c++);
  r->gbs = col_real_known(st, c++);
  r->energy_j = col_real_known(st, c++);
  r->mem_bytes = col_real_known(st, c++);
  r->error = col_real_known(st, c++);
  r->reward = col_real(st, c++);
  for (int i = 0; i < 4; i++) r->weights[i] = col_real(st, c++);
  col_text(st, c++, r->drkc_version, sizeof r->drkc_version);
  col_text(st, c++, r->host, sizeof r->host);
  r->created = col_int(st, c++);
  col_text(st, c++, r->model, sizeof r->model);
  col_text(st, c++, r->user, sizeof r->user);
  char tags[sizeof r->tags + 2];
  col_text(st, c++, tags, sizeof tags);
  tags_from_db(tags, r->tags, sizeof r->tags);
  r->stable = col_int(st, c++) != 0;
  col_text(st, c++, r->policy, sizeof r->policy);
  r->trial = (int)col_int(st, c++);
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
bool drk_search_db_is_url(const char *s) {
  if (!s) return false;
  if (!strncmp(s, "postgresql://", 13) || !strncmp(s, "postgres://", 11)) return true;
  /* libpq's key=value form: a known keyword first, no slash before its '=' */
  static const char *const keys[] = {"host=", "hostaddr=", "dbname=", "service=", "port=", "user=", NULL};
  while (*s == ' ') s++;
  for (int i = 0; keys[i]; i++)
    if (!strncmp(s, keys[i], strlen(keys[i]))) return true;
  return false;
}

/* The name messages give a database: a URL's password (user:PASSWORD@, password=...) hidden. */
static void display_name(const char *where, char *dst, size_t cap) {
  snprintf(dst, cap, "%s", where);
  if (!drk_search_db_is_url(where)) return;
  char *scheme = strstr(dst, "://");
  if (scheme) {
    char *auth = scheme + 3, *end = auth + strcspn(auth, "/?");
    char *at = NULL;
    for (char *p = auth; p < end; p++)
      if (*p == '@') at = p;
    char *colon = at ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
    if (colon) memmove(colon, at, strlen(at) + 1);
  }
  for (char *p = dst; (p = strstr(p, "password=")) != NULL;) {
    p += 9;
    size_t len = strcspn(p, "& ");
    if (len) {
      memmove(p + 3, p + len, strlen(p + len) + 1);
      memcpy(p, "***", 3);
    }
  }
}

/* The schema text with the backend's types. */
static void schema_sql_for(const db_backend_t *be, char *dst, size_t cap) {
  size_t w = 0;
  for (const char *s = schema_template; *s && w + 1 < cap;) {
    const char *rep = NULL;
    size_t skip = 0;
    if (!strncmp(s, "@ID", 3)) rep = be->id_type, skip = 3;
    else if (!strncmp(s, "@REAL", 5)) rep = be->real_type, skip = 5;
    else if (!strncmp(s, "@I64", 4)) rep = be->i64_type, skip = 4;
    if (rep) {
      w += (size_t)snprintf(dst + w, cap - w, "%s", rep);
      if (w >= cap) w = cap - 1;
      s += skip;
    } else {
      dst[w++] = *s++;
    }
  }
  dst[w] = 0;
}

bool drk_search_db_open(const char *path, bool readonly, drk_search_db_t **out, char *err, size_t n) {
  const db_backend_t *be = &drk_db_sqlite;
  if (drk_search_db_is_url(path)) {
#ifdef DRK_HAVE_POSTGRES
    be = &drk_db_pg;
#else
    char name[PATH_MAX];
    display_name(path, name, sizeof name);
    snprintf(err, n,
             "%s: this drkc was built without PostgreSQL: postgresql:// URLs need a build with libpq (install "
             "libpq-dev and configure with -DDRK_POSTGRES=ON)",
             name);
    return false;
#endif
  }
  drk_search_db_t *db = calloc(1, sizeof *db);
  if (!db) {
    snprintf(err, n, "%s: out of memory", path);
    return false;
  }
  db->be = be;
  snprintf(db->where, sizeof db->where, "%s", path);
  display_name(path, db->path, sizeof db->path);
  db->readonly = readonly;
  db->busy_ms = 30000;
  char schema[4096];
  schema_sql_for(be, schema, sizeof schema);
  if (!be->open(db, path, schema, err, n)) {
    drk_search_db_close(db);
    return false;
  }
  *out = db;
  return true;
}

void drk_search_db_close(drk_search_db_t *db) {
  if (!db) return;
  if (db->in_txn && db->h) exec(db, "ROLLBACK");
  db->be->close(db);
  free(db);
}

void drk_search_db_set_busy_timeout(drk_search_db_t *db, int ms) {
  db->busy_ms = ms < 0 ? 0 : ms;
  db->be->set_busy_timeout(db, db->busy_ms);
}

const char *drk_search_db_path(const drk_search_db_t *db) { return db->path; }
const char *drk_search_db_backend(const drk_search_db_t *db) { return db->be->name; }
long drk_search_db_retries(const drk_search_db_t *db) { return db->retries; }

bool drk_search_db_begin(drk_search_db_t *db, char *err, size_t n) {
  if (db->in_txn) return drk_db_failf(db, err, n, "a transaction is already open");
  if (!exec(db, db->be->begin_sql)) return drk_db_fail(db, err, n, "beginning a transaction");
  db->in_txn = true;
  return true;
}

bool drk_search_db_commit(drk_search_db_t *db, char *err, size_t n) {
  if (!db->in_txn) return drk_db_failf(db, err, n, "no transaction to commit");
  db->in_txn = false;
  if (!exec(db, "COMMIT")) {
    drk_db_fail(db, err, n, "committing");
    exec(db, "ROLLBACK");
    return false;
  }
  return true;
}

bool drk_search_db_rollback(drk_search_db_t *db, char *err, size_t n) {
  if (!db->in_txn) return drk_db_failf(db, err, n, "no transaction to roll back");
  db->in_txn = false;
  if (!exec(db, "ROLLBACK")) return drk_db_fail(db, err, n, "rolling back");
  return true;
}

/* Runs body inside a transaction of its own unless one is open. A transaction of its own that
 * fails where running it again may succeed (the backend says: a serialization failure or a
 * deadlock between writers, a lost connection) is rolled back and run again, up to
 * TXN_ATTEMPTS times within the busy timeout: a body starts from its ctx as given each time
 * (it resets what it counts). Inside the caller's transaction the error goes to the caller. */
typedef bool (*txn_body_fn)(drk_search_db_t *db, void *ctx, char *err, size_t n);
static bool in_txn(drk_search_db_t *db, txn_body_fn body, void *ctx, char *err, size_t n) {
  if (db->in_txn) return body(db, ctx, err, n);
  int64_t deadline = drk_db_now_ms() + db->busy_ms;
  unsigned jitter = (unsigned)getpid();
  for (int attempt = 1;; attempt++) {
    db->retry = false;
    bool ok;
    if (!exec(db, db->be->begin_sql)) {
      ok = drk_db_fail(db, err, n, "beginning a transaction");
    } else {
      db->in_txn = true; /* puts inside body join this transaction */
      ok = body(db, ctx, err, n);
      db->in_txn = false;
      if (ok && exec(db, "COMMIT")) return true;
      if (ok) ok = drk_db_fail(db, err, n, "committing");
      bool retry = db->retry;
      exec(db, "ROLLBACK");
      db->retry = retry;
    }
    if (!db->retry || attempt >= TXN_ATTEMPTS || drk_db_now_ms() > deadline) return false;
    db->retries++;
    jitter = jitter * 1103515245u + 12345u;
    int base = 5 << (attempt < 7 ? attempt : 7);
    drk_db_sleep_ms(base + (int)(jitter % (unsigned)base));
  }
}

/* ---- puts ---- */
static bool check_key(drk_search_db_t *db, const char *what, const char *key, size_t len, char *err, size_t n) {
  if (!key || strlen(key) != len || strspn(key, "0123456789abcdef") != len)
    return drk_db_failf(db, err, n, "%s key '%s' is not %zu hex digits", what, key ? key : "", len);
  return true;
}

typedef struct put_workload_ctx {
  const char *key, *kind, *desc;
  int64_t first_seen;
} put_workload_ctx_t;

/* A new key is added; a known one gets a description and kind when it had none, and the
 * earlier first_seen (a merge brings another database's). */
static bool put_workload_body(drk_search_db_t *db, void *vctx, char *err, size_t n) {
  put_workload_ctx_t *c = vctx;
  db_stmt_t *st;
  char sql[768];
  snprintf(sql, sizeof sql,
           "INSERT INTO workloads(key, kind, description, first_seen) VALUES (?1, ?2, ?3, ?4) "
           "ON CONFLICT(key) DO UPDATE SET "
           "description = CASE WHEN workloads.description = '' THEN excluded.description "
           "ELSE workloads.description END, "
           "kind = CASE WHEN workloads.description = '' AND excluded.description != '' THEN excluded.kind "
           "WHEN workloads.kind = '' THEN excluded.kind ELSE workloads.kind END, "
           "first_seen = %s(workloads.first_seen, excluded.first_seen) "
           "WHERE (workloads.description = '' AND excluded.description != '') OR (workloads.kind = '' AND "
           "excluded.kind != '') OR excluded.first_seen < workloads.first_seen",
           db->be->least);
  if (!prepare(db, sql, &st, err, n)) return false;
  bind_text(st, 1, c->key);
  bind_text(st, 2, c->kind);
  bind_text(st, 3, c->desc);
  bind_int(st, 4, c->first_seen);
  db_step_t rc = step(st);
  finalize(st);
  return rc == DB_DONE || drk_db_fail(db, err, n, "storing a workload");
}

static bool put_workload_at(drk_search_db_t *db, const char *key, const char *kind, const char *description,
                            int64_t first_seen, char *err, size_t n) {
  if (!check_key(db, "workload", key, 32, err, n)) return false;
  put_workload_ctx_t c = {key, kind ? kind : "", description ? description : "", first_seen};
  return in_txn(db, put_workload_body, &c, err, n);
}

bool drk_search_db_put_workload(drk_search_db_t *db, const char *key, const char *kind, const char *description,
                                char *err, size_t n) {
  return put_workload_at(db, key, kind, description, (int64_t)time(NULL), err, n);
}

typedef struct put_target_ctx {
  const drk_search_target_t *t;
  const char *key, *fp;
  int64_t first_seen;
} put_target_ctx_t;

static bool put_target_body(drk_search_db_t *db, void *vctx, char *err, size_t n) {
  put_target_ctx_t *c = vctx;
  db_stmt_t *st;
  if (!prepare(db,
               "INSERT INTO targets(key, fingerprint, arch, sms, sm_mhz, mem_mhz, bw_gbs, l2_bytes, driver, "
               "cuda, name, first_seen) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) "
               "ON CONFLICT(key) DO NOTHING",
               &st, err, n))
    return false;
  const drk_search_target_t *t = c->t;
  bind_text(st, 1, c->key);
  bind_text(st, 2, c->fp);
  bind_text(st, 3, t->arch);
  bind_int(st, 4, t->sms);
  bind_int(st, 5, t->sm_mhz);
  bind_int(st, 6, t->mem_mhz);
  bind_real(st, 7, t->bw_gbs);
  bind_int(st, 8, t->l2_bytes);
  bind_text(st, 9, t->driver);
  bind_text(st, 10, t->cuda);
  bind_text(st, 11, t->name);
  bind_int(st, 12, c->first_seen);
  db_step_t rc = step(st);
  finalize(st);
  return rc == DB_DONE || drk_db_fail(db, err, n, "storing a target");
}

static bool put_target_at(drk_search_db_t *db, const drk_search_target_t *t, int64_t first_seen, char out_key[17],
                          char *err, size_t n) {
  char key[17], fp[512];
  drk_search_target_key(t, key);
  drk_search_target_format(t, fp, sizeof fp);
  put_target_ctx_t c = {t, key, fp, first_seen};
  if (!in_txn(db, put_target_body, &c, err, n)) return false;
  if (out_key) memcpy(out_key, key, 17);
  return true;
}

bool drk_search_db_put_target(drk_search_db_t *db, const drk_search_target_t *t, char out_key[17], char *err,
                              size_t n) {
  return put_target_at(db, t, (int64_t)time(NULL), out_key, err, n);
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

/* Inserts r unless its uid is there (UNIQUE(uid), ON CONFLICT DO NOTHING: two writers of one
 * record store it once); r->id gets the row's id either way. */
static bool insert_record(drk_search_db_t *db, drk_search_record_t *r, bool *out_added, char *err, size_t n) {
  db_stmt_t *st;
  if (!prepare(db,
               "INSERT INTO records(" RECORD_DATA_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, "
               "?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27) "
               "ON CONFLICT(uid) DO NOTHING RETURNING id",
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
  bind_int(st, c++, r->valid);
  bind_text(st, c++, r->reason);
  bind_real_known(st, c++, r->time_us);
  bind_real_known(st, c++, r->tflops);
  bind_real_known(st, c++, r->gbs);
  bind_real_known(st, c++, r->energy_j);
  bind_real_known(st, c++, r->mem_bytes);
  bind_real_known(st, c++, r->error);
  bind_real(st, c++, isfinite(r->reward) ? r->reward : 0);
  for (int i = 0; i < 4; i++) bind_real(st, c++, isfinite(r->weights[i]) ? r->weights[i] : 0);
  bind_text(st, c++, r->drkc_version);
  bind_text(st, c++, r->host);
  bind_int(st, c++, r->created);
  bind_text(st, c++, r->model);
  bind_text(st, c++, r->user);
  bind_text(st, c++, tags);
  bind_int(st, c++, r->stable && r->valid);
  bind_text(st, c++, r->policy);
  bind_int(st, c++, r->trial);
  db_step_t rc = step(st);
  int64_t id = rc == DB_ROW ? col_int(st, 0) : 0;
  while (rc == DB_ROW) rc = step(st);
  finalize(st);
  if (rc != DB_DONE) {
    if (db->constraint)
      return drk_db_failf(db, err, n, "record of workload %s / target %s: %s (store the workload and target first)",
                      r->workload, r->target, db->be->errmsg(db));
    return drk_db_fail(db, err, n, "storing a record");
  }
  *out_added = id > 0;
  if (*out_added) {
    r->id = id;
    return true;
  }
  if (!prepare(db, "SELECT id FROM records WHERE uid = ?1", &st, err, n)) return false;
  bind_text(st, 1, r->uid);
  rc = step(st);
  r->id = rc == DB_ROW ? col_int(st, 0) : 0;
  finalize(st);
  return rc != DB_ERROR || drk_db_fail(db, err, n, "reading a record's id");
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
      return drk_db_failf(db, err, n, "tag text '%s': letters, digits and _ . = : + - / only (commas between tags)",
                          tags);
  return true;
}

/* What every stored record satisfies, however it comes (a put, an import, a merge). */
static bool check_record(drk_search_db_t *db, const drk_search_record_t *r, char *err, size_t n) {
  if (!check_key(db, "workload", r->workload, 32, err, n) || !check_key(db, "target", r->target, 16, err, n) ||
      !check_tags(db, r->tags, err, n))
    return false;
  if (!r->schedule[0]) return drk_db_failf(db, err, n, "a record needs its schedule text");
  if (!r->drkc_version[0]) return drk_db_failf(db, err, n, "a record needs its drkc version");
  return true;
}

bool drk_search_db_put_record(drk_search_db_t *db, drk_search_record_t *r, char *err, size_t n) {
  if (!check_record(db, r, err, n)) return false;
  if (!r->uid[0]) make_uid(r, r->uid);
  put_record_ctx_t c = {r, false};
  return in_txn(db, put_record_body, &c, err, n);
}

typedef struct one_id_ctx {
  const char *sql;
  int64_t id;
  const char *text;
  int64_t changes;
} one_id_ctx_t;

static bool one_id_body(drk_search_db_t *db, void *vctx, char *err, size_t n) {
  one_id_ctx_t *c = vctx;
  db_stmt_t *st;
  if (!prepare(db, c->sql, &st, err, n)) return false;
  bind_int(st, 1, c->id);
  if (c->text) bind_text(st, 2, c->text);
  db_step_t rc = step(st);
  c->changes = rc == DB_DONE ? db->be->changes(st) : 0;
  finalize(st);
  return rc == DB_DONE || drk_db_fail(db, err, n, "updating a record");
}

static bool exec_one_id(drk_search_db_t *db, const char *sql, int64_t id, const char *text, char *err, size_t n,
                        int64_t *changes) {
  one_id_ctx_t c = {sql, id, text, 0};
  if (!in_txn(db, one_id_body, &c, err, n)) return false;
  *changes = c.changes;
  return true;
}

bool drk_search_db_set_stable(drk_search_db_t *db, int64_t id, bool stable, char *err, size_t n) {
  int64_t ch;
  if (!exec_one_id(db, stable ? "UPDATE records SET stable = 1 WHERE id = ?1 AND valid = 1"
                              : "UPDATE records SET stable = 0 WHERE id = ?1",
                   id, NULL, err, n, &ch))
    return false;
  if (ch == 0) {
    db_stmt_t *st;
    if (!prepare(db, "SELECT valid FROM records WHERE id = ?1", &st, err, n)) return false;
    bind_int(st, 1, id);
    db_step_t rc = step(st);
    bool exists = rc == DB_ROW;
    finalize(st);
    return exists ? drk_db_failf(db, err, n, "record %lld is invalid: it cannot be stable", (long long)id)
                  : drk_db_failf(db, err, n, "no record %lld", (long long)id);
  }
  return true;
}

bool drk_search_db_tag(drk_search_db_t *db, int64_t id, const char *tag, bool remove, char *err, size_t n) {
  if (!tag || !*tag || strchr(tag, ',')) return drk_db_failf(db, err, n, "a tag is one non-empty word without commas");
  if (!check_tags(db, tag, err, n)) return false;
  char wrapped[300];
  snprintf(wrapped, sizeof wrapped, ",%s,", tag);
  int64_t ch;
  /* tags are ",a,b,": adding appends ",tag," minus one comma; removing cuts ",tag" */
  char sql[512];
  if (remove)
    snprintf(sql, sizeof sql, "%s",
             "UPDATE records SET tags = CASE WHEN replace(tags, ?2, ',') = ',' THEN '' "
             "ELSE replace(tags, ?2, ',') END WHERE id = ?1");
  else
    snprintf(sql, sizeof sql,
             "UPDATE records SET tags = CASE WHEN tags = '' THEN ?2 "
             "WHEN %s(tags, ?2) > 0 THEN tags ELSE tags || substr(?2, 2) END WHERE id = ?1",
             db->be->instr);
  if (!exec_one_id(db, sql, id, wrapped, err, n, &ch)) return false;
  if (ch == 0) return drk_db_failf(db, err, n, "no record %lld", (long long)id);
  return true;
}

/* ---- queries ---- */
static bool query_one(drk_search_db_t *db, const char *sql, const char *a, const char *b, const char *c,
                      drk_search_record_t *out, bool *found, char *err, size_t n) {
  db_stmt_t *st;
  if (!prepare(db, sql, &st, err, n)) return false;
  bind_text(st, 1, a);
  bind_text(st, 2, b);
  if (c) bind_text(st, 3, c);
  db_step_t rc = step(st);
  *found = rc == DB_ROW;
  if (*found) record_from_row(st, out);
  finalize(st);
  if (rc == DB_ERROR) return drk_db_fail(db, err, n, "looking up the best record");
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
  int w = snprintf(sql, sizeof sql, "SELECT " RECORD_COLS " FROM records WHERE true");
  const char *binds[6];
  int nb = 0;
  char cond[160];
#define ADD(fmt, val)                                                       \
  do {                                                                      \
    snprintf(cond, sizeof cond, fmt, nb + 1);                               \
    w += snprintf(sql + w, sizeof sql - (size_t)w, " AND %s", cond);        \
    binds[nb++] = (val);                                                    \
  } while (0)
  if (q && q->workload) ADD("workload = ?%d", q->workload);
  if (q && q->target) ADD("target = ?%d", q->target);
  if (q && q->drkc_version) ADD("drkc_version = ?%d", q->drkc_version);
  if (q && q->tag) {
    w += snprintf(sql + w, sizeof sql - (size_t)w, " AND %s(tags, ',' || ?%d || ',') > 0", db->be->instr, nb + 1);
    binds[nb++] = q->tag;
  }
  if (q && q->kind) ADD("workload IN (SELECT key FROM workloads WHERE kind = ?%d)", q->kind);
#undef ADD
  if (q && q->valid_only) w += snprintf(sql + w, sizeof sql - (size_t)w, " AND valid = 1");
  if (q && q->stable_only) w += snprintf(sql + w, sizeof sql - (size_t)w, " AND stable = 1");
  if (q && q->id > 0) w += snprintf(sql + w, sizeof sql - (size_t)w, " AND id = %lld", (long long)q->id);
  w += snprintf(sql + w, sizeof sql - (size_t)w, " ORDER BY %s", q && q->best_first ? BEST_ORDER : "id ASC");
  if (q && q->limit > 0) snprintf(sql + w, sizeof sql - (size_t)w, " LIMIT %ld", q->limit);
  db_stmt_t *st;
  if (!prepare(db, sql, &st, err, n)) return false;
  for (int i = 0; i < nb; i++) bind_text(st, i + 1, binds[i]);
  db_step_t rc;
  while ((rc = step(st)) == DB_ROW) {
    drk_search_record_t r;
    record_from_row(st, &r);
    if (!each(ctx, &r)) {
      rc = DB_DONE;
      break;
    }
  }
  finalize(st);
  return rc == DB_DONE || drk_db_fail(db, err, n, "reading records");
}

bool drk_search_db_workload(drk_search_db_t *db, const char *key, char *kind, size_t kind_n, char *desc,
                            size_t desc_n) {
  db_stmt_t *st;
  if (!db->be->prepare(db, "SELECT kind, description FROM workloads WHERE key = ?1", &st)) return false;
  bind_text(st, 1, key);
  bool found = step(st) == DB_ROW;
  if (found) {
    if (kind) col_text(st, 0, kind, kind_n);
    if (desc) col_text(st, 1, desc, desc_n);
  }
  finalize(st);
  return found;
}

bool drk_search_db_target(drk_search_db_t *db, const char *key, drk_search_target_t *out) {
  db_stmt_t *st;
  char err[600];
  if (!db->be->prepare(db, "SELECT fingerprint FROM targets WHERE key = ?1", &st)) return false;
  bind_text(st, 1, key);
  bool found = step(st) == DB_ROW;
  char fp[512] = "";
  if (found) col_text(st, 0, fp, sizeof fp);
  finalize(st);
  return found && drk_search_target_parse(fp, out, err, sizeof err);
}

bool drk_search_db_workloads(drk_search_db_t *db, bool (*each)(void *ctx, const char *key, const char *kind,
                                                               const char *desc),
                             void *ctx, char *err, size_t n) {
  db_stmt_t *st;
  if (!prepare(db, "SELECT key, kind, description FROM workloads ORDER BY first_seen, key", &st, err, n)) return false;
  db_step_t rc;
  while ((rc = step(st)) == DB_ROW)
    if (!each(ctx, col_str(st, 0), col_str(st, 1), col_str(st, 2))) {
      rc = DB_DONE;
      break;
    }
  finalize(st);
  return rc == DB_DONE || drk_db_fail(db, err, n, "reading workloads");
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
  const char *path;
  char *text; /* the whole input */
  size_t len;
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
      !drk_search_db_put_target(db, &t, NULL, e, sizeof e) || !check_record(db, &r, e, sizeof e) ||
      !insert_record(db, &r, added, e, sizeof e)) {
    snprintf(why, n, "%s", e);
    return false;
  }
  return true;
}

/* Reads the lines of c->in; run again from the start when the transaction is retried. */
static bool import_body(drk_search_db_t *db, void *vctx, char *err, size_t n) {
  import_ctx_t *c = vctx;
  c->added = c->skipped = 0;
  if (!c->len) return true;
  FILE *in = fmemopen(c->text, c->len, "r");
  if (!in) return drk_db_failf(db, err, n, "out of memory");
  size_t cap = 4096;
  char *line = malloc(cap);
  if (!line) {
    fclose(in);
    return drk_db_failf(db, err, n, "out of memory");
  }
  long lineno = 0;
  bool ok = true;
  for (;;) {
    size_t len = 0;
    int ch;
    while ((ch = fgetc(in)) != EOF && ch != '\n') {
      if (len + 2 > cap) {
        char *nl = realloc(line, cap *= 2);
        if (!nl) {
          ok = drk_db_failf(db, err, n, "out of memory");
          break;
        }
        line = nl;
      }
      line[len++] = (char)ch;
    }
    if (!ok || (ch == EOF && len == 0)) break;
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
  free(line);
  fclose(in);
  return ok;
}

/* The whole input, so that a transaction run again reads it again (stdin cannot be rewound). */
static bool slurp(FILE *in, char **out, size_t *out_len) {
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  if (!buf) return false;
  size_t got;
  while ((got = fread(buf + len, 1, cap - len, in)) > 0) {
    len += got;
    if (len == cap) {
      char *nb = realloc(buf, cap *= 2);
      if (!nb) {
        free(buf);
        return false;
      }
      buf = nb;
    }
  }
  *out = buf;
  *out_len = len;
  return true;
}

bool drk_search_db_import(drk_search_db_t *db, FILE *in, const char *path, long *out_added, long *out_skipped,
                          char *err, size_t n) {
  import_ctx_t c = {path, NULL, 0, 0, 0};
  if (!slurp(in, &c.text, &c.len)) return drk_db_failf(db, err, n, "reading %s: out of memory", path);
  if (ferror(in)) {
    free(c.text);
    snprintf(err, n, "%s: error: read failed: %s", path, strerror(errno));
    return false;
  }
  bool ok = in_txn(db, import_body, &c, err, n);
  free(c.text);
  if (!ok) return false;
  if (out_added) *out_added = c.added;
  if (out_skipped) *out_skipped = c.skipped;
  return true;
}

/* ---- merge, sync, prune ---- */
/* The uids a database holds, sorted, with their stable flags: a merge asks the server once
 * instead of once per record (a sync that finds everything present costs two queries). */
typedef struct uid_entry {
  char uid[33];
  bool stable;
} uid_entry_t;

typedef struct copy_ctx {
  drk_search_db_t *src, *dst;
  uid_entry_t *have; /* dst's, sorted by uid */
  size_t n_have;
  long added, skipped, stabilized;
  bool failed;
  char *err;
  size_t n;
} copy_ctx_t;

static int cmp_uid_entry(const void *a, const void *b) {
  return strcmp(((const uid_entry_t *)a)->uid, ((const uid_entry_t *)b)->uid);
}

static bool load_uids(drk_search_db_t *db, copy_ctx_t *c, char *err, size_t n) {
  free(c->have);
  c->have = NULL;
  c->n_have = 0;
  db_stmt_t *st;
  if (!prepare(db, "SELECT uid, stable FROM records", &st, err, n)) return false;
  size_t cap = 0;
  db_step_t rc;
  while ((rc = step(st)) == DB_ROW) {
    if (c->n_have == cap) {
      cap = cap ? 2 * cap : 1024;
      uid_entry_t *g = realloc(c->have, cap * sizeof *g);
      if (!g) {
        finalize(st);
        return drk_db_failf(db, err, n, "out of memory");
      }
      c->have = g;
    }
    uid_entry_t *e = &c->have[c->n_have++];
    snprintf(e->uid, sizeof e->uid, "%s", col_str(st, 0));
    e->stable = col_int(st, 1) != 0;
  }
  finalize(st);
  if (rc != DB_DONE) return drk_db_fail(db, err, n, "reading the records' uids");
  if (c->n_have) qsort(c->have, c->n_have, sizeof *c->have, cmp_uid_entry);
  return true;
}

/* One record of src into dst: inserted when its uid is new, else (when stable in src) made
 * stable in dst: a record confirmed in either database is stable in the union. */
static bool copy_record(void *vctx, const drk_search_record_t *rec) {
  copy_ctx_t *c = vctx;
  drk_search_db_t *db = c->dst;
  if (strlen(rec->uid) != 32 || strspn(rec->uid, "0123456789abcdef") != 32) {
    c->failed = true;
    return drk_db_failf(c->src, c->err, c->n, "record %lld: uid '%s' is not 32 hex digits", (long long)rec->id,
                        rec->uid);
  }
  uid_entry_t key;
  memcpy(key.uid, rec->uid, sizeof key.uid);
  const uid_entry_t *have = c->n_have ? bsearch(&key, c->have, c->n_have, sizeof *c->have, cmp_uid_entry) : NULL;
  if (have) {
    c->skipped++;
    if (!rec->stable || !rec->valid || have->stable) return true;
    db_stmt_t *st;
    if (!prepare(db, "UPDATE records SET stable = 1 WHERE uid = ?1 AND stable = 0 AND valid = 1", &st, c->err, c->n)) {
      c->failed = true;
      return false;
    }
    bind_text(st, 1, rec->uid);
    db_step_t rc = step(st);
    int64_t ch = rc == DB_DONE ? db->be->changes(st) : 0;
    finalize(st);
    if (rc != DB_DONE) {
      c->failed = true;
      return drk_db_fail(db, c->err, c->n, "marking a record stable");
    }
    c->stabilized += ch > 0;
    return true;
  }
  drk_search_record_t r = *rec;
  r.id = 0;
  bool added = false;
  if (!check_record(db, &r, c->err, c->n) || !insert_record(db, &r, &added, c->err, c->n)) {
    c->failed = true;
    return false;
  }
  if (added) c->added++;
  else c->skipped++; /* another writer stored it since load_uids */
  return true;
}

/* Workloads (their first_seen, kinds and descriptions), targets and records of c->src into
 * the database, in its transaction; counts from zero when run again. */
static bool copy_body(drk_search_db_t *db, void *vctx, char *err, size_t n) {
  copy_ctx_t *c = vctx;
  c->added = c->skipped = c->stabilized = 0;
  c->failed = false;
  c->err = err, c->n = n;
  drk_search_db_t *src = c->src;
  db_stmt_t *st;
  if (!prepare(src, "SELECT key, kind, description, first_seen FROM workloads ORDER BY first_seen, key", &st, err, n))
    return false;
  db_step_t rc;
  bool ok = true;
  while (ok && (rc = step(st)) == DB_ROW)
    ok = put_workload_at(db, col_str(st, 0), col_str(st, 1), col_str(st, 2), col_int(st, 3), err, n);
  finalize(st);
  if (!ok) return false;
  if (rc != DB_DONE) return drk_db_fail(src, err, n, "reading workloads");
  if (!prepare(src, "SELECT key, fingerprint, first_seen FROM targets ORDER BY first_seen, key", &st, err, n))
    return false;
  while (ok && (rc = step(st)) == DB_ROW) {
    drk_search_target_t t;
    char why[600], key[17];
    if (!drk_search_target_parse(col_str(st, 1), &t, why, sizeof why)) {
      ok = drk_db_failf(src, err, n, "target %s: %s", col_str(st, 0), why);
      break;
    }
    drk_search_target_key(&t, key);
    if (strcmp(key, col_str(st, 0)) != 0) {
      ok = drk_db_failf(src, err, n, "target %s is not the key of its fingerprint (%s)", col_str(st, 0), key);
      break;
    }
    ok = put_target_at(db, &t, col_int(st, 2), NULL, err, n);
  }
  finalize(st);
  if (!ok) return false;
  if (rc != DB_DONE) return drk_db_fail(src, err, n, "reading targets");
  if (!load_uids(db, c, err, n)) return false;
  drk_search_query_t all = {0};
  return drk_search_db_query(src, &all, copy_record, c, err, n) && !c->failed;
}

bool drk_search_db_merge_from(drk_search_db_t *db, drk_search_db_t *other, long *out_added, long *out_skipped,
                              long *out_stabilized, char *err, size_t n) {
  if (db->in_txn) return drk_db_failf(db, err, n, "merge inside an open transaction");
  if (db->readonly) return drk_db_failf(db, err, n, "opened read-only: cannot merge into it");
  copy_ctx_t c = {.src = other, .dst = db, .err = err, .n = n};
  bool ok = in_txn(db, copy_body, &c, err, n);
  free(c.have);
  if (!ok) return false;
  if (out_added) *out_added = c.added;
  if (out_skipped) *out_skipped = c.skipped;
  if (out_stabilized) *out_stabilized = c.stabilized;
  return true;
}

bool drk_search_db_same(const char *a, const char *b) {
  if (!strcmp(a, b)) return true;
  if (drk_search_db_is_url(a) || drk_search_db_is_url(b)) return false;
  char ra[PATH_MAX], rb[PATH_MAX];
  return realpath(a, ra) && realpath(b, rb) && !strcmp(ra, rb);
}

bool drk_search_db_merge(drk_search_db_t *db, const char *other_path, long *out_added, long *out_skipped, char *err,
                         size_t n) {
  if (db->in_txn) return drk_db_failf(db, err, n, "merge inside an open transaction");
  if (drk_search_db_same(db->where, other_path)) return drk_db_failf(db, err, n, "merging a database into itself");
  drk_search_db_t *other;
  if (!drk_search_db_open(other_path, true, &other, err, n)) return false;
  bool ok = drk_search_db_merge_from(db, other, out_added, out_skipped, NULL, err, n);
  drk_search_db_close(other);
  return ok;
}

typedef struct prune_ctx {
  int keep;
  bool dry_run;
  long deleted;
} prune_ctx_t;

static bool prune_body(drk_search_db_t *db, void *vctx, char *err, size_t n) {
  prune_ctx_t *c = vctx;
  const char *ranked = "(SELECT id FROM (SELECT id, valid, ROW_NUMBER() OVER (PARTITION BY workload, target, "
                       "drkc_version ORDER BY " BEST_ORDER ") AS rk FROM records) AS ranked "
                       "WHERE valid = 0 OR rk > ?1)";
  char sql[1024];
  snprintf(sql, sizeof sql, c->dry_run ? "SELECT count(*) FROM %s AS doomed" : "DELETE FROM records WHERE id IN %s",
           ranked);
  db_stmt_t *st;
  if (!prepare(db, sql, &st, err, n)) return false;
  bind_int(st, 1, c->keep);
  db_step_t rc = step(st);
  if (c->dry_run && rc == DB_ROW) {
    c->deleted = (long)col_int(st, 0);
    rc = DB_DONE;
  } else if (rc == DB_DONE) {
    c->deleted = (long)db->be->changes(st);
  }
  finalize(st);
  return rc == DB_DONE || drk_db_fail(db, err, n, "pruning");
}

bool drk_search_db_prune(drk_search_db_t *db, int keep, bool dry_run, long *out_deleted, char *err, size_t n) {
  if (keep < 1) return drk_db_failf(db, err, n, "prune keeps at least 1 record per key, not %d", keep);
  prune_ctx_t c = {keep, dry_run, 0};
  if (!in_txn(db, prune_body, &c, err, n)) return false;
  if (out_deleted) *out_deleted = c.deleted;
  return true;
}
