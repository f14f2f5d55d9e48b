/* The tuning loop and the policies (search/tune.h, search/policy.h) on synthetic cost
 * landscapes with known optima over a real knob space (the sm_90a matmul's six knobs, 4032
 * points, as `drkc --emit=schedules` lists them), without a GPU: the measure callback computes
 * a time from the point.
 *
 *   quadratic  separable: time grows with the squared distance of each knob's value index
 *              from its best (easy)
 *   rugged     a quadratic bowl plus periodic terms in split-K and stages, a tile/stages
 *              interaction and per-point noise: many local optima; the best by enumeration
 *   invalid    a bowl whose best sits on the edge of an invalid region (N tile 256 with more
 *              than 4 stages, "shared memory"; split-K above 8 with the cooperative form):
 *              those points report a 10x faster time with valid = false
 *
 * usage: test_search_tune optimum|compare|kill|planted|fallback|events|determinism|prune|warm DIR */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "search/json.h"
#include "search/tune.h"
#include "tests/search/db_test_util.h"
#include "tests/common/check.h"

static const char *mm_line =
    "k2_MatMul wl=9330790a0629e222d8313a9748526dfa mm_ws mm.tile_n=64 mm.split_k=1 mm.stages=6 mm.persistent=0 "
    "mm.cluster=1 mm.staged=1";
static const char *DESC = "mm_ws M=128 N=768 K=768 dtype=f16";
static drk_search_target_t H200 = {"sm_90a", 132, 1980, 2619, 4800, 52428800, "560.35.03", "12.6", "NVIDIA H200"};
/* DRK_SEARCH_TEST_QUICK (set for sanitizer and Debug builds, whose -O0 code is ~15x slower):
 * smaller budgets and fewer seeds, the same code paths */
static bool quick;

enum { L_QUADRATIC, L_RUGGED, L_INVALID, L_COUNT };
static const char *lnames[L_COUNT] = {"quadratic", "rugged", "invalid"};

typedef struct landscape {
  int kind;
  const drk_search_space_t *s;
  double best_time;
  drk_sched_knobs_t best;
  long calls;
  /* options of particular tests */
  bool with_energy;
  long drift_after;      /* > 0: from this call on, the GPU is throttled */
  double drift_factor;
  const drk_sched_knobs_t *planted; /* this point reports 1 us and valid = false */
  bool planted_lies;     /* ...or valid = true without a time */
  long slow_us;          /* sleep per measurement */
  FILE *calls_log;       /* every measured point, canonical text */
} landscape_t;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double hash01(const int *idx, int n) {
  uint64_t h = 0x9e3779b97f4a7c15ull;
  for (int d = 0; d < n; d++) {
    h ^= (uint64_t)(idx[d] + 1) * 0xbf58476d1ce4e5b9ull;
    h = (h ^ (h >> 31)) * 0x94d049bb133111ebull;
  }
  return (double)(h >> 11) * 0x1.0p-53;
}

/* dims: 0 tile_n {64,128,256}, 1 split_k 1..16, 2 stages 2..8, 3 persistent 0..2, 4 cluster 1..2, 5 staged 0..1 */
static double ls_time(const landscape_t *L, const int *idx, bool *valid) {
  const drk_search_space_t *s = L->s;
  double u[DRK_KNOB_COUNT];
  for (int d = 0; d < s->n_dims; d++) u[d] = s->n_values[d] > 1 ? (double)idx[d] / (s->n_values[d] - 1) : 0;
  static const double w[6] = {3, 2, 2, 1, 0.5, 0.5};
  *valid = true;
  double q = 0;
  switch (L->kind) {
    case L_QUADRATIC: {
      /* best: tile_n 128, split_k 4, stages 4, persistent 2, cluster 2, staged 0 */
      static const double c[6] = {0.5, 3.0 / 15, 2.0 / 6, 1.0, 1.0, 0.0};
      for (int d = 0; d < 6; d++) q += w[d] * (u[d] - c[d]) * (u[d] - c[d]);
      return 50 * (1 + q);
    }
    case L_RUGGED: {
      static const double c[6] = {0.5, 0.5, 0.5, 0.5, 0.0, 1.0};
      for (int d = 0; d < 6; d++) q += 0.6 * w[d] * (u[d] - c[d]) * (u[d] - c[d]);
      q += 0.12 * (1 - cos(2 * M_PI * 3.5 * u[1])) + 0.10 * (1 - cos(2 * M_PI * 2.5 * u[2]));
      q += 0.3 * (u[0] - u[2]) * (u[0] - u[2]) + 0.15 * (idx[3] == 1 && idx[4] == 1);
      q += 0.10 * hash01(idx, s->n_dims);
      return 50 * (1 + q);
    }
    default: {
      /* best: tile_n 256, stages 4 (the last valid stage count at 256), split_k 8, cooperative */
      static const double c[6] = {1.0, 0.5, 0.6, 1.0, 0.0, 1.0};
      for (int d = 0; d < 6; d++) q += w[d] * (u[d] - c[d]) * (u[d] - c[d]);
      if ((idx[0] == 2 && idx[2] >= 3) || (idx[1] >= 8 && idx[3] == 2)) *valid = false;
      return 50 * (1 + q);
    }
  }
}

static int ls_measure(void *ctx, const drk_search_space_t *s, const drk_sched_knobs_t *p, drk_search_metrics_t *m) {
  landscape_t *L = ctx;
  int idx[DRK_KNOB_COUNT];
  if (!drk_search_point_indices(s, p, idx)) {
    snprintf(m->msg, sizeof m->msg, "not a point");
    return 1;
  }
  L->calls++;
  if (L->calls_log) {
    char buf[512];
    drk_search_point_format(s, p, buf, sizeof buf);
    fprintf(L->calls_log, "%s\n", buf);
    fflush(L->calls_log);
  }
  if (L->slow_us) {
    struct timespec ts = {0, L->slow_us * 1000};
    nanosleep(&ts, NULL);
  }
  bool valid;
  double t = ls_time(L, idx, &valid);
  m->sm_mhz = 1980;
  m->power_w = 450;
  if (L->drift_after > 0 && L->calls > L->drift_after) {
    t *= L->drift_factor;
    m->sm_mhz = 1980 / L->drift_factor;
    m->power_w = 700;
  }
  m->valid = valid;
  m->time_us = valid ? t : t / 10; /* a wrong kernel may well be fast */
  m->mem_bytes = 65536;
  m->error = valid ? 1e-4 : 0.8;
  m->tolerance = 1e-2;
  m->energy_j = L->with_energy ? t * 1e-4 : -1;
  m->variance = 0.01;
  if (!valid) snprintf(m->msg, sizeof m->msg, "output mismatch: rel. error 0.8 (shared memory overrun)");
  if (L->planted && drk_search_point_equal(p, L->planted)) {
    if (L->planted_lies) {
      m->valid = true;
      m->time_us = 0;
    } else {
      m->valid = false;
      m->time_us = 1;
      snprintf(m->msg, sizeof m->msg, "planted: wrong outputs, suspiciously fast");
    }
  }
  return 0;
}

static void ls_init(landscape_t *L, int kind, const drk_search_space_t *s) {
  memset(L, 0, sizeof *L);
  L->kind = kind;
  L->s = s;
  L->best_time = INFINITY;
  uint64_t size = drk_search_space_size(s);
  for (uint64_t o = 0; o < size; o++) {
    drk_sched_knobs_t p;
    int idx[DRK_KNOB_COUNT];
    drk_search_point_from_ordinal(s, o, &p);
    drk_search_point_indices(s, &p, idx);
    bool valid;
    double t = ls_time(L, idx, &valid);
    if (valid && t < L->best_time) L->best_time = t, L->best = p;
  }
}

static drk_search_space_t space(void) {
  drk_search_space_t s;
  char err[600];
  if (!drk_search_space_parse_line(mm_line, &s, err, sizeof err)) {
    fprintf(stderr, "space: %s\n", err);
    exit(1);
  }
  return s;
}

/* ---- one run ---- */
typedef struct run_opts {
  const char *policy;
  int budget, batch, screen;
  uint64_t seed;
  drk_search_db_t *db;
  bool resume, warm;
  FILE *events;
  const drk_search_config_t *config;
  drk_search_log_fn log;
  void *log_ctx;
  const char *workload, *description;
  const drk_sched_knobs_t *seeds; /* proposed first */
  int n_seeds;
} run_opts_t;

static bool run(const drk_search_space_t *s, landscape_t *L, const run_opts_t *ro, drk_search_tune_result_t *res,
                char *err, size_t n) {
  drk_search_config_t c;
  if (ro->config) c = *ro->config;
  else drk_search_config_default(&c);
  if (ro->batch) c.batch = ro->batch;
  if (ro->screen) c.screen = ro->screen;
  if (!ro->config) c.remeasure = 0;
  float ctx[DRK_SEARCH_CONTEXT_FEATURES];
  drk_search_context_features(ro->description ? ro->description : DESC, &H200, ctx);
  drk_search_policy_options_t po = {&c, ro->seed, ctx, DRK_SEARCH_CONTEXT_FEATURES};
  drk_search_policy_t *p = drk_search_policy_create(ro->policy, s, &po, err, n);
  if (!p) return false;
  if (ro->n_seeds) drk_search_policy_seed(p, ro->seeds, ro->n_seeds);
  drk_search_tune_options_t o = {0};
  o.kernel = "k2_MatMul";
  o.workload = ro->workload;
  o.description = ro->description ? ro->description : DESC;
  o.target = &H200;
  o.budget = ro->budget;
  o.seed = ro->seed;
  o.config = &c;
  o.db = ro->db;
  o.resume = ro->resume;
  o.warm_start = ro->warm;
  o.events = ro->events;
  o.measure = ls_measure;
  o.ctx = L;
  o.log = ro->log;
  o.log_ctx = ro->log_ctx;
  bool ok = drk_search_tune(s, p, &o, res, err, n);
  drk_search_policy_destroy(p);
  return ok;
}

static double frac_of_opt(const landscape_t *L, const drk_search_tune_result_t *r) {
  return r->found && r->best_metrics.time_us > 0 ? L->best_time / r->best_metrics.time_us : 0;
}

/* ---- each policy finds each landscape's optimum within a generous budget ---- */
static void test_optimum(uint64_t seed) {
  drk_search_space_t s = space();
  uint64_t size = drk_search_space_size(&s);
  static const struct {
    const char *policy;
    int budget, batch, screen;
  } runs[] = {
      {"random", 0 /* the whole space */, 64, 1},
      {"evo", 1000, 8, 1},
      {"ppo", 200, 8, 4},
  };
  for (int l = 0; l < L_COUNT; l++)
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
      if (quick && !strcmp(runs[r].policy, "ppo") && l != L_QUADRATIC) continue;
      landscape_t L;
      ls_init(&L, l, &s);
      run_opts_t ro = {.policy = runs[r].policy,
                       .budget = runs[r].budget ? runs[r].budget : (int)size,
                       .batch = runs[r].batch,
                       .screen = runs[r].screen,
                       .seed = seed};
      drk_search_tune_result_t res;
      char err[1200];
      char *seq = NULL;
      size_t seq_len = 0;
      L.calls_log = open_memstream(&seq, &seq_len);
      double t0 = now_s();
      bool ok = run(&s, &L, &ro, &res, err, sizeof err);
      double dt = now_s() - t0;
      fclose(L.calls_log);
      L.calls_log = NULL;
      /* the trial that first measured the optimum */
      char opt_text[512];
      drk_search_point_format(&s, &L.best, opt_text, sizeof opt_text);
      int at = 0, k = 0;
      for (char *line = strtok(seq, "\n"); line && !at; line = strtok(NULL, "\n")) {
        k++;
        if (!strcmp(line, opt_text)) at = k;
      }
      free(seq);
      CHECK(ok, "%s on %s: %s", runs[r].policy, lnames[l], err);
      CHECK(res.found && drk_search_point_equal(&res.best, &L.best), "%s on %s: best %s at %.3f us, optimum %.3f us",
            runs[r].policy, lnames[l], res.best_text, res.best_metrics.time_us, L.best_time);
      CHECK(res.best_metrics.valid);
      CHECK(L.calls == res.measured + res.remeasured, "%s: %ld calls for %d measured points and %d re-measurements",
            runs[r].policy, L.calls, res.measured, res.remeasured);
      printf("optimum: %-6s %-9s budget %4d: best %.3f us (optimum %.3f us), found at trial %d; %d invalid, "
             "%d fallbacks, %.2f s%s\n",
             runs[r].policy, lnames[l], ro.budget, res.best_metrics.time_us, L.best_time, at, res.invalid,
             res.fallbacks, dt, res.exhausted ? ", space exhausted" : "");
    }
}

/* ---- equal trials: every policy at 64 ---- */
static void test_compare(int trials, int seeds, const char *only) {
  drk_search_space_t s = space();
  /* the baselines plain and with the cost model's screening; the agent in both action modes */
  static const struct {
    const char *label, *policy;
    int screen;
    const char *action;
  } pol[] = {{"random", "random", 1, NULL},   {"evo", "evo", 1, NULL},        {"ppo", "ppo", 4, NULL},
             {"ppo-cat", "ppo", 4, "categorical"}, {"random+cm", "random", 4, NULL}, {"evo+cm", "evo", 4, NULL}};
  enum { NP = sizeof pol / sizeof pol[0] };
  double frac[L_COUNT][NP], secs[NP] = {0};
  if (quick && seeds > 1) seeds = 1;
  printf("compare: %d trials, mean over %d seeds of optimum time / best time found (1 = optimum), [exact hits]\n",
         trials, seeds);
  printf("  %-10s", "landscape");
  for (int k = 0; k < NP; k++) printf(" %14s", pol[k].label);
  printf("\n");
  for (int l = 0; l < L_COUNT; l++) {
    printf("  %-10s", lnames[l]);
    for (int k = 0; k < NP; k++) {
      frac[l][k] = NAN;
      if ((only && strcmp(only, pol[k].label)) || (quick && k > 2)) {
        printf("   %12s", "-");
        continue;
      }
      double sum = 0;
      int h = 0;
      for (int sd = 0; sd < seeds; sd++) {
        landscape_t L;
        ls_init(&L, l, &s);
        drk_search_config_t c;
        drk_search_config_default(&c);
        c.remeasure = 0;
        if (pol[k].action) snprintf(c.ppo.action, sizeof c.ppo.action, "%s", pol[k].action);
        run_opts_t ro = {.policy = pol[k].policy, .budget = trials, .batch = 8, .screen = pol[k].screen,
                         .seed = 1000 + (uint64_t)sd, .config = &c};
        drk_search_tune_result_t res;
        char err[1200];
        double t0 = now_s();
        CHECK(run(&s, &L, &ro, &res, err, sizeof err), "%s", err);
        secs[k] += now_s() - t0;
        CHECK(res.measured == trials);
        sum += frac_of_opt(&L, &res);
        h += res.found && drk_search_point_equal(&res.best, &L.best);
      }
      frac[l][k] = sum / seeds;
      printf("   %6.4f [%d/%d]", frac[l][k], h, seeds);
      fflush(stdout);
    }
    printf("\n");
  }
  printf("  %-10s", "seconds");
  for (int k = 0; k < NP; k++) printf(" %14.2f", secs[k]);
  printf("\n");
  /* the agent finds at least 95% of the optimum on the easy landscapes (not asserted: that it
   * beats the baselines everywhere) */
  if (!only || !strcmp(only, "ppo"))
    CHECK(frac[L_QUADRATIC][2] >= 0.95, "ppo on quadratic: %.4f of the optimum", frac[L_QUADRATIC][2]);
}

/* ---- helpers for the database tests ---- */

static bool count_one(void *ctx, const drk_search_record_t *r) {
  (void)r;
  (*(long *)ctx)++;
  return true;
}

static long count_records(drk_search_db_t *db, const drk_search_query_t *q) {
  long n = 0;
  char err[1200];
  CHECK(drk_search_db_query(db, q, count_one, &n, err, sizeof err), "%s", err);
  return n;
}

typedef struct find_ctx {
  int64_t id;
  drk_search_record_t r;
  bool found;
} find_ctx_t;

static bool find_one(void *ctx, const drk_search_record_t *r) {
  find_ctx_t *c = ctx;
  c->r = *r;
  c->found = true;
  return false;
}

static bool record_by_id(drk_search_db_t *db, int64_t id, drk_search_record_t *out) {
  find_ctx_t c = {id, {0}, false};
  drk_search_query_t q = {.id = id};
  char err[1200];
  if (!drk_search_db_query(db, &q, find_one, &c, err, sizeof err)) return false;
  if (c.found) *out = c.r;
  return c.found;
}

/* lines of a text file (malloc'ed array of malloc'ed strings; complete lines only) */
static char **read_lines(const char *path, int *n) {
  FILE *f = fopen(path, "r");
  char **lines = NULL;
  *n = 0;
  if (!f) return NULL;
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  while ((len = getline(&line, &cap, f)) > 0) {
    if (line[len - 1] != '\n') break; /* a line cut by the kill */
    line[len - 1] = 0;
    lines = realloc(lines, sizeof *lines * (size_t)(*n + 1));
    lines[(*n)++] = strdup(line);
  }
  free(line);
  fclose(f);
  return lines;
}

static void free_lines(char **l, int n) {
  for (int i = 0; i < n; i++) free(l[i]);
  free(l);
}

static int count_events(const char *path, const char *event) {
  int n;
  char **l = read_lines(path, &n);
  int k = 0;
  char needle[64];
  snprintf(needle, sizeof needle, "{\"event\":\"%s\"", event);
  for (int i = 0; i < n; i++) k += !strncmp(l[i], needle, strlen(needle));
  free_lines(l, n);
  return k;
}

/* ---- SIGKILL mid-tune: every committed record readable; --resume measures nothing twice ---- */
static void test_kill(void) {
  drk_search_space_t s = space();
  const char *dbp = path_in("kill.db"), *evp = path_in("kill.events.jsonl");
  fresh(dbp);
  remove(evp);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    drk_search_db_t *db = open_db(dbp);
    FILE *ev = fopen(evp, "w");
    landscape_t L;
    ls_init(&L, L_QUADRATIC, &s);
    L.slow_us = 3000; /* a measurement takes 3 ms: the kill lands mid-tune */
    run_opts_t ro = {.policy = "ppo", .budget = 300, .batch = 8, .screen = 4, .seed = 5, .db = db, .events = ev};
    drk_search_tune_result_t res;
    char err[1200];
    run(&s, &L, &ro, &res, err, sizeof err);
    _exit(3); /* not reached before the kill */
  }
  int trials = 0;
  for (int i = 0; i < 3000 && trials < 40; i++) {
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
    trials = count_events(evp, "trial");
  }
  kill(pid, SIGKILL);
  int st;
  waitpid(pid, &st, 0);
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "the child was not killed mid-tune (status %d)", st);
  /* every trial the child logged (it logs after the commit) is a readable record */
  drk_search_db_t *db = open_db(dbp);
  int n;
  char **lines = read_lines(evp, &n);
  int logged = 0, missing = 0;
  for (int i = 0; i < n; i++) {
    if (strncmp(lines[i], "{\"event\":\"trial\"", 16)) continue;
    drk_json_object_t o;
    char err[600];
    if (!drk_json_parse_object(lines[i], &o, err, sizeof err)) {
      CHECK(false, "event line %d: %s", i + 1, err);
      continue;
    }
    const drk_json_field_t *rec = drk_json_get(&o, "record"), *pt = drk_json_get(&o, "point");
    drk_search_record_t r;
    logged++;
    if (!rec || !pt || !record_by_id(db, (int64_t)rec->num, &r) || strcmp(r.schedule, pt->str)) missing++;
    drk_json_object_free(&o);
  }
  free_lines(lines, n);
  drk_search_query_t q = {.workload = s.workload};
  long stored = count_records(db, &q);
  CHECK(logged >= 40 && missing == 0, "%d of %d logged trials missing after SIGKILL", missing, logged);
  CHECK(stored >= logged && stored <= logged + 1, "%ld records for %d logged trials", stored, logged);
  printf("kill: SIGKILL after %d logged trials: %ld records readable, %d missing\n", logged, stored, missing);
  /* resume: the stored points count toward the budget and are not measured again */
  landscape_t L;
  ls_init(&L, L_QUADRATIC, &s);
  const char *calls = path_in("kill.calls");
  L.calls_log = fopen(calls, "w");
  int total = quick ? 64 : 100;
  run_opts_t ro = {.policy = "ppo", .budget = total, .batch = 8, .screen = 4, .seed = 5, .db = db, .resume = true};
  drk_search_tune_result_t res;
  char err[1200];
  CHECK(run(&s, &L, &ro, &res, err, sizeof err), "%s", err);
  fclose(L.calls_log);
  CHECK(res.resumed == stored, "resumed %d of %ld records", res.resumed, stored);
  CHECK(res.measured == total && L.calls == total - stored, "measured %d in all, %ld calls after %ld resumed",
        res.measured, L.calls, stored);
  /* none of the new measurements repeats a stored point */
  char **measured = read_lines(calls, &n);
  int repeats = 0;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < i; j++) repeats += !strcmp(measured[i], measured[j]);
  free_lines(measured, n);
  CHECK(repeats == 0, "%d points measured twice", repeats);
  long after = count_records(db, &q);
  CHECK(after == total, "%ld records after the resumed tune (%d points)", after, total);
  drk_search_db_close(db);
  printf("kill: resumed %d points, measured %ld more, %d repeats\n", res.resumed, L.calls, repeats);
}

/* ---- a planted wrong kernel: fast, invalid; never the best ---- */
typedef struct look {
  const char *text;
  int n, valid;
  char reason[256];
} look_t;

static bool look_one(void *ctx, const drk_search_record_t *r) {
  look_t *l = ctx;
  if (strcmp(r->schedule, l->text)) return true;
  l->n++;
  l->valid += r->valid;
  snprintf(l->reason, sizeof l->reason, "%s", r->reason);
  return true;
}

static void test_planted(void) {
  drk_search_space_t s = space();
  for (int lies = 0; lies < 2; lies++) {
    const char *dbp = path_in(lies ? "planted_lies.db" : "planted.db");
    fresh(dbp);
    drk_search_db_t *db = open_db(dbp);
    landscape_t L;
    ls_init(&L, L_QUADRATIC, &s);
    drk_sched_knobs_t planted = L.best; /* where every policy goes */
    L.planted = &planted;
    L.planted_lies = lies;
    const char *calls = path_in("planted.calls");
    L.calls_log = fopen(calls, "w");
    drk_search_config_t c;
    drk_search_config_default(&c); /* the winner is re-measured and marked stable */
    /* proposed in the first round (it is also where the search converges) */
    run_opts_t ro = {.policy = "ppo", .budget = 48, .batch = 8, .screen = 4, .seed = 3, .db = db, .config = &c,
                     .seeds = &planted, .n_seeds = 1};
    drk_search_tune_result_t res;
    char err[1200];
    CHECK(run(&s, &L, &ro, &res, err, sizeof err), "%s", err);
    fclose(L.calls_log);
    char ptext[512];
    drk_search_point_format(&s, &planted, ptext, sizeof ptext);
    int n, seen = 0;
    char **lines = read_lines(calls, &n);
    for (int i = 0; i < n; i++) seen += !strcmp(lines[i], ptext);
    free_lines(lines, n);
    CHECK(seen == 1, "the planted point was measured %d times (the test needs it measured)", seen);
    CHECK(res.found && !drk_search_point_equal(&res.best, &planted), "the planted kernel won");
    CHECK(res.stable && res.best_metrics.valid);
    drk_search_record_t r;
    char tkey[17];
    drk_search_target_key(&H200, tkey);
    CHECK(drk_search_db_best(db, s.workload, tkey, DRK_VERSION_STRING, &r, err, sizeof err) == DRK_SEARCH_DB_FOUND,
          "%s", err);
    CHECK(strcmp(r.schedule, ptext) != 0 && r.valid && r.stable, "best record: %s", r.schedule);
    CHECK(r.time_us == res.best_metrics.time_us);
    /* it is in the database, as invalid, with its reason */
    look_t lk = {ptext, 0, 0, ""};
    drk_search_query_t all = {.workload = s.workload};
    CHECK(drk_search_db_query(db, &all, look_one, &lk, err, sizeof err), "%s", err);
    CHECK(lk.n == 1 && lk.valid == 0, "the planted point: %d records, %d valid", lk.n, lk.valid);
    CHECK_CONTAINS(lk.reason, lies ? "reported valid without a positive time" : "planted: wrong outputs");
    drk_search_db_close(db);
    printf("planted (%s): measured once, stored invalid, best %s at %.3f us (the planted %s)\n",
           lies ? "valid without a time" : "fast and invalid", res.best_text, res.best_metrics.time_us, ptext);
  }
}

/* ---- fallback: three drops of more than 15% -> the stable point, diagnosed ---- */
typedef struct log_lines {
  char text[64][512];
  int n;
} log_lines_t;

static void collect_log(void *ctx, const char *line) {
  log_lines_t *l = ctx;
  if (l->n < 64) snprintf(l->text[l->n++], sizeof l->text[0], "%s", line);
}

static bool log_has(const log_lines_t *l, const char *needle) {
  for (int i = 0; i < l->n; i++)
    if (strstr(l->text[i], needle)) return true;
  return false;
}

static int fail_after; /* > 0: from this call on, every candidate fails its check */

static int failing_measure(void *ctx, const drk_search_space_t *s, const drk_sched_knobs_t *p,
                           drk_search_metrics_t *m) {
  landscape_t *L = ctx;
  int rc = ls_measure(ctx, s, p, m);
  if (!rc && fail_after > 0 && L->calls > fail_after) {
    m->valid = false;
    snprintf(m->msg, sizeof m->msg, "launch failed: unspecified launch failure");
  }
  return rc;
}

static void test_fallback(void) {
  drk_search_space_t s = space();
  for (int scenario = 0; scenario < 2; scenario++) {
    landscape_t L;
    ls_init(&L, L_QUADRATIC, &s);
    if (scenario == 0) {
      L.drift_after = 40; /* then the GPU throttles: everything 2.5x slower */
      L.drift_factor = 2.5;
      fail_after = 0;
    } else {
      fail_after = 40; /* then every candidate fails */
    }
    const char *evp = path_in(scenario ? "fallback_fail.jsonl" : "fallback_drift.jsonl");
    FILE *ev = fopen(evp, "w");
    log_lines_t log = {.n = 0};
    drk_search_config_t c;
    drk_search_config_default(&c);
    c.remeasure = 0;
    c.batch = 8;
    drk_search_policy_options_t po = {&c, 11, NULL, 0};
    char err[1200];
    drk_search_policy_t *p = drk_search_policy_create("evo", &s, &po, err, sizeof err);
    drk_search_tune_options_t o = {0};
    o.kernel = "k2_MatMul";
    o.description = DESC;
    o.target = &H200;
    o.budget = 96;
    o.seed = 11;
    o.config = &c;
    o.events = ev;
    o.measure = failing_measure;
    o.ctx = &L;
    o.log = collect_log;
    o.log_ctx = &log;
    drk_search_tune_result_t res;
    CHECK(drk_search_tune(&s, p, &o, &res, err, sizeof err), "%s", err);
    drk_search_policy_destroy(p);
    fclose(ev);
    CHECK(res.fallbacks >= 1, "scenario %d: no fallback", scenario);
    CHECK(log_has(&log, "fallback after 3 rounds with the best reward more than 15% below"));
    CHECK(log_has(&log, scenario ? "diagnosis: failures:" : "diagnosis: environment: the stable point measures"),
          "scenario %d: no diagnosis of the cause", scenario);
    CHECK(log_has(&log, "diagnostic: round"), "no diagnostic mode");
    CHECK(count_events(evp, "fallback") == res.fallbacks && count_events(evp, "diagnostic") >= 3);
    /* the first fallback comes three rounds after the change, not before */
    int n;
    char **lines = read_lines(evp, &n);
    int trials_before = 0;
    for (int i = 0; i < n && strncmp(lines[i], "{\"event\":\"fallback\"", 19); i++)
      trials_before += !strncmp(lines[i], "{\"event\":\"trial\"", 16);
    free_lines(lines, n);
    CHECK(trials_before >= 40 + 3 * 8 - 8 && trials_before <= 40 + 4 * 8, "fallback after %d trials", trials_before);
    printf("fallback (%s from trial 40): %d fallback(s), the first after %d trials\n",
           scenario ? "every candidate failing" : "GPU throttled 2.5x", res.fallbacks, trials_before);
    for (int i = 0; i < log.n; i++)
      if (strstr(log.text[i], "diagnosis")) {
        printf("  %s\n", log.text[i]);
        break;
      }
  }
  fail_after = 0;
}

/* ---- the event log: a JSON object per line, one trial event per measurement ---- */
static void test_events(void) {
  drk_search_space_t s = space();
  for (int energy = 0; energy < 2; energy++) {
    landscape_t L;
    ls_init(&L, L_RUGGED, &s);
    L.with_energy = energy;
    const char *evp = path_in(energy ? "events_energy.jsonl" : "events.jsonl");
    FILE *ev = fopen(evp, "w");
    run_opts_t ro = {.policy = "ppo", .budget = 40, .batch = 8, .screen = 4, .seed = 2, .events = ev};
    drk_search_tune_result_t res;
    char err[1200];
    CHECK(run(&s, &L, &ro, &res, err, sizeof err), "%s", err);
    fclose(ev);
    int n, trials = 0;
    char **lines = read_lines(evp, &n);
    CHECK(n > 2 && !strncmp(lines[0], "{\"event\":\"start\"", 16) && !strncmp(lines[n - 1], "{\"event\":\"end\"", 14));
    double best = -INFINITY;
    for (int i = 0; i < n; i++) {
      drk_json_object_t o;
      char e[600];
      if (!drk_json_parse_object(lines[i], &o, e, sizeof e)) {
        CHECK(false, "%s:%d: %s", evp, i + 1, e);
        continue;
      }
      const drk_json_field_t *k = drk_json_get(&o, "event");
      if (k && !strcmp(k->str, "trial")) {
        trials++;
        static const char *fields[] = {"kernel", "workload", "trial",  "round",       "stage", "policy",
                                       "point",  "valid",    "time_us", "reward",     "best_reward",
                                       "best_point", "t_s",  "unix",   "throughput", "fidelity"};
        for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++)
          CHECK(drk_json_get(&o, fields[f]) != NULL, "trial event without \"%s\"", fields[f]);
        const drk_json_field_t *r = drk_json_get(&o, "reward"), *b = drk_json_get(&o, "best_reward");
        if (r && r->num > best) best = r->num;
        CHECK(b && fabs(b->num - best) < 1e-9, "best_reward %g, best so far %g", b ? b->num : NAN, best);
        const drk_json_field_t *en = drk_json_get(&o, "energy");
        CHECK(en && (energy ? en->kind == DRK_JSON_NUM : en->kind == DRK_JSON_NULL));
      }
      if (k && !strcmp(k->str, "end")) {
        const drk_json_field_t *note = drk_json_get(&o, "note"), *eu = drk_json_get(&o, "energy_used");
        CHECK(note && eu && eu->b == (bool)energy);
        if (note) CHECK(energy ? !strstr(note->str, "energy") : strstr(note->str, "energy unavailable: gamma = 0") != NULL,
                        "note: %s", note->str);
      }
      drk_json_object_free(&o);
    }
    free_lines(lines, n);
    CHECK(trials == res.measured, "%d trial events for %d measurements", trials, res.measured);
    CHECK(res.energy_used == (bool)energy);
    if (!energy) CHECK_CONTAINS(res.note, "energy unavailable: gamma = 0");
  }
  printf("events: a JSON line per trial; 'energy unavailable: gamma = 0' reported without energy\n");
}

/* ---- deterministic given a seed ---- */
static char *measured_sequence(const drk_search_space_t *s, const char *policy, uint64_t seed, const char *action) {
  landscape_t L;
  ls_init(&L, L_RUGGED, s);
  char *buf = NULL;
  size_t len = 0;
  L.calls_log = open_memstream(&buf, &len);
  drk_search_config_t c;
  drk_search_config_default(&c);
  c.remeasure = 0;
  if (action) snprintf(c.ppo.action, sizeof c.ppo.action, "%s", action);
  run_opts_t ro = {.policy = policy, .budget = quick ? 24 : 32, .batch = 8, .screen = 4, .seed = seed, .config = &c};
  drk_search_tune_result_t res;
  char err[1200];
  CHECK(run(s, &L, &ro, &res, err, sizeof err), "%s", err);
  fclose(L.calls_log);
  return buf;
}

static void test_determinism(void) {
  drk_search_space_t s = space();
  static const struct {
    const char *policy, *action;
  } ps[] = {{"random", NULL}, {"evo", NULL}, {"ppo", NULL}, {"ppo", "categorical"}};
  for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
    char *a = measured_sequence(&s, ps[i].policy, 9, ps[i].action), *b = measured_sequence(&s, ps[i].policy, 9, ps[i].action),
         *c = measured_sequence(&s, ps[i].policy, 10, ps[i].action);
    CHECK(!strcmp(a, b), "%s: two runs with seed 9 measured different points", ps[i].policy);
    CHECK(strcmp(a, c) != 0, "%s: seeds 9 and 10 measured the same points", ps[i].policy);
    free(a);
    free(b);
    free(c);
  }
}

/* ---- the prune hook: pruned points are never measured ---- */
static bool prune_smem(void *ctx, const drk_sched_knobs_t *p, char *why, size_t n) {
  (void)ctx;
  if (p->v[DRK_KNOB_MM_TILE_N] == 256 && p->v[DRK_KNOB_MM_STAGES] >= 5) {
    snprintf(why, n, "shared memory: %d stages of a 128x256 tile exceed 227 KB", p->v[DRK_KNOB_MM_STAGES]);
    return false;
  }
  return true;
}

/* An expensive prune hook (drkc tune forks a lowering per verdict): counts its calls and keeps
 * its verdicts in a memo that prune_known answers from. */
typedef struct {
  int calls, n;
  uint64_t hash[4096];
  bool ok[4096];
} prune_memo_t;

static bool prune_counted(void *ctx, const drk_sched_knobs_t *p, char *why, size_t n) {
  prune_memo_t *m = ctx;
  m->calls++;
  bool ok = prune_smem(NULL, p, why, n);
  if (m->n < 4096) m->hash[m->n] = drk_search_point_hash(p), m->ok[m->n++] = ok;
  return ok;
}

static int prune_known_memo(void *ctx, const drk_sched_knobs_t *p) {
  prune_memo_t *m = ctx;
  uint64_t h = drk_search_point_hash(p);
  for (int i = 0; i < m->n; i++)
    if (m->hash[i] == h) return m->ok[i];
  return -1;
}

static void test_prune(void) {
  drk_search_space_t s = space();
  s.prune = prune_smem;
  const char *names[] = {"random", "evo", "ppo", "ppo"};
  int calls[2] = {0, 0};
  for (int k = 0; k < 4; k++) {
    /* the last run: PPO with prune_known, whose rollouts and action masks must not call prune */
    static prune_memo_t memo;
    memset(&memo, 0, sizeof memo);
    s.prune = prune_counted, s.prune_ctx = &memo, s.prune_known = k == 3 ? prune_known_memo : NULL;
    landscape_t L;
    ls_init(&L, L_INVALID, &s);
    char *buf = NULL;
    size_t len = 0;
    L.calls_log = open_memstream(&buf, &len);
    run_opts_t ro = {.policy = names[k], .budget = quick ? 64 : 128, .batch = 8, .screen = 4, .seed = 4};
    drk_search_tune_result_t res;
    char err[1200];
    CHECK(run(&s, &L, &ro, &res, err, sizeof err), "%s", err);
    fclose(L.calls_log);
    int bad = 0;
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
      drk_sched_knobs_t p;
      char why[200];
      if (drk_search_point_parse(&s, line, &p, err, sizeof err) && !prune_smem(NULL, &p, why, sizeof why)) bad++;
    }
    free(buf);
    CHECK(bad == 0, "%s measured %d pruned points", names[k], bad);
    printf("prune: %-6s measured %d pruned points in %d trials (the policy skips them; %d reached the loop), best "
           "%.3f us (optimum %.3f)\n",
           names[k], bad, res.measured, res.pruned, res.best_metrics.time_us, L.best_time);
    if (k >= 2) calls[k - 2] = memo.calls;
  }
  /* without prune_known every action mask of every rollout step asks the hook */
  CHECK(calls[1] * 4 < calls[0], "ppo with prune_known called prune %d times, without %d", calls[1], calls[0]);
  printf("prune: ppo called the prune hook %d times, %d with prune_known\n", calls[0], calls[1]);
}

/* ---- warm start from a similar workload in the database ---- */
static void test_warm(void) {
  drk_search_space_t s = space();
  const char *dbp = path_in("warm.db");
  fresh(dbp);
  drk_search_db_t *db = open_db(dbp);
  /* a tune of a similar workload (another key, N=1024) on the same landscape */
  landscape_t L;
  ls_init(&L, L_RUGGED, &s);
  drk_search_config_t c;
  drk_search_config_default(&c);
  run_opts_t ro = {.policy = "evo", .budget = 300, .batch = 8, .screen = 1, .seed = 1, .db = db, .config = &c,
                   .workload = "11111111111111111111111111111111", .description = "mm_ws M=128 N=1024 K=768 dtype=f16"};
  drk_search_tune_result_t res;
  char err[1200];
  CHECK(run(&s, &L, &ro, &res, err, sizeof err), "%s", err);
  CHECK(drk_search_point_equal(&res.best, &L.best), "the first tune missed the optimum");
  /* this workload, 16 trials: from the neighbour's best points, and without them */
  double with = 0, without = 0;
  for (int w = 1; w >= 0; w--) {
    landscape_t L2;
    ls_init(&L2, L_RUGGED, &s);
    run_opts_t r2 = {.policy = "ppo", .budget = 16, .batch = 8, .screen = 4, .seed = 2, .db = db, .warm = w == 1,
                     .workload = w ? "22222222222222222222222222222222" : "33333333333333333333333333333333"};
    CHECK(run(&s, &L2, &r2, &res, err, sizeof err), "%s", err);
    *(w ? &with : &without) = frac_of_opt(&L2, &res);
  }
  CHECK(with == 1.0, "warm start: %.4f of the optimum in 16 trials", with);
  printf("warm start: 16 trials reach %.4f of the optimum from a similar workload's records, %.4f without\n", with,
         without);
  drk_search_db_close(db);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: test_search_tune optimum|compare|kill|planted|fallback|events|determinism|prune|warm DIR\n");
    return 2;
  }
  snprintf(dir, sizeof dir, "%s", argv[2]);
  quick = getenv("DRK_SEARCH_TEST_QUICK") && *getenv("DRK_SEARCH_TEST_QUICK") == '1';
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
  if (!strcmp(argv[1], "optimum")) test_optimum(argc > 3 ? strtoull(argv[3], NULL, 10) : 7);
  else if (!strcmp(argv[1], "compare")) test_compare(argc > 3 ? atoi(argv[3]) : 64, argc > 4 ? atoi(argv[4]) : 3, argc > 5 ? argv[5] : NULL);
  else if (!strcmp(argv[1], "kill")) test_kill();
  else if (!strcmp(argv[1], "planted")) test_planted();
  else if (!strcmp(argv[1], "fallback")) test_fallback();
  else if (!strcmp(argv[1], "events")) test_events();
  else if (!strcmp(argv[1], "determinism")) test_determinism();
  else if (!strcmp(argv[1], "prune")) test_prune();
  else if (!strcmp(argv[1], "warm")) test_warm();
  else {
    fprintf(stderr, "unknown test '%s'\n", argv[1]);
    return 2;
  }
  return check_status(argv[1]);
}
