/* Tune logs from the real tuning loop (drk_search_tune, search/tune.h) on a synthetic cost
 * landscape, for the `drkc report` test: no GPU, the measure callback computes a time from the
 * point (a quadratic bowl over the sm_90a matmul's six knobs, noise, and an invalid corner).
 *
 * Writes DIR/rl.jsonl (ppo on two kernels), DIR/evo.jsonl and DIR/random.jsonl (the first
 * kernel): each wrapped in the model_start / kernel_summary / model_end events drkc tune adds
 * around the loop's own, as drkc tune would for a model of those kernels.
 *
 * usage: report_gen_log DIR [TRIALS] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search/tune.h"

static const char *lines[2] = {
    "k2_MatMul wl=9330790a0629e222d8313a9748526dfa mm_ws mm.tile_n=64 mm.split_k=1 mm.stages=6 mm.persistent=0 "
    "mm.cluster=1 mm.staged=1",
    "k5_MatMul wl=0123456789abcdef0123456789abcdef mm_ws mm.tile_n=128 mm.split_k=2 mm.stages=4 mm.persistent=0 "
    "mm.cluster=1 mm.staged=0"};
static const char *descs[2] = {"mm_ws M=128 N=768 K=768 dtype=f16", "mm_ws M=128 N=3072 K=768 dtype=f16"};
static drk_search_target_t H200 = {"sm_90a", 132, 1980, 2619, 4800, 52428800, "560.35.03", "12.6", "NVIDIA H200"};

typedef struct land {
  double scale;
  int kernel;
} land_t;

static double hash01(const int *idx, int n) {
  uint64_t h = 0x9e3779b97f4a7c15ull;
  for (int d = 0; d < n; d++) {
    h ^= (uint64_t)(idx[d] + 1) * 0xbf58476d1ce4e5b9ull;
    h = (h ^ (h >> 31)) * 0x94d049bb133111ebull;
  }
  return (double)(h >> 11) * 0x1.0p-53;
}

static int measure(void *ctx, const drk_search_space_t *s, const drk_sched_knobs_t *p, drk_search_metrics_t *m) {
  land_t *L = ctx;
  int idx[DRK_KNOB_COUNT];
  if (!drk_search_point_indices(s, p, idx)) {
    snprintf(m->msg, sizeof m->msg, "not a point");
    return 1;
  }
  static const double c[2][6] = {{0.5, 0.3, 0.5, 1.0, 0.0, 1.0}, {1.0, 0.2, 0.3, 0.5, 1.0, 0.0}};
  static const double w[6] = {3, 2, 2, 1, 0.5, 0.5};
  double q = 0;
  for (int d = 0; d < s->n_dims && d < 6; d++) {
    double u = s->n_values[d] > 1 ? (double)idx[d] / (s->n_values[d] - 1) : 0;
    q += w[d] * (u - c[L->kernel][d]) * (u - c[L->kernel][d]);
  }
  q += 0.08 * hash01(idx, s->n_dims);
  double t = L->scale * (1 + q);
  bool valid = !(idx[0] == 2 && idx[2] >= 4); /* "shared memory": N tile 256 with many stages */
  m->valid = valid;
  m->time_us = valid ? t : t / 10;
  m->mem_bytes = 65536;
  m->error = valid ? 1e-4 : 0.8;
  m->tolerance = 1e-2;
  m->sm_mhz = 1980;
  m->power_w = 450;
  m->variance = 0.01;
  if (!valid) snprintf(m->msg, sizeof m->msg, "output mismatch: rel. error 0.8 <shared memory> & \"overrun\"");
  return 0;
}

static bool tune(FILE *ev, const char *policy, int kernel, int trials, drk_search_tune_result_t *res) {
  drk_search_space_t s;
  char err[1200];
  if (!drk_search_space_parse_line(lines[kernel], &s, err, sizeof err)) {
    fprintf(stderr, "space: %s\n", err);
    return false;
  }
  drk_search_config_t c;
  drk_search_config_default(&c);
  c.batch = 8;
  c.screen = 4;
  float ctx[DRK_SEARCH_CONTEXT_FEATURES];
  drk_search_context_features(descs[kernel], &H200, ctx);
  drk_search_policy_options_t po = {&c, 11 + (uint64_t)kernel, ctx, DRK_SEARCH_CONTEXT_FEATURES};
  drk_search_policy_t *p = drk_search_policy_create(policy, &s, &po, err, sizeof err);
  if (!p) {
    fprintf(stderr, "policy: %s\n", err);
    return false;
  }
  land_t L = {kernel ? 140.0 : 50.0, kernel};
  drk_search_tune_options_t o = {0};
  o.kernel = kernel ? "k5_MatMul" : "k2_MatMul";
  o.description = descs[kernel];
  o.target = &H200;
  o.budget = trials;
  o.seed = 3;
  o.config = &c;
  o.events = ev;
  o.measure = measure;
  o.ctx = &L;
  bool ok = drk_search_tune(&s, p, &o, res, err, sizeof err);
  if (!ok) fprintf(stderr, "tune: %s\n", err);
  drk_search_policy_destroy(p);
  return ok;
}

static bool write_log(const char *dir, const char *name, const char *policy, int n_kernels, int trials) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s.jsonl", dir, name);
  FILE *f = fopen(path, "w");
  if (!f) {
    perror(path);
    return false;
  }
  static const double other_us = 300; /* the model's untuned kernels */
  drk_search_tune_result_t res[2];
  double before = other_us, after = other_us;
  fprintf(f,
          "{\"event\":\"model_start\",\"model\":\"synthetic.onnx\",\"target\":\"sm_90a\",\"gpu\":\"NVIDIA H200 "
          "(synthetic landscape)\",\"policy\":\"%s\",\"budget_s\":60,\"nvml\":false,\"before_us\":null}\n",
          policy);
  for (int k = 0; k < n_kernels; k++) {
    if (!tune(f, policy, k, trials, &res[k])) return false;
    double h = res[k].heuristic_metrics.time_us, b = res[k].best_metrics.time_us;
    before += h;
    after += res[k].found ? b : h;
  }
  for (int k = 0; k < n_kernels; k++) {
    double h = res[k].heuristic_metrics.time_us, b = res[k].best_metrics.time_us;
    fprintf(f,
            "{\"event\":\"kernel_summary\",\"kernel\":\"%s\",\"workload\":\"%s\",\"kind\":\"matmul\",\"share\":%.6f,"
            "\"heuristic_us\":%.6f,\"best_us\":%.6f,\"roofline_us\":%.6f,\"precision\":\"%s\",\"trials\":%d,"
            "\"invalid\":%d,\"tuned\":%s,\"best_point\":\"%s\",\"gen_s\":%.3f,\"tune_s\":%.3f}\n",
            k ? "k5_MatMul" : "k2_MatMul", k ? "0123456789abcdef0123456789abcdef" : "9330790a0629e222d8313a9748526dfa",
            h / before, h, b, (k ? 140.0 : 50.0) * 0.8, k ? "fp16" : "bf16", res[k].measured, res[k].invalid,
            res[k].found ? "true" : "false", res[k].best_text, 0.5 + k, 0.1 * res[k].measured);
  }
  fprintf(f,
          "{\"event\":\"kernel_summary\",\"kernel\":\"k9_Softmax\",\"kind\":\"rows\",\"share\":%.6f,\"heuristic_us\":"
          "%.6f,\"best_us\":%.6f,\"roofline_us\":null,\"precision\":\"fp32\",\"tuned\":false}\n",
          other_us / before, other_us, other_us);
  fprintf(f, "{\"event\":\"model_end\",\"before_us\":%.6f,\"after_us\":%.6f,\"checked\":true,\"t_s\":1.5}\n", before,
          after);
  return fclose(f) == 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: report_gen_log DIR [TRIALS]\n");
    return 2;
  }
  int trials = argc > 2 ? atoi(argv[2]) : 40;
  if (!write_log(argv[1], "rl", "ppo", 2, trials) || !write_log(argv[1], "evo", "evo", 1, trials) ||
      !write_log(argv[1], "random", "random", 1, trials))
    return 1;
  return 0;
}
