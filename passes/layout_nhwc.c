/* Layout: channels-last (NHWC) convolutions, with the layout changes placed once
 * (drk_pass_layout_nhwc, passes/passes.h; docs/passes.md "Layout").
 *
 * Tensor cores want the reduction index of a convolution's implicit GEMM contiguous in memory.
 * In NHWC, the K index (kh, kw, c) of an output pixel reads C contiguous channels per kernel
 * tap, so the A tiles are 16-byte copies instead of an element-by-element gather, and an
 * output pixel's OC channels are one contiguous row for the epilogue. The pass
 *  1. rewrites each chosen Conv  y = Conv(x, W, b)  into
 *       y = Transpose(ConvNHWC(Transpose(x, [0,2,3,1]), W', b), [0,3,1,2])
 *     with W' = W transposed here, once, to [OC, KH, KW, C/group] (W is a constant);
 *  2. sinks the Transposes towards the consumers: a value v known to equal Transpose(s, P)
 *     is not computed; each consumer that can take s computes its own result in the permuted
 *     order instead (which is again a Transpose of what it computes), so chains of convs,
 *     elementwise ops, pools and residual Adds stay channels-last, and two Transposes that
 *     meet compose (to the identity: they cancel);
 *  3. materializes v = Transpose(s, P) once, right before the first consumer that cannot take
 *     s (or at the end for a graph output); as a Reshape (a view) when P only moves size-1
 *     dims.
 *
 * Sinking rules (v = Transpose(s, P) means v.dims[i] = s.dims[P[i]]):
 *  - elementwise ops with one result (not Quantize/DequantizeLinear, whose `axis` names a
 *    dim): every sunk operand has the result's rank and the same P; the other operands are
 *    re-laid: a constant's data is permuted here (a bias [C,1,1] becomes [1,1,C]), a
 *    one-element operand stays, any other value gets its own Transpose (or Reshape);
 *  - Reshape/Flatten whose dim groups (runs of dims with equal products, size-1 dims aside)
 *    stay contiguous and in order under P: a Reshape of s, then the groups' permutation;
 *  - GroupNorm of one group as exported, Reshape([N, 1, L]) -> InstanceNormalization ->
 *    Reshape(back): the three nodes on s (a whole-sample normalization ignores the order);
 *  - Concat (the channel concatenations of U-Nets and DenseNets): the inputs as for
 *    elementwise ops, the axis moved to P[axis];
 *  - MatMul(A, B) with B sunk under a swap of its last two dims and A a constant matrix:
 *    A.B = (B'.A^T)^T, A^T computed here (the pointwise convs of conv-to-matmul);
 *  - ReduceSum/Mean/Max/Min/L2/SumSquare/Prod/LogSumExp with constant axes (input or
 *    attribute): the axes permuted (ConvNeXt V2's GRN: ReduceL2 over H, W);
 *    GlobalAveragePool/GlobalMaxPool: ReduceMean/ReduceMax over the spatial dims of s;
 *  - MaxPool (without Indices) and AveragePool of a channels-last s: MaxPoolNHWC /
 *    AveragePoolNHWC;
 *  - a chosen Conv takes s directly when Transpose(x, [0,2,3,1]) is s;
 *  - a Transpose composes with P; the model's own NCHW <-> NHWC Transposes (rank 4) are
 *    tracked like the pass's (a TF-exported model's input Transpose then cancels).
 * Every other consumer gets the materialized value: correctness first.
 *
 * Which convs (drk_layout_options_t): 2-D Conv (rank 4) with static shapes, one result, a
 * float input and a constant weight of whole bytes per element. nhwc: all of them; auto:
 * those computing in a 16-bit float or f8 (f16, bf16, f8e4m3, f8e5m2) when every target is
 * NVIDIA, except that a depthwise or small-group conv (group > 1, at most 8 input channels
 * per group) joins a channels-last region but does not start one by itself: it runs on the
 * direct kernel (lower/lower_dwconv.c) in either layout, so where its input is NCHW a
 * Transpose of that input (often the widest tensor of an inverted-residual block) would cost
 * more than NHWC saves; it does start one where its input is the model's own NHWC -> NCHW
 * Transpose (ConvNeXt: channels-last LayerNorms and MLPs between the convs), which then costs
 * nothing; dense convs start regions (the tensor-core implicit GEMM wants channels contiguous).
 * nchw: none (the graph is left alone). With o->explain, each Conv's decision and each
 * layout change placed (the consumer that needs it) get a `// layout:` line: the reason per
 * region that --dump-after=layout prints before the graph.
 *
 * Padded channels (pad_channels, set for sm_90a): a chosen f16/bf16 conv of one group with
 * strides <= 8 whose C is not a multiple of pad_channels (the RGB stem's C = 3) computes
 * with Cp = C rounded up: W' gets Cp - C zero channels here, and its channels-last input
 * goes through a constant Pad of the channel dim (zeros), which fuses with the layout
 * Transpose at the model input. The extra terms are 0 * 0, so the result is the same in
 * the interpreter bit for bit; the TMA convolution then reads rows of 16-byte multiples.
 *
 * Requires: shapes and dtypes inferred (after the precision policy: the compute dtypes are
 * final); nodes in topological order. Guarantees: the same function, bit for bit in the
 * interpreter (the channels-last ops are defined as their ONNX counterparts on transposed
 * operands; everything else is per element or an exact reordering); graph inputs and outputs
 * keep names, dtypes and shapes; a materialized value keeps its name; topological order. The
 * replaced nodes are marked dead: run drk_pass_eliminate_dead, then shape inference (which
 * agrees with every shape set here). */
#include <stdlib.h>
#include <string.h>

#include "ir/tensor.h"
#include "passes.h"

#define LR DRK_MAX_RANK

typedef struct sunk {
  drk_value_t *src; /* NULL: the value is computed as written */
  int p[LR];
  bool done; /* materialized: the value is produced again (by a Transpose or Reshape of src) */
} sunk_t;

typedef struct relaid {
  const drk_value_t *from;
  int r, p[LR];
  drk_value_t *to;
} relaid_t;

typedef struct lctx {
  drk_graph_t *g;
  const drk_layout_options_t *o;
  uint32_t n0;           /* value ids below this are the graph's before the pass */
  sunk_t *sk;            /* per original value id */
  drk_value_t **nhwc_in; /* per original value id: its channels-last form for the convs */
  drk_value_t **padded_in; /* per original value id: its channels-last form, channel-padded */
  uint32_t *uses;        /* per original value id: its readers (nodes, graph outputs) */
  drk_node_t **user;     /* per original value id: a node that reads it */
  relaid_t *rl;          /* constants permuted so far (weights, biases) */
  size_t n_rl, cap_rl;
  drk_layout_stats_t st;
} lctx_t;

/* ---- names ---- */
/* "<base>.<suffix>" (or with "_N" added, drk_graph_unique_name) */
static const char *fresh(lctx_t *L, const char *base, const char *suffix) {
  return drk_graph_unique_namef(L->g, "%s.%s", base, suffix);
}

/* ---- permutations ---- */
static bool perm_identity(const int *p, int r) {
  for (int i = 0; i < r; i++)
    if (p[i] != i) return false;
  return true;
}
static bool perm_equal(const int *a, const int *b, int r) { return memcmp(a, b, sizeof(int) * (size_t)r) == 0; }
static void perm_inverse(const int *p, int r, int *out) {
  for (int i = 0; i < r; i++) out[p[i]] = i;
}
/* channels-first -> channels-last ([0,2,3,1] for rank 4) and back ([0,3,1,2]) */
static void perm_to_last(int r, int *p) {
  p[0] = 0, p[r - 1] = 1;
  for (int i = 1; i < r - 1; i++) p[i] = i + 1;
}
static void perm_to_first(int r, int *p) {
  p[0] = 0, p[1] = r - 1;
  for (int i = 2; i < r; i++) p[i] = i - 1;
}

static bool ranked_static(const drk_value_t *v) {
  return v && v->shape.rank >= 0 && v->shape.rank <= LR && drk_shape_is_static(&v->shape);
}

/* dims of Transpose(s, p) given s's shape: out[i] = s[p[i]] */
static drk_shape_t shape_perm(drk_graph_t *g, const drk_shape_t *s, const int *p) {
  drk_dim_t d[LR];
  for (int i = 0; i < s->rank; i++) d[i] = s->dims[p[i]];
  return drk_graph_shape(g, s->rank, d);
}
/* the shape s' with Transpose(s', p) == s: s'[p[i]] = s[i] */
static drk_shape_t shape_unperm(drk_graph_t *g, const drk_shape_t *s, const int *p) {
  drk_dim_t d[LR];
  for (int i = 0; i < s->rank; i++) d[p[i]] = s->dims[i];
  return drk_graph_shape(g, s->rank, d);
}

/* Whether Transpose(x, p) only moves size-1 dims (its bytes are x's: a Reshape does it). */
static bool perm_is_view(const drk_shape_t *x, const int *p) {
  int last = -1;
  for (int i = 0; i < x->rank; i++) {
    const drk_dim_t *d = &x->dims[p[i]];
    if (!d->sym && d->size == 1) continue;
    if (p[i] < last) return false;
    last = p[i];
  }
  return true;
}

/* ---- building ---- */
static drk_value_t *node1(lctx_t *L, drk_op_t op, int ni, drk_value_t *const *in, const char *name, drk_dtype_t t,
                          drk_shape_t s, drk_loc_t loc) {
  drk_node_t *n = drk_graph_add_node(L->g, op, ni, in, 1, &name, loc);
  n->outputs[0]->dtype = t;
  n->outputs[0]->shape = s;
  return n->outputs[0];
}

static drk_value_t *i64_const(lctx_t *L, const char *base, const char *suffix, int n, const int64_t *v) {
  int64_t len = n;
  return drk_graph_add_const_copy(L->g, fresh(L, base, suffix), DRK_DT_I64, drk_graph_shape_static(L->g, 1, &len), v,
                                  sizeof(int64_t) * (size_t)n);
}

/* Transpose(x, p) as a new value (a Reshape where it is a view of a static x); name base.suffix */
static drk_value_t *transpose_new(lctx_t *L, drk_value_t *x, const int *p, const char *suffix, drk_loc_t loc) {
  int r = x->shape.rank;
  drk_shape_t s = shape_perm(L->g, &x->shape, p);
  if (ranked_static(x) && perm_is_view(&x->shape, p)) {
    int64_t d[LR];
    for (int i = 0; i < r; i++) d[i] = s.dims[i].size;
    drk_value_t *sh = i64_const(L, x->name, "shape", r, d);
    return node1(L, DRK_OP_RESHAPE, 2, (drk_value_t *[]){x, sh}, fresh(L, x->name, suffix), x->dtype, s, loc);
  }
  drk_value_t *y = node1(L, DRK_OP_TRANSPOSE, 1, &x, fresh(L, x->name, suffix), x->dtype, s, loc);
  int64_t pp[LR];
  for (int i = 0; i < r; i++) pp[i] = p[i];
  drk_node_set_ints(L->g, y->def, "perm", (size_t)r, pp);
  L->st.transposes++;
  return y;
}

/* A constant's data permuted (Transpose(c padded to rank r, p)), cached per (c, p). */
static drk_value_t *const_perm(lctx_t *L, const drk_value_t *c, int r, const int *p) {
  for (size_t i = 0; i < L->n_rl; i++)
    if (L->rl[i].from == c && L->rl[i].r == r && perm_equal(L->rl[i].p, p, r)) return L->rl[i].to;
  int cr = c->shape.rank;
  int64_t xd[LR], xs[LR], od[LR], os[LR];
  for (int i = 0; i < r; i++) xd[i] = i < r - cr ? 1 : c->shape.dims[i - (r - cr)].size;
  int64_t acc = 1;
  for (int i = r - 1; i >= 0; i--) xs[i] = acc, acc *= xd[i];
  for (int i = 0; i < r; i++) od[i] = xd[p[i]], os[i] = xs[p[i]];
  size_t es = (size_t)drk_dtype_bits(c->dtype) / 8, n = (size_t)acc;
  uint8_t *data = drk_arena_alloc(L->g->arena, n * es > 0 ? n * es : 1);
  const uint8_t *src = c->data;
  int64_t idx[LR] = {0}, off = 0;
  for (size_t i = 0; i < n; i++) {
    memcpy(data + i * es, src + (size_t)off * es, es);
    for (int d = r - 1; d >= 0; d--) { /* next output index; off follows with the source strides */
      off += os[d];
      if (++idx[d] < od[d]) break;
      off -= os[d] * od[d];
      idx[d] = 0;
    }
  }
  drk_value_t *v = drk_graph_add_const(L->g, fresh(L, c->name, "nhwc"), c->dtype, drk_graph_shape_static(L->g, r, od),
                                       data, n * es);
  v->loc = c->loc;
  if (L->n_rl == L->cap_rl) {
    L->cap_rl = L->cap_rl ? 2 * L->cap_rl : 16;
    L->rl = realloc(L->rl, sizeof *L->rl * L->cap_rl);
    DRK_ASSERT(L->rl);
  }
  relaid_t e = {.from = c, .r = r, .to = v};
  memcpy(e.p, p, sizeof(int) * (size_t)r);
  L->rl[L->n_rl++] = e;
  return v;
}

static bool const_permutable(const drk_value_t *c) {
  return c && c->kind == DRK_VALUE_CONST && c->data && ranked_static(c) && drk_dtype_bits(c->dtype) % 8 == 0 &&
         c->nbytes == drk_dtype_nbytes(c->dtype, drk_shape_numel(&c->shape));
}

/* ---- what is known about values ---- */
static sunk_t *sunk_of(lctx_t *L, const drk_value_t *v) {
  return v && L->sk && v->id < L->n0 && L->sk[v->id].src ? &L->sk[v->id] : NULL;
}

static void set_sunk(lctx_t *L, drk_value_t *v, drk_value_t *src, const int *p) {
  sunk_t *s = &L->sk[v->id];
  s->src = src;
  memcpy(s->p, p, sizeof(int) * (size_t)v->shape.rank);
  s->done = false;
}

/* Produces v again as Transpose(src, P) (or a Reshape / Identity), once, at this point of the
 * node order; v keeps its name, users and graph-output role. */
static void materialize(lctx_t *L, drk_value_t *v, const drk_node_t *consumer) {
  sunk_t *s = sunk_of(L, v);
  if (!s || s->done) return;
  if (L->o->explain)
    fprintf(L->o->explain, "// layout: %%%s back to the model's layout for %s%s%s (no channels-last rule takes it)\n",
            v->name, consumer ? drk_op_name(consumer->op) : "the graph output", consumer ? " %" : "",
            consumer && consumer->n_outputs && consumer->outputs[0] ? consumer->outputs[0]->name : "");
  int r = v->shape.rank;
  drk_value_t *t;
  if (perm_identity(s->p, r))
    t = node1(L, DRK_OP_IDENTITY, 1, &s->src, fresh(L, v->name, "id"), v->dtype, v->shape, v->loc);
  else
    t = transpose_new(L, s->src, s->p, "nchw", v->loc);
  drk_node_t *n = t->def;
  n->outputs[0] = v;
  v->def = n;
  v->def_index = 0;
  s->done = true;
}

/* ---- which convs ---- */
/* depthwise or small-group: the direct kernel's convs (lower_dwconv.c) */
static bool conv_small_groups(const drk_node_t *n) {
  int64_t G = drk_node_attr_int(n, "group", 1), C = n->inputs[0]->shape.dims[1].size;
  return G > 1 && C % G == 0 && C / G <= 8;
}

static const char *conv_reason(lctx_t *L, const drk_node_t *n, bool *out_nhwc);

static bool conv_chosen(lctx_t *L, const drk_node_t *n) {
  bool nhwc;
  return conv_reason(L, n, &nhwc) && nhwc;
}

/* Whether n is a 2-D conv the pass decides for (the reason, or NULL when it is not one) and,
 * in *out_nhwc, whether it computes channels-last. */
static const char *conv_reason(lctx_t *L, const drk_node_t *n, bool *out_nhwc) {
  *out_nhwc = false;
  if (n->op != DRK_OP_CONV || n->n_outputs != 1 || n->n_inputs < 2) return NULL;
  if (n->op != DRK_OP_CONV || n->n_outputs != 1 || n->n_inputs < 2) return false;
  const drk_value_t *x = n->inputs[0], *w = n->inputs[1], *b = n->n_inputs > 2 ? n->inputs[2] : NULL, *y = n->outputs[0];
  if (!x || !y || !ranked_static(x) || !ranked_static(y) || x->shape.rank != 4 || y->shape.rank != 4) return NULL;
  if (!const_permutable(w) || w->shape.rank != 4) return "NCHW: the weight is not a constant the pass can re-lay";
  if (b && sunk_of(L, b)) return "NCHW: the bias is a channels-last value";
  if (!drk_dtype_is_float(x->dtype) || drk_shape_numel(&y->shape) <= 0) return "NCHW: not a float conv";
  switch (L->o->layout) {
    case DRK_LAYOUT_NHWC: *out_nhwc = true; return "NHWC: --layout=nhwc";
    case DRK_LAYOUT_AUTO:
      if (!L->o->nvidia_only) return "NCHW: a non-NVIDIA target";
      if (x->dtype != DRK_DT_F16 && x->dtype != DRK_DT_BF16 && x->dtype != DRK_DT_F8E4M3 && x->dtype != DRK_DT_F8E5M2)
        return "NCHW: computes in f32/f64 (channels-last pays off for 16-bit and f8 tensor cores)";
      if (conv_small_groups(n)) {
        if (!sunk_of(L, x))
          return "NCHW: depthwise/small-group conv (direct kernel, either layout) on an NCHW input: a Transpose of "
                 "its input would cost more than channels-last saves";
        *out_nhwc = true;
        return "NHWC: depthwise/small-group conv on a channels-last input (16-byte channel vectors)";
      }
      *out_nhwc = true;
      return "NHWC: 16-bit/f8 implicit GEMM, channels contiguous along K";
    default: return "NCHW: --layout=nchw";
  }
}

static void explain_conv(lctx_t *L, const drk_node_t *n) {
  bool nhwc;
  const char *why = L->o->explain ? conv_reason(L, n, &nhwc) : NULL;
  if (why) fprintf(L->o->explain, "// layout: Conv %%%s: %s\n", n->outputs[0]->name, why);
}

/* x as channels-last: Transpose(x, to_last), sharing one per value */
static drk_value_t *channels_last_of(lctx_t *L, drk_value_t *x, drk_loc_t loc) {
  if (x->id < L->n0 && L->nhwc_in[x->id]) return L->nhwc_in[x->id];
  int r = x->shape.rank, t[LR], q[LR];
  perm_to_last(r, t);
  drk_value_t *res;
  sunk_t *s = sunk_of(L, x);
  if (s) {
    for (int i = 0; i < r; i++) q[i] = s->p[t[i]]; /* Transpose(Transpose(src, P), t) */
    res = perm_identity(q, r) ? s->src : transpose_new(L, s->src, q, "nhwc", loc);
  } else {
    res = transpose_new(L, x, t, "nhwc", loc);
  }
  if (x->id < L->n0) L->nhwc_in[x->id] = res;
  return res;
}

static drk_node_t *clone_node(lctx_t *L, const drk_node_t *n, drk_op_t op, int ni, drk_value_t *const *in,
                              drk_dtype_t t, drk_shape_t s, const char *suffix) {
  drk_value_t *y = node1(L, op, ni, in, fresh(L, n->outputs[0]->name, suffix), t, s, n->loc);
  drk_node_t *m = y->def;
  m->n_attrs = n->n_attrs;
  m->attrs = n->n_attrs ? drk_arena_memdup(L->g->arena, n->attrs, sizeof *n->attrs * (size_t)n->n_attrs) : NULL;
  return m;
}

/* The channel count conv n computes with: C, or C rounded up to pad_channels for a 16-bit
 * conv of one group that the sm_90a TMA kernel could then take (strides 1..8: TMA's element
 * strides; wider ones stay on mma_sync, where padding would only add work). */
static int64_t conv_channels(lctx_t *L, const drk_node_t *n) {
  const drk_value_t *x = n->inputs[0];
  int64_t q = L->o->pad_channels, C = x->shape.dims[1].size;
  if (q <= 1 || C % q == 0 || drk_node_attr_int(n, "group", 1) != 1) return C;
  if (x->dtype != DRK_DT_F16 && x->dtype != DRK_DT_BF16) return C;
  size_t ns = 0;
  const int64_t *st = drk_node_attr_ints(n, "strides", &ns);
  for (size_t i = 0; st && i < ns; i++)
    if (st[i] < 1 || st[i] > 8) return C;
  return (C + q - 1) / q * q;
}

/* w' [OC, KH, KW, C] with its channels zero-padded to Cp: the padded channels add 0 * 0. */
static drk_value_t *const_pad_last(lctx_t *L, const drk_value_t *w, int64_t Cp) {
  int r = w->shape.rank;
  int64_t d[LR], C = w->shape.dims[r - 1].size, rows = drk_shape_numel(&w->shape) / C;
  for (int i = 0; i < r; i++) d[i] = w->shape.dims[i].size;
  d[r - 1] = Cp;
  size_t es = (size_t)drk_dtype_bits(w->dtype) / 8, nb = (size_t)(rows * Cp) * es;
  uint8_t *data = drk_arena_alloc(L->g->arena, nb);
  memset(data, 0, nb);
  for (int64_t i = 0; i < rows; i++) memcpy(data + (size_t)(i * Cp) * es, (const uint8_t *)w->data + (size_t)(i * C) * es, (size_t)C * es);
  drk_value_t *v = drk_graph_add_const(L->g, fresh(L, w->name, "pad"), w->dtype, drk_graph_shape_static(L->g, r, d), data, nb);
  v->loc = w->loc;
  return v;
}

/* xs (x channels last) with Cp - C zero channels appended, one per x: a constant Pad, which the fusion
 * joins to the Transpose (or Cast) that makes xs at the model's input */
static drk_value_t *pad_channels_of(lctx_t *L, const drk_value_t *x, drk_value_t *xs, int64_t Cp, drk_loc_t loc) {
  if (x->id < L->n0 && L->padded_in[x->id]) return L->padded_in[x->id];
  int r = xs->shape.rank;
  int64_t pads[2 * LR] = {0}, d[LR];
  pads[r + r - 1] = Cp - xs->shape.dims[r - 1].size;
  for (int i = 0; i < r; i++) d[i] = xs->shape.dims[i].size;
  d[r - 1] = Cp;
  drk_value_t *pv = i64_const(L, xs->name, "pads", 2 * r, pads);
  drk_value_t *res = node1(L, DRK_OP_PAD, 2, (drk_value_t *[]){xs, pv}, fresh(L, xs->name, "padc"), xs->dtype,
                           drk_graph_shape_static(L->g, r, d), loc);
  if (x->id < L->n0) L->padded_in[x->id] = res;
  return res;
}

static bool rule_conv(lctx_t *L, drk_node_t *n) {
  drk_value_t *x = n->inputs[0], *w = n->inputs[1], *b = n->n_inputs > 2 ? n->inputs[2] : NULL, *y = n->outputs[0];
  int r = x->shape.rank, tl[LR], tf[LR];
  perm_to_last(r, tl);
  perm_to_first(r, tf);
  drk_value_t *xs = channels_last_of(L, x, n->loc);
  drk_value_t *ws = const_perm(L, w, r, tl);
  int64_t Cp = conv_channels(L, n);
  if (Cp != x->shape.dims[1].size) {
    xs = pad_channels_of(L, x, xs, Cp, n->loc);
    ws = const_pad_last(L, ws, Cp);
    L->st.padded++;
  }
  drk_shape_t ys = shape_unperm(L->g, &y->shape, tf);
  drk_node_t *m = clone_node(L, n, DRK_OP_CONV_NHWC, b ? 3 : 2, (drk_value_t *[]){xs, ws, b}, y->dtype, ys, "nhwc");
  set_sunk(L, y, m->outputs[0], tf);
  L->st.convs++;
  return true;
}

/* Elementwise n with its sunk operands all of perm P and the result's rank. */
static bool ew_operand_skipped(const drk_node_t *n, int i) {
  return (n->op == DRK_OP_CLIP && i >= 1) || (n->op == DRK_OP_CAST_LIKE && i == 1);
}

static bool rule_ew(lctx_t *L, drk_node_t *n) {
  if (n->n_outputs != 1 || n->op == DRK_OP_QUANTIZE_LINEAR || n->op == DRK_OP_DEQUANTIZE_LINEAR || n->n_inputs > 16)
    return false;
  drk_value_t *y = n->outputs[0];
  int r = y->shape.rank;
  if (r < 1 || r > LR) return false;
  const int *P = NULL;
  for (int i = 0; i < n->n_inputs; i++) {
    sunk_t *s = sunk_of(L, n->inputs[i]);
    if (!s) continue;
    if (ew_operand_skipped(n, i) || n->inputs[i]->shape.rank != r || (P && !perm_equal(P, s->p, r))) return false;
    P = s->p;
  }
  if (!P) return false;
  int Pi[LR];
  perm_inverse(P, r, Pi);
  /* the other operands must be re-layable */
  for (int i = 0; i < n->n_inputs; i++) {
    drk_value_t *u = n->inputs[i];
    if (!u || sunk_of(L, u) || ew_operand_skipped(n, i)) continue;
    if (u->shape.rank < 0 || u->shape.rank > r) return false;
    if (drk_shape_numel(&u->shape) == 1) continue;
    if (!const_permutable(u) && !ranked_static(u)) return false;
  }
  drk_value_t *in[16];
  for (int i = 0; i < n->n_inputs; i++) {
    drk_value_t *u = n->inputs[i];
    sunk_t *s = sunk_of(L, u);
    if (!u || ew_operand_skipped(n, i) || (!s && drk_shape_numel(&u->shape) == 1)) {
      in[i] = u;
    } else if (s) {
      in[i] = s->src;
    } else if (const_permutable(u)) {
      in[i] = const_perm(L, u, r, Pi);
    } else {
      /* padded with leading 1s to rank r, then permuted: one Reshape when that is a view */
      int64_t d[LR], od[LR];
      for (int k = 0; k < r; k++) d[k] = k < r - u->shape.rank ? 1 : u->shape.dims[k - (r - u->shape.rank)].size;
      drk_shape_t ps = drk_graph_shape_static(L->g, r, d);
      bool view = perm_is_view(&ps, Pi);
      for (int k = 0; k < r; k++) od[k] = view ? d[Pi[k]] : d[k];
      drk_value_t *pu = u;
      if (u->shape.rank < r || view) {
        drk_value_t *sh = i64_const(L, u->name, "shape", r, od);
        pu = node1(L, DRK_OP_RESHAPE, 2, (drk_value_t *[]){u, sh}, fresh(L, u->name, view ? "nhwc" : "rank"), u->dtype,
                   drk_graph_shape_static(L->g, r, od), n->loc);
      }
      in[i] = view ? pu : transpose_new(L, pu, Pi, "nhwc", n->loc);
    }
  }
  drk_node_t *m = clone_node(L, n, n->op, n->n_inputs, in, y->dtype, shape_unperm(L->g, &y->shape, P), "nhwc");
  set_sunk(L, y, m->outputs[0], P);
  return true;
}

/* Concat: the sunk inputs share P; the others are re-laid; the axis moves to P[axis]. */
static bool rule_concat(lctx_t *L, drk_node_t *n) {
  drk_value_t *y = n->outputs[0];
  int r = y->shape.rank;
  int64_t ax = drk_node_attr_int(n, "axis", 0);
  if (r < 1 || ax < -r || ax >= r || n->n_inputs > 64) return false;
  const int *P = NULL;
  for (int i = 0; i < n->n_inputs; i++) {
    drk_value_t *u = n->inputs[i];
    sunk_t *s = sunk_of(L, u);
    if (!u || u->shape.rank != r) return false;
    if (s && P && !perm_equal(P, s->p, r)) return false;
    if (s) P = s->p;
    else if (!const_permutable(u) && !ranked_static(u)) return false;
  }
  if (!P) return false;
  int Pi[LR];
  perm_inverse(P, r, Pi);
  drk_value_t *in[64];
  for (int i = 0; i < n->n_inputs; i++) {
    drk_value_t *u = n->inputs[i];
    sunk_t *s = sunk_of(L, u);
    in[i] = s ? s->src : const_permutable(u) ? const_perm(L, u, r, Pi) : transpose_new(L, u, Pi, "nhwc", n->loc);
  }
  drk_node_t *m = clone_node(L, n, DRK_OP_CONCAT, n->n_inputs, in, y->dtype, shape_unperm(L->g, &y->shape, P), "nhwc");
  drk_node_set_int(L->g, m, "axis", P[ax < 0 ? ax + r : ax]);
  set_sunk(L, y, m->outputs[0], P);
  return true;
}

/* Reshape/Flatten of a sunk input: groups of non-1 dims with equal products must stay
 * contiguous and ordered in src. */
static bool rule_reshape(lctx_t *L, drk_node_t *n) {
  drk_value_t *x = n->inputs[0], *y = n->outputs[0];
  sunk_t *s = sunk_of(L, x);
  for (int i = 1; i < n->n_inputs; i++)
    if (sunk_of(L, n->inputs[i])) return false;
  if (!s || !ranked_static(x) || !ranked_static(y) || drk_shape_numel(&y->shape) <= 0) return false;
  int rx = x->shape.rank, ry = y->shape.rank;
  /* rank of each src dim among src's non-1 dims */
  int srank[LR], ns = 0;
  for (int k = 0; k < rx; k++) srank[k] = s->src->shape.dims[k].size == 1 ? -1 : ns++;
  int xi[LR], yi[LR], nx = 0, ny = 0;
  for (int k = 0; k < rx; k++)
    if (x->shape.dims[k].size != 1) xi[nx++] = k;
  for (int k = 0; k < ry; k++)
    if (y->shape.dims[k].size != 1) yi[ny++] = k;
  /* groups: [gx[g], gx[g+1]) of xi matched with [gy[g], gy[g+1]) of yi */
  int gx[LR + 1], gy[LR + 1], ng = 0, a = 0, b = 0;
  gx[0] = gy[0] = 0;
  while (a < nx || b < ny) {
    if (a >= nx || b >= ny) return false;
    int64_t px = x->shape.dims[xi[a++]].size, py = y->shape.dims[yi[b++]].size;
    while (px != py) {
      if (px < py) {
        if (a >= nx) return false;
        px *= x->shape.dims[xi[a++]].size;
      } else {
        if (b >= ny) return false;
        py *= y->shape.dims[yi[b++]].size;
      }
    }
    ng++;
    gx[ng] = a, gy[ng] = b;
  }
  /* each group's x dims are consecutive non-1 dims of src, in order; its first src rank */
  int first[LR];
  for (int gi = 0; gi < ng; gi++) {
    first[gi] = srank[s->p[xi[gx[gi]]]];
    for (int k = gx[gi] + 1; k < gx[gi + 1]; k++)
      if (srank[s->p[xi[k]]] != srank[s->p[xi[k - 1]]] + 1) return false;
  }
  /* groups in src order fill y's non-1 slots; size-1 dims stay where they are in y */
  int order[LR];
  for (int gi = 0; gi < ng; gi++) order[gi] = gi;
  for (int i = 1; i < ng; i++)
    for (int j = i; j > 0 && first[order[j]] < first[order[j - 1]]; j--) {
      int t = order[j];
      order[j] = order[j - 1], order[j - 1] = t;
    }
  int64_t od[LR];
  int q[LR], slot = 0;
  for (int k = 0; k < ry; k++) od[k] = 1, q[k] = k;
  for (int oi = 0; oi < ng; oi++) {
    int gi = order[oi];
    for (int k = gy[gi]; k < gy[gi + 1]; k++, slot++) {
      od[yi[slot]] = y->shape.dims[yi[k]].size;
      q[yi[k]] = yi[slot];
    }
  }
  drk_value_t *sh = i64_const(L, y->name, "nhwc_shape", ry, od);
  drk_value_t *r = node1(L, DRK_OP_RESHAPE, 2, (drk_value_t *[]){s->src, sh}, fresh(L, y->name, "nhwc"), y->dtype,
                         drk_graph_shape_static(L->g, ry, od), n->loc);
  set_sunk(L, y, r, q);
  return true;
}

/* MatMul(A, B): B sunk under a swap of its last two dims, A a constant matrix. */
static bool rule_matmul(lctx_t *L, drk_node_t *n) {
  drk_value_t *a = n->inputs[0], *b = n->inputs[1], *y = n->outputs[0];
  sunk_t *s = sunk_of(L, b);
  if (!s || sunk_of(L, a) || !const_permutable(a) || a->shape.rank != 2) return false;
  int r = b->shape.rank;
  if (r < 2 || y->shape.rank != r) return false;
  for (int i = 0; i < r - 2; i++)
    if (s->p[i] != i) return false;
  if (s->p[r - 2] != r - 1 || s->p[r - 1] != r - 2) return false;
  drk_value_t *at = const_perm(L, a, 2, (int[]){1, 0});
  drk_node_t *m = clone_node(L, n, DRK_OP_MATMUL, 2, (drk_value_t *[]){s->src, at}, y->dtype,
                             shape_unperm(L->g, &y->shape, s->p), "nhwc");
  set_sunk(L, y, m->outputs[0], s->p);
  return true;
}

/* Reduce{Sum,Mean,Max,Min} with constant axes (or a Global pool: its spatial dims) of a sunk
 * input. */
static bool rule_reduce(lctx_t *L, drk_node_t *n) {
  drk_value_t *x = n->inputs[0], *y = n->outputs[0];
  sunk_t *s = sunk_of(L, x);
  if (!s || n->n_outputs != 1 || (n->n_inputs > 1 && sunk_of(L, n->inputs[1]))) return false;
  int r = x->shape.rank;
  bool global = n->op == DRK_OP_GLOBAL_AVERAGE_POOL || n->op == DRK_OP_GLOBAL_MAX_POOL;
  bool red[LR] = {false}, keep = global || drk_node_attr_int(n, "keepdims", 1) != 0, attr_form = false;
  int64_t ax[LR * 2];
  int na = 0;
  if (global) {
    if (r < 3) return false;
    for (int i = 2; i < r; i++) ax[na++] = i;
  } else if (n->n_inputs > 1 && n->inputs[1]) {
    const drk_value_t *av = n->inputs[1];
    if (av->kind != DRK_VALUE_CONST || !av->data || av->dtype != DRK_DT_I64 || av->shape.rank != 1 ||
        !ranked_static(av) || av->shape.dims[0].size > LR * 2)
      return false;
    na = (int)av->shape.dims[0].size;
    memcpy(ax, av->data, sizeof(int64_t) * (size_t)na);
  } else {
    size_t cnt = 0;
    const int64_t *v = drk_node_attr_ints(n, "axes", &cnt);
    if (cnt > LR * 2) return false;
    attr_form = v != NULL;
    for (size_t i = 0; i < cnt; i++) ax[na++] = v[i];
  }
  if (na == 0) {
    if (drk_node_attr_int(n, "noop_with_empty_axes", 0)) return false;
    for (int i = 0; i < r; i++) ax[na++] = i;
  }
  for (int i = 0; i < na; i++) {
    int64_t a = ax[i] < 0 ? ax[i] + r : ax[i];
    if (a < 0 || a >= r) return false;
    red[a] = true;
  }
  /* new axes: src dims p[a], ascending */
  int64_t nax[LR];
  int nn = 0;
  for (int k = 0; k < r; k++)
    for (int a = 0; a < r; a++)
      if (red[a] && s->p[a] == k) nax[nn++] = k;
  drk_op_t op = n->op == DRK_OP_GLOBAL_AVERAGE_POOL ? DRK_OP_REDUCE_MEAN : n->op == DRK_OP_GLOBAL_MAX_POOL ? DRK_OP_REDUCE_MAX : n->op;
  /* result: keepdims: src's shape with the reduced dims 1, same P; else src's kept dims in
   * src order, and the permutation among them */
  drk_dim_t od[LR];
  int q[LR], ro = 0;
  if (keep) {
    for (int k = 0; k < r; k++) od[k] = s->src->shape.dims[k];
    for (int i = 0; i < nn; i++) od[nax[i]] = (drk_dim_t){1, NULL};
    memcpy(q, s->p, sizeof(int) * (size_t)r);
    ro = r;
  } else {
    int rank_of[LR];
    for (int k = 0; k < r; k++) {
      bool reduced = false;
      for (int i = 0; i < nn; i++) reduced |= nax[i] == k;
      rank_of[k] = reduced ? -1 : ro;
      if (!reduced) od[ro++] = s->src->shape.dims[k];
    }
    for (int a = 0, j = 0; a < r; a++)
      if (!red[a]) q[j++] = rank_of[s->p[a]];
  }
  if (y->shape.rank != ro) return false;
  drk_node_t *m;
  drk_shape_t ys = drk_graph_shape(L->g, ro, od);
  if (global) {
    drk_value_t *axes = i64_const(L, y->name, "axes", nn, nax);
    m = node1(L, op, 2, (drk_value_t *[]){s->src, axes}, fresh(L, y->name, "nhwc"), y->dtype, ys, n->loc)->def;
    drk_node_set_int(L->g, m, "keepdims", 1);
  } else if (attr_form) {
    m = clone_node(L, n, op, 1, &s->src, y->dtype, ys, "nhwc");
    drk_node_set_ints(L->g, m, "axes", (size_t)nn, nax);
  } else if (n->n_inputs > 1 && n->inputs[1]) {
    drk_value_t *axes = i64_const(L, y->name, "axes", nn, nax);
    m = clone_node(L, n, op, 2, (drk_value_t *[]){s->src, axes}, y->dtype, ys, "nhwc");
  } else {
    m = clone_node(L, n, op, 1, &s->src, y->dtype, ys, "nhwc"); /* all axes, again */
  }
  set_sunk(L, y, m->outputs[0], q);
  return true;
}

/* MaxPool (no Indices) / AveragePool of a value whose channels-last form is a src. */
static bool rule_pool(lctx_t *L, drk_node_t *n) {
  drk_value_t *x = n->inputs[0], *y = n->outputs[0];
  sunk_t *s = sunk_of(L, x);
  if (!s || n->n_outputs != 1 || !ranked_static(y)) return false;
  int r = x->shape.rank, tl[LR], tf[LR], q[LR];
  if (r < 3 || r > 5 || y->shape.rank != r) return false;
  perm_to_last(r, tl);
  perm_to_first(r, tf);
  for (int i = 0; i < r; i++) q[i] = s->p[tl[i]];
  if (!perm_identity(q, r)) return false;
  drk_op_t op = n->op == DRK_OP_MAX_POOL ? DRK_OP_MAX_POOL_NHWC : DRK_OP_AVERAGE_POOL_NHWC;
  drk_node_t *m = clone_node(L, n, op, 1, &s->src, y->dtype, shape_unperm(L->g, &y->shape, tf), "nhwc");
  set_sunk(L, y, m->outputs[0], tf);
  L->st.pools++;
  return true;
}

static bool rule_transpose(lctx_t *L, drk_node_t *n) {
  drk_value_t *x = n->inputs[0], *y = n->outputs[0];
  sunk_t *s = sunk_of(L, x);
  int r = x->shape.rank;
  if (!s || y->shape.rank != r) return false;
  int p2[LR], q[LR];
  size_t cnt = 0;
  const int64_t *pa = drk_node_attr_ints(n, "perm", &cnt);
  if (pa && (int)cnt != r) return false;
  for (int i = 0; i < r; i++) {
    p2[i] = pa ? (int)(pa[i] < 0 ? pa[i] + r : pa[i]) : r - 1 - i;
    if (p2[i] < 0 || p2[i] >= r) return false;
  }
  for (int i = 0; i < r; i++) q[i] = s->p[p2[i]];
  set_sunk(L, y, s->src, q);
  return true;
}

/* Whether t is a rank-4 NCHW -> NHWC or NHWC -> NCHW Transpose; its perm in p. */
static bool layout_perm(const drk_node_t *t, int *p) {
  size_t cnt = 0;
  const int64_t *pa = t->op == DRK_OP_TRANSPOSE && t->n_inputs == 1 && t->inputs[0] && t->n_outputs == 1
                          ? drk_node_attr_ints(t, "perm", &cnt)
                          : NULL;
  if (!pa || cnt != 4 || t->inputs[0]->shape.rank != 4 || t->outputs[0]->shape.rank != 4) return false;
  int tl[4], tf[4];
  perm_to_last(4, tl);
  perm_to_first(4, tf);
  for (int i = 0; i < 4; i++) p[i] = (int)pa[i];
  return perm_equal(p, tl, 4) || perm_equal(p, tf, 4);
}

/* A layout Transpose of the model itself (NHWC <-> NCHW at a TF-exported model's input or
 * output): tracked like the pass's own, so a conv behind it reads the NHWC value directly. */
static bool model_layout_transpose(lctx_t *L, drk_node_t *n) {
  int p[4];
  if (sunk_of(L, n->inputs[0]) || !layout_perm(n, p)) return false;
  set_sunk(L, n->outputs[0], n->inputs[0], p);
  return true;
}

/* Whether n starts a channels-last region: a conv the pass chooses by itself, or a
 * depthwise/small-group conv whose input is one of the model's own NHWC -> NCHW Transposes
 * (ConvNeXt's block conv reads the channels-last LayerNorm's output through one): once that
 * Transpose is tracked the conv takes the NHWC value directly, so channels-last costs nothing
 * there, and the residual stream after it stays channels-last too. L->sk is allocated and
 * empty (the probe entry is cleared again). */
static bool region_starts(lctx_t *L, const drk_node_t *n) {
  if (conv_chosen(L, n)) return true;
  drk_value_t *x = n->op == DRK_OP_CONV && n->n_inputs >= 2 ? n->inputs[0] : NULL;
  const drk_node_t *t = x && x->id < L->n0 && x->kind == DRK_VALUE_NODE ? x->def : NULL;
  int p[4], tf[4];
  perm_to_first(4, tf);
  if (!t || !conv_small_groups(n) || !layout_perm(t, p) || !perm_equal(p, tf, 4)) return false;
  set_sunk(L, x, t->inputs[0], p);
  bool chosen = conv_chosen(L, n);
  L->sk[x->id].src = NULL;
  return chosen;
}

/* The node that alone reads v (none when v has other readers or is a graph output). */
static drk_node_t *sole_user(lctx_t *L, const drk_value_t *v) {
  return v->id < L->n0 && L->uses[v->id] == 1 ? L->user[v->id] : NULL;
}

/* GroupNorm with one group as the exporters write it: Reshape(v, [N, 1, L]) ->
 * InstanceNormalization (one channel: scalar scale and bias) -> Reshape(back to v's shape),
 * L the product of v's dims but the batch (PoolFormer's token mixer and MLP norms). Each
 * sample is normalized as a whole, so the order of its elements does not matter: with
 * v = Transpose(s, P) and P keeping the batch dim first, the same three nodes on s give
 * Transpose(their result, P) bit for bit (the interpreter's sums run in f64; the kernels'
 * order of summation was never the model's anyway). n is the first Reshape; the other two
 * nodes are marked dead here. Their scale and bias must come before n in the node order. */
static bool rule_norm_whole_sample(lctx_t *L, drk_node_t *n) {
  drk_value_t *x = n->inputs[0], *y = n->outputs[0];
  sunk_t *s = sunk_of(L, x);
  if (!s || s->p[0] != 0 || !ranked_static(x) || !ranked_static(y) || y->shape.rank != 3 || n->n_inputs != 2 ||
      sunk_of(L, n->inputs[1]))
    return false;
  int64_t N = x->shape.dims[0].size;
  if (y->shape.dims[0].size != N || y->shape.dims[1].size != 1) return false;
  drk_node_t *m = sole_user(L, y);
  if (!m || m->op != DRK_OP_INSTANCE_NORMALIZATION || m->dead || m->inputs[0] != y || m->n_outputs != 1) return false;
  for (int i = 1; i < m->n_inputs; i++)
    if (!m->inputs[i] || m->inputs[i]->kind == DRK_VALUE_NODE) return false;
  drk_value_t *z = m->outputs[0];
  drk_node_t *r = sole_user(L, z);
  if (!r || r->op != DRK_OP_RESHAPE || r->dead || r->inputs[0] != z || r->n_inputs != 2 || r->inputs[1]->kind == DRK_VALUE_NODE ||
      !r->outputs[0] || !drk_shape_equal(&r->outputs[0]->shape, &x->shape))
    return false;
  drk_value_t *src = s->src, *v = r->outputs[0];
  int rs = src->shape.rank;
  int64_t sd[LR];
  for (int k = 0; k < rs; k++) sd[k] = src->shape.dims[k].size;
  drk_value_t *sh1 = i64_const(L, y->name, "nhwc_shape", 3, (int64_t[]){N, 1, y->shape.dims[2].size});
  drk_value_t *y2 = node1(L, DRK_OP_RESHAPE, 2, (drk_value_t *[]){src, sh1}, fresh(L, y->name, "nhwc"), y->dtype,
                          y->shape, n->loc);
  drk_value_t *in[3] = {y2, m->inputs[1], m->n_inputs > 2 ? m->inputs[2] : NULL};
  drk_node_t *m2 = clone_node(L, m, m->op, m->n_inputs, in, z->dtype, z->shape, "nhwc");
  drk_value_t *sh2 = i64_const(L, v->name, "nhwc_shape", rs, sd);
  drk_value_t *o = node1(L, DRK_OP_RESHAPE, 2, (drk_value_t *[]){m2->outputs[0], sh2}, fresh(L, v->name, "nhwc"),
                         v->dtype, drk_graph_shape_static(L->g, rs, sd), r->loc);
  m->dead = r->dead = true;
  set_sunk(L, v, o, s->p);
  return true;
}

/* n with its sunk inputs taken in the permuted order; false: n needs them materialized */
static bool sink_through(lctx_t *L, drk_node_t *n) {
  if (conv_chosen(L, n)) return rule_conv(L, n);
  if (n->op == DRK_OP_TRANSPOSE && n->n_inputs == 1 && n->inputs[0] && model_layout_transpose(L, n)) return true;
  bool any = false;
  for (int i = 0; i < n->n_inputs; i++) any |= sunk_of(L, n->inputs[i]) != NULL;
  if (!any || n->n_outputs < 1 || !n->outputs[0] || n->outputs[0]->shape.rank < 0 || n->outputs[0]->shape.rank > LR)
    return false;
  switch (n->op) {
    case DRK_OP_TRANSPOSE: return rule_transpose(L, n);
    case DRK_OP_RESHAPE: return rule_reshape(L, n) || rule_norm_whole_sample(L, n);
    case DRK_OP_FLATTEN: return rule_reshape(L, n);
    case DRK_OP_MATMUL: return rule_matmul(L, n);
    case DRK_OP_CONCAT: return rule_concat(L, n);
    case DRK_OP_REDUCE_SUM: case DRK_OP_REDUCE_MEAN: case DRK_OP_REDUCE_MAX: case DRK_OP_REDUCE_MIN:
    case DRK_OP_REDUCE_L2: case DRK_OP_REDUCE_SUM_SQUARE: case DRK_OP_REDUCE_PROD: case DRK_OP_REDUCE_LOG_SUM_EXP:
    case DRK_OP_GLOBAL_AVERAGE_POOL: case DRK_OP_GLOBAL_MAX_POOL:
      return rule_reduce(L, n);
    case DRK_OP_MAX_POOL: case DRK_OP_AVERAGE_POOL: return rule_pool(L, n);
    default: return (drk_op_info(n->op)->flags & DRK_OPF_EW) ? rule_ew(L, n) : false;
  }
}

/* Inputs known to equal their src (identity P) read src directly. */
static void substitute_identities(lctx_t *L, drk_node_t *n) {
  for (int i = 0; i < n->n_inputs; i++) {
    sunk_t *s = sunk_of(L, n->inputs[i]);
    if (s && !s->done && perm_identity(s->p, n->inputs[i]->shape.rank)) n->inputs[i] = s->src;
  }
}

const char *drk_layout_name(drk_layout_t l) {
  return l == DRK_LAYOUT_NCHW ? "nchw" : l == DRK_LAYOUT_NHWC ? "nhwc" : "auto";
}

bool drk_layout_parse(const char *s, drk_layout_t *out) {
  static const drk_layout_t all[] = {DRK_LAYOUT_AUTO, DRK_LAYOUT_NCHW, DRK_LAYOUT_NHWC};
  for (size_t i = 0; s && i < DRK_ARRAY_LEN(all); i++)
    if (strcmp(s, drk_layout_name(all[i])) == 0) {
      *out = all[i];
      return true;
    }
  return false;
}

bool drk_pass_layout_nhwc(drk_graph_t *g, const drk_layout_options_t *o, drk_layout_stats_t *out_stats) {
  if (out_stats) memset(out_stats, 0, sizeof *out_stats);
  if (o->layout == DRK_LAYOUT_NCHW || !g->n_nodes) return true;
  lctx_t L = {.g = g, .o = o, .n0 = g->next_value_id};
  L.sk = calloc(L.n0 + 1, sizeof *L.sk);
  DRK_ASSERT(L.sk);
  bool any = false;
  for (size_t i = 0; i < g->n_nodes && !any; i++) any = !g->nodes[i]->dead && region_starts(&L, g->nodes[i]);
  if (!any) { /* no region starts: every conv stays, say why */
    for (size_t i = 0; i < g->n_nodes; i++)
      if (!g->nodes[i]->dead && g->nodes[i]->op == DRK_OP_CONV) explain_conv(&L, g->nodes[i]);
    free(L.sk);
    return true;
  }
  L.nhwc_in = calloc(L.n0 + 1, sizeof *L.nhwc_in);
  L.padded_in = calloc(L.n0 + 1, sizeof *L.padded_in);
  size_t n_orig = g->n_nodes;
  drk_node_t **orig = malloc(sizeof *orig * n_orig);
  DRK_ASSERT(L.sk && L.nhwc_in && L.padded_in && orig);
  memcpy(orig, g->nodes, sizeof *orig * n_orig);
  L.uses = calloc(L.n0 + 1, sizeof *L.uses);
  L.user = calloc(L.n0 + 1, sizeof *L.user);
  DRK_ASSERT(L.uses && L.user);
  for (size_t i = 0; i < n_orig; i++)
    for (int k = 0; !orig[i]->dead && k < orig[i]->n_inputs; k++) {
      const drk_value_t *v = orig[i]->inputs[k];
      if (v && v->id < L.n0) L.uses[v->id]++, L.user[v->id] = orig[i];
    }
  for (size_t i = 0; i < g->n_outputs; i++)
    if (g->outputs[i]->id < L.n0) L.uses[g->outputs[i]->id]++;

  /* nodes are pushed again in order; new ones where the node they replace or feed was */
  g->n_nodes = 0;
  for (size_t i = 0; i < n_orig; i++) {
    drk_node_t *n = orig[i];
    if (n->dead) {
      DRK_VEC_PUSH(g->arena, g->nodes, g->n_nodes, g->cap_nodes, n);
      continue;
    }
    substitute_identities(&L, n);
    if (n->op == DRK_OP_CONV) explain_conv(&L, n);
    if (sink_through(&L, n)) {
      n->dead = true;
      continue;
    }
    for (int k = 0; k < n->n_inputs; k++) materialize(&L, n->inputs[k], n);
    DRK_VEC_PUSH(g->arena, g->nodes, g->n_nodes, g->cap_nodes, n);
  }
  for (size_t i = 0; i < g->n_outputs; i++) materialize(&L, g->outputs[i], NULL);
  if (out_stats) *out_stats = L.st;
  free(orig);
  free(L.sk);
  free(L.nhwc_in);
  free(L.padded_in);
  free(L.uses);
  free(L.user);
  free(L.rl);
  return true;
}
