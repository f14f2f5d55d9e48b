/* drkc --dynamic without a GPU (pipeline/dynamic.h, passes/pad_exact.h):
 *
 *   test_dynamic MODEL DYNAMIC BUCKETS BIND [inexact]
 *     DYNAMIC as --dynamic (batch=1..8), BUCKETS as --buckets ("" for powers of two), BIND the
 *     other dims (--bind; "" for none). With `inexact`, the opposite: the proof must refuse the
 *     model and check 1 must fail at some padded shape (the refusal is needed; the check can fail).
 *   test_dynamic rule FILE.drkg
 *     one rule of passes/pad_exact.c: the file's `# DYNAMIC a,b` dims must be proven exact
 *     (`# EXPECT exact`) or refused with a message containing TEXT (`# EXPECT refuse: TEXT`).
 *
 * Padding must be proven exact on the symbolic graph. Then, at shapes inside every bucket and at
 * the edges (each dim at its range's start, at every bucket size and one past the bucket below;
 * every combination), it checks:
 *   1. the graph compiled for the bucket (dims bound to the bucket's sizes), run by the
 *      interpreter on the inputs zero-padded up to the bucket, sliced back to the actual shape,
 *      equals the interpreter at the exact shape (relative L2 <= 1e-5; what the runtime's
 *      padding and slicing rely on);
 *   2. every kernel the lowering makes for the bucket that the CPU tile executor runs
 *      (tests/fuse/tile_exec.c) reproduces, on those padded values, the interpreter's values of
 *      what it writes (relative L2 <= 1e-4; integers exactly; outputs poisoned first). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"
#include "ir/interp.h"
#include "ir/tensor.h"
#include "lower/fuse.h"
#include "lower/lower.h"
#include "passes/pad_exact.h"
#include "passes/passes.h"
#include "pipeline/dynamic.h"
#include "tests/fuse/tile_exec.h"

static drk_graph_t *load(const char *path, const char *bind, drk_diag_t *d) {
  drk_graph_t *g = drk_frontend_load(path, d);
  if (!g) return NULL;
  if ((*bind && !drk_graph_bind_dims(g, bind, d)) || !drk_pass_pipeline_canonicalize(g, d)) {
    drk_graph_destroy(g);
    return NULL;
  }
  return g;
}

/* The graph of a bucket as drkc compiles it (pipeline.c st_canonicalize): the dynamic dims
 * symbolic, masked where an op normalizes over them (drk_pass_pad_mask), then bound to the
 * bucket's sizes. lens[i]: the index of dim i's length input, or -1. */
static drk_graph_t *load_bucket(const char *path, const char *bind, const drk_dyn_spec_t *s, const char *bucket_bind,
                                int *lens, drk_diag_t *d) {
  drk_graph_t *g = load(path, bind, d);
  const char *names[DRK_DYN_MAX_DIMS];
  drk_value_t *lv[DRK_DYN_MAX_DIMS];
  for (int i = 0; i < s->n_dims; i++) names[i] = s->dims[i].name;
  if (!g || !drk_pass_pad_mask(g, names, s->n_dims, lv, d) || !drk_graph_bind_dims(g, bucket_bind, d) ||
      !drk_pass_pipeline_canonicalize(g, d)) {
    drk_graph_destroy(g);
    return NULL;
  }
  for (int i = 0; i < s->n_dims; i++) {
    lens[i] = -1;
    for (size_t k = 0; lv[i] && k < g->n_inputs; k++)
      if (g->inputs[k] == lv[i]) lens[i] = (int)k;
  }
  return g;
}

static uint64_t rng(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* Fresh random inputs at g's (exact) shapes: floats in [-1, 1), integers in [0, the bound the
 * Gathers reading them allow] (attention masks: 0/1). */
static bool random_inputs(const drk_graph_t *g, drk_tensor_t *ts, uint64_t seed) {
  for (size_t i = 0; i < g->n_inputs; i++) {
    const drk_value_t *v = g->inputs[i];
    int64_t dims[DRK_MAX_RANK];
    for (int k = 0; k < v->shape.rank; k++) dims[k] = v->shape.dims[k].size;
    if (!drk_tensor_alloc(&ts[i], v->dtype, v->shape.rank, dims)) return false;
    int64_t bound = drk_graph_index_bound(g, v, 2);
    for (int64_t j = 0; j < drk_tensor_numel(&ts[i]); j++) {
      uint64_t x = rng(&seed);
      if (drk_dtype_is_float(v->dtype)) drk_tensor_set_f64(&ts[i], j, ((double)(x >> 11) / 9007199254740992.0) * 2 - 1);
      else drk_tensor_set_i64(&ts[i], j, (int64_t)((x >> 33) % (uint64_t)(bound > 0 ? bound : 1)));
    }
  }
  return true;
}

/* Copies between a tensor of shape small and one of shape big (each dim <= big's): to_big
 * zero-pads small into *big (allocated here); else slices big into *small (allocated here). */
static bool pad_or_slice(const drk_tensor_t *from, drk_tensor_t *to, const int64_t *to_dims, bool to_big) {
  if (!drk_tensor_alloc(to, from->dtype, from->rank, to_dims)) return false;
  const drk_tensor_t *small = to_big ? from : to, *big = to_big ? to : from;
  int64_t n = drk_tensor_numel(small);
  size_t es = n ? small->nbytes / (size_t)n : 0;
  for (int64_t j = 0; j < n; j++) {
    int64_t rem = j, at = 0, stride = 1;
    for (int k = small->rank - 1; k >= 0; k--) {
      at += (rem % small->dims[k]) * stride;
      rem /= small->dims[k];
      stride *= big->dims[k];
    }
    uint8_t *s = (uint8_t *)small->data + (size_t)j * es, *b = (uint8_t *)big->data + (size_t)at * es;
    if (to_big) memcpy(b, s, es);
    else memcpy(s, b, es);
  }
  return true;
}

/* ---- check 2: the bucket's kernels on the CPU ---- */
typedef struct values {
  const drk_graph_t *g;
  drk_tensor_t *t;
  bool *have;
} values_t;

static bool compute_values(values_t *r, const drk_graph_t *g, const drk_tensor_t *inputs) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  r->g = g;
  r->t = calloc(g->next_value_id + 1, sizeof *r->t);
  r->have = calloc(g->next_value_id + 1, sizeof *r->have);
  if (!r->t || !r->have) return false;
  for (size_t i = 0; i < g->n_inputs; i++)
    r->have[g->inputs[i]->id] = drk_tensor_copy(&r->t[g->inputs[i]->id], &inputs[i]);
  for (size_t i = 0; i < g->n_consts; i++)
    r->have[g->consts[i]->id] = drk_tensor_from_const(&r->t[g->consts[i]->id], g->consts[i]);
  for (size_t k = 0; k < g->n_nodes; k++) {
    const drk_node_t *n = g->nodes[k];
    if (n->dead) continue;
    const drk_tensor_t *ins[64] = {0};
    for (int i = 0; i < n->n_inputs && i < 64; i++) {
      const drk_value_t *v = n->inputs[i];
      if (!v) continue;
      if (!r->have[v->id] && v->kind == DRK_VALUE_CONST) r->have[v->id] = drk_tensor_from_const(&r->t[v->id], v);
      if (!r->have[v->id]) return false;
      ins[i] = &r->t[v->id];
    }
    drk_tensor_t outs[8] = {0};
    if (!drk_interp_node(n, ins, outs, &d)) return false;
    for (int o = 0; o < n->n_outputs; o++) {
      if (n->outputs[o]) r->t[n->outputs[o]->id] = outs[o], r->have[n->outputs[o]->id] = true;
      else drk_tensor_free(&outs[o]);
    }
  }
  return true;
}

static void values_free(values_t *r) {
  for (uint32_t i = 0; r->t && i <= r->g->next_value_id; i++)
    if (r->have[i]) drk_tensor_free(&r->t[i]);
  free(r->t);
  free(r->have);
}

static int pos_of(const drk_graph_t *g, const drk_node_t *n) {
  for (size_t k = 0; k < g->n_nodes; k++)
    if (g->nodes[k] == n) return (int)k;
  return -1;
}

/* Whether v (computed in group lg) is read outside it or is a graph output: what the group's
 * kernels must write (a paired MatMul's up projection, read only by its own epilogue, is not). */
static bool leaves_group(const drk_graph_t *g, const drk_fusion_t *fu, const drk_value_t *v, int lg) {
  for (size_t i = 0; i < g->n_outputs; i++)
    if (g->outputs[i] == v) return true;
  for (size_t k = 0; k < g->n_nodes; k++) {
    const drk_node_t *n = g->nodes[k];
    if (n->dead || fu->group[k] == lg) continue;
    for (int i = 0; i < n->n_inputs; i++)
      if (n->inputs[i] == v) return true;
  }
  return false;
}

/* Runs every launch the executor supports; false on a wrong value. *out_run: launches run. */
static bool check_kernels(const drk_graph_t *g, const values_t *r, const char *what, int *out_run, int *out_total) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  drk_fusion_t fu;
  drk_fusion_compute(g, DRK_FUSION_DEFAULT_LEVEL, DRK_FUSION_DEFAULT_DEPTH, &fu);
  drk_lower_options_t o = {.target_sm = 90, .arch_specific = true, .runtime_sizes = true}; /* as bucket compiles */
  drk_lowered_t l;
  if (!drk_lower_graph(g, &o, &l, &d)) {
    fprintf(stderr, "FAIL %s: does not lower\n", what);
    drk_fusion_destroy(&fu);
    return false;
  }
  bool ok = true;
  int run = 0;
  /* A node's launches run one after another on shared output buffers (a many-input Concat is
   * a copy kernel per input, each writing its slice), compared once the last has run. */
  for (size_t li = 0, lj; li < l.n_launches; li = lj) {
    for (lj = li + 1; lj < l.n_launches && l.launches[lj].node == l.launches[li].node;) lj++;
    enum { MAXO = 64 };
    const drk_value_t *ov[MAXO];
    drk_tensor_t ot[MAXO];
    int no = 0;
    bool all_ran = true, any_ran = false;
    for (size_t lk = li; lk < lj; lk++) {
      const drk_launch_t *L = &l.launches[lk];
      int lg = fu.group[pos_of(g, L->node)], nb = L->n_args < 64 ? L->n_args : 64;
      drk_tensor_t bufs[64] = {0};
      bool shared[64] = {0}, bound = true;
      for (int a = 0; a < nb && bound; a++) {
        const drk_value_t *v = L->args[a].value;
        if (L->args[a].kind == DRK_LARG_I32 || L->args[a].kind == DRK_LARG_I64) { /* a scalar: one element */
          bound = drk_tensor_alloc(&bufs[a], DRK_DT_I64, 0, NULL);
          if (bound) drk_tensor_set_i64(&bufs[a], 0, L->args[a].i);
          continue;
        }
        bound = L->args[a].kind == DRK_LARG_BUFFER && r->have[v->id];
        bool is_out = bound && v->kind == DRK_VALUE_NODE && fu.group[pos_of(g, v->def)] == lg && leaves_group(g, &fu, v, lg);
        if (!is_out) {
          bound = bound && drk_tensor_copy(&bufs[a], &r->t[v->id]);
          continue;
        }
        int o = 0;
        while (o < no && ov[o] != v) o++;
        if (o == no) { /* first written here: poisoned */
          if (no == MAXO || !drk_tensor_copy(&ot[no], &r->t[v->id])) { bound = false; continue; }
          ov[no++] = v;
          for (int64_t j = 0; j < drk_tensor_numel(&ot[o]); j++) {
            if (drk_dtype_is_float(v->dtype)) drk_tensor_set_f64(&ot[o], j, NAN);
            else drk_tensor_set_i64(&ot[o], j, 0x5A5A5A5A);
          }
        }
        bufs[a] = ot[o]; /* the kernel writes into the shared buffer */
        shared[a] = true;
      }
      char err[400] = "";
      te_result_t res = bound ? te_run(l.module, L->kernel, bufs, nb, err, sizeof err) : TE_UNSUPPORTED;
      if (res == TE_ERROR) {
        fprintf(stderr, "FAIL %s: kernel %s: %s\n", what, L->kernel->name, err);
        ok = false;
      }
      all_ran &= res == TE_OK;
      any_ran |= res == TE_OK;
      run += res == TE_OK;
      for (int a = 0; a < nb; a++)
        if (!shared[a]) drk_tensor_free(&bufs[a]);
    }
    for (int o = 0; all_ran && any_ran && o < no; o++) {
      const drk_value_t *v = ov[o];
      const drk_tensor_t *ref = &r->t[v->id];
      double e = 0, tol = drk_dtype_is_float(v->dtype) ? (v->dtype == DRK_DT_F32 || v->dtype == DRK_DT_F64 ? 1e-4 : 1e-2) : 0;
      if (tol > 0) {
        e = drk_tensor_rel_error(&ot[o], ref);
        /* a reference in the f32 subnormal range (a freshly initialised model's activations can
         * vanish to 1e-43) has no relative precision left: the values must agree to 1e-35 */
        double diff = 0;
        for (int64_t j = 0; !(e <= tol) && j < drk_tensor_numel(ref); j++) {
          double dj = fabs(drk_tensor_get_f64(&ot[o], j) - drk_tensor_get_f64(ref, j));
          diff = dj > diff || dj != dj ? dj : diff;
        }
        if (!(e <= tol) && diff < 1e-35) e = 0;
      } else
        for (int64_t j = 0; j < drk_tensor_numel(ref); j++) e += drk_tensor_get_i64(&ot[o], j) != drk_tensor_get_i64(ref, j);
      if (!(e <= tol)) {
        fprintf(stderr, "FAIL %s: kernel %s%s writes %%%s with error %.3g (tolerance %.0e)\n", what,
                l.launches[li].kernel->name, lj - li > 1 ? " and the node's other launches" : "", v->name, e, tol);
        ok = false;
      }
    }
    for (int o = 0; o < no; o++) drk_tensor_free(&ot[o]);
  }
  *out_run = run;
  *out_total = (int)l.n_launches;
  drk_lowered_destroy(&l);
  drk_fusion_destroy(&fu);
  return ok;
}

/* ---- one actual shape ---- */
static void bind_spec(char *buf, size_t n, const char *bind, const drk_dyn_spec_t *s, const int64_t *sizes) {
  size_t len = (size_t)snprintf(buf, n, "%s", bind);
  for (int i = 0; i < s->n_dims && len < n; i++)
    len += (size_t)snprintf(buf + len, n - len, "%s%s=%lld", len ? "," : "", s->dims[i].name, (long long)sizes[i]);
}

/* The smallest bucket holding act, as the runtime picks it (fewest elements). */
static void pick_bucket(const drk_dyn_spec_t *s, const int64_t *act, int64_t *out) {
  for (int i = 0; i < s->n_dims; i++) {
    int j = 0;
    while (s->dims[i].sizes[j] < act[i]) j++; /* per dim the smallest is the product's smallest */
    out[i] = s->dims[i].sizes[j];
  }
}

static bool g_inexact; /* expect check 1 to fail where padded */

static bool check_shape(const char *model, const char *bind, const drk_dyn_spec_t *s, const int64_t *act, uint64_t seed,
                        int *out_kernels_run) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  int64_t bsz[DRK_DYN_MAX_DIMS];
  pick_bucket(s, act, bsz);
  char exact_bind[512], bucket_bind[512], dyn_bind[512], what[1400];
  bind_spec(exact_bind, sizeof exact_bind, bind, s, act);
  bind_spec(bucket_bind, sizeof bucket_bind, bind, s, bsz);
  bind_spec(dyn_bind, sizeof dyn_bind, "", s, bsz);
  snprintf(what, sizeof what, "%s at %s (bucket %s)", model, exact_bind, bucket_bind);
  int lens[DRK_DYN_MAX_DIMS], n_lens = 0;
  drk_graph_t *ge = load(model, exact_bind, &d), *gb = load_bucket(model, bind, s, dyn_bind, lens, &d);
  for (int i = 0; gb && i < s->n_dims; i++) n_lens += lens[i] >= 0;
  bool ok = ge && gb && ge->n_inputs + (size_t)n_lens == gb->n_inputs && ge->n_outputs == gb->n_outputs;
  size_t ni = ok ? ge->n_inputs : 0, no = ok ? ge->n_outputs : 0, nbi = ok ? gb->n_inputs : 0;
  drk_tensor_t *xe = calloc(ni + 1, sizeof *xe), *xb = calloc(nbi + 1, sizeof *xb);
  drk_tensor_t *ye = calloc(no + 1, sizeof *ye), *yb = calloc(no + 1, sizeof *yb);
  ok = ok && xe && xb && ye && yb && random_inputs(ge, xe, seed);
  for (size_t i = 0; ok && i < ni; i++) {
    int64_t dims[DRK_MAX_RANK];
    for (int k = 0; k < gb->inputs[i]->shape.rank; k++) dims[k] = gb->inputs[i]->shape.dims[k].size;
    ok = pad_or_slice(&xe[i], &xb[i], dims, true);
  }
  for (int i = 0; ok && i < s->n_dims; i++) /* the length inputs: what the runtime writes */
    if (lens[i] >= 0 && (ok = drk_tensor_alloc(&xb[lens[i]], DRK_DT_I64, 0, NULL))) drk_tensor_set_i64(&xb[lens[i]], 0, act[i]);
  ok = ok && drk_interp_run(ge, xe, ye, &d) && drk_interp_run(gb, xb, yb, &d);
  for (size_t i = 0; ok && i < no; i++) { /* check 1: padded, run, sliced == exact */
    drk_tensor_t sl = {0};
    ok = pad_or_slice(&yb[i], &sl, ye[i].dims, false);
    double e = ok ? drk_tensor_rel_error(&sl, &ye[i]) : 1;
    if (!(e <= 1e-5) && g_inexact) {
      printf("%s: output %zu differs from the exact shape by %.3g, as expected\n", what, i, e);
      ok = false;
    } else if (!(e <= 1e-5)) {
      fprintf(stderr, "FAIL %s: output %zu ('%s'): padded and sliced differs from the exact shape by %.3g\n", what, i,
              ge->outputs[i]->name, e);
      ok = false;
    }
    drk_tensor_free(&sl);
  }
  values_t r = {0};
  int run = 0, total = 0;
  if (ok && !compute_values(&r, gb, xb)) {
    fprintf(stderr, "FAIL %s: the bucket graph's values\n", what);
    ok = false;
  }
  if (ok) ok = check_kernels(gb, &r, what, &run, &total); /* check 2 */
  if (ok) printf("%s: ok, %d of %d kernels run on the CPU\n", what, run, total);
  *out_kernels_run += run;
  values_free(&r);
  for (size_t i = 0; i < ni; i++) drk_tensor_free(&xe[i]);
  for (size_t i = 0; i < nbi; i++) drk_tensor_free(&xb[i]);
  for (size_t i = 0; i < no; i++) drk_tensor_free(&ye[i]), drk_tensor_free(&yb[i]);
  free(xe), free(xb), free(ye), free(yb);
  drk_graph_destroy(ge);
  drk_graph_destroy(gb);
  return ok;
}

/* Per dim: the range's start, every bucket size, one past every bucket below the last. */
static int candidates(const drk_dyn_dim_t *x, int64_t *out) {
  int n = 0;
  out[n++] = x->lo;
  for (int j = 0; j < x->n_sizes; j++) {
    if (j && x->sizes[j - 1] + 1 < x->sizes[j]) out[n++] = x->sizes[j - 1] + 1;
    if (x->sizes[j] != x->lo) out[n++] = x->sizes[j];
  }
  return n;
}

/* `test_dynamic rule FILE.drkg` */
static int run_rule(const char *path) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  size_t n = 0;
  char *text = drk_read_file(path, &n, &d), dims[256] = "", want[512] = "";
  if (!text) return 1;
  for (char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
    int len = (int)(strchr(line, '\n') ? strchr(line, '\n') - line : (long)strlen(line));
    if (!strncmp(line, "# DYNAMIC ", 10)) snprintf(dims, sizeof dims, "%.*s", len - 10, line + 10);
    if (!strncmp(line, "# EXPECT ", 9)) snprintf(want, sizeof want, "%.*s", len - 9, line + 9);
  }
  free(text);
  const char *names[DRK_PAD_MAX_DIMS];
  int nd = 0;
  for (char *p = strtok(dims, ","); p && nd < DRK_PAD_MAX_DIMS; p = strtok(NULL, ",")) names[nd++] = p;
  bool refuse = !strncmp(want, "refuse: ", 8);
  if (!nd || (!refuse && strcmp(want, "exact"))) {
    fprintf(stderr, "FAIL %s: needs '# DYNAMIC dims' and '# EXPECT exact' or '# EXPECT refuse: TEXT'\n", path);
    return 1;
  }
  char *msg = NULL;
  size_t msg_len = 0;
  FILE *mf = open_memstream(&msg, &msg_len);
  drk_diag_t cap;
  drk_diag_init(&cap, mf);
  drk_graph_t *g = drk_frontend_load(path, &cap);
  bool loaded = g && drk_pass_pipeline_canonicalize(g, &cap);
  bool proven = loaded && drk_pass_check_padding(g, names, nd, &cap);
  fclose(mf);
  bool ok = loaded && (refuse ? !proven && strstr(msg, want + 8) : proven);
  printf("%s: %s%s", path, ok ? "ok" : "FAIL", msg && *msg ? "\n" : "\n");
  if (msg && *msg) fputs(msg, stdout);
  if (!ok) fprintf(stderr, "FAIL %s: expected %s\n", path, want);
  free(msg);
  drk_graph_destroy(g);
  return ok ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "rule")) return run_rule(argv[2]);
  g_inexact = argc == 6 && !strcmp(argv[5], "inexact");
  if (argc != 5 && !g_inexact) {
    fprintf(stderr, "usage: test_dynamic MODEL DYNAMIC BUCKETS BIND [inexact]\n");
    return 2;
  }
  const char *model = argv[1], *bind = argv[4];
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  drk_dyn_spec_t s;
  if (!drk_dyn_spec_parse(argv[2], *argv[3] ? argv[3] : NULL, &s, &d)) return 1;
  drk_graph_t *g = load(model, bind, &d); /* the dynamic dims still symbolic */
  const char *names[DRK_DYN_MAX_DIMS];
  for (int i = 0; i < s.n_dims; i++) names[i] = s.dims[i].name;
  if (g && g_inexact) {
    drk_diag_t quiet;
    drk_diag_init(&quiet, NULL);
    bool proven = drk_pass_check_padding(g, names, s.n_dims, &quiet);
    drk_graph_destroy(g);
    if (proven) {
      fprintf(stderr, "FAIL %s: padding %s is proven exact, but the model mixes along it\n", model, argv[2]);
      return 1;
    }
    bool any_failed = false;
    int run = 0;
    for (int j = 0; j < s.dims[0].n_sizes; j++) { /* one past each bucket but the last: padded */
      int64_t act[DRK_DYN_MAX_DIMS];
      for (int i = 0; i < s.n_dims; i++) act[i] = s.dims[i].lo;
      if (j + 1 >= s.dims[0].n_sizes || s.dims[0].sizes[j] + 1 >= s.dims[0].sizes[j + 1]) continue;
      act[0] = s.dims[0].sizes[j] + 1;
      any_failed |= !check_shape(model, bind, &s, act, 1234 + (uint64_t)j, &run);
    }
    printf("%s: %s\n", model, any_failed ? "padding changes the result, as expected" : "FAIL: padding changed nothing");
    return any_failed ? 0 : 1;
  }
  drk_value_t *lv[DRK_DYN_MAX_DIMS];
  if (!g || !drk_pass_pad_mask(g, names, s.n_dims, lv, &d) || !drk_pass_check_padding_masked(g, names, s.n_dims, lv, &d)) {
    fprintf(stderr, "FAIL %s: padding %s is not proven exact\n", model, argv[2]);
    drk_graph_destroy(g);
    return 1;
  }
  drk_graph_destroy(g);
  int64_t cand[DRK_DYN_MAX_DIMS][2 * DRK_DYN_MAX_SIZES + 1];
  int nc[DRK_DYN_MAX_DIMS];
  size_t combos = 1;
  for (int i = 0; i < s.n_dims; i++) combos *= (size_t)(nc[i] = candidates(&s.dims[i], cand[i]));
  bool ok = true;
  int kernels_run = 0;
  for (size_t c = 0; c < combos; c++) {
    int64_t act[DRK_DYN_MAX_DIMS];
    size_t r = c;
    for (int i = s.n_dims - 1; i >= 0; i--) act[i] = cand[i][r % (size_t)nc[i]], r /= (size_t)nc[i];
    ok &= check_shape(model, bind, &s, act, 0x9E3779B97F4A7C15ull + c, &kernels_run);
  }
  if (!kernels_run) {
    fprintf(stderr, "FAIL %s: no kernel ran on the CPU executor\n", model);
    ok = false;
  }
  printf("%s: %zu shapes, %s\n", model, combos, ok ? "all match" : "FAILED");
  return ok ? 0 : 1;
}
