/* Fusion grouping (see fuse.h and docs/fusion.md).
 *
 * Requires a canonicalized graph; reads it only. Guarantees (fuse.h): a partition of the
 * live nodes into groups that each run as one launch at the position of their last node.
 *
 * The partition is greedy and deterministic: at level 3 attention groups come first (the
 * patterns fuse_attention.c matches, from each P.V MatMul in node order); row groups grow
 * next (level >= 2), from each reduction/normalization anchor in node order; flat groups then grow from each remaining
 * elementwise node in node order, then from each remaining data movement node. A group
 * grows breadth-first over producers and consumers
 * of its members; a candidate joins when its class fits the group, every edge between it
 * and the group maps element to element (flat: one element count; rows: full rows x R
 * values, or per-row values that broadcast along the row), the group stays within
 * max_depth, and no consumer outside the group runs before the group's last node (which
 * also rules out cycles through outside nodes).
 *
 * Data movement in flat groups (C_MOVE: Transpose, Slice, Concat, Expand, Split with one
 * result used, constant Pad): the kernel iterates over the elements of the values it stores
 * and evaluates every value at the index its consumers' index maps give (lower_fused.c), so
 * a group with movement nodes may hold values of several element counts. It must then
 * store values of one count only (the frame, G->n), broadcast inside the group only the
 * results of movement nodes (through views), and evaluate at most 2 x max_depth (node,
 * index map) pairs (a value read under two maps is computed twice). */

#include <stdlib.h>
#include <string.h>

#include "lower/lower_internal.h"
#include "passes/plan_memory.h"

/* A fused kernel runs all its nodes at one time; the memory plan must know those times
 * (drk_plan_memory_timed) or it may give a kernel's output the bytes of an input the kernel
 * still reads. Until the planner has them, lowering fuses only when asked to. */
#ifdef DRK_PLAN_MEMORY_TIMED
#define LOWERING_DEFAULT_LEVEL DRK_FUSION_DEFAULT_LEVEL
#else
#define LOWERING_DEFAULT_LEVEL 0
#endif

typedef enum { C_DEAD, C_OTHER, C_ALIAS, C_EW, C_ROW, C_MM, C_MOVE } cls_t;

typedef struct fz {
  const drk_graph_t *g;
  drk_fusion_t *f;
  int level, max_depth;
  int n;
  cls_t *cls;
  const char **why_other; /* C_OTHER: why the node is not fusible */
  int64_t *rows, *R;      /* C_ROW: frame */
  uint32_t n_vid;
  int **users;            /* per value id: consumer positions (ascending) */
  int *n_users;
  bool *is_out;           /* per value id: graph output */
  int *pos_of_node;       /* per node id */
} fz_t;

/* a group being grown, or a group of the partition looked at again */
typedef struct grp {
  drk_fusion_kind_t kind;
  int64_t n, R; /* FLAT: n elements (of the values it stores); ROWS: n rows x R */
  int cnt, last, anchor;
  int n_move;   /* C_MOVE members */
  bool *in;     /* per position */
  int *mem;     /* members in join order */
} grp_t;

static int64_t numel(const drk_value_t *v) { return drk_shape_numel(&v->shape); }

static bool value_static(const drk_value_t *v) {
  return !v || (v->shape.rank >= 0 && drk_shape_is_static(&v->shape) && v->shape.rank <= LW_MAX_RANK &&
                numel(v) < ((int64_t)1 << 40));
}

static bool is_f8(drk_dtype_t t) { return t == DRK_DT_F8E4M3 || t == DRK_DT_F8E5M2; }
static bool is_float(drk_dtype_t t) { return t == DRK_DT_F32 || t == DRK_DT_F16 || t == DRK_DT_BF16 || t == DRK_DT_F64; }

/* The reduced axes of a Reduce* node as a bit mask; false when not known statically. */
static bool reduce_mask(const drk_node_t *n, uint32_t *mask) {
  int r = n->inputs[0]->shape.rank;
  int64_t ax[LW_MAX_RANK * 2];
  int na = 0;
  if (n->n_inputs > 1 && n->inputs[1]) {
    const drk_value_t *a = n->inputs[1];
    /* axes are integers (the interpreter refuses others); a fuzzed f64 "axis" of -1e270 would
     * make the conversion undefined */
    if (a->kind != DRK_VALUE_CONST || !a->data || numel(a) > LW_MAX_RANK * 2 || drk_dtype_is_float(a->dtype)) return false;
    for (int64_t i = 0; i < numel(a); i++) {
      double v = drk_value_const_f64(a, i);
      if (!(v >= -64 && v <= 64)) return false;
      ax[na++] = (int64_t)v;
    }
  } else {
    size_t cnt = 0;
    const int64_t *a = drk_node_attr_ints(n, "axes", &cnt);
    for (size_t i = 0; a && i < cnt && i < LW_MAX_RANK * 2; i++) ax[na++] = a[i];
  }
  *mask = 0;
  if (na == 0) {
    if (drk_node_attr_int(n, "noop_with_empty_axes", 0)) return false;
    *mask = r ? (1u << r) - 1 : 0;
    return true;
  }
  for (int i = 0; i < na; i++) {
    int a = drk_axis_norm(ax[i], r);
    if (a < 0 || a >= r) return false;
    *mask |= 1u << a;
  }
  return true;
}

/* Whether mask is a non-empty suffix {k..r-1}; *R = product of those dims. */
static bool suffix_mask(const drk_value_t *x, uint32_t mask, int64_t *R) {
  int r = x->shape.rank;
  if (!mask || r == 0) return false;
  int k = r;
  while (k > 0 && (mask & (1u << (k - 1)))) k--;
  if (mask != (((1u << r) - 1) & ~((1u << k) - 1))) return false;
  *R = 1;
  for (int i = k; i < r; i++) *R *= x->shape.dims[i].size;
  return true;
}

/* Row anchor frame, or a reason why the node is not one. */
static const char *row_anchor(const fz_t *z, const drk_node_t *n, int64_t *rows, int64_t *R) {
  const drk_value_t *x = n->inputs[0];
  if (!x || !is_float(x->dtype)) return "row fusion handles float inputs only";
  int r = x->shape.rank;
  uint32_t mask = 0;
  switch (n->op) {
  case DRK_OP_REDUCE_SUM: case DRK_OP_REDUCE_MEAN: case DRK_OP_REDUCE_MAX: case DRK_OP_REDUCE_MIN:
  case DRK_OP_REDUCE_SUM_SQUARE: case DRK_OP_REDUCE_L2: case DRK_OP_REDUCE_LOG_SUM_EXP:
    if (!reduce_mask(n, &mask)) return "reduction axes not constant (or no-op)";
    break;
  case DRK_OP_SOFTMAX: case DRK_OP_LOG_SOFTMAX: {
    int a = drk_axis_norm(drk_node_attr_int(n, "axis", -1), r);
    if (a != r - 1) return "softmax not over the last axis";
    mask = 1u << a;
    break;
  }
  case DRK_OP_LAYER_NORMALIZATION: {
    for (int i = 1; i < n->n_outputs; i++) {
      const drk_value_t *o = n->outputs[i];
      if (o && (z->n_users[o->id] || z->is_out[o->id])) return "LayerNormalization's mean/inv_std outputs are used";
    }
    int a = drk_axis_norm(drk_node_attr_int(n, "axis", -1), r);
    if (a < 0 || a >= r) return "axis out of range";
    for (int i = a; i < r; i++) mask |= 1u << i;
    break;
  }
  case DRK_OP_INSTANCE_NORMALIZATION:
    if (r < 3) return "InstanceNormalization of rank < 3";
    mask = ((1u << r) - 1) & ~3u;
    break;
  case DRK_OP_GROUP_NORMALIZATION: {
    if (r < 2) return "GroupNormalization of rank < 2";
    int64_t C = x->shape.dims[1].size, G = drk_node_attr_int(n, "num_groups", 1);
    if (G < 1 || C % G) return "num_groups does not divide the channels";
    *rows = x->shape.dims[0].size * G;
    *R = numel(x) / (*rows ? *rows : 1);
    if (*R < 2) return "rows of one element";
    return NULL;
  }
  default:
    return "reduction kind not fused";
  }
  if (!suffix_mask(x, mask, R)) return "reduces dims that are not the innermost";
  if (*R < 2) return "rows of one element";
  *rows = numel(x) / *R;
  return NULL;
}

static bool const_data(const drk_value_t *v) { return v && v->kind == DRK_VALUE_CONST && v->data; }

static bool used(const fz_t *z, const drk_value_t *v) { return v && (z->n_users[v->id] || z->is_out[v->id]); }

/* The result of node n a group works with: outputs[0], or the one used result of a Split. */
static const drk_value_t *result_of(const fz_t *z, const drk_node_t *n) {
  if (n->op == DRK_OP_SPLIT)
    for (int i = 0; i < n->n_outputs; i++)
      if (used(z, n->outputs[i])) return n->outputs[i];
  return n->outputs[0];
}

/* Whether input i of movement node n is data (read through its index map), not a parameter. */
static bool move_data_input(const drk_node_t *n, int i) { return n->op == DRK_OP_CONCAT || i == 0; }

/* Whether a data movement node can join a flat group (its index map is known statically);
 * else why not. */
static const char *move_fusible(const fz_t *z, const drk_node_t *n) {
  switch (n->op) {
  case DRK_OP_TRANSPOSE: case DRK_OP_EXPAND:
    return NULL;
  case DRK_OP_CONCAT:
    return n->n_inputs > 16 ? "Concat of more than 16 inputs" : NULL;
  case DRK_OP_SLICE:
    for (int i = 1; i < n->n_inputs; i++)
      if (n->inputs[i] && !const_data(n->inputs[i])) return "Slice parameters not constant";
    if (n->n_inputs > 4 && n->inputs[4])
      for (int64_t i = 0; i < numel(n->inputs[4]); i++)
        if (drk_value_const_f64(n->inputs[4], i) == 0) return "Slice step 0";
    return NULL;
  case DRK_OP_SPLIT: {
    int nu = 0;
    for (int i = 0; i < n->n_outputs; i++) {
      if (!n->outputs[i]) return "Split with an omitted result";
      nu += used(z, n->outputs[i]);
    }
    return nu == 1 ? NULL : "Split with more than one result used";
  }
  case DRK_OP_PAD: {
    const char *mode = drk_node_attr_string(n, "mode", "constant");
    if (strcmp(mode, "constant")) return drk_arena_printf(z->f->arena, "Pad mode '%s': only constant Pads fuse", mode);
    for (int i = 1; i < n->n_inputs; i++)
      if (n->inputs[i] && !const_data(n->inputs[i])) return "Pad parameters not constant";
    return NULL;
  }
  default:
    return "flat groups take Transpose, Slice, Concat, Expand, Split, constant Pad";
  }
}

static void classify(fz_t *z, int k) {
  const drk_node_t *n = z->g->nodes[k];
  z->why_other[k] = NULL;
  if (n->dead) {
    z->cls[k] = C_DEAD;
    return;
  }
  z->cls[k] = C_OTHER;
  for (int io = 0; io < 2; io++) {
    int cnt = io ? n->n_outputs : n->n_inputs;
    for (int i = 0; i < cnt; i++) {
      const drk_value_t *v = io ? n->outputs[i] : n->inputs[i];
      if (!value_static(v)) {
        z->why_other[k] = "shapes not static";
        return;
      }
      if (v && (is_f8(v->dtype) || !lw_dtype_ok(v->dtype))) {
        z->why_other[k] = "f8 or sub-byte dtype";
        return;
      }
    }
  }
  const char *why = NULL;
  if (!drk_lower_node_supported(n, &why)) {
    z->why_other[k] = "not lowered for GPU";
    return;
  }
  const drk_value_t *y = result_of(z, n);
  if (!y || numel(y) <= 0) {
    z->why_other[k] = "empty result";
    return;
  }
  unsigned fl = drk_op_info(n->op)->flags;
  if (drk_op_aliases_input(n->op)) {
    if (n->inputs[0] && numel(n->inputs[0]) == numel(y)) z->cls[k] = C_ALIAS;
    else z->why_other[k] = "view changes the element count";
    return;
  }
  if ((fl & DRK_OPF_EW) || n->op == DRK_OP_BATCH_NORMALIZATION) {
    if (n->op == DRK_OP_QUANTIZE_LINEAR || n->op == DRK_OP_DEQUANTIZE_LINEAR || n->op == DRK_OP_CAST_LIKE) {
      z->why_other[k] = "quantization ops are not fused";
      return;
    }
    if (n->n_outputs != 1 || n->n_inputs > 16) {
      z->why_other[k] = "op shape not fused";
      return;
    }
    for (int i = 0; i < n->n_inputs; i++)
      if (n->inputs[i] && numel(n->inputs[i]) > numel(y)) {
        z->why_other[k] = "an input is larger than the result";
        return;
      }
    z->cls[k] = z->level >= 1 ? C_EW : C_OTHER;
    if (z->level < 1) z->why_other[k] = "fusion disabled (level 0)";
    return;
  }
  if (fl & (DRK_OPF_RED | DRK_OPF_NORM)) {
    if (z->level < 2) {
      z->why_other[k] = z->level < 1 ? "fusion disabled (level 0)" : "reductions fuse from --fusion-aggressiveness=2";
      return;
    }
    const char *w = row_anchor(z, n, &z->rows[k], &z->R[k]);
    if (w) z->why_other[k] = w;
    else z->cls[k] = C_ROW;
    return;
  }
  if ((n->op == DRK_OP_MATMUL || n->op == DRK_OP_GEMM || n->op == DRK_OP_CONV || n->op == DRK_OP_CONV_NHWC) &&
      drk_dtype_is_float(y->dtype)) {
    if (z->level >= 2) z->cls[k] = C_MM;
    else z->why_other[k] = "matmul/conv epilogues fuse from --fusion-aggressiveness=2";
  } else if (fl & DRK_OPF_MM)
    z->why_other[k] = "op not fused";
  else if (fl & DRK_OPF_MOVE) {
    const char *w = move_fusible(z, n);
    if (w) z->why_other[k] = drk_arena_printf(z->f->arena, "data movement op: not fused (%s)", w);
    else if (z->level < 1) z->why_other[k] = "fusion disabled (level 0)";
    else z->cls[k] = C_MOVE;
  } else
    z->why_other[k] = "op not fused";
}

/* ---- group checks ---- */
typedef enum { V_NONE, V_FULL, V_ROW } vclass_t;

static vclass_t vclass(const grp_t *G, const drk_value_t *v) {
  int64_t m = numel(v);
  if (G->kind == DRK_FUSION_FLAT || G->kind == DRK_FUSION_MM) return m == G->n ? V_FULL : V_NONE;
  if (m == G->n * G->R) return V_FULL;
  if (m == G->n) return V_ROW;
  return V_NONE;
}

/* A per-row value v broadcast into out (a full value): the row index of out's element
 * must be v's element index. */
static bool row_bcast_ok(const grp_t *G, const drk_value_t *v, const drk_value_t *out) {
  int r = out->shape.rank, vr = v->shape.rank;
  if (r < 1 || vr > r || out->shape.dims[r - 1].size != G->R) return false;
  for (int i = 0; i < r; i++) {
    int j = i - (r - vr);
    int64_t vd = j < 0 ? 1 : v->shape.dims[j].size;
    if (i == r - 1 ? vd != 1 : vd != out->shape.dims[i].size) return false;
  }
  return true;
}

/* Whether v is made by a node of G or by the candidate at position `extra`. */
static bool in_or(const fz_t *z, const grp_t *G, const drk_value_t *v, int extra) {
  if (!v || v->kind != DRK_VALUE_NODE) return false;
  int p = z->pos_of_node[v->def->id];
  return G->in[p] || p == extra;
}

/* The value under v's chain of views in G (+ extra): v, or the input of the first view
 * outside the group (possibly a value made outside it). */
static const drk_value_t *view_base(const fz_t *z, const grp_t *G, const drk_value_t *v, int extra) {
  for (int guard = 0; guard < 256 && in_or(z, G, v, extra) && z->cls[z->pos_of_node[v->def->id]] == C_ALIAS; guard++)
    v = v->def->inputs[0];
  return v;
}

/* Edge v (made in the group) -> consumer node c (in the group or joining); extra: the
 * candidate (-1: none). */
static const char *edge_ok(const fz_t *z, const grp_t *G, const drk_value_t *v, const drk_node_t *c, int ci, int extra) {
  int k = z->pos_of_node[c->id];
  cls_t cc = z->cls[k];
  if (cc == C_ALIAS) return ci == 0 ? NULL : "a view's shape operand is computed in the group";
  if (cc == C_MOVE) return move_data_input(c, ci) ? NULL : "a data movement node's parameter is computed in the group";
  if (G->kind == DRK_FUSION_FLAT && (G->n_move || (extra >= 0 && z->cls[extra] == C_MOVE))) {
    /* a group with data movement: the consumer reads v at its own index (equal counts) or
     * broadcasts it (v is then evaluated per element: only loads may broadcast, i.e. views
     * of outside values and movement results) */
    int64_t mv = numel(v), mc = numel(c->outputs[0]);
    if (mv == mc) return NULL;
    if (c->op == DRK_OP_BATCH_NORMALIZATION && ci >= 1)
      return "element counts differ (BatchNormalization's per-channel operands are read from memory)";
    const drk_value_t *b = view_base(z, G, v, extra);
    if (!in_or(z, G, b, extra) || z->cls[z->pos_of_node[b->def->id]] == C_MOVE) return NULL;
    return drk_arena_printf(z->f->arena,
                            "element counts differ (%lld vs %lld): a value computed in the group broadcasts (only "
                            "data movement results and views of outside values do)",
                            (long long)mv, (long long)mc);
  }
  if (cc == C_ROW) {
    if (ci != 0) return "a normalization's scale/bias is computed in the group";
    return vclass(G, v) == V_FULL ? NULL : "the reduced value is not a full row";
  }
  vclass_t vc = vclass(G, v), oc = vclass(G, c->outputs[0]);
  if (vc == V_NONE || oc == V_NONE) return "element counts differ";
  if (vc == oc) return NULL;
  if (vc == V_ROW && oc == V_FULL)
    return row_bcast_ok(G, v, c->outputs[0]) ? NULL : "a per-row value does not broadcast along the rows";
  return "element counts differ";
}

/* position of the earliest launch that consumes v outside G (looking through alias views
 * outside G); INT32_MAX if none */
static int first_outside_use(const fz_t *z, const grp_t *G, const drk_value_t *v, int extra, int depth) {
  int best = INT32_MAX;
  for (int u = 0; u < z->n_users[v->id]; u++) {
    int e = z->users[v->id][u];
    if (G->in[e] || e == extra) continue;
    if (z->cls[e] == C_ALIAS && depth < 64) {
      int p = first_outside_use(z, G, z->g->nodes[e]->outputs[0], extra, depth + 1);
      if (p < best) best = p;
    } else if (e < best) {
      best = e;
    }
  }
  return best;
}

/* ---- flat groups with data movement ---- */
/* The value a leaving value y of G (+ extra) is stored as: its base under the group's views
 * when a node of the group computes that base; NULL when y is a view of an outside value
 * (its bytes hold it already). */
static const drk_value_t *stored_as(const fz_t *z, const grp_t *G, const drk_value_t *y, int extra) {
  const drk_value_t *b = view_base(z, G, y, extra);
  return in_or(z, G, b, extra) ? b : NULL;
}

static bool leaves(const fz_t *z, const grp_t *G, const drk_value_t *y, int extra) {
  if (z->is_out[y->id]) return true;
  for (int u = 0; u < z->n_users[y->id]; u++) {
    int e = z->users[y->id][u];
    if (!G->in[e] && e != extra) return true;
  }
  return false;
}

/* The frame of G + extra (extra < 0: none): the element count of every value it stores (the
 * kernel iterates over those elements); an error when two differ. *out_n keeps G->n when
 * nothing is stored. */
static const char *flat_frame(const fz_t *z, const grp_t *G, int extra, int64_t *out_n) {
  const drk_value_t *first = NULL;
  *out_n = G->n;
  for (int m = -1; m < G->cnt; m++) {
    int p = m < 0 ? extra : G->mem[m];
    if (p < 0) continue;
    const drk_value_t *y = result_of(z, z->g->nodes[p]);
    if (!y || !leaves(z, G, y, extra)) continue;
    const drk_value_t *s = stored_as(z, G, y, extra);
    if (!s) continue;
    if (!first) {
      first = y;
      *out_n = numel(s);
    } else if (numel(s) != *out_n) {
      return drk_arena_printf(z->f->arena,
                              "%%%s would leave the group with %lld elements, %%%s with %lld (a flat kernel stores "
                              "values of one element count)",
                              y->name, (long long)numel(s), first->name, (long long)*out_n);
    }
  }
  return NULL;
}

/* Evaluations of G + extra's nodes, counting a node once per index map it is read under (as
 * lower_fused.c evaluates them: maps compose along the edges that are not element to
 * element; a signature hashes the chain); stops counting past limit. */
typedef struct evc {
  const fz_t *z;
  const grp_t *G;
  int extra, limit, n;
  int *node;
  uint64_t *sig;
} evc_t;

static uint64_t mix64(uint64_t h, uint64_t x) {
  h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ull;
  return h ^ (h >> 29);
}

static void evc_visit(evc_t *e, const drk_value_t *v, uint64_t sig) {
  if (e->n > e->limit) return;
  const drk_value_t *b = view_base(e->z, e->G, v, e->extra);
  if (!in_or(e->z, e->G, b, e->extra)) return;
  int p = e->z->pos_of_node[b->def->id];
  for (int i = 0; i < e->n; i++)
    if (e->node[i] == p && e->sig[i] == sig) return;
  if (e->n == e->limit) {
    e->n++;
    return;
  }
  e->node[e->n] = p;
  e->sig[e->n++] = sig;
  const drk_node_t *n = b->def;
  bool mv = e->z->cls[p] == C_MOVE;
  for (int i = 0; i < n->n_inputs; i++) {
    const drk_value_t *u = n->inputs[i];
    if (!u || (mv && !move_data_input(n, i))) continue;
    bool same = !mv && numel(u) == numel(b);
    evc_visit(e, u, same ? sig : mix64(mix64(sig, (uint64_t)p), (uint64_t)i + 1));
  }
}

static int count_evals(const fz_t *z, const grp_t *G, int extra, int limit) {
  evc_t e = {z, G, extra, limit, 0, NULL, NULL};
  e.node = malloc(sizeof(int) * (size_t)(limit + 1));
  e.sig = malloc(sizeof(uint64_t) * (size_t)(limit + 1));
  for (int m = -1; m < G->cnt && e.n <= limit; m++) {
    int p = m < 0 ? extra : G->mem[m];
    if (p < 0) continue;
    const drk_value_t *y = result_of(z, z->g->nodes[p]);
    if (y && leaves(z, G, y, extra)) evc_visit(&e, y, 0);
  }
  free(e.node);
  free(e.sig);
  return e.n;
}

/* Whether elementwise node k, a candidate for matmul epilogue G, is better left to the row
 * group of a reduction it feeds: its result reaches a reduction (or normalization) directly
 * or through at most 3 more elementwise nodes (a Cast to f32, then the square), and every input it takes from G is a value that G stores anyway (a graph
 * output, or read by a node outside G other than k). Then the row group computes it from
 * those stored values, instead of the epilogue storing one more full-size value (LLaMA's
 * RMSNorm: Pow(h, 2) of the residual h, kept in f32 by the precision policy, was written as
 * 16 MB of f32 squares per norm and read back). */
static bool feeds_row(const fz_t *z, int k, int depth) {
  const drk_node_t *c = z->g->nodes[k];
  for (int o = 0; o < c->n_outputs; o++) {
    const drk_value_t *y = c->outputs[o];
    for (int u = 0; y && u < z->n_users[y->id]; u++) {
      int e = z->users[y->id][u];
      if (z->cls[e] == C_ROW || (z->cls[e] == C_EW && depth > 0 && feeds_row(z, e, depth - 1))) return true;
    }
  }
  return false;
}

static bool epilogue_recomputes(const fz_t *z, const grp_t *G, int k) {
  const drk_node_t *c = z->g->nodes[k];
  if (z->cls[k] != C_EW || !feeds_row(z, k, 3)) return false;
  bool from_group = false;
  for (int i = 0; i < c->n_inputs; i++) {
    const drk_value_t *v = c->inputs[i];
    if (!v || v->kind != DRK_VALUE_NODE || !G->in[z->pos_of_node[v->def->id]]) continue;
    from_group = true;
    bool stored = z->is_out[v->id];
    for (int u = 0; u < z->n_users[v->id] && !stored; u++) {
      int e = z->users[v->id][u];
      stored = e != k && !G->in[e];
    }
    if (!stored) return false;
  }
  return from_group;
}

/* NULL if node k can join G; else why not. */
static const char *can_join(const fz_t *z, const grp_t *G, int k) {
  const drk_node_t *c = z->g->nodes[k];
  cls_t ck = z->cls[k];
  if (ck == C_OTHER || ck == C_DEAD) return z->why_other[k] ? z->why_other[k] : "not fusible";
  if (ck == C_MM) return "a matmul/conv leads a group of its own (with its epilogue)";
  if (G->kind == DRK_FUSION_MM) {
    if (ck == C_ROW) return "reductions do not join a matmul epilogue";
    if (c->op == DRK_OP_BATCH_NORMALIZATION) return "BatchNormalization is not a matmul epilogue (folded into Conv instead)";
    bool consumes = false;
    int nin0 = ck == C_ALIAS ? 1 : c->n_inputs;
    for (int i = 0; i < nin0; i++)
      consumes |= c->inputs[i] && c->inputs[i]->kind == DRK_VALUE_NODE && G->in[z->pos_of_node[c->inputs[i]->def->id]];
    if (!consumes) return "not downstream of the matmul: an epilogue only takes its consumers";
    if (epilogue_recomputes(z, G, k))
      return "feeds a reduction and reads only values the epilogue stores anyway: the reduction's group "
             "recomputes it from them (storing it would add a write and a read)";
  }
  if (ck == C_ROW && G->kind != DRK_FUSION_ROWS) return "reductions do not join flat groups";
  if (ck == C_ROW && (z->rows[k] != G->n || z->R[k] != G->R))
    return drk_arena_printf(z->f->arena, "row frames differ (%lld x %lld vs %lld x %lld)", (long long)z->rows[k],
                            (long long)z->R[k], (long long)G->n, (long long)G->R);
  if (ck == C_MOVE && G->kind != DRK_FUSION_FLAT)
    return G->kind == DRK_FUSION_MM ? "data movement does not join a matmul epilogue" : "data movement does not join row groups";
  /* with data movement a flat group holds values of several counts (flat_frame checks what it stores) */
  bool moving = G->kind == DRK_FUSION_FLAT && (G->n_move || ck == C_MOVE);
  if (ck != C_ROW && !moving && vclass(G, c->outputs[0]) == V_NONE)
    return drk_arena_printf(z->f->arena, "element counts differ (%lld vs %lld)", (long long)numel(c->outputs[0]),
                            (long long)(G->kind == DRK_FUSION_ROWS ? G->n * G->R : G->n));
  /* edges into c from the group */
  int nin = ck == C_ALIAS ? 1 : c->n_inputs;
  for (int i = 0; i < nin; i++) {
    const drk_value_t *v = c->inputs[i];
    if (!v || v->kind != DRK_VALUE_NODE) continue;
    int p = z->pos_of_node[v->def->id];
    if (!G->in[p]) continue;
    const char *w = edge_ok(z, G, v, c, i, k);
    if (w) return w;
  }
  /* edges from c into the group */
  for (int o = 0; o < c->n_outputs; o++) {
    const drk_value_t *v = c->outputs[o];
    if (!v) continue;
    for (int u = 0; u < z->n_users[v->id]; u++) {
      int e = z->users[v->id][u];
      if (!G->in[e]) continue;
      const drk_node_t *en = z->g->nodes[e];
      int nin2 = z->cls[e] == C_ALIAS ? 1 : en->n_inputs;
      for (int i = 0; i < nin2; i++)
        if (en->inputs[i] == v) {
          if (v != result_of(z, c)) return "a secondary result feeds the group";
          const char *w = edge_ok(z, G, v, en, i, k);
          if (w) return w;
        }
      if (z->cls[e] == C_ALIAS && en->inputs[0] != v) return "a view's shape operand is computed in the group";
    }
  }
  if (G->cnt >= z->max_depth)
    return drk_arena_printf(z->f->arena, "max graph depth %d reached", z->max_depth);
  if (moving) {
    int64_t fn;
    const char *w = flat_frame(z, G, k, &fn);
    if (w) return w;
    int ne = count_evals(z, G, k, 2 * z->max_depth);
    if (ne > 2 * z->max_depth)
      return drk_arena_printf(z->f->arena,
                              "more than %d evaluations of the group's nodes (values read under several index maps "
                              "are recomputed; the limit is 2 x max graph depth)",
                              2 * z->max_depth);
  }
  /* no consumer outside the group may run before the group's launch */
  int last = k > G->last ? k : G->last;
  for (int m = -1; m < G->cnt; m++) {
    const drk_node_t *mn = z->g->nodes[m < 0 ? k : G->mem[m]];
    for (int o = 0; o < mn->n_outputs; o++) {
      const drk_value_t *v = mn->outputs[o];
      if (!v) continue;
      int p = first_outside_use(z, G, v, k, 0);
      if (p < last)
        return drk_arena_printf(z->f->arena, "%s (outside) consumes %%%s before the group's last node would run",
                                drk_op_name(z->g->nodes[p]->op), v->name);
    }
  }
  return NULL;
}

static void grow_once(fz_t *z, grp_t *G, int *assigned);

/* Adds k; a flat group with data movement takes the element count of what it now stores as
 * its frame. */
static void grp_add(const fz_t *z, grp_t *G, int k) {
  G->in[k] = true;
  G->mem[G->cnt++] = k;
  if (k > G->last) G->last = k;
  G->n_move += z->cls[k] == C_MOVE;
  int64_t fn;
  if (G->kind == DRK_FUSION_FLAT && G->n_move && !flat_frame(z, G, -1, &fn)) G->n = fn;
}

static void grp_reset(grp_t *G) {
  for (int i = 0; i < G->cnt; i++) G->in[G->mem[i]] = false;
  G->cnt = 0;
  G->last = -1;
  G->anchor = -1;
  G->n_move = 0;
}

/* Breadth-first over the members' neighbours, repeated until nothing joins: a candidate
 * turned down early (an outside consumer ran too early) may fit once more nodes joined. */
static void grow(fz_t *z, grp_t *G, int *assigned) {
  for (int before = -1; before != G->cnt;) {
    before = G->cnt;
    grow_once(z, G, assigned);
  }
}

static void grow_once(fz_t *z, grp_t *G, int *assigned) {
  for (int qi = 0; qi < G->cnt; qi++) {
    const drk_node_t *m = z->g->nodes[G->mem[qi]];
    int nin = z->cls[G->mem[qi]] == C_ALIAS ? 1 : m->n_inputs;
    for (int i = 0; i < nin; i++) {
      const drk_value_t *v = m->inputs[i];
      if (!v || v->kind != DRK_VALUE_NODE) continue;
      int p = z->pos_of_node[v->def->id];
      if (assigned[p] >= 0 || G->in[p]) continue;
      if (!can_join(z, G, p)) grp_add(z, G, p);
    }
    for (int o = 0; o < m->n_outputs; o++) {
      const drk_value_t *v = m->outputs[o];
      if (!v) continue;
      for (int u = 0; u < z->n_users[v->id]; u++) {
        int e = z->users[v->id][u];
        if (assigned[e] >= 0 || G->in[e]) continue;
        if (!can_join(z, G, e)) grp_add(z, G, e);
      }
    }
  }
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

static void commit(fz_t *z, grp_t *G, int *assigned, drk_fusion_group_t **gs, size_t *ng, size_t *cap) {
  int compute = 0;
  for (int i = 0; i < G->cnt; i++) compute += z->cls[G->mem[i]] != C_ALIAS;
  if (compute < 2) return; /* nothing gained: the nodes stay single */
  drk_fusion_group_t gr = {G->kind, G->anchor, G->cnt, NULL, G->last, G->n, G->kind == DRK_FUSION_ROWS ? G->R : 0, NULL, -1};
  gr.nodes = drk_arena_memdup(z->f->arena, G->mem, sizeof(int) * (size_t)G->cnt);
  qsort(gr.nodes, (size_t)gr.n_nodes, sizeof(int), cmp_int);
  if (G->kind == DRK_FUSION_ROWS)
    for (int i = 0; i < gr.n_nodes; i++)
      if (z->cls[gr.nodes[i]] == C_ROW) {
        gr.anchor = gr.nodes[i];
        break;
      }
  for (int i = 0; i < G->cnt; i++) assigned[G->mem[i]] = (int)*ng;
  DRK_VEC_PUSH(z->f->arena, *gs, *ng, *cap, gr);
}

static bool const_matrix(const drk_value_t *v) { return v && v->kind == DRK_VALUE_CONST && v->shape.rank == 2; }

/* MM group gr (index gi) with a MatMul anchor X.Wa: pairs it with an unassigned MatMul X.Wb
 * (the same X, Wb a constant of Wa's shape and dtype) whose result the group's nodes alone
 * read, so that one kernel can compute both (SwiGLU: silu(X.Wg) * (X.Wu)). */
static void pair_sibling(fz_t *z, drk_fusion_group_t *gr, int gi, int *assigned) {
  const drk_graph_t *g = z->g;
  const drk_node_t *a = g->nodes[gr->anchor];
  /* a padded B (pad-matmul-n's result_n) is read with its own row stride: not paired */
  if (a->op != DRK_OP_MATMUL || !const_matrix(a->inputs[1]) || drk_node_attr_int(a, "result_n", 0)) return;
  for (int i = 0; i < gr->n_nodes; i++) {
    const drk_node_t *e = g->nodes[gr->nodes[i]];
    for (int j = 0; e != a && j < e->n_inputs; j++) {
      const drk_value_t *u = e->inputs[j];
      if (!u || u->kind != DRK_VALUE_NODE || !u->def || u->def->dead || u->def->op != DRK_OP_MATMUL) continue;
      const drk_node_t *p = u->def;
      int pp = z->pos_of_node[p->id];
      const drk_value_t *wb = p->inputs[1], *wa = a->inputs[1];
      if (assigned[pp] >= 0 || p->inputs[0] != a->inputs[0] || !const_matrix(wb) || wb->dtype != wa->dtype ||
          drk_node_attr_int(p, "result_n", 0) ||
          !drk_shape_equal(&wb->shape, &wa->shape) || !drk_shape_equal(&u->shape, &a->outputs[0]->shape) || z->is_out[u->id])
        continue;
      bool inside = true;
      for (int k = 0; k < z->n_users[u->id]; k++) inside &= assigned[z->users[u->id][k]] == gi;
      if (!inside) continue;
      int *nodes = drk_arena_alloc(z->f->arena, sizeof(int) * (size_t)(gr->n_nodes + 1));
      memcpy(nodes, gr->nodes, sizeof(int) * (size_t)gr->n_nodes);
      nodes[gr->n_nodes++] = pp;
      qsort(nodes, (size_t)gr->n_nodes, sizeof(int), cmp_int);
      gr->nodes = nodes;
      gr->pair = pp;
      assigned[pp] = gi;
      return;
    }
  }
}

static int cmp_group(const void *a, const void *b) {
  return ((const drk_fusion_group_t *)a)->last - ((const drk_fusion_group_t *)b)->last;
}

/* Attention groups (level 3), from each P.V MatMul in node order; below level 3 a match
 * only explains the MatMuls' boundaries. */
static void attention_groups(fz_t *z, int *assigned, drk_fusion_group_t **gs, size_t *ng, size_t *cap) {
  if (z->level < 1) return;
  drk_fusion_uses_t u = {z->g, z->users, z->n_users, z->is_out, z->pos_of_node};
  int *mem = drk_arena_alloc(z->f->arena, sizeof(int) * (size_t)(z->n + 1));
  for (int k = 0; k < z->n; k++) {
    if (z->cls[k] == C_DEAD || z->g->nodes[k]->op != DRK_OP_MATMUL || assigned[k] >= 0) continue;
    drk_fusion_attention_t at;
    int nm = 0;
    const char *why = drk_fusion_match_attention(&u, z->f->arena, k, &at, mem, &nm);
    if (why && !*why) continue; /* no attention here */
    if (!why && z->level < 3) {
      z->why_other[k] = z->why_other[at.scores] =
          "attention (Q.K^T, scale, masks, Softmax, .V) fuses from --fusion-aggressiveness=3";
      continue;
    }
    for (int i = 0; !why && i < nm; i++) {
      int p = mem[i];
      if (assigned[p] >= 0 || z->cls[p] == C_DEAD) why = "a node of the pattern is in another group";
      else if (z->why_other[p] && (!strcmp(z->why_other[p], "shapes not static") ||
                                   !strcmp(z->why_other[p], "f8 or sub-byte dtype")))
        why = z->why_other[p];
    }
    if (!why && nm > z->max_depth) why = drk_arena_printf(z->f->arena, "max graph depth %d reached", z->max_depth);
    if (why) {
      z->why_other[k] = drk_arena_printf(z->f->arena, "attention not fused: %s", why);
      continue;
    }
    drk_fusion_group_t gr = {DRK_FUSION_ATTENTION, at.softmax, nm, NULL, -1, 0, at.Sk, NULL, -1};
    gr.nodes = drk_arena_memdup(z->f->arena, mem, sizeof(int) * (size_t)nm);
    qsort(gr.nodes, (size_t)nm, sizeof(int), cmp_int);
    gr.last = gr.nodes[nm - 1];
    gr.n = at.Sq;
    for (int i = 0; i < at.nb; i++) gr.n *= at.batch[i];
    gr.attn = drk_arena_memdup(z->f->arena, &at, sizeof at);
    for (int i = 0; i < nm; i++) assigned[mem[i]] = (int)*ng;
    DRK_VEC_PUSH(z->f->arena, *gs, *ng, *cap, gr);
  }
}

void drk_fusion_compute(const drk_graph_t *g, int level, int max_depth, drk_fusion_t *out) {
  drk_fusion_t *f = out;
  memset(f, 0, sizeof *f);
  f->arena = drk_arena_create();
  f->level = level < 0 ? 0 : level > 3 ? 3 : level;
  f->max_depth = max_depth < 1 ? 1 : max_depth;
  f->n_nodes = g->n_nodes;
  drk_arena_t *A = f->arena;
  fz_t z = {.g = g, .f = f, .level = f->level, .max_depth = f->max_depth, .n = (int)g->n_nodes};
  int n = z.n;
  z.cls = drk_arena_alloc(A, sizeof *z.cls * (size_t)(n + 1));
  z.why_other = drk_arena_alloc(A, sizeof *z.why_other * (size_t)(n + 1));
  z.rows = drk_arena_alloc(A, sizeof *z.rows * (size_t)(n + 1));
  z.R = drk_arena_alloc(A, sizeof *z.R * (size_t)(n + 1));
  z.n_vid = g->next_value_id + 1;
  z.users = drk_arena_alloc(A, sizeof *z.users * z.n_vid);
  z.n_users = drk_arena_alloc(A, sizeof *z.n_users * z.n_vid);
  z.is_out = drk_arena_alloc(A, sizeof *z.is_out * z.n_vid);
  z.pos_of_node = drk_arena_alloc(A, sizeof *z.pos_of_node * (g->next_node_id + 1));
  int *cap_users = drk_arena_alloc(A, sizeof *cap_users * z.n_vid);
  for (int k = 0; k < n; k++) {
    const drk_node_t *nd = g->nodes[k];
    z.pos_of_node[nd->id] = k;
    if (nd->dead) continue;
    for (int i = 0; i < nd->n_inputs; i++) {
      const drk_value_t *v = nd->inputs[i];
      if (!v) continue;
      bool dup = z.n_users[v->id] && z.users[v->id][z.n_users[v->id] - 1] == k;
      if (dup) continue;
      size_t nu = (size_t)z.n_users[v->id], cu = (size_t)cap_users[v->id];
      DRK_VEC_PUSH(A, z.users[v->id], nu, cu, k);
      z.n_users[v->id] = (int)nu;
      cap_users[v->id] = (int)cu;
    }
  }
  for (size_t i = 0; i < g->n_outputs; i++) z.is_out[g->outputs[i]->id] = true;
  for (int k = 0; k < n; k++) classify(&z, k);

  int *assigned = drk_arena_alloc(A, sizeof(int) * (size_t)(n + 1));
  for (int k = 0; k < n; k++) assigned[k] = -1;
  grp_t G = {0};
  G.in = drk_arena_alloc(A, sizeof(bool) * (size_t)(n + 1));
  G.mem = drk_arena_alloc(A, sizeof(int) * (size_t)(n + 1));
  G.last = G.anchor = -1;
  drk_fusion_group_t *gs = NULL;
  size_t ng = 0, cap = 0;
  attention_groups(&z, assigned, &gs, &ng, &cap);
  /* matmul/conv epilogues, from each matmul/conv in node order */
  for (int k = 0; k < n; k++) {
    if (assigned[k] >= 0 || z.cls[k] != C_MM) continue;
    grp_reset(&G);
    G.kind = DRK_FUSION_MM;
    G.n = numel(g->nodes[k]->outputs[0]);
    G.R = 0;
    grp_add(&z, &G, k);
    G.anchor = k;
    grow(&z, &G, assigned);
    commit(&z, &G, assigned, &gs, &ng, &cap);
    if (assigned[k] >= 0) pair_sibling(&z, &gs[assigned[k]], assigned[k], assigned);
  }
  /* row groups from each anchor, then flat groups from each elementwise node, then from
   * each data movement node */
  for (int pass = 0; pass < 3; pass++)
    for (int k = 0; k < n; k++) {
      if (assigned[k] >= 0 || z.cls[k] != (pass == 0 ? C_ROW : pass == 1 ? C_EW : C_MOVE)) continue;
      grp_reset(&G);
      G.kind = pass == 0 ? DRK_FUSION_ROWS : DRK_FUSION_FLAT;
      G.n = pass == 0 ? z.rows[k] : numel(result_of(&z, g->nodes[k]));
      G.R = pass == 0 ? z.R[k] : 0;
      grp_add(&z, &G, k);
      grow(&z, &G, assigned);
      commit(&z, &G, assigned, &gs, &ng, &cap);
    }
  for (int k = 0; k < n; k++) {
    if (assigned[k] >= 0 || z.cls[k] == C_DEAD) continue;
    drk_fusion_group_t gr = {DRK_FUSION_SINGLE, -1, 1, NULL, k, 0, 0, NULL, -1};
    gr.nodes = drk_arena_memdup(A, &k, sizeof(int));
    assigned[k] = (int)ng;
    DRK_VEC_PUSH(A, gs, ng, cap, gr);
  }
  if (ng) qsort(gs, ng, sizeof *gs, cmp_group);
  f->groups = gs;
  f->n_groups = (int)ng;
  f->group = drk_arena_alloc(A, sizeof(int) * (size_t)(n + 1));
  for (int k = 0; k < n; k++) f->group[k] = -1;
  for (int i = 0; i < f->n_groups; i++)
    for (int j = 0; j < gs[i].n_nodes; j++) f->group[gs[i].nodes[j]] = i;

  /* boundaries and their reasons */
  size_t nb = 0, cb = 0;
  for (int k = 0; k < n; k++) {
    const drk_node_t *c = g->nodes[k];
    if (c->dead) continue;
    for (int i = 0; i < c->n_inputs; i++) {
      const drk_value_t *v = c->inputs[i];
      if (!v || v->kind != DRK_VALUE_NODE || v->def->dead) continue;
      int p = z.pos_of_node[v->def->id];
      if (f->group[p] == f->group[k]) continue;
      bool dup = false;
      for (int j = 0; j < i; j++) dup |= c->inputs[j] == v;
      if (dup) continue;
      const char *why = NULL;
      if (f->level == 0) why = "fusion disabled (level 0)";
      else if (gs[f->group[p]].kind == DRK_FUSION_ATTENTION) why = "result of the attention kernel";
      else if (gs[f->group[k]].kind == DRK_FUSION_ATTENTION)
        why = drk_fusion_attention_input_why(gs[f->group[k]].attn, p,
                                             c->op == DRK_OP_MATMUL || z.cls[k] == C_OTHER || z.cls[k] == C_ALIAS
                                                 ? "Q, K, V or a mask of the attention kernel (read in place through its views)"
                                                 : "a mask or scale of the attention kernel (loaded per key block)");
      else if (c->op == DRK_OP_MATMUL && z.why_other[k] && !strncmp(z.why_other[k], "attention", 9))
        why = drk_arena_printf(A, "MatMul: %s", z.why_other[k]); /* P.V: why its attention did not fuse */
      else if (z.cls[p] == C_OTHER || z.cls[p] == C_DEAD) why = drk_arena_printf(A, "%s: %s", drk_op_name(v->def->op), z.why_other[p] ? z.why_other[p] : "not fusible");
      else if (z.cls[k] == C_OTHER) why = drk_arena_printf(A, "%s: %s", drk_op_name(c->op), z.why_other[k] ? z.why_other[k] : "not fusible");
      else if (z.cls[k] == C_ALIAS && i != 0) why = "shape operand of a view";
      else {
        /* look again at both groups as they ended */
        for (int side = 0; side < 2 && !why; side++) {
          int gi = f->group[side == 0 ? p : k], other = side == 0 ? k : p;
          const drk_fusion_group_t *gr = &gs[gi];
          grp_reset(&G);
          if (gr->kind == DRK_FUSION_SINGLE) {
            int s = gr->nodes[0];
            if (z.cls[s] == C_ALIAS) continue;
            G.kind = z.cls[s] == C_ROW ? DRK_FUSION_ROWS : z.cls[s] == C_MM ? DRK_FUSION_MM : DRK_FUSION_FLAT;
            G.anchor = z.cls[s] == C_MM ? s : -1;
            G.n = z.cls[s] == C_ROW ? z.rows[s] : numel(result_of(&z, g->nodes[s]));
            G.R = z.cls[s] == C_ROW ? z.R[s] : 0;
          } else {
            G.kind = gr->kind;
            G.n = gr->n;
            G.R = gr->R;
          }
          for (int j = 0; j < gr->n_nodes; j++) grp_add(&z, &G, gr->nodes[j]);
          why = can_join(&z, &G, other);
        }
        if (!why && gs[f->group[p]].kind == DRK_FUSION_SINGLE && gs[f->group[k]].kind == DRK_FUSION_SINGLE)
          why = "a fused kernel needs two computing ops (views are free)";
        if (!why) why = "both ends were already taken by other groups when these formed";
      }
      drk_fusion_boundary_t b = {p, k, v, why};
      DRK_VEC_PUSH(A, f->boundaries, nb, cb, b);
    }
  }
  grp_reset(&G);
  f->n_boundaries = nb;
}

void drk_fusion_destroy(drk_fusion_t *f) {
  if (!f) return;
  if (f->arena) drk_arena_destroy(f->arena);
  memset(f, 0, sizeof *f);
}

void drk_fusion_node_times(const drk_fusion_t *f, int64_t *out_times) {
  for (size_t k = 0; k < f->n_nodes; k++) out_times[k] = f->group[k] < 0 ? -1 : f->groups[f->group[k]].last;
}

static const char *node_label(const drk_node_t *n) { return n->outputs[0] ? n->outputs[0]->name : "?"; }

void drk_fusion_print(const drk_graph_t *g, const drk_fusion_t *f, FILE *out) {
  int fused = 0, fused_nodes = 0, live = 0;
  for (int i = 0; i < f->n_groups; i++) {
    live += f->groups[i].n_nodes;
    if (f->groups[i].kind != DRK_FUSION_SINGLE) {
      fused++;
      fused_nodes += f->groups[i].n_nodes;
    }
  }
  fprintf(out, "# fusion: level %d, max depth %d: %d nodes in %d groups (%d fused groups hold %d nodes)\n", f->level,
          f->max_depth, live, f->n_groups, fused, fused_nodes);
  for (int i = 0; i < f->n_groups; i++) {
    const drk_fusion_group_t *gr = &f->groups[i];
    if (gr->kind == DRK_FUSION_SINGLE) {
      const drk_node_t *nd = g->nodes[gr->nodes[0]];
      fprintf(out, "# group %d single: %s %%%s\n", i, drk_op_name(nd->op), node_label(nd));
      continue;
    }
    if (gr->kind == DRK_FUSION_FLAT) fprintf(out, "# group %d flat [%lld]:", i, (long long)gr->n);
    else if (gr->kind == DRK_FUSION_MM)
      fprintf(out, "# group %d matmul epilogue [%lld] anchor %%%s%s%s:", i, (long long)gr->n, node_label(g->nodes[gr->anchor]),
              gr->pair >= 0 ? ", paired with %" : "", gr->pair >= 0 ? node_label(g->nodes[gr->pair]) : "");
    else if (gr->kind == DRK_FUSION_ATTENTION)
      fprintf(out, "# group %d attention [%lld x %lld, d %lld%s] anchor %%%s:", i, (long long)gr->n,
              (long long)gr->R, (long long)gr->attn->D, gr->attn->causal_step >= 0 ? ", causal" : "",
              node_label(g->nodes[gr->anchor]));
    else
      fprintf(out, "# group %d rows [%lld x %lld] anchor %%%s:", i, (long long)gr->n, (long long)gr->R,
              node_label(g->nodes[gr->anchor]));
    for (int j = 0; j < gr->n_nodes; j++) {
      const drk_node_t *nd = g->nodes[gr->nodes[j]];
      fprintf(out, " %s(%%%s)", drk_op_name(nd->op), node_label(nd));
    }
    fputc('\n', out);
  }
  for (size_t i = 0; i < f->n_boundaries; i++) {
    const drk_fusion_boundary_t *b = &f->boundaries[i];
    fprintf(out, "# boundary %%%s: group %d -> group %d (%s): %s\n", b->value->name, f->group[b->producer],
            f->group[b->consumer], drk_op_name(g->nodes[b->consumer]->op), b->reason);
  }
}

void drk_fusion_for_lowering(const drk_graph_t *g, const drk_lower_options_t *o, drk_fusion_t *out) {
  bool set = o && o->fusion_set;
  drk_fusion_compute(g, set ? o->fusion_level : LOWERING_DEFAULT_LEVEL,
                     set && o->max_group_depth >= 1 ? o->max_group_depth : DRK_FUSION_DEFAULT_DEPTH, out);
}
