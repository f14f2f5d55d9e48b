/* The kernel version database (search/db.h): best-record rules (invalid never, unstable never,
 * another drkc version or target never silently), two processes writing one database at once
 * (lose nothing, duplicate nothing), merge, sync, export/import, prune, tags, errors.
 * usage: test_search_db basic|concurrent|merge|sync|export|prune|errors DIR [--pg=SOCKET_DIR]
 *        test_search_db concurrent-serializable|reconnect DIR --pg=SOCKET_DIR (PostgreSQL only)
 *        test_search_db make-db PATH|URL   (a small database for the command-line test)
 * With --pg (a server of tests/search/pg_server.sh) the databases are PostgreSQL ones, a
 * database per name (db_test_util.h); `concurrent-serializable` runs the writers under
 * SERIALIZABLE isolation, where PostgreSQL refuses some of their transactions (40001) and drkc
 * must run them again. */
#include <errno.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "search/db.h"
#include "tests/search/db_test_util.h"
#include "tests/common/check.h"

static const char *WL1 = "9330790a0629e222d8313a9748526dfa", *WL2 = "3e45a00d4e19cc954d49b86844ac17e8";
static drk_search_target_t H200 = {"sm_90a", 132, 1980, 2619, 4800, 52428800, "560.35.03", "12.6", "NVIDIA H200"};
static drk_search_target_t A100 = {"sm_80", 108, 1410, 1593, 2039, 41943040, "560.35.03", "12.6", "NVIDIA A100"};
static char K_H200[17], K_A100[17];



static void setup(drk_search_db_t *db) {
  char err[1200];
  CHECK(drk_search_db_put_workload(db, WL1, "mm_ws", "mm_ws M=128 N=768 K=768 dtype=f16", err, sizeof err), "%s", err);
  CHECK(drk_search_db_put_workload(db, WL2, "mm_ws", "mm_ws M=128 N=3072 K=768 dtype=f16", err, sizeof err), "%s", err);
  CHECK(drk_search_db_put_target(db, &H200, K_H200, err, sizeof err), "%s", err);
  CHECK(drk_search_db_put_target(db, &A100, K_A100, err, sizeof err), "%s", err);
}

static int64_t put_uid(drk_search_db_t *db, const char *wl, const char *target, const char *version,
                       const char *sched, double time_us, bool valid, bool stable, const char *uid) {
  drk_search_record_t r;
  drk_search_record_init(&r);
  if (uid) snprintf(r.uid, sizeof r.uid, "%s", uid);
  snprintf(r.workload, sizeof r.workload, "%s", wl);
  snprintf(r.target, sizeof r.target, "%s", target);
  snprintf(r.drkc_version, sizeof r.drkc_version, "%s", version);
  snprintf(r.schedule, sizeof r.schedule, "%s", sched);
  snprintf(r.kernel, sizeof r.kernel, "k2_MatMul");
  snprintf(r.policy, sizeof r.policy, "test");
  r.time_us = time_us;
  r.valid = valid;
  if (!valid) snprintf(r.reason, sizeof r.reason, "output mismatch: rel. error 0.7");
  r.stable = stable;
  r.reward = 100 / time_us;
  r.weights[0] = 0.4;
  char err[1200];
  if (!drk_search_db_put_record(db, &r, err, sizeof err)) {
    fprintf(stderr, "put: %s\n", err);
    failures++;
    return 0;
  }
  return r.id;
}

static int64_t put(drk_search_db_t *db, const char *wl, const char *target, const char *version, const char *sched,
                   double time_us, bool valid, bool stable) {
  return put_uid(db, wl, target, version, sched, time_us, valid, stable, NULL);
}

static long count_records(drk_search_db_t *db, const drk_search_query_t *q);

static bool count_one(void *ctx, const drk_search_record_t *r) {
  (void)r;
  (*(long *)ctx)++;
  return true;
}

static long count_records(drk_search_db_t *db, const drk_search_query_t *q) {
  long n = 0;
  char err[1200];
  drk_search_query_t all = {0};
  CHECK(drk_search_db_query(db, q ? q : &all, count_one, &n, err, sizeof err), "%s", err);
  return n;
}

typedef struct uids {
  char (*u)[33];
  long n, cap;
} uids_t;

static bool collect_uid(void *ctx, const drk_search_record_t *r) {
  uids_t *c = ctx;
  if (c->n == c->cap) {
    c->cap = c->cap ? 2 * c->cap : 256;
    c->u = realloc(c->u, (size_t)c->cap * sizeof *c->u);
  }
  memcpy(c->u[c->n++], r->uid, 33);
  return true;
}

static int cmp_uid(const void *a, const void *b) { return strcmp(a, b); }
static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static long count_distinct_uids(drk_search_db_t *db) {
  uids_t c = {0};
  char err[1200];
  drk_search_query_t all = {0};
  CHECK(drk_search_db_query(db, &all, collect_uid, &c, err, sizeof err), "%s", err);
  qsort(c.u, (size_t)c.n, sizeof *c.u, cmp_uid);
  long d = 0;
  for (long i = 0; i < c.n; i++) d += i == 0 || strcmp(c.u[i], c.u[i - 1]) != 0;
  free(c.u);
  return d;
}

static void drk_db_test_sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static void test_basic(void) {
  const char *p = path_in("basic.db");
  fresh(p);
  drk_search_db_t *db = open_db(p);
  setup(db);
  char err[1200];
  drk_search_record_t r;
  CHECK(drk_search_db_best(db, WL1, K_H200, "0.1.0", &r, err, sizeof err) == DRK_SEARCH_DB_NONE);
  /* a fast invalid record (a planted wrong kernel) and an unstable valid one are never best */
  int64_t wrong = put(db, WL1, K_H200, "0.1.0", "mm.tile_n=256 mm.split_k=1", 1.0, false, false);
  CHECK(wrong > 0);
  put(db, WL1, K_H200, "0.1.0", "mm.tile_n=64 mm.split_k=1", 8.0, true, false);
  CHECK(drk_search_db_best(db, WL1, K_H200, "0.1.0", &r, err, sizeof err) == DRK_SEARCH_DB_NONE);
  int64_t ok1 = put(db, WL1, K_H200, "0.1.0", "mm.tile_n=128 mm.split_k=1", 10.0, true, true);
  int64_t ok2 = put(db, WL1, K_H200, "0.1.0", "mm.tile_n=128 mm.split_k=2", 9.0, true, true);
  CHECK(drk_search_db_best(db, WL1, K_H200, "0.1.0", &r, err, sizeof err) == DRK_SEARCH_DB_FOUND);
  CHECK(r.id == ok2 && r.time_us == 9.0 && r.valid && r.stable, "best %lld", (long long)r.id);
  (void)ok1;
  /* an invalid record cannot be made stable, and stored stable it is not */
  CHECK(!drk_search_db_set_stable(db, wrong, true, err, sizeof err));
  CHECK_CONTAINS(err, "invalid");
  int64_t wrong2 = put(db, WL1, K_H200, "0.1.0", "mm.tile_n=256 mm.split_k=2", 0.5, false, true);
  drk_search_query_t q = {.id = wrong2};
  CHECK(count_records(db, &q) == 1);
  q.stable_only = true;
  CHECK(count_records(db, &q) == 0, "an invalid record stored as stable");
  CHECK(drk_search_db_best(db, WL1, K_H200, "0.1.0", &r, err, sizeof err) == DRK_SEARCH_DB_FOUND && r.id == ok2);
  CHECK(!drk_search_db_set_stable(db, 99999, true, err, sizeof err));
  CHECK_CONTAINS(err, "no record 99999");
  /* another drkc version: never returned silently */
  CHECK(drk_search_db_best(db, WL1, K_H200, "0.2.0", &r, err, sizeof err) == DRK_SEARCH_DB_OTHER_VERSION);
  CHECK(r.id == ok2 && !strcmp(r.drkc_version, "0.1.0"));
  /* another target: never returned silently */
  CHECK(drk_search_db_best(db, WL1, K_A100, "0.1.0", &r, err, sizeof err) == DRK_SEARCH_DB_OTHER_TARGET);
  CHECK(!strcmp(r.target, K_H200));
  /* a record of the A100 target is found for it, and does not shadow the H200's */
  int64_t a = put(db, WL1, K_A100, "0.1.0", "mm.tile_n=64 mm.split_k=4", 3.0, true, true);
  CHECK(drk_search_db_best(db, WL1, K_A100, "0.1.0", &r, err, sizeof err) == DRK_SEARCH_DB_FOUND && r.id == a);
  CHECK(drk_search_db_best(db, WL1, K_H200, "0.1.0", &r, err, sizeof err) == DRK_SEARCH_DB_FOUND && r.id == ok2);
  /* another workload is none */
  CHECK(drk_search_db_best(db, WL2, K_H200, "0.1.0", &r, err, sizeof err) == DRK_SEARCH_DB_NONE);
  /* tags */
  CHECK(drk_search_db_tag(db, ok2, "fp16", false, err, sizeof err), "%s", err);
  CHECK(drk_search_db_tag(db, ok2, "llm", false, err, sizeof err), "%s", err);
  CHECK(drk_search_db_tag(db, ok2, "fp16", false, err, sizeof err), "%s", err);
  drk_search_query_t tq = {.tag = "llm"};
  CHECK(count_records(db, &tq) == 1);
  drk_search_db_best(db, WL1, K_H200, "0.1.0", &r, err, sizeof err);
  CHECK(!strcmp(r.tags, "fp16,llm"), "tags '%s'", r.tags);
  CHECK(drk_search_db_tag(db, ok2, "fp16", true, err, sizeof err), "%s", err);
  drk_search_db_best(db, WL1, K_H200, "0.1.0", &r, err, sizeof err);
  CHECK(!strcmp(r.tags, "llm"), "tags '%s'", r.tags);
  tq.tag = "ll"; /* a tag matches whole */
  CHECK(count_records(db, &tq) == 0);
  CHECK(!drk_search_db_tag(db, ok2, "a,b", false, err, sizeof err));
  CHECK(!drk_search_db_tag(db, ok2, "a b", false, err, sizeof err));
  /* a record of an unknown workload or target is refused */
  CHECK(put(db, "00000000000000000000000000000000", K_H200, "0.1.0", "x", 1, true, true) == 0);
  failures--; /* the failure put() counted was expected */
  /* explicit transactions: rolled back, nothing stays */
  long before = count_records(db, NULL);
  CHECK(drk_search_db_begin(db, err, sizeof err), "%s", err);
  put(db, WL2, K_H200, "0.1.0", "mm.tile_n=64", 5, true, false);
  CHECK(drk_search_db_rollback(db, err, sizeof err), "%s", err);
  CHECK(count_records(db, NULL) == before);
  CHECK(drk_search_db_begin(db, err, sizeof err), "%s", err);
  put(db, WL2, K_H200, "0.1.0", "mm.tile_n=64", 5, true, false);
  CHECK(drk_search_db_commit(db, err, sizeof err), "%s", err);
  CHECK(count_records(db, NULL) == before + 1);
  /* the workload's description is kept */
  char kind[32], desc[256];
  CHECK(drk_search_db_workload(db, WL2, kind, sizeof kind, desc, sizeof desc) && !strcmp(kind, "mm_ws"));
  CHECK_CONTAINS(desc, "N=3072");
  drk_search_target_t t;
  CHECK(drk_search_db_target(db, K_A100, &t) && !memcmp(&t, &A100, sizeof t));
  drk_search_db_close(db);
  /* read-only reopen sees everything */
  CHECK(drk_search_db_open(p, true, &db, err, sizeof err), "%s", err);
  CHECK(count_records(db, NULL) == before + 1);
  drk_search_db_close(db);
}

/* A serialization failure on purpose: process A opens a transaction and stores record X;
 * process B, told so, stores X too (its snapshot taken while A's is open, B waits for A's
 * commit; under SERIALIZABLE, PostgreSQL then refuses B's transaction with 40001). drkc runs
 * B's transaction again: X is stored once, and B's handle counts the retry. */
static void conflict_pair(const char *p) {
  int told[2], rep[2];
  CHECK(pipe(told) == 0 && pipe(rep) == 0);
  const char *uid = "00000000000000000000000000c0ffee";
  pid_t kids[2];
  for (int k = 0; k < 2; k++) {
    kids[k] = fork();
    if (kids[k] == 0) {
      drk_search_db_t *db = open_db(p);
      char err[1200], c = 'x';
      if (k == 0) {
        if (!drk_search_db_begin(db, err, sizeof err)) _exit(1);
        if (!put_uid(db, WL1, K_H200, "0.1.0", "mm.tile_n=64 conflict", 9, true, true, uid)) _exit(1);
        if (write(told[1], &c, 1) != 1) _exit(1);
        drk_db_test_sleep_ms(400); /* B is waiting on X now */
        if (!drk_search_db_commit(db, err, sizeof err)) _exit(1);
      } else {
        if (read(told[0], &c, 1) != 1) _exit(1);
        drk_db_test_sleep_ms(50);
        if (!put_uid(db, WL1, K_H200, "0.1.0", "mm.tile_n=64 conflict", 9, true, true, uid)) _exit(1);
        long retries = drk_search_db_retries(db);
        if (write(rep[1], &retries, sizeof retries) != sizeof retries) _exit(1);
      }
      drk_search_db_close(db);
      _exit(failures ? 1 : 0);
    }
  }
  close(rep[1]);
  for (int k = 0; k < 2; k++) {
    int st;
    CHECK(waitpid(kids[k], &st, 0) == kids[k] && WIFEXITED(st) && WEXITSTATUS(st) == 0, "conflict writer %d failed", k);
  }
  long retries = 0;
  CHECK(read(rep[0], &retries, sizeof retries) == sizeof retries);
  close(rep[0]);
  close(told[0]);
  close(told[1]);
  drk_search_db_t *db = open_db(p);
  long n = count_distinct_uids(db), all = count_records(db, NULL);
  CHECK(n == all, "%ld distinct uids in %ld records after the conflict", n, all);
  drk_search_db_close(db);
  CHECK(retries > 0, "B's transaction met no serialization failure (the retry path went untested)");
  printf("conflict: the second writer of one record ran its transaction %ld more time(s); stored once\n", retries);
}

/* Two processes put 200 records each into one database at the same moment, and the same 50
 * records (same uids: a re-import, a resumed writer) each: 450 records after, no uid twice. */
static void test_concurrent(bool serializable) {
  char p[4400];
  snprintf(p, sizeof p, "%s", path_in("concurrent.db"));
  fresh(p);
  if (serializable) {
    if (!pg_sock[0]) {
      printf("SKIP: concurrent-serializable is a PostgreSQL test (--pg=SOCKET_DIR)\n");
      exit(77);
    }
    /* every transaction of the writers SERIALIZABLE: conflicting ones fail with 40001 */
    strncat(p, "&options=-cdefault_transaction_isolation%3Dserializable", sizeof p - strlen(p) - 1);
  }
  int go[2], rep[2];
  CHECK(pipe(go) == 0 && pipe(rep) == 0);
  pid_t kids[2];
  for (int k = 0; k < 2; k++) {
    kids[k] = fork();
    if (kids[k] == 0) {
      close(go[1]);
      close(rep[0]);
      char c;
      if (read(go[0], &c, 1) < 0) _exit(3); /* released when the parent closes the pipe */
      drk_search_db_t *db = open_db(p);     /* both create the schema at once, too */
      setup(db);
      for (int i = 0; i < 250; i++) {
        char sched[64];
        if (i % 5 == 0) { /* one of the 50 shared records, both processes in the same order */
          snprintf(sched, sizeof sched, "mm.tile_n=128 mm.split_k=%d shared", i / 5);
          char uid[33];
          snprintf(uid, sizeof uid, "%032x", 0xabc000 + i / 5);
          if (!put_uid(db, WL1, K_H200, "0.1.0", sched, 20 + i, true, false, uid)) _exit(1);
          continue;
        }
        snprintf(sched, sizeof sched, "mm.tile_n=64 mm.split_k=%d proc=%d", i, k);
        if (!put(db, k ? WL2 : WL1, K_H200, "0.1.0", sched, 10 + i, true, i % 7 == 0)) _exit(1);
      }
      long retries = drk_search_db_retries(db);
      if (write(rep[1], &retries, sizeof retries) != sizeof retries) _exit(4);
      drk_search_db_close(db);
      _exit(failures ? 1 : 0);
    }
  }
  close(go[0]);
  close(go[1]);
  close(rep[1]);
  for (int k = 0; k < 2; k++) {
    int st;
    CHECK(waitpid(kids[k], &st, 0) == kids[k] && WIFEXITED(st) && WEXITSTATUS(st) == 0, "writer %d failed", k);
  }
  long retries = 0, r;
  while (read(rep[0], &r, sizeof r) == sizeof r) retries += r;
  close(rep[0]);
  drk_search_db_t *db = open_db(p);
  drk_search_query_t q1 = {.workload = WL1}, q2 = {.workload = WL2};
  long n1 = count_records(db, &q1), n2 = count_records(db, &q2);
  /* WL1: process 0's 200 and the 50 shared; WL2: process 1's 200 */
  CHECK(n1 == 250 && n2 == 200, "lost or duplicated records: %ld + %ld of 250 + 200", n1, n2);
  long distinct = count_distinct_uids(db);
  CHECK(distinct == n1 + n2, "%ld distinct uids in %ld records", distinct, n1 + n2);
  drk_search_db_close(db);
  printf("concurrent%s (%s): 2 processes x (200 own + 50 shared) records -> %ld + %ld stored, %ld distinct uids; "
         "%ld transactions run again\n",
         serializable ? "-serializable" : "", pg_sock[0] ? "PostgreSQL" : "SQLite", n1, n2, distinct, retries);
  if (serializable) conflict_pair(p);
}

static void test_merge(void) {
  const char *a = path_in("merge_a.db"), *b = path_in("merge_b.db");
  fresh(a);
  fresh(b);
  drk_search_db_t *da = open_db(a), *db = open_db(b);
  setup(da);
  setup(db);
  put(da, WL1, K_H200, "0.1.0", "mm.tile_n=64", 10, true, true);
  put(da, WL1, K_H200, "0.1.0", "mm.tile_n=128", 8, true, true);
  put(da, WL2, K_H200, "0.1.0", "mm.tile_n=64", 5, true, true);
  int64_t bbest = put(db, WL1, K_H200, "0.1.0", "mm.tile_n=256", 6, true, true); /* better than a's */
  put(db, WL1, K_H200, "0.1.0", "mm.tile_n=256 planted", 0.1, false, false);    /* invalid, fastest */
  put(db, WL2, K_H200, "0.1.0", "mm.tile_n=128", 7, true, true);                /* worse than a's */
  put(db, WL2, K_A100, "0.1.0", "mm.tile_n=128", 3, true, true);
  char err[1200];
  long added = 0, skipped = 0;
  CHECK(drk_search_db_merge(da, b, &added, &skipped, err, sizeof err), "%s", err);
  CHECK(added == 4 && skipped == 0, "added %ld skipped %ld", added, skipped);
  CHECK(count_records(da, NULL) == 7);
  drk_search_record_t r;
  CHECK(drk_search_db_best(da, WL1, K_H200, "0.1.0", &r, err, sizeof err) == DRK_SEARCH_DB_FOUND);
  CHECK(r.time_us == 6 && !strcmp(r.schedule, "mm.tile_n=256"), "best of the union: %s %g", r.schedule, r.time_us);
  (void)bbest;
  CHECK(drk_search_db_best(da, WL2, K_H200, "0.1.0", &r, err, sizeof err) == DRK_SEARCH_DB_FOUND && r.time_us == 5);
  CHECK(drk_search_db_best(da, WL2, K_A100, "0.1.0", &r, err, sizeof err) == DRK_SEARCH_DB_FOUND && r.time_us == 3);
  /* merging again adds nothing; the other way round gives the same union */
  CHECK(drk_search_db_merge(da, b, &added, &skipped, err, sizeof err) && added == 0 && skipped == 4);
  CHECK(drk_search_db_merge(db, a, &added, &skipped, err, sizeof err) && added == 3 && skipped == 4,
        "added %ld skipped %ld", added, skipped);
  CHECK(count_records(db, NULL) == 7);
  /* a stable flag set later in one database carries over */
  int64_t late = put(db, WL1, K_H200, "0.1.0", "mm.tile_n=64 split", 5.5, true, false);
  CHECK(drk_search_db_merge(da, b, &added, &skipped, err, sizeof err) && added == 1);
  CHECK(drk_search_db_set_stable(db, late, true, err, sizeof err));
  CHECK(drk_search_db_merge(da, b, &added, &skipped, err, sizeof err) && added == 0);
  CHECK(drk_search_db_best(da, WL1, K_H200, "0.1.0", &r, err, sizeof err) == DRK_SEARCH_DB_FOUND && r.time_us == 5.5);
  /* errors */
  CHECK(!drk_search_db_merge(da, a, &added, &skipped, err, sizeof err));
  CHECK_CONTAINS(err, "into itself");
  CHECK(!drk_search_db_merge(da, path_in("missing.db"), &added, &skipped, err, sizeof err));
  CHECK_CONTAINS(err, pg_sock[0] ? "does not exist" : "no such database");
  drk_search_db_close(da);
  drk_search_db_close(db);
  printf("merge: union of 3 + 4 records = 7, best per key the better of the two\n");
}

static void test_export_import(void) {
  const char *a = path_in("export_a.db"), *b = path_in("export_b.db"), *j = path_in("export.jsonl");
  fresh(a);
  fresh(b);
  drk_search_db_t *da = open_db(a);
  setup(da);
  put(da, WL1, K_H200, "0.1.0", "mm.tile_n=64 \"quoted\\\"", 10, true, true);
  put(da, WL1, K_H200, "0.1.0", "mm.tile_n=128", 8, false, false);
  int64_t t = put(da, WL2, K_A100, "0.1.0", "mm.tile_n=64", 5, true, true);
  char err[1200];
  CHECK(drk_search_db_tag(da, t, "arch=sm_80", false, err, sizeof err));
  FILE *f = fopen(j, "w");
  CHECK(drk_search_db_export(da, NULL, f, err, sizeof err), "%s", err);
  fclose(f);
  drk_search_db_t *db = open_db(b); /* empty: workloads and targets come from the lines */
  f = fopen(j, "r");
  long added = 0, skipped = 0;
  CHECK(drk_search_db_import(db, f, j, &added, &skipped, err, sizeof err), "%s", err);
  fclose(f);
  CHECK(added == 3 && skipped == 0, "added %ld skipped %ld", added, skipped);
  /* identical exports */
  char *x = NULL, *y = NULL;
  size_t xl = 0, yl = 0;
  FILE *fx = open_memstream(&x, &xl), *fy = open_memstream(&y, &yl);
  drk_search_db_export(da, NULL, fx, err, sizeof err);
  drk_search_db_export(db, NULL, fy, err, sizeof err);
  fclose(fx);
  fclose(fy);
  CHECK(xl == yl && !memcmp(x, y, xl), "export -> import -> export differs:\n%s\n---\n%s", x, y);
  free(x);
  free(y);
  f = fopen(j, "r");
  CHECK(drk_search_db_import(db, f, j, &added, &skipped, err, sizeof err) && added == 0 && skipped == 3);
  fclose(f);
  /* a bad line: located, and nothing of the file is stored */
  const char *bad = path_in("bad.jsonl");
  f = fopen(bad, "w");
  fputs("{\"uid\":\"0123456789abcdef0123456789abcdef\",\"workload\":\"9330790a0629e222d8313a9748526dfa\",\"target\":\"", f);
  fputs(K_H200, f);
  fputs("\",\"fingerprint\":\"arch=sm_90a;sms=132;sm_mhz=1980;mem_mhz=2619;bw_gbs=4800;l2_bytes=52428800;driver=560.35.03;"
        "cuda=12.6;name=NVIDIA H200\",\"schedule\":\"mm.tile_n=64\",\"valid\":true,\"drkc_version\":\"0.1.0\","
        "\"time_us\":1}\n\n",
        f);
  fputs("{\"uid\":\"1123456789abcdef0123456789abcdef\",\"valid\":true}\n", f);
  fclose(f);
  long before = count_records(db, NULL);
  f = fopen(bad, "r");
  CHECK(!drk_search_db_import(db, f, bad, &added, &skipped, err, sizeof err));
  fclose(f);
  CHECK(strstr(err, "bad.jsonl:3: error: missing \"workload\"") != NULL, "%s", err);
  CHECK(count_records(db, NULL) == before, "a failed import stored records");
  f = fopen(bad, "w");
  fputs("{\"uid\": 12,}\n", f);
  fclose(f);
  f = fopen(bad, "r");
  CHECK(!drk_search_db_import(db, f, bad, &added, &skipped, err, sizeof err));
  fclose(f);
  CHECK_CONTAINS(err, "bad.jsonl:1: error: not a JSON object: column 12");
  drk_search_db_close(da);
  drk_search_db_close(db);
}

static void test_prune(void) {
  const char *p = path_in("prune.db");
  fresh(p);
  drk_search_db_t *db = open_db(p);
  setup(db);
  for (int i = 0; i < 10; i++) {
    char s[32];
    snprintf(s, sizeof s, "mm.split_k=%d", i + 1);
    put(db, WL1, K_H200, "0.1.0", s, 20 - i, i % 3 != 0, i == 5);
    put(db, WL2, K_H200, "0.1.0", s, 20 + i, true, false);
  }
  char err[1200];
  long del = 0;
  CHECK(drk_search_db_prune(db, 3, true, &del, err, sizeof err) && del == 14, "dry run: %ld", del);
  CHECK(count_records(db, NULL) == 20);
  CHECK(drk_search_db_prune(db, 3, false, &del, err, sizeof err) && del == 14, "%ld", del);
  drk_search_query_t q1 = {.workload = WL1}, q2 = {.workload = WL2, .best_first = true};
  CHECK(count_records(db, &q1) == 3 && count_records(db, &q2) == 3);
  /* the stable record is kept first; no invalid one is left */
  drk_search_record_t r;
  CHECK(drk_search_db_best(db, WL1, K_H200, "0.1.0", &r, err, sizeof err) == DRK_SEARCH_DB_FOUND &&
        !strcmp(r.schedule, "mm.split_k=6"));
  drk_search_query_t qi = {.valid_only = true};
  CHECK(count_records(db, &qi) == 6);
  CHECK(!drk_search_db_prune(db, 0, false, &del, err, sizeof err));
  drk_search_db_close(db);
}

/* A PostgreSQL database that is not drkc's, one of a newer schema, an empty one opened
 * read-only, a server that is not there, a password never shown, a database into itself. */
static void test_errors_pg(void) {
#ifdef DRK_HAVE_POSTGRES
  char err[1200];
  drk_search_db_t *db;
  const char *other = path_in("other.db");
  fresh(other);
  pg_admin(pg_dbname(other), "CREATE TABLE t(x int)");
  CHECK(!drk_search_db_open(other, false, &db, err, sizeof err));
  CHECK_CONTAINS(err, "not a drkc kernel database (a PostgreSQL database with 1 tables and no drkc_meta");
  const char *nw = path_in("newer.db");
  fresh(nw);
  db = open_db(nw);
  drk_search_db_close(db);
  pg_admin(pg_dbname(nw), "UPDATE drkc_meta SET value = '9' WHERE key = 'schema'");
  CHECK(!drk_search_db_open(nw, false, &db, err, sizeof err));
  CHECK_CONTAINS(err, "schema 9 is newer");
  const char *empty = path_in("empty.db");
  fresh(empty);
  CHECK(!drk_search_db_open(empty, true, &db, err, sizeof err));
  CHECK_CONTAINS(err, "empty database (nothing tuned yet)");
  /* read-only opened: writing is refused by the server */
  const char *ro = path_in("ro.db");
  fresh(ro);
  db = open_db(ro);
  drk_search_db_close(db);
  CHECK(drk_search_db_open(ro, true, &db, err, sizeof err), "%s", err);
  CHECK(!drk_search_db_put_workload(db, WL1, "mm_ws", "", err, sizeof err));
  CHECK_CONTAINS(err, "read-only transaction");
  drk_search_db_close(db);
  /* no server; the password stays out of the message */
  CHECK(!drk_search_db_open("postgresql://drkc:s3cret@/x?host=/nonexistent/dir", false, &db, err, sizeof err));
  CHECK_CONTAINS(err, "postgresql://drkc@/x?host=/nonexistent/dir: cannot connect");
  CHECK(!strstr(err, "s3cret"), "the password in a message: %s", err);
  CHECK(!drk_search_db_open("host=/nonexistent/dir dbname=x password=s3cret", false, &db, err, sizeof err));
  CHECK_CONTAINS(err, "cannot connect");
  CHECK(!strstr(err, "s3cret"), "the password in a message: %s", err);
  /* bad keys, merging into itself */
  const char *ok = path_in("keys.db");
  fresh(ok);
  db = open_db(ok);
  CHECK(!drk_search_db_put_workload(db, "xyz", "", "", err, sizeof err));
  CHECK_CONTAINS(err, "not 32 hex digits");
  long added, skipped;
  CHECK(!drk_search_db_merge(db, ok, &added, &skipped, err, sizeof err));
  CHECK_CONTAINS(err, "into itself");
  drk_search_db_close(db);
#else
  printf("SKIP: built without PostgreSQL\n");
  exit(77);
#endif
}

static void test_errors(void) {
  if (pg_sock[0]) {
    test_errors_pg();
    return;
  }
  char err[1200];
  drk_search_db_t *db;
  const char *p = path_in("not_a_db.txt");
  FILE *f = fopen(p, "w");
  fputs("this is not an SQLite database, it is a text file of some length to be sure\n", f);
  fclose(f);
  CHECK(!drk_search_db_open(p, false, &db, err, sizeof err));
  CHECK_CONTAINS(err, "not a drkc kernel database");
  /* another program's SQLite file */
  const char *q = path_in("other.sqlite");
  fresh(q);
  sqlite3 *h;
  CHECK(sqlite3_open(q, &h) == SQLITE_OK);
  sqlite3_exec(h, "CREATE TABLE t(x)", NULL, NULL, NULL);
  sqlite3_close(h);
  CHECK(!drk_search_db_open(q, false, &db, err, sizeof err));
  CHECK_CONTAINS(err, "an SQLite file without drkc_meta");
  /* a newer schema */
  const char *nw = path_in("newer.db");
  fresh(nw);
  db = open_db(nw);
  drk_search_db_close(db);
  CHECK(sqlite3_open(nw, &h) == SQLITE_OK);
  sqlite3_exec(h, "UPDATE drkc_meta SET value = '9' WHERE key = 'schema'", NULL, NULL, NULL);
  sqlite3_close(h);
  CHECK(!drk_search_db_open(nw, false, &db, err, sizeof err));
  CHECK_CONTAINS(err, "schema 9 is newer");
  CHECK(!drk_search_db_open(path_in("absent.db"), true, &db, err, sizeof err));
  CHECK_CONTAINS(err, "no such database");
  CHECK(!drk_search_db_open(dir, false, &db, err, sizeof err));
  CHECK_CONTAINS(err, "not a regular file");
  /* bad keys */
  const char *ok = path_in("keys.db");
  fresh(ok);
  db = open_db(ok);
  CHECK(!drk_search_db_put_workload(db, "xyz", "", "", err, sizeof err));
  CHECK_CONTAINS(err, "not 32 hex digits");
  drk_search_db_close(db);
}

/* Sorted export lines of db (ids differ between databases, the order of ids too). */
static char *sorted_export(drk_search_db_t *db) {
  char *x = NULL, err[1200];
  size_t xl = 0;
  FILE *f = open_memstream(&x, &xl);
  CHECK(drk_search_db_export(db, NULL, f, err, sizeof err), "%s", err);
  fclose(f);
  long nl = 0;
  for (size_t i = 0; i < xl; i++) nl += x[i] == '\n';
  char **lines = calloc((size_t)nl + 1, sizeof *lines);
  long k = 0;
  for (char *save = NULL, *t = strtok_r(x, "\n", &save); t; t = strtok_r(NULL, "\n", &save)) lines[k++] = t;
  qsort(lines, (size_t)k, sizeof *lines, cmp_str);
  size_t cap = xl + 2, w = 0;
  char *out = malloc(cap);
  for (long i = 0; i < k; i++) w += (size_t)snprintf(out + w, cap - w, "%s\n", lines[i]);
  out[w] = 0;
  free(lines);
  free(x);
  return out;
}

/* A local SQLite file and the shared database (PostgreSQL with --pg) with records of their
 * own, synced both ways; then a new SQLite file synced from the shared one: every database
 * holds the same records (exports equal as sets of lines) and the same best record per key. */
static void test_sync(void) {
  char la[4300], lc[4300], mid[4400];
  snprintf(la, sizeof la, "%s/sync_local_a.db", dir);
  snprintf(lc, sizeof lc, "%s/sync_local_c.db", dir);
  snprintf(mid, sizeof mid, "%s", path_in("sync_shared.db"));
  fresh(la);
  fresh(lc);
  fresh(mid);
  drk_search_db_t *a = open_db(la), *m = open_db(mid);
  setup(a);
  put(a, WL1, K_H200, "0.1.0", "mm.tile_n=64", 10, true, true);
  put(a, WL1, K_H200, "0.1.0", "mm.tile_n=128 planted", 0.1, false, false); /* invalid, fastest */
  int64_t late = put(a, WL2, K_H200, "0.1.0", "mm.tile_n=256 late", 3.5, true, false);
  put(a, WL2, K_A100, "0.1.0", "mm.tile_n=64 a100", 6.25, true, true);
  /* the shared database knows the H200 only; its records are better for WL1, worse for WL2 */
  char err[1200];
  CHECK(drk_search_db_put_workload(m, WL1, "mm_ws", "", err, sizeof err) &&
        drk_search_db_put_target(m, &H200, NULL, err, sizeof err), "%s", err);
  put(m, WL1, K_H200, "0.1.0", "mm.tile_n=256", 7.125, true, true);
  put(m, WL1, K_H200, "0.0.9", "mm.tile_n=256 old", 5, true, true);
  long add = 0, skip = 0, stab = 0;
  CHECK(drk_search_db_merge_from(a, m, &add, &skip, &stab, err, sizeof err), "%s", err);
  CHECK(add == 2 && skip == 0 && stab == 0, "shared -> local: %ld %ld %ld", add, skip, stab);
  CHECK(drk_search_db_merge_from(m, a, &add, &skip, &stab, err, sizeof err), "%s", err);
  CHECK(add == 4 && skip == 2 && stab == 0, "local -> shared: %ld %ld %ld", add, skip, stab);
  /* the local winner is confirmed later: the next sync carries the stable flag over */
  CHECK(drk_search_db_set_stable(a, late, true, err, sizeof err), "%s", err);
  CHECK(drk_search_db_merge_from(m, a, &add, &skip, &stab, err, sizeof err), "%s", err);
  CHECK(add == 0 && skip == 6 && stab == 1, "local -> shared again: %ld %ld %ld", add, skip, stab);
  /* the workload description the shared one lacked came with the records */
  char kind[32], desc[256];
  CHECK(drk_search_db_workload(m, WL1, kind, sizeof kind, desc, sizeof desc));
  CHECK_CONTAINS(desc, "N=768");
  drk_search_db_t *c = open_db(lc);
  CHECK(drk_search_db_merge_from(c, m, &add, &skip, &stab, err, sizeof err) && add == 6 && skip == 0, "%s", err);
  CHECK(drk_search_db_merge_from(m, c, &add, &skip, &stab, err, sizeof err) && add == 0 && skip == 6, "%s", err);
  char *ea = sorted_export(a), *em = sorted_export(m), *ec = sorted_export(c);
  CHECK(!strcmp(ea, em) && !strcmp(em, ec), "the synced databases differ:\n%s---\n%s---\n%s", ea, em, ec);
  free(ea);
  free(em);
  free(ec);
  const char *wls[] = {WL1, WL2}, *tgs[] = {K_H200, K_A100}, *vers[] = {"0.1.0", "0.0.9"};
  int found = 0;
  for (int w = 0; w < 2; w++)
    for (int t = 0; t < 2; t++)
      for (int v = 0; v < 2; v++) {
        drk_search_record_t ra, rm, rc;
        drk_search_db_lookup_t la_ = drk_search_db_best(a, wls[w], tgs[t], vers[v], &ra, err, sizeof err);
        drk_search_db_lookup_t lm = drk_search_db_best(m, wls[w], tgs[t], vers[v], &rm, err, sizeof err);
        drk_search_db_lookup_t lc_ = drk_search_db_best(c, wls[w], tgs[t], vers[v], &rc, err, sizeof err);
        CHECK(la_ == lm && lm == lc_, "best %d %d %d: %s / %s / %s", w, t, v, drk_search_db_lookup_name(la_),
              drk_search_db_lookup_name(lm), drk_search_db_lookup_name(lc_));
        if (la_ != DRK_SEARCH_DB_FOUND || lm != DRK_SEARCH_DB_FOUND || lc_ != DRK_SEARCH_DB_FOUND) continue;
        found++;
        CHECK(!strcmp(ra.uid, rm.uid) && !strcmp(rm.uid, rc.uid) && ra.time_us == rc.time_us,
              "best of %d %d %d differs: %s %s %s", w, t, v, ra.uid, rm.uid, rc.uid);
      }
  CHECK(found == 4, "%d keys with a best record (expected 4)", found);
  drk_search_record_t r;
  CHECK(drk_search_db_best(c, WL1, K_H200, "0.1.0", &r, err, sizeof err) == DRK_SEARCH_DB_FOUND && r.time_us == 7.125);
  CHECK(drk_search_db_best(c, WL2, K_H200, "0.1.0", &r, err, sizeof err) == DRK_SEARCH_DB_FOUND && r.time_us == 3.5);
  drk_search_db_close(a);
  drk_search_db_close(m);
  drk_search_db_close(c);
  printf("sync: SQLite <-> %s <-> new SQLite: 6 records in each, the same best of 4 keys\n",
         pg_sock[0] ? "PostgreSQL" : "SQLite");
}

/* The server drops the connection (pg_terminate_backend, as a restart or a network cut would)
 * between two puts of one handle: the next put runs its transaction again on a new
 * connection, and a read after it does too. */
static void test_reconnect(void) {
#ifdef DRK_HAVE_POSTGRES
  if (!pg_sock[0]) {
    printf("SKIP: reconnect is a PostgreSQL test (--pg=SOCKET_DIR)\n");
    exit(77);
  }
  const char *p = path_in("reconnect.db");
  fresh(p);
  drk_search_db_t *db = open_db(p);
  setup(db);
  CHECK(put(db, WL1, K_H200, "0.1.0", "mm.tile_n=64", 10, true, true) > 0);
  char sql[300];
  snprintf(sql, sizeof sql,
           "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '%s' AND pid <> pg_backend_pid()",
           pg_dbname(p));
  pg_admin_query("postgres", sql);
  CHECK(put(db, WL1, K_H200, "0.1.0", "mm.tile_n=128", 9, true, true) > 0, "a put after the connection was cut");
  CHECK(drk_search_db_retries(db) >= 1, "%ld retries", drk_search_db_retries(db));
  pg_admin_query("postgres", sql);
  CHECK(count_records(db, NULL) == 2, "a read after the connection was cut");
  drk_search_db_close(db);
  printf("reconnect: 2 puts and a read across 2 dropped connections\n");
#else
  exit(77);
#endif
}

/* A small database for the command-line test. */
static int make_db(const char *p) {
  if (!drk_search_db_is_url(p)) fresh(p); /* a URL's database is made by pg_server.sh createdb */
  drk_search_db_t *db = open_db(p);
  setup(db);
  put(db, WL1, K_H200, "0.1.0", "mm.tile_n=64 mm.split_k=1", 10, true, true);
  put(db, WL1, K_H200, "0.1.0", "mm.tile_n=256 mm.split_k=1", 1, false, false);
  put(db, WL1, K_H200, "0.1.0", "mm.tile_n=128 mm.split_k=2", 8, true, true);
  put(db, WL1, K_H200, "0.0.9", "mm.tile_n=128 mm.split_k=4", 7, true, true);
  put(db, WL2, K_A100, "0.1.0", "mm.tile_n=64 mm.split_k=2", 4, true, true);
  drk_search_db_close(db);
  printf("%s %s %s %s\n", WL1, WL2, K_H200, K_A100);
  return failures ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: test_search_db basic|concurrent|concurrent-serializable|merge|sync|export|prune|errors DIR "
                    "[--pg=SOCKET_DIR] | reconnect DIR --pg=SOCKET_DIR | make-db PATH\n");
    return 2;
  }
  drk_search_target_key(&H200, K_H200);
  drk_search_target_key(&A100, K_A100);
  if (!strcmp(argv[1], "make-db")) return make_db(argv[2]);
  snprintf(dir, sizeof dir, "%s", argv[2]);
  if (argc > 3 && !strncmp(argv[3], "--pg=", 5)) {
#ifndef DRK_HAVE_POSTGRES
    printf("SKIP: this build has no PostgreSQL backend (DRK_POSTGRES off)\n");
    return 77;
#endif
    snprintf(pg_sock, sizeof pg_sock, "%s", argv[3] + 5);
    snprintf(pg_prefix, sizeof pg_prefix, "t_%s", argv[1]);
    for (char *q = pg_prefix; *q; q++)
      if (*q == '-') *q = '_';
  }
  /* mkdir -p: ctest runs the tests of one work folder in parallel */
  for (char *q = dir + 1; *q; q++)
    if (*q == '/') {
      *q = 0;
      mkdir(dir, 0777);
      *q = '/';
    }
  if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "%s: %s\n", dir, strerror(errno));
    return 1;
  }
  if (!strcmp(argv[1], "basic")) test_basic();
  else if (!strcmp(argv[1], "concurrent")) test_concurrent(false);
  else if (!strcmp(argv[1], "concurrent-serializable")) test_concurrent(true);
  else if (!strcmp(argv[1], "sync")) test_sync();
  else if (!strcmp(argv[1], "reconnect")) test_reconnect();
  else if (!strcmp(argv[1], "merge")) test_merge();
  else if (!strcmp(argv[1], "export")) test_export_import();
  else if (!strcmp(argv[1], "prune")) test_prune();
  else if (!strcmp(argv[1], "errors")) test_errors();
  else {
    fprintf(stderr, "unknown test '%s'\n", argv[1]);
    return 2;
  }
  return check_status(argv[1]);
}
