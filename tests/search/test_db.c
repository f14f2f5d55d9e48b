/* The kernel version database (search/db.h): best-record rules (invalid never, unstable never,
 * another drkc version or target never silently), two processes writing one file at once,
 * merge, export/import, prune, tags, errors.
 * usage: test_search_db basic|concurrent|merge|export|prune|errors DIR
 *        test_search_db make-db PATH   (a small database for the command-line test) */
#include <errno.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

static int64_t put(drk_search_db_t *db, const char *wl, const char *target, const char *version, const char *sched,
                   double time_us, bool valid, bool stable) {
  drk_search_record_t r;
  drk_search_record_init(&r);
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

/* Two processes put 200 records each into one file at the same moment: 400 records after. */
static void test_concurrent(void) {
  const char *p = path_in("concurrent.db");
  fresh(p);
  int go[2];
  CHECK(pipe(go) == 0);
  pid_t kids[2];
  for (int k = 0; k < 2; k++) {
    kids[k] = fork();
    if (kids[k] == 0) {
      close(go[1]);
      char c;
      if (read(go[0], &c, 1) < 0) _exit(3); /* released when the parent closes the pipe */
      drk_search_db_t *db = open_db(p);     /* both create the schema at once, too */
      setup(db);
      for (int i = 0; i < 200; i++) {
        char sched[64];
        snprintf(sched, sizeof sched, "mm.tile_n=64 mm.split_k=%d proc=%d", i, k);
        if (!put(db, k ? WL2 : WL1, K_H200, "0.1.0", sched, 10 + i, true, i % 7 == 0)) _exit(1);
      }
      drk_search_db_close(db);
      _exit(failures ? 1 : 0);
    }
  }
  close(go[0]);
  close(go[1]);
  for (int k = 0; k < 2; k++) {
    int st;
    CHECK(waitpid(kids[k], &st, 0) == kids[k] && WIFEXITED(st) && WEXITSTATUS(st) == 0, "writer %d failed", k);
  }
  drk_search_db_t *db = open_db(p);
  drk_search_query_t q1 = {.workload = WL1}, q2 = {.workload = WL2};
  long n1 = count_records(db, &q1), n2 = count_records(db, &q2);
  CHECK(n1 == 200 && n2 == 200, "lost records: %ld + %ld of 400", n1, n2);
  drk_search_db_close(db);
  printf("concurrent: 2 processes x 200 records -> %ld + %ld stored\n", n1, n2);
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
  CHECK_CONTAINS(err, "no such database");
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

static void test_errors(void) {
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

/* A small database for the command-line test. */
static int make_db(const char *p) {
  fresh(p);
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
    fprintf(stderr, "usage: test_search_db basic|concurrent|merge|export|prune|errors DIR | make-db PATH\n");
    return 2;
  }
  drk_search_target_key(&H200, K_H200);
  drk_search_target_key(&A100, K_A100);
  if (!strcmp(argv[1], "make-db")) return make_db(argv[2]);
  snprintf(dir, sizeof dir, "%s", argv[2]);
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
  else if (!strcmp(argv[1], "concurrent")) test_concurrent();
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
