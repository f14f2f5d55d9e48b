/* Constant folding (drk_pass_fold_constants).
 *
 * Requires: shapes inferred (drk_pass_infer_shapes) so that result shapes and element counts
 * are known before anything is evaluated; nodes in topological order.
 * Guarantees: every live node whose inputs are all constants and whose results are static
 * and small (<= max_elems elements each), or that only selects elements of a constant it
 * alone reads into a result no larger (Slice, Reshape, Transpose and kin), or that is a
 * Transpose of a constant read only as MatMul/Gemm weights (B), is evaluated
 * with the reference interpreter and its results replaced, in every use and in g->outputs,
 * by new constants that keep the replaced values' names; Shape/Size of statically shaped
 * values, and Gather/Slice picking static dims out of a Shape, become constants too; the
 * shape input of Reshape, Expand, Tile and ConstantOfShape becomes a constant when the
 * inferred result shape allows it (Reshape: 0 copies an input dim, one -1 stands for the
 * remaining extent), which leaves exporter shape chains (Shape -> Gather -> Unsqueeze ->
 * Concat) unused. Folded nodes are marked dead; drk_pass_eliminate_dead() removes them and
 * the unused chains. Nothing is folded that the interpreter cannot evaluate: those nodes
 * stay, silently (their error, if any, is the runtime's to report with real inputs). */
#include "passes/passes.h"

#include <stdlib.h>
#include <string.h>

#include "ir/interp.h"
#include "ir/tensor.h"

#define MAXV 64 /* longest shape vector rewritten */

typedef struct {
  drk_graph_t *g;
  drk_diag_t *d;
  int64_t max_elems;
  size_t n_folded;
} fctx_t;

static drk_value_t *in(const drk_node_t *n, int i) { return i < n->n_inputs ? n->inputs[i] : NULL; }
static bool is_const(const drk_value_t *v) { return v && v->kind == DRK_VALUE_CONST; }
static bool dim_static(drk_dim_t x) { return !x.sym && x.size >= 0; }
static bool dim_same(drk_dim_t a, drk_dim_t b) {
  if (dim_static(a) && dim_static(b)) return a.size == b.size;
  return a.sym && b.sym && strcmp(a.sym, b.sym) == 0;
}

/* Element count of a static shape; -1 if not static or too large to count. */
static int64_t numel_checked(const drk_shape_t *s) {
  if (!drk_shape_is_static(s)) return -1;
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++)
    if (__builtin_mul_overflow(n, s->dims[i].size, &n)) return -1;
  return n;
}

static void replace_uses(drk_graph_t *g, drk_value_t *old, drk_value_t *nv) {
  for (size_t i = 0; i < g->n_nodes; i++) {
    drk_node_t *n = g->nodes[i];
    if (n->dead) continue;
    for (int j = 0; j < n->n_inputs; j++)
      if (n->inputs[j] == old) n->inputs[j] = nv;
  }
  for (size_t i = 0; i < g->n_outputs; i++)
    if (g->outputs[i] == old) g->outputs[i] = nv;
}

/* Replaces value v (a node result) by a constant with the same name. */
static void replace_by_const(fctx_t *c, drk_value_t *v, drk_dtype_t dt, int rank, const int64_t *dims,
                             const void *data, size_t nbytes) {
  drk_shape_t s = drk_graph_shape_static(c->g, rank, dims);
  drk_value_t *k = drk_graph_add_const_copy(c->g, v->name, dt, s, data, nbytes);
  k->loc = v->loc;
  replace_uses(c->g, v, k);
}

static void fold_i64(fctx_t *c, drk_node_t *n, int rank, const int64_t *vals, int64_t count) {
  int64_t dims[1] = {count};
  replace_by_const(c, n->outputs[0], DRK_DT_I64, rank, dims, vals, sizeof(int64_t) * (size_t)count);
  n->dead = true;
  c->n_folded++;
}

/* Shape's dims picked by [start, end), as drk_dim_t (may be symbolic). */
static bool shape_dims(const drk_node_t *sh, drk_dim_t *out, int *out_n) {
  const drk_value_t *x = in(sh, 0);
  if (!x || x->shape.rank < 0) return false;
  int64_t r = x->shape.rank;
  int64_t st = drk_node_attr_int(sh, "start", 0), en = drk_node_attr_int(sh, "end", r);
  if (st < 0) st += r;
  if (en < 0) en += r;
  st = st < 0 ? 0 : st > r ? r : st;
  en = en < 0 ? 0 : en > r ? r : en;
  int n = 0;
  for (int64_t i = st; i < en; i++) {
    if (n >= MAXV) return false;
    out[n++] = x->shape.dims[i];
  }
  *out_n = n;
  return true;
}

static bool read_ints(const drk_value_t *v, int64_t *out, int64_t *out_n, int max) {
  drk_tensor_t t;
  if (!is_const(v) || !drk_tensor_from_const(&t, v)) return false;
  int64_t n = drk_tensor_numel(&t);
  if (n > max) return false;
  for (int64_t i = 0; i < n; i++) out[i] = drk_tensor_get_i64(&t, i);
  *out_n = n;
  return true;
}

/* Shape, Size, and Gather/Slice of a Shape result that only touch static dims. */
static bool fold_shape_like(fctx_t *c, drk_node_t *n) {
  drk_dim_t dims[MAXV];
  int nd;
  int64_t vals[MAXV];
  switch (n->op) {
    case DRK_OP_SHAPE:
      if (!shape_dims(n, dims, &nd)) return false;
      for (int i = 0; i < nd; i++) {
        if (!dim_static(dims[i])) return false;
        vals[i] = dims[i].size;
      }
      fold_i64(c, n, 1, vals, nd);
      return true;
    case DRK_OP_SIZE: {
      int64_t ne = numel_checked(&in(n, 0)->shape);
      if (ne < 0) return false;
      fold_i64(c, n, 0, &ne, 1);
      return true;
    }
    case DRK_OP_GATHER: case DRK_OP_SLICE: {
      drk_node_t *sh = drk_node_input_def(n, 0);
      if (!sh || sh->dead || sh->op != DRK_OP_SHAPE || !shape_dims(sh, dims, &nd)) return false;
      int64_t pick[MAXV], np = 0;
      if (n->op == DRK_OP_GATHER) {
        int64_t idx[MAXV], ni;
        const drk_value_t *iv = in(n, 1);
        if (!read_ints(iv, idx, &ni, MAXV) || iv->shape.rank > 1) return false;
        for (int64_t i = 0; i < ni; i++) {
          int64_t j = idx[i] < 0 ? idx[i] + nd : idx[i];
          if (j < 0 || j >= nd) return false; /* inference reports it */
          pick[np++] = j;
        }
        for (int64_t i = 0; i < np; i++) {
          if (!dim_static(dims[pick[i]])) return false;
          vals[i] = dims[pick[i]].size;
        }
        fold_i64(c, n, iv->shape.rank, vals, np);
        return true;
      }
      int64_t st[2] = {0}, en[2] = {0}, ax[2] = {0}, sp[2] = {1}, k1, k2, k3 = 1, k4 = 1;
      if (!read_ints(in(n, 1), st, &k1, 1) || !read_ints(in(n, 2), en, &k2, 1) || k1 != 1 || k2 != 1) return false;
      if (in(n, 3) && (!read_ints(in(n, 3), ax, &k3, 1) || k3 != 1 || (ax[0] != 0 && ax[0] != -1))) return false;
      if (in(n, 4) && (!read_ints(in(n, 4), sp, &k4, 1) || k4 != 1 || sp[0] == 0 || sp[0] == INT64_MIN)) return false;
      int64_t s = st[0], e = en[0], step = sp[0], m = nd;
      if (s < 0) s += m;
      if (e < 0) e += m;
      if (step > 0) {
        s = s < 0 ? 0 : s > m ? m : s;
        e = e < 0 ? 0 : e > m ? m : e;
        for (int64_t i = s; i < e; i += step) pick[np++] = i;
      } else {
        s = s < -1 ? -1 : s > m - 1 ? m - 1 : s;
        e = e < -1 ? -1 : e > m - 1 ? m - 1 : e;
        for (int64_t i = s; i > e; i += step) pick[np++] = i;
      }
      for (int64_t i = 0; i < np; i++) {
        if (!dim_static(dims[pick[i]])) return false;
        vals[i] = dims[pick[i]].size;
      }
      fold_i64(c, n, 1, vals, np);
      return true;
    }
    default:
      return false;
  }
}

static void set_shape_input(fctx_t *c, drk_node_t *n, int idx, const int64_t *vals, int64_t count) {
  const char *nm = drk_graph_unique_namef(c->g, "%s_shape", n->outputs[0]->name);
  int64_t dims[1] = {count};
  drk_value_t *k = drk_graph_add_const_copy(c->g, nm, DRK_DT_I64, drk_graph_shape_static(c->g, 1, dims), vals,
                                            sizeof(int64_t) * (size_t)count);
  k->loc = n->loc;
  n->inputs[idx] = k;
  c->n_folded++;
}

/* Makes the shape-like input of Reshape/Expand/Tile/ConstantOfShape constant where the
 * inferred result shape determines it. */
static void rewrite_shape_input(fctx_t *c, drk_node_t *n) {
  const drk_shape_t *o = &n->outputs[0]->shape;
  int64_t vals[MAXV];
  if (o->rank < 0 || o->rank > MAXV) return;
  switch (n->op) {
    case DRK_OP_RESHAPE: {
      const drk_shape_t *x = &in(n, 0)->shape;
      if (is_const(in(n, 1)) || x->rank < 0) return;
      bool allowzero = drk_node_attr_int(n, "allowzero", 0) != 0;
      int neg = -1;
      for (int i = 0; i < o->rank; i++) {
        drk_dim_t d = o->dims[i];
        if (dim_static(d) && d.size != 0) vals[i] = d.size;
        else if (dim_static(d) && allowzero) vals[i] = 0;
        else if (!allowzero && i < x->rank && dim_same(d, x->dims[i])) vals[i] = 0;
        else if (!dim_static(d) && neg < 0) { neg = i; vals[i] = -1; }
        else return;
      }
      set_shape_input(c, n, 1, vals, o->rank);
      return;
    }
    case DRK_OP_EXPAND: {
      const drk_shape_t *x = &in(n, 0)->shape;
      if (is_const(in(n, 1)) || x->rank < 0 || o->rank < x->rank) return;
      for (int i = 0; i < o->rank; i++) {
        int xi = i - (o->rank - x->rank);
        drk_dim_t d = o->dims[i];
        if (dim_static(d)) vals[i] = d.size;
        else if (xi >= 0 && dim_same(d, x->dims[xi])) vals[i] = 1;
        else return;
      }
      set_shape_input(c, n, 1, vals, o->rank);
      return;
    }
    case DRK_OP_TILE: {
      const drk_shape_t *x = &in(n, 0)->shape;
      if (is_const(in(n, 1)) || x->rank != o->rank) return;
      for (int i = 0; i < o->rank; i++) {
        drk_dim_t d = o->dims[i], xd = x->dims[i];
        if (dim_same(d, xd)) vals[i] = 1;
        else if (dim_static(d) && dim_static(xd) && xd.size > 0 && d.size % xd.size == 0) vals[i] = d.size / xd.size;
        else return;
      }
      set_shape_input(c, n, 1, vals, o->rank);
      return;
    }
    case DRK_OP_CONSTANT_OF_SHAPE:
      if (is_const(in(n, 0)) || !drk_shape_is_static(o)) return;
      for (int i = 0; i < o->rank; i++) vals[i] = o->dims[i].size;
      set_shape_input(c, n, 0, vals, o->rank);
      return;
    default:
      return;
  }
}

/* Whether n only selects elements of its data input (no new values, none repeated), its
 * result no larger than that input, and it is that input's only reader: folding it then
 * replaces a constant by a smaller one whatever the size (exporters' Slices of rotary
 * tables and causal-mask buffers, which would otherwise be copy kernels on every run). */
static bool shrinking_select(const fctx_t *c, const drk_node_t *n) {
  switch (n->op) {
  case DRK_OP_SLICE: case DRK_OP_RESHAPE: case DRK_OP_SQUEEZE: case DRK_OP_UNSQUEEZE: case DRK_OP_FLATTEN:
  case DRK_OP_IDENTITY: case DRK_OP_TRANSPOSE:
    break;
  default:
    return false;
  }
  const drk_value_t *x = in(n, 0);
  int64_t nx = x ? numel_checked(&x->shape) : -1, ny = numel_checked(&n->outputs[0]->shape);
  if (n->n_outputs != 1 || nx < 0 || ny < 0 || ny > nx) return false;
  for (size_t i = 0; i < c->g->n_outputs; i++)
    if (c->g->outputs[i] == x) return false;
  for (size_t i = 0; i < c->g->n_nodes; i++) {
    const drk_node_t *m = c->g->nodes[i];
    if (m->dead || m == n) continue;
    for (int j = 0; j < m->n_inputs; j++)
      if (m->inputs[j] == x) return false;
  }
  return true;
}

/* Whether n is a Transpose of a constant whose result only MatMuls (and Gemms) read, as their
 * B operand: a weight layout. Folded whatever its size and whoever else reads the constant
 * (a tied embedding: Gather reads it as [V, H], the LM head as its transpose), so the weight
 * is stored in each layout once instead of being transposed on every run (GPT-2's LM head:
 * 0.27 ms of a 3.48 ms run on an H200). */
static bool weight_transpose(const fctx_t *c, const drk_node_t *n) {
  if (n->op != DRK_OP_TRANSPOSE || n->n_outputs != 1) return false;
  const drk_value_t *y = n->outputs[0];
  int uses = 0;
  for (size_t i = 0; i < c->g->n_outputs; i++)
    if (c->g->outputs[i] == y) return false;
  for (size_t i = 0; i < c->g->n_nodes; i++) {
    const drk_node_t *m = c->g->nodes[i];
    if (m->dead) continue;
    for (int j = 0; j < m->n_inputs; j++) {
      if (m->inputs[j] != y) continue;
      if ((m->op != DRK_OP_MATMUL && m->op != DRK_OP_GEMM) || j != 1) return false;
      uses++;
    }
  }
  return uses > 0;
}

/* Whether n is a DequantizeLinear of 4-bit codes that only MatMuls read as their B: kept, so
 * the weight stays 4-bit (the pipeline's quantize stage runs the pair as MatMulNBits). */
static bool w4_dequant(const fctx_t *c, const drk_node_t *n) {
  if (n->op != DRK_OP_DEQUANTIZE_LINEAR || !n->inputs[0] ||
      (n->inputs[0]->dtype != DRK_DT_I4 && n->inputs[0]->dtype != DRK_DT_U4))
    return false;
  const drk_value_t *y = n->outputs[0];
  int uses = 0;
  for (size_t i = 0; i < c->g->n_outputs; i++)
    if (c->g->outputs[i] == y) return false;
  for (size_t i = 0; i < c->g->n_nodes; i++) {
    const drk_node_t *m = c->g->nodes[i];
    if (m->dead) continue;
    for (int j = 0; j < m->n_inputs; j++) {
      if (m->inputs[j] != y) continue;
      if (m->op != DRK_OP_MATMUL || j != 1) return false;
      uses++;
    }
  }
  return uses > 0;
}

/* All inputs constant, all results static and small (or a shrinking selection, or a weight
 * layout): evaluate and replace. */
static void fold_by_interp(fctx_t *c, drk_node_t *n) {
  bool any = false;
  if (w4_dequant(c, n)) return;
  for (int i = 0; i < n->n_inputs; i++) {
    if (!n->inputs[i]) continue;
    if (!is_const(n->inputs[i]) || !n->inputs[i]->data) return;
    any = true;
  }
  if (!any) return;
  for (int i = 0; i < n->n_outputs; i++) {
    int64_t ne = numel_checked(&n->outputs[i]->shape);
    if (ne < 0 || n->outputs[i]->shape.rank > DRK_MAX_RANK) return;
    if (ne > c->max_elems && !shrinking_select(c, n) && !weight_transpose(c, n)) return;
  }
  drk_tensor_t *ins = calloc((size_t)n->n_inputs + 1, sizeof *ins);
  const drk_tensor_t **inp = calloc((size_t)n->n_inputs + 1, sizeof *inp);
  drk_tensor_t *outs = calloc((size_t)n->n_outputs + 1, sizeof *outs);
  bool ok = ins && inp && outs;
  for (int i = 0; ok && i < n->n_inputs; i++) {
    if (!n->inputs[i]) continue;
    if (!drk_tensor_from_const(&ins[i], n->inputs[i])) ok = false;
    inp[i] = &ins[i];
  }
  drk_diag_t quiet; /* the interpreter's complaints are not the user's problem here */
  drk_diag_init(&quiet, NULL);
  if (ok && drk_interp_node(n, inp, outs, &quiet)) {
    bool match = true;
    for (int i = 0; i < n->n_outputs; i++) {
      const drk_shape_t *s = &n->outputs[i]->shape;
      if (outs[i].dtype != n->outputs[i]->dtype || outs[i].rank != s->rank) match = false;
      for (int j = 0; match && j < s->rank; j++)
        if (outs[i].dims[j] != s->dims[j].size) match = false;
    }
    /* a disagreement between inference and the interpreter is a bug in one of them; the
     * graph stays as it was rather than take either side */
    if (match) {
      for (int i = 0; i < n->n_outputs; i++)
        replace_by_const(c, n->outputs[i], outs[i].dtype, outs[i].rank, outs[i].dims, outs[i].data, outs[i].nbytes);
      n->dead = true;
      c->n_folded++;
    }
    for (int i = 0; i < n->n_outputs; i++) drk_tensor_free(&outs[i]);
  }
  free(ins);
  free(inp);
  free(outs);
}

bool drk_pass_fold_constants_limit(drk_graph_t *g, int64_t max_elems, size_t *out_n_folded, drk_diag_t *d) {
  fctx_t c = {g, d, max_elems, 0};
  /* g->nodes does not grow here (constants are not nodes), so indexing stays valid */
  for (size_t i = 0; i < g->n_nodes; i++) {
    drk_node_t *n = g->nodes[i];
    if (n->dead) continue;
    rewrite_shape_input(&c, n);
    if (fold_shape_like(&c, n)) continue;
    fold_by_interp(&c, n);
  }
  if (out_n_folded) *out_n_folded = c.n_folded;
  return true;
}

bool drk_pass_fold_constants(drk_graph_t *g, drk_diag_t *d) {
  return drk_pass_fold_constants_limit(g, DRK_FOLD_MAX_ELEMS, NULL, d);
}

/* The canonicalization pipeline: infer -> fold -> infer -> dce to a fixed point. */
bool drk_pass_pipeline_canonicalize(drk_graph_t *g, drk_diag_t *d) {
  /* each round folds at least one node or stops, and the graph is finite; the bound only
   * guards against a rewrite that undoes another */
  for (int round = 0; round < 64; round++) {
    if (!drk_pass_infer_shapes(g, d)) return false;
    size_t folded = 0;
    if (!drk_pass_fold_constants_limit(g, DRK_FOLD_MAX_ELEMS, &folded, d)) return false;
    if (folded && !drk_pass_infer_shapes(g, d)) return false;
    drk_pass_eliminate_dead(g);
    if (!folded) break;
  }
  return true;
}
