/* Attention matching for the fuse pass (fuse.h: drk_fusion_match_attention, level 3).
 *
 * Requires a canonicalized graph and the use lists fuse.c computed. Reads the graph only.
 * Guarantees: a match describes exactly what the matched nodes compute, as
 *   out = MatMul(Cast*(Softmax_last(steps(MatMul(Q, B)))), V)
 * with every intermediate value used once (by the next node of the pattern) and not a graph
 * output, so one kernel may compute it without writing any intermediate. Q, B (= K^T) and V
 * are read through the chains of views (Transpose, Reshape, Flatten, Squeeze, Unsqueeze,
 * Identity, Expand, Slice with constant parameters, Split with constant sizes: output i is a
 * slice of the input along the axis) and scalar scales (Mul/Div by a scalar constant) in
 * front of the MatMuls, as far as those are used once and expressible as a view
 * (drk_fusion_view_t: GQA's Unsqueeze+Expand+Reshape of K/V heads is); masks likewise, and
 * through shared views too when they start at a constant (a Slice of a causal buffer that
 * every layer uses). The result is written through a Transpose that is its only consumer
 * (the merge of heads). A Split (GPT-2's fused QKV) joins the group only when every output
 * of it that is used is read through a view chain of the group: its outputs are then never
 * written, the kernel reads its input; otherwise the match is redone with that Split as a
 * kernel (its outputs read as buffers) and the reason kept for its boundary. Anything else
 * stays unfused, with the reason. */
#include <math.h>
#include <string.h>


#include "lower/lower_internal.h"

/* A masked score at or below this is exp-negligible next to any kept score (|s| < ~4000):
 * key blocks holding only such scores may be skipped (causal masks). */
#define MASKED_MAX (-1e4)

/* Split outputs one match may read in place: one per view walk (Q, K, V, two side operands
 * per step); past it a Split is read as a buffer */
#define MAX_REACH 72

typedef struct am {
  const drk_fusion_uses_t *u;
  drk_arena_t *A;
  int *mem;
  int nm;
  drk_attn_step_t steps[32];
  int ns;
  drk_fusion_attention_t *at;
  int calls; /* match_chain calls: the search tries both operands of two-input steps */
  /* Split outputs read as views by member links (their Split is a member), and the Splits
   * that must stay kernels (read as buffers; no_split: all of them) */
  const drk_value_t *reach[MAX_REACH];
  int nr;
  const drk_node_t *const *kept;
  int n_kept;
  bool no_split;
} am_t;

static int64_t numel(const drk_value_t *v) { return drk_shape_numel(&v->shape); }

static bool is_static(const drk_value_t *v) {
  return v && v->shape.rank >= 0 && v->shape.rank <= DRK_FUSION_MAX_RANK && drk_shape_is_static(&v->shape) &&
         numel(v) < ((int64_t)1 << 40);
}

static bool is_flt(drk_dtype_t t) { return t == DRK_DT_F32 || t == DRK_DT_F16 || t == DRK_DT_BF16; }

static int pos_of(const am_t *m, const drk_node_t *n) { return m->u->pos_of_node[n->id]; }

/* v is computed by a node, used by exactly one node (once) and is no graph output. */
static bool used_once(const am_t *m, const drk_value_t *v) {
  if (!v || v->kind != DRK_VALUE_NODE || m->u->is_out[v->id] || m->u->n_users[v->id] != 1) return false;
  const drk_node_t *c = m->u->g->nodes[m->u->users[v->id][0]];
  int uses = 0;
  for (int i = 0; i < c->n_inputs; i++) uses += c->inputs[i] == v;
  return uses == 1;
}

/* n joins the members (once: a Split is reached through each of its outputs' chains) */
static void add_member(am_t *m, const drk_node_t *n) {
  for (int i = 0; i < m->nm; i++)
    if (m->mem[i] == pos_of(m, n)) return;
  m->mem[m->nm++] = pos_of(m, n);
}

/* Output x of Split d, read as a view by a member link: d is a member. */
static void add_split(am_t *m, const drk_node_t *d, const drk_value_t *x) {
  add_member(m, d);
  DRK_ASSERT(m->nr < MAX_REACH);
  m->reach[m->nr++] = x;
}

/* A scalar constant (one element, a number): its value. */
static bool scalar_const(const drk_value_t *v, double *out) {
  if (!v || v->kind != DRK_VALUE_CONST || !v->data || numel(v) != 1) return false;
  if (v->dtype == DRK_DT_F8E4M3 || v->dtype == DRK_DT_F8E5M2 || !lw_dtype_ok(v->dtype)) return false;
  *out = drk_value_const_f64(v, 0);
  return true;
}

/* ---- views ---- */
static void part_add(drk_fusion_view_t *w, int d, int64_t div, int64_t mod, int64_t stride, bool *ok) {
  if (stride == 0 || mod <= 1) return;
  if (w->n_parts[d] >= DRK_FUSION_MAX_PARTS) {
    *ok = false;
    return;
  }
  w->parts[d][w->n_parts[d]++] = (drk_fusion_part_t){div, mod, stride};
}

static void view_contig(drk_fusion_view_t *w, const drk_value_t *v) {
  memset(w, 0, sizeof *w);
  w->value = v;
  w->rank = v->shape.rank;
  int64_t st = 1;
  bool ok = true;
  for (int d = w->rank - 1; d >= 0; d--) {
    w->dims[d] = v->shape.dims[d].size;
    part_add(w, d, 1, w->dims[d], st, &ok);
    st *= w->dims[d];
  }
}

static bool view_transpose(drk_fusion_view_t *w, const drk_node_t *n) {
  size_t cnt = 0;
  const int64_t *perm = drk_node_attr_ints(n, "perm", &cnt);
  drk_fusion_view_t o = *w;
  for (int i = 0; i < w->rank; i++) {
    int64_t p = perm ? (i < (int)cnt ? perm[i] : -1) : w->rank - 1 - i;
    if (p < 0 || p >= w->rank) return false;
    o.dims[i] = w->dims[p];
    o.n_parts[i] = w->n_parts[p];
    memcpy(o.parts[i], w->parts[p], sizeof o.parts[i]);
  }
  *w = o;
  return true;
}

/* Expand (or a broadcast) to shape s: new leading dims and grown size-1 dims read index 0. */
static bool view_expand(drk_fusion_view_t *w, const drk_shape_t *s) {
  if (s->rank < w->rank || s->rank > DRK_FUSION_MAX_RANK) return false;
  drk_fusion_view_t o = *w;
  o.rank = s->rank;
  for (int i = 0; i < s->rank; i++) {
    int j = i - (s->rank - w->rank);
    o.dims[i] = s->dims[i].size;
    o.n_parts[i] = 0;
    if (j < 0 || w->dims[j] == 1) continue;
    if (w->dims[j] != o.dims[i]) return false;
    o.n_parts[i] = w->n_parts[j];
    memcpy(o.parts[i], w->parts[j], sizeof o.parts[i]);
  }
  *w = o;
  return true;
}

/* Reshape to shape s, when the result is still a view: size-1 dims dropped, the rest cut into
 * groups of old and new dims of equal products; within a group the row-major index L is
 * shared, each old part becomes a digit range of L ((L / div) % mod) and is split at the new
 * dims' digit boundaries, which must divide one another. */
static bool view_reshape(drk_fusion_view_t *w, const drk_shape_t *s) {
  if (s->rank > DRK_FUSION_MAX_RANK) return false;
  int oi[DRK_FUSION_MAX_RANK], no = 0, ni[DRK_FUSION_MAX_RANK], nn = 0;
  for (int i = 0; i < w->rank; i++)
    if (w->dims[i] != 1) oi[no++] = i;
  for (int i = 0; i < s->rank; i++)
    if (s->dims[i].size != 1) ni[nn++] = i;
  drk_fusion_view_t o;
  memset(&o, 0, sizeof o);
  o.value = w->value;
  o.imm = w->imm;
  o.offset = w->offset;
  o.rank = s->rank;
  for (int i = 0; i < s->rank; i++) o.dims[i] = s->dims[i].size;
  bool ok = true;
  int a = 0, b = 0;
  while (a < no || b < nn) {
    if (a >= no || b >= nn) return false;
    int a0 = a, b0 = b;
    int64_t po = w->dims[oi[a++]], pn = o.dims[ni[b++]];
    while (po != pn) {
      if (po < pn) {
        if (a >= no) return false;
        po *= w->dims[oi[a++]];
      } else {
        if (b >= nn) return false;
        pn *= o.dims[ni[b++]];
      }
    }
    int64_t ws = po; /* digit weight of old dim k inside the group */
    for (int k = a0; k < a; k++) {
      int d = oi[k];
      ws /= w->dims[d];
      for (int p = 0; p < w->n_parts[d]; p++) {
        drk_fusion_part_t q = w->parts[d][p];
        int64_t lo0 = ws * q.div, hi0 = lo0 * q.mod;
        int64_t wn = pn;
        for (int t = b0; t < b; t++) {
          int e = ni[t];
          wn /= o.dims[e];
          int64_t lo = lo0 > wn ? lo0 : wn, top = wn * o.dims[e], hi = hi0 < top ? hi0 : top;
          if (lo >= hi) continue;
          if (lo % wn || hi % lo || top % hi || lo % lo0) return false;
          part_add(&o, e, lo / wn, hi / lo, q.stride * (lo / lo0), &ok);
        }
      }
    }
  }
  if (!ok) return false;
  *w = o;
  return true;
}

static int64_t const_i64(const drk_value_t *v, int64_t i) {
  if (v->dtype == DRK_DT_I64) {
    int64_t x;
    memcpy(&x, (const unsigned char *)v->data + 8 * i, 8);
    return x;
  }
  double d = drk_value_const_f64(v, i); /* an integer dtype, or a float a malformed model gave */
  return d >= -9.0e18 && d <= 9.0e18 ? (int64_t)d : 0;
}

/* Dim d of view w (into o, a copy of w) cut to its n elements b, b + step, ...: one plain
 * part (or a broadcast, which stays one). */
static bool cut_dim(drk_fusion_view_t *o, const drk_fusion_view_t *w, int d, int64_t b, int64_t step, int64_t n) {
  o->dims[d] = n;
  if (n <= 0) return false;
  if (w->n_parts[d] == 0) return true;
  const drk_fusion_part_t *p = &w->parts[d][0];
  if (w->n_parts[d] != 1 || p->div != 1 || p->mod < w->dims[d]) return false;
  o->offset += b * p->stride;
  o->parts[d][0] = (drk_fusion_part_t){1, n, p->stride * step};
  o->n_parts[d] = n == 1 ? 0 : 1;
  return true;
}

/* Slice with constant parameters (inputs, or attributes before opset 10): each sliced dim
 * must be one plain part (or a broadcast); the result's shape comes from shape inference. */
static bool view_slice(drk_fusion_view_t *w, const drk_node_t *n) {
  const drk_shape_t *s = &n->outputs[0]->shape;
  int64_t st[DRK_FUSION_MAX_RANK * 2], ax[DRK_FUSION_MAX_RANK * 2], sp[DRK_FUSION_MAX_RANK * 2];
  int na = 0;
  if (s->rank != w->rank) return false;
  if (n->n_inputs == 1) {
    size_t cs = 0, ca = 0;
    const int64_t *a = drk_node_attr_ints(n, "starts", &cs), *b = drk_node_attr_ints(n, "axes", &ca);
    if (!a || cs > DRK_FUSION_MAX_RANK * 2 || (b && ca != cs)) return false;
    for (size_t i = 0; i < cs; i++) st[na] = a[i], ax[na] = b ? b[i] : (int64_t)i, sp[na++] = 1;
  } else {
    const drk_value_t *a = n->inputs[1], *b = n->n_inputs > 3 ? n->inputs[3] : NULL;
    const drk_value_t *c = n->n_inputs > 4 ? n->inputs[4] : NULL;
    bool ok = a && a->kind == DRK_VALUE_CONST && a->data && numel(a) <= DRK_FUSION_MAX_RANK * 2;
    ok = ok && (!b || (b->kind == DRK_VALUE_CONST && b->data && numel(b) == numel(a)));
    ok = ok && (!c || (c->kind == DRK_VALUE_CONST && c->data && numel(c) == numel(a)));
    if (!ok) return false;
    for (int64_t i = 0; i < numel(a); i++)
      st[na] = const_i64(a, i), ax[na] = b ? const_i64(b, i) : i, sp[na++] = c ? const_i64(c, i) : 1;
  }
  drk_fusion_view_t o = *w;
  for (int i = 0; i < na; i++) {
    int d = drk_axis_norm(ax[i], w->rank);
    if (d < 0 || d >= w->rank || sp[i] == 0) return false;
    int64_t n0 = w->dims[d], step = sp[i], b = st[i];
    if (b < 0) b += n0;
    if (step > 0) b = b < 0 ? 0 : b > n0 ? n0 : b;
    else b = b < 0 ? 0 : b > n0 - 1 ? n0 - 1 : b;
    if (!cut_dim(&o, w, d, b, step, s->dims[d].size)) return false;
  }
  for (int d = 0; d < w->rank; d++)
    if (o.dims[d] != s->dims[d].size) return false;
  *w = o;
  return true;
}

/* Output x of Split d: its input's axis and the start of x along it, from the outputs'
 * shapes (shape inference sized them from `split` or num_outputs), when they are static and
 * tile the axis. */
static bool split_part(const drk_node_t *d, const drk_value_t *x, int *axis, int64_t *start) {
  const drk_value_t *in = d->inputs[0];
  int r = in ? in->shape.rank : -1, oi = -1;
  if (!in || !is_static(in) || r < 1) return false;
  int a = drk_axis_norm(drk_node_attr_int(d, "axis", 0), r);
  if (a < 0 || a >= r) return false;
  int64_t sum = 0;
  for (int i = 0; i < d->n_outputs; i++) {
    const drk_value_t *y = d->outputs[i];
    if (!y || !is_static(y) || y->shape.rank != r) return false;
    if (y == x) oi = i, *start = sum;
    sum += y->shape.dims[a].size;
  }
  if (oi < 0 || sum != in->shape.dims[a].size) return false;
  for (int i = 0; i < r; i++)
    if (i != a && x->shape.dims[i].size != in->shape.dims[i].size) return false;
  *axis = a;
  return true;
}

/* Split d (a Split the match may read through) to its output x: a slice along the axis. */
static bool view_split(drk_fusion_view_t *w, const drk_node_t *d, const drk_value_t *x) {
  int a;
  int64_t b;
  if (!split_part(d, x, &a, &b) || x->shape.rank != w->rank) return false;
  drk_fusion_view_t o = *w;
  if (!cut_dim(&o, w, a, b, 1, x->shape.dims[a].size)) return false;
  *w = o;
  return true;
}

/* A scalar scale on the way to a MatMul operand: Mul(x, c), Mul(c, x) or Div(x, c) with c a
 * scalar constant; *xi: x's input index. */
static bool scale_op(const drk_node_t *n, int *xi, double *c) {
  if ((n->op != DRK_OP_MUL && n->op != DRK_OP_DIV) || n->n_inputs != 2) return false;
  const drk_value_t *y = n->outputs[0];
  for (int i = 0; i < (n->op == DRK_OP_DIV ? 1 : 2); i++) {
    const drk_value_t *x = n->inputs[i];
    if (x && x->dtype == y->dtype && drk_shape_equal(&x->shape, &y->shape) && scalar_const(n->inputs[1 - i], c)) {
      *xi = i;
      return true;
    }
  }
  return false;
}

/* Whether the match may read through Split d (to its output x) as a view. */
static bool split_view_ok(const am_t *m, const drk_node_t *d, const drk_value_t *x) {
  int a;
  int64_t b;
  if (d->op != DRK_OP_SPLIT || m->no_split || m->nr >= MAX_REACH || !split_part(d, x, &a, &b)) return false;
  for (int i = 0; i < m->n_kept; i++)
    if (m->kept[i] == d) return false;
  return true;
}

/* The view of value v (in its own shape) through the chain of views (and, when scales is
 * set, scalar scales) in front of it. Links whose result is used once, from v back, become
 * members; past the first shared link the chain is read through only when it starts at a
 * constant (nothing else guarantees the start is still intact when the group runs). Scales
 * become steps (a scalar scale of Q or K scales Q.K^T). A Split link is a member only as
 * far as drk_fusion_match_attention's check of all its outputs lets it (add_split). */
static void walk_view(am_t *m, const drk_value_t *v, drk_fusion_view_t *out, bool scales) {
  const drk_node_t *chain[32];
  const drk_value_t *ins[32];  /* the input each link reads the chain from */
  const drk_value_t *outs[32]; /* the link's result on the chain (a Split has several) */
  bool mem[32];
  int n = 0, own = 0;
  const drk_value_t *x = v;
  while (n < 32 && x->kind == DRK_VALUE_NODE && is_static(x)) {
    const drk_node_t *d = x->def;
    int xi = 0;
    double c;
    if (!(drk_op_is_view(d->op) || split_view_ok(m, d, x) || (scales && scale_op(d, &xi, &c))) || !d->inputs[xi] ||
        !is_static(d->inputs[xi]))
      break;
    /* nothing in front of a Split is a member: the other outputs' chains share it, and one
     * of them could read its result as a buffer */
    mem[n] = used_once(m, x) && (n == 0 || (mem[n - 1] && chain[n - 1]->op != DRK_OP_SPLIT));
    own += mem[n];
    ins[n] = d->inputs[xi];
    outs[n] = x;
    chain[n++] = d;
    x = d->inputs[xi];
  }
  if (x->kind != DRK_VALUE_CONST) n = own; /* only through members */
  /* forward from the start; a link that is no view cuts the chain there: its result is read
   * as a buffer, which only a member's use keeps intact until the group runs */
  int first, cut;
  drk_fusion_view_t w;
  for (;;) {
    first = n - 1, cut = -1;
    view_contig(&w, n ? ins[n - 1] : v);
    for (int i = n - 1; i >= 0; i--) {
      const drk_node_t *d = chain[i];
      const drk_shape_t *s = &outs[i]->shape;
      int xi;
      double c;
      bool ok;
      if (d->op == DRK_OP_TRANSPOSE) ok = view_transpose(&w, d);
      else if (d->op == DRK_OP_EXPAND) ok = view_expand(&w, s);
      else if (d->op == DRK_OP_SLICE) ok = view_slice(&w, d);
      else if (d->op == DRK_OP_SPLIT) ok = view_split(&w, d, outs[i]);
      else if (drk_op_is_view(d->op)) ok = view_reshape(&w, s);
      else ok = scale_op(d, &xi, &c);
      if (!ok) {
        view_contig(&w, outs[i]);
        first = i - 1, cut = i;
      }
    }
    if (cut <= own) break; /* no cut, or one whose result a member (or the step) reads */
    n = own;               /* read no further back than the members */
  }
  for (int i = first; i >= 0; i--) {
    const drk_node_t *d = chain[i];
    int xi;
    double c;
    if (mem[i] && d->op == DRK_OP_SPLIT) add_split(m, d, outs[i]);
    else if (mem[i]) add_member(m, d);
    if (scales && scale_op(d, &xi, &c) && m->ns < (int)DRK_ARRAY_LEN(m->steps)) {
      drk_attn_step_t st;
      memset(&st, 0, sizeof st);
      st.kind = d->op == DRK_OP_MUL ? DRK_ATTN_MUL : DRK_ATTN_DIV;
      st.x.imm = c;
      m->steps[m->ns++] = st;
    }
  }
  *out = w;
}

/* view w of an operand of rank r (batch dims right-aligned, broadcast) as [batch..., a, b] */
static void align_batch(const drk_fusion_attention_t *at, drk_fusion_view_t *w) {
  drk_fusion_view_t o = *w;
  int r = w->rank, nbw = r - 2;
  o.rank = at->nb + 2;
  for (int i = 0; i < o.rank; i++) {
    int j = i < at->nb ? i - (at->nb - nbw) : i - at->nb + nbw;
    o.dims[i] = i < at->nb ? at->batch[i] : w->dims[j];
    o.n_parts[i] = 0;
    if (j < 0 || (i < at->nb && w->dims[j] == 1)) continue;
    o.n_parts[i] = w->n_parts[j];
    memcpy(o.parts[i], w->parts[j], sizeof o.parts[i]);
  }
  *w = o;
}

/* Side operand x of a step (a mask, a scale), broadcast to the scores' shape s. */
static const char *side_view(am_t *m, const drk_value_t *x, const drk_shape_t *s, drk_fusion_view_t *out) {
  memset(out, 0, sizeof *out);
  double c;
  if (scalar_const(x, &c)) {
    out->imm = c;
    return NULL;
  }
  if (!is_static(x) || x->shape.rank > s->rank) return "a mask or scale operand has a larger rank than the scores";
  for (int i = 0; i < x->shape.rank; i++) {
    int64_t a = x->shape.dims[i].size, b = s->dims[i + s->rank - x->shape.rank].size;
    if (a != 1 && a != b) return "a mask or scale operand does not broadcast to the scores";
  }
  walk_view(m, x, out, false);
  return view_expand(out, s) ? NULL : "a mask or scale operand does not broadcast to the scores";
}

static const char *match_chain(am_t *m, const drk_value_t *v, int depth);

/* Step node n whose operand `ci` is the scores chain. */
static const char *try_step(am_t *m, const drk_node_t *n, int ci, int depth) {
  const drk_value_t *s = n->inputs[ci], *y = n->outputs[0];
  if (!s || s->kind != DRK_VALUE_NODE || !is_static(s) || !drk_shape_equal(&s->shape, &y->shape))
    return "the scores are broadcast by a step";
  if (!is_flt(s->dtype)) return "scores of a non-float type";
  drk_attn_step_t st;
  memset(&st, 0, sizeof st);
  const char *why = NULL;
  int ns = m->ns, nm = m->nm, nr = m->nr;
  switch (n->op) {
  case DRK_OP_MUL: st.kind = DRK_ATTN_MUL; break;
  case DRK_OP_DIV: st.kind = DRK_ATTN_DIV; break;
  case DRK_OP_ADD: st.kind = DRK_ATTN_ADD; break;
  case DRK_OP_SUB: st.kind = DRK_ATTN_SUB; break;
  case DRK_OP_WHERE: st.kind = DRK_ATTN_WHERE; break;
  case DRK_OP_CAST: st.kind = DRK_ATTN_CAST; break;
  default: return "not a step";
  }
  if (st.kind == DRK_ATTN_CAST) {
    if (!is_flt(y->dtype)) return "a Cast of the scores to a non-float type";
    st.dtype = y->dtype;
  } else if (st.kind == DRK_ATTN_WHERE) {
    if (ci == 0 || n->n_inputs != 3) return "the scores are a Where condition";
    st.scores_right = ci == 2;
    const drk_value_t *cond = n->inputs[0], *x = n->inputs[ci == 1 ? 2 : 1];
    if (cond == s || x == s) return "the scores are used twice by one step";
    if (!cond || cond->dtype != DRK_DT_BOOL) return "a Where condition that is not bool";
    if ((why = side_view(m, cond, &y->shape, &st.cond)) || (why = side_view(m, x, &y->shape, &st.x))) {
      m->nm = nm, m->nr = nr;
      return why;
    }
  } else {
    if (n->n_inputs != 2) return "not a step";
    const drk_value_t *x = n->inputs[1 - ci];
    if (x == s) return "the scores are used twice by one step";
    if (!x || !is_flt(x->dtype)) return "a step operand of a non-float type";
    st.scores_right = ci == 1;
    if ((why = side_view(m, x, &y->shape, &st.x))) {
      m->nm = nm, m->nr = nr;
      return why;
    }
  }
  if (!(why = match_chain(m, s, depth + 1)) && m->ns >= (int)DRK_ARRAY_LEN(m->steps))
    why = "too many steps between the MatMul and the Softmax";
  if (why) {
    m->ns = ns;
    m->nm = nm, m->nr = nr;
    return why;
  }
  m->steps[m->ns++] = st;
  add_member(m, n);
  return NULL;
}

static const char *match_scores(am_t *m, const drk_node_t *mm);

/* v (consumed once by the chain's next node) back to the scores MatMul; steps are appended in
 * forward order. */
static const char *match_chain(am_t *m, const drk_value_t *v, int depth) {
  if (depth > 24 || ++m->calls > 4096) return "too many steps between the MatMul and the Softmax";
  if (!used_once(m, v)) return "an intermediate score value has other uses (or is a graph output)";
  if (!is_static(v)) return "shapes not static";
  const drk_node_t *n = v->def;
  if (n->op == DRK_OP_MATMUL) return match_scores(m, n);
  if (n->op == DRK_OP_CAST) return try_step(m, n, 0, depth);
  if (n->op == DRK_OP_WHERE) {
    const char *w1 = try_step(m, n, 1, depth);
    if (!w1 || (n->n_inputs == 3 && !try_step(m, n, 2, depth))) return NULL;
    return w1;
  }
  if (n->op == DRK_OP_MUL || n->op == DRK_OP_DIV || n->op == DRK_OP_ADD || n->op == DRK_OP_SUB) {
    /* the operand computed from the MatMul: try the computed operands, the first that matches */
    const char *w0 = NULL;
    for (int i = 0; i < n->n_inputs && i < 2; i++) {
      const drk_value_t *x = n->inputs[i];
      if (!x || x->kind != DRK_VALUE_NODE) continue;
      const char *w = try_step(m, n, i, depth);
      if (!w) return NULL;
      if (!w0) w0 = w;
    }
    return w0 ? w0 : "a step with no computed operand";
  }
  return drk_arena_printf(m->A, "%s between the scores MatMul and the Softmax is not fused", drk_op_name(n->op));
}

static const char *match_scores(am_t *m, const drk_node_t *mm) {
  drk_fusion_attention_t *at = m->at;
  const drk_value_t *a = mm->inputs[0], *b = mm->inputs[1], *y = mm->outputs[0];
  if (!is_static(a) || !is_static(b) || !is_static(y)) return "shapes not static";
  if (a->shape.rank < 2 || b->shape.rank < 2) return "the scores MatMul has a 1-D operand";
  if (a->dtype != b->dtype || !is_flt(a->dtype)) return "Q and K are not both f16, bf16 or f32";
  at->dtype = a->dtype;
  at->nb = y->shape.rank - 2;
  for (int i = 0; i < at->nb; i++) at->batch[i] = y->shape.dims[i].size;
  at->Sq = a->shape.dims[a->shape.rank - 2].size;
  at->D = a->shape.dims[a->shape.rank - 1].size;
  at->Sk = b->shape.dims[b->shape.rank - 1].size;
  at->scores = pos_of(m, mm);
  add_member(m, mm);
  /* the chain's steps are appended once this returns: Q's and K's scales come first */
  drk_fusion_view_t bq;
  walk_view(m, a, &at->q, true);
  walk_view(m, b, &bq, true);
  /* K = B^T: swap B's last two dims */
  int r = bq.rank;
  at->k = bq;
  at->k.dims[r - 2] = bq.dims[r - 1], at->k.dims[r - 1] = bq.dims[r - 2];
  at->k.n_parts[r - 2] = bq.n_parts[r - 1], at->k.n_parts[r - 1] = bq.n_parts[r - 2];
  memcpy(at->k.parts[r - 2], bq.parts[r - 1], sizeof bq.parts[0]);
  memcpy(at->k.parts[r - 1], bq.parts[r - 2], sizeof bq.parts[0]);
  align_batch(at, &at->q);
  align_batch(at, &at->k);
  return NULL;
}

/* Element (i, j) of the [batch..., Sq, Sk] view w of a constant, at batch coordinates 0. */
static double mask_at(const drk_fusion_view_t *w, int64_t i, int64_t j) {
  int64_t off = w->offset, idx[2] = {i, j};
  for (int k = 0; k < 2; k++) {
    int d = w->rank - 2 + k;
    for (int p = 0; p < w->n_parts[d]; p++) {
      const drk_fusion_part_t *q = &w->parts[d][p];
      off += (idx[k] / q->div) % q->mod * q->stride;
    }
  }
  return drk_value_const_f64(w->value, off);
}

/* Whether step st keeps exactly the keys j <= i + t (t >= 0) and masks the rest with values
 * <= MASKED_MAX, the same for every batch coordinate; *out_t: t. */
static bool causal_step(const drk_fusion_attention_t *at, const drk_attn_step_t *st, int64_t *out_t) {
  const drk_fusion_view_t *w = st->kind == DRK_ATTN_WHERE ? &st->cond : st->kind == DRK_ATTN_ADD ? &st->x : NULL;
  if (!w || !w->value || w->value->kind != DRK_VALUE_CONST || !w->value->data) return false;
  for (int d = 0; d < at->nb; d++)
    if (w->n_parts[d]) return false;
  if (st->kind == DRK_ATTN_WHERE && (st->x.value || !(st->x.imm <= MASKED_MAX))) return false;
  int64_t t = -1;
  for (int64_t j = 0; j < at->Sk; j++) {
    double v = mask_at(w, 0, j);
    if (st->kind == DRK_ATTN_WHERE ? (v != 0) == st->scores_right : v != 0) break;
    t = j;
  }
  if (t < 0) return false;
  for (int64_t i = 0; i < at->Sq; i++)
    for (int64_t j = 0; j < at->Sk; j++) {
      double v = mask_at(w, i, j);
      bool want = j <= i + t;
      if (st->kind == DRK_ATTN_WHERE) {
        if (((v != 0) != st->scores_right) != want) return false;
      } else if (want ? v != 0 : !(v <= MASKED_MAX)) {
        return false;
      }
    }
  *out_t = t;
  return true;
}

/* Whether value w is Where(IsNaN(s), 0, s) with s a Softmax's result that only this IsNaN
 * and this Where read (torch's dynamo exporter zeroes the rows Softmax leaves NaN: all keys
 * masked); guard: the Where and the IsNaN. Exact once the kernel zeroes those rows
 * (zero_nan_rows): Softmax gives a NaN row exactly when the row's scores are all -inf or hold
 * a NaN or +inf, and then the kernel's running sum l is 0 or NaN. */
static bool nan_guard(const am_t *m, const drk_value_t *w, const drk_node_t *guard[2]) {
  double z;
  if (!used_once(m, w) || w->def->op != DRK_OP_WHERE || w->def->n_inputs != 3) return false;
  const drk_node_t *wh = w->def;
  const drk_value_t *cond = wh->inputs[0], *s = wh->inputs[2];
  if (!cond || !s || !used_once(m, cond) || cond->def->op != DRK_OP_IS_NAN || cond->def->inputs[0] != s) return false;
  if (!scalar_const(wh->inputs[1], &z) || z != 0) return false;
  if (s->kind != DRK_VALUE_NODE || s->def->op != DRK_OP_SOFTMAX || m->u->is_out[s->id] || m->u->n_users[s->id] != 2 ||
      !is_static(s) || !drk_shape_equal(&s->shape, &w->shape) || s->dtype != w->dtype)
    return false;
  for (int i = 0; i < 2; i++) {
    const drk_node_t *c = m->u->g->nodes[m->u->users[s->id][i]];
    if (c != wh && c != cond->def) return false;
  }
  guard[0] = wh;
  guard[1] = cond->def;
  return true;
}

/* One match of the pattern ending at P.V MatMul k, with m's Splits kept as kernels. */
static const char *match(am_t *m, int k, drk_fusion_attention_t *out, int *n_members) {
  const drk_fusion_uses_t *u = m->u;
  drk_arena_t *A = m->A;
  const drk_node_t *pv = u->g->nodes[k];
  if (pv->dead || pv->op != DRK_OP_MATMUL || pv->n_inputs != 2) return "";
  drk_fusion_attention_t at;
  memset(&at, 0, sizeof at);
  at.causal_step = -1;
  m->at = &at;
  /* P: Softmax, then Casts */
  const drk_value_t *p = pv->inputs[0];
  int ncast = 0;
  while (used_once(m, p) && p->def->op == DRK_OP_CAST && ncast < 4) {
    p = p->def->inputs[0];
    ncast++;
  }
  const drk_value_t *pcast = p; /* the value the Casts start from */
  const drk_node_t *guard[2] = {NULL, NULL};
  bool nan_rows = nan_guard(m, p, guard);
  if (nan_rows) p = guard[0]->inputs[2];
  else if (!used_once(m, p)) return "";
  if (p->kind != DRK_VALUE_NODE || p->def->op != DRK_OP_SOFTMAX) return ""; /* not an attention */
  const drk_node_t *sm = p->def;
  const drk_value_t *x = sm->inputs[0];
  if (!is_static(x) || x->shape.rank < 2) return "Softmax input not static";
  if (drk_axis_norm(drk_node_attr_int(sm, "axis", -1), x->shape.rank) != x->shape.rank - 1)
    return "Softmax not over the last axis";
  const char *why = match_chain(m, x, 0);
  if (why) return why;
  add_member(m, sm);
  at.softmax = pos_of(m, sm);
  for (const drk_value_t *q = pv->inputs[0]; q != pcast; q = q->def->inputs[0]) {
    if (!is_flt(q->dtype)) return "P is cast to a non-float type";
    add_member(m, q->def);
  }
  if (nan_rows) {
    add_member(m, guard[0]);
    add_member(m, guard[1]);
    at.zero_nan_rows = true;
  }
  /* shapes */
  const drk_value_t *v = pv->inputs[1], *o = pv->outputs[0];
  if (!is_static(v) || !is_static(o) || v->shape.rank < 2) return "V or the result not static (or 1-D)";
  if (v->dtype != at.dtype) return "V's dtype differs from Q's and K's";
  if (!drk_shape_equal(&x->shape, &p->shape) || x->shape.rank != at.nb + 2) return "the scores change shape";
  if (o->shape.rank != at.nb + 2) return "the result has more batch dims than the scores";
  for (int i = 0; i < at.nb; i++)
    if (o->shape.dims[i].size != at.batch[i]) return "V broadcasts the scores' batch dims";
  if (v->shape.dims[v->shape.rank - 2].size != at.Sk) return "V's rows differ from the keys";
  at.Dv = v->shape.dims[v->shape.rank - 1].size;
  if (at.D > 128 || at.Dv > 128 || at.D < 1 || at.Dv < 1) return "head dim above 128";
  if (at.Sq < 1 || at.Sk < 1) return "empty scores";
  int64_t gy = at.nb ? at.batch[at.nb - 1] : 1, gz = 1;
  for (int i = 0; i + 1 < at.nb; i++) gz *= at.batch[i];
  if (gy > 65535 || gz > 65535) return "batch dims exceed the grid";
  at.pv = k;
  add_member(m, pv);
  walk_view(m, v, &at.v, false);
  align_batch(&at, &at.v);
  /* the result, through the merge of heads when that Transpose is its only consumer */
  view_contig(&at.out, o);
  if (used_once(m, o)) {
    const drk_node_t *t = u->g->nodes[u->users[o->id][0]];
    size_t cnt = 0;
    const int64_t *perm = drk_node_attr_ints(t, "perm", &cnt);
    int r = o->shape.rank;
    bool ok = t->op == DRK_OP_TRANSPOSE && is_static(t->outputs[0]) && (!perm || (int)cnt == r);
    unsigned seen = 0;
    for (int i = 0; ok && perm && i < r; i++) {
      ok = perm[i] >= 0 && perm[i] < r && !(seen & (1u << perm[i]));
      if (ok) seen |= 1u << perm[i];
    }
    if (ok) {
      /* Y = Transpose(O) is contiguous: O's dim perm[i] moves with Y's dim i */
      drk_fusion_view_t y;
      view_contig(&y, t->outputs[0]);
      at.out.value = y.value;
      for (int i = 0; i < r; i++) {
        int pi = perm ? (int)perm[i] : r - 1 - i;
        at.out.n_parts[pi] = y.n_parts[i];
        memcpy(at.out.parts[pi], y.parts[i], sizeof y.parts[i]);
      }
      add_member(m, t);
    }
  }
  /* steps and the causal mask */
  at.n_steps = m->ns;
  at.steps = drk_arena_memdup(A, m->steps, sizeof(drk_attn_step_t) * (size_t)(m->ns ? m->ns : 1));
  for (int i = 0; i < at.n_steps; i++) {
    drk_attn_step_t *st = &at.steps[i];
    if (st->kind != DRK_ATTN_CAST && st->x.value) align_batch(&at, &st->x);
    if (st->kind == DRK_ATTN_WHERE && st->cond.value) align_batch(&at, &st->cond);
    if (st->kind != DRK_ATTN_CAST && !st->x.value) st->x.rank = 0;
  }
  int last = at.n_steps - 1;
  while (last >= 0 && at.steps[last].kind == DRK_ATTN_CAST) last--;
  int64_t t;
  if (last >= 0 && causal_step(&at, &at.steps[last], &t)) {
    at.causal_step = last;
    at.causal_offset = t;
  }
  *out = at;
  *n_members = m->nm;
  return NULL;
}

/* A Split whose outputs the match read in place but that has a used output the group does
 * not read through a view chain (a graph output, a use elsewhere, a use as a buffer): it must
 * stay a kernel; *why says so. NULL: none. */
static const drk_node_t *escaping_split(const am_t *m, const char **why) {
  const drk_fusion_uses_t *u = m->u;
  for (int i = 0; i < m->nr; i++) {
    const drk_node_t *d = m->reach[i]->def;
    for (int o = 0; o < d->n_outputs; o++) {
      const drk_value_t *y = d->outputs[o];
      if (!y || (!u->is_out[y->id] && !u->n_users[y->id])) continue; /* unused */
      bool read = false;
      for (int j = 0; j < m->nr && !read; j++) read = m->reach[j] == y;
      if (read) continue;
      if (u->is_out[y->id]) {
        *why = drk_arena_printf(m->A, "Split stays a kernel: its output %%%s is a graph output", y->name);
      } else {
        const drk_node_t *c = NULL; /* a user outside the group */
        for (int j = 0; j < u->n_users[y->id] && !c; j++) {
          bool member = false;
          for (int t = 0; t < m->nm && !member; t++) member = m->mem[t] == u->users[y->id][j];
          if (!member) c = u->g->nodes[u->users[y->id][j]];
        }
        if (c)
          *why = drk_arena_printf(m->A, "Split stays a kernel: its output %%%s is also used by %s(%%%s)", y->name,
                                  drk_op_name(c->op), c->outputs[0] ? c->outputs[0]->name : "?");
        else
          *why = drk_arena_printf(m->A, "Split stays a kernel: the attention reads its output %%%s as a buffer "
                                  "(not through one view chain used once)", y->name);
      }
      return d;
    }
  }
  return NULL;
}

const char *drk_fusion_match_attention(const drk_fusion_uses_t *u, drk_arena_t *A, int k,
                                       drk_fusion_attention_t *out, int *members, int *n_members) {
  const drk_node_t *kept[DRK_ATTN_MAX_KEPT];
  const char *kept_why[DRK_ATTN_MAX_KEPT];
  int n_kept = 0;
  bool no_split = false;
  /* a Split that must stay a kernel changes how its outputs are read: match again without it
   * (each round keeps one more Split; past DRK_ATTN_MAX_KEPT, none is read through) */
  for (;;) {
    am_t m0 = {.u = u, .A = A, .mem = members, .kept = kept, .n_kept = n_kept, .no_split = no_split};
    const char *why = match(&m0, k, out, n_members);
    if (why) return why;
    const char *sw = NULL;
    const drk_node_t *d = escaping_split(&m0, &sw);
    if (!d) break;
    if (n_kept == DRK_ATTN_MAX_KEPT) {
      no_split = true;
      continue;
    }
    kept[n_kept] = d;
    kept_why[n_kept++] = sw;
  }
  out->n_kept = n_kept;
  for (int i = 0; i < n_kept; i++) {
    out->kept[i] = u->pos_of_node[kept[i]->id];
    out->kept_why[i] = kept_why[i];
  }
  return NULL;
}

const char *drk_fusion_attention_input_why(const drk_fusion_attention_t *at, int producer, const char *dflt) {
  for (int i = 0; at && i < at->n_kept; i++)
    if (at->kept[i] == producer) return at->kept_why[i];
  return dflt;
}
