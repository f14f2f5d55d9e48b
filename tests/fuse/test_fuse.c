/* Tests of fusion (lower/fuse.h) and fused lowering (lower/lower_fused.c), without a GPU.
 *
 *   test_fuse model MODEL.onnx BIND PTX [PRECISION]
 *                                         whole model at levels 0..3 (see check_level),
 *                                         after --precision=PRECISION (fp16, bf16) if given
 *   test_fuse drkg FILE.drkg PTX          a text graph with `# RUN level=L [depth=D]
 *                                         kernels=K` and `# EXPECT level=L: TEXT` lines
 *                                         (TEXT must appear in the fusion dump)
 *
 * For every level: the lowered module verifies, prints -> parses -> prints to a fixed point,
 * and launch args match kernel params; every flat/row kernel (fused or not) runs on the CPU
 * (tests/fuse/tile_exec.c) on the interpreter's values of its inputs, with its outputs
 * poisoned first, and must reproduce the interpreter's values of every value it writes (rel
 * L2 <= 1e-4 for f32, 1e-2 for f16/bf16, exact for integers; NaN fails); with PTX=1 the
 * module also goes through LLVM and ptxas for sm_90a. Model mode prints the kernel counts and
 * requires them not to grow with the level and to drop from level 0 to level 2. The memory
 * plan of every level is checked too: no two values may share bytes while both are in use,
 * in launch order (fatal once plan_memory.h has drk_plan_memory_timed; before that, fused
 * levels only report the conflicts the untimed planner makes). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/nvptx/nvptx.h"
#include "frontend/onnx/onnx_import.h"
#include "frontend/frontend.h"
#include "ir/interp.h"
#include "ir/tile.h"
#include "lower/fuse.h"
#include "lower/lower.h"
#include "tests/common/lowered_check.h"
#include "passes/passes.h"
#include "passes/plan_memory.h"
#include "passes/precision.h"
#include "tile_exec.h"

static drk_graph_t *load_graph(const char *path, const char *bind, drk_diag_t *d) {
  drk_graph_t *g = drk_frontend_load(path, d);
  if (!g) return NULL;
  if (bind && *bind && !drk_graph_bind_dims(g, bind, d)) {
    drk_graph_destroy(g);
    return NULL;
  }
  if (!drk_pass_pipeline_canonicalize(g, d)) {
    drk_graph_destroy(g);
    return NULL;
  }
  return g;
}

/* ---- reference values of every graph value (interpreter, node by node) ---- */
typedef struct ref {
  const drk_graph_t *g;
  drk_tensor_t *t; /* by value id */
  bool *have;
} ref_t;

static uint64_t rng_next(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static bool ref_compute(ref_t *r, const drk_graph_t *g) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  r->g = g;
  r->t = calloc(g->next_value_id + 1, sizeof *r->t);
  r->have = calloc(g->next_value_id + 1, sizeof *r->have);
  uint64_t s = 0x9E3779B97F4A7C15ull;
  for (size_t i = 0; i < g->n_inputs; i++) {
    const drk_value_t *v = g->inputs[i];
    int64_t dims[DRK_MAX_RANK];
    for (int k = 0; k < v->shape.rank; k++) dims[k] = v->shape.dims[k].size;
    drk_tensor_t *t = &r->t[v->id];
    if (!drk_tensor_alloc(t, v->dtype, v->shape.rank, dims)) return false;
    for (int64_t j = 0; j < drk_tensor_numel(t); j++) {
      uint64_t x = rng_next(&s);
      if (drk_dtype_is_float(v->dtype)) drk_tensor_set_f64(t, j, ((double)(x >> 11) / 9007199254740992.0) * 2 - 1);
      else drk_tensor_set_i64(t, j, (int64_t)(x >> 63)); /* masks, flags: 0/1 */
    }
    r->have[v->id] = true;
  }
  for (size_t i = 0; i < g->n_consts; i++) {
    const drk_value_t *v = g->consts[i];
    if (drk_tensor_from_const(&r->t[v->id], v)) r->have[v->id] = true;
  }
  for (size_t k = 0; k < g->n_nodes; k++) {
    const drk_node_t *n = g->nodes[k];
    if (n->dead) continue;
    const drk_tensor_t *ins[64] = {0};
    for (int i = 0; i < n->n_inputs && i < 64; i++) {
      const drk_value_t *v = n->inputs[i];
      if (!v) continue;
      if (!r->have[v->id] && v->kind == DRK_VALUE_CONST) {
        if (drk_tensor_from_const(&r->t[v->id], v)) r->have[v->id] = true;
      }
      if (!r->have[v->id]) {
        fprintf(stderr, "reference: no value for %s\n", v->name);
        return false;
      }
      ins[i] = &r->t[v->id];
    }
    drk_tensor_t outs[8];
    memset(outs, 0, sizeof outs);
    if (!drk_interp_node(n, ins, outs, &d)) return false;
    for (int o = 0; o < n->n_outputs; o++) {
      const drk_value_t *v = n->outputs[o];
      if (v) {
        r->t[v->id] = outs[o];
        r->have[v->id] = true;
      } else {
        drk_tensor_free(&outs[o]);
      }
    }
  }
  return true;
}

static void ref_free(ref_t *r) {
  if (!r->t) return;
  for (uint32_t i = 0; i <= r->g->next_value_id; i++)
    if (r->have[i]) drk_tensor_free(&r->t[i]);
  free(r->t);
  free(r->have);
}

/* ---- module checks ---- */

/* set for a graph run through --precision=fp16/bf16: its f32 values (the casts back at the
 * outputs) carry the half rounding of everything before them, which fused kernels skip */
static bool g_half_graph;

static double tolerance(drk_dtype_t t) {
  if (t == DRK_DT_F16 || t == DRK_DT_BF16 || (g_half_graph && drk_dtype_is_float(t))) return 1e-2;
  if (t == DRK_DT_F32 || t == DRK_DT_F64) return 1e-4;
  return 0;
}

static int pos_of(const drk_graph_t *g, const drk_node_t *n) {
  for (size_t k = 0; k < g->n_nodes; k++)
    if (g->nodes[k] == n) return (int)k;
  return -1;
}

/* Runs every flat/row launch on the CPU and compares what it writes with the reference. */
static bool check_numerics(const drk_graph_t *g, const drk_fusion_t *fu, const drk_lowered_t *l, ref_t *r,
                           const char *what, int *out_run, int *out_fused_run) {
  bool ok = true;
  int run = 0, fused = 0;
  for (size_t li = 0; li < l->n_launches; li++) {
    const drk_launch_t *L = &l->launches[li];
    int lg = fu->group[pos_of(g, L->node)];
    drk_tensor_t bufs[64];
    bool is_out[64] = {0};
    int nb = L->n_args < 64 ? L->n_args : 64;
    memset(bufs, 0, sizeof bufs);
    bool bound = true;
    for (int a = 0; a < nb; a++) {
      const drk_larg_t *A = &L->args[a];
      if (A->kind != DRK_LARG_BUFFER) {
        bound = false;
        break;
      }
      const drk_value_t *v = A->value;
      if (!r->have[v->id]) {
        bound = false;
        break;
      }
      drk_tensor_copy(&bufs[a], &r->t[v->id]);
      is_out[a] = v->kind == DRK_VALUE_NODE && fu->group[pos_of(g, v->def)] == lg;
      if (is_out[a]) { /* poison */
        for (int64_t j = 0; j < drk_tensor_numel(&bufs[a]); j++) {
          if (drk_dtype_is_float(v->dtype)) drk_tensor_set_f64(&bufs[a], j, NAN);
          else drk_tensor_set_i64(&bufs[a], j, 0x5A5A5A5A);
        }
      }
    }
    char err[400];
    te_result_t res = bound ? te_run(l->module, L->kernel, bufs, nb, err, sizeof err) : TE_UNSUPPORTED;
    if (res == TE_ERROR) {
      fprintf(stderr, "FAIL %s: %s\n", what, err);
      ok = false;
    } else if (res == TE_UNSUPPORTED && bound && strstr(L->kernel->name, "_fused_attention")) {
      /* every flash kernel (mma_sync, fma, sm_90a wgmma) is in the executor's subset: checked, never skipped */
      fprintf(stderr, "FAIL %s: the CPU executor refused %s: %s\n", what, L->kernel->name, err);
      ok = false;
    } else if (res == TE_OK) {
      run++;
      fused += strstr(L->kernel->name, "_fused_") != NULL;
      for (int a = 0; a < nb; a++) {
        if (!is_out[a]) continue;
        const drk_value_t *v = L->args[a].value;
        const drk_tensor_t *ref = &r->t[v->id];
        double tol = tolerance(v->dtype), e;
        if (tol > 0) {
          e = drk_tensor_rel_error(&bufs[a], ref);
        } else {
          e = 0;
          for (int64_t j = 0; j < drk_tensor_numel(ref); j++)
            if (drk_tensor_get_i64(&bufs[a], j) != drk_tensor_get_i64(ref, j)) e = 1;
        }
        if (!(e <= tol)) {
          fprintf(stderr, "FAIL %s: kernel %s writes %%%s with rel error %.3g (tolerance %.0e)\n", what,
                  L->kernel->name, v->name, e, tol);
          ok = false;
        }
      }
    }
    for (int a = 0; a < nb; a++) drk_tensor_free(&bufs[a]);
  }
  *out_run = run;
  *out_fused_run = fused;
  return ok;
}

/* ---- memory plan: no kernel may touch bytes another value holds meanwhile ---- */
static const drk_value_t *base_of(const drk_lowered_t *l, const drk_value_t *v) {
  for (int guard = 0; guard < 64; guard++) {
    const drk_value_t *b = NULL;
    for (size_t i = 0; i < l->n_aliases && !b; i++)
      if (l->aliases[i].value == v) b = l->aliases[i].base;
    if (!b) return v;
    v = b;
  }
  return v;
}

/* Whether the plan put y in place of x as the lowering allowed: (y, x') is a declared
 * in-place pair with base x' == x, both start at the same offset, and x's last launch is
 * y's first (the kernel that reads x and writes y element by element). */
static bool declared_inplace(const drk_lowered_t *l, const drk_mem_plan_t *plan, const drk_value_t *y,
                             const drk_value_t *x, const int64_t *first, const int64_t *lastu) {
  if (plan->offset[y->id] != plan->offset[x->id] || lastu[x->id] != first[y->id]) return false;
  for (size_t i = 0; i < l->n_inplace; i++)
    if (l->inplace[i].value == y && base_of(l, l->inplace[i].base) == x) return true;
  return false;
}

/* Number of conflicts: two values whose byte ranges overlap while both are in use (from the
 * launch that writes one to the last launch that reads it, in launch order), or a value read
 * by a launch before the launch that writes it; an output taking the bytes of an input that
 * dies in its kernel counts only when the lowering did not declare the pair in place. */
static int plan_conflicts(const drk_graph_t *g, const drk_fusion_t *fu, const drk_lowered_t *l, const char *what) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  drk_mem_plan_t plan;
#ifdef DRK_PLAN_MEMORY_TIMED
  int64_t *times = malloc(sizeof(int64_t) * (g->n_nodes + 1));
  drk_fusion_node_times(fu, times);
  bool *ref = drk_lowered_referenced(g, l);
  bool ok = drk_plan_memory_kernels(g, l->aliases, l->n_aliases, times, NULL, 0, l->inplace, l->n_inplace, ref, &plan, &d);
  free(ref);
  free(times);
#else
  bool ok = drk_plan_memory(g, l->aliases, l->n_aliases, &plan, &d);
#endif
  if (!ok) return 1;
  uint32_t nv = g->next_value_id + 1;
  int64_t *first = malloc(sizeof(int64_t) * nv), *lastu = malloc(sizeof(int64_t) * nv), *wr = malloc(sizeof(int64_t) * nv);
  const drk_value_t **vb = calloc(nv, sizeof *vb);
  for (uint32_t i = 0; i < nv; i++) {
    first[i] = INT64_MAX;
    lastu[i] = INT64_MIN;
    wr[i] = -1;
  }
  int conflicts = 0;
  for (size_t t = 0; t < l->n_launches; t++) {
    const drk_launch_t *L = &l->launches[t];
    int lg = fu->group[pos_of(g, L->node)];
    for (int a = 0; a < L->n_args; a++) {
      if (L->args[a].kind != DRK_LARG_BUFFER) continue;
      const drk_value_t *b = base_of(l, L->args[a].value);
      vb[b->id] = b;
      if ((int64_t)t < first[b->id]) first[b->id] = (int64_t)t;
      if ((int64_t)t > lastu[b->id]) lastu[b->id] = (int64_t)t;
      if (b->kind == DRK_VALUE_NODE && fu->group[pos_of(g, b->def)] == lg) wr[b->id] = (int64_t)t;
    }
  }
  for (uint32_t i = 0; i < nv; i++) {
    const drk_value_t *v = vb[i];
    if (!v) continue;
    if (v->kind != DRK_VALUE_NODE) first[i] = INT64_MIN;
    for (size_t j = 0; j < g->n_outputs; j++)
      if (base_of(l, g->outputs[j]) == v) lastu[i] = INT64_MAX;
    if (v->kind == DRK_VALUE_NODE && wr[i] != first[i]) {
      fprintf(stderr, "%s: %%%s is used by launch %lld before launch %lld writes it\n", what, v->name,
              (long long)first[i], (long long)wr[i]);
      conflicts++;
    }
  }
  for (uint32_t i = 0; i < nv; i++)
    for (uint32_t j = i + 1; j < nv; j++) {
      if (!vb[i] || !vb[j]) continue;
      uint64_t oi = plan.offset[i], oj = plan.offset[j], si = plan.size[i], sj = plan.size[j];
      if (!si || !sj || oi >= oj + sj || oj >= oi + si) continue;
      if (first[i] > lastu[j] || first[j] > lastu[i]) continue;
      if (declared_inplace(l, &plan, vb[i], vb[j], first, lastu) || declared_inplace(l, &plan, vb[j], vb[i], first, lastu))
        continue;
      if (conflicts < 5)
        fprintf(stderr, "%s: %%%s and %%%s share bytes while both are in use (launches %lld..%lld and %lld..%lld)\n",
                what, vb[i]->name, vb[j]->name, (long long)first[i], (long long)lastu[i], (long long)first[j],
                (long long)lastu[j]);
      conflicts++;
    }
  free(first);
  free(lastu);
  free(wr);
  free(vb);
  drk_mem_plan_free(&plan);
  return conflicts;
}

typedef struct level_result {
  bool ok;
  size_t kernels, fused_kernels;
  int executed, fused_executed;
  int conflicts;
} level_result_t;

static level_result_t check_level(const drk_graph_t *g, ref_t *r, int level, int depth, bool ptx, const char *name,
                                  char **out_dump) {
  level_result_t res = {true, 0, 0, 0, 0, 0};
  char what[300];
  snprintf(what, sizeof what, "%s level %d", name, level);
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  drk_fusion_t fu;
  drk_fusion_compute(g, level, depth, &fu);
  if (out_dump) {
    size_t len;
    FILE *f = open_memstream(out_dump, &len);
    drk_fusion_print(g, &fu, f);
    fclose(f);
  }
  drk_lower_options_t o = {.target_sm = 90, .arch_specific = true, .fusion_set = true, .fusion_level = level,
                           .max_group_depth = depth};
  drk_lowered_t l;
  if (!drk_lower_graph(g, &o, &l, &d)) {
    fprintf(stderr, "FAIL %s: does not lower\n", what);
    drk_fusion_destroy(&fu);
    res.ok = false;
    return res;
  }
  res.ok = drk_test_check_lowered(&l, what);
  res.kernels = l.n_launches;
  for (size_t i = 0; i < l.n_launches; i++) res.fused_kernels += strstr(l.launches[i].kernel->name, "_fused_") != NULL;
  if (res.ok) res.ok = check_numerics(g, &fu, &l, r, what, &res.executed, &res.fused_executed);
  res.conflicts = plan_conflicts(g, &fu, &l, what);
#ifndef DRK_PLAN_MEMORY_TIMED
  if (res.conflicts && level > 0)
    fprintf(stderr, "note %s: %d memory plan conflicts: drk_plan_memory does not know fused launch times yet "
            "(drk_plan_memory_timed, see docs/fusion.md)\n", what, res.conflicts);
  else
#endif
  if (res.conflicts) {
    fprintf(stderr, "FAIL %s: %d memory plan conflicts\n", what, res.conflicts);
    res.ok = false;
  }
  if (res.ok && ptx) {
    char *text = NULL;
    void *cubin = NULL;
    size_t cubin_size = 0;
    if (!drk_nvptx_compile_tile_module(l.module, "sm_90a", &text, &cubin, &cubin_size, &d)) {
      fprintf(stderr, "FAIL %s: PTX/ptxas for sm_90a\n", what);
      res.ok = false;
    }
    free(text);
    free(cubin);
  }
  drk_lowered_destroy(&l);
  drk_fusion_destroy(&fu);
  return res;
}

static int run_model(const char *path, const char *bind, bool ptx, const char *precision) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  drk_graph_t *g = load_graph(path, bind, &d);
  if (!g) return 1;
  drk_precision_options_t po = {0};
  if (precision && (!drk_precision_parse(precision, &po.precision) || !drk_pass_apply_precision(g, &po, &d))) {
    fprintf(stderr, "FAIL: precision '%s' on %s\n", precision, path);
    drk_graph_destroy(g);
    return 1;
  }
  g_half_graph = precision != NULL;
  ref_t r = {0};
  if (!ref_compute(&r, g)) {
    fprintf(stderr, "FAIL: reference values of %s\n", path);
    return 1;
  }
  bool ok = true;
  size_t live = 0, counts[4];
  for (size_t i = 0; i < g->n_nodes; i++) live += !g->nodes[i]->dead;
  for (int level = 0; level <= 3; level++) {
    char *dump = NULL;
    level_result_t lr = check_level(g, &r, level, DRK_FUSION_DEFAULT_DEPTH, ptx, path, &dump);
    if (getenv("DRK_FUSE_VERBOSE")) fputs(dump, stdout);
    free(dump);
    ok &= lr.ok;
    counts[level] = lr.kernels;
    printf("%s: %zu nodes, level %d: %zu kernels (%zu fused); %d run on the CPU (%d fused)%s\n", g->name, live, level,
           lr.kernels, lr.fused_kernels, lr.executed, lr.fused_executed, lr.ok ? "" : " FAIL");
    if (level > 0 && counts[level] > counts[level - 1]) {
      fprintf(stderr, "FAIL %s: level %d makes more kernels than level %d\n", path, level, level - 1);
      ok = false;
    }
  }
  if (counts[2] >= counts[0]) {
    fprintf(stderr, "FAIL %s: fusion does not reduce the kernel count (%zu -> %zu)\n", path, counts[0], counts[2]);
    ok = false;
  }
  printf("%s: kernels by level 0..3: %zu %zu %zu %zu\n", g->name, counts[0], counts[1], counts[2], counts[3]);
  ref_free(&r);
  drk_graph_destroy(g);
  return ok ? 0 : 1;
}

static int run_drkg(const char *path, bool ptx) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  size_t n;
  char *text = drk_read_file(path, &n, &d);
  if (!text) return 1;
  drk_graph_t *g = load_graph(path, NULL, &d);
  if (!g) {
    free(text);
    return 1;
  }
  ref_t r = {0};
  if (!ref_compute(&r, g)) {
    fprintf(stderr, "FAIL: reference values of %s\n", path);
    return 1;
  }
  bool ok = true;
  int runs = 0;
  for (char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
    int level = -1, depth = DRK_FUSION_DEFAULT_DEPTH, want = -1;
    if (strncmp(line, "# RUN ", 6) != 0) continue;
    char *eol = strchr(line, '\n');
    char buf[256];
    snprintf(buf, sizeof buf, "%.*s", (int)(eol ? eol - line : (long)strlen(line)), line);
    char *p;
    if ((p = strstr(buf, "level="))) level = atoi(p + 6);
    if ((p = strstr(buf, "depth="))) depth = atoi(p + 6);
    if ((p = strstr(buf, "kernels="))) want = atoi(p + 8);
    char *dump = NULL;
    level_result_t lr = check_level(g, &r, level, depth, ptx, path, &dump);
    runs++;
    printf("%s: level %d depth %d: %zu kernels (%zu fused); %d run on the CPU (%d fused)\n", path, level, depth,
           lr.kernels, lr.fused_kernels, lr.executed, lr.fused_executed);
    ok &= lr.ok;
    if (want >= 0 && (size_t)want != lr.kernels) {
      fprintf(stderr, "FAIL %s: level %d depth %d: %zu kernels, expected %d\n%s", path, level, depth, lr.kernels, want,
              dump);
      ok = false;
    }
    /* EXPECT lines for this level and depth */
    char key[64];
    snprintf(key, sizeof key, "# EXPECT level=%d depth=%d: ", level, depth);
    char key2[64];
    snprintf(key2, sizeof key2, "# EXPECT level=%d: ", level);
    for (char *q = text; q && *q; q = strchr(q, '\n') ? strchr(q, '\n') + 1 : NULL) {
      size_t kl = 0;
      if (strncmp(q, key, strlen(key)) == 0) kl = strlen(key);
      else if (depth == DRK_FUSION_DEFAULT_DEPTH && strncmp(q, key2, strlen(key2)) == 0) kl = strlen(key2);
      if (!kl) continue;
      char *qe = strchr(q, '\n');
      char want_text[512];
      snprintf(want_text, sizeof want_text, "%.*s", (int)(qe ? qe - q - (long)kl : (long)strlen(q + kl)), q + kl);
      if (!strstr(dump, want_text)) {
        fprintf(stderr, "FAIL %s: level %d: the fusion dump lacks \"%s\":\n%s", path, level, want_text, dump);
        ok = false;
      }
    }
    if (getenv("DRK_FUSE_VERBOSE")) fputs(dump, stdout);
    free(dump);
  }
  if (!runs) {
    fprintf(stderr, "FAIL %s: no RUN lines\n", path);
    ok = false;
  }
  ref_free(&r);
  drk_graph_destroy(g);
  free(text);
  return ok ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc >= 5 && strcmp(argv[1], "model") == 0)
    return run_model(argv[2], argv[3], atoi(argv[4]) != 0, argc >= 6 ? argv[5] : NULL);
  if (argc >= 4 && strcmp(argv[1], "drkg") == 0) return run_drkg(argv[2], atoi(argv[3]) != 0);
  fprintf(stderr, "usage: test_fuse model MODEL.onnx BIND PTX [PRECISION] | drkg FILE.drkg PTX\n");
  return 2;
}
