/* The compile pipeline's stage table and the state the stages pass on (pipeline.h).
 *
 * A stage reads what earlier stages left in drk_pipeline_t and adds its own part: import the
 * graph, the graph passes rewrite it in place, fuse the partition, lower the tile module and
 * launch plan, plan-memory the arena, codegen each target's code, package the fat binary,
 * bundle and module. Stages never look past their inputs, so a caller can stop after any of
 * them and take an output (drk_pipeline_output). */
#include "pipeline/pipeline.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <llvm-c/Core.h>

#include "backends/common/kcache.h"
#include "backends/nvptx/nvptx.h"
#include "passes/pad_exact.h"
#include "passes/quantize.h"
#include "backends/package/package.h"
#include "backends/package/build_amd.h"
#include "backends/package/module.h"
#include "backends/targets.h"
#include "frontend/frontend.h"
#include "frontend/onnx/onnx_import.h"
#include "frontend/onnx/tensor_io.h"
#include "ir/tensor.h"
#include "ir/interp.h"
#include "lower/fuse.h"
#include "passes/plan_memory.h"
#include "passes/precision_auto.h"

struct drk_pipeline {
  const drk_compile_options_t *o;
  drk_diag_t *d;
  const char *path;
  drk_graph_t *g;
  bool owns_graph;
  char *import_hint; /* --shapes-from's sizes for the import (freed with p) */
  const drk_emit_kind_t *emit;
  int next;    /* the next stage to run */
  bool failed;
  drk_fusion_t fusion;
  bool fused;
  drk_lowered_t l;
  bool lowered;
  /* pad_bind: the length inputs drk_pass_pad_mask added (NULL where a dim needed none) and
   * the bucket's size of each dim */
  const drk_value_t *pad_len[DRK_PAD_MAX_DIMS];
  int64_t pad_size[DRK_PAD_MAX_DIMS];
  int n_pad;
  drk_mem_plan_t plan;
  bool planned;
  drk_nv_code_t code[DRK_TARGET_COUNT]; /* NVIDIA targets in target order */
  size_t n_code;
  char *llvm;  /* --emit=llvm */
  void *hsaco, *bundle, *fatbin, *module, *weights;
  size_t hsaco_size, bundle_size, fatbin_size, module_size, weights_size;
  char image_targets[256]; /* the fat binary's images, "sm_90a,compute_90a" */
  double ms[32];           /* wall time per stage */
  double t_start;          /* when the stage running now began (progress line) */
  bool drew;               /* a progress line is on the terminal */
  const char *target_now;  /* codegen: the target being compiled */
  drk_codegen_stats_t stats;
  /* --accuracy-budget: calibration inputs, the model's outputs on them (taken at
   * verify-canonical), the choice (precision) */
  drk_tensor_t *calib, *calib_ref;
  drk_precision_auto_t autop;
  bool has_auto;
};

/* ---- helpers ---- */
static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static unsigned nvidia_targets(const drk_compile_options_t *o) {
  return o->targets & ~(1u << DRK_TARGET_GFX942);
}

static int fusion_level(const drk_compile_options_t *o) {
  return o->fusion_set ? o->fusion_level : DRK_FUSION_DEFAULT_LEVEL;
}

/* The lowering's options: tile kernels are lowered once for every target of the module (one
 * plan serves every image): for the oldest NVIDIA target, with Hopper-only kernels only when
 * sm_90a is the only one; with gfx942 in the set, the common sm_80 form, which the AMD backend
 * maps to MFMA. */
static drk_lower_options_t lower_options(const drk_compile_options_t *o) {
  drk_lower_options_t lo = {.target_sm = 80,
                            .allow_tf32 = drk_precision_allow_tf32(
                                &(drk_precision_options_t){.precision = o->precision, .matmul = o->matmul}),
                            .fusion_set = o->fusion_set, .fusion_level = o->fusion_level,
                            .max_group_depth = o->max_depth, .knobs = o->knobs, .schedules = o->schedules,
                            .lookup = o->lookup, .lookup_ctx = o->lookup_ctx};
  unsigned amd = o->targets & (1u << DRK_TARGET_GFX942), nv = nvidia_targets(o);
  /* a --dynamic bucket: flat kernels take their element count at launch, so buckets share them */
  lo.runtime_sizes = o->pad_bind && !amd;
  for (int t = 0; t < DRK_TARGET_COUNT && nv && !amd; t++)
    if (nv & (1u << t)) {
      lo.target_sm = drk_target_info((drk_target_t)t)->number;
      lo.arch_specific = drk_target_info((drk_target_t)t)->arch_specific;
      break;
    }
  return lo;
}

static void dump_graph(const drk_pipeline_t *p, FILE *out) { drk_graph_print_ex(p->g, out, 4096); }

/* ---- import ---- */
static bool read_input_file(const char *path, drk_dtype_t expect, drk_tensor_t *out, drk_diag_t *d) {
  size_t n = strlen(path);
  if (n > 4 && strcmp(path + n - 4, ".npy") == 0) return drk_tensor_read_npy(path, out, d);
  return drk_tensor_read_pb_expect(path, expect, out, d);
}

static bool file_exists(const char *p) {
  struct stat st;
  return stat(p, &st) == 0;
}

/* Binds every symbolic dim of the graph inputs to the size the given input tensor has, so the
 * compiled (static-shape) model matches the data. */
/* Appends SYM=SIZE for each symbolic dim of v that tensor t (of v's rank, or any when !same_rank)
 * sizes, once per item, to spec (NUL-terminated, *len its length). */
static void spec_add(char *spec, size_t cap, size_t *len, const drk_value_t *v, const drk_tensor_t *t, bool same_rank) {
  if (same_rank && t->rank != v->shape.rank) return;
  for (int k = 0; k < v->shape.rank && k < t->rank; k++) {
    const char *sym = v->shape.dims[k].sym;
    if (!sym) continue;
    char item[300];
    int n = snprintf(item, sizeof item, "%s%s=%lld", *len ? "," : "", sym, (long long)t->dims[k]);
    if (n >= (int)sizeof item || *len + (size_t)n >= cap || strstr(spec, item + (*len ? 1 : 0))) continue;
    memcpy(spec + *len, item, (size_t)n + 1);
    *len += (size_t)n;
  }
}

bool drk_pipeline_bind_from_inputs(drk_graph_t *g, const drk_tensor_t *inputs, drk_diag_t *d) {
  char spec[4096] = "";
  size_t len = 0;
  for (size_t i = 0; i < g->n_inputs; i++) spec_add(spec, sizeof spec, &len, g->inputs[i], &inputs[i], false);
  return len == 0 || drk_graph_bind_dims(g, spec, d);
}

/* --shapes-from=DIR: symbolic input dims bound to the shapes of DIR/input_N.pb (or .npy). */
static bool bind_from_dir(drk_graph_t *g, const char *dir, drk_diag_t *d) {
  drk_tensor_t *ts = calloc(g->n_inputs + 1, sizeof *ts);
  bool ok = ts != NULL;
  for (size_t i = 0; ok && i < g->n_inputs; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/input_%zu.pb", dir, i);
    if (!file_exists(path)) snprintf(path, sizeof path, "%s/input_%zu.npy", dir, i);
    ok = read_input_file(path, g->inputs[i]->dtype, &ts[i], d);
  }
  ok = ok && drk_pipeline_bind_from_inputs(g, ts, d);
  for (size_t i = 0; ts && i < g->n_inputs; i++) drk_tensor_free(&ts[i]);
  free(ts);
  return ok;
}

char *drk_pipeline_import_hint(const char *model, const char *dir, const char *const *named, int n_named) {
  size_t ml = strlen(model);
  if (ml > 5 && !strcmp(model + ml - 5, ".drkg")) return NULL; /* a text graph needs no hint */
  drk_diag_t quiet;
  drk_diag_init(&quiet, NULL);
  drk_graph_t *g = drk_onnx_import_inputs(model, &quiet);
  if (!g) return NULL;
  char spec[4096] = "";
  size_t len = 0;
  for (size_t i = 0; i < g->n_inputs; i++) {
    const drk_value_t *v = g->inputs[i];
    bool sym = false;
    for (int k = 0; k < v->shape.rank; k++) sym |= v->shape.dims[k].sym != NULL;
    if (!sym) continue;
    char path[4096] = "";
    for (int k = 0; k < n_named && !*path; k++) {
      const char *eq = strchr(named[k], '=');
      if (eq && (size_t)(eq - named[k]) == strlen(v->name) && !strncmp(named[k], v->name, strlen(v->name)))
        snprintf(path, sizeof path, "%s", eq + 1);
    }
    if (!*path && dir) {
      snprintf(path, sizeof path, "%s/input_%zu.pb", dir, i);
      if (!file_exists(path)) snprintf(path, sizeof path, "%s/input_%zu.npy", dir, i);
    }
    drk_tensor_t t = {0};
    if (!*path || !file_exists(path) || !read_input_file(path, v->dtype, &t, &quiet)) continue;
    spec_add(spec, sizeof spec, &len, v, &t, true);
    drk_tensor_free(&t);
  }
  drk_graph_destroy(g);
  return len ? strdup(spec) : NULL;
}

/* --freeze-input NAME=FILE: the graph is specialized on that input's value. */
static bool freeze_inputs(drk_graph_t *g, const drk_compile_options_t *o, drk_diag_t *d) {
  for (int i = 0; i < o->n_freeze; i++) {
    const char *eq = strchr(o->freeze[i], '=');
    if (!eq || eq == o->freeze[i] || !eq[1]) {
      drk_diag_error(d, drk_loc_none, "--freeze-input needs NAME=FILE, got '%s'", o->freeze[i]);
      return false;
    }
    char *name = strndup(o->freeze[i], (size_t)(eq - o->freeze[i]));
    const drk_value_t *v = NULL;
    for (size_t k = 0; k < g->n_inputs; k++)
      if (strcmp(g->inputs[k]->name, name) == 0) v = g->inputs[k];
    drk_tensor_t t = {0};
    bool ok = v ? read_input_file(eq + 1, v->dtype, &t, d) : true;
    ok = ok && drk_graph_freeze_input(g, name, t.dtype, v ? t.rank : 0, t.dims, t.data, t.nbytes, d);
    drk_tensor_free(&t);
    free(name);
    if (!ok) return false;
  }
  return true;
}

static bool st_import(drk_pipeline_t *p) {
  if (p->g) return true; /* created over a graph */
  /* the sizes an import that unrolls may need: --bind's, else the caller's inputs', else
   * --shapes-from's */
  const char *hint = p->o->bind ? p->o->bind : p->o->import_hint;
  if (!hint && p->o->shapes_from) hint = p->import_hint = drk_pipeline_import_hint(p->path, p->o->shapes_from, NULL, 0);
  p->g = drk_frontend_load_bound(p->path, hint, p->d);
  p->owns_graph = true;
  if (!p->g) return false;
  return (!p->o->bind || drk_graph_bind_dims(p->g, p->o->bind, p->d)) &&
         (!p->o->shapes_from || bind_from_dir(p->g, p->o->shapes_from, p->d)) && freeze_inputs(p->g, p->o, p->d);
}

/* ---- graph passes ---- */
static bool st_verify(drk_pipeline_t *p) { return drk_graph_verify(p->g, p->d); }
/* With pad_bind (a --dynamic bucket): the symbolic graph masked where an op normalizes over a
 * padded axis (passes/pad_exact.h), then the dims bound to the bucket's sizes. */
static bool st_canonicalize(drk_pipeline_t *p) {
  if (!drk_pass_pipeline_canonicalize(p->g, p->d)) return false;
  if (!p->o->pad_bind) return true;
  char buf[1024];
  const char *names[DRK_PAD_MAX_DIMS];
  drk_value_t *lens[DRK_PAD_MAX_DIMS];
  int n = 0;
  snprintf(buf, sizeof buf, "%s", p->o->pad_bind);
  for (char *q = strtok(buf, ","); q && n < DRK_PAD_MAX_DIMS; q = strtok(NULL, ",")) {
    char *eq = strchr(q, '=');
    if (eq) *eq = 0;
    p->pad_size[n] = eq ? strtoll(eq + 1, NULL, 10) : -1;
    names[n++] = q;
  }
  if (!drk_pass_pad_mask(p->g, names, n, lens, p->d)) return false;
  for (int i = 0; i < n; i++) p->pad_len[i] = lens[i];
  p->n_pad = n;
  return drk_graph_bind_dims(p->g, p->o->pad_bind, p->d) && drk_pass_pipeline_canonicalize(p->g, p->d);
}

int drk_pipeline_length_inputs(const drk_pipeline_t *p, const drk_value_t **values, int64_t *sizes, int max) {
  int k = 0;
  for (int i = 0; i < p->n_pad && k < max; i++)
    if (p->pad_len[i]) values[k] = p->pad_len[i], sizes[k] = p->pad_size[i], k++;
  return k;
}

static bool st_fold_batchnorm(drk_pipeline_t *p) {
  size_t n = 0;
  drk_pass_fold_batchnorm(p->g, &n);
  if (p->o->verbose && n) fprintf(stderr, "drkc: folded %zu BatchNormalization nodes into convolutions\n", n);
  return true;
}

static bool st_conv_to_matmul(drk_pipeline_t *p) {
  size_t n = 0;
  if (!drk_pass_conv_to_matmul(p->g, &n)) return false;
  if (!n) return true;
  drk_pass_eliminate_dead(p->g);
  if (p->o->verbose) fprintf(stderr, "drkc: %zu pointwise or patch convolutions run as matrix products\n", n);
  return drk_pass_infer_shapes(p->g, p->d);
}

static bool st_gemm_to_matmul(drk_pipeline_t *p) {
  size_t n = 0;
  if (!drk_pass_gemm_to_matmul(p->g, &n)) {
    drk_diag_error(p->d, drk_loc_none, "out of memory rewriting Gemm as MatMul");
    return false;
  }
  if (!n) return true;
  drk_pass_eliminate_dead(p->g);
  if (p->o->verbose) fprintf(stderr, "drkc: %zu Gemms run as MatMuls\n", n);
  return drk_pass_infer_shapes(p->g, p->d);
}

/* W4A16 (passes/quantize.c): MatMuls by DequantizeLinear of int4/uint4 constants folded into
 * MatMulNBits, --quantize=int4-weight, then every MatMulNBits in the GPU's packing. After
 * merge-matmul, so sibling projections (Q/K/V) are quantized as the one MatMul they became. */
static bool st_quantize(drk_pipeline_t *p) {
  size_t folded = 0, packed = 0;
  drk_quantize_stats_t qs = {0};
  bool ok = drk_pass_fold_dequant_matmul(p->g, &folded) &&
            (p->o->quantize_group <= 0 || drk_pass_quantize_int4(p->g, p->o->quantize_group, &qs)) &&
            drk_pass_pack_w4(p->g, &packed);
  if (!ok) {
    drk_diag_error(p->d, drk_loc_none, "out of memory quantizing weights");
    return false;
  }
  FILE *r = p->o->report ? p->o->report : p->o->verbose ? stderr : NULL;
  const char *who = p->o->report ? "report" : "drkc";
  if (r && p->o->quantize_group > 0)
    fprintf(r, "%s: --quantize=int4-weight (group %d): %zu MatMuls quantized, weights %llu -> %llu bytes; %zu left in "
            "float (K %% %d != 0), %zu (weights padded for sm_90a)\n", who, p->o->quantize_group, qs.quantized,
            (unsigned long long)qs.bytes_before, (unsigned long long)qs.bytes_after, qs.skipped, p->o->quantize_group,
            qs.padded);
  if (r && folded) fprintf(r, "%s: %zu DequantizeLinear -> MatMul pairs run as MatMulNBits\n", who, folded);
  if (!folded && !qs.quantized && !packed) return true;
  drk_pass_eliminate_dead(p->g);
  return drk_pass_infer_shapes(p->g, p->d);
}

/* Only for sm_90a, whose TMA + wgmma kernel needs N % 8 == 0 (the general kernel takes any N),
 * and where the Slice it adds fuses into a flat group (level >= 1). */
static bool st_pad_matmul_n(drk_pipeline_t *p) {
  if (!(p->o->targets & (1u << DRK_TARGET_SM90A)) || fusion_level(p->o) < 1) return true;
  size_t n = 0;
  if (!drk_pass_pad_matmul_n(p->g, &n)) {
    drk_diag_error(p->d, drk_loc_none, "out of memory padding MatMul weights");
    return false;
  }
  if (!n) return true;
  drk_pass_eliminate_dead(p->g);
  if (p->o->verbose) fprintf(stderr, "drkc: %zu MatMul weights padded to a multiple of 8 columns\n", n);
  return drk_pass_infer_shapes(p->g, p->d);
}

/* Sibling MatMuls of one activation as one (q/k/v projections): only where matmul epilogues
 * fuse (fusion level >= 2, the default), so levels 0 and 1 keep a kernel per MatMul. */
static bool st_merge_matmul(drk_pipeline_t *p) {
  if (fusion_level(p->o) < 2) return true;
  size_t groups = 0, n = 0;
  if (!drk_pass_merge_matmul(p->g, &groups, &n)) return false;
  if (!groups) return true;
  drk_pass_eliminate_dead(p->g);
  if (p->o->verbose) fprintf(stderr, "drkc: %zu MatMuls sharing a left operand merged into %zu\n", n, groups);
  return drk_pass_infer_shapes(p->g, p->d);
}

static bool budgeted(const drk_compile_options_t *o) {
  return o->precision == DRK_PREC_AUTO && o->accuracy_budget > 0;
}

/* A calibration input drawn as drkc run draws its inputs (tools/drkc.c random_input): floats
 * uniform in [-1, 1), integers below the smallest axis a Gather indexes with them (at most 4),
 * bools fair coins. */
static bool draw_input(const drk_graph_t *g, const drk_value_t *v, uint64_t *rng, drk_tensor_t *out, drk_diag_t *d) {
  int64_t dims[DRK_MAX_RANK];
  bool ok = v->shape.rank >= 0 && v->shape.rank <= DRK_MAX_RANK;
  for (int i = 0; ok && i < v->shape.rank; i++) ok = !v->shape.dims[i].sym && v->shape.dims[i].size >= 0;
  if (!ok) {
    drk_diag_error(d, v->loc, "--accuracy-budget: input '%s' has no static shape to draw calibration data for: give "
                   "--calibration=DIR with --shapes-from=DIR (or --bind)", v->name);
    return false;
  }
  for (int i = 0; i < v->shape.rank; i++) dims[i] = v->shape.dims[i].size;
  if (!drk_tensor_alloc(out, v->dtype, v->shape.rank, dims)) {
    drk_diag_error(d, v->loc, "--accuracy-budget: input '%s': cannot allocate calibration data", v->name);
    return false;
  }
  int64_t n = drk_tensor_numel(out), bound = drk_graph_index_bound(g, v, 4);
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = drk_splitmix64(rng);
    if (drk_dtype_is_float(v->dtype)) drk_tensor_set_f64(out, i, (double)(r >> 11) * 0x1.0p-52 - 1.0);
    else if (v->dtype == DRK_DT_BOOL) drk_tensor_set_i64(out, i, (int64_t)(r & 1));
    else drk_tensor_set_i64(out, i, (int64_t)(r % (uint64_t)bound));
  }
  return true;
}

/* A calibration input from DIR/input_<i>.pb or .npy, checked against the graph input. */
static bool read_calibration(const char *dir, size_t i, const drk_value_t *v, drk_tensor_t *out, drk_diag_t *d) {
  char path[4096];
  snprintf(path, sizeof path, "%s/input_%zu.pb", dir, i);
  if (!file_exists(path)) snprintf(path, sizeof path, "%s/input_%zu.npy", dir, i);
  if (!file_exists(path)) {
    drk_diag_error(d, drk_loc_none, "--calibration %s has no input_%zu.pb or input_%zu.npy for input %zu '%s'", dir, i, i,
                   i, v->name);
    return false;
  }
  if (!read_input_file(path, v->dtype, out, d)) return false;
  bool ok = out->dtype == v->dtype && out->rank == v->shape.rank;
  for (int k = 0; ok && k < out->rank; k++) ok = v->shape.dims[k].sym || v->shape.dims[k].size == out->dims[k];
  if (!ok) drk_diag_error(d, drk_loc_none, "--calibration: %s does not match input '%s' (%s of rank %d%s)", path,
                          v->name, drk_dtype_name(v->dtype), v->shape.rank,
                          out->dtype == v->dtype && out->rank == v->shape.rank ? ", other sizes" : "");
  return ok;
}

/* --accuracy-budget: the calibration inputs and the interpreter's outputs on them for the
 * model as given (the canonical graph: drkc run --check's reference). */
static bool calibrate(drk_pipeline_t *p) {
  const drk_graph_t *g = p->g;
  p->calib = calloc(g->n_inputs + 1, sizeof *p->calib);
  p->calib_ref = calloc(g->n_outputs + 1, sizeof *p->calib_ref);
  if (!p->calib || !p->calib_ref) {
    drk_diag_error(p->d, drk_loc_none, "--accuracy-budget: out of memory");
    return false;
  }
  uint64_t rng = 0; /* drkc run's default --seed */
  for (size_t i = 0; i < g->n_inputs; i++)
    if (!(p->o->calibration ? read_calibration(p->o->calibration, i, g->inputs[i], &p->calib[i], p->d)
                            : draw_input(g, g->inputs[i], &rng, &p->calib[i], p->d)))
      return false;
  return drk_interp_run(g, p->calib, p->calib_ref, p->d);
}

static bool st_verify_canonical(drk_pipeline_t *p) {
  return drk_graph_verify(p->g, p->d) && (!budgeted(p->o) || calibrate(p));
}

const drk_precision_auto_t *drk_pipeline_precision_auto(const drk_pipeline_t *p) {
  return p->has_auto ? &p->autop : NULL;
}

/* The precision policy for the targets: fp8 needs every target to have it (sm_89, sm_90,
 * gfx942: targets.def); the first one without it is named in the warning. With
 * --accuracy-budget the choice per op group is measured first (precision_auto.h). */
static bool st_precision(drk_pipeline_t *p) {
  drk_precision_options_t po = {.precision = p->o->precision, .matmul = p->o->matmul, .target_sm = 80,
                                .target_has_fp8 = true};
  bool nv = false;
  for (int t = 0; t < DRK_TARGET_COUNT; t++) {
    if (!(p->o->targets & (1u << t))) continue;
    const drk_target_info_t *ti = drk_target_info((drk_target_t)t);
    if (ti->vendor == DRK_VENDOR_NV && !nv) {
      po.target_sm = ti->number;
      nv = true;
    }
    if (!ti->has_fp8 && po.target_has_fp8) {
      po.target_has_fp8 = false;
      po.target_name = ti->name;
    }
  }
  if (budgeted(p->o)) {
    p->has_auto = true;
    if (!drk_precision_auto_choose(p->g, &po, p->o->accuracy_budget, p->calib, p->calib_ref, &p->autop, p->d))
      return false;
    po.node_choice = p->autop.node_choice;
    po.n_node_choice = p->autop.n_node_choice;
    if (p->o->report) drk_precision_auto_print(&p->autop, p->o->report);
    else if (p->o->verbose) {
      double worst = 0;
      for (size_t i = 0; i < p->autop.n_outputs; i++)
        if (p->autop.outputs[i].error > worst) worst = p->autop.outputs[i].error;
      fprintf(stderr, "drkc: precision auto: %zu op groups chosen in %d interpreter runs, largest output error %.2e "
                      "(budget %.0e; --report lists them)\n", p->autop.n_groups, p->autop.evaluations, worst,
              p->autop.budget);
    }
  }
  return drk_pass_apply_precision(p->g, &po, p->d);
}

static bool dump_wanted(const drk_pipeline_t *p, const char *stage);

/* --layout: NHWC convolutions (auto: on NVIDIA-only target lists) */
static bool st_layout(drk_pipeline_t *p) {
  drk_layout_options_t lo = {.layout = p->o->layout, .nvidia_only = p->o->targets != 0};
  if (dump_wanted(p, "layout")) lo.explain = stderr; /* the decisions, before the graph's dump */
  for (int t = 0; t < DRK_TARGET_COUNT; t++)
    if ((p->o->targets & (1u << t)) && drk_target_info((drk_target_t)t)->vendor != DRK_VENDOR_NV)
      lo.nvidia_only = false;
  /* the sm_90a TMA convolution reads channels in 16-byte rows: with conv.hopper=1 pinned, small
   * C (the RGB stem) is padded to 8 for it (by default such convs stay on mma_sync, which was
   * faster on the H200: lower_matmul.c conv_ws_eligible) */
  drk_lower_options_t lw = lower_options(p->o);
  if (lw.target_sm == 90 && lw.arch_specific && drk_knob_or(&lw.knobs, DRK_KNOB_CONV_HOPPER, -1) == 1)
    lo.pad_channels = 8;
  drk_layout_stats_t st;
  drk_pass_layout_nhwc(p->g, &lo, &st);
  if (!st.convs) return true;
  drk_pass_eliminate_dead(p->g);
  if (p->o->verbose)
    fprintf(stderr, "drkc: layout %s: %zu convolutions (%zu channel-padded) and %zu pools in NHWC, %zu layout transposes\n",
            drk_layout_name(p->o->layout), st.convs, st.padded, st.pools, st.transposes);
  return drk_pass_infer_shapes(p->g, p->d);
}

/* ---- fuse, lower, plan ---- */
static bool st_fuse(drk_pipeline_t *p) {
  drk_lower_options_t lo = lower_options(p->o);
  drk_fusion_for_lowering(p->g, &lo, &p->fusion);
  p->fused = true;
  return true;
}

static void dump_fuse(const drk_pipeline_t *p, FILE *out) {
  fprintf(out, "// ---- fusion groups ----\n");
  drk_fusion_print(p->g, &p->fusion, out);
}

/* Symbolic dims of the graph's inputs, said once with the flag that binds them: otherwise the
 * lowering refuses every node that sees one (121 lines for a dynamic-batch ResNet-50). */
static bool inputs_static(drk_pipeline_t *p) {
  char names[512] = "", bind[600] = "", dyn[700] = "";
  size_t nl = 0, bl = 0, dl = 0;
  for (size_t i = 0; i < p->g->n_inputs; i++) {
    const drk_value_t *v = p->g->inputs[i];
    for (int k = 0; k < v->shape.rank; k++) {
      const char *s = v->shape.dims[k].sym;
      if (!s) continue;
      bool seen = false;
      for (size_t j = 0; j <= i && !seen; j++)
        for (int q = 0; q < (j < i ? p->g->inputs[j]->shape.rank : k) && !seen; q++)
          seen = p->g->inputs[j]->shape.dims[q].sym && strcmp(p->g->inputs[j]->shape.dims[q].sym, s) == 0;
      if (seen || nl + strlen(s) + 40 >= sizeof names || bl + strlen(s) + 8 >= sizeof bind ||
          dl + strlen(s) + 16 >= sizeof dyn)
        continue;
      nl += (size_t)snprintf(names + nl, sizeof names - nl, "%s'%s' (input '%s')", nl ? ", " : "", s, v->name);
      bl += (size_t)snprintf(bind + bl, sizeof bind - bl, "%s%s=1", bl ? "," : "--bind=", s);
      dl += (size_t)snprintf(dyn + dl, sizeof dyn - dl, "%s%s=1..64", dl ? "," : "--dynamic=", s);
    }
  }
  if (!nl) return true;
  drk_diag_error(p->d, drk_loc_none, "GPU lowering needs static shapes; the model's inputs have symbolic dims %s: give "
                 "their sizes with %s (the sizes the module will run with), or ranges with %s (one module "
                 "of shape buckets, docs/dynamic-shapes.md)", names, bind, dyn);
  return false;
}

static bool st_lower(drk_pipeline_t *p) {
  if (!inputs_static(p)) return false;
  drk_lower_options_t lo = lower_options(p->o);
  p->fused = false; /* the lowering takes the partition */
  if (!drk_lower_graph_fused(p->g, &lo, &p->fusion, &p->l, p->d)) return false;
  p->lowered = true;
  size_t twins;
  if (!drk_lowered_dedupe(&p->l, &twins)) {
    drk_diag_error(p->d, drk_loc_none, "out of memory comparing the kernels");
    return false;
  }
  return true;
}

static void dump_lower(const drk_pipeline_t *p, FILE *out) { drk_lowered_print(&p->l, out); }

static bool st_plan_memory(drk_pipeline_t *p) {
  if (!drk_lowered_plan_memory(p->g, &p->l, &p->plan, p->d)) return false;
  p->planned = true;
  if (p->o->report) {
    drk_package_report(p->o->report, p->g, &p->l, &p->plan);
    drk_package_report_cuda_cores(p->o->report, p->g, &p->l);
    /* One plan serves every image (lower_options): an sm_90a image beside an older target
     * runs that target's kernels, without wgmma or TMA. */
    drk_lower_options_t lo = lower_options(p->o);
    if ((p->o->targets & (1u << DRK_TARGET_SM90A)) && !lo.arch_specific)
      fprintf(p->o->report, "report: kernels are lowered for the oldest target (sm_%d class): the sm_90a image has "
                            "no wgmma/TMA kernels; build sm_90a alone for Hopper speed\n", lo.target_sm);
  }
  return true;
}

static void dump_plan(const drk_pipeline_t *p, FILE *out) {
  fprintf(out, "// ---- memory plan: arena %llu bytes (weights %llu) ----\n", (unsigned long long)p->plan.arena_size,
          (unsigned long long)p->plan.weights_size);
  for (size_t i = 0; i < p->g->n_inputs; i++)
    fprintf(out, "// input %%%s at %llu\n", p->g->inputs[i]->name, (unsigned long long)p->plan.offset[p->g->inputs[i]->id]);
  for (size_t i = 0; i < p->g->n_outputs; i++)
    fprintf(out, "// output %%%s at %llu\n", p->g->outputs[i]->name,
            (unsigned long long)p->plan.offset[p->g->outputs[i]->id]);
}

/* ---- codegen ---- */
static bool wants(const drk_pipeline_t *p, const char *kind) { return strcmp(p->emit->kind, kind) == 0; }

static bool codegen_llvm(drk_pipeline_t *p) {
  unsigned nv = nvidia_targets(p->o);
  if (!nv) return drk_build_amd_llvm(p->l.module, "gfx942", &p->llvm, p->d);
  const char *arch = NULL;
  for (int t = 0; t < DRK_TARGET_COUNT && !arch; t++)
    if (nv & (1u << t)) arch = drk_target_info((drk_target_t)t)->name;
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef mod;
  bool ok = drk_nvptx_lower_module(ctx, p->l.module, arch, &mod, p->d);
  if (ok) {
    char *s = LLVMPrintModuleToString(mod);
    p->llvm = strdup(s);
    LLVMDisposeMessage(s);
    LLVMDisposeModule(mod);
  }
  LLVMContextDispose(ctx);
  return ok;
}

static bool progress_line(const drk_pipeline_t *p, const char *stage, double t_start);

/* codegen's progress: kernels compiled of the target's total */
static void codegen_progress(void *ctx, int done, int total) {
  drk_pipeline_t *p = ctx;
  char what[96];
  snprintf(what, sizeof what, "codegen %s: kernels %d/%d%s", p->target_now, done, total,
           done == total && total ? ", ptxas" : "");
  p->drew |= progress_line(p, what, p->t_start);
}

/* Per NVIDIA target PTX and a cubin (--emit=ptx, cubin: the first target only, ptx without
 * ptxas), kernels compiled in parallel and cached (backends/common/kcache.h); gfx942's code
 * object and offload bundle. */
static bool st_codegen(drk_pipeline_t *p) {
  if (wants(p, "llvm")) return codegen_llvm(p);
  unsigned nv = nvidia_targets(p->o), amd = p->o->targets & (1u << DRK_TARGET_GFX942);
  bool first_only = wants(p, "ptx") || wants(p, "cubin");
  if (!wants(p, "hsaco") && !wants(p, "bundle"))
    for (int t = 0; t < DRK_TARGET_COUNT; t++) {
      if (!(nv & (1u << t)) || (first_only && p->n_code)) continue;
      drk_nv_code_t *c = &p->code[p->n_code++];
      c->t = drk_target_info((drk_target_t)t);
      bool cubin = !wants(p, "ptx");
      /* Which ptxas makes this target's cubins (sm_87 needs a CUDA 12.x one): found once,
       * before any kernel, so a missing one is one clear error; said with -v and --report. */
      const char *release = NULL;
      char *ptxas = cubin ? drk_nvptx_ptxas_find_for(c->t->name, &release, p->d) : NULL;
      if (cubin && !ptxas) return false;
      if (ptxas && (p->o->verbose || p->o->report))
        fprintf(p->o->report ? p->o->report : stderr, "%s: %s cubins by ptxas %s (CUDA %s)\n",
                p->o->report ? "report" : "drkc", c->t->name, ptxas, release ? release : "unknown");
      free(ptxas);
      drk_codegen_opts_t co = {.jobs = p->o->jobs, .no_cache = p->o->no_cache, .progress = codegen_progress,
                               .progress_ctx = p, .stats = &p->stats};
      p->target_now = c->t->name;
      if (!drk_nvptx_compile_tile_module_opts(p->l.module, c->t->name, &co, &c->ptx, cubin ? &c->cubin : NULL,
                                              cubin ? &c->cubin_size : NULL, p->d))
        return false;
    }
  if (p->o->verbose && p->n_code) drk_codegen_stats_print(&p->stats, stderr);
  if (amd && !first_only && !wants(p, "fatbin")) {
    if (!drk_build_amd(p->l.module, "gfx942", &p->hsaco, &p->hsaco_size, &p->bundle, &p->bundle_size, p->d))
      return false;
    if (p->o->verbose) drk_build_amd_report(p->l.module, p->hsaco, p->hsaco_size, stderr);
  }
  return true;
}

/* ---- package ---- */
static const char *fixed_hash(void *ctx) { return ctx; }

/* The fallback plan (o->fallback_targets): the model through the whole pipeline again, for
 * those targets, into a module of its own (no weights file, no report, no pinned schedules or
 * database: those name the main plan's kernels). */
static bool build_fallback(drk_pipeline_t *p, const char *hash, void **out, size_t *out_size) {
  drk_compile_options_t fo = *p->o;
  fo.targets = p->o->fallback_targets;
  fo.fallback_targets = 0;
  fo.weights_file = NULL;
  fo.report = NULL, fo.dump_after = NULL, fo.time_stages = false, fo.progress = false, fo.verbose = 0;
  fo.knobs = (drk_sched_knobs_t){0}, fo.schedules = NULL, fo.db = NULL, fo.lookup = NULL, fo.require_tuned = false;
  fo.model_hash = hash ? fixed_hash : NULL, fo.model_hash_ctx = (void *)hash;
  drk_pipeline_t *f = drk_pipeline_create(&fo, p->path, NULL, "module", p->d);
  bool ok = f && drk_pipeline_run_to(f, "package") && drk_pipeline_output(f, "module", out, out_size);
  if (!ok && f) drk_diag_error(p->d, drk_loc_none, "the fallback plan (targets of --target=sm_90 for later GPUs) failed to build; "
                                                 "--target=sm_90a builds the sm_90a plan alone");
  if (ok && p->o->report)
    fprintf(p->o->report, "report: fallback plan for GPUs after Hopper: %zu kernels, %s (the runtime takes it where the "
                          "main plan has no code; --target=sm_90a leaves it out)\n",
            f->l.n_launches, f->image_targets);
  drk_pipeline_destroy(f);
  return ok;
}

static bool st_package(drk_pipeline_t *p) {
  if (p->n_code && !drk_package_fatbin(p->code, p->n_code, &p->fatbin, &p->fatbin_size, p->image_targets,
                                       sizeof p->image_targets, p->d))
    return false;
  if (!wants(p, "module")) return true;
  drk_modfile_image_t imgs[2];
  uint32_t n = 0;
  if (p->fatbin) imgs[n++] = (drk_modfile_image_t){DRK_MODFILE_IMAGE_FATBIN, 0, p->image_targets, p->fatbin, p->fatbin_size};
  if (p->bundle)
    imgs[n++] = (drk_modfile_image_t){DRK_MODFILE_IMAGE_OFFLOAD_BUNDLE, 0, "gfx942", p->bundle, p->bundle_size};
  const char *hash = p->o->model_hash ? p->o->model_hash(p->o->model_hash_ctx) : NULL;
  drk_package_options_t po = {.targets = p->o->targets, .command_line = p->o->command_line, .model_hash = hash,
                              .weights_file = p->o->weights_file,
                              .precision_auto = p->has_auto ? &p->autop : NULL};
  void *fb = NULL;
  size_t fb_size = 0;
  if (p->o->fallback_targets && p->path && !build_fallback(p, hash, &fb, &fb_size)) return false;
  po.fallback = fb, po.fallback_size = fb_size;
  bool ok = drk_package_module(p->g, &p->l, &p->plan, &po, imgs, n, &p->module, &p->module_size, &p->weights,
                               &p->weights_size, p->d);
  free(fb);
  return ok;
}

size_t drk_pipeline_drop_kernels(drk_pipeline_t *p,
                                 bool (*drop)(void *ctx, const struct drk_tile_module *m, struct drk_tile_kernel *k),
                                 void *ctx) {
  if (p->failed || !p->lowered || !p->l.module) return 0;
  drk_tile_module_t *m = p->l.module;
  size_t kept = 0, n = m->n_kernels;
  drk_tile_kernel_t *last = NULL;
  for (size_t i = 0; i < n; i++) {
    drk_tile_kernel_t *k = m->kernels[i];
    if (drop(ctx, m, k)) last = k;
    else m->kernels[kept++] = k;
  }
  if (!kept && last) m->kernels[kept++] = last; /* codegen needs a kernel; its twin's code stays shared */
  m->n_kernels = kept;
  return n - kept;
}

size_t drk_pipeline_module_size(const drk_pipeline_t *p) { return p->module ? p->module_size : 0; }

/* ---- the table ---- */
static const drk_stage_t stages[] = {
    {"import", "reads the model (.onnx, .drkg) into graph IR, binds --bind/--shapes-from dims, freezes "
               "--freeze-input inputs", st_import, dump_graph},
    {"verify", "requires a graph; guarantees a well-formed one (SSA, arities, attributes)", st_verify, dump_graph},
    {"canonicalize", "infers dtypes and shapes, folds constants and shape chains, removes dead nodes",
     st_canonicalize, dump_graph},
    {"verify-canonical", "guarantees the canonical graph verifies; drkc run's reference is taken here (and "
                         "--accuracy-budget's, on the calibration inputs)", st_verify_canonical, dump_graph},
    {"fold-batchnorm", "folds inference BatchNormalization into the convolution before it", st_fold_batchnorm,
     dump_graph},
    {"conv-to-matmul", "pointwise and patch convolutions become MatMuls", st_conv_to_matmul, dump_graph},
    {"gemm-to-matmul", "Gemms become MatMuls with their alpha/beta/C as an epilogue", st_gemm_to_matmul, dump_graph},
    {"pad-matmul-n", "sm_90a: constant MatMul weights of N % 8 != 0 columns padded, the result sliced", st_pad_matmul_n,
     dump_graph},
    {"merge-matmul", "sibling MatMuls of one input become one (fusion level >= 2)", st_merge_matmul, dump_graph},
    {"quantize", "DequantizeLinear -> MatMul of int4/uint4 constants and --quantize=int4-weight as MatMulNBits "
                 "(4-bit weights, the GPU's packing)", st_quantize, dump_graph},
    {"precision", "applies --precision/--matmul-precision: casts at the compute boundaries, the interface keeps "
                  "its dtypes", st_precision, dump_graph},
    {"verify-precision", "guarantees the precision rewrite verifies", st_verify, dump_graph},
    {"layout", "chooses NHWC for 16-bit/f8 convolutions where every target is NVIDIA (--layout)", st_layout,
     dump_graph},
    {"verify-layout", "guarantees the layout rewrite verifies", st_verify, dump_graph},
    {"fuse", "partitions the live nodes into kernel groups (--fusion-aggressiveness, --max-graph-depth)", st_fuse,
     dump_fuse},
    {"lower", "requires static shapes; guarantees a verified tile IR kernel per group and the launch plan, under "
              "--schedule/--schedules", st_lower, dump_lower},
    {"plan-memory", "places every value a kernel takes in one arena (liveness, in-place reuse, scratch)",
     st_plan_memory, dump_plan},
    {"codegen", "per target: tile IR -> LLVM -> PTX -> ptxas -> cubin (NVIDIA), code object (gfx942)", st_codegen,
     NULL},
    {"package", "the fat binary (a cubin per target + PTX), the offload bundle and the module file", st_package,
     NULL},
};

const drk_stage_t *drk_pipeline_stages(size_t *out_n) {
  *out_n = DRK_ARRAY_LEN(stages);
  return stages;
}

int drk_pipeline_stage_index(const char *name) {
  for (size_t i = 0; i < DRK_ARRAY_LEN(stages); i++)
    if (strcmp(stages[i].name, name) == 0) return (int)i;
  return -1;
}

static const drk_emit_kind_t emit_kinds[] = {
    {"graph", "verify-layout", true, ".drkg", "graph IR after the graph passes"},
    {"schedules", "lower", true, ".sched", "every kernel's workload key, knob space and schedule"},
    {"tile", "lower", true, ".drkt", "the tile IR module with its launches"},
    {"llvm", "codegen", true, ".ll", "LLVM IR for the first NVIDIA target (or gfx942)"},
    {"ptx", "codegen", true, ".ptx", "PTX of the first NVIDIA target"},
    {"cubin", "codegen", false, ".cubin", "cubin of the first NVIDIA target"},
    {"hsaco", "codegen", false, ".hsaco", "gfx942 code object"},
    {"fatbin", "package", false, ".fatbin", "fat binary of every NVIDIA target"},
    {"bundle", "codegen", false, ".bundle", "clang offload bundle of the gfx942 code object"},
    {"module", "package", false, ".drkm", "module file (the default)"},
};

const drk_emit_kind_t *drk_emit_kinds(size_t *out_n) {
  *out_n = DRK_ARRAY_LEN(emit_kinds);
  return emit_kinds;
}

const drk_emit_kind_t *drk_emit_kind_find(const char *kind) {
  for (size_t i = 0; i < DRK_ARRAY_LEN(emit_kinds); i++)
    if (strcmp(emit_kinds[i].kind, kind) == 0) return &emit_kinds[i];
  return NULL;
}

/* ---- running ---- */
drk_pipeline_t *drk_pipeline_create(const drk_compile_options_t *o, const char *path, drk_graph_t *g,
                                    const char *emit, drk_diag_t *d) {
  drk_pipeline_t *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->o = o;
  p->d = d;
  p->path = path;
  p->g = g;
  p->owns_graph = g != NULL;
  p->emit = drk_emit_kind_find(emit ? emit : "module");
  DRK_ASSERT(p->emit);
  return p;
}

void drk_pipeline_destroy(drk_pipeline_t *p) {
  if (!p) return;
  free(p->import_hint);
  if (p->fused) drk_fusion_destroy(&p->fusion);
  if (p->planned) drk_mem_plan_free(&p->plan);
  if (p->lowered) drk_lowered_destroy(&p->l);
  for (size_t i = 0; i < p->n_code; i++) {
    free(p->code[i].ptx);
    free(p->code[i].cubin);
  }
  free(p->llvm);
  free(p->hsaco);
  free(p->bundle);
  free(p->fatbin);
  free(p->module);
  free(p->weights);
  for (size_t i = 0; p->calib && p->g && i < p->g->n_inputs; i++) drk_tensor_free(&p->calib[i]);
  for (size_t i = 0; p->calib_ref && p->g && i < p->g->n_outputs; i++) drk_tensor_free(&p->calib_ref[i]);
  free(p->calib);
  free(p->calib_ref);
  drk_precision_auto_free(&p->autop);
  if (p->owns_graph) drk_graph_destroy(p->g);
  free(p);
}

static bool stage_needed(const drk_pipeline_t *p, const drk_stage_t *s);

static bool dump_wanted(const drk_pipeline_t *p, const char *stage) {
  const char *w = p->o->dump_after;
  return w && (strcmp(w, stage) == 0 || strcmp(w, "all") == 0);
}

/* Whether the emit kind needs the stage at all: the AMD-only kinds skip nothing, the graph
 * needs none of the back half (run_to stops there anyway). */
static bool stage_needed(const drk_pipeline_t *p, const drk_stage_t *s) {
  if (strcmp(s->name, "package") == 0) return wants(p, "fatbin") || wants(p, "module");
  return true;
}

void drk_pipeline_print_times(const drk_pipeline_t *p, FILE *out) {
  double total = 0;
  for (int i = 0; i < p->next; i++) total += p->ms[i];
  fprintf(out, "drkc: stage times (ms, wall):\n");
  for (int i = 0; i < p->next; i++)
    if (stage_needed(p, &stages[i]))
      fprintf(out, "  %-18s %9.1f  %5.1f%%\n", stages[i].name, p->ms[i], total > 0 ? 100.0 * p->ms[i] / total : 0);
  fprintf(out, "  %-18s %9.1f\n", "total", total);
}

/* --emit kinds a target list cannot give: an error naming a target that would. */
static bool emit_possible(drk_pipeline_t *p) {
  unsigned nv = nvidia_targets(p->o), amd = p->o->targets & (1u << DRK_TARGET_GFX942);
  bool need_nv = wants(p, "ptx") || wants(p, "cubin") || wants(p, "fatbin"), need_amd = wants(p, "hsaco") || wants(p, "bundle");
  if ((need_nv && !nv) || (need_amd && !amd)) {
    drk_diag_error(p->d, drk_loc_none, "--emit=%s needs %s target (e.g. %s)", p->emit->kind,
                   need_nv ? "an NVIDIA" : "the gfx942", need_nv ? "--target=sm_90" : "--target=gfx942");
    return false;
  }
  return true;
}

/* The progress line (--progress on a TTY): the stage and the time, once a compile has taken
 * a second. */
static bool progress_line(const drk_pipeline_t *p, const char *stage, double t_start) {
  double t = now_ms() - t_start;
  if (!p->o->progress || t < 1000 || !isatty(2)) return false;
  fprintf(stderr, "\rdrkc: %s ... %.1f s\033[K", stage, t / 1e3);
  return true;
}

bool drk_pipeline_run_to(drk_pipeline_t *p, const char *stage) {
  int last = drk_pipeline_stage_index(stage);
  DRK_ASSERT(last >= 0);
  if (p->next == 0 && !p->failed && !emit_possible(p)) p->failed = true;
  p->drew = false;
  double t_start = now_ms();
  for (int i = 0; i < p->next; i++) t_start -= p->ms[i];
  p->t_start = t_start;
  while (!p->failed && p->next <= last) {
    const drk_stage_t *s = &stages[p->next];
    if (p->o->verbose) fprintf(stderr, "drkc: stage %s\n", s->name);
    p->drew |= progress_line(p, s->name, t_start);
    double t0 = now_ms();
    bool ok = !stage_needed(p, s) || s->run(p);
    p->ms[p->next] = now_ms() - t0;
    p->next++;
    if (!ok) {
      p->failed = true;
      break;
    }
    if (s->dump && dump_wanted(p, s->name)) {
      fprintf(stderr, "// ---- after %s ----\n", s->name);
      s->dump(p, stderr);
    }
  }
  if (p->drew) fprintf(stderr, "\r\033[K");
  return !p->failed;
}

drk_graph_t *drk_pipeline_graph(drk_pipeline_t *p) { return p->failed ? NULL : p->g; }

const drk_lowered_t *drk_pipeline_lowered(const drk_pipeline_t *p) { return p->lowered ? &p->l : NULL; }

size_t drk_pipeline_kernel_count(const drk_pipeline_t *p) { return p->lowered ? p->l.n_launches : 0; }

static bool take(void **slot, size_t size, void **out_data, size_t *out_size) {
  if (!*slot) return false;
  *out_data = *slot;
  *out_size = size;
  *slot = NULL;
  return true;
}

/* The text a printer of the lowered module writes (--emit=tile, --emit=schedules). */
static bool print_lowered(const drk_lowered_t *l, void (*print)(const drk_lowered_t *, FILE *), void **out_data,
                          size_t *out_size) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) return false;
  print(l, f);
  fclose(f);
  *out_data = buf;
  *out_size = len;
  return true;
}

bool drk_pipeline_output(drk_pipeline_t *p, const char *kind, void **out_data, size_t *out_size) {
  if (p->failed) return false;
  if (strcmp(kind, "graph") == 0) {
    size_t n = 0;
    char *s = drk_graph_print_string(p->g, SIZE_MAX, &n);
    *out_data = s;
    *out_size = n;
    return s != NULL;
  }
  if (strcmp(kind, "tile") == 0) return p->lowered && print_lowered(&p->l, drk_lowered_print, out_data, out_size);
  if (strcmp(kind, "schedules") == 0)
    return p->lowered && print_lowered(&p->l, drk_lowered_print_schedules, out_data, out_size);
  if (strcmp(kind, "llvm") == 0) return p->llvm && take((void **)&p->llvm, strlen(p->llvm), out_data, out_size);
  if (strcmp(kind, "ptx") == 0)
    return p->n_code && p->code[0].ptx && take((void **)&p->code[0].ptx, strlen(p->code[0].ptx), out_data, out_size);
  if (strcmp(kind, "cubin") == 0) return p->n_code && take(&p->code[0].cubin, p->code[0].cubin_size, out_data, out_size);
  if (strcmp(kind, "hsaco") == 0) return take(&p->hsaco, p->hsaco_size, out_data, out_size);
  if (strcmp(kind, "bundle") == 0) return take(&p->bundle, p->bundle_size, out_data, out_size);
  if (strcmp(kind, "fatbin") == 0) return take(&p->fatbin, p->fatbin_size, out_data, out_size);
  if (strcmp(kind, "module") == 0) return take(&p->module, p->module_size, out_data, out_size);
  if (strcmp(kind, "weights") == 0) return take(&p->weights, p->weights_size, out_data, out_size);
  return false;
}

bool drk_pipeline_build(drk_graph_t *g, const drk_compile_options_t *o, const char *emit, void **out_data,
                        size_t *out_size, drk_diag_t *d) {
  drk_pipeline_t *p = drk_pipeline_create(o, NULL, g, emit, d);
  if (!p) return false;
  p->owns_graph = false;
  p->next = drk_pipeline_stage_index("fuse");
  bool ok = drk_pipeline_run_to(p, p->emit->after) && drk_pipeline_output(p, p->emit->kind, out_data, out_size);
  drk_pipeline_destroy(p);
  return ok;
}
