/* Precision policy (drk_pass_apply_precision, passes/precision.h, docs/precision.md).
 *
 * Requires: dtypes and shapes inferred; nodes in topological order.
 * Guarantees: only f32 values change dtype. Every live node gets a compute dtype: the
 * target T (f16/bf16), f32 for the numerically fragile nodes found by the patterns below, or
 * bf16 for matmul-like ops under --matmul-precision=medium. Each f32 value then takes its
 * producer's compute dtype (graph inputs stay f32; f32 constants are converted in place,
 * name kept, to the dtype their consumers want); where a consumer wants another dtype a
 * Cast is inserted once per (value, dtype) right before its first such consumer; each graph
 * output whose value changed dtype gets a final Cast back to f32 that takes the output's
 * name (the producer's result is renamed "<name>.<dtype>"). Cast nodes to f32 have their
 * `to` adjusted; ConstantOfShape its `value`. The order stays topological.
 *
 * Fragile patterns (kept f32; the detection only looks at the graph's structure and
 * constant values, so it is deterministic):
 *  - square -> mean: Pow(x, 2) or Mul(x, x) feeding ReduceMean/ReduceSum, then an optional
 *    Add (eps), Sqrt (or Pow 0.5/-0.5), then the Reciprocal or Div by it; when the square's
 *    input is Sub(a, ReduceMean(a)), that centering too (LayerNorm/RMSNorm as primitives);
 *  - Exp feeding ReduceSum, the ReduceSum, and the Div/Reciprocal/Log of that sum (softmax
 *    and log-sum-exp as primitives);
 *  - Div whose divisor is a ReduceSum (directly or through one Add/Max/Clip);
 *  - ReduceSum/ReduceMean/GlobalAveragePool over >= DRK_PRECISION_LARGE_REDUCE elements or
 *    a symbolic extent; ReduceSumSquare, ReduceL2, ReduceLogSumExp, ReduceProd, CumSum and
 *    float Range always;
 *  - rotary angles: Cos/Sin of positions (a Cast of integers or a float Range) times inverse
 *    frequencies, with the products, sums and data movement between them (find_rotary);
 *  - a node taking a constant that T destroys: a small constant (<= 16 elements, e.g. eps
 *    1e-12) with a nonzero element T flushes to zero, or a tensor of which over 1% of the
 *    nonzero elements flush;
 *  - a Cast to f32 that feeds one of the above or a graph output.
 *
 * fp8 (on targets that have it): the fp16 rewrite above, except that every MatMul, Gemm and
 * Conv whose weight (input 1) is a constant runs on e4m3 operands. The weight is quantized
 * here, once: per output channel n, ws[n] = max|W[.., n]| / 448 and Wq = e4m3(W / ws) (round
 * to nearest even, saturating; never the byte 0x80, so gfx942 can read the same bytes as
 * e4m3fnuz, see docs/precision.md). The activation x gets a per-tensor scale at run time,
 * made of graph ops (shared by every candidate reading the same x):
 *     a = ReduceMax(ReduceMax(Abs(x), row axes))   s = max(f32(a), 1e-30)
 *     xq = Cast<f8e4m3>(f32(x) * (448 / s))
 *     y = Cast<T>(MatMul(xq, Wq) * ((s / 448) * ws) [+ beta * C | + bias])
 * MatMul/Gemm/Conv on f8 operands give an f32 result (f32 accumulation; see
 * passes/infer_shapes.c and ir/interp_mm.c); Gemm's alpha folds into ws. The node keeps its
 * result value (now made by the final Cast) and its location. The output head (a candidate
 * whose result reaches a graph output through elementwise ops with constant other operands)
 * stays f16 unless fp8_head. Requires (in addition): weights whose data outlives the graph
 * (as for every constant); guarantees: the same, f8 weights never hold the byte 0x80. */
#include "passes/precision.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/tensor.h"
#include "passes/passes.h"

/* ---- options ---- */

static const char *const prec_names[] = {"auto", "fp32", "tf32", "bf16", "fp16", "fp8"};
static const char *const mmp_names[] = {"highest", "high", "medium"};

bool drk_precision_parse(const char *s, drk_precision_t *out) {
  for (size_t i = 0; s && i < DRK_ARRAY_LEN(prec_names); i++)
    if (strcmp(s, prec_names[i]) == 0) {
      *out = (drk_precision_t)i;
      return true;
    }
  return false;
}

bool drk_matmul_precision_parse(const char *s, drk_matmul_precision_t *out) {
  for (size_t i = 0; s && i < DRK_ARRAY_LEN(mmp_names); i++)
    if (strcmp(s, mmp_names[i]) == 0) {
      *out = (drk_matmul_precision_t)i;
      return true;
    }
  return false;
}

const char *drk_precision_name(drk_precision_t p) {
  return (unsigned)p < DRK_ARRAY_LEN(prec_names) ? prec_names[p] : "?";
}

const char *drk_matmul_precision_name(drk_matmul_precision_t m) {
  return (unsigned)m < DRK_ARRAY_LEN(mmp_names) ? mmp_names[m] : "?";
}

bool drk_precision_target_has_fp8(int sm) { return sm >= 89; }

bool drk_precision_allow_tf32(const drk_precision_options_t *o) {
  if (o->precision == DRK_PREC_TF32) return o->matmul != DRK_MMP_MEDIUM;
  return (o->precision == DRK_PREC_AUTO || o->precision == DRK_PREC_FP32) && o->matmul == DRK_MMP_HIGH;
}

/* ---- pass state ---- */

typedef struct use {
  drk_node_t *n;
  int slot;
} use_t;

enum { SLOT_FOLLOW, SLOT_KEEP, SLOT_ANY };
enum { CD_F32, CD_F16, CD_BF16, CD_N };

/* An fp8 candidate: the node and a snapshot of its weight (and Gemm C / Conv bias) taken
 * before the rewrite, which may convert shared constants in place. */
typedef struct f8cand {
  drk_node_t *n;
  drk_value_t w, bias;
  bool has_bias;
} f8cand_t;

typedef struct pctx {
  drk_graph_t *g;
  drk_dtype_t T;
  bool mm_bf16;
  uint32_t *f8node; /* per node id: 1 + index into f8 of an fp8 candidate (0: none) */
  f8cand_t *f8;
  size_t n_f8;
  uint32_t nv, nn; /* value / node id bounds before the rewrite */
  drk_dtype_t *orig; /* per value id: dtype before the rewrite */
  uint32_t *use_off, *use_n;
  use_t *uses;
  unsigned char *keep; /* per node id: kept f32 under T (while finding; then keep_t[0]) */
  unsigned char *keep_t[2]; /* per node id: kept f32 under f16 / under bf16 */
  const uint8_t *choice;    /* drk_precision_options_t.node_choice (NULL: one T for all) */
  uint32_t n_choice;
  bool fp8;                 /* the fp8 form for the candidates (chosen FP8 ones under choice) */
  bool *is_out;        /* per value id: a graph output */
  drk_value_t **casts; /* per value id x CD_N */
} pctx_t;

static int cd_index(drk_dtype_t t) {
  if (t == DRK_DT_F32) return CD_F32;
  if (t == DRK_DT_F16) return CD_F16;
  DRK_ASSERT(t == DRK_DT_BF16);
  return CD_BF16;
}

/* The precision chosen for n (choice mode); nodes the choice does not cover stay f32. */
static drk_precision_t node_choice(const pctx_t *c, const drk_node_t *n) {
  drk_precision_t p = n->id < c->n_choice ? (drk_precision_t)c->choice[n->id] : DRK_PREC_FP32;
  if (p == DRK_PREC_FP8 && !c->fp8) return DRK_PREC_FP16;
  return p == DRK_PREC_AUTO ? DRK_PREC_FP32 : p;
}

/* ---- names ---- */

/* "<base>.<dtype>" (or with "_N" added: drk_graph_unique_name) */
static const char *fresh_name(pctx_t *c, const char *base, drk_dtype_t t) {
  return drk_graph_unique_namef(c->g, "%s.%s", base, drk_dtype_name(t));
}

/* ---- graph queries ---- */

static bool live(const drk_node_t *n) { return n && !n->dead; }

static drk_dtype_t orig_dt(const pctx_t *c, const drk_value_t *v) { return v->id < c->nv ? c->orig[v->id] : v->dtype; }

static bool out_f32(const pctx_t *c, const drk_node_t *n) {
  return n->n_outputs > 0 && n->outputs[0] && orig_dt(c, n->outputs[0]) == DRK_DT_F32;
}

static const use_t *uses_of(const pctx_t *c, const drk_value_t *v, uint32_t *out_n) {
  if (!v || v->id >= c->nv) {
    *out_n = 0;
    return NULL;
  }
  *out_n = c->use_n[v->id];
  return c->uses + c->use_off[v->id];
}

static drk_node_t *producer(const drk_value_t *v) {
  return v && v->kind == DRK_VALUE_NODE && live(v->def) ? v->def : NULL;
}

static drk_node_t *producer_op(const drk_value_t *v, drk_op_t op) {
  drk_node_t *p = producer(v);
  return p && p->op == op ? p : NULL;
}

/* Which inputs follow the node's compute dtype, must stay as they are (f32), or may be any. */
static int slot_kind(const drk_node_t *n, int i) {
  switch (n->op) {
    case DRK_OP_CAST: case DRK_OP_SHAPE: case DRK_OP_SIZE: return SLOT_ANY;
    case DRK_OP_CAST_LIKE: return i == 0 ? SLOT_ANY : SLOT_FOLLOW;
    case DRK_OP_RESIZE: case DRK_OP_DROPOUT: return i == 0 ? SLOT_FOLLOW : SLOT_KEEP;
    case DRK_OP_QUANTIZE_LINEAR: case DRK_OP_DEQUANTIZE_LINEAR: return SLOT_KEEP;
    case DRK_OP_MATMUL_NBITS: return i == 0 ? SLOT_FOLLOW : SLOT_KEEP; /* codes, scales, zero points */
    default: return SLOT_FOLLOW;
  }
}

/* Results that keep their dtype whatever the node computes in. */
static bool out_fixed(const drk_node_t *n, int j) {
  if (n->op == DRK_OP_LAYER_NORMALIZATION) return j > 0; /* mean / inv std dev: stash_type */
  return n->op == DRK_OP_DEQUANTIZE_LINEAR || n->op == DRK_OP_QUANTIZE_LINEAR;
}

static bool is_mm(drk_op_t op) {
  return op == DRK_OP_MATMUL || op == DRK_OP_GEMM || op == DRK_OP_CONV || op == DRK_OP_CONV_TRANSPOSE ||
         op == DRK_OP_EINSUM || op == DRK_OP_CONV_NHWC;
}

static int64_t const_numel(const drk_value_t *v) {
  return v->dtype == DRK_DT_F32 ? (int64_t)(v->nbytes / 4) : drk_shape_numel(&v->shape);
}

/* Float constant with every element equal to x (at most 64 elements looked at). */
static bool const_all(const drk_value_t *v, double x) {
  if (!v || v->kind != DRK_VALUE_CONST || !drk_dtype_is_float(v->dtype) || !drk_shape_is_static(&v->shape))
    return false;
  drk_tensor_t t;
  if (!drk_tensor_from_const(&t, v)) return false;
  int64_t n = drk_tensor_numel(&t);
  if (n < 1 || n > 64) return false;
  for (int64_t i = 0; i < n; i++)
    if (drk_tensor_get_f64(&t, i) != x) return false;
  return true;
}

static float f32_at(const drk_value_t *v, int64_t i) {
  float f;
  memcpy(&f, (const unsigned char *)v->data + 4 * i, 4);
  return f;
}

/* f32 -> T bits; finite values beyond T's range saturate to its largest finite value. */
static uint16_t to_half(drk_dtype_t t, float f) {
  uint16_t h;
  if (t == DRK_DT_F16) {
    drk_f32_to_f16_n(&f, &h, 1, true);
    return h;
  }
  h = drk_f32_to_bf16(f);
  if ((h & 0x7fff) == 0x7f80 && isfinite(f)) h = (uint16_t)((h & 0x8000) | 0x7f7f);
  return h;
}

/* An f32 constant that t would destroy: a scalar-like constant (eps, a scale) with a nonzero
 * element that flushes to zero, or a tensor of which more than 1% of the nonzero elements
 * flush (weights drawn near zero always lose a few tiny elements; that is ordinary f16
 * rounding, not a loss of the constant's meaning). */
static bool const_underflows(const drk_value_t *v, drk_dtype_t t) {
  if (!v || v->kind != DRK_VALUE_CONST || v->dtype != DRK_DT_F32 || (t != DRK_DT_F16 && t != DRK_DT_BF16) || !v->data)
    return false;
  /* t's rounding (to nearest even) flushes exactly |f| <= half its smallest subnormal:
   * 2^-25 (f16), 2^-134 (bf16); checked against the conversion over every f32 below 2^-20 /
   * 2^-128. A compare instead of a round trip: this scans every weight of the model. */
  const float limf = t == DRK_DT_F16 ? 0x1p-25f : 0x1p-134f;
  uint32_t lim;
  memcpy(&lim, &limf, 4);
  /* On the bits, branch-free (it vectorizes): |f| is a - 1 < lim <=> 0 < |f| <= lim, and
   * a - 1 < 0x7f7fffff <=> f nonzero and finite. */
  int64_t n = const_numel(v), nonzero = 0, flushed = 0;
  const unsigned char *d = v->data;
  for (int64_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, d + 4 * i, 4);
    uint32_t a = (u & 0x7fffffffu) - 1u;
    nonzero += a < 0x7f7fffffu;
    flushed += a < lim;
  }
  if (n <= 16) return flushed > 0;
  return flushed * 100 > nonzero;
}

/* An f32 constant of angles that t would move by more than DRK_PRECISION_ANGLE_ERR radians
 * somewhere: positions x inverse frequencies folded at compile time (static positions) reach
 * a few thousand, where bf16 is off by up to 8 rad and f16 by 1 (the cos/sin become noise).
 * Looked at only inside a rotary cone (find_rotary), so weights are never scanned here. */
#define DRK_PRECISION_ANGLE_ERR 0x1p-8
static bool const_angles_lost(const drk_value_t *v, drk_dtype_t t) {
  if (!v || v->kind != DRK_VALUE_CONST || v->dtype != DRK_DT_F32 || !v->data) return false;
  int64_t n = const_numel(v);
  for (int64_t i = 0; i < n; i++) {
    float f = f32_at(v, i);
    if (!isfinite(f)) continue;
    uint16_t h = to_half(t, f);
    float r = t == DRK_DT_F16 ? drk_f16_to_f32(h) : drk_bf16_to_f32(h);
    if (fabs((double)r - (double)f) > DRK_PRECISION_ANGLE_ERR) return true;
  }
  return false;
}

static bool is_reduce_sum(const drk_node_t *n) { return n && n->op == DRK_OP_REDUCE_SUM; }
static bool is_reduce_sm(const drk_node_t *n) {
  return n && (n->op == DRK_OP_REDUCE_SUM || n->op == DRK_OP_REDUCE_MEAN);
}

/* Elements reduced by a ReduceSum/ReduceMean/GlobalAveragePool; -1: not known statically. */
static int64_t reduced_count(const drk_node_t *n) {
  const drk_value_t *x = n->inputs[0];
  if (!x || x->shape.rank < 0) return -1;
  int r = x->shape.rank;
  bool red[DRK_MAX_RANK * 2] = {0};
  if (r > DRK_MAX_RANK * 2) return -1;
  if (n->op == DRK_OP_GLOBAL_AVERAGE_POOL) {
    for (int i = 2; i < r; i++) red[i] = true;
  } else {
    int64_t axes[DRK_MAX_RANK * 2];
    size_t na = 0;
    const drk_value_t *av = n->n_inputs > 1 ? n->inputs[1] : NULL;
    if (av) {
      if (av->kind != DRK_VALUE_CONST || !drk_dtype_is_int(av->dtype)) return -1;
      drk_tensor_t t;
      if (!drk_tensor_from_const(&t, av)) return -1;
      int64_t m = drk_tensor_numel(&t);
      if (m > (int64_t)DRK_ARRAY_LEN(axes)) return -1;
      for (int64_t i = 0; i < m; i++) axes[na++] = drk_tensor_get_i64(&t, i);
    } else {
      size_t m = 0;
      const int64_t *a = drk_node_attr_ints(n, "axes", &m);
      if (a && m <= DRK_ARRAY_LEN(axes))
        for (size_t i = 0; i < m; i++) axes[na++] = a[i];
    }
    if (na == 0) {
      if (drk_node_attr_int(n, "noop_with_empty_axes", 0)) return 1;
      for (int i = 0; i < r; i++) red[i] = true;
    }
    for (size_t i = 0; i < na; i++) {
      int64_t a = axes[i] < 0 ? axes[i] + r : axes[i];
      if (a < 0 || a >= r) return -1;
      red[a] = true;
    }
  }
  int64_t cnt = 1;
  for (int i = 0; i < r; i++) {
    if (!red[i]) continue;
    if (x->shape.dims[i].sym || x->shape.dims[i].size < 0) return -1;
    cnt *= x->shape.dims[i].size;
    if (cnt > ((int64_t)1 << 40)) return cnt;
  }
  return cnt;
}

/* ---- fragile patterns ---- */

static void mark(pctx_t *c, drk_node_t *n) {
  if (live(n) && out_f32(c, n) && n->id < c->nn) c->keep[n->id] = 1;
}

static bool is_sqrt_like(const drk_node_t *n) {
  if (n->op == DRK_OP_SQRT) return true;
  return n->op == DRK_OP_POW && (const_all(n->inputs[1], 0.5) || const_all(n->inputs[1], -0.5));
}

/* v = mean of squares (+ eps): Sqrt of it and the Div/Reciprocal by that. */
static void mark_sqrt_stage(pctx_t *c, const drk_value_t *v) {
  uint32_t nu;
  const use_t *u = uses_of(c, v, &nu);
  for (uint32_t i = 0; i < nu; i++) {
    drk_node_t *s = u[i].n;
    if (u[i].slot != 0 || !is_sqrt_like(s)) continue;
    mark(c, s);
    uint32_t nw;
    const use_t *w = uses_of(c, s->outputs[0], &nw);
    for (uint32_t j = 0; j < nw; j++)
      if (w[j].n->op == DRK_OP_RECIPROCAL || (w[j].n->op == DRK_OP_DIV && w[j].slot == 1)) mark(c, w[j].n);
  }
}

static bool is_square(const drk_node_t *n) {
  if (n->op == DRK_OP_POW) return const_all(n->inputs[1], 2.0);
  return n->op == DRK_OP_MUL && n->inputs[0] && n->inputs[0] == n->inputs[1];
}

static void find_square_mean(pctx_t *c, drk_node_t *s) {
  uint32_t nu;
  const use_t *u = uses_of(c, s->outputs[0], &nu);
  for (uint32_t i = 0; i < nu; i++) {
    drk_node_t *r = u[i].n;
    if (u[i].slot != 0 || !is_reduce_sm(r)) continue;
    mark(c, s);
    mark(c, r);
    /* centering x - mean(x) that feeds the square */
    drk_node_t *sub = producer_op(s->inputs[0], DRK_OP_SUB);
    drk_node_t *m = sub ? producer_op(sub->inputs[1], DRK_OP_REDUCE_MEAN) : NULL;
    if (m && m->inputs[0] == sub->inputs[0]) {
      mark(c, sub);
      mark(c, m);
    }
    mark_sqrt_stage(c, r->outputs[0]);
    uint32_t na;
    const use_t *a = uses_of(c, r->outputs[0], &na);
    for (uint32_t j = 0; j < na; j++)
      if (a[j].n->op == DRK_OP_ADD) {
        mark(c, a[j].n);
        mark_sqrt_stage(c, a[j].n->outputs[0]);
      }
  }
}

static void find_exp_sum(pctx_t *c, drk_node_t *e) {
  uint32_t nu;
  const use_t *u = uses_of(c, e->outputs[0], &nu);
  for (uint32_t i = 0; i < nu; i++) {
    drk_node_t *r = u[i].n;
    if (u[i].slot != 0 || !is_reduce_sum(r)) continue;
    mark(c, e);
    mark(c, r);
    uint32_t nw;
    const use_t *w = uses_of(c, r->outputs[0], &nw);
    for (uint32_t j = 0; j < nw; j++) {
      drk_op_t op = w[j].n->op;
      if ((op == DRK_OP_DIV && w[j].slot == 1) || op == DRK_OP_RECIPROCAL || op == DRK_OP_LOG) mark(c, w[j].n);
    }
  }
}

static void find_div_by_sum(pctx_t *c, drk_node_t *dv) {
  drk_node_t *p = producer(dv->inputs[1]);
  if (!p) return;
  if (is_reduce_sum(p)) {
    mark(c, dv);
    mark(c, p);
    return;
  }
  if (p->op != DRK_OP_ADD && p->op != DRK_OP_MAX && p->op != DRK_OP_CLIP) return;
  for (int i = 0; i < p->n_inputs; i++) {
    drk_node_t *r = producer(p->inputs[i]);
    if (is_reduce_sum(r)) {
      mark(c, dv);
      mark(c, p);
      mark(c, r);
    }
  }
}

/* Rotary angles: a Cos or Sin whose argument is computed (by products, sums and data
 * movement, in f32) from positions, i.e. a Cast of integers or a float Range, or from an f32
 * constant that T would move by more than DRK_PRECISION_ANGLE_ERR (the angles themselves,
 * folded at compile time when the positions are static: the dynamo export of LLaMA at
 * s2048 folds positions x inverse frequencies but not the larger cos/sin tables). Positions times
 * inverse frequencies in f16 are off by up to (position / 2048) radians (f16 keeps 11
 * significant bits), which turns cos/sin into noise past a few thousand positions; the whole
 * cone, the Cos/Sin and the position Cast stay f32 (the Cos/Sin results, in [-1, 1], are then
 * cast to T where T consumers read them). A cone that meets anything else (an activation
 * from a MatMul of weights, a graph input of floats) is left alone. */
static void find_rotary(pctx_t *c, drk_node_t *trig) {
  drk_node_t *cone[64];
  int n = 0;
  bool positions = false;
  cone[n++] = trig;
  for (int k = 0; k < n; k++) {
    drk_node_t *m = cone[k];
    for (int i = 0; i < m->n_inputs; i++) {
      const drk_value_t *v = m->inputs[i];
      if (v && v->kind == DRK_VALUE_CONST && const_angles_lost(v, c->T)) positions = true;
      if (!v || v->kind == DRK_VALUE_CONST || orig_dt(c, v) != DRK_DT_F32) continue; /* shapes, axes, weights */
      drk_node_t *p = producer(v);
      if (!p) return; /* a float graph input */
      bool seen = false;
      for (int j = 0; j < n && !seen; j++) seen = cone[j] == p;
      if (seen) continue;
      switch (p->op) {
      case DRK_OP_CAST:
        if (!drk_dtype_is_float(orig_dt(c, p->inputs[0]))) positions = true;
        break;
      case DRK_OP_RANGE: positions = true; break;
      case DRK_OP_MUL: case DRK_OP_DIV: case DRK_OP_ADD: case DRK_OP_SUB: case DRK_OP_MATMUL: case DRK_OP_TRANSPOSE:
      case DRK_OP_RESHAPE: case DRK_OP_UNSQUEEZE: case DRK_OP_SQUEEZE: case DRK_OP_EXPAND: case DRK_OP_CONCAT:
      case DRK_OP_SLICE: case DRK_OP_IDENTITY: case DRK_OP_FLATTEN:
        break;
      default: return;
      }
      if (n == (int)DRK_ARRAY_LEN(cone)) return;
      cone[n++] = p;
    }
  }
  if (!positions) return;
  for (int k = 0; k < n; k++) mark(c, cone[k]);
}

static void find_fragile(pctx_t *c) {
  drk_graph_t *g = c->g;
  for (size_t i = 0; i < g->n_nodes; i++) {
    drk_node_t *n = g->nodes[i];
    if (!live(n) || !out_f32(c, n)) continue;
    switch (n->op) {
      case DRK_OP_REDUCE_SUM_SQUARE: case DRK_OP_REDUCE_L2: case DRK_OP_REDUCE_LOG_SUM_EXP: case DRK_OP_REDUCE_PROD:
      case DRK_OP_CUM_SUM: case DRK_OP_RANGE:
        mark(c, n);
        break;
      case DRK_OP_REDUCE_SUM: case DRK_OP_REDUCE_MEAN: case DRK_OP_GLOBAL_AVERAGE_POOL: {
        int64_t k = reduced_count(n);
        if (k < 0 || k >= DRK_PRECISION_LARGE_REDUCE) mark(c, n);
        break;
      }
      case DRK_OP_EXP: find_exp_sum(c, n); break;
      case DRK_OP_COS: case DRK_OP_SIN: find_rotary(c, n); break;
      case DRK_OP_DIV: find_div_by_sum(c, n); break;
      default: break;
    }
    if (is_square(n)) find_square_mean(c, n);
    for (int j = 0; j < n->n_inputs; j++)
      if (slot_kind(n, j) == SLOT_FOLLOW && const_underflows(n->inputs[j], c->T)) mark(c, n);
  }
  /* Casts to f32 that feed kept nodes or graph outputs stay f32 (reverse order: a Cast
   * feeding a Cast feeding a kept node is found too). */
  for (size_t i = g->n_nodes; i-- > 0;) {
    drk_node_t *n = g->nodes[i];
    if (!live(n) || n->op != DRK_OP_CAST || !out_f32(c, n)) continue;
    const drk_value_t *v = n->outputs[0];
    bool k = c->is_out[v->id];
    uint32_t nu;
    const use_t *u = uses_of(c, v, &nu);
    for (uint32_t j = 0; j < nu && !k; j++)
      if (c->keep[u[j].n->id] && slot_kind(u[j].n, u[j].slot) == SLOT_FOLLOW) k = true;
    if (k) mark(c, n);
  }
}

/* ---- rewriting ---- */

/* The weight, C or bias of an fp8 candidate: quantized (or kept) by fp8_apply, not cast. */
static bool f8_slot(const pctx_t *c, const drk_node_t *n, int slot) {
  return c->f8node && n->id < c->nn && c->f8node[n->id] && slot >= 1;
}

static drk_dtype_t node_cd(const pctx_t *c, const drk_node_t *n) {
  if (c->choice) {
    drk_precision_t p = node_choice(c, n);
    drk_dtype_t t = p == DRK_PREC_FP16 || p == DRK_PREC_FP8 ? DRK_DT_F16 : p == DRK_PREC_BF16 ? DRK_DT_BF16 : DRK_DT_F32;
    if (t != DRK_DT_F32 && n->id < c->nn && c->keep_t[t == DRK_DT_BF16][n->id]) return DRK_DT_F32;
    return t;
  }
  if (n->id < c->nn && c->keep[n->id]) return DRK_DT_F32;
  if (c->mm_bf16 && is_mm(n->op)) return DRK_DT_BF16;
  return c->T;
}

typedef struct convert_job {
  const drk_value_t *v;
  drk_dtype_t t;
  uint16_t *buf;
} convert_job_t;

static void convert_range(void *p, int64_t lo, int64_t hi, int tid) {
  (void)tid;
  convert_job_t *j = p;
  if (j->t == DRK_DT_F16) {
    drk_f32_to_f16_n((const unsigned char *)j->v->data + 4 * lo, j->buf + lo, (size_t)(hi - lo), true);
    return;
  }
  for (int64_t i = lo; i < hi; i++) j->buf[i] = to_half(j->t, f32_at(j->v, i));
}

/* Big weights convert on several threads (each element on its own: the result does not
 * depend on the split). */
static void convert_const(pctx_t *c, drk_value_t *v, drk_dtype_t t) {
  int64_t n = const_numel(v);
  uint16_t *buf = drk_arena_alloc(c->g->arena, (size_t)(n > 0 ? n : 1) * 2);
  convert_job_t job = {v, t, buf};
  drk_ipar_for(n > 0 ? n : 0, 1 << 20, convert_range, &job);
  v->data = buf;
  v->nbytes = (size_t)n * 2;
  v->dtype = t;
}

static drk_value_t *get_cast(pctx_t *c, drk_value_t *v, drk_dtype_t t, drk_loc_t loc) {
  drk_value_t **slot = &c->casts[(size_t)v->id * CD_N + (size_t)cd_index(t)];
  if (*slot) return *slot;
  const char *name = fresh_name(c, v->name, t);
  drk_node_t *n = drk_graph_add_node(c->g, DRK_OP_CAST, 1, &v, 1, &name, loc);
  drk_node_set_int(c->g, n, "to", drk_dtype_to_onnx(t));
  n->outputs[0]->dtype = t;
  n->outputs[0]->shape = drk_graph_shape(c->g, v->shape.rank, v->shape.dims);
  *slot = n->outputs[0];
  return *slot;
}

static void retype_constant_of_shape(pctx_t *c, drk_node_t *n, drk_dtype_t t) {
  const drk_attr_t *a = drk_node_attr(n, "value");
  uint16_t h = 0;
  if (a && a->kind == DRK_ATTR_TENSOR && a->tensor && a->tensor->dtype == DRK_DT_F32 && a->tensor->nbytes >= 4)
    h = to_half(t, f32_at(a->tensor, 0));
  int64_t one = 1;
  drk_value_t *tv = drk_graph_new_const_value(c->g, a && a->tensor ? a->tensor->name : NULL, t,
                                              drk_graph_shape_static(c->g, 1, &one),
                                              drk_arena_memdup(c->g->arena, &h, 2), 2);
  drk_node_add_attr(c->g, n, "value", DRK_ATTR_TENSOR)->tensor = tv;
}

static void rewrite(pctx_t *c) {
  drk_graph_t *g = c->g;
  /* constants: the dtype their first consumer that wants a non-f32 dtype wants */
  for (size_t i = 0; i < g->n_consts; i++) {
    drk_value_t *v = g->consts[i];
    if (v->dtype != DRK_DT_F32 || c->is_out[v->id] || !v->data) continue;
    uint32_t nu;
    const use_t *u = uses_of(c, v, &nu);
    drk_dtype_t want = DRK_DT_F32;
    for (uint32_t j = 0; j < nu && want == DRK_DT_F32; j++)
      if (slot_kind(u[j].n, u[j].slot) == SLOT_FOLLOW && !f8_slot(c, u[j].n, u[j].slot)) want = node_cd(c, u[j].n);
    if (want != DRK_DT_F32) convert_const(c, v, want);
  }
  size_t n_orig = g->n_nodes;
  drk_node_t **orig = malloc(sizeof *orig * (n_orig + 1));
  DRK_ASSERT(orig);
  memcpy(orig, g->nodes, sizeof *orig * n_orig);
  g->n_nodes = 0;
  for (size_t i = 0; i < n_orig; i++) {
    drk_node_t *n = orig[i];
    if (live(n)) {
      drk_dtype_t cd = node_cd(c, n);
      for (int j = 0; j < n->n_inputs; j++) {
        drk_value_t *v = n->inputs[j];
        if (!v || orig_dt(c, v) != DRK_DT_F32 || f8_slot(c, n, j)) continue;
        int k = slot_kind(n, j);
        if (k == SLOT_ANY) continue;
        drk_dtype_t req = k == SLOT_FOLLOW ? cd : DRK_DT_F32;
        if (v->dtype != req) n->inputs[j] = get_cast(c, v, req, n->loc);
      }
      bool changed = false;
      for (int j = 0; j < n->n_outputs; j++) {
        drk_value_t *v = n->outputs[j];
        if (!v || orig_dt(c, v) != DRK_DT_F32 || out_fixed(n, j) || v->dtype == cd) continue;
        v->dtype = cd;
        changed = true;
      }
      if (changed && n->op == DRK_OP_CAST) drk_node_set_int(g, n, "to", drk_dtype_to_onnx(cd));
      if (changed && n->op == DRK_OP_CONSTANT_OF_SHAPE) retype_constant_of_shape(c, n, cd);
    }
    DRK_VEC_PUSH(g->arena, g->nodes, g->n_nodes, g->cap_nodes, n);
  }
  free(orig);
  /* the interface: outputs that changed dtype are cast back and keep their names (a value
   * listed twice gets one Cast) */
  drk_value_t **before = malloc(sizeof *before * (g->n_outputs + 1));
  DRK_ASSERT(before);
  if (g->n_outputs) memcpy(before, g->outputs, sizeof *before * g->n_outputs);
  for (size_t k = 0; k < g->n_outputs; k++) {
    drk_value_t *v = before[k];
    if (!v || v->id >= c->nv || orig_dt(c, v) != DRK_DT_F32 || v->dtype == DRK_DT_F32) continue;
    size_t prev = 0;
    while (prev < k && before[prev] != v) prev++;
    if (prev < k) {
      g->outputs[k] = g->outputs[prev];
      continue;
    }
    const char *name = v->name;
    v->name = fresh_name(c, name, v->dtype);
    drk_node_t *cn = drk_graph_add_node(g, DRK_OP_CAST, 1, &v, 1, &name, v->def ? v->def->loc : drk_loc_none);
    drk_node_set_int(g, cn, "to", drk_dtype_to_onnx(DRK_DT_F32));
    cn->outputs[0]->shape = drk_graph_shape(g, v->shape.rank, v->shape.dims);
    g->outputs[k] = cn->outputs[0];
  }
  free(before);
}


/* ---- fp8 ---- */

#define F8_MAX 448.0      /* largest finite e4m3fn value */
#define F8_TINY 1e-30f    /* floor of an activation's absmax: an all-zero x quantizes to zeros */

/* A float weight, C or bias constant the fp8 path can read (f32/f16/bf16 with static shape). */
static bool f8_const(const drk_value_t *v, drk_dtype_t t) {
  return v && v->kind == DRK_VALUE_CONST && v->data && v->dtype == t && drk_shape_is_static(&v->shape) &&
         v->shape.rank <= DRK_MAX_RANK && drk_shape_numel(&v->shape) > 0;
}

/* Values from which a graph output is reached through reshapes and elementwise ops whose
 * other operands are constants (bias, scale, activation): the result of a model's output
 * head (a classifier, an LM head, a final projection). A residual Add of two activations
 * stops it, so the projections of a residual stream are not heads. */
static unsigned char *f8_head_values(const pctx_t *c) {
  const drk_graph_t *g = c->g;
  unsigned char *r = calloc(c->nv + 1, 1);
  DRK_ASSERT(r);
  for (size_t i = 0; i < g->n_outputs; i++)
    if (g->outputs[i] && g->outputs[i]->id < c->nv) r[g->outputs[i]->id] = 1;
  for (size_t i = g->n_nodes; i-- > 0;) {
    const drk_node_t *n = g->nodes[i];
    bool pass = (drk_op_info(n->op)->flags & DRK_OPF_EW) || n->op == DRK_OP_RESHAPE || n->op == DRK_OP_FLATTEN ||
                n->op == DRK_OP_SQUEEZE || n->op == DRK_OP_UNSQUEEZE || n->op == DRK_OP_IDENTITY;
    if (!live(n) || !pass) continue;
    bool reach = false;
    int n_act = 0, act = -1; /* float inputs that are not constants */
    for (int j = 0; j < n->n_outputs; j++) reach |= n->outputs[j] && n->outputs[j]->id < c->nv && r[n->outputs[j]->id];
    for (int j = 0; j < n->n_inputs; j++)
      if (n->inputs[j] && n->inputs[j]->kind != DRK_VALUE_CONST && drk_dtype_is_float(n->inputs[j]->dtype)) n_act++, act = j;
    if (reach && n_act == 1 && n->inputs[act]->id < c->nv) r[n->inputs[act]->id] = 1;
  }
  return r;
}

/* MatMul (weight of rank >= 2), Gemm or Conv with a constant weight, computing in f32 (not
 * kept f32 by a fragile pattern) or already in f16/bf16; Gemm's C and Conv's bias, when
 * used, must be constants too. */
static bool f8_candidate(const pctx_t *c, const drk_node_t *n) {
  if (!live(n) || n->n_outputs != 1 || !n->outputs[0] || n->n_inputs < 2 || !n->inputs[0]) return false;
  if (n->op != DRK_OP_MATMUL && n->op != DRK_OP_GEMM && n->op != DRK_OP_CONV) return false;
  if (drk_node_attr_int(n, "result_n", 0)) return false; /* a padded B (pad-matmul-n): stays f16 */
  drk_dtype_t t = orig_dt(c, n->outputs[0]);
  if (t == DRK_DT_F32) {
    if (n->id < c->nn && c->keep[n->id]) return false;
  } else if (t != DRK_DT_F16 && t != DRK_DT_BF16) {
    return false;
  }
  const drk_value_t *x = n->inputs[0], *w = n->inputs[1];
  if (orig_dt(c, x) != t || !f8_const(w, t)) return false;
  int r = w->shape.rank;
  if ((n->op == DRK_OP_MATMUL && r < 2) || (n->op == DRK_OP_GEMM && r != 2) || (n->op == DRK_OP_CONV && r < 3))
    return false;
  const drk_value_t *b = n->n_inputs > 2 ? n->inputs[2] : NULL;
  if (b && !(n->op == DRK_OP_GEMM && drk_node_attr_float(n, "beta", 1.0) == 0.0) && !f8_const(b, t)) return false;
  return true;
}

/* The candidates, except the output head (its result reaches a graph output through
 * elementwise ops only) unless fp8_head: it stays f16, as fp8 recipes keep the last layer
 * in higher precision (each fp8 matmul adds ~3-4% rel. L2 error; see docs/precision.md). */
static void fp8_find(pctx_t *c, bool head) {
  drk_graph_t *g = c->g;
  c->f8node = calloc(c->nn + 1, sizeof *c->f8node);
  c->f8 = calloc(g->n_nodes + 1, sizeof *c->f8);
  unsigned char *hv = head ? NULL : f8_head_values(c);
  DRK_ASSERT(c->f8node && c->f8);
  for (size_t i = 0; i < g->n_nodes; i++) {
    drk_node_t *n = g->nodes[i];
    if (!f8_candidate(c, n) || n->id >= c->nn || (hv && hv[n->outputs[0]->id])) continue;
    if (c->choice && node_choice(c, n) != DRK_PREC_FP8) continue;
    f8cand_t *f = &c->f8[c->n_f8++];
    f->n = n;
    f->w = *n->inputs[1];
    const drk_value_t *b = n->n_inputs > 2 ? n->inputs[2] : NULL;
    f->has_bias = b && !(n->op == DRK_OP_GEMM && drk_node_attr_float(n, "beta", 1.0) == 0.0);
    if (f->has_bias) f->bias = *b;
    c->f8node[n->id] = (uint32_t)c->n_f8;
  }
  free(hv);
}

/* "<base>.<suffix>", or with a number added until unused; recorded as used. */
static const char *fresh_named(pctx_t *c, const char *base, const char *suffix) {
  return drk_graph_unique_namef(c->g, "%s.%s", base, suffix);
}

static drk_value_t *f8_node(pctx_t *c, drk_op_t op, int ni, drk_value_t **in, const char *base, const char *suffix,
                            drk_dtype_t t, const drk_shape_t *shape, drk_loc_t loc) {
  const char *name = fresh_named(c, base, suffix);
  drk_node_t *n = drk_graph_add_node(c->g, op, ni, in, 1, &name, loc);
  n->outputs[0]->dtype = t;
  n->outputs[0]->shape = drk_graph_shape(c->g, shape->rank, shape->dims);
  return n->outputs[0];
}

static drk_value_t *f8_cast(pctx_t *c, drk_value_t *v, drk_dtype_t t, const char *base, const char *suffix, drk_loc_t loc) {
  if (v->dtype == t) return v;
  drk_value_t *r = f8_node(c, DRK_OP_CAST, 1, &v, base, suffix, t, &v->shape, loc);
  drk_node_set_int(c->g, r->def, "to", drk_dtype_to_onnx(t));
  return r;
}

static drk_value_t *f8_const_f32(pctx_t *c, const char *base, const char *suffix, int rank, const int64_t *dims,
                                 float *data, int64_t n) {
  return drk_graph_add_const(c->g, fresh_named(c, base, suffix), DRK_DT_F32, drk_graph_shape_static(c->g, rank, dims),
                             data, (size_t)n * 4);
}

static drk_value_t *f8_scalar(pctx_t *c, const char *name, float v) {
  float *d = drk_arena_alloc(c->g->arena, 4);
  *d = v;
  return f8_const_f32(c, name, "c", 0, NULL, d, 1);
}

/* The quantized activation and its dequantization scale, shared by the candidates that read
 * the same value. */
typedef struct f8act {
  const drk_value_t *x;
  drk_value_t *xq, *sa;
} f8act_t;

/* A quantized weight, shared by the candidates that read the same constant the same way
 * (tied weights). */
typedef struct f8w {
  const void *data; /* the weight's data before the rewrite */
  drk_op_t op;
  bool tb;
  double mul;
  drk_value_t *wq, *ws;
} f8w_t;

typedef struct f8state {
  f8act_t *acts;
  size_t n_acts;
  f8w_t *ws;
  size_t n_ws;
  drk_value_t *c448, *tiny, *axes[DRK_MAX_RANK + 1]; /* first-stage axes by rank */
} f8state_t;

static f8act_t *f8_activation(pctx_t *c, f8state_t *st, drk_value_t *x, drk_loc_t loc) {
  /* the rewrite's Cast of an f32 value: quantize from the f32 value (one rounding less, and
   * the Cast may become dead) */
  drk_node_t *p = producer(x);
  if (p && p->op == DRK_OP_CAST && p->id >= c->nn && p->inputs[0] && p->inputs[0]->dtype == DRK_DT_F32) x = p->inputs[0];
  for (size_t i = 0; i < st->n_acts; i++)
    if (st->acts[i].x == x) return &st->acts[i];
  if (!st->c448) {
    st->c448 = f8_scalar(c, "fp8_max", (float)F8_MAX);
    st->tiny = f8_scalar(c, "fp8_tiny", F8_TINY);
  }
  drk_shape_t sc = drk_graph_shape_static(c->g, 0, NULL);
  const char *b = x->name;
  drk_value_t *ax = f8_node(c, DRK_OP_ABS, 1, &x, b, "abs", x->dtype, &x->shape, loc);
  /* max |x| in two stages, first per row (rank <= 3: along the last axis, a token's
   * features; rank >= 4: the spatial axes, an image's channel plane), then over the rows: a
   * GPU reduction of a whole tensor to one value would run in one program */
  int r = x->shape.rank;
  if (r >= 2 && r <= DRK_MAX_RANK) {
    int first = r <= 3 ? r - 1 : 2;
    if (!st->axes[r]) {
      int64_t ax_v[DRK_MAX_RANK], na = r - first;
      for (int i = first; i < r; i++) ax_v[i - first] = i;
      st->axes[r] = drk_graph_add_const_copy(c->g, fresh_named(c, "fp8_rows_axes", "c"), DRK_DT_I64,
                                             drk_graph_shape_static(c->g, 1, &na), ax_v, (size_t)na * 8);
    }
    drk_shape_t rows = drk_graph_shape(c->g, first, x->shape.dims);
    ax = f8_node(c, DRK_OP_REDUCE_MAX, 2, (drk_value_t *[]){ax, st->axes[r]}, b, "absmax_rows", x->dtype, &rows, loc);
    drk_node_set_int(c->g, ax->def, "keepdims", 0);
  }
  drk_value_t *am = f8_node(c, DRK_OP_REDUCE_MAX, 1, &ax, b, "absmax", x->dtype, &sc, loc);
  drk_node_set_int(c->g, am->def, "keepdims", 0);
  am = f8_cast(c, am, DRK_DT_F32, b, "absmax.f32", loc);
  drk_value_t *s = f8_node(c, DRK_OP_MAX, 2, (drk_value_t *[]){am, st->tiny}, b, "fp8_amax", DRK_DT_F32, &sc, loc);
  drk_value_t *qs = f8_node(c, DRK_OP_DIV, 2, (drk_value_t *[]){st->c448, s}, b, "fp8_qscale", DRK_DT_F32, &sc, loc);
  drk_value_t *sa = f8_node(c, DRK_OP_DIV, 2, (drk_value_t *[]){s, st->c448}, b, "fp8_scale", DRK_DT_F32, &sc, loc);
  drk_value_t *x32 = f8_cast(c, x, DRK_DT_F32, b, "f32", loc);
  drk_value_t *xs = f8_node(c, DRK_OP_MUL, 2, (drk_value_t *[]){x32, qs}, b, "fp8_scaled", DRK_DT_F32, &x->shape, loc);
  drk_value_t *xq = f8_cast(c, xs, DRK_DT_F8E4M3, b, "f8e4m3", loc);
  f8act_t *a = &st->acts[st->n_acts++];
  *a = (f8act_t){x, xq, sa};
  return a;
}

/* e4m3 bits of f, never 0x80 (negative zero is NaN in e4m3fnuz). */
static uint8_t f8_encode(double f) {
  uint8_t q = drk_f32_to_f8e4m3((float)f, true);
  return q == 0x80 ? 0 : q;
}

/* Quantizes the candidate's weight per output channel: *out_wq (f8e4m3, W's shape) and
 * *out_ws (f32 scales times `mul`, shaped to broadcast against the result: [N], or
 * [OC, 1, ...] for Conv). */
static void f8_weight(pctx_t *c, const f8cand_t *f, double mul, drk_value_t **out_wq, drk_value_t **out_ws) {
  const drk_node_t *n = f->n;
  drk_tensor_t w;
  DRK_ASSERT(drk_tensor_from_const(&w, &f->w));
  int64_t total = drk_tensor_numel(&w), C, inner = 1; /* channel of element i: (i / inner) % C */
  int r = w.rank;
  if (n->op == DRK_OP_CONV) {
    C = w.dims[0];
    inner = total / C;
  } else if (n->op == DRK_OP_GEMM && drk_node_attr_int(n, "transB", 0)) {
    C = w.dims[0];
    inner = w.dims[1];
  } else {
    C = w.dims[r - 1];
  }
  double *amax = calloc((size_t)C, sizeof *amax);
  DRK_ASSERT(amax);
  for (int64_t i = 0; i < total; i++) {
    double a = fabs(drk_tensor_get_f64(&w, i));
    int64_t ch = (i / inner) % C;
    if (a > amax[ch]) amax[ch] = a;
  }
  float *ws = drk_arena_alloc(c->g->arena, (size_t)C * 4);
  uint8_t *q = drk_arena_alloc(c->g->arena, (size_t)total);
  for (int64_t ch = 0; ch < C; ch++) {
    float s = (float)(amax[ch] / F8_MAX);
    amax[ch] = s > 0 && isfinite(s) ? s : 1.0; /* the scale the weight is divided by */
  }
  for (int64_t i = 0; i < total; i++) q[i] = f8_encode(drk_tensor_get_f64(&w, i) / amax[(i / inner) % C]);
  for (int64_t ch = 0; ch < C; ch++) ws[ch] = (float)(amax[ch] * mul);
  free(amax);
  const char *base = f->w.name;
  *out_wq = drk_graph_add_const(c->g, fresh_named(c, base, "f8e4m3"), DRK_DT_F8E4M3,
                                drk_graph_shape(c->g, f->w.shape.rank, f->w.shape.dims), q, (size_t)total);
  int64_t dims[DRK_MAX_RANK] = {C, 1, 1, 1, 1, 1, 1, 1};
  *out_ws = f8_const_f32(c, base, "fp8_scale", n->op == DRK_OP_CONV ? r - 1 : 1, dims, ws, C);
}

/* Gemm: beta * C; Conv: the bias shaped [OC, 1, ...] (rank of the result - 1); in f32. */
static drk_value_t *f8_bias(pctx_t *c, const f8cand_t *f) {
  drk_tensor_t b;
  DRK_ASSERT(drk_tensor_from_const(&b, &f->bias));
  int64_t total = drk_tensor_numel(&b);
  bool gemm = f->n->op == DRK_OP_GEMM;
  double beta = gemm ? drk_node_attr_float(f->n, "beta", 1.0) : 1.0;
  float *d = drk_arena_alloc(c->g->arena, (size_t)total * 4);
  for (int64_t i = 0; i < total; i++) d[i] = (float)(beta * drk_tensor_get_f64(&b, i));
  int64_t dims[DRK_MAX_RANK] = {total, 1, 1, 1, 1, 1, 1, 1};
  if (gemm) return f8_const_f32(c, f->bias.name, "f32", b.rank, b.dims, d, total);
  return f8_const_f32(c, f->bias.name, "f32", f->n->outputs[0]->shape.rank - 1, dims, d, total);
}

/* Builds the fp8 form of candidate f (appended to g->nodes); its result value is re-pointed
 * to the final Cast. */
static void f8_rewrite_node(pctx_t *c, f8state_t *st, const f8cand_t *f) {
  drk_graph_t *g = c->g;
  drk_node_t *n = f->n;
  drk_value_t *y = n->outputs[0];
  drk_loc_t loc = n->loc;
  f8act_t *a = f8_activation(c, st, n->inputs[0], loc);
  bool gemm = n->op == DRK_OP_GEMM, tb = gemm && drk_node_attr_int(n, "transB", 0);
  double mul = gemm ? drk_node_attr_float(n, "alpha", 1.0) : 1.0;
  drk_value_t *wq = NULL, *ws = NULL;
  for (size_t i = 0; i < st->n_ws && !wq; i++) {
    const f8w_t *e = &st->ws[i];
    if (e->data == f->w.data && e->op == n->op && e->tb == tb && e->mul == mul) wq = e->wq, ws = e->ws;
  }
  if (!wq) {
    f8_weight(c, f, mul, &wq, &ws);
    st->ws[st->n_ws++] = (f8w_t){f->w.data, n->op, tb, mul, wq, ws};
  }
  const char *mm_name = fresh_named(c, y->name, "fp8");
  drk_node_t *m = drk_graph_add_node(g, n->op, 2, (drk_value_t *[]){a->xq, wq}, 1, &mm_name, loc);
  m->n_attrs = n->n_attrs;
  m->attrs = n->n_attrs ? drk_arena_memdup(g->arena, n->attrs, sizeof *n->attrs * (size_t)n->n_attrs) : NULL;
  if (gemm) {
    drk_node_set_float(g, m, "alpha", 1.0);
    drk_node_set_float(g, m, "beta", 1.0);
  }
  drk_value_t *acc = m->outputs[0];
  acc->dtype = DRK_DT_F32;
  acc->shape = drk_graph_shape(g, y->shape.rank, y->shape.dims);
  drk_value_t *sc = f8_node(c, DRK_OP_MUL, 2, (drk_value_t *[]){a->sa, ws}, y->name, "fp8_scale", DRK_DT_F32, &ws->shape, loc);
  drk_value_t *r = f8_node(c, DRK_OP_MUL, 2, (drk_value_t *[]){acc, sc}, y->name, "f32", DRK_DT_F32, &y->shape, loc);
  if (f->has_bias) r = f8_node(c, DRK_OP_ADD, 2, (drk_value_t *[]){r, f8_bias(c, f)}, y->name, "biased", DRK_DT_F32, &y->shape, loc);
  drk_value_t *out = f8_cast(c, r, y->dtype, y->name, "out", loc);
  DRK_ASSERT(out != r);
  /* the final Cast takes over y: users and graph outputs keep reading the same value */
  drk_node_t *cn = out->def;
  cn->outputs[0] = y;
  y->def = cn;
  y->def_index = 0;
  y->loc = loc;
  n->dead = true;
}

/* After the rewrite: every candidate becomes its fp8 form, in the candidate's place in the
 * node order; constants no longer used (weights and biases only the candidates read, Casts
 * of their activations) go. */
static void fp8_apply(pctx_t *c) {
  if (!c->n_f8) return;
  drk_graph_t *g = c->g;
  size_t n_before = g->n_nodes;
  size_t *start = malloc(sizeof *start * (c->n_f8 + 1));
  f8state_t st = {0};
  st.acts = calloc(c->n_f8 + 1, sizeof *st.acts);
  st.ws = calloc(c->n_f8 + 1, sizeof *st.ws);
  DRK_ASSERT(start && st.acts && st.ws);
  for (size_t i = 0; i < c->n_f8; i++) {
    start[i] = g->n_nodes;
    f8_rewrite_node(c, &st, &c->f8[i]);
  }
  start[c->n_f8] = g->n_nodes;
  drk_node_t **order = malloc(sizeof *order * (g->n_nodes + 1));
  DRK_ASSERT(order);
  size_t k = 0;
  for (size_t i = 0; i < n_before; i++) {
    drk_node_t *n = g->nodes[i];
    uint32_t fi = n->id < c->nn ? c->f8node[n->id] : 0;
    if (!fi) {
      order[k++] = n;
      continue;
    }
    for (size_t j = start[fi - 1]; j < start[fi]; j++) order[k++] = g->nodes[j];
  }
  DRK_ASSERT(k == g->n_nodes - c->n_f8);
  memcpy(g->nodes, order, sizeof *order * k);
  g->n_nodes = k;
  free(order);
  free(start);
  free(st.acts);
  free(st.ws);
  drk_pass_eliminate_dead(g);
}

/* Choice mode: f32 MatMul/Gemm/Conv chosen TF32 get tf32 = 1 (an internal attribute: the
 * interpreter rounds their operands to tf32, the lowering runs them on tf32 tensor cores). */
static void mark_tf32(pctx_t *c) {
  for (size_t i = 0; i < c->g->n_nodes; i++) {
    drk_node_t *n = c->g->nodes[i];
    if (!live(n) || node_choice(c, n) != DRK_PREC_TF32 || !drk_precision_tf32_op(n)) continue;
    drk_node_set_int(c->g, n, "tf32", 1);
  }
}

bool drk_precision_tf32_op(const drk_node_t *n) {
  if (n->op != DRK_OP_MATMUL && n->op != DRK_OP_GEMM && n->op != DRK_OP_CONV) return false;
  return n->n_inputs >= 2 && n->inputs[0] && n->inputs[1] && n->inputs[0]->dtype == DRK_DT_F32 &&
         n->inputs[1]->dtype == DRK_DT_F32 && n->n_outputs == 1 && n->outputs[0]->dtype == DRK_DT_F32;
}

bool drk_pass_apply_precision(drk_graph_t *g, const drk_precision_options_t *o, drk_diag_t *d) {
  drk_loc_t gl = drk_loc_none;
  gl.file = g->source ? g->source : g->name;
  char tgt[32];
  if (o->target_name) snprintf(tgt, sizeof tgt, "%s", o->target_name);
  else if (o->target_sm > 0) snprintf(tgt, sizeof tgt, "sm_%d", o->target_sm);
  else snprintf(tgt, sizeof tgt, "the target");
  drk_dtype_t T = DRK_DT_F32;
  bool fp8 = false;
  switch (o->precision) {
    case DRK_PREC_FP16: T = DRK_DT_F16; break;
    case DRK_PREC_BF16: T = DRK_DT_BF16; break;
    case DRK_PREC_FP8:
      if (!o->target_has_fp8)
        drk_diag_warning(d, gl, "%s has no fp8 tensor cores (fp8 needs sm_89, sm_90 or gfx942): --precision=fp8 "
                         "falls back to fp16", tgt);
      fp8 = o->target_has_fp8;
      T = DRK_DT_F16;
      break;
    default: break;
  }
  pctx_t c = {0};
  c.g = g;
  c.T = T;
  c.mm_bf16 = T == DRK_DT_F32 && o->matmul == DRK_MMP_MEDIUM;
  bool used[2] = {false, false}; /* choice mode: some node chose f16 (fp8) / bf16 */
  if (o->node_choice) {
    c.choice = o->node_choice;
    c.n_choice = o->n_node_choice;
    c.mm_bf16 = false;
    fp8 = false;
    for (size_t i = 0; i < g->n_nodes; i++) {
      const drk_node_t *n = g->nodes[i];
      if (!live(n) || n->id >= c.n_choice) continue;
      drk_precision_t p = (drk_precision_t)c.choice[n->id];
      used[0] |= p == DRK_PREC_FP16 || p == DRK_PREC_FP8;
      used[1] |= p == DRK_PREC_BF16;
      fp8 |= p == DRK_PREC_FP8 && o->target_has_fp8;
    }
    c.fp8 = fp8;
    T = used[0] || used[1] ? DRK_DT_F16 : DRK_DT_F32;
    c.T = T;
    mark_tf32(&c);
  }
  if (T == DRK_DT_F32 && !c.mm_bf16) return true; /* auto, fp32, tf32: dtypes unchanged */
  c.nv = g->next_value_id;
  c.nn = g->next_node_id;
  c.orig = calloc(c.nv + 1, sizeof *c.orig);
  c.use_off = calloc(c.nv + 1, sizeof *c.use_off);
  c.use_n = calloc(c.nv + 1, sizeof *c.use_n);
  c.keep_t[0] = c.keep = calloc(c.nn + 1, 1);
  c.keep_t[1] = calloc(c.nn + 1, 1);
  c.is_out = calloc(c.nv + 1, sizeof *c.is_out);
  c.casts = calloc((size_t)(c.nv + 1) * CD_N, sizeof *c.casts);
  DRK_ASSERT(c.orig && c.use_off && c.use_n && c.keep && c.keep_t[1] && c.is_out && c.casts);
  for (uint32_t i = 0; i <= c.nv; i++) c.orig[i] = DRK_DT_COUNT;
  /* original dtypes, names, uses */
  for (size_t i = 0; i < g->n_inputs; i++) {
    c.orig[g->inputs[i]->id] = g->inputs[i]->dtype;
  }
  for (size_t i = 0; i < g->n_consts; i++) {
    c.orig[g->consts[i]->id] = g->consts[i]->dtype;
  }
  size_t total = 0;
  for (size_t i = 0; i < g->n_nodes; i++) {
    drk_node_t *n = g->nodes[i];
    for (int j = 0; j < n->n_outputs; j++)
      if (n->outputs[j] && n->outputs[j]->id < c.nv) c.orig[n->outputs[j]->id] = n->outputs[j]->dtype;
    if (!live(n)) continue;
    for (int j = 0; j < n->n_inputs; j++)
      if (n->inputs[j] && n->inputs[j]->id < c.nv) {
        c.use_n[n->inputs[j]->id]++;
        total++;
      }
  }
  c.uses = calloc(total + 1, sizeof *c.uses);
  DRK_ASSERT(c.uses);
  for (uint32_t i = 0, off = 0; i < c.nv; i++) {
    c.use_off[i] = off;
    off += c.use_n[i];
    c.use_n[i] = 0;
  }
  for (size_t i = 0; i < g->n_nodes; i++) {
    drk_node_t *n = g->nodes[i];
    if (!live(n)) continue;
    for (int j = 0; j < n->n_inputs; j++) {
      drk_value_t *v = n->inputs[j];
      if (v && v->id < c.nv) c.uses[c.use_off[v->id] + c.use_n[v->id]++] = (use_t){n, j};
    }
  }
  for (size_t i = 0; i < g->n_outputs; i++)
    if (g->outputs[i] && g->outputs[i]->id < c.nv) c.is_out[g->outputs[i]->id] = true;
  if (c.choice) { /* the fragile patterns under each half dtype some node chose */
    for (int k = 0; k < 2; k++) {
      if (!used[k]) continue;
      c.T = k ? DRK_DT_BF16 : DRK_DT_F16;
      c.keep = c.keep_t[k];
      find_fragile(&c);
    }
    c.T = DRK_DT_F16;
    c.keep = c.keep_t[0]; /* fp8 candidates: the rest of the fp8 form is f16 */
  } else if (T != DRK_DT_F32) {
    find_fragile(&c);
  }
  if (fp8) fp8_find(&c, o->fp8_head || c.choice);
  rewrite(&c);
  if (fp8) fp8_apply(&c);
  free(c.f8node);
  free(c.f8);
  free(c.orig);
  free(c.use_off);
  free(c.use_n);
  free(c.uses);
  free(c.keep_t[0]);
  free(c.keep_t[1]);
  free(c.is_out);
  free(c.casts);
  return true;
}

/* ---- report ---- */

drk_dtype_t drk_precision_node_dtype(const drk_node_t *n) {
  if (n->op == DRK_OP_SHAPE || n->op == DRK_OP_SIZE) return DRK_DT_COUNT;
  /* f8 MatMul/Gemm/Conv: their operands' dtype (the result is the f32 accumulator) */
  if ((n->op == DRK_OP_MATMUL || n->op == DRK_OP_GEMM || n->op == DRK_OP_CONV || n->op == DRK_OP_CONV_NHWC) &&
      n->n_inputs && n->inputs[0] &&
      (n->inputs[0]->dtype == DRK_DT_F8E4M3 || n->inputs[0]->dtype == DRK_DT_F8E5M2))
    return n->inputs[0]->dtype;
  for (int j = 0; j < n->n_outputs; j++)
    if (n->outputs[j] && drk_dtype_is_float(n->outputs[j]->dtype)) return n->outputs[j]->dtype;
  if (n->op == DRK_OP_CAST) return n->outputs[0] ? n->outputs[0]->dtype : DRK_DT_COUNT;
  for (int j = 0; j < n->n_inputs; j++)
    if (n->inputs[j] && drk_dtype_is_float(n->inputs[j]->dtype)) return n->inputs[j]->dtype;
  return DRK_DT_COUNT;
}

void drk_precision_report(const drk_graph_t *g, FILE *out) {
  size_t count[DRK_DT_COUNT] = {0}, casts = 0, other = 0, n_tf32 = 0;
  for (size_t i = 0; i < g->n_nodes; i++) {
    const drk_node_t *n = g->nodes[i];
    if (n->dead) continue;
    const char *name = n->n_outputs && n->outputs[0] ? n->outputs[0]->name : "?";
    char label[256];
    if (n->loc.node_name && n->op != DRK_OP_CAST) snprintf(label, sizeof label, "%%%s (%s)", name, n->loc.node_name);
    else snprintf(label, sizeof label, "%%%s", name);
    drk_dtype_t t = drk_precision_node_dtype(n);
    if (n->op == DRK_OP_CAST && n->inputs[0] && n->outputs[0]) {
      fprintf(out, "  %-48s %-20s %s->%s\n", label, drk_op_name(n->op), drk_dtype_name(n->inputs[0]->dtype),
              drk_dtype_name(n->outputs[0]->dtype));
      casts++;
      continue;
    }
    bool tf32 = drk_node_attr_int(n, "tf32", 0) != 0;
    fprintf(out, "  %-48s %-20s %s\n", label, drk_op_name(n->op), tf32 ? "tf32" : t < DRK_DT_COUNT ? drk_dtype_name(t) : "-");
    if (tf32) n_tf32++;
    else if (t < DRK_DT_COUNT) count[t]++;
    else other++;
  }
  fprintf(out, "precision mix:");
  const char *sep = " ";
  /* the most used dtype first, ties in dtype order */
  bool done[DRK_DT_COUNT] = {0};
  for (;;) {
    int best = -1;
    for (int t = 0; t < DRK_DT_COUNT; t++)
      if (!done[t] && count[t] && (best < 0 || count[t] > count[best])) best = t;
    if (best < 0) break;
    done[best] = true;
    fprintf(out, "%s%zu %s", sep, count[best], drk_dtype_name((drk_dtype_t)best));
    sep = ", ";
  }
  if (n_tf32) fprintf(out, "%s%zu tf32", sep, n_tf32), sep = ", ";
  if (sep[0] == ' ') fprintf(out, " no float nodes");
  fprintf(out, "; %zu casts, %zu non-float\n", casts, other);
}
