/* Lowered kernels run on the CPU against the interpreter (no GPU needed).
 *
 *   test_lower_exec onnx CASE_DIR     an ONNX node test (model.onnx, test_data_set_0): its
 *                                     integer inputs after the first and the shape-like ones
 *                                     (Resize roi/scales/sizes, OneHot depth) are frozen as
 *                                     tests/gpu/freeze_args.py does for the GPU run
 *   test_lower_exec drkg FILE.drkg    a text graph on random inputs (floats in [-1, 1),
 *                                     integers in [0, 4), bools fair), as `drkc run` draws them
 *   test_lower_exec errors            lowering errors of the gather family (lower_gather.c)
 *   test_lower_exec sm90a FILE.drkg [KNOBS]
 *                                     like drkg, lowered for sm_90a alone (conv.hopper's
 *                                     default: the TMA convolution) and the pins KNOBS (--schedule's KEY=V,...): the TMA +
 *                                     wgmma kernels run on the executor's warp groups, TMA
 *                                     descriptors bound to their tensors; every ConvNHWC must
 *                                     be the conv_ws kernel (no silent fallback; split-K's sum
 *                                     kernel follows it). A graph with 16-bit NCHW Convs gets its
 *                                     w* inputs as constants and the layout pass as the
 *                                     pipeline runs it for sm_90a (channels padded to 8),
 *                                     which must keep the interpreter's results bit for bit
 *   test_lower_exec w4 M K N G ZP DTYPE
 *                                     MatMulNBits (W4A16, lower_w4.c): A [M, K] of DTYPE (f16,
 *                                     bf16), random 4-bit codes, scales in [0.005, 0.05) and
 *                                     (ZP = 1) zero points, groups of G; the reference is the
 *                                     interpreter on ORT's packing (0), the kernels run on the
 *                                     GPU packing the quantize pass makes (1)
 *   test_lower_exec --sizes MODE ...
 *                                     any of the above lowered with runtime sizes (what drkc
 *                                     --dynamic's buckets compile: flat, row and matmul kernels
 *                                     take their element count, row count or M as a launch
 *                                     argument); at least one kernel must take one
 *   test_lower_exec dw FILE.drkg [KNOBS]
 *                                     like drkg with the pins KNOBS; every grouped Conv or
 *                                     ConvNHWC must be the direct depthwise kernel (kind dw,
 *                                     lower_dwconv.c) unless dw.direct=0 is pinned
 *
 * The graph is canonicalized and lowered (fusion level 0; the default fusion for a file named
 * *_fused.drkg); every launch then runs, in launch
 * order, on the CPU tile executor (tests/fuse/tile_exec.c) with one buffer per value (aliases
 * share their base's), node results poisoned first (NaN / 0x5A5A5A5A). Every graph output must
 * match the interpreter's: rel L2 <= 1e-5 for f32/f64, 1e-2 for f16/bf16, exact otherwise
 * (NaN fails, so does an element no kernel wrote). Multi-kernel nodes (ScatterND's copy then
 * scatter, split-K's partial products then their sum) are checked as a whole, which
 * test_fuse's per-launch check cannot do; scratch buffers (DRK_LARG_SCRATCH) are
 * NaN-poisoned, one per request, shared by the kernels that bind it. A kernel output the
 * memory plan puts in place of a dying input (drk_lowered_t.inplace) shares that input's
 * buffer, unpoisoned, as on the GPU: a kernel reading it after the overwrite fails. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"
#include "frontend/onnx/tensor_io.h"
#include "ir/interp.h"
#include "lower/lower.h"
#include "passes/passes.h"
#include "passes/plan_memory.h"
#include "passes/quantize.h"
#include "tests/common/lowered_check.h"
#include "tests/fuse/tile_exec.h"

/* sm90a mode: lowered for sm_90a with these pins; dw mode: the pins, grouped convs direct */
static bool g_sm90a, g_dw;
static bool g_sizes; /* --sizes: lowered with runtime sizes */
static drk_sched_knobs_t g_knobs;

static uint64_t rng_next(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static bool random_input(const drk_value_t *v, uint64_t *rng, drk_tensor_t *t) {
  int64_t dims[DRK_MAX_RANK];
  for (int k = 0; k < v->shape.rank; k++) {
    if (v->shape.dims[k].sym || v->shape.dims[k].size < 0) return false;
    dims[k] = v->shape.dims[k].size;
  }
  if (!drk_tensor_alloc(t, v->dtype, v->shape.rank, dims)) return false;
  for (int64_t i = 0; i < drk_tensor_numel(t); i++) {
    uint64_t r = rng_next(rng);
    if (drk_dtype_is_float(v->dtype)) drk_tensor_set_f64(t, i, (double)(r >> 11) * 0x1.0p-52 - 1.0);
    else if (v->dtype == DRK_DT_BOOL) drk_tensor_set_i64(t, i, (int64_t)(r & 1));
    else drk_tensor_set_i64(t, i, (int64_t)(r % 4));
  }
  return true;
}

/* freeze_args.py's rule: integer inputs after the first, and shape-like operands */
static bool shape_like(const drk_graph_t *g, size_t idx) {
  const drk_value_t *v = g->inputs[idx];
  if (idx > 0 && (v->dtype == DRK_DT_I64 || v->dtype == DRK_DT_I32)) return true;
  for (size_t k = 0; k < g->n_nodes; k++) {
    const drk_node_t *n = g->nodes[k];
    for (int i = 0; i < n->n_inputs; i++) {
      if (n->inputs[i] != v) continue;
      if ((n->op == DRK_OP_RESIZE && i >= 1) || (n->op == DRK_OP_ONE_HOT && i == 1)) return true;
    }
  }
  return false;
}

static double tolerance(drk_dtype_t t) {
  if (t == DRK_DT_F16 || t == DRK_DT_BF16) return 1e-2;
  if (drk_dtype_is_float(t)) return 1e-5;
  return 0;
}

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

static bool overlap(uint64_t a, uint64_t an, uint64_t b, uint64_t bn) { return a < b + bn && b < a + an; }

/* The memory plan with the lowering's scratch (as the pipeline makes it,
 * drk_lowered_plan_memory): a scratch range lies in the activation area and overlaps no
 * value live at its time (from its definition to its last use, in node times; graph inputs
 * and outputs to the end) nor another scratch of the same time. */
static bool check_scratch_plan(const drk_graph_t *g, const drk_lowered_t *l, const char *what) {
  if (!l->n_scratch) return true;
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  uint32_t nv = g->next_value_id + 1;
  int64_t *def = malloc(nv * sizeof *def), *last = malloc(nv * sizeof *last);
  for (uint32_t i = 0; i < nv; i++) def[i] = INT64_MAX, last[i] = INT64_MIN;
  for (size_t k = 0; k < g->n_nodes; k++) {
    const drk_node_t *n = g->nodes[k];
    int64_t t = l->node_time[k];
    if (n->dead) continue;
    for (int i = 0; i < n->n_outputs + n->n_inputs; i++) {
      const drk_value_t *v = i < n->n_outputs ? n->outputs[i] : n->inputs[i - n->n_outputs];
      if (!v) continue;
      uint32_t b = base_of(l, v)->id;
      if (i < n->n_outputs && t < def[b]) def[b] = t;
      if (t > last[b]) last[b] = t;
    }
  }
  for (size_t k = 0; k < g->n_inputs + g->n_outputs; k++) {
    uint32_t b = base_of(l, k < g->n_inputs ? g->inputs[k] : g->outputs[k - g->n_inputs])->id;
    if (k < g->n_inputs) def[b] = -1;
    last[b] = INT64_MAX;
  }
  drk_mem_plan_t p = {0};
  bool ok = drk_lowered_plan_memory(g, l, &p, &d);
  for (size_t i = 0; ok && i < l->n_scratch; i++) {
    uint64_t so = p.scratch_offset[i], sn = l->scratch[i].bytes;
    int64_t st = l->scratch[i].time;
    ok = so >= p.weights_size && so + sn <= p.arena_size && so % 256 == 0;
    for (size_t j = 0; ok && j < l->n_scratch; j++)
      ok = j == i || l->scratch[j].time != st || !overlap(so, sn, p.scratch_offset[j], l->scratch[j].bytes);
    for (uint32_t v = 0; ok && v < nv; v++)
      if (def[v] <= st && st <= last[v] && p.offset[v] != UINT64_MAX) ok = !overlap(so, sn, p.offset[v], p.size[v]);
    if (!ok) fprintf(stderr, "FAIL %s: scratch%zu at [%llu, +%llu) overlaps a live value or leaves the arena\n", what, i,
                     (unsigned long long)so, (unsigned long long)sn);
  }
  if (p.offset) drk_mem_plan_free(&p);
  free(def);
  free(last);
  return ok;
}

/* share[y->id] = base of x for each in-place candidate (y, x) the memory plan (as the
 * pipeline makes it) gave x's bytes; the number of such outputs, or -1 when planning fails. */
static int inplace_shares(const drk_graph_t *g, const drk_lowered_t *l, const drk_value_t **share) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  drk_mem_plan_t p = {0};
  int n = -1;
  if (drk_lowered_plan_memory(g, l, &p, &d)) {
    n = 0;
    for (size_t i = 0; i < l->n_inplace; i++) {
      const drk_value_t *y = l->inplace[i].value, *x = base_of(l, l->inplace[i].base);
      if (!share[y->id] && p.offset[y->id] == p.offset[x->id]) {
        share[y->id] = x;
        n++;
      }
    }
    drk_mem_plan_free(&p);
  }
  return n;
}

/* Lowers g, runs every launch on the CPU, compares the graph outputs with ref. */
static bool execute(const drk_graph_t *g, const drk_tensor_t *inputs, const drk_tensor_t *ref, const char *what) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  /* FILE_fused.drkg: default fusion (fused matmul epilogues, split-K included) */
  bool fused = strstr(what, "_fused.drkg") != NULL;
  drk_lower_options_t o = {.target_sm = 90, .fusion_set = !fused, .fusion_level = 0};
  if (g_sm90a) o.arch_specific = true, o.knobs = g_knobs;
  if (g_dw) o.knobs = g_knobs;
  o.runtime_sizes = g_sizes;
  drk_lowered_t l;
  if (!drk_lower_graph(g, &o, &l, &d)) {
    fprintf(stderr, "FAIL %s: does not lower\n", what);
    return false;
  }
  bool ok = drk_test_check_lowered(&l, what) && check_scratch_plan(g, &l, what);
  uint32_t nv = g->next_value_id + 1;
  const drk_value_t **share = calloc(nv, sizeof *share);
  int n_inplace = inplace_shares(g, &l, share);
  if (n_inplace < 0) {
    fprintf(stderr, "FAIL %s: memory plan\n", what);
    ok = false;
  }
  drk_tensor_t *buf = calloc(nv, sizeof *buf);
  bool *have = calloc(nv, sizeof *have);
  /* scratch buffers (split-K workspaces): one per request, NaN-poisoned, shared by the kernels
   * of its node */
  drk_tensor_t *scr = calloc(l.n_scratch + 1, sizeof *scr);
  bool *have_scr = calloc(l.n_scratch + 1, sizeof *have_scr);
  for (size_t i = 0; i < g->n_inputs; i++) {
    drk_tensor_copy(&buf[g->inputs[i]->id], &inputs[i]);
    have[g->inputs[i]->id] = true;
  }
  int n_sizes = 0;
  for (size_t li = 0; ok && li < l.n_launches; li++) {
    const drk_launch_t *L = &l.launches[li];
    drk_tensor_t args[64] = {0};
    te_tma_t tma[64];
    const te_tma_t *tmas[64] = {0};
    int na = L->n_args;
    /* a node's first kernel (split-K's sum kernel follows it) */
    if (g_sm90a && L->node->op == DRK_OP_CONV_NHWC && (li == 0 || l.launches[li - 1].node != L->node) && strcmp(L->sched.kind ? L->sched.kind : "", "conv_ws") != 0) {
      fprintf(stderr, "FAIL %s: kernel %s is %s, not the TMA + wgmma convolution (%s)\n", what, L->kernel->name,
              L->sched.kind ? L->sched.kind : "plain", L->sched.note ? L->sched.note : "no note");
      ok = false;
      break;
    }
    int dpin = 1;
    drk_knob_pinned(&g_knobs, DRK_KNOB_DW_DIRECT, &dpin);
    if (g_dw && dpin && (L->node->op == DRK_OP_CONV || L->node->op == DRK_OP_CONV_NHWC) &&
        drk_node_attr_int(L->node, "group", 1) > 1 && strcmp(L->sched.kind ? L->sched.kind : "", "dw") != 0) {
      fprintf(stderr, "FAIL %s: kernel %s is %s, not the direct depthwise kernel\n", what, L->kernel->name,
              L->sched.kind ? L->sched.kind : "plain");
      ok = false;
      break;
    }
    if (na > 64) { fprintf(stderr, "FAIL %s: too many args\n", what); ok = false; break; }
    for (int a = 0; a < na && ok; a++) {
      if (L->args[a].kind == DRK_LARG_I32 || L->args[a].kind == DRK_LARG_I64) { /* a runtime size */
        ok = drk_tensor_alloc(&args[a], DRK_DT_I64, 0, NULL);
        if (ok) drk_tensor_set_i64(&args[a], 0, L->args[a].i);
        n_sizes++;
        continue;
      }
      if (L->args[a].kind == DRK_LARG_SCRATCH) {
        size_t si = (size_t)L->args[a].i;
        drk_dtype_t st = L->kernel->params[a]->type.dtype;
        if (!have_scr[si]) {
          int64_t ne = (int64_t)(l.scratch[si].bytes * 8 / (uint64_t)drk_dtype_bits(st));
          ok = drk_tensor_alloc(&scr[si], st, 1, &ne);
          for (int64_t j = 0; ok && j < ne; j++) drk_tensor_set_f64(&scr[si], j, NAN);
          have_scr[si] = ok;
        }
        args[a] = scr[si];
        args[a].owned = false;
        continue;
      }
      if (L->args[a].kind == DRK_LARG_TMA) { /* the tensor, viewed through the spec */
        const drk_larg_tma_t *sp = &L->tmas[L->args[a].i];
        tma[a] = (te_tma_t){.rank = sp->rank, .oob_nan = sp->oob_nan};
        for (int q = 0; q < 5; q++) {
          tma[a].dims[q] = sp->dims[q], tma[a].box[q] = sp->box[q], tma[a].elem_strides[q] = sp->elem_strides[q];
          if (q < 4) tma[a].strides[q] = sp->strides[q];
        }
        tmas[a] = &tma[a];
      } else if (L->args[a].kind != DRK_LARG_BUFFER) {
        fprintf(stderr, "FAIL %s: non-buffer arg\n", what);
        ok = false;
        break;
      }
      const drk_value_t *v = base_of(&l, L->args[a].value);
      if (!have[v->id]) {
        if (v->kind == DRK_VALUE_CONST) {
          drk_tensor_t c;
          ok = drk_tensor_from_const(&c, v) && drk_tensor_copy(&buf[v->id], &c);
        } else if (share[v->id] && have[share[v->id]->id]) { /* in place: the input's bytes */
          drk_tensor_t *x = &buf[share[v->id]->id];
          buf[v->id] = (drk_tensor_t){.dtype = v->dtype, .rank = v->shape.rank, .data = x->data, .nbytes = x->nbytes};
          for (int k = 0; k < v->shape.rank; k++) buf[v->id].dims[k] = v->shape.dims[k].size;
        } else { /* a node result: poisoned until a kernel writes it */
          int64_t dims[DRK_MAX_RANK];
          for (int k = 0; k < v->shape.rank; k++) dims[k] = v->shape.dims[k].size;
          ok = drk_tensor_alloc(&buf[v->id], v->dtype, v->shape.rank, dims);
          for (int64_t j = 0; ok && j < drk_tensor_numel(&buf[v->id]); j++) {
            if (drk_dtype_is_float(v->dtype)) drk_tensor_set_f64(&buf[v->id], j, NAN);
            else drk_tensor_set_i64(&buf[v->id], j, 0x5A5A5A5A);
          }
        }
        have[v->id] = ok;
      }
      args[a] = buf[v->id]; /* shares the data: kernels write through */
      args[a].owned = false;
    }
    char err[400];
    te_result_t r = ok ? te_run_tma(l.module, L->kernel, args, na, tmas, err, sizeof err) : TE_ERROR;
    for (int a = 0; a < na; a++)
      if (L->args[a].kind == DRK_LARG_I32 || L->args[a].kind == DRK_LARG_I64) drk_tensor_free(&args[a]);
    if (r != TE_OK) {
      fprintf(stderr, "FAIL %s: kernel %s: %s\n", what, L->kernel->name, r == TE_UNSUPPORTED ? "not executable on the CPU" : err);
      ok = false;
    }
  }
  if (ok && g_sizes && !n_sizes) {
    fprintf(stderr, "FAIL %s: --sizes, but no kernel takes a runtime size\n", what);
    ok = false;
  }
  for (size_t i = 0; ok && i < g->n_outputs; i++) {
    const drk_value_t *v = base_of(&l, g->outputs[i]);
    if (!have[v->id]) { fprintf(stderr, "FAIL %s: output %zu never written\n", what, i); ok = false; break; }
    double tol = tolerance(g->outputs[i]->dtype), e = 0;
    /* an output that is a view of another value (Unsqueeze, Reshape, Identity): its bytes in the
     * base's buffer, seen with the output's dims */
    drk_tensor_t got = buf[v->id];
    got.owned = false;
    got.rank = ref[i].rank;
    for (int k = 0; k < ref[i].rank; k++) got.dims[k] = ref[i].dims[k];
    if (got.nbytes != ref[i].nbytes || got.dtype != ref[i].dtype) e = INFINITY;
    else if (tol > 0) {
      e = drk_tensor_rel_error(&got, &ref[i]);
    } else {
      for (int64_t j = 0; j < drk_tensor_numel(&ref[i]); j++)
        if (drk_tensor_get_i64(&got, j) != drk_tensor_get_i64(&ref[i], j)) e = 1;
    }
    if (!(e <= tol)) {
      fprintf(stderr, "FAIL %s: output %zu '%s' rel error %.3g (tolerance %.0e)\n", what, i, g->outputs[i]->name, e, tol);
      ok = false;
    }
  }
  if (ok) printf("ok %s: %zu launches, %d in place%s\n", what, l.n_launches, n_inplace, g_sizes ? ", runtime sizes" : "");
  if (ok && g_sizes) printf("  %d runtime size arguments\n", n_sizes);
  free(share);
  for (uint32_t i = 0; i < nv; i++)
    if (have[i]) drk_tensor_free(&buf[i]);
  for (size_t i = 0; i < l.n_scratch; i++)
    if (have_scr[i]) drk_tensor_free(&scr[i]);
  free(scr);
  free(have_scr);
  free(buf);
  free(have);
  drk_lowered_destroy(&l);
  return ok;
}

/* inputs drawn or read, interpreter reference, execution */
/* a live Conv computing in f16 or bf16 (the layout pass's auto choice) */
static bool has_conv16(const drk_graph_t *g) {
  for (size_t i = 0; i < g->n_nodes; i++) {
    const drk_node_t *n = g->nodes[i];
    if (!n->dead && n->op == DRK_OP_CONV && n->n_inputs > 0 && n->inputs[0] &&
        (n->inputs[0]->dtype == DRK_DT_F16 || n->inputs[0]->dtype == DRK_DT_BF16))
      return true;
  }
  return false;
}

/* sm90a mode: 16-bit NCHW Convs go channels-last as the pipeline puts them for sm_90a (auto layout,
 * channels padded to 8); the pass must keep the interpreter's results bit for bit. */
static bool sm90a_layout(drk_graph_t *g, const drk_tensor_t *inputs, const drk_tensor_t *ref, const char *what) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  drk_layout_options_t lo = {.layout = DRK_LAYOUT_AUTO, .nvidia_only = true, .pad_channels = 8};
  drk_layout_stats_t st;
  drk_pass_layout_nhwc(g, &lo, &st);
  drk_pass_eliminate_dead(g);
  if (!drk_pass_infer_shapes(g, &d) || has_conv16(g)) {
    fprintf(stderr, "FAIL %s: layout pass (%zu convs to NHWC, a 16-bit Conv left: %d)\n", what, st.convs, has_conv16(g));
    return false;
  }
  drk_tensor_t *out = calloc(g->n_outputs + 1, sizeof *out);
  bool ok = drk_interp_run(g, inputs, out, &d);
  for (size_t i = 0; ok && i < g->n_outputs; i++)
    if (out[i].nbytes != ref[i].nbytes || memcmp(out[i].data, ref[i].data, ref[i].nbytes) != 0) {
      fprintf(stderr, "FAIL %s: output %zu differs after the layout pass (interpreter)\n", what, i);
      ok = false;
    }
  for (size_t i = 0; i < g->n_outputs; i++) drk_tensor_free(&out[i]);
  free(out);
  printf("%s: layout: %zu convs in NHWC, %zu channel-padded\n", what, st.convs, st.padded);
  return ok;
}

static int run_graph(drk_graph_t *g, drk_tensor_t *inputs, const char *what) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  int rc = 1;
  drk_tensor_t *ref = calloc(g->n_outputs + 1, sizeof *ref);
  if (!drk_pass_pipeline_canonicalize(g, &d)) fprintf(stderr, "FAIL %s: canonicalize\n", what);
  else if (!drk_interp_run(g, inputs, ref, &d)) fprintf(stderr, "FAIL %s: interpreter\n", what);
  else if (g_sm90a && has_conv16(g) && !sm90a_layout(g, inputs, ref, what)) rc = 1;
  else rc = execute(g, inputs, ref, what) ? 0 : 1;
  for (size_t i = 0; i < g->n_outputs; i++) drk_tensor_free(&ref[i]);
  free(ref);
  return rc;
}

static int run_onnx(const char *dir) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  char path[4096];
  snprintf(path, sizeof path, "%s/model.onnx", dir);
  drk_graph_t *g = drk_frontend_load(path, &d);
  if (!g) return 1;
  size_t n = g->n_inputs, kept = 0;
  drk_tensor_t *all = calloc(n + 1, sizeof *all), *inputs = calloc(n + 1, sizeof *inputs);
  bool *frz = calloc(n + 1, sizeof *frz);
  bool ok = true;
  for (size_t i = 0; ok && i < n; i++) {
    snprintf(path, sizeof path, "%s/test_data_set_0/input_%zu.pb", dir, i);
    ok = drk_tensor_read_pb_expect(path, g->inputs[i]->dtype, &all[i], &d);
    frz[i] = ok && shape_like(g, i);
  }
  char **names = calloc(n + 1, sizeof *names);
  for (size_t i = 0; ok && i < n; i++) names[i] = strdup(g->inputs[i]->name);
  for (size_t i = 0; ok && i < n; i++) {
    if (frz[i]) ok = drk_graph_freeze_input(g, names[i], all[i].dtype, all[i].rank, all[i].dims, all[i].data, all[i].nbytes, &d);
    else inputs[kept++] = all[i];
  }
  int rc = ok ? run_graph(g, inputs, dir) : 1;
  for (size_t i = 0; i < n; i++) {
    drk_tensor_free(&all[i]);
    free(names[i]);
  }
  free(names);
  free(all);
  free(inputs);
  free(frz);
  drk_graph_destroy(g);
  return rc;
}

static int run_drkg(const char *path) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  drk_graph_t *g = drk_frontend_load(path, &d);
  if (!g) return 1;
  drk_tensor_t *inputs = calloc(g->n_inputs + 1, sizeof *inputs);
  uint64_t rng = 1;
  bool ok = true;
  size_t n = g->n_inputs;
  for (size_t i = 0; ok && i < n; i++) ok = random_input(g->inputs[i], &rng, &inputs[i]);
  /* sm90a mode with 16-bit NCHW Convs: inputs named w* become constants (the layout pass re-lays
   * constant weights only) */
  if (ok && g_sm90a && has_conv16(g)) {
    size_t kept = 0;
    char **names = calloc(n + 1, sizeof *names);
    for (size_t i = 0; i < n; i++) names[i] = strdup(g->inputs[i]->name);
    for (size_t i = 0; i < n; i++) {
      if (ok && names[i][0] == 'w') {
        ok = drk_graph_freeze_input(g, names[i], inputs[i].dtype, inputs[i].rank, inputs[i].dims, inputs[i].data,
                                    inputs[i].nbytes, &d);
        drk_tensor_free(&inputs[i]);
      } else {
        inputs[kept++] = inputs[i];
      }
      free(names[i]);
    }
    free(names);
    n = kept;
  }
  int rc = ok ? run_graph(g, inputs, path) : 1;
  for (size_t i = 0; i < n; i++) drk_tensor_free(&inputs[i]);
  free(inputs);
  drk_graph_destroy(g);
  return rc;
}

/* ---- W4A16 ---- */
static int run_w4(int64_t M, int64_t K, int64_t N, int64_t G, bool zp, drk_dtype_t t) {
  char what[128];
  snprintf(what, sizeof what, "w4 M=%lld K=%lld N=%lld G=%lld zp=%d %s", (long long)M, (long long)K, (long long)N,
           (long long)G, zp, drk_dtype_name(t));
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  drk_graph_t *g = drk_graph_create("w4");
  uint64_t rng = 7;
  size_t nb = (size_t)(N * K / 2), ng = (size_t)(K / G * N);
  uint8_t *codes = drk_arena_alloc(g->arena, nb), *z = drk_arena_alloc(g->arena, ng);
  float *s = drk_arena_alloc(g->arena, ng * sizeof(float));
  for (size_t i = 0; i < nb; i++) codes[i] = (uint8_t)rng_next(&rng);
  for (size_t i = 0; i < ng; i++) {
    z[i] = (uint8_t)(rng_next(&rng) % 16);
    s[i] = 0.005f + 0.045f * (float)(rng_next(&rng) >> 11) * (1.0f / 9007199254740992.0f);
  }
  drk_value_t *a = drk_graph_add_input(g, "a", t, drk_graph_shape_static(g, 2, (int64_t[]){M, K}));
  drk_value_t *ins[4] = {a,
                         drk_graph_add_const(g, "b", DRK_DT_U8, drk_graph_shape_static(g, 2, (int64_t[]){N, K / 2}), codes, nb),
                         drk_graph_add_const(g, "s", DRK_DT_F32, drk_graph_shape_static(g, 2, (int64_t[]){K / G, N}), s,
                                             ng * sizeof(float)),
                         zp ? drk_graph_add_const(g, "z", DRK_DT_U8, drk_graph_shape_static(g, 2, (int64_t[]){K / G, N}), z, ng)
                            : NULL};
  const char *yn = "y";
  drk_node_t *n = drk_graph_add_node(g, DRK_OP_MATMUL_NBITS, zp ? 4 : 3, ins, 1, &yn, drk_loc_none);
  drk_node_set_int(g, n, "block_size", G);
  drk_graph_add_output(g, n->outputs[0]);
  drk_tensor_t in = {0}, ref = {0};
  int rc = 1;
  size_t packed = 0;
  if (!random_input(a, &rng, &in) || !drk_pass_infer_shapes(g, &d) || !drk_interp_run(g, &in, &ref, &d)) {
    fprintf(stderr, "FAIL %s: interpreter\n", what);
  } else if (!drk_pass_pack_w4(g, &packed) || packed != 1 || !drk_graph_verify(g, &d)) {
    fprintf(stderr, "FAIL %s: not packed for the GPU\n", what);
  } else {
    rc = execute(g, &in, &ref, what) ? 0 : 1;
    if (!rc) printf("ok %s\n", what);
  }
  drk_tensor_free(&in);
  drk_tensor_free(&ref);
  drk_graph_destroy(g);
  return rc;
}

/* ---- errors of lower_gather.c ---- */
static bool expect_error(const char *text, const char *want) {
  drk_diag_t d;
  drk_diag_init(&d, NULL);
  drk_graph_t *g = drk_graph_parse(text, strlen(text), "t.drkg", &d);
  if (!g) { fprintf(stderr, "parse failed: %s\n", d.first); return false; }
  bool ok = true;
  drk_lowered_t l;
  if (!drk_pass_pipeline_canonicalize(g, &d)) {
    ok = strstr(d.first, want) != NULL;
    if (!ok) fprintf(stderr, "canonicalize: %s\n", d.first);
  } else if (drk_lower_graph(g, NULL, &l, &d)) {
    fprintf(stderr, "expected an error '%s', lowering succeeded\n", want);
    drk_lowered_destroy(&l);
    ok = false;
  } else if (!strstr(d.first, want)) {
    fprintf(stderr, "expected '%s', got '%s'\n", want, d.first);
    ok = false;
  }
  drk_graph_destroy(g);
  return ok;
}

static int run_errors(void) {
  int bad = 0;
  bad += !expect_error("graph @g(%x: f32[1, 1, 4, 4]) -> (%y) {\n  %s: f32[4] = const [1.0, 1.0, 2.0, 2.0]\n"
                       "  %y: f32[*] = Resize(%x, _, %s) {mode = \"linear\", antialias = 1}\n  return %y\n}\n",
                       "Resize on f32 is not lowered for GPU yet (antialias=1");
  bad += !expect_error("graph @g(%x: f32[1, 1, 4, 4], %s: f32[4]) -> (%y) {\n"
                       "  %y: f32[1, 1, 8, 8] = Resize(%x, _, %s) {mode = \"cubic\"}\n  return %y\n}\n",
                       "scales must be a constant");
  bad += !expect_error("graph @g(%x: f32[1, 1, 4, 4], %r: f32[8]) -> (%y) {\n  %s: f32[4] = const [1.0, 1.0, 2.0, 2.0]\n"
                       "  %y: f32[*] = Resize(%x, %r, %s) {mode = \"linear\", coordinate_transformation_mode = \"tf_crop_and_resize\"}\n"
                       "  return %y\n}\n",
                       "roi must be a constant");
  bad += !expect_error("graph @g(%x: f32[4, 4, 4, 4, 4]) -> (%y) {\n  %s: f32[5] = const [2.0, 2.0, 2.0, 2.0, 2.0]\n"
                       "  %y: f32[*] = Resize(%x, _, %s) {mode = \"cubic\"}\n  return %y\n}\n",
                       "needs 1024 taps per element");
  bad += !expect_error("graph @g(%x: f32[4, 4], %i: f32[2, 1]) -> (%y) {\n  %y: f32[*] = GatherND(%x, %i)\n  return %y\n}\n",
                       "indices must be i32 or i64");
  printf("errors: %d failed\n", bad);
  return bad ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "--sizes") == 0) g_sizes = true, argv++, argc--;
  if (argc == 3 && strcmp(argv[1], "onnx") == 0) return run_onnx(argv[2]);
  if (argc == 3 && strcmp(argv[1], "drkg") == 0) return run_drkg(argv[2]);
  if (argc == 2 && strcmp(argv[1], "errors") == 0) return run_errors();
  if (argc == 8 && strcmp(argv[1], "w4") == 0) {
    drk_dtype_t t;
    if (!drk_dtype_from_name(argv[7], strlen(argv[7]), &t)) return 2;
    return run_w4(atoll(argv[2]), atoll(argv[3]), atoll(argv[4]), atoll(argv[5]), atoi(argv[6]) != 0, t);
  }
  if ((argc == 3 || argc == 4) && strcmp(argv[1], "sm90a") == 0) {
    char err[256];
    g_sm90a = true; /* conv.hopper=1 (every conv, small C too) unless KNOBS pin it */
    if (argc == 4 && !drk_sched_knobs_parse(argv[3], &g_knobs, err, sizeof err)) {
      fprintf(stderr, "bad knobs: %s\n", err);
      return 2;
    }
    if (drk_knob_or(&g_knobs, DRK_KNOB_CONV_HOPPER, -1) < 0) drk_knob_set(&g_knobs, DRK_KNOB_CONV_HOPPER, 1);
    return run_drkg(argv[2]);
  }
  if ((argc == 3 || argc == 4) && strcmp(argv[1], "dw") == 0) {
    char err[256];
    g_dw = true;
    if (argc == 4 && !drk_sched_knobs_parse(argv[3], &g_knobs, err, sizeof err)) {
      fprintf(stderr, "bad knobs: %s\n", err);
      return 2;
    }
    return run_drkg(argv[2]);
  }
  fprintf(stderr, "usage: test_lower_exec [--sizes] onnx CASE_DIR | drkg FILE.drkg | errors | sm90a FILE.drkg [KNOBS] | dw FILE.drkg [KNOBS]\n");
  return 2;
}
