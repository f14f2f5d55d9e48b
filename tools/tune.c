/* drkc tune (tune.h). */
#include "tools/tune.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backends/targets.h"
#include "pipeline/pipeline.h"
#include "tools/drkc.h"
#include "tools/tune_worker.h"

static const char tune_usage[] =
    "usage: drkc tune MODEL [--target=T (default sm_90a)] [--trials=N (default 64 per kernel)]\n"
    "                 [--time=SECONDS (whole tune)] [--kernels=K (most time-consuming K, default all)]\n"
    "                 [--out=FILE (the tuned schedules, default MODEL.sched)] [--log=FILE (JSON lines)]\n"
    "                 [--device=N] [--iters=N (timed runs per candidate, default 20)]\n"
    "                 [--timeout=SECONDS (per candidate, default 60)] [--seed=N] [compile options]\n"
    "Tunes the knobs of MODEL's kernels on the local GPU, most time-consuming first: every\n"
    "candidate is compiled, checked against the heuristic's module on fresh random inputs and\n"
    "timed in a worker process. Writes the best valid schedule of each kernel to --out, the text\n"
    "`drkc MODEL --schedules=FILE` applies, and prints the model's time before and after.\n";

typedef struct tkernel {
  const char *name;
  size_t node;
  char wl[33];
  const char *kind;
  uint32_t space;
  drk_sched_knobs_t heur; /* the heuristic's values of the space's knobs */
  double ms;              /* the reference's time of the node's kernels */
  drk_sched_knobs_t best;
  double best_ms;
  bool tuned;
} tkernel_t;

typedef struct tuner {
  drk_compile_options_t c;
  drk_graph_t *g;
  char dir[256];
  drk_tune_worker_t w;
  int iters;
  uint64_t seed, rng;
  FILE *log;
  int trials_done, invalid, failed;
  double t0, deadline;
} tuner_t;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t rnd(tuner_t *t) { return drk_splitmix64(&t->rng); }

/* ---- the knob space of one kernel ---- */
static int domain(drk_knob_id_t id, int *vals) {
  const drk_knob_def_t *kd = drk_knob_def(id);
  int n = 0;
  for (int v = kd->lo; v <= kd->hi && n < 64; v = kd->pow2 ? v * 2 : v + 1) vals[n++] = v;
  return n;
}

static void random_point(tuner_t *t, const tkernel_t *k, drk_sched_knobs_t *p) {
  *p = k->heur;
  for (int i = 0; i < DRK_KNOB_COUNT; i++)
    if (k->space & (1u << i)) {
      int vals[64], n = domain((drk_knob_id_t)i, vals);
      drk_knob_set(p, (drk_knob_id_t)i, vals[rnd(t) % (uint64_t)n]);
    }
}

/* p with one or two knobs moved to a neighbouring or random legal value */
static void mutate(tuner_t *t, const tkernel_t *k, drk_sched_knobs_t *p) {
  int ids[DRK_KNOB_COUNT], m = 0;
  for (int i = 0; i < DRK_KNOB_COUNT; i++)
    if (k->space & (1u << i)) ids[m++] = i;
  if (!m) return;
  int changes = 1 + (int)(rnd(t) % 2);
  for (int c = 0; c < changes; c++) {
    drk_knob_id_t id = (drk_knob_id_t)ids[rnd(t) % (uint64_t)m];
    int vals[64], n = domain(id, vals), cur = 0;
    for (int j = 0; j < n; j++)
      if (vals[j] == p->v[id]) cur = j;
    int next = rnd(t) % 3 ? cur + ((rnd(t) & 1) ? 1 : -1) : (int)(rnd(t) % (uint64_t)n);
    if (next < 0) next = 1;
    if (next >= n) next = n - 2;
    if (next < 0) next = 0;
    drk_knob_set(p, id, vals[next]);
  }
}

static bool same_point(const tkernel_t *k, const drk_sched_knobs_t *a, const drk_sched_knobs_t *b) {
  for (int i = 0; i < DRK_KNOB_COUNT; i++)
    if ((k->space & (1u << i)) && a->v[i] != b->v[i]) return false;
  return true;
}

/* ---- one candidate ---- */
static void log_event(tuner_t *t, const tkernel_t *k, int trial, const drk_sched_knobs_t *p, const drk_tune_result_t *r,
                      const char *stage) {
  if (!t->log) return;
  char pt[512];
  drk_sched_knobs_format(p, pt, sizeof pt);
  fprintf(t->log,
          "{\"t\": %.3f, \"kernel\": \"%s\", \"wl\": \"%s\", \"trial\": %d, \"stage\": \"%s\", \"point\": \"%s\", "
          "\"valid\": %s, \"kernel_ms\": %.6f, \"ref_kernel_ms\": %.6f, \"run_ms\": %.6f, \"max_err\": %.3g, "
          "\"sm_mhz\": %.0f, \"power_w\": %.1f, \"best_ms\": %.6f, \"msg\": \"",
          now_s() - t->t0, k->name, k->wl, trial, stage, pt, r->valid ? "true" : "false", r->kernel_ms, r->ref_kernel_ms,
          r->run_ms, r->max_err, r->sm_mhz, r->power_w, k->best_ms);
  for (const char *c = r->msg; *c; c++) fprintf(t->log, *c == '"' || *c == '\\' ? "\\%c" : (unsigned char)*c < 32 ? " " : "%c", *c);
  fprintf(t->log, "\"}\n");
  fflush(t->log);
}

/* Compiles the model with kernel k at point p (its --schedules line) and measures it. A point
 * the lowering refuses (an illegal combination) is an invalid candidate with the error. */
static drk_tune_result_t candidate(tuner_t *t, const tkernel_t *k, const drk_sched_knobs_t *p) {
  drk_tune_result_t r = {0};
  drk_sched_entry_t e = {.name = k->name, .node = k->node, .knobs = *p,
                         .loc = {.file = "drkc tune", .node_index = -1}};
  memcpy(e.wl, k->wl, sizeof e.wl);
  drk_schedules_t tbl = {.n = 1, .entries = &e};
  drk_compile_options_t c = t->c;
  c.schedules = &tbl;
  drk_diag_t d;
  drk_diag_init(&d, NULL);
  void *bytes = NULL;
  size_t size = 0;
  if (!drk_pipeline_build(t->g, &c, "module", &bytes, &size, &d)) {
    snprintf(r.msg, sizeof r.msg, "compile: %.200s", d.first);
    return r;
  }
  char path[512];
  snprintf(path, sizeof path, "%s/cand.drkm", t->dir);
  FILE *f = fopen(path, "wb");
  bool ok = f && fwrite(bytes, 1, size, f) == size;
  if (f && fclose(f) != 0) ok = false;
  free(bytes);
  if (!ok) {
    snprintf(r.msg, sizeof r.msg, "cannot write %s: %s", path, strerror(errno));
    return r;
  }
  return drk_tune_worker_measure(&t->w, path, k->name, 3, t->iters, t->seed + (uint64_t)t->trials_done);
}

/* Evolutionary search over k's space within `trials` measurements: the heuristic's point
 * first (the baseline, measured like every candidate), then a population of the best valid
 * points, each generation mutating tournament winners; random points while the population is
 * small. Invalid candidates never enter it. */
static void tune_kernel(tuner_t *t, tkernel_t *k, int trials) {
  enum { POP = 8 };
  drk_sched_knobs_t pop[POP], seen[512];
  double pop_ms[POP];
  int npop = 0, nseen = 0;
  k->best = k->heur;
  k->best_ms = 0;
  for (int trial = 0; trial < trials && now_s() < t->deadline; trial++) {
    drk_sched_knobs_t p;
    if (trial == 0) p = k->heur;
    else {
      int tries = 0;
      do {
        if (npop < 3 || rnd(t) % 4 == 0) random_point(t, k, &p);
        else {
          int a = (int)(rnd(t) % (uint64_t)npop), b = (int)(rnd(t) % (uint64_t)npop);
          p = pop[pop_ms[a] <= pop_ms[b] ? a : b];
          mutate(t, k, &p);
        }
        bool dup = false;
        for (int i = 0; i < nseen && !dup; i++) dup = same_point(k, &seen[i], &p);
        if (!dup) break;
      } while (++tries < 50);
      if (tries == 50) break; /* the space is exhausted */
    }
    if (nseen < 512) seen[nseen++] = p;
    drk_tune_result_t r = candidate(t, k, &p);
    t->trials_done++;
    if (!r.ok) t->failed++;
    if (!r.valid) {
      t->invalid++;
      log_event(t, k, trial, &p, &r, "invalid");
      if (trial == 0) {
        fprintf(stderr, "drkc tune: %s: the heuristic's own schedule fails: %s\n", k->name, r.msg);
        return;
      }
      continue;
    }
    if (trial == 0 || r.kernel_ms < k->best_ms) k->best = p, k->best_ms = r.kernel_ms;
    if (npop < POP) pop[npop] = p, pop_ms[npop++] = r.kernel_ms;
    else {
      int worst = 0;
      for (int i = 1; i < POP; i++)
        if (pop_ms[i] > pop_ms[worst]) worst = i;
      if (r.kernel_ms < pop_ms[worst]) pop[worst] = p, pop_ms[worst] = r.kernel_ms;
    }
    log_event(t, k, trial, &p, &r, trial == 0 ? "heuristic" : "candidate");
  }
  k->tuned = k->best_ms > 0;
}

/* The winner measured again, against the heuristic's point in the same worker call. */
static double remeasure(tuner_t *t, tkernel_t *k, double *out_ref) {
  drk_tune_result_t r = candidate(t, k, &k->best);
  log_event(t, k, -1, &k->best, &r, "winner");
  *out_ref = r.ref_kernel_ms;
  return r.valid ? r.kernel_ms : -1;
}

static int cmp_ms(const void *a, const void *b) {
  const tkernel_t *x = a, *y = b;
  return x->ms < y->ms ? 1 : x->ms > y->ms ? -1 : 0;
}

int drkc_tune_main(int argc, char **argv) {
  tuner_t t = {.iters = 20, .seed = 1};
  const char *model = NULL, *out = NULL, *log = NULL, *targets = "sm_90a", *sched_path = NULL;
  int trials = 64, max_kernels = 0, device = 0;
  double timeout = 60, budget = 0;
  static const char *const o_tr[] = {"--trials", NULL}, *const o_time[] = {"--time", NULL},
                           *const o_k[] = {"--kernels", NULL}, *const o_out[] = {"--out", "-o", NULL},
                           *const o_log[] = {"--log", NULL}, *const o_dev[] = {"--device", NULL},
                           *const o_it[] = {"--iters", NULL}, *const o_to[] = {"--timeout", NULL},
                           *const o_seed[] = {"--seed", NULL}, *const o_target[] = {"--target", NULL};
  for (int i = 2; i < argc; i++) {
    const char *v;
    int k;
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(tune_usage, stdout);
      return 0;
    }
    if ((v = drkc_opt_value(argc, argv, &i, o_tr))) trials = atoi(v);
    else if ((v = drkc_opt_value(argc, argv, &i, o_time))) budget = atof(v);
    else if ((v = drkc_opt_value(argc, argv, &i, o_k))) max_kernels = atoi(v);
    else if ((v = drkc_opt_value(argc, argv, &i, o_out))) out = v;
    else if ((v = drkc_opt_value(argc, argv, &i, o_log))) log = v;
    else if ((v = drkc_opt_value(argc, argv, &i, o_dev))) device = atoi(v);
    else if ((v = drkc_opt_value(argc, argv, &i, o_it))) t.iters = atoi(v);
    else if ((v = drkc_opt_value(argc, argv, &i, o_to))) timeout = atof(v);
    else if ((v = drkc_opt_value(argc, argv, &i, o_seed))) t.seed = strtoull(v, NULL, 10);
    else if ((v = drkc_opt_value(argc, argv, &i, o_target))) targets = v;
    else if ((k = drkc_parse_compile_option(argc, argv, &i, &t.c, &sched_path))) {
      if (k < 0) return 2;
    } else if (argv[i][0] == '-') return drkc_usage_error("unknown option '%s' for 'drkc tune'", argv[i]);
    else if (model) return drkc_usage_error("more than one model given ('%s')", argv[i]);
    else model = argv[i];
  }
  if (!model) return drkc_usage_error("drkc tune needs a MODEL%s", "");
  if (trials < 1 || t.iters < 1 || timeout <= 0) return drkc_usage_error("--trials, --iters and --timeout must be positive%s", "");
  if (sched_path) return drkc_usage_error("--schedules is what drkc tune writes (--out); tune from the heuristic%s", "");
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  if (!drk_target_parse_list(targets, &t.c.targets, &d)) return 1;
  t.c.command_line = "drkc tune";
  t.rng = t.seed;
  t.t0 = now_s();
  t.deadline = budget > 0 ? t.t0 + budget : INFINITY;
  snprintf(t.dir, sizeof t.dir, "%s/drkc-tune-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(t.dir)) {
    fprintf(stderr, "drkc tune: error: cannot make a work folder: %s\n", strerror(errno));
    return 1;
  }
  int rc = 1;
  tkernel_t *ks = NULL;
  size_t nks = 0;
  /* the graph after the graph stages, and the reference module from the rest */
  drk_pipeline_t *p = drk_pipeline_create(&t.c, model, NULL, "module", &d);
  void *bytes = NULL;
  size_t size = 0;
  char ref[512];
  snprintf(ref, sizeof ref, "%s/ref.drkm", t.dir);
  if (!p || !drk_pipeline_run_to(p, "package") || !drk_pipeline_output(p, "module", &bytes, &size)) goto done;
  t.g = drk_pipeline_graph(p);
  FILE *f = fopen(ref, "wb");
  bool wrote = f && fwrite(bytes, 1, size, f) == size;
  if (f && fclose(f) != 0) wrote = false;
  free(bytes);
  if (!wrote) {
    fprintf(stderr, "drkc tune: error: cannot write %s\n", ref);
    goto done;
  }
  const drk_lowered_t *l = drk_pipeline_lowered(p);
  drk_tune_worker_init(&t.w, ref, device, timeout);
  for (size_t i = 0; i < t.g->n_inputs && i < DRK_TUNE_MAX_INPUTS; i++)
    t.w.bound[i] = drk_graph_index_bound(t.g, t.g->inputs[i], 4);
  double *ms = calloc(l->n_launches + 1, sizeof *ms);
  char msg[256];
  if (!drk_tune_worker_profile_reference(&t.w, ms, l->n_launches, t.iters, msg, sizeof msg)) {
    fprintf(stderr, "drkc tune: error: profiling the heuristic's module: %s\n", msg);
    free(ms);
    goto done;
  }
  /* kernels: a node's first launch names it; its knob space and time are its launches' */
  ks = calloc(l->n_launches + 1, sizeof *ks);
  double total = 0;
  for (size_t i = 0; i < l->n_launches; i++) {
    const drk_launch_t *la = &l->launches[i];
    total += ms[i];
    size_t j = 0;
    while (j < nks && l->launches[ks[j].node].node != la->node) j++;
    if (j == nks) {
      ks[nks] = (tkernel_t){.name = la->kernel->name, .node = i, .kind = la->sched.kind};
      memcpy(ks[nks].wl, la->workload, sizeof ks[nks].wl);
      nks++;
    }
    ks[j].ms += ms[i];
    ks[j].space |= la->knob_space;
    for (int b = 0; b < DRK_KNOB_COUNT; b++)
      if ((la->knob_space & (1u << b)) && !(ks[j].heur.set & (1u << b)))
        drk_knob_set(&ks[j].heur, (drk_knob_id_t)b, drk_schedule_knob_value(&la->sched, (drk_knob_id_t)b));
  }
  free(ms);
  /* entries name kernels by their node index: the launch index above stood in for it */
  for (size_t j = 0; j < nks; j++) ks[j].node = (size_t)strtoull(ks[j].name + 1, NULL, 10);
  qsort(ks, nks, sizeof *ks, cmp_ms);
  if (log && !(t.log = fopen(log, "w"))) fprintf(stderr, "drkc tune: cannot write the log %s: %s\n", log, strerror(errno));
  printf("drkc tune: %s: %zu kernels, %.3f ms per run (kernels one by one); tuning up to %d trials per kernel\n", model,
         nks, total, trials);
  int tuned = 0;
  for (size_t j = 0; j < nks; j++) {
    if (!ks[j].space || (max_kernels && tuned >= max_kernels) || now_s() >= t.deadline) continue;
    tune_kernel(&t, &ks[j], trials);
    tuned++;
    if (!ks[j].tuned) continue;
    double refk = 0, again = remeasure(&t, &ks[j], &refk);
    char pt[512];
    drk_sched_knobs_format(&ks[j].best, pt, sizeof pt);
    printf("  %-28s %5.1f%% of the run: heuristic %.4f ms, best %.4f ms (re-measured %.4f vs %.4f): %s\n", ks[j].name,
           total > 0 ? 100 * ks[j].ms / total : 0, ks[j].ms, ks[j].best_ms, again, refk, pt);
    fflush(stdout);
  }
  /* the tuned schedules, and the model with all of them against the heuristic's */
  char outp[4096];
  snprintf(outp, sizeof outp, "%s", out ? out : model);
  if (!out) {
    char *dot = strrchr(outp, '.');
    snprintf(dot ? dot : outp + strlen(outp), sizeof outp - (size_t)((dot ? dot : outp + strlen(outp)) - outp), ".sched");
  }
  FILE *so = fopen(outp, "w");
  if (!so) {
    fprintf(stderr, "drkc tune: error: cannot write %s: %s\n", outp, strerror(errno));
    goto done;
  }
  fprintf(so, "# drkc tune %s: %d trials, %d invalid, %d worker restarts, %.0f s\n", model, t.trials_done, t.invalid,
          t.w.restarts, now_s() - t.t0);
  size_t nbest = 0;
  for (size_t j = 0; j < nks; j++) {
    if (!ks[j].tuned || same_point(&ks[j], &ks[j].best, &ks[j].heur)) continue;
    char pt[512];
    drk_sched_knobs_format(&ks[j].best, pt, sizeof pt);
    fprintf(so, "%s wl=%s %s %s\n", ks[j].name, ks[j].wl, ks[j].kind ? ks[j].kind : "plain", pt);
    nbest++;
  }
  fclose(so);
  if (nbest) { /* the whole model with every tuned kernel, against the heuristic's, in one worker call */
    drk_sched_entry_t *es = calloc(nbest, sizeof *es);
    size_t n = 0;
    for (size_t j = 0; j < nks; j++) {
      if (!ks[j].tuned || same_point(&ks[j], &ks[j].best, &ks[j].heur)) continue;
      es[n] = (drk_sched_entry_t){.name = ks[j].name, .node = ks[j].node, .knobs = ks[j].best,
                                  .loc = {.file = outp, .node_index = -1}};
      memcpy(es[n++].wl, ks[j].wl, sizeof es[0].wl);
    }
    drk_schedules_t tbl = {.n = n, .entries = es};
    drk_compile_options_t c = t.c;
    c.schedules = &tbl;
    drk_diag_t qd;
    drk_diag_init(&qd, NULL);
    char path[512];
    snprintf(path, sizeof path, "%s/cand.drkm", t.dir);
    void *mb = NULL;
    size_t msz = 0;
    FILE *mf = NULL;
    if (drk_pipeline_build(t.g, &c, "module", &mb, &msz, &qd) && (mf = fopen(path, "wb"))) {
      bool okw = fwrite(mb, 1, msz, mf) == msz;
      if (fclose(mf) == 0 && okw) {
        drk_tune_result_t r = drk_tune_worker_measure(&t.w, path, ks[0].name, 3, t.iters, t.seed + 7777);
        if (r.valid)
          printf("drkc tune: the model, kernels one by one: %.4f ms tuned vs %.4f ms heuristic (%.3fx)\n", r.run_ms,
                 r.ref_run_ms, r.run_ms > 0 ? r.ref_run_ms / r.run_ms : 0);
        else
          printf("drkc tune: the tuned model FAILED its check: %s\n", r.msg);
      }
    } else {
      printf("drkc tune: the tuned model did not compile: %s\n", qd.first);
    }
    free(mb);
    free(es);
  }
  printf("drkc tune: %d trials (%d invalid, %d worker restarts) in %.0f s; %zu kernels changed; wrote %s\n",
         t.trials_done, t.invalid, t.w.restarts, now_s() - t.t0, nbest, outp);
  rc = 0;
done:
  drk_tune_worker_stop(&t.w);
  if (t.log) fclose(t.log);
  free(ks);
  drk_pipeline_destroy(p);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "%s/cand.drkm", t.dir);
  unlink(cmd);
  unlink(ref);
  rmdir(t.dir);
  return rc;
}
