/* drkc tune (tune.h): per kernel, drk_search_tune (search/tune.h) over the kernel's knob space,
 * measured by the tune worker (tune_worker.h), recorded in the kernel database (search/db.h). */
#include "tools/tune.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backends/targets.h"
#include "lower/fuse.h"
#include "pipeline/dynamic.h"
#include "pipeline/pipeline.h"
#include "search/db.h"
#include "search/json.h"
#include "search/tune.h"
#include "tools/drkc.h"
#include "tools/tune_mpi.h"
#include "tools/tune_worker.h"

static const char tune_usage[] =
    "usage: drkc tune MODEL [--target=T (default sm_90a)] [--policy=rl|evolutionary|random (default rl)]\n"
    "                 [--trials=N (per kernel, default 64)] [--time=DURATION (whole tune: 300, 300s, 5m, 1h)]\n"
    "                 [--db=FILE (default: --out's name with .db)] [--resume] [--config=tune.conf]\n"
    "                 [--kernels=K (most time-consuming K, default all)] [--out=FILE (default MODEL.sched)]\n"
    "                 [--log=FILE (JSON lines)] [--device=N] [--iters=N (timed runs per candidate, default 20)]\n"
    "                 [--timeout=SECONDS (per candidate, default 60)] [--seed=N] [--jobs=N] [compile options]\n"
    "                 [--mpi [--ranks=compile:K,measure:G] [--compile-timeout=SECONDS (default 300)]]\n"
    "Tunes the knobs of MODEL's kernels on the local GPU, most time-consuming first, with a search\n"
    "policy (rl: PPO over a learned cost model; evolutionary; random). Every candidate is compiled\n"
    "(a round's candidates in parallel, --jobs at once), checked against the heuristic's module on\n"
    "fresh random inputs and timed in a worker process; every measurement is committed to the\n"
    "kernel database as it is made (--resume continues a tune without measuring a point again),\n"
    "and each kernel's winner, re-measured, becomes its stable record there: `drkc MODEL --db=FILE`\n"
    "compiles with those. Also writes the winners to --out (the text `drkc MODEL --schedules=FILE`\n"
    "applies) and prints the model's time before and after. --config: the search settings and\n"
    "stages (docs/tuning.md).\n"
    "--dynamic=DIMS [--buckets=...]: the buckets of `drkc MODEL --dynamic` one after another, each its\n"
    "own tune of the bucket's graph (padding masks and all) at its sizes, --time shared among them,\n"
    "into one database (the workload keys hold the shapes: a record per bucket); its --out per bucket\n"
    "(OUT with the bucket's sizes before the extension), the database --db (default: --out's name with\n"
    ".db). `drkc MODEL --dynamic=... --db=FILE` compiles each bucket with its records.\n"
    "--mpi (under mpirun): rank 0 searches, compile ranks compile the candidates, measure ranks (one\n"
    "per GPU; by default every rank that sees one) measure them; a rank that dies or hangs loses only\n"
    "its candidate, which another rank takes (docs/distributed.md).\n";

typedef struct tkernel {
  const char *name;
  size_t node;       /* node index (the k<node>_ of its name) */
  size_t launch;     /* its first launch */
  char wl[33];
  const char *kind;
  uint32_t space;
  drk_sched_knobs_t heur; /* the heuristic's values of the space's knobs */
  double ms;              /* the reference's time of the node's kernels */
  double bytes, flops;    /* moved by its launches' buffers; its matmuls' (0: unknown) */
  bool flops_known;
  char precision[8];
  char description[256];
  /* results */
  bool tried, tuned, stable, timed_out;
  drk_sched_knobs_t best;
  char best_text[512];
  double heur_us, best_us, gen_s, tune_s;
  int trials, invalid;
  int pruned; /* points the lowering refused, never compiled to code nor measured */
  int64_t record;
} tkernel_t;

/* a candidate compiled ahead of its measurement (prepare) */
typedef struct prepped {
  drk_sched_knobs_t point;
  uint64_t job; /* --mpi: its candidate at rank 0's queue */
  char path[512];
  bool ok;
  bool spent; /* measured: its file is gone (a re-measurement compiles the point again) */
  char msg[256];
} prepped_t;

#define MAX_PREP 64
#define PRUNE_MEMO 1024

typedef struct tuner {
  drk_compile_options_t c;
  drk_graph_t *g;
  char dir[256];
  drk_tune_worker_t w;
  int iters, jobs;
  uint64_t seed;
  FILE *log;
  double t0, deadline, hard_deadline; /* --time: shared by the kernels; past hard_deadline measuring stops */
  double k_deadline;                   /* the kernel's share of --time ends (INFINITY: no --time) */
  int measured, consecutive_failures, seq;
  tkernel_t *k; /* the kernel being tuned */
  /* the progress line (stderr on a TTY): which kernel of how many, trials per kernel */
  bool tty;
  int k_index, k_count, trials;
  int k_measured; /* measurements of the kernel being tuned */
  double k_best_us, k_ref_us; /* its fastest valid measurement so far and the heuristic's time
                               * measured with it (< 0: none) */
  prepped_t prep[MAX_PREP];
  int n_prep;
  /* the prune hook's verdicts for the kernel being tuned, by point hash (open addressing) */
  struct prune_memo {
    uint64_t hash;
    bool used, ok;
    char why[160];
  } memo[PRUNE_MEMO];
  int n_memo, pruned;
  double measure_s;   /* time inside measurements (the worker's requests; --mpi: the measure ranks') */
  drk_tune_mpi_t *mpi; /* --mpi: the ranks (tune_mpi.h); NULL: the local worker */
  double compile_timeout_s;
  /* the fake measurement of the tests (see fake_measure) */
  bool fake;
  drk_sched_knobs_t planted;
  FILE *fake_log;
} tuner_t;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* --time: seconds, or a number with s, m or h */
static bool parse_duration(const char *v, double *out) {
  char *end;
  double x = strtod(v, &end);
  if (end == v || !(x > 0)) return false;
  if (!strcmp(end, "") || !strcmp(end, "s")) *out = x;
  else if (!strcmp(end, "m") || !strcmp(end, "min")) *out = 60 * x;
  else if (!strcmp(end, "h")) *out = 3600 * x;
  else return false;
  return true;
}

/* ---- what the graph and the lowering know of a kernel ---- */
static const char *precision_name(drk_dtype_t t, bool tf32) {
  switch (t) {
    case DRK_DT_F16: return "fp16";
    case DRK_DT_BF16: return "bf16";
    case DRK_DT_F8E4M3: case DRK_DT_F8E5M2: return "fp8";
    case DRK_DT_F32: return tf32 ? "tf32" : "fp32";
    case DRK_DT_F64: return "fp64";
    default: return drk_dtype_name(t);
  }
}

static double value_bytes(const drk_value_t *v) {
  int64_t n = drk_shape_numel(&v->shape);
  return n > 0 ? (double)n * drk_dtype_bits(v->dtype) / 8.0 : 0;
}

/* H200 (and H100) SXM dense peaks per compute precision, FLOP/s */
static double peak_flops(const char *precision) {
  if (!strcmp(precision, "fp8")) return 1979e12;
  if (!strcmp(precision, "fp16") || !strcmp(precision, "bf16")) return 989e12;
  if (!strcmp(precision, "tf32")) return 494e12;
  return 67e12;
}
#define HBM_BYTES_PER_S 4.2e12

/* Bytes: every distinct graph value a launch of the node takes as a buffer, once (a floor on
 * the traffic). Flops: the group's matmuls and convolutions (2 per multiply-add); known for
 * kernels whose group has none too (elementwise, row kernels: their flops are not the bound),
 * unknown for attention. Precision and description from the group's first matmul or else its
 * first member. */
static void kernel_facts(const drk_graph_t *g, const drk_lowered_t *l, tkernel_t *k, bool tf32) {
  const drk_value_t *seen[256];
  int ns = 0;
  for (size_t i = 0; i < l->n_launches; i++) {
    const drk_launch_t *la = &l->launches[i];
    if (la->node != l->launches[k->launch].node) continue;
    for (int a = 0; a < la->n_args; a++) {
      const drk_value_t *v = la->args[a].value;
      if ((la->args[a].kind != DRK_LARG_BUFFER && la->args[a].kind != DRK_LARG_TMA) || !v) continue;
      int j = 0;
      while (j < ns && seen[j] != v) j++;
      if (j < ns || ns == 256) continue;
      seen[ns++] = v;
      k->bytes += value_bytes(v);
    }
  }
  const drk_fusion_t *fu = l->fusion;
  const drk_node_t *first = l->launches[k->launch].node, *mm = NULL;
  k->flops_known = true;
  if (fu && k->node < fu->n_nodes && fu->group[k->node] >= 0) {
    const drk_fusion_group_t *gr = &fu->groups[fu->group[k->node]];
    if (gr->n_nodes > 0) first = g->nodes[gr->nodes[0]];
    if (gr->kind == DRK_FUSION_ATTENTION) k->flops_known = false;
    for (int m = 0; m < gr->n_nodes; m++) {
      const drk_node_t *n = g->nodes[gr->nodes[m]];
      if (n->n_inputs < 2 || !n->inputs[0] || !n->inputs[1] || n->n_outputs < 1) continue;
      double out = (double)drk_shape_numel(&n->outputs[0]->shape), kk = 0;
      const drk_shape_t *a = &n->inputs[0]->shape, *w = &n->inputs[1]->shape;
      if (n->op == DRK_OP_MATMUL && a->rank >= 1) kk = (double)a->dims[a->rank - 1].size;
      else if (n->op == DRK_OP_GEMM && a->rank == 2)
        kk = (double)a->dims[drk_node_attr_int(n, "transA", 0) ? 0 : 1].size;
      else if ((n->op == DRK_OP_CONV || n->op == DRK_OP_CONV_NHWC) && w->rank >= 1 && w->dims[0].size > 0)
        kk = (double)drk_shape_numel(w) / (double)w->dims[0].size;
      else continue;
      k->flops += 2 * out * kk;
      if (!mm) mm = n;
    }
  }
  const drk_node_t *rep = mm ? mm : first;
  drk_dtype_t dt = rep->n_inputs > 0 && rep->inputs[0] ? rep->inputs[0]->dtype : rep->outputs[0]->dtype;
  snprintf(k->precision, sizeof k->precision, "%s", precision_name(dt, tf32 && mm != NULL));
  /* the description the search's features read (features.h) */
  if (mm && mm->op == DRK_OP_MATMUL) {
    const drk_shape_t *a = &mm->inputs[0]->shape, *b = &mm->inputs[1]->shape;
    int64_t kk = a->rank >= 1 ? a->dims[a->rank - 1].size : 0, nn = b->rank >= 1 ? b->dims[b->rank - 1].size : 0;
    int64_t m = kk > 0 ? drk_shape_numel(a) / kk : 0;
    snprintf(k->description, sizeof k->description, "%s M=%lld N=%lld K=%lld dtype=%s", k->kind, (long long)m,
             (long long)nn, (long long)kk, drk_dtype_name(dt));
  } else {
    snprintf(k->description, sizeof k->description, "%s elems=%lld dtype=%s", k->kind,
             (long long)drk_shape_numel(&rep->outputs[0]->shape), drk_dtype_name(dt));
  }
}

static double roofline_us(const tkernel_t *k) {
  if (!k->flops_known || !(k->bytes > 0)) return -1;
  double b = k->bytes / HBM_BYTES_PER_S, f = k->flops / peak_flops(k->precision);
  return 1e6 * (b > f ? b : f);
}

/* ---- candidates ---- */
/* Compiles the model with kernel k at point p (its --schedules line, lenient: knobs its form
 * does not read are ignored) into path; a point the lowering refuses (an illegal combination)
 * fails with the error in msg. path NULL: lowering and tile verification only (the prune hook). */
static bool compile_candidate(tuner_t *t, const tkernel_t *k, const drk_sched_knobs_t *p, const char *path, int jobs,
                              char *msg, size_t n) {
  drk_sched_entry_t e = {.name = k->name, .node = k->node, .knobs = *p, .loc = {.file = "drkc tune", .node_index = -1},
                         .lenient = true};
  e.knobs.used = NULL;
  memcpy(e.wl, k->wl, sizeof k->wl);
  drk_schedules_t tbl = {.n = 1, .entries = &e};
  drk_compile_options_t c = t->c;
  c.schedules = &tbl;
  c.jobs = jobs;
  c.progress = false;
  drk_diag_t d;
  drk_diag_init(&d, NULL);
  void *bytes = NULL;
  size_t size = 0;
  if (!drk_pipeline_build(t->g, &c, path ? "module" : "schedules", &bytes, &size, &d)) {
    snprintf(msg, n, "compile: %.200s", d.first);
    return false;
  }
  if (!path) {
    free(bytes);
    return true;
  }
  FILE *f = fopen(path, "wb");
  bool ok = f && fwrite(bytes, 1, size, f) == size;
  if (f && fclose(f) != 0) ok = false;
  free(bytes);
  if (!ok) snprintf(msg, n, "cannot write the candidate: %s", strerror(errno));
  return ok;
}

static void clear_prep(tuner_t *t) {
  for (int i = 0; i < t->n_prep; i++) unlink(t->prep[i].path);
  t->n_prep = 0;
  if (t->mpi) drk_tune_mpi_drop(t->mpi);
}

/* The candidate's --mpi description: kernel, point, how to measure it. */
static void mpi_cand(tuner_t *t, const tkernel_t *k, const drk_sched_knobs_t *p, drk_tune_mpi_cand_t *c) {
  memset(c, 0, sizeof *c);
  snprintf(c->kernel, sizeof c->kernel, "%s", k->name);
  c->node = k->node;
  memcpy(c->wl, k->wl, sizeof c->wl);
  drk_sched_knobs_format(p, c->point, sizeof c->point);
  c->warmup = 3;
  c->iters = t->iters;
  c->seed = t->seed + (uint64_t)t->seq++;
}

/* --mpi: the round's candidates go to rank 0's queue; compile ranks take them as they come
 * free, measure ranks take the compiled ones (measure waits for each). */
static int prepare_mpi(tuner_t *t, const drk_sched_knobs_t *points, int n) {
  clear_prep(t);
  if (n > MAX_PREP) n = MAX_PREP;
  for (int i = 0; i < n; i++) {
    prepped_t *pp = &t->prep[i];
    memset(pp, 0, sizeof *pp);
    pp->point = points[i];
    pp->point.used = NULL;
    drk_tune_mpi_cand_t c;
    mpi_cand(t, t->k, &pp->point, &c);
    pp->job = drk_tune_mpi_submit(t->mpi, &c);
  }
  t->n_prep = n;
  return 0;
}

/* Compiles one candidate in a forked process (a compiler crash or hang costs the candidate),
 * killed after timeout_s; the module is left at path. */
static bool compile_isolated(tuner_t *t, const tkernel_t *k, const drk_sched_knobs_t *p, const char *path,
                             double timeout_s, char *msg, size_t n) {
  char ep[600];
  snprintf(ep, sizeof ep, "%s.err", path);
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) return compile_candidate(t, k, p, path, 1, msg, n);
  if (pid == 0) {
    char m[256] = "";
    bool ok = compile_candidate(t, k, p, path, 1, m, sizeof m);
    if (!ok) {
      FILE *f = fopen(ep, "w");
      if (f) fputs(m, f), fclose(f);
    }
    _exit(ok ? 0 : 1);
  }
  double until = now_s() + timeout_s;
  int status = 0;
  pid_t got;
  while ((got = waitpid(pid, &status, WNOHANG)) == 0 && now_s() < until) {
    drk_tune_mpi_alive(t->mpi); /* a compile rank's heartbeat to rank 0 */
    usleep(2000);
  }
  if (got == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    snprintf(msg, n, "compile: no module after %.0f s (killed)", timeout_s);
    unlink(ep);
    return false;
  }
  bool ok = got == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!ok) {
    FILE *f = fopen(ep, "r");
    if (f) {
      size_t r = fread(msg, 1, n - 1, f);
      msg[r] = 0;
      fclose(f);
    } else if (got == pid && WIFSIGNALED(status)) {
      snprintf(msg, n, "compile: the compiler crashed (signal %d)", WTERMSIG(status));
    } else {
      snprintf(msg, n, "compile: the compiler process failed");
    }
    unlink(ep);
  }
  return ok;
}

/* ---- the hooks of the other ranks (--mpi) ---- */
/* compile: the candidate's module, compiled in a forked process, as bytes */
static bool hook_compile(void *ctx, const drk_tune_mpi_cand_t *c, double timeout_s, void **out, size_t *out_size,
                         char *msg, size_t n) {
  tuner_t *t = ctx;
  *out = NULL, *out_size = 0;
  tkernel_t k = {.name = c->kernel, .node = (size_t)c->node};
  memcpy(k.wl, c->wl, sizeof k.wl);
  drk_sched_knobs_t p;
  memset(&p, 0, sizeof p);
  char e[300], text[sizeof c->point]; /* drk_sched_knobs_format's spaces, drk_sched_knobs_parse's commas */
  snprintf(text, sizeof text, "%s", c->point);
  for (char *q = text; *q; q++)
    if (*q == ' ') *q = ',';
  if (!drk_sched_knobs_parse(text, &p, e, sizeof e)) {
    snprintf(msg, n, "compile: the point '%.100s': %.120s", c->point, e);
    return false;
  }
  char path[512];
  snprintf(path, sizeof path, "%s/cand%d.drkm", t->dir, t->seq++);
  bool ok = compile_isolated(t, &k, &p, path, timeout_s, msg, n);
  if (ok) {
    FILE *f = fopen(path, "rb");
    long size = -1;
    if (f && fseek(f, 0, SEEK_END) == 0) size = ftell(f);
    if (f && size > 0 && fseek(f, 0, SEEK_SET) == 0 && (*out = malloc((size_t)size)) &&
        fread(*out, 1, (size_t)size, f) == (size_t)size) {
      *out_size = (size_t)size;
    } else {
      free(*out);
      *out = NULL;
      ok = false;
      snprintf(msg, n, "compile: cannot read back %s", path);
    }
    if (f) fclose(f);
  }
  unlink(path);
  return ok;
}

static drk_tune_result_t run_measure(tuner_t *t, const char *path, const char *kernel, int warmup, int iters,
                                     uint64_t seed);

static drk_tune_result_t hook_measure(void *ctx, const char *path, const drk_tune_mpi_cand_t *c) {
  return run_measure(ctx, path, c->kernel, c->warmup, c->iters, c->seed);
}

static bool hook_device(void *ctx, drk_tune_device_t *out, char *msg, size_t n) {
  tuner_t *t = ctx;
  if (t->fake) {
    memset(out, 0, sizeof *out);
    out->ok = true;
    snprintf(out->name, sizeof out->name, "fake GPU (DRKC_TUNE_FAKE_MEASURE)");
    return true;
  }
  return drk_tune_worker_device(&t->w, out, msg, n);
}

static bool hook_profile(void *ctx, double *out_ms, size_t n, int iters, char *msg, size_t msg_size) {
  tuner_t *t = ctx;
  return drk_tune_worker_profile_reference(&t->w, out_ms, n, iters, msg, msg_size);
}

/* drk_search_prune_known_fn: the memo's verdict on p, or -1 (no lowering). */
static int prune_known_point(void *ctx, const drk_sched_knobs_t *p) {
  tuner_t *t = ctx;
  uint64_t h = drk_search_point_hash(p);
  size_t slot = (size_t)(h % PRUNE_MEMO);
  for (int probe = 0; probe < PRUNE_MEMO && t->memo[slot].used; probe++, slot = (slot + 1) % PRUNE_MEMO)
    if (t->memo[slot].hash == h) return t->memo[slot].ok;
  return -1;
}

/* drk_search_prune_fn: a point the lowering refuses (shared memory past the target's, a tile
 * the form cannot take, ...) is pruned: never compiled to code nor measured, and not counted
 * as a trial. The lowering runs in a forked process (a crash on a strange point prunes that
 * point, not the tune); verdicts are kept per point for the kernel being tuned. */
static bool prune_point(void *ctx, const drk_sched_knobs_t *p, char *why, size_t n) {
  tuner_t *t = ctx;
  /* Past the kernel's share of --time, no more lowerings: the point passes unchecked (and is
   * not remembered), the search's next measurement or round check ends the kernel. A policy
   * masks its moves through this hook, so a warm-started one near an invalid region asked for
   * 102 lowerings of ResNet-50 in a row (93 s of a 30 s budget) before this check. */
  if (now_s() > t->k_deadline) return true;
  uint64_t h = drk_search_point_hash(p);
  size_t slot = (size_t)(h % PRUNE_MEMO);
  for (int probe = 0; probe < PRUNE_MEMO && t->memo[slot].used; probe++, slot = (slot + 1) % PRUNE_MEMO)
    if (t->memo[slot].hash == h) {
      if (!t->memo[slot].ok) snprintf(why, n, "%s", t->memo[slot].why);
      return t->memo[slot].ok;
    }
  char msg[256] = "";
  int fd[2];
  bool ok = true;
  if (pipe(fd) == 0) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
      close(fd[0]);
      bool good = compile_candidate(t, t->k, p, NULL, 1, msg, sizeof msg);
      if (!good && write(fd[1], msg, strlen(msg)) < 0) _exit(2);
      _exit(good ? 0 : 1);
    }
    close(fd[1]);
    if (pid > 0) {
      size_t got = 0;
      ssize_t r;
      while (got < sizeof msg - 1 && (r = read(fd[0], msg + got, sizeof msg - 1 - got)) > 0) got += (size_t)r;
      msg[got] = 0;
      int status = 0;
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
      ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (!ok && WIFSIGNALED(status)) snprintf(msg, sizeof msg, "the lowering crashed (signal %d)", WTERMSIG(status));
    }
    close(fd[0]);
  }
  if (!ok) {
    snprintf(why, n, "%s", msg);
    t->pruned++;
  }
  if (t->n_memo < PRUNE_MEMO * 3 / 4) {
    t->memo[slot] = (struct prune_memo){.hash = h, .used = true, .ok = ok};
    snprintf(t->memo[slot].why, sizeof t->memo[slot].why, "%s", msg);
    t->n_memo++;
  }
  return ok;
}

/* drk_search_prepare_fn: the round's candidates compiled in forked processes, --jobs at once
 * (a compiler crash on a strange point costs that candidate, not the tune). Each child
 * compiles one candidate with one codegen job: a candidate changes one kernel, the rest come
 * from the kernel cache. */
static int prepare(void *ctx, const drk_search_space_t *s, const drk_sched_knobs_t *points, int n) {
  (void)s;
  tuner_t *t = ctx;
  if (t->mpi) return prepare_mpi(t, points, n);
  clear_prep(t);
  if (n > MAX_PREP) n = MAX_PREP;
  double t0 = now_s();
  int jobs = t->jobs > 0 ? t->jobs : (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (jobs < 1) jobs = 1;
  pid_t pids[MAX_PREP];
  int next = 0, running = 0;
  for (int i = 0; i < n; i++) {
    prepped_t *pp = &t->prep[i];
    pp->point = points[i];
    pp->point.used = NULL;
    snprintf(pp->path, sizeof pp->path, "%s/cand%d.drkm", t->dir, t->seq++);
    pp->ok = false;
    pp->spent = false;
    snprintf(pp->msg, sizeof pp->msg, "compile: the compiler process failed");
    pids[i] = -1;
  }
  t->n_prep = n;
  while (next < n || running > 0) {
    while (next < n && running < jobs) {
      fflush(NULL);
      pid_t pid = fork();
      if (pid == 0) {
        char msg[256] = "";
        bool ok = compile_candidate(t, t->k, &t->prep[next].point, t->prep[next].path, 1, msg, sizeof msg);
        if (!ok) {
          char ep[600];
          snprintf(ep, sizeof ep, "%s.err", t->prep[next].path);
          FILE *f = fopen(ep, "w");
          if (f) fputs(msg, f), fclose(f);
        }
        _exit(ok ? 0 : 1);
      }
      if (pid < 0) { /* no process: compile here */
        prepped_t *pp = &t->prep[next];
        pp->ok = compile_candidate(t, t->k, &pp->point, pp->path, 0, pp->msg, sizeof pp->msg);
        next++;
        continue;
      }
      pids[next++] = pid;
      running++;
    }
    if (!running) break;
    int status;
    pid_t done = wait(&status);
    if (done < 0) break;
    for (int i = 0; i < n; i++)
      if (pids[i] == done) {
        running--;
        pids[i] = -1;
        prepped_t *pp = &t->prep[i];
        pp->ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (!pp->ok) {
          char ep[600];
          snprintf(ep, sizeof ep, "%s.err", pp->path);
          FILE *f = fopen(ep, "r");
          if (f) {
            size_t r = fread(pp->msg, 1, sizeof pp->msg - 1, f);
            pp->msg[r] = 0;
            fclose(f);
          } else if (WIFSIGNALED(status)) {
            snprintf(pp->msg, sizeof pp->msg, "compile: the compiler crashed (signal %d)", WTERMSIG(status));
          }
          unlink(ep);
        }
      }
  }
  t->k->gen_s += now_s() - t0;
  return 0;
}

/* ---- the fake measurement (tests only) ----
 * DRKC_TUNE_FAKE_MEASURE=1 (not in --help: for tests on machines without a GPU) keeps every
 * step of drkc tune (compiles, the search, the database, the log) but replaces the worker's
 * run on the GPU by a synthetic time computed from the point: a bowl over the knobs' value
 * indices around a per-workload optimum. DRKC_TUNE_FAKE_INVALID=KNOB=V,... plants a wrong
 * kernel: points with those values report valid = false with a tiny time (a fast wrong kernel
 * must never become the best). DRKC_TUNE_FAKE_LOG=FILE gets a line per measurement. */
static uint64_t mix(uint64_t h) {
  h = (h ^ (h >> 31)) * 0x7fb5d329728ea185ull;
  h = (h ^ (h >> 27)) * 0x81dadef4bc2dd44dull;
  return h ^ (h >> 33);
}

static double fake_time_us(const drk_search_space_t *s, const char *wl, const drk_sched_knobs_t *p) {
  uint64_t h = 0x6675;
  for (const char *c = wl; *c; c++) h = mix(h ^ (uint64_t)(unsigned char)*c);
  int idx[DRK_KNOB_COUNT];
  if (!drk_search_point_indices(s, p, idx)) return -1;
  double q = 0;
  for (int d = 0; d < s->n_dims; d++) {
    int nv = s->n_values[d];
    if (nv < 2) continue;
    double opt = (double)(mix(h + (uint64_t)d) % (uint64_t)nv), u = (idx[d] - opt) / (nv - 1);
    q += (1 + d % 3) * u * u;
  }
  return (5.0 + (double)(h % 20)) * (1 + q);
}

static bool planted_match(const tuner_t *t, const drk_sched_knobs_t *p) {
  if (!t->planted.set) return false;
  bool any = false;
  for (int i = 0; i < DRK_KNOB_COUNT; i++)
    if (t->planted.set & (1u << i)) {
      if (!(p->set & (1u << i))) continue;
      if (p->v[i] != t->planted.v[i]) return false;
      any = true;
    }
  return any;
}

/* ---- measuring ---- */
static prepped_t *find_prep(tuner_t *t, const drk_sched_knobs_t *p) {
  for (int i = 0; i < t->n_prep; i++)
    if (!t->prep[i].spent && drk_search_point_equal(&t->prep[i].point, p)) return &t->prep[i];
  return NULL;
}

/* drk_search_measure_fn: the candidate's module (prepared, or compiled now), measured by the
 * worker (or the fake). A candidate that does not compile, crashes, hangs or gives wrong
 * outputs is invalid; the tune stops when the --time budget is spent or the worker cannot be
 * started (five candidates in a row without an answer). */
/* "1m05s" */
static void fmt_secs(double s, char *buf, size_t n) {
  long v = s > 0 ? (long)(s + 0.5) : 0;
  if (v >= 3600) snprintf(buf, n, "%ldh%02ldm", v / 3600, v / 60 % 60);
  else if (v >= 60) snprintf(buf, n, "%ldm%02lds", v / 60, v % 60);
  else snprintf(buf, n, "%lds", v);
}

/* The progress line on a terminal: kernel i of n, trials, the best so far against the
 * heuristic, elapsed time and an ETA (the --time deadline, else the measurement rate so far
 * times the measurements left at the trial budget). Overwritten in place; cleared before
 * anything else is printed (progress_clear). */
static void progress(const tuner_t *t) {
  if (!t->tty || !t->k) return;
  double el = now_s() - t->t0, eta;
  if (t->deadline < 1e300) eta = t->deadline - now_s();
  else {
    double left = (double)(t->k_count - t->k_index - 1) * t->trials + (t->trials - t->k_measured);
    eta = t->measured > 0 && left > 0 ? el / t->measured * left : 0;
  }
  char e1[32], e2[32], best[64] = "";
  fmt_secs(el, e1, sizeof e1);
  fmt_secs(eta, e2, sizeof e2);
  if (t->k_best_us > 0)
    snprintf(best, sizeof best, ", best %.2f us (%.2fx the heuristic)", t->k_best_us,
             t->k_ref_us > 0 ? t->k_ref_us / t->k_best_us : 1.0);
  char trial[48];
  if (t->k_measured <= t->trials) snprintf(trial, sizeof trial, "trial %d/%d", t->k_measured, t->trials);
  else snprintf(trial, sizeof trial, "re-measuring the winner");
  fprintf(stderr, "\r\033[Kdrkc tune: kernel %d/%d %.28s: %s%s | %s elapsed, ETA %s", t->k_index + 1, t->k_count,
          t->k->name, trial, best, e1, e2);
  fflush(stderr);
}

static void progress_clear(const tuner_t *t) {
  if (t->tty) fputs("\r\033[K", stderr);
}

static int measure_one(void *ctx, const drk_search_space_t *s, const drk_sched_knobs_t *p, drk_search_metrics_t *out);

/* measure_one, then the progress line */
static int measure(void *ctx, const drk_search_space_t *s, const drk_sched_knobs_t *p, drk_search_metrics_t *out) {
  tuner_t *t = ctx;
  int rc = measure_one(ctx, s, p, out);
  t->k_measured++;
  if (rc == 0 && out->valid && out->time_us > 0 && (t->k_best_us < 0 || out->time_us < t->k_best_us))
    t->k_best_us = out->time_us, t->k_ref_us = out->ref_time_us;
  progress(t);
  return rc;
}

/* A module file measured: by the worker, or in the fake mode only checked to be there (the
 * synthetic time comes from the point: fake_metrics). Adds the time to measure_s. */
static drk_tune_result_t run_measure(tuner_t *t, const char *path, const char *kernel, int warmup, int iters,
                                     uint64_t seed) {
  double t0 = now_s();
  drk_tune_result_t r;
  if (t->fake) {
    memset(&r, 0, sizeof r);
    r.ok = true;
    r.valid = access(path, R_OK) == 0; /* what the worker would find: no module, an invalid point */
    if (!r.valid) snprintf(r.msg, sizeof r.msg, "cannot read %s", path);
    r.kernel_ms = r.run_ms = r.ref_kernel_ms = r.ref_run_ms = -1;
    r.sm_mhz = r.power_w = r.energy_mj_per_run = -1;
  } else {
    r = drk_tune_worker_measure(&t->w, path, kernel, warmup, iters, seed);
  }
  t->measure_s += now_s() - t0;
  return r;
}

/* The fake mode's metrics of a point whose module was there: a synthetic time, or the planted
 * wrong kernel. */
static void fake_metrics(tuner_t *t, const drk_search_space_t *s, const tkernel_t *k, const drk_sched_knobs_t *p,
                         drk_search_metrics_t *out) {
  double us = fake_time_us(s, k->wl, p), ref = fake_time_us(s, k->wl, &s->heuristic);
  bool planted = planted_match(t, p);
  out->valid = !planted;
  out->time_us = planted ? 0.5 : us;
  out->ref_time_us = ref;
  out->error = planted ? 0.9 : 1e-4;
  out->tolerance = 1e-2;
  if (planted) snprintf(out->msg, sizeof out->msg, "output 0: relative error 0.9 against the reference (planted)");
}

/* The candidate compiled and measured: locally (prepared, or compiled now; the worker), or
 * --mpi by the ranks. Returns nonzero when measuring cannot go on (msg in r->msg). */
static int obtain(tuner_t *t, tkernel_t *k, const drk_sched_knobs_t *p, bool *compiled, char *cmsg, size_t cn,
                  drk_tune_result_t *r) {
  prepped_t *pp = find_prep(t, p), own;
  if (pp) pp->spent = true; /* every path below removes its file */
  memset(r, 0, sizeof *r);
  if (t->mpi) {
    uint64_t id = pp ? pp->job : 0;
    if (!id) {
      drk_tune_mpi_cand_t c;
      mpi_cand(t, k, p, &c);
      id = drk_tune_mpi_submit(t->mpi, &c);
    }
    drk_tune_mpi_outcome_t o;
    if (!drk_tune_mpi_wait(t->mpi, id, &o, r->msg, sizeof r->msg)) return 1;
    k->gen_s += o.compile_s;
    t->measure_s += o.measure_s;
    *compiled = o.compiled;
    snprintf(cmsg, cn, "%s", o.msg);
    *r = o.r;
    return 0;
  }
  if (!pp) {
    double t0 = now_s();
    pp = &own;
    pp->point = *p;
    snprintf(pp->path, sizeof pp->path, "%s/cand%d.drkm", t->dir, t->seq++);
    pp->ok = compile_candidate(t, k, p, pp->path, t->jobs, pp->msg, sizeof pp->msg);
    k->gen_s += now_s() - t0;
  }
  *compiled = pp->ok;
  snprintf(cmsg, cn, "%s", pp->msg);
  if (pp->ok) *r = run_measure(t, pp->path, k->name, 3, t->iters, t->seed + (uint64_t)t->measured + 1);
  unlink(pp->path);
  return 0;
}

static int measure_one(void *ctx, const drk_search_space_t *s, const drk_sched_knobs_t *p, drk_search_metrics_t *out) {
  tuner_t *t = ctx;
  tkernel_t *k = t->k;
  if (now_s() > t->hard_deadline) {
    snprintf(out->msg, sizeof out->msg, "the --time budget is spent");
    return 1;
  }
  bool compiled = false;
  char cmsg[256] = "";
  drk_tune_result_t r;
  if (obtain(t, k, p, &compiled, cmsg, sizeof cmsg, &r) != 0) {
    snprintf(out->msg, sizeof out->msg, "%s", r.msg);
    return 1;
  }
  t->measured++;
  if (t->fake_log) {
    char pt[512];
    drk_search_point_format(s, p, pt, sizeof pt);
    fprintf(t->fake_log, "%s %s %s\n", k->name, !compiled ? "compile-failed" : planted_match(t, p) ? "planted" : "measured", pt);
    fflush(t->fake_log);
  }
  if (!compiled) {
    out->valid = false;
    snprintf(out->msg, sizeof out->msg, "%s", cmsg);
    return 0;
  }
  if (t->fake) {
    if (!r.ok || !r.valid) {
      out->valid = false;
      snprintf(out->msg, sizeof out->msg, "%s", r.msg);
      return 0;
    }
    fake_metrics(t, s, k, p, out);
    return 0;
  }
  t->consecutive_failures = r.ok ? 0 : t->consecutive_failures + 1;
  out->valid = r.valid;
  snprintf(out->msg, sizeof out->msg, "%s", r.msg);
  if (!r.ok && t->consecutive_failures >= 5) {
    snprintf(out->msg, sizeof out->msg, "the worker failed on %d candidates in a row (last: %.150s)",
             t->consecutive_failures, r.msg);
    return 1;
  }
  if (r.valid) {
    out->time_us = r.kernel_ms * 1e3;
    out->ref_time_us = r.ref_kernel_ms * 1e3;
    out->error = r.max_err;
    if (r.energy_mj_per_run >= 0) out->energy_j = r.energy_mj_per_run / 1e3;
    out->sm_mhz = r.sm_mhz;
    out->power_w = r.power_w;
    if (k->bytes > 0 && out->time_us > 0) out->gbs = k->bytes / (out->time_us * 1e-6) / 1e9;
    if (k->flops > 0 && out->time_us > 0) out->tflops = k->flops / (out->time_us * 1e-6) / 1e12;
  }
  return 0;
}

static void search_log(void *ctx, const char *line) {
  progress_clear(ctx);
  fprintf(stderr, "drkc tune: %s\n", line);
}

/* ---- the log's summary events ---- */
static void ev_key(FILE *f, const char *k) { fprintf(f, ",\"%s\":", k); }
static void ev_s(FILE *f, const char *k, const char *v) { ev_key(f, k), drk_json_str(f, v); }
static void ev_n(FILE *f, const char *k, double v) { ev_key(f, k), drk_json_num(f, v); }
static void ev_known(FILE *f, const char *k, double v) { ev_key(f, k), drk_json_num_known(f, v); }
static void ev_b(FILE *f, const char *k, bool v) { fprintf(f, ",\"%s\":%s", k, v ? "true" : "false"); }

static void kernel_summary(FILE *f, const tkernel_t *k, double total, const char *error) {
  if (!f) return;
  fputs("{\"event\":\"kernel_summary\"", f);
  ev_s(f, "kernel", k->name);
  ev_s(f, "workload", k->wl);
  ev_s(f, "kind", k->kind);
  ev_n(f, "share", total > 0 ? k->ms / total : NAN);
  ev_known(f, "heuristic_us", k->heur_us);
  ev_known(f, "best_us", k->tuned ? k->best_us : -1);
  ev_known(f, "roofline_us", roofline_us(k));
  ev_s(f, "precision", k->precision);
  ev_n(f, "trials", k->trials);
  ev_n(f, "invalid", k->invalid);
  ev_n(f, "pruned", k->pruned);
  ev_b(f, "tuned", k->tuned);
  ev_b(f, "stable", k->stable);
  ev_n(f, "record", (double)k->record);
  ev_s(f, "best_point", k->tuned ? k->best_text : "");
  ev_n(f, "gen_s", k->gen_s);
  ev_n(f, "tune_s", k->tune_s);
  ev_b(f, "timed_out", k->timed_out);
  if (error) ev_s(f, "error", error);
  fputs("}\n", f);
  fflush(f);
}

/* drk_search_db_query callback: a record exists */
static bool resume_seen(void *ctx, const drk_search_record_t *r) {
  (void)r;
  *(bool *)ctx = true;
  return false;
}

static int cmp_ms(const void *a, const void *b) {
  const tkernel_t *x = a, *y = b;
  return x->ms < y->ms ? 1 : x->ms > y->ms ? -1 : 0;
}

/* The output path with its extension replaced by ext (or ext appended). */
static void with_ext(const char *path, const char *ext, char *out, size_t n) {
  snprintf(out, n, "%s", path);
  char *slash = strrchr(out, '/'), *dot = strrchr(out, '.');
  if (dot && (!slash || dot > slash)) *dot = 0;
  size_t len = strlen(out);
  snprintf(out + len, n - len, "%s", ext);
}

/* --ranks=compile:K,measure:G (either part may be left out: detected) */
static bool parse_ranks(const char *v, drk_tune_mpi_options_t *o) {
  while (*v) {
    const char *colon = strchr(v, ':');
    if (!colon) return false;
    char *end;
    long k = strtol(colon + 1, &end, 10);
    if (end == colon + 1 || k < 0 || k > 1000000 || (*end && *end != ',')) return false;
    size_t len = (size_t)(colon - v);
    if (len == 7 && !strncmp(v, "compile", 7)) o->compile_ranks = (int)k;
    else if (len == 7 && !strncmp(v, "measure", 7)) o->measure_ranks = (int)k;
    else return false;
    v = *end ? end + 1 : end;
  }
  return true;
}

/* FNV-1a of the reference module: every rank must have built the same one */
static uint64_t bytes_hash(const void *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) h = (h ^ ((const unsigned char *)p)[i]) * 0x100000001b3ull;
  return h;
}

/* --dynamic: a `drkc tune` of each bucket (this program again, with the bucket's sizes as
 * --pad-bind, the option the bucket compiles take: pipeline.h pad_bind), one after another. */
static int tune_buckets(int argc, char **argv, const char *dynamic, const char *buckets, const char *out,
                        const char *db_path, const char *model, double budget) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  drk_dyn_spec_t s;
  if (!drk_dyn_spec_parse(dynamic, buckets, &s, &d)) return 2;
  size_t nb = 1;
  for (int i = 0; i < s.n_dims; i++) nb *= (size_t)s.dims[i].n_sizes;
  char outp[4096];
  if (out) snprintf(outp, sizeof outp, "%s", out);
  else with_ext(model, ".sched", outp, sizeof outp);
  char dbarg[4200] = "";
  if (!db_path) { /* one database for every bucket: the default next to --out */
    char dbp[4096];
    with_ext(outp, ".db", dbp, sizeof dbp);
    snprintf(dbarg, sizeof dbarg, "--db=%s", dbp);
  }
  char **av = calloc((size_t)argc + 8, sizeof *av);
  if (!av) return 1;
  int rc = 0;
  for (size_t b = 0; b < nb && !rc; b++) {
    char label[256] = "", tag[256] = "", pad[300], outb[4400], timeb[64];
    size_t r = b;
    int64_t size[DRK_DYN_MAX_DIMS];
    for (int i = s.n_dims - 1; i >= 0; i--) size[i] = s.dims[i].sizes[r % (size_t)s.dims[i].n_sizes], r /= (size_t)s.dims[i].n_sizes;
    for (int i = 0; i < s.n_dims; i++) {
      size_t l = strlen(label), lt = strlen(tag);
      snprintf(label + l, sizeof label - l, "%s%s=%lld", i ? "," : "", s.dims[i].name, (long long)size[i]);
      snprintf(tag + lt, sizeof tag - lt, "-%s%lld", s.dims[i].name, (long long)size[i]);
    }
    const char *dot = strrchr(outp, '.'), *slash = strrchr(outp, '/');
    if (!dot || (slash && dot < slash)) dot = outp + strlen(outp);
    snprintf(outb, sizeof outb, "%.*s%s%s", (int)(dot - outp), outp, tag, dot);
    snprintf(pad, sizeof pad, "--pad-bind=%s", label);
    int n = 0;
    av[n++] = argv[0];
    av[n++] = argv[1];
    for (int i = 2; i < argc; i++) { /* the same arguments but these */
      const char *a = argv[i];
      bool two = !strchr(a, '=') && i + 1 < argc;
      if (!strncmp(a, "--dynamic", 9) || !strncmp(a, "--buckets", 9) || !strncmp(a, "--out", 5) || !strcmp(a, "-o") ||
          !strncmp(a, "--time", 6)) {
        if (two && (!strcmp(a, "--dynamic") || !strcmp(a, "--buckets") || !strcmp(a, "--out") || !strcmp(a, "-o") ||
                    !strcmp(a, "--time")))
          i++;
        continue;
      }
      av[n++] = argv[i];
    }
    char outarg[4500];
    snprintf(outarg, sizeof outarg, "--out=%s", outb);
    av[n++] = pad;
    av[n++] = outarg;
    if (*dbarg) av[n++] = dbarg;
    if (budget > 0) {
      snprintf(timeb, sizeof timeb, "--time=%.3f", budget / (double)nb);
      av[n++] = timeb;
    }
    av[n] = NULL;
    fprintf(stderr, "drkc tune: bucket %zu of %zu: %s\n", b + 1, nb, label);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
      execv("/proc/self/exe", av);
      fprintf(stderr, "drkc tune: error: cannot run /proc/self/exe: %s\n", strerror(errno));
      _exit(127);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) < 0) rc = 1;
    else if (!WIFEXITED(st) || WEXITSTATUS(st)) {
      fprintf(stderr, "drkc tune: error: the tune of bucket %s failed\n", label);
      rc = WIFEXITED(st) ? WEXITSTATUS(st) : 1;
    }
  }
  free(av);
  return rc;
}

int drkc_tune_main(int argc, char **argv) {
  tuner_t t = {.iters = 20, .seed = 1, .compile_timeout_s = 300};
  bool mpi = false;
  drk_tune_mpi_options_t mo = {.compile_ranks = -1, .measure_ranks = -1};
  const char *ranks_arg = NULL;
  const char *model = NULL, *out = NULL, *log = NULL, *targets = "sm_90a", *sched_path = NULL, *policy_arg = "rl",
             *db_path = NULL, *config_path = NULL;
  int trials = 64, max_kernels = 0, device = 0;
  double timeout = 60, budget = 0;
  bool resume = false;
  static const char *const o_tr[] = {"--trials", NULL}, *const o_time[] = {"--time", NULL},
                           *const o_k[] = {"--kernels", NULL}, *const o_out[] = {"--out", "-o", NULL},
                           *const o_log[] = {"--log", NULL}, *const o_dev[] = {"--device", NULL},
                           *const o_it[] = {"--iters", NULL}, *const o_to[] = {"--timeout", NULL},
                           *const o_seed[] = {"--seed", NULL}, *const o_target[] = {"--target", NULL},
                           *const o_pol[] = {"--policy", NULL}, *const o_db[] = {"--db", NULL},
                           *const o_cfg[] = {"--config", NULL}, *const o_ranks[] = {"--ranks", NULL},
                           *const o_cto[] = {"--compile-timeout", NULL}, *const o_dyn[] = {"--dynamic", NULL},
                           *const o_buckets[] = {"--buckets", NULL}, *const o_pad[] = {"--pad-bind", NULL};
  const char *dynamic = NULL, *buckets = NULL;
  for (int i = 2; i < argc; i++) {
    const char *v;
    int k;
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(tune_usage, stdout);
      return 0;
    }
    if ((v = drkc_opt_value(argc, argv, &i, o_tr))) trials = atoi(v);
    else if ((v = drkc_opt_value(argc, argv, &i, o_time))) {
      if (!parse_duration(v, &budget)) return drkc_usage_error("--time: a duration (300, 300s, 5m, 1h), not '%s'", v);
    } else if ((v = drkc_opt_value(argc, argv, &i, o_k))) max_kernels = atoi(v);
    else if ((v = drkc_opt_value(argc, argv, &i, o_out))) out = v;
    else if ((v = drkc_opt_value(argc, argv, &i, o_log))) log = v;
    else if ((v = drkc_opt_value(argc, argv, &i, o_dev))) device = atoi(v);
    else if ((v = drkc_opt_value(argc, argv, &i, o_it))) t.iters = atoi(v);
    else if ((v = drkc_opt_value(argc, argv, &i, o_to))) timeout = atof(v);
    else if ((v = drkc_opt_value(argc, argv, &i, o_seed))) t.seed = strtoull(v, NULL, 10);
    else if ((v = drkc_opt_value(argc, argv, &i, o_target))) targets = v;
    else if ((v = drkc_opt_value(argc, argv, &i, o_pol))) policy_arg = v;
    else if ((v = drkc_opt_value(argc, argv, &i, o_db))) db_path = v;
    else if ((v = drkc_opt_value(argc, argv, &i, o_cfg))) config_path = v;
    else if (!strcmp(argv[i], "--resume")) resume = true;
    else if (!strcmp(argv[i], "--mpi")) mpi = true;
    else if ((v = drkc_opt_value(argc, argv, &i, o_ranks))) {
      ranks_arg = v;
      if (!parse_ranks(v, &mo)) return drkc_usage_error("--ranks: compile:K,measure:G (counts of ranks), not '%s'", v);
    } else if ((v = drkc_opt_value(argc, argv, &i, o_cto))) t.compile_timeout_s = atof(v);
    else if ((v = drkc_opt_value(argc, argv, &i, o_dyn))) dynamic = v;
    else if ((v = drkc_opt_value(argc, argv, &i, o_buckets))) buckets = v;
    else if ((v = drkc_opt_value(argc, argv, &i, o_pad))) t.c.pad_bind = v; /* a bucket of --dynamic */
    else if ((k = drkc_parse_compile_option(argc, argv, &i, &t.c, &sched_path))) {
      if (k < 0) return 2;
    } else if (argv[i][0] == '-') return drkc_usage_error("unknown option '%s' for 'drkc tune'", argv[i]);
    else if (model) return drkc_usage_error("more than one model given ('%s')", argv[i]);
    else model = argv[i];
  }
  if (!model) return drkc_usage_error("drkc tune needs a MODEL%s", "");
  if (buckets && !dynamic) return drkc_usage_error("--buckets lists the sizes of --dynamic dims; give --dynamic too%s", "");
  if (dynamic && mpi) return drkc_usage_error("not implemented: --dynamic with --mpi (tune the buckets one by one)%s", "");
  if (dynamic) return tune_buckets(argc, argv, dynamic, buckets, out, db_path, model, budget);
  if (drkc_check_budget_options(&t.c)) return 2;
  if (trials < 1 || t.iters < 1 || timeout <= 0) return drkc_usage_error("--trials, --iters and --timeout must be positive%s", "");
  if (sched_path) return drkc_usage_error("--schedules is what drkc tune writes (--out); tune from the heuristic%s", "");
  if (t.c.require_tuned) return drkc_usage_error("--require-tuned is a compile option; drkc tune fills the database%s", "");
  const char *policy = !strcmp(policy_arg, "rl") ? "ppo" : !strcmp(policy_arg, "evolutionary") ? "evo"
                       : !strcmp(policy_arg, "random") ? "random" : NULL;
  if (!policy) return drkc_usage_error("--policy: rl, evolutionary or random, not '%s'", policy_arg);
  if (db_path && !*db_path) return drkc_usage_error("--db needs a file%s", "");
  if (!mpi && ranks_arg) return drkc_usage_error("--ranks is an option of --mpi%s", "");
  if (!(t.compile_timeout_s > 0)) return drkc_usage_error("--compile-timeout must be positive%s", "");
  drk_search_config_t cfg;
  drk_search_config_default(&cfg);
  char err[1400];
  if (config_path && !drk_search_config_load(config_path, &cfg, err, sizeof err)) {
    fprintf(stderr, "drkc tune: error: %s\n", err);
    return 1;
  }
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  if (!drk_target_parse_list(targets, &t.c.targets, &d)) return 1;
  if (__builtin_popcount(t.c.targets) != 1) return drkc_usage_error("drkc tune tunes for one target (the GPU's), not '%s'", targets);
  const char *arch = NULL;
  for (int i = 0; i < DRK_TARGET_COUNT && !arch; i++)
    if (t.c.targets & (1u << i)) arch = drk_target_info((drk_target_t)i)->name;
  t.c.command_line = "drkc tune";
  t.jobs = t.c.jobs;
  /* --mpi: every rank runs this function with the same arguments; ranks other than 0 build the
   * reference like rank 0, then serve it (tune_mpi.h) */
  if (mpi && !drk_tune_mpi_init(&argc, &argv, &t.mpi, err, sizeof err)) {
    fprintf(stderr, "drkc tune: error: %s\n", err);
    return 1;
  }
  bool rank0 = !t.mpi || drk_tune_mpi_rank(t.mpi) == 0;
  const char *fake = getenv("DRKC_TUNE_FAKE_MEASURE");
  t.fake = fake && *fake && strcmp(fake, "0");
  if (t.fake && rank0) {
    const char *pl = getenv("DRKC_TUNE_FAKE_INVALID"), *fl = getenv("DRKC_TUNE_FAKE_LOG");
    if (pl && *pl && !drk_sched_knobs_parse(pl, &t.planted, err, sizeof err)) {
      fprintf(stderr, "drkc tune: error: DRKC_TUNE_FAKE_INVALID: %s\n", err);
      return 2;
    }
    if (fl && *fl && !(t.fake_log = fopen(fl, "a"))) {
      fprintf(stderr, "drkc tune: error: cannot write %s: %s\n", fl, strerror(errno));
      return 1;
    }
    fprintf(stderr, "drkc tune: DRKC_TUNE_FAKE_MEASURE: synthetic times, no GPU (a test mode)\n");
  }
  t.t0 = now_s();
  /* --time is shared among the kernels (drk_search_tune's time limit: a round under way ends and
   * the winner is re-measured); measuring stops outright a tenth later (at least 5 s) */
  t.deadline = budget > 0 ? t.t0 + budget : INFINITY;
  t.hard_deadline = budget > 0 ? t.deadline + (budget / 10 > 5 ? budget / 10 : 5) : INFINITY;
  /* the outputs: --out (default MODEL.sched) and the database (default: --out's name, .db) */
  char outp[4096], dbp[4096];
  if (out) snprintf(outp, sizeof outp, "%s", out);
  else with_ext(model, ".sched", outp, sizeof outp);
  if (db_path) snprintf(dbp, sizeof dbp, "%s", db_path);
  else with_ext(outp, ".db", dbp, sizeof dbp);
  snprintf(t.dir, sizeof t.dir, "%s/drkc-tune-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(t.dir)) {
    fprintf(stderr, "drkc tune: error: cannot make a work folder: %s\n", strerror(errno));
    drk_tune_mpi_finish(t.mpi, 1);
    return 1;
  }
  int rc = 1;
  tkernel_t *ks = NULL;
  size_t nks = 0;
  drk_search_db_t *db = NULL;
  double *ms = NULL;
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
  uint64_t ref_hash = bytes_hash(bytes, size);
  free(bytes);
  if (!wrote) {
    fprintf(stderr, "drkc tune: error: cannot write %s\n", ref);
    goto done;
  }
  drk_tune_worker_init(&t.w, ref, device, timeout);
  for (size_t i = 0; i < t.g->n_inputs && i < DRK_TUNE_MAX_INPUTS; i++)
    t.w.bound[i] = drk_graph_index_bound(t.g, t.g->inputs[i], 4);
  /* a --pad-bind graph's length inputs take the bucket's size: every key kept, the whole
   * bucket timed */
  const drk_value_t *lenv[DRK_DYN_MAX_DIMS];
  int64_t lens[DRK_DYN_MAX_DIMS];
  for (int k = 0, nl = drk_pipeline_length_inputs(p, lenv, lens, DRK_DYN_MAX_DIMS); k < nl; k++)
    for (size_t i = 0; i < t.g->n_inputs && i < DRK_TUNE_MAX_INPUTS; i++)
      if (t.g->inputs[i] == lenv[k] && lens[k] > 0) t.w.bound[i] = -lens[k] - 1;
  drk_tune_mpi_hooks_t hooks = {.ctx = &t, .compile = hook_compile, .measure = hook_measure, .device = hook_device,
                                .profile = hook_profile};
  if (t.mpi) {
    mo.compile_timeout_s = t.compile_timeout_s;
    mo.measure_timeout_s = 2 * timeout; /* the worker kills a hung candidate after --timeout */
    mo.fake = t.fake;
    mo.device = device;
    /* the others build the same reference: give them twice rank 0's time, plus a compile */
    double hello_s = t.compile_timeout_s + 2 * (now_s() - t.t0);
    if (!drk_tune_mpi_roles(t.mpi, &mo, ref_hash, hello_s, rank0 ? stderr : NULL, err, sizeof err)) {
      fprintf(stderr, "drkc tune: error: --mpi: %s\n", err);
      goto done;
    }
    if (!rank0) {
      int dev = device;
      if (drk_tune_mpi_role(t.mpi, &dev) == DRK_TUNE_MPI_MEASURE) t.w.device = dev;
      rc = drk_tune_mpi_serve(t.mpi, &hooks);
      goto done;
    }
    drk_tune_mpi_local(t.mpi, &hooks);
  }
  if (!drk_search_db_open(dbp, false, &db, err, sizeof err)) {
    fprintf(stderr, "drkc tune: error: %s\n", err);
    goto done;
  }
  const drk_lowered_t *l = drk_pipeline_lowered(p);
  /* the target fingerprint: the GPU the measurements run on */
  drk_search_target_t target;
  memset(&target, 0, sizeof target);
  snprintf(target.arch, sizeof target.arch, "%s", arch);
  bool nvml = false, l2_flush = false;
  char msg[256];
  if (t.fake && !t.mpi) {
    snprintf(target.name, sizeof target.name, "fake GPU (DRKC_TUNE_FAKE_MEASURE)");
  } else if (t.fake) { /* the ranks are asked all the same (their roles settle there) */
    drk_tune_device_t dev;
    if (!drk_tune_mpi_device(t.mpi, &dev, msg, sizeof msg)) {
      fprintf(stderr, "drkc tune: error: the GPU: %s\n", msg);
      goto done;
    }
    snprintf(target.name, sizeof target.name, "%s", dev.name);
  } else {
    drk_tune_device_t dev;
    if (!(t.mpi ? drk_tune_mpi_device(t.mpi, &dev, msg, sizeof msg) : drk_tune_worker_device(&t.w, &dev, msg, sizeof msg))) {
      fprintf(stderr, "drkc tune: error: the GPU: %s\n", msg);
      goto done;
    }
    target.sms = dev.sms, target.sm_mhz = dev.sm_mhz, target.mem_mhz = dev.mem_mhz, target.bw_gbs = dev.bw_gbs;
    target.l2_bytes = dev.l2_bytes;
    snprintf(target.driver, sizeof target.driver, "%s", dev.driver);
    snprintf(target.cuda, sizeof target.cuda, "%s", dev.cuda);
    snprintf(target.name, sizeof target.name, "%s", dev.name);
    nvml = dev.nvml, l2_flush = dev.l2_flush;
    if (!l2_flush) fprintf(stderr, "drkc tune: warning: L2 is not flushed between timed runs (no driver memory for it)\n");
    int want = drk_target_info((drk_target_t)__builtin_ctz(t.c.targets))->number;
    if (dev.cc && dev.cc != want)
      fprintf(stderr, "drkc tune: warning: the GPU %s is sm_%d; the kernels are built for %s\n", dev.name, dev.cc, arch);
  }
  ms = calloc(l->n_launches + 1, sizeof *ms);
  if (!t.fake && !(t.mpi ? drk_tune_mpi_profile(t.mpi, ms, l->n_launches, t.iters, msg, sizeof msg)
                         : drk_tune_worker_profile_reference(&t.w, ms, l->n_launches, t.iters, msg, sizeof msg))) {
    fprintf(stderr, "drkc tune: error: profiling the heuristic's module: %s\n", msg);
    goto done;
  }
  /* kernels: a node's first launch names it; its knob space and time are its launches' */
  ks = calloc(l->n_launches + 1, sizeof *ks);
  for (size_t i = 0; i < l->n_launches; i++) {
    const drk_launch_t *la = &l->launches[i];
    size_t j = 0;
    while (j < nks && l->launches[ks[j].launch].node != la->node) j++;
    if (j == nks) {
      ks[nks] = (tkernel_t){.name = la->kernel->name, .launch = i, .kind = la->sched.kind ? la->sched.kind : "plain"};
      /* entries name kernels by their node index */
      ks[nks].node = (size_t)strtoull(la->kernel->name + 1, NULL, 10);
      memcpy(ks[nks].wl, la->workload, sizeof ks[nks].wl);
      nks++;
    }
    ks[j].ms += ms[i];
    ks[j].space |= la->knob_space;
    for (int b = 0; b < DRK_KNOB_COUNT; b++)
      if ((la->knob_space & (1u << b)) && !(ks[j].heur.set & (1u << b)))
        drk_knob_set(&ks[j].heur, (drk_knob_id_t)b, drk_schedule_knob_value(&la->sched, (drk_knob_id_t)b));
  }
  bool tf32 = drk_precision_allow_tf32(&(drk_precision_options_t){.precision = t.c.precision, .matmul = t.c.matmul});
  for (size_t j = 0; j < nks; j++) {
    kernel_facts(t.g, l, &ks[j], tf32);
    if (t.fake) { /* the fake reference profile: the heuristic's synthetic time */
      drk_search_space_t s;
      ks[j].ms = ks[j].space && drk_search_space_init(&s, ks[j].space, &ks[j].heur, err, sizeof err)
                     ? fake_time_us(&s, ks[j].wl, &s.heuristic) / 1e3
                     : 0.002;
    }
  }
  double total = 0;
  for (size_t j = 0; j < nks; j++) total += ks[j].ms;
  qsort(ks, nks, sizeof *ks, cmp_ms);
  if (log && !(t.log = fopen(log, resume ? "a" : "w")))
    fprintf(stderr, "drkc tune: cannot write the log %s: %s\n", log, strerror(errno));
  if (t.log) {
    fputs("{\"event\":\"model_start\"", t.log);
    ev_s(t.log, "model", model);
    ev_s(t.log, "target", arch);
    ev_s(t.log, "gpu", target.name);
    ev_s(t.log, "policy", policy_arg);
    ev_known(t.log, "budget_s", budget > 0 ? budget : -1);
    ev_b(t.log, "nvml", nvml);
    ev_b(t.log, "l2_flush", l2_flush);
    ev_n(t.log, "before_us", total * 1e3);
    ev_n(t.log, "kernels", (double)nks);
    ev_n(t.log, "trials", trials);
    ev_s(t.log, "db", dbp);
    ev_b(t.log, "resume", resume);
    if (t.fake) ev_b(t.log, "fake", true);
    fputs("}\n", t.log);
    fflush(t.log);
  }
  printf("drkc tune: %s: %zu kernels, %.3f ms per run (kernels one by one); policy %s, up to %d trials per kernel; "
         "database %s\n", model, nks, total, policy_arg, trials, dbp);
  fflush(stdout);
  /* the kernels to tune: with knobs, most time-consuming first, --kernels of them; with
   * --resume, the kernels the database has records of (for this target and drkc version) come
   * first, so that a resumed tune takes the kernels it took before even where two kernels'
   * shares swap places with the noise of the reference profile */
  size_t todo = 0;
  if (resume && db && max_kernels) {
    char tkey[17];
    drk_search_target_key(&target, tkey);
    for (size_t j = 0; j < nks && (int)todo < max_kernels; j++) {
      if (!ks[j].space) continue;
      drk_search_query_t q = {.workload = ks[j].wl, .target = tkey, .drkc_version = DRK_VERSION_STRING, .limit = 1};
      bool any = false;
      if (drk_search_db_query(db, &q, resume_seen, &any, err, sizeof err) && any) ks[j].tried = true, todo++;
    }
  }
  for (size_t j = 0; j < nks; j++)
    if (ks[j].space && !ks[j].tried && (!max_kernels || (int)todo < max_kernels)) ks[j].tried = true, todo++;
  char tags[256];
  const char *base = strrchr(model, '/');
  snprintf(tags, sizeof tags, "arch=%s,precision=%s,model=%s", arch, drk_precision_name(t.c.precision),
           base ? base + 1 : model);
  bool stopped = false;
  size_t left = todo;
  t.tty = isatty(STDERR_FILENO) && !getenv("DRKC_TUNE_NO_PROGRESS");
  t.k_count = (int)todo, t.trials = trials, t.k_index = -1;
  double search_t0 = now_s();
  for (size_t j = 0; j < nks; j++) {
    tkernel_t *k = &ks[j];
    if (!k->tried) continue;
    if (stopped || now_s() >= t.deadline) { /* said in the log and on stdout, not silently dropped */
      k->heur_us = -1;
      k->timed_out = !stopped;
      kernel_summary(t.log, k, total, stopped ? "the tune stopped before this kernel" : "the --time budget is spent");
      progress_clear(&t);
      printf("  %-28s not tuned: %s\n", k->name, stopped ? "the tune stopped before it" : "the --time budget is spent");
      k->tried = false;
      continue;
    }
    double k0 = now_s();
    drk_search_space_t s;
    if (!drk_search_space_init(&s, k->space, &k->heur, err, sizeof err)) {
      fprintf(stderr, "drkc tune: %s: not tuned: %s\n", k->name, err);
      k->tried = false;
      left--;
      continue;
    }
    snprintf(s.kernel, sizeof s.kernel, "%s", k->name);
    snprintf(s.workload, sizeof s.workload, "%s", k->wl);
    snprintf(s.kind, sizeof s.kind, "%s", k->kind);
    s.prune = prune_point, s.prune_known = prune_known_point, s.prune_ctx = &t;
    memset(t.memo, 0, sizeof t.memo), t.n_memo = 0, t.pruned = 0;
    /* the time budget, shared among the kernels left */
    double share = budget > 0 ? (t.deadline - now_s()) / (double)left : 0;
    t.k_deadline = share > 0 ? now_s() + share : INFINITY;
    float context[DRK_SEARCH_CONTEXT_FEATURES];
    drk_search_context_features(k->description, &target, context);
    drk_search_policy_options_t po = {.config = &cfg, .seed = t.seed + j, .context = context,
                                      .n_context = DRK_SEARCH_CONTEXT_FEATURES};
    drk_search_policy_t *pol = drk_search_policy_create(policy, &s, &po, err, sizeof err);
    if (!pol) {
      fprintf(stderr, "drkc tune: error: %s\n", err);
      goto done;
    }
    t.k = k;
    t.k_index++, t.k_measured = 0, t.k_best_us = t.k_ref_us = -1;
    drk_search_tune_options_t to = {.kernel = k->name, .workload = k->wl, .description = k->description,
                                    .target = &target, .model = model, .tags = tags, .budget = trials,
                                    .time_limit_s = share,
                                    .seed = t.seed + j, .config = &cfg, .db = db, .resume = resume,
                                    .warm_start = true, .events = t.log, .measure = measure, .prepare = prepare,
                                    .ctx = &t, .log = search_log, .log_ctx = &t};
    drk_search_tune_result_t res;
    bool ok = drk_search_tune(&s, pol, &to, &res, err, sizeof err);
    k->pruned = t.pruned;
    drk_search_policy_destroy(pol);
    clear_prep(&t);
    left--;
    k->tune_s = now_s() - k0;
    k->timed_out = res.timed_out;
    if (!ok) {
      progress_clear(&t);
      fprintf(stderr, "drkc tune: %s: %s\n", k->name, err);
      if (strstr(err, "stopped the tune")) stopped = true;
    }
    k->trials = res.measured;
    k->invalid = res.invalid;
    k->heur_us = res.heuristic_metrics.valid ? res.heuristic_metrics.time_us : -1;
    if (res.found && res.best_metrics.valid) {
      k->tuned = true;
      k->stable = res.stable;
      k->best = res.best;
      k->best_us = res.best_metrics.time_us;
      k->record = res.best_record;
      snprintf(k->best_text, sizeof k->best_text, "%s", res.best_text);
    }
    progress_clear(&t);
    kernel_summary(t.log, k, total, ok ? NULL : err);
    if (k->tuned)
      printf("  %-28s %5.1f%% of the run: heuristic %.2f us, best %.2f us (%.2fx%s), %d trials (%d invalid, %d "
             "resumed): %s\n",
             k->name, total > 0 ? 100 * k->ms / total : 0, k->heur_us, k->best_us,
             k->best_us > 0 ? k->heur_us / k->best_us : 0, k->stable ? ", stable" : ", NOT stable", k->trials,
             k->invalid, res.resumed, k->best_text);
    else
      printf("  %-28s not tuned\n", k->name);
    fflush(stdout);
  }
  double search_s = now_s() - search_t0, compile_s = 0;
  for (size_t j = 0; j < nks; j++) compile_s += ks[j].gen_s;
  /* the tuned schedules, and the model with all of them against the heuristic's */
  FILE *so = fopen(outp, "w");
  if (!so) {
    fprintf(stderr, "drkc tune: error: cannot write %s: %s\n", outp, strerror(errno));
    goto done;
  }
  fprintf(so, "# drkc tune %s: policy %s, %d measurements, %d worker restarts, %.0f s; database %s\n", model, policy_arg,
          t.measured, t.w.restarts, now_s() - t.t0, dbp);
  size_t nbest = 0;
  double after_us = total * 1e3;
  for (size_t j = 0; j < nks; j++) {
    if (!ks[j].tuned || drk_search_point_equal(&ks[j].best, &ks[j].heur)) continue;
    char pt[512];
    drk_sched_knobs_format(&ks[j].best, pt, sizeof pt);
    fprintf(so, "%s wl=%s %s %s\n", ks[j].name, ks[j].wl, ks[j].kind, pt);
    if (ks[j].heur_us > 0) after_us -= ks[j].heur_us - ks[j].best_us;
    nbest++;
  }
  fclose(so);
  bool checked = false;
  if (nbest && !t.fake) { /* the whole model with every tuned kernel, against the heuristic's, in one worker call */
    drk_sched_entry_t *es = calloc(nbest, sizeof *es);
    size_t n = 0;
    for (size_t j = 0; j < nks; j++) {
      if (!ks[j].tuned || drk_search_point_equal(&ks[j].best, &ks[j].heur)) continue;
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
    snprintf(path, sizeof path, "%s/tuned.drkm", t.dir);
    void *mb = NULL;
    size_t msz = 0;
    FILE *mf = NULL;
    bool built = drk_pipeline_build(t.g, &c, "module", &mb, &msz, &qd);
    if (built && t.mpi) { /* measured by a measure rank */
      drk_tune_mpi_cand_t mc;
      mpi_cand(&t, &ks[0], &ks[0].heur, &mc);
      mc.seed = t.seed + 7777;
      drk_tune_result_t r;
      if (!drk_tune_mpi_measure_module(t.mpi, mb, msz, &mc, &r, msg, sizeof msg)) snprintf(r.msg, sizeof r.msg, "%s", msg), r.valid = false;
      checked = r.valid;
      if (r.valid) {
        after_us = r.run_ms * 1e3 * (total > 0 && r.ref_run_ms > 0 ? total / r.ref_run_ms : 1);
        printf("drkc tune: the model, kernels one by one: %.4f ms tuned vs %.4f ms heuristic (%.3fx)\n", r.run_ms,
               r.ref_run_ms, r.run_ms > 0 ? r.ref_run_ms / r.run_ms : 0);
      } else {
        printf("drkc tune: the tuned model FAILED its check: %s\n", r.msg);
      }
    } else if (built && (mf = fopen(path, "wb"))) {
      bool okw = fwrite(mb, 1, msz, mf) == msz;
      if (fclose(mf) == 0 && okw) {
        drk_tune_result_t r = drk_tune_worker_measure(&t.w, path, ks[0].name, 3, t.iters, t.seed + 7777);
        checked = r.valid;
        if (r.valid) {
          after_us = r.run_ms * 1e3 * (total > 0 && r.ref_run_ms > 0 ? total / r.ref_run_ms : 1);
          printf("drkc tune: the model, kernels one by one: %.4f ms tuned vs %.4f ms heuristic (%.3fx)\n", r.run_ms,
                 r.ref_run_ms, r.run_ms > 0 ? r.ref_run_ms / r.run_ms : 0);
        } else {
          printf("drkc tune: the tuned model FAILED its check: %s\n", r.msg);
        }
      }
      unlink(path);
    } else {
      printf("drkc tune: the tuned model did not compile: %s\n", qd.first);
    }
    free(mb);
    free(es);
  }
  if (t.log) {
    fputs("{\"event\":\"model_end\"", t.log);
    ev_n(t.log, "before_us", total * 1e3);
    ev_n(t.log, "after_us", after_us);
    ev_b(t.log, "checked", checked);
    ev_n(t.log, "kernels_changed", (double)nbest);
    ev_n(t.log, "measurements", t.measured);
    ev_n(t.log, "t_s", now_s() - t.t0);
    ev_n(t.log, "search_s", search_s);
    ev_n(t.log, "compile_s", compile_s);
    ev_n(t.log, "measure_s", t.measure_s);
    ev_b(t.log, "mpi", t.mpi != NULL);
    fputs("}\n", t.log);
  }
  /* the GPU's busy fraction: time inside measurements over the search's wall time (the
   * scaling benchmark, tests/bench/tune_mpi.sh, reads it) */
  printf("drkc tune: search %.1f s: %d measurements (%.1f per minute), compiling %.1f s, measuring %.1f s (%.0f%% of "
         "the search)\n", search_s, t.measured, search_s > 0 ? 60 * t.measured / search_s : 0, compile_s, t.measure_s,
         search_s > 0 ? 100 * t.measure_s / search_s : 0);
  if (t.mpi) drk_tune_mpi_report(t.mpi, stdout, t.log);
  printf("drkc tune: %d measurements (%d worker restarts) in %.0f s; %zu kernels changed; wrote %s and %s\n", t.measured,
         t.w.restarts, now_s() - t.t0, nbest, outp, dbp);
  rc = stopped ? 1 : 0;
done:
  drk_tune_worker_stop(&t.w);
  clear_prep(&t);
  if (t.log) fclose(t.log);
  if (t.fake_log) fclose(t.fake_log);
  drk_search_db_close(db);
  free(ks);
  free(ms);
  drk_pipeline_destroy(p);
  unlink(ref);
  rmdir(t.dir);
  drk_tune_mpi_finish(t.mpi, rc); /* --mpi: rank 0 stops the others; MPI ends (last: it may abort the job) */
  return rc;
}
