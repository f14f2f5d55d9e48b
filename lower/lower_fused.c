/* Lowering of a fused group (lower/fuse.h) to one tile kernel.
 *
 * FLAT groups: one flat 1-D frame over the element count N of the values the group stores
 * (lw_flat_begin's, at most 1024 elements per program with data movement), in their
 * row-major order; each stored value is evaluated at the frame's
 * index. A value is evaluated at an *index* over its own shape (ix_t: coordinates and/or a
 * row-major flat index, and the lanes where it is in range): elementwise edges of equal
 * counts keep the flat index (without data movement every value has N elements and is a
 * tile of the frame, computed once, as in the one-node kernels, by drk_lower_ew_math);
 * broadcasts and data movement nodes map the consumer's coordinates to the input's
 * (Transpose permutes, Slice/Split take start + i * step, Expand and broadcasts take 0 on
 * broadcast dims, Concat selects by the axis coordinate between its inputs at shifted
 * indexes, Pad selects the pad value outside its input; a view re-decomposes the flat
 * index). Loads of a branch not taken are masked. A value read under several index maps is
 * computed once per map (fuse.c bounds how often). Inputs from outside are loaded with
 * their broadcast strides against the consuming node's result shape; values used outside
 * the group (or graph outputs) are stored.
 *
 * ROWS groups: the row frame of lower_reduce.c (ROWS rows per program, COLS columns per
 * chunk). Values of the group are either full (rows x R: recomputed from their inputs in
 * each chunk loop that needs them) or per-row (one tile of ROWS, computed once, outside any
 * loop). Nodes are visited in node order: each reduction or normalization emits its chunk
 * loops there (sum/max..., or max+sum for softmax, mean+variance for normalizations), per-row
 * elementwise nodes are computed right away, full ones when a loop needs them; a last loop
 * stores the full values that leave the group, then the per-row ones are stored.
 *
 * ATTENTION groups are lower/lower_attention.c's (dispatched from here).
 *
 * Requires: a group as fuse.c forms it (every in-group edge maps element to element, or
 * goes through a data movement node or a broadcast of a movement result in a flat group;
 * a flat group stores values of one element count; the reduced elements are innermost).
 * Guarantees: the kernel computes what the group's
 * one-node kernels compute, with the same operations, except that values inside the group
 * are not rounded to f16/bf16 between ops (f32 throughout, like every one-node kernel's
 * math; casts written in the graph still round). */
#include <math.h>
#include <string.h>


#include "lower/lower_internal.h"

#define BIN(op, a, b) lw_bin(c, DRK_TOP_##op, (a), (b))
#define UN(op, a) lw_un(c, DRK_TOP_##op, (a))

enum { F_FULL = 1, F_ROW = 2 };

typedef struct ext_memo {
  const drk_value_t *v;
  const drk_shape_t *shape; /* consumer's result shape */
  int va;                   /* per-channel axis, -1 */
  int frame, gen;
  bool top; /* made outside every loop: valid everywhere after */
  tv_t *t;
} ext_memo_t;

/* ---- indexes of flat groups ---- */
typedef struct ix {
  int r;
  int64_t d[LW_MAX_RANK];
  tv_t *co[LW_MAX_RANK]; /* coordinates; NULL: 0 (from_flat: not derived yet, or 0 for dims of 1) */
  tv_t *flat;            /* row-major flat index over d; NULL: not derived yet */
  tv_t *lmask;           /* load mask: the frame's, narrowed by the Concat/Pad branches taken */
  bool from_flat;        /* the coordinates derive from flat */
  struct ix *next;       /* every index made (canonical lookups) */
} ix_t;

typedef struct ixmap { /* memo of ix_map */
  const ix_t *from;
  const drk_node_t *n;
  int i;
  ix_t *to;
  tv_t *pred; /* Concat/Pad: the lanes that read this input */
  struct ixmap *next;
} ixmap_t;

typedef struct vmemo { /* memo of values made in the group, per value id */
  const ix_t *ix;
  tv_t *t;
  struct vmemo *next;
} vmemo_t;

typedef struct lmemo { /* memo of loads of outside values (and immediates: off NULL) */
  const drk_value_t *v;
  tv_t *off, *mask, *t;
  struct lmemo *next;
} lmemo_t;

/* constant parameters of a data movement member: Transpose, Slice, Pad (lw_read_move_params);
 * Split: start along its axis */
typedef lw_move_params_t mvp_t;

typedef struct fl {
  drk_lctx_t *c;
  const drk_graph_t *g;
  const drk_fusion_group_t *gr;
  bool flat;
  bool *in;            /* per node position */
  int *pos;            /* per node id */
  tv_t **param;        /* per value id */
  bool *store;         /* per value id: stored by the kernel */
  tv_t **full;         /* per value id: tile in the current chunk (or the flat frame) */
  int *full_gen;
  int gen;
  tv_t **row;          /* per value id: per-row tile */
  tv_t **st0, **st1;   /* per node position: an anchor's per-row statistics */
  ext_memo_t memo[64];
  int n_memo;
  int64_t N, rows, R;
  /* flat frame */
  lw_flat_t ff;
  bool stored;      /* a store was emitted */
  bool *not_inplace; /* per value id: loaded off the identity offset, or after a store */
  ix_t *root;        /* the frame's index: flat offs over N */
  ix_t *ixs;
  ixmap_t *maps;
  struct asmemo *as;
  vmemo_t **vm;
  lmemo_t *loads;
  tv_t *zero;
  mvp_t **mv;        /* per node position: data movement parameters */
  /* row frame */
  drk_schedule_t s;
  const drk_tile_layout_t *P, *Lr, *Lc;
  tv_t *rowi, *rmask, *rowR2, *rmask2, *ci;
  tv_t *col, *lin2, *mask2; /* current chunk */
  /* split rows (a single norm/softmax anchor, few long rows): kernel 1 (mode SPLIT_PARTIAL)
   * stores each program's partial statistics of its columns [lb, ub) into scratch ws, kernel 2
   * (SPLIT_FINISH) combines them and writes its columns */
  int mode;
  int64_t SP, cps; /* programs per row tile, chunks of COLS per program */
  bool one;        /* one chunk per program (the row, or a split program's columns): no chunk loops */
  int ws;
  drk_dtype_t ws_dtype;
  tv_t *pws, *lb, *ub;
} fl_t;

enum { SPLIT_NONE, SPLIT_PARTIAL, SPLIT_FINISH };

static int64_t numel(const drk_value_t *v) { return lw_numel(v); }

static bool made_in(const fl_t *F, const drk_value_t *v) {
  return v && v->kind == DRK_VALUE_NODE && F->in[F->pos[v->def->id]];
}

static bool immediate(const drk_value_t *v) {
  return v->kind == DRK_VALUE_CONST && v->data && numel(v) == 1 && v->dtype != DRK_DT_F8E4M3 &&
         v->dtype != DRK_DT_F8E5M2;
}

/* The in-group value whose bytes v occupies: v itself, or the computed value under a chain
 * of in-group alias views; NULL when the chain starts outside the group. */
static const drk_value_t *root_of(const fl_t *F, const drk_value_t *v) {
  while (made_in(F, v) && drk_op_aliases_input(v->def->op)) v = v->def->inputs[0];
  return made_in(F, v) ? v : NULL;
}

/* outermost value under a chain of in-group views (an outside value, or a computed one) */
static const drk_value_t *under_views(const fl_t *F, const drk_value_t *v) {
  while (made_in(F, v) && drk_op_aliases_input(v->def->op)) v = v->def->inputs[0];
  return v;
}

static int vframe(const fl_t *F, const drk_value_t *v) {
  return numel(v) == F->rows ? F_ROW : F_FULL;
}

/* ---- loads of values from outside the group ---- */
static const drk_tile_type_t *frame_type(const fl_t *F, int frame) {
  return frame == F_ROW ? &F->rowi->type : &F->lin2->type;
}

/* immediate v as a tile of frame fr */
static tv_t *imm_tile(fl_t *F, const drk_value_t *v, const drk_tile_type_t *fr) {
  drk_tile_type_t ty = lw_retype(fr, v->dtype);
  if (drk_dtype_is_float(v->dtype)) return drk_tile_build_const_float(&F->c->b, drk_value_const_f64(v, 0), ty);
  int64_t iv;
  if (v->dtype == DRK_DT_I64) memcpy(&iv, v->data, 8);
  else iv = (int64_t)drk_value_const_f64(v, 0);
  return drk_tile_build_const_int(&F->c->b, iv, ty);
}

/* v (outside) as seen by a consumer whose result has shape `shape`, in `frame`; va >= 0:
 * v runs along dim va of the result (BatchNormalization's per-channel operands). */
static tv_t *ext_load(fl_t *F, const drk_value_t *v, const drk_shape_t *shape, int va, int frame) {
  drk_lctx_t *c = F->c;
  for (int i = 0; i < F->n_memo; i++) {
    ext_memo_t *m = &F->memo[i];
    if (m->v == v && m->va == va && m->frame == frame && (m->top || m->gen == F->gen) &&
        (m->shape == shape || drk_shape_equal(m->shape, shape)))
      return m->t;
  }
  tv_t *t;
  if (immediate(v)) {
    t = imm_tile(F, v, frame_type(F, frame));
  } else {
    tv_t *idx = frame == F_ROW ? F->rowi : F->lin2;
    tv_t *mask = frame == F_ROW ? F->rmask : F->mask2;
    int r = shape->rank;
    int64_t od[LW_MAX_RANK], st[LW_MAX_RANK];
    for (int k = 0; k < r; k++) od[k] = shape->dims[k].size;
    tv_t *off;
    if (va >= 0) {
      for (int k = 0; k < r; k++) st[k] = k == va ? 1 : 0;
      off = lw_affine(c, idx, r, od, st, 0);
    } else if (numel(v) == drk_shape_numel(shape)) {
      off = idx; /* broadcast with equal counts: same element order */
    } else {
      lw_bstrides(v, r, od, st);
      off = lw_affine(c, idx, r, od, st, 0);
    }
    DRK_ASSERT(F->param[v->id]);
    t = lw_load(c, F->param[v->id], off, mask, 0);
  }
  if (F->n_memo < (int)DRK_ARRAY_LEN(F->memo))
    F->memo[F->n_memo++] = (ext_memo_t){v, shape, va, frame, F->gen, c->b.depth == 1, t};
  return t;
}

/* ---- values of the group ---- */
static tv_t *eval(fl_t *F, const drk_value_t *v, int frame);

/* Operand i of member n, in the frame of n's result. */
static tv_t *operand(fl_t *F, const drk_node_t *n, int i, int frame) {
  drk_lctx_t *c = F->c;
  const drk_value_t *v = n->inputs[i];
  const drk_value_t *u = under_views(F, v);
  if (made_in(F, u)) {
    int vf = vframe(F, u);
    tv_t *t = eval(F, u, vf);
    if (vf == F_ROW && frame == F_FULL) t = lw_bcast_row(c, t, F->P, F->s.rows, F->s.cols);
    return t;
  }
  unsigned fl = drk_op_info(n->op)->flags;
  bool ew = (fl & DRK_OPF_EW) || n->op == DRK_OP_BATCH_NORMALIZATION;
  if (u != v || !ew) {
    /* through in-group views (or into a reduction) the element order is the value's own */
    int vf = vframe(F, u);
    tv_t *t = ext_load(F, u, &u->shape, -1, vf);
    if (vf == F_ROW && frame == F_FULL) t = lw_bcast_row(c, t, F->P, F->s.rows, F->s.cols);
    return t;
  }
  int va = -1;
  if (n->op == DRK_OP_BATCH_NORMALIZATION && i >= 1 && n->outputs[0]->shape.rank >= 2) va = 1;
  return ext_load(F, v, &n->outputs[0]->shape, va, frame);
}

typedef struct ew_ctx {
  fl_t *F;
  const drk_node_t *n;
  int frame;
} ew_ctx_t;

static tv_t *ew_operand(void *p, int i) {
  ew_ctx_t *e = p;
  return operand(e->F, e->n, i, e->frame);
}

static tv_t *eval_ew(fl_t *F, const drk_node_t *n, int frame) {
  ew_ctx_t e = {F, n, frame};
  return drk_lower_ew_node(F->c, n, ew_operand, &e);
}

/* a normalization's scale or bias at offsets off (2-D chunk frame) */
static tv_t *param_load(fl_t *F, const drk_value_t *v, tv_t *off) {
  if (F->param[v->id]) return lw_load(F->c, F->param[v->id], off, F->mask2, 0);
  return lw_cdt(F->c, off, v->dtype, drk_value_const_f64(v, 0)); /* an immediate */
}

static drk_dtype_t acc_dtype(drk_dtype_t t) { return t == DRK_DT_F64 ? DRK_DT_F64 : DRK_DT_F32; }

/* the full output of a normalization anchor (its statistics are computed) */
static tv_t *eval_norm_out(fl_t *F, const drk_node_t *n) {
  drk_lctx_t *c = F->c;
  int k = F->pos[n->id];
  const drk_value_t *x = n->inputs[0];
  drk_dtype_t at = acc_dtype(x->dtype);
  DRK_ASSERT(F->st0[k] && F->st1[k]);
  tv_t *xv = lw_cast(c, operand(F, n, 0, F_FULL), at);
  tv_t *a2 = lw_bcast_row(c, F->st0[k], F->P, F->s.rows, F->s.cols);
  tv_t *b2 = lw_bcast_row(c, F->st1[k], F->P, F->s.rows, F->s.cols);
  if (n->op == DRK_OP_SOFTMAX) return BIN(MUL, UN(EXP, BIN(SUB, xv, a2)), b2);
  if (n->op == DRK_OP_LOG_SOFTMAX) return BIN(SUB, xv, b2);
  /* normalizations: (x - mean) * rstd * scale + bias */
  const drk_value_t *scale = n->n_inputs > 1 ? n->inputs[1] : NULL, *bias = n->n_inputs > 2 ? n->inputs[2] : NULL;
  tv_t *out = BIN(MUL, BIN(SUB, xv, a2), b2);
  int r = x->shape.rank;
  tv_t *poff = NULL, *boff = NULL;
  if (n->op == DRK_OP_LAYER_NORMALIZATION) {
    int axis = drk_axis_norm(drk_node_attr_int(n, "axis", -1), r);
    int nr = r - axis;
    int64_t rd[LW_MAX_RANK], sst[LW_MAX_RANK];
    for (int i = 0; i < nr; i++) rd[i] = x->shape.dims[axis + i].size;
    if (scale) {
      lw_bstrides(scale, nr, rd, sst);
      poff = lw_bcast_col(c, lw_affine(c, F->col, nr, rd, sst, 0), F->P, F->s.rows, F->s.cols);
    }
    if (bias) {
      if (scale && drk_shape_equal(&bias->shape, &scale->shape)) boff = poff;
      else {
        lw_bstrides(bias, nr, rd, sst);
        boff = lw_bcast_col(c, lw_affine(c, F->col, nr, rd, sst, 0), F->P, F->s.rows, F->s.cols);
      }
    }
  } else {
    int64_t C = x->shape.dims[1].size, S = 1;
    for (int i = 2; i < r; i++) S *= x->shape.dims[i].size;
    tv_t *prow;
    if (n->op == DRK_OP_INSTANCE_NORMALIZATION) {
      prow = BIN(REM, F->rowi, lw_ci(c, F->rowi, C));
      poff = lw_bcast_row(c, prow, F->P, F->s.rows, F->s.cols);
    } else {
      int64_t G = drk_node_attr_int(n, "num_groups", 1);
      prow = BIN(REM, F->rowi, lw_ci(c, F->rowi, G));
      if (scale && numel(scale) == C) {
        prow = BIN(MUL, prow, lw_ci(c, prow, C / G));
        tv_t *cc = S > 1 ? BIN(DIV, F->col, lw_ci(c, F->col, S)) : F->col;
        poff = BIN(ADD, lw_bcast_row(c, prow, F->P, F->s.rows, F->s.cols), lw_bcast_col(c, cc, F->P, F->s.rows, F->s.cols));
      } else {
        poff = lw_bcast_row(c, prow, F->P, F->s.rows, F->s.cols);
      }
    }
    boff = poff;
  }
  if (scale) out = BIN(MUL, out, lw_cast(c, param_load(F, scale, poff), at));
  if (bias) out = BIN(ADD, out, lw_cast(c, param_load(F, bias, boff), at));
  return out;
}

static tv_t *eval(fl_t *F, const drk_value_t *v, int frame) {
  drk_lctx_t *c = F->c;
  DRK_ASSERT(made_in(F, v) && !drk_op_aliases_input(v->def->op));
  if (frame == F_ROW) {
    if (F->row[v->id]) return F->row[v->id];
    /* per-row values are made outside every loop, in node order (lower_rows) */
    DRK_ASSERT(c->b.depth == 1);
  } else if (F->full[v->id] && F->full_gen[v->id] == F->gen) {
    return F->full[v->id];
  }
  const drk_node_t *n = v->def;
  tv_t *t;
  unsigned fl = drk_op_info(n->op)->flags;
  if ((fl & DRK_OPF_EW) || n->op == DRK_OP_BATCH_NORMALIZATION) {
    t = eval_ew(F, n, frame);
  } else {
    DRK_ASSERT(frame == F_FULL); /* reductions' per-row results are in F->row already */
    t = eval_norm_out(F, n);
  }
  if (frame == F_ROW) {
    F->row[v->id] = t;
  } else {
    F->full[v->id] = t;
    F->full_gen[v->id] = F->gen;
  }
  return t;
}

/* ---- flat groups: values at indexes ---- */
static tv_t *fx_zero(fl_t *F) {
  if (!F->zero) F->zero = lw_ci(F->c, F->ff.offs, 0);
  return F->zero;
}


static ix_t *ix_new(fl_t *F, int r, const int64_t *d, tv_t *lmask) {
  ix_t *x = drk_arena_alloc(F->c->m->arena, sizeof *x);
  memset(x, 0, sizeof *x);
  x->r = r;
  for (int k = 0; k < r; k++) x->d[k] = d[k];
  x->lmask = lmask;
  return x;
}

static void shape_dims(const drk_shape_t *s, int64_t *d) {
  for (int k = 0; k < s->rank; k++) d[k] = s->dims[k].size;
}

static bool same_dims(const ix_t *x, int r, const int64_t *d) {
  if (x->r != r) return false;
  for (int k = 0; k < r; k++)
    if (x->d[k] != d[k]) return false;
  return true;
}

/* coordinate k (NULL: 0) */
static tv_t *ix_co(fl_t *F, ix_t *x, int k) {
  if (x->d[k] == 1) return NULL;
  if (!x->co[k] && x->from_flat) x->co[k] = lw_coord(F->c, x->flat, x->r, x->d, k);
  return x->co[k];
}

static tv_t *ix_flat(fl_t *F, ix_t *x) {
  if (x->flat) return x->flat;
  int64_t rs[LW_MAX_RANK], s = 1;
  for (int k = x->r - 1; k >= 0; k--) {
    rs[k] = s;
    s *= x->d[k];
  }
  tv_t *acc = NULL;
  for (int k = 0; k < x->r; k++) acc = lw_addmul(F->c, acc, ix_co(F, x, k), rs[k]);
  x->flat = acc ? acc : fx_zero(F);
  return x->flat;
}

/* element offsets sum(coordinate k * st[k]) + base */
static tv_t *ix_affine(fl_t *F, ix_t *x, const int64_t *st, int64_t base) {
  drk_lctx_t *c = F->c;
  if (x->from_flat) return lw_affine(F->c, x->flat, x->r, x->d, st, base);
  tv_t *acc = NULL;
  for (int k = 0; k < x->r; k++) acc = lw_addmul(F->c, acc, ix_co(F, x, k), st[k]);
  if (!acc) return lw_ci(F->c, F->ff.offs, base);
  return base ? BIN(ADD, acc, lw_ci(F->c, acc, base)) : acc;
}

static ix_t *ix_intern(fl_t *F, ix_t *y);

/* y's coordinates from x's (same element count, other dims), run by run: the shortest runs
 * of consecutive dims whose sizes have equal products; a run's coordinates combine into one
 * index that the other side's run decomposes (copied when both runs are one dim). */
static void ix_regroup(fl_t *F, ix_t *x, ix_t *y) {
  int i = 0, j = 0;
  while (i < x->r || j < y->r) {
    int i0 = i, j0 = j;
    int64_t pi = 1, pj = 1;
    do {
      if (i < x->r && (pi <= pj || j == y->r)) pi *= x->d[i++];
      else pj *= y->d[j++];
    } while (pi != pj && (i < x->r || j < y->r));
    /* size-1 dims at the ends of the run go with it */
    while (i < x->r && x->d[i] == 1) i++;
    while (j < y->r && y->d[j] == 1) j++;
    tv_t *comb = NULL;
    int64_t st = 1;
    for (int k = i - 1; k >= i0; k--) {
      comb = lw_addmul(F->c, comb, ix_co(F, x, k), st);
      st *= x->d[k];
    }
    int nbig = 0;
    for (int k = j0; k < j; k++) nbig += y->d[k] > 1;
    for (int k = j0; k < j; k++)
      y->co[k] = y->d[k] == 1 || !comb ? NULL : nbig == 1 ? comb : lw_coord(F->c, comb, j - j0, y->d + j0, k - j0);
  }
}

typedef struct asmemo { /* memo of ix_as for coordinate indexes */
  const ix_t *from;
  ix_t *to;
  struct asmemo *next;
} asmemo_t;

/* x seen over shape s (same element count): a flat index keeps its flat value (one index
 * per flat, mask and dims), coordinates are regrouped */
static ix_t *ix_as(fl_t *F, ix_t *x, const drk_shape_t *s) {
  int64_t d[LW_MAX_RANK];
  shape_dims(s, d);
  if (same_dims(x, s->rank, d)) return x;
  if (!x->from_flat) {
    for (asmemo_t *m = F->as; m; m = m->next)
      if (m->from == x && same_dims(m->to, s->rank, d)) return m->to;
    ix_t *y = ix_new(F, s->rank, d, x->lmask);
    ix_regroup(F, x, y);
    y = ix_intern(F, y);
    asmemo_t *m = drk_arena_alloc(F->c->m->arena, sizeof *m);
    *m = (asmemo_t){x, y, F->as};
    F->as = m;
    return y;
  }
  tv_t *flat = ix_flat(F, x);
  for (ix_t *y = F->ixs; y; y = y->next)
    if (y->from_flat && y->flat == flat && y->lmask == x->lmask && same_dims(y, s->rank, d)) return y;
  ix_t *y = ix_new(F, s->rank, d, x->lmask);
  y->flat = flat;
  y->from_flat = true;
  y->next = F->ixs;
  F->ixs = y;
  return y;
}

/* the index y (coordinates made) as an existing one when equal */
static ix_t *ix_intern(fl_t *F, ix_t *y) {
  for (int k = 0; k < y->r; k++)
    if (y->d[k] == 1) y->co[k] = NULL;
  for (ix_t *z = F->ixs; z; z = z->next) {
    if (z->from_flat || z->lmask != y->lmask || !same_dims(z, y->r, y->d)) continue;
    bool eq = true;
    for (int k = 0; k < y->r && eq; k++) eq = z->co[k] == y->co[k];
    if (eq) return z;
  }
  y->next = F->ixs;
  F->ixs = y;
  return y;
}

/* coordinate expression c0 * step + start (c0 NULL: 0) */
static tv_t *lin(fl_t *F, tv_t *c0, int64_t step, int64_t start) {
  drk_lctx_t *c = F->c;
  if (!c0) return start ? lw_ci(c, F->ff.offs, start) : NULL;
  tv_t *t = step == 1 ? c0 : BIN(MUL, c0, lw_ci(c, c0, step));
  return start ? BIN(ADD, t, lw_ci(c, t, start)) : t;
}

/* lo <= t < hi as a mask (NULL: always; checks the bounds that can fail: t's range is
 * [tlo, thi)) */
static tv_t *in_range(fl_t *F, tv_t *t, int64_t tlo, int64_t thi, int64_t lo, int64_t hi) {
  drk_lctx_t *c = F->c;
  t = t ? t : fx_zero(F);
  tv_t *m = NULL;
  if (tlo < lo) m = lw_cmp(c, "ge", t, lw_ci(c, t, lo));
  if (thi > hi) m = lw_and_mask(c, m, lw_cmp(c, "lt", t, lw_ci(c, t, hi)));
  return m;
}

/* The index of input i of member n (an elementwise broadcast operand or a data movement
 * node's data input) for n's result at index x; *pred (Concat/Pad): the lanes that read
 * this input (NULL: all). */
static ix_t *ix_map(fl_t *F, ix_t *x, const drk_node_t *n, int i, tv_t **pred) {
  for (ixmap_t *m = F->maps; m; m = m->next)
    if (m->from == x && m->n == n && m->i == i) {
      if (pred) *pred = m->pred;
      return m->to;
    }
  drk_lctx_t *c = F->c;
  const drk_value_t *u = n->inputs[i];
  const mvp_t *mp = F->mv[F->pos[n->id]];
  int64_t ud[LW_MAX_RANK];
  shape_dims(&u->shape, ud);
  int ru = u->shape.rank, r = x->r;
  ix_t *y = ix_new(F, ru, ud, x->lmask);
  tv_t *p = NULL;
  switch (n->op) {
  case DRK_OP_TRANSPOSE:
    for (int k = 0; k < r; k++) y->co[mp->perm[k]] = ix_co(F, x, k);
    break;
  case DRK_OP_SLICE: case DRK_OP_SPLIT:
    for (int k = 0; k < r; k++) y->co[k] = lin(F, ix_co(F, x, k), mp->step[k], mp->start[k]);
    break;
  case DRK_OP_CONCAT: {
    int a = drk_axis_norm(drk_node_attr_int(n, "axis", 0), r);
    int64_t start = 0;
    for (int j = 0; j < i; j++) start += n->inputs[j]->shape.dims[a].size;
    for (int k = 0; k < r; k++) y->co[k] = ix_co(F, x, k);
    tv_t *e = lin(F, y->co[a], 1, -start);
    p = in_range(F, e, -start, x->d[a] - start, 0, ud[a]);
    y->co[a] = e;
    break;
  }
  case DRK_OP_PAD:
    for (int k = 0; k < r; k++) {
      tv_t *e = lin(F, ix_co(F, x, k), 1, -mp->pb[k]);
      p = lw_and_mask(c, p, in_range(F, e, -mp->pb[k], x->d[k] - mp->pb[k], 0, ud[k]));
      y->co[k] = e;
    }
    break;
  default: /* Expand, elementwise broadcast: right-aligned, 0 on broadcast dims */
    for (int k = 0; k < ru; k++) y->co[k] = ud[k] == 1 ? NULL : ix_co(F, x, k + r - ru);
    break;
  }
  y->lmask = lw_and_mask(c, x->lmask, p);
  y = ix_intern(F, y);
  ixmap_t *m = drk_arena_alloc(c->m->arena, sizeof *m);
  *m = (ixmap_t){x, n, i, y, p, F->maps};
  F->maps = m;
  if (pred) *pred = p;
  return y;
}

/* outside value v at element offsets off under mask (off NULL: v is an immediate) */
static tv_t *fx_load(fl_t *F, const drk_value_t *v, tv_t *off, tv_t *mask) {
  drk_lctx_t *c = F->c;
  for (lmemo_t *m = F->loads; m; m = m->next)
    if (m->v == v && m->off == off && m->mask == mask) return m->t;
  tv_t *t;
  if (!off) {
    t = imm_tile(F, v, &F->ff.fr);
  } else {
    DRK_ASSERT(F->param[v->id]);
    if (off != F->ff.offs || mask != F->ff.mask || F->stored) F->not_inplace[v->id] = true;
    t = lw_load(c, F->param[v->id], off, mask, 0);
  }
  lmemo_t *m = drk_arena_alloc(c->m->arena, sizeof *m);
  *m = (lmemo_t){v, off, mask, t, F->loads};
  F->loads = m;
  return t;
}

static tv_t *fx_at(fl_t *F, const drk_value_t *v, ix_t *x);

typedef struct fx_ctx {
  fl_t *F;
  const drk_node_t *n;
  ix_t *x;
} fx_ctx_t;

/* operand i of elementwise member n whose result is at index x */
static tv_t *fx_operand(void *p, int i) {
  fx_ctx_t *e = p;
  fl_t *F = e->F;
  const drk_node_t *n = e->n;
  const drk_value_t *u = n->inputs[i], *y = n->outputs[0];
  ix_t *x = e->x;
  if (immediate(u)) return fx_load(F, u, NULL, NULL);
  if (made_in(F, u)) return fx_at(F, u, numel(u) == numel(y) ? ix_as(F, x, &u->shape) : ix_map(F, x, n, i, NULL));
  int64_t st[LW_MAX_RANK];
  tv_t *off;
  if (n->op == DRK_OP_BATCH_NORMALIZATION && i >= 1 && y->shape.rank >= 2) {
    for (int k = 0; k < x->r; k++) st[k] = k == 1 ? 1 : 0;
    off = ix_affine(F, x, st, 0);
  } else if (numel(u) == numel(y)) {
    off = ix_flat(F, x); /* broadcast with equal counts: same element order */
  } else {
    lw_bstrides(u, x->r, x->d, st);
    off = ix_affine(F, x, st, 0);
  }
  return fx_load(F, u, off, x->lmask);
}

/* data movement member n's result v at index x */
static tv_t *fx_move(fl_t *F, const drk_node_t *n, const drk_value_t *v, ix_t *x) {
  drk_lctx_t *c = F->c;
  if (n->op == DRK_OP_CONCAT) {
    tv_t *val[16], *pred[16];
    int nv = 0;
    bool mixed = false;
    int a = drk_axis_norm(drk_node_attr_int(n, "axis", 0), x->r);
    for (int j = 0; j < n->n_inputs && nv < 16; j++) {
      if (n->inputs[j]->shape.dims[a].size == 0) continue;
      ix_t *y = ix_map(F, x, n, j, &pred[nv]);
      val[nv] = fx_at(F, n->inputs[j], y);
      mixed |= val[nv]->type.dtype != val[0]->type.dtype;
      nv++;
    }
    tv_t *res = NULL;
    for (int j = 0; j < nv; j++) {
      tv_t *t = mixed ? lw_cast(c, val[j], lw_compute_dtype(v->dtype)) : val[j];
      res = res ? lw_sel(c, pred[j], t, res) : t;
    }
    return res;
  }
  tv_t *pred = NULL;
  tv_t *t = fx_at(F, n->inputs[0], ix_map(F, x, n, 0, &pred));
  if (n->op == DRK_OP_PAD && pred) t = lw_sel(c, pred, t, lw_cdt(c, t, t->type.dtype, F->mv[F->pos[n->id]]->padv));
  return t;
}

/* v (read or made by the group) at index x over v's shape */
static tv_t *fx_at(fl_t *F, const drk_value_t *v, ix_t *x) {
  drk_lctx_t *c = F->c;
  if (immediate(v)) return fx_load(F, v, NULL, NULL);
  if (!made_in(F, v)) return fx_load(F, v, ix_flat(F, x), x->lmask);
  const drk_node_t *n = v->def;
  if (drk_op_aliases_input(n->op)) return fx_at(F, n->inputs[0], ix_as(F, x, &n->inputs[0]->shape));
  for (vmemo_t *m = F->vm[v->id]; m; m = m->next)
    if (m->ix == x) return m->t;
  unsigned fl = drk_op_info(n->op)->flags;
  tv_t *t;
  if ((fl & DRK_OPF_EW) || n->op == DRK_OP_BATCH_NORMALIZATION) {
    fx_ctx_t e = {F, n, x};
    t = drk_lower_ew_node(c, n, fx_operand, &e);
  } else {
    t = fx_move(F, n, v, x);
  }
  vmemo_t *m = drk_arena_alloc(c->m->arena, sizeof *m);
  *m = (vmemo_t){x, t, F->vm[v->id]};
  F->vm[v->id] = m;
  return t;
}

/* per value id, how drk_lower_fused sees it used */
enum { USED = 1, LEAVES = 2 }; /* a graph output or read by a live node (outside the group) */

/* The constant parameters of data movement member n (errors name n); use: per value id. */
static bool move_params(fl_t *F, const drk_node_t *n, const unsigned char *use) {
  drk_lctx_t *c = F->c;
  const drk_value_t *x = n->inputs[0];
  int r = x->shape.rank;
  int64_t xd[LW_MAX_RANK];
  shape_dims(&x->shape, xd);
  mvp_t *mp = drk_arena_alloc(c->m->arena, sizeof *mp);
  const drk_node_t *keep = c->node;
  size_t keep_i = c->node_index;
  c->node = n;
  c->node_index = (size_t)F->pos[n->id];
  bool ok = lw_read_move_params(c, n, r, xd, mp);
  F->mv[F->pos[n->id]] = mp;
  if (ok && n->op == DRK_OP_SPLIT) {
    int a = drk_axis_norm(drk_node_attr_int(n, "axis", 0), r);
    if (a < 0 || a >= r) {
      ok = lw_err(c, "axis out of range");
    } else {
      /* the one result used: its offset along the axis */
      for (int j = 0; j < n->n_outputs && !(use[n->outputs[j]->id] & USED); j++)
        mp->start[a] += n->outputs[j]->shape.dims[a].size;
    }
  }
  c->node = keep;
  c->node_index = keep_i;
  return ok;
}

/* ---- row frame ---- */
static void chunk(fl_t *F, tv_t *kb) {
  drk_lctx_t *c = F->c;
  F->gen++;
  F->col = BIN(ADD, lw_splat(c, kb, &F->ci->type), F->ci);
  tv_t *cmask = lw_cmp(c, "lt", F->col, lw_ci(c, F->col, F->R));
  F->lin2 = BIN(ADD, F->rowR2, lw_bcast_col(c, F->col, F->P, F->s.rows, F->s.cols));
  F->mask2 = BIN(AND, F->rmask2, lw_bcast_col(c, cmask, F->P, F->s.rows, F->s.cols));
}

/* A chunk loop over the row (split rows: this program's columns). One chunk (F->one: the row,
 * or a split program's columns): no loop; the chunk is made once, at the first loop, and F->gen
 * stays, so that every full value (the row's loads first) is made once and kept in registers
 * through every pass. */
static drk_tile_op_t *loop_begin(fl_t *F, int n, tv_t **init) {
  drk_lctx_t *c = F->c;
  if (F->one) {
    if (!F->col) chunk(F, F->lb ? F->lb : lw_sci(c, c->it, 0));
    return NULL;
  }
  drk_tile_op_t *f = drk_tile_build_for_begin(&c->b, F->lb ? F->lb : lw_sci(c, c->it, 0), F->ub ? F->ub : lw_sci(c, c->it, F->R),
                                               lw_sci(c, c->it, F->s.cols), n, init);
  chunk(F, f->regions[0]->args[0]);
  return f;
}

static tv_t *loop_end(fl_t *F, int n, tv_t **y) {
  if (F->one) return n ? y[0] : NULL;
  drk_tile_op_t *f = drk_tile_build_for_end(&F->c->b, n, y);
  F->gen++; /* chunk tiles are out of scope now */
  F->lin2 = F->mask2 = F->col = NULL;
  return n ? f->results[0] : NULL;
}

static tv_t *acc_tile(fl_t *F, drk_dtype_t t, double init) {
  int64_t d[2] = {F->s.rows, F->s.cols};
  return drk_tile_build_const_float(&F->c->b, init, drk_tile_type_tile(t, 2, d, F->P));
}

static tv_t *reduce_rows(fl_t *F, tv_t *t, const char *comb) {
  drk_lctx_t *c = F->c;
  int64_t d = F->s.rows;
  drk_tile_op_t *op = drk_tile_build(&c->b, DRK_TOP_REDUCE, 1, &t, 1,
                                     (drk_tile_type_t[]){drk_tile_type_tile(t->type.dtype, 1, &d, F->Lr)});
  drk_tile_op_set_int(c->m, op, "axis", 1);
  drk_tile_op_set_ident(c->m, op, "combiner", comb);
  return op->results[0];
}

/* One loop over the row of anchor n's input: acc = acc (+|max|min) f(x) over valid lanes.
 * kind: 0 sum of x, 1 sum of x*x, 2 max, 3 min, 4 sum of exp(x - m), 5 sum of (x - m)^2. */
static tv_t *row_loop(fl_t *F, const drk_node_t *n, int kind, tv_t *m) {
  drk_lctx_t *c = F->c;
  drk_dtype_t at = acc_dtype(n->inputs[0]->dtype);
  double id = kind == 2 ? -INFINITY : kind == 3 ? INFINITY : 0;
  tv_t *init = acc_tile(F, at, id);
  drk_tile_op_t *f = loop_begin(F, 1, &init);
  tv_t *acc = f ? f->regions[0]->args[1] : init;
  tv_t *xv = lw_cast(c, operand(F, n, 0, F_FULL), at);
  tv_t *m2 = m ? lw_bcast_row(c, m, F->P, F->s.rows, F->s.cols) : NULL;
  if (kind == 1) xv = BIN(MUL, xv, xv);
  if (kind == 4) xv = UN(EXP, BIN(SUB, xv, m2));
  if (kind == 5) {
    xv = BIN(SUB, xv, m2);
    xv = BIN(MUL, xv, xv);
  }
  xv = lw_sel(c, F->mask2, xv, lw_cf(c, xv, id));
  tv_t *nacc = lw_bin(c, kind == 2 ? DRK_TOP_MAX : kind == 3 ? DRK_TOP_MIN : DRK_TOP_ADD, acc, xv);
  tv_t *r = loop_end(F, 1, &nacc);
  return reduce_rows(F, r, kind == 2 ? "max" : kind == 3 ? "min" : "sum");
}

static tv_t *finite_max(fl_t *F, tv_t *m) {
  drk_lctx_t *c = F->c;
  /* rows of all -inf: keep exp finite */
  return lw_sel(c, lw_cmp(c, "eq", m, lw_cf(c, m, -INFINITY)), lw_cf(c, m, 0), m);
}

/* the per-row work of anchor n at its place in node order */
static bool split_anchor(const drk_node_t *n) {
  switch (n->op) {
  case DRK_OP_LAYER_NORMALIZATION: case DRK_OP_INSTANCE_NORMALIZATION: case DRK_OP_GROUP_NORMALIZATION:
  case DRK_OP_SOFTMAX: case DRK_OP_LOG_SOFTMAX:
    return true;
  default: return false;
  }
}

/* scratch slot q (0, 1) of split sp for the tile's rows: ws[(q * SP + sp) * rows + row] */
static tv_t *ws_off(fl_t *F, int q, tv_t *sp) {
  drk_lctx_t *c = F->c;
  tv_t *base = BIN(MUL, BIN(ADD, sp, lw_sci(c, c->it, q * F->SP)), lw_sci(c, c->it, F->rows));
  return BIN(ADD, F->rowi, lw_splat(c, base, &F->rowi->type));
}

/* Split rows, kernel 1: this program's partial statistics of anchor n over its columns
 * [lb, ub): norms the mean and the sum of squared deviations from it (Chan et al.'s pairwise
 * form, so that kernel 2's combination loses nothing against a two-pass variance), softmax
 * the (finite) max and the sum of exp(x - max). */
static void split_partial(fl_t *F, const drk_node_t *n) {
  drk_lctx_t *c = F->c;
  tv_t *sp = lw_pid(c, 1), *a, *b;
  if (n->op == DRK_OP_SOFTMAX || n->op == DRK_OP_LOG_SOFTMAX) {
    a = finite_max(F, row_loop(F, n, 2, NULL));
    b = row_loop(F, n, 4, a);
  } else {
    /* columns of this split: min(ub, R) - lb (never 0: kernel 1's grid has no empty split) */
    tv_t *cnt = BIN(SUB, BIN(MIN, F->ub, lw_sci(c, c->it, F->R)), F->lb);
    tv_t *s1 = row_loop(F, n, 0, NULL);
    a = BIN(DIV, s1, lw_splat(c, lw_cast(c, cnt, s1->type.dtype), &s1->type));
    b = row_loop(F, n, 5, a);
  }
  lw_store(c, F->pws, ws_off(F, 0, sp), a, F->rmask);
  lw_store(c, F->pws, ws_off(F, 1, sp), b, F->rmask);
}

/* Split rows, kernel 2: anchor n's row statistics from the SP partials, in split order. */
static void split_combine(fl_t *F, const drk_node_t *n, tv_t **out_a, tv_t **out_b) {
  drk_lctx_t *c = F->c;
  tv_t *pa[128] = {0}, *pb[128] = {0};
  DRK_ASSERT(F->SP >= 2 && F->SP <= 128);
  for (int64_t i = 0; i < F->SP; i++) {
    tv_t *sp = lw_sci(c, c->it, i);
    pa[i] = lw_load(c, F->pws, ws_off(F, 0, sp), F->rmask, 0);
    pb[i] = lw_load(c, F->pws, ws_off(F, 1, sp), F->rmask, 0);
  }
  if (n->op == DRK_OP_SOFTMAX || n->op == DRK_OP_LOG_SOFTMAX) {
    tv_t *m = pa[0];
    for (int64_t i = 1; i < F->SP; i++) m = BIN(MAX, m, pa[i]);
    tv_t *sum = NULL;
    for (int64_t i = 0; i < F->SP; i++) {
      tv_t *t = BIN(MUL, pb[i], UN(EXP, BIN(SUB, pa[i], m)));
      sum = sum ? BIN(ADD, sum, t) : t;
    }
    *out_a = m;
    *out_b = sum;
    return;
  }
  int64_t span = F->cps * F->s.cols;
  tv_t *mean = NULL;
  for (int64_t i = 0; i < F->SP; i++) {
    int64_t ni = F->R - i * span < span ? F->R - i * span : span;
    tv_t *t = BIN(MUL, pa[i], lw_cf(c, pa[i], (double)ni));
    mean = mean ? BIN(ADD, mean, t) : t;
  }
  mean = BIN(DIV, mean, lw_cf(c, mean, (double)F->R));
  tv_t *m2 = NULL;
  for (int64_t i = 0; i < F->SP; i++) {
    int64_t ni = F->R - i * span < span ? F->R - i * span : span;
    tv_t *d = BIN(SUB, pa[i], mean);
    tv_t *t = BIN(ADD, pb[i], BIN(MUL, BIN(MUL, d, d), lw_cf(c, d, (double)ni)));
    m2 = m2 ? BIN(ADD, m2, t) : t;
  }
  *out_a = mean;
  *out_b = m2;
}

static void anchor_stats(fl_t *F, const drk_node_t *n) {
  drk_lctx_t *c = F->c;
  int k = F->pos[n->id];
  c->b.loc = n->loc;
  double R = (double)F->R;
  if (F->mode == SPLIT_PARTIAL) {
    split_partial(F, n);
    return;
  }
  if (F->mode == SPLIT_FINISH) {
    tv_t *a, *b;
    split_combine(F, n, &a, &b);
    if (n->op == DRK_OP_SOFTMAX || n->op == DRK_OP_LOG_SOFTMAX) {
      F->st0[k] = a;
      F->st1[k] = n->op == DRK_OP_SOFTMAX ? BIN(DIV, lw_cf(c, b, 1), b) : BIN(ADD, a, UN(LOG, b));
    } else {
      double eps = drk_node_attr_float(n, "epsilon", 1e-5);
      F->st0[k] = a;
      F->st1[k] = UN(RSQRT, BIN(ADD, BIN(DIV, b, lw_cf(c, b, R)), lw_cf(c, b, eps)));
    }
    return;
  }
  switch (n->op) {
  case DRK_OP_REDUCE_SUM: case DRK_OP_REDUCE_MEAN: case DRK_OP_REDUCE_SUM_SQUARE: case DRK_OP_REDUCE_L2: {
    bool sq = n->op == DRK_OP_REDUCE_SUM_SQUARE || n->op == DRK_OP_REDUCE_L2;
    tv_t *r = row_loop(F, n, sq ? 1 : 0, NULL);
    if (n->op == DRK_OP_REDUCE_MEAN) r = BIN(DIV, r, lw_cf(c, r, R));
    if (n->op == DRK_OP_REDUCE_L2) r = UN(SQRT, r);
    F->row[n->outputs[0]->id] = r;
    return;
  }
  case DRK_OP_REDUCE_MAX: case DRK_OP_REDUCE_MIN:
    F->row[n->outputs[0]->id] = row_loop(F, n, n->op == DRK_OP_REDUCE_MAX ? 2 : 3, NULL);
    return;
  case DRK_OP_REDUCE_LOG_SUM_EXP: {
    tv_t *m = finite_max(F, row_loop(F, n, 2, NULL));
    tv_t *s = row_loop(F, n, 4, m);
    F->row[n->outputs[0]->id] = BIN(ADD, UN(LOG, s), m);
    return;
  }
  case DRK_OP_SOFTMAX: case DRK_OP_LOG_SOFTMAX: {
    tv_t *m = finite_max(F, row_loop(F, n, 2, NULL));
    tv_t *s = row_loop(F, n, 4, m);
    F->st0[k] = m;
    F->st1[k] = n->op == DRK_OP_SOFTMAX ? BIN(DIV, lw_cf(c, s, 1), s) : BIN(ADD, m, UN(LOG, s));
    return;
  }
  default: { /* Layer/Instance/GroupNormalization */
    double eps = drk_node_attr_float(n, "epsilon", 1e-5);
    tv_t *s1 = row_loop(F, n, 0, NULL);
    tv_t *mean = BIN(DIV, s1, lw_cf(c, s1, R));
    tv_t *s2 = row_loop(F, n, 5, mean);
    F->st0[k] = mean;
    F->st1[k] = UN(RSQRT, BIN(ADD, BIN(DIV, s2, lw_cf(c, s2, R)), lw_cf(c, s2, eps)));
    return;
  }
  }
}

/* ---- the kernel ---- */
/* In-place candidates of a FLAT kernel (drk_lowered_t.inplace): every stored value may take
 * the bytes of an outside input of the frame's element count and its element size (whole
 * bytes) that every thread loaded only at its own flat offsets, before its first store. */
static void flat_inplace(fl_t *F) {
  for (int i = 0; i < F->gr->n_nodes; i++) {
    const drk_node_t *n = F->g->nodes[F->gr->nodes[i]];
    for (int j = 0; j < n->n_inputs; j++) {
      const drk_value_t *v = n->inputs[j];
      if (!v || made_in(F, v) || immediate(v) || !F->param[v->id] || F->not_inplace[v->id] || numel(v) != F->N)
        continue;
      F->not_inplace[v->id] = true; /* declared once */
      for (int k = 0; k < F->gr->n_nodes; k++) {
        const drk_value_t *y = F->g->nodes[F->gr->nodes[k]]->outputs[0];
        if (F->store[y->id] && numel(y) == F->N && drk_dtype_bits(y->dtype) == drk_dtype_bits(v->dtype) &&
            drk_dtype_bits(y->dtype) >= 8)
          lw_inplace(F->c, y, v);
      }
    }
  }
}

static int64_t padded(int64_t n, int64_t block) { return (n + block - 1) / block * block; }

/* The flat schedule over n; a group with data movement takes at most 1024 elements per
 * program (8 per thread): every element carries its own index math, so the 4096-element
 * programs of large streams cost registers without adding memory-level parallelism (LLaMA's
 * q rope group, fp16, ptxas -v / drkc -v: 4096 elements 175 registers on sm_90a and 169
 * VGPRs on gfx942, 1024 elements 40 and 47), unless flat.move_block pins another block for
 * groups with that many elements. */
static drk_schedule_t flat_sched(const drk_lctx_t *c, int64_t n, bool moving) {
  drk_schedule_t s = drk_sched_flat(n);
  int pin;
  if (!moving) return s;
  if (drk_knob_pinned(&c->o.knobs, DRK_KNOB_FLAT_MOVE_BLOCK, &pin)) return n >= pin ? drk_sched_flat_block(pin) : s;
  return s.block_elems > 1024 ? drk_sched_flat(1024) : s;
}

/* One kernel of group gr (part 0; part 1: the second kernel of split rows, named `_1`). */
static bool emit_kernel(fl_t *F, const drk_node_t *last, const drk_node_t *head, bool moving, int part) {
  drk_lctx_t *c = F->c;
  const drk_graph_t *g = F->g;
  const drk_fusion_group_t *gr = F->gr;
  drk_arena_t *A = c->m->arena;
  /* index dtype, from the largest index any access can form */
  int64_t big = 0;
  if (F->flat) {
    F->N = gr->n;
    big = padded(F->N, flat_sched(c, F->N, moving).block_elems);
  } else {
    F->rows = gr->n;
    F->R = gr->R;
    big = padded(F->rows, F->s.rows) * F->R + padded(F->R, F->s.cols);
  }
  for (int i = 0; i < gr->n_nodes; i++) {
    const drk_node_t *n = g->nodes[gr->nodes[i]];
    for (int j = 0; j < n->n_inputs; j++)
      if (n->inputs[j] && numel(n->inputs[j]) > big) big = numel(n->inputs[j]);
    /* with data movement, indexes of every value of the group are formed (and lanes of a
     * branch not taken go past them) */
    for (int j = 0; moving && j < n->n_outputs; j++)
      if (n->outputs[j] && 2 * numel(n->outputs[j]) > big) big = 2 * numel(n->outputs[j]);
  }
  c->node = last;
  c->node_index = (size_t)gr->last;
  lw_kernel_begin(c, lw_index_dtype_for(big));
  c->k->name = drk_arena_printf(A, part ? "k%d_fused_%s_%d" : "k%d_fused_%s", gr->last, drk_op_name(head->op), part);

  /* parameters: outside inputs in node order (data inputs of movement nodes: their other
   * inputs are constants read now), then stored values */
  int np = 0;
  for (int i = 0; i < gr->n_nodes; i++) {
    const drk_node_t *n = g->nodes[gr->nodes[i]];
    int nin = drk_op_aliases_input(n->op) || (F->mv[gr->nodes[i]] && n->op != DRK_OP_CONCAT) ? 1 : n->n_inputs;
    for (int j = 0; j < nin; j++) {
      const drk_value_t *v = n->inputs[j];
      if (!v || made_in(F, v) || F->param[v->id] || immediate(v)) continue;
      F->param[v->id] = lw_param_buf(c, v, drk_arena_printf(A, "x%d", np++));
    }
    if (drk_op_aliases_input(n->op) && !part) lw_alias(c, n->outputs[0], n->inputs[0]);
  }
  np = 0;
  for (int i = 0; i < gr->n_nodes; i++) {
    const drk_node_t *n = g->nodes[gr->nodes[i]];
    for (int o = 0; o < n->n_outputs; o++) {
      const drk_value_t *y = n->outputs[o];
      if (y && F->store[y->id]) F->param[y->id] = lw_param_buf(c, y, drk_arena_printf(A, "y%d", np++));
    }
  }

  if (F->flat) {
    lw_flat_begin_sched(c, F->N, flat_sched(c, F->N, moving), &F->ff);
    F->root = ix_new(F, 1, &F->N, F->ff.mask);
    F->root->flat = F->ff.offs;
    F->root->from_flat = true;
    F->ixs = F->root;
    for (int i = 0; i < gr->n_nodes; i++) {
      const drk_node_t *n = g->nodes[gr->nodes[i]];
      for (int o = 0; o < n->n_outputs; o++) {
        const drk_value_t *y = n->outputs[o];
        if (!y || !F->store[y->id]) continue;
        DRK_ASSERT(numel(y) == F->N); /* fuse.c: a flat group stores values of one count */
        lw_store(c, F->param[y->id], F->ff.offs, fx_at(F, y, ix_as(F, F->root, &y->shape)), F->ff.mask);
        F->stored = true;
      }
    }
    lw_flat_end(c, &F->ff);
    flat_inplace(F);
    return true;
  }

  /* row frame (lower_reduce.c's rv_begin with one contiguous reduced run) */
  F->P = drk_sched_rows_layout(c->m, &F->s, true);
  F->Lr = drk_tile_layout_slice(c->m, F->P, 1);
  F->Lc = drk_tile_layout_slice(c->m, F->P, 0);
  tv_t *ri = lw_cast(c, lw_range(c, F->s.rows, F->Lr), c->it);
  tv_t *base = BIN(MUL, lw_pid(c, 0), lw_sci(c, c->it, F->s.rows));
  F->rowi = BIN(ADD, lw_splat(c, base, &ri->type), ri);
  /* the row count at launch (runtime sizes; split rows index their scratch by it: constant) */
  tv_t *nrows = F->mode == SPLIT_NONE ? lw_size_param(c, "rows", F->rows) : NULL;
  F->rmask = lw_size_lt(c, F->rowi, nrows, F->rows);
  F->rowR2 = lw_bcast_row(c, BIN(MUL, F->rowi, lw_ci(c, F->rowi, F->R)), F->P, F->s.rows, F->s.cols);
  F->rmask2 = lw_bcast_row(c, F->rmask, F->P, F->s.rows, F->s.cols);
  F->ci = lw_cast(c, lw_range(c, F->s.cols, F->Lc), c->it);
  /* one chunk per program: the whole row, or (split rows) all of this program's columns */
  F->one = F->mode == SPLIT_NONE ? F->R <= F->s.cols : F->cps == 1;
  F->col = NULL;
  if (F->mode != SPLIT_NONE) {
    F->pws = lw_param_scratch(c, F->ws, F->ws_dtype, "ws");
    F->lb = BIN(MUL, lw_pid(c, 1), lw_sci(c, c->it, F->cps * F->s.cols));
    F->ub = BIN(ADD, F->lb, lw_sci(c, c->it, F->cps * F->s.cols));
  }

  bool any_full = false;
  for (int i = 0; i < gr->n_nodes; i++) {
    const drk_node_t *n = g->nodes[gr->nodes[i]];
    const drk_value_t *y = n->outputs[0];
    if (drk_op_aliases_input(n->op)) continue;
    unsigned fl = drk_op_info(n->op)->flags;
    bool ew = (fl & DRK_OPF_EW) || n->op == DRK_OP_BATCH_NORMALIZATION;
    if (!ew) anchor_stats(F, n);
    else if (vframe(F, y) == F_ROW && F->mode != SPLIT_PARTIAL) eval(F, y, F_ROW);
    any_full |= F->store[y->id] && vframe(F, y) == F_FULL && F->mode != SPLIT_PARTIAL;
  }
  if (any_full) {
    loop_begin(F, 0, NULL);
    for (int i = 0; i < gr->n_nodes; i++) {
      const drk_value_t *y = g->nodes[gr->nodes[i]]->outputs[0];
      if (F->store[y->id] && vframe(F, y) == F_FULL) lw_store(c, F->param[y->id], F->lin2, eval(F, y, F_FULL), F->mask2);
    }
    loop_end(F, 0, NULL);
  }
  for (int i = 0; i < gr->n_nodes; i++) {
    const drk_value_t *y = g->nodes[gr->nodes[i]]->outputs[0];
    /* split rows: every program of a row stores the same row values */
    if (F->store[y->id] && vframe(F, y) == F_ROW && F->mode != SPLIT_PARTIAL)
      lw_store(c, F->param[y->id], F->rowi, F->row[y->id], F->rmask);
  }
  drk_schedule_t s = F->s;
  s.split_rows = F->mode != SPLIT_NONE ? (int)F->SP : 0;
  lw_kernel_end(c, (F->rows + s.rows - 1) / s.rows, F->mode != SPLIT_NONE ? F->SP : 1, 1, s.warps, 0, &s);
  lw_grid_from(c, 0, nrows, s.rows);
  return true;
}

/* the group's one anchor when it is a normalization or softmax (the groups that can split
 * their rows), else NULL */
static const drk_node_t *split_group_anchor(const fl_t *F) {
  const drk_node_t *anchor = NULL;
  int anchors = 0;
  for (int i = 0; i < F->gr->n_nodes; i++) {
    const drk_node_t *n = F->g->nodes[F->gr->nodes[i]];
    unsigned fl = drk_op_info(n->op)->flags;
    if (drk_op_aliases_input(n->op) || (fl & DRK_OPF_EW) || n->op == DRK_OP_BATCH_NORMALIZATION) continue;
    anchors++;
    anchor = n;
  }
  return anchors == 1 && split_anchor(anchor) ? anchor : NULL;
}

static bool can_split(const fl_t *F) { return split_group_anchor(F) != NULL; }

/* Split rows (drk_sched_rows_split, knob rows.split): a row group whose one anchor is a
 * normalization or softmax over few long rows (the row schedule put warps along the row) gets
 * two kernels over (row tiles, SP): partial statistics of each program's columns into scratch,
 * then their combination and the writes of each program's columns. */
static void plan_split(fl_t *F) {
  drk_lctx_t *c = F->c;
  const drk_node_t *anchor = split_group_anchor(F);
  if (!anchor || F->s.col_warps <= 1) return;
  F->cps = drk_sched_rows_split_plan(&F->s, F->rows, F->R, true, lw_target_sms(&c->o), &c->o.knobs);
  F->SP = F->s.split_rows;
  if (F->SP <= 1) return;
  F->ws_dtype = acc_dtype(anchor->inputs[0]->dtype);
  F->ws = lw_scratch_new(c, (uint64_t)(2 * F->SP * F->rows) * (uint64_t)drk_dtype_bits(F->ws_dtype) / 8);
}

/* forget the first kernel's values before building the second */
static void reset_kernel_state(fl_t *F) {
  size_t nv = F->g->next_value_id + 1, nn = F->g->n_nodes + 1;
  memset(F->param, 0, sizeof(tv_t *) * nv);
  memset(F->full, 0, sizeof(tv_t *) * nv);
  memset(F->full_gen, 0, sizeof(int) * nv);
  memset(F->row, 0, sizeof(tv_t *) * nv);
  memset(F->vm, 0, sizeof(vmemo_t *) * nv);
  memset(F->st0, 0, sizeof(tv_t *) * nn);
  memset(F->st1, 0, sizeof(tv_t *) * nn);
  F->n_memo = 0;
  F->loads = NULL;
  F->as = NULL;
  F->maps = NULL;
  F->zero = NULL;
  F->lb = F->ub = F->pws = NULL;
  F->stored = false;
  F->gen++;
}

bool drk_lower_fused(drk_lctx_t *c, const drk_fusion_t *f, int gi) {
  const drk_graph_t *g = c->g;
  const drk_fusion_group_t *gr = &f->groups[gi];
  DRK_ASSERT(gr->kind != DRK_FUSION_SINGLE);
  if (gr->kind == DRK_FUSION_ATTENTION) return drk_lower_attention(c, f, gi);
  if (gr->kind == DRK_FUSION_MM) return drk_lower_mm_group(c, f, gi);
  drk_arena_t *A = c->m->arena;
  fl_t F0, *F = &F0;
  memset(F, 0, sizeof *F);
  F->c = c;
  F->g = g;
  F->gr = gr;
  F->flat = gr->kind == DRK_FUSION_FLAT;
  size_t nv = g->next_value_id + 1;
  F->in = drk_arena_alloc(A, sizeof(bool) * (g->n_nodes + 1));
  F->pos = drk_arena_alloc(A, sizeof(int) * (g->next_node_id + 1));
  F->param = drk_arena_alloc(A, sizeof(tv_t *) * nv);
  F->store = drk_arena_alloc(A, sizeof(bool) * nv);
  F->full = drk_arena_alloc(A, sizeof(tv_t *) * nv);
  F->full_gen = drk_arena_alloc(A, sizeof(int) * nv);
  F->row = drk_arena_alloc(A, sizeof(tv_t *) * nv);
  F->st0 = drk_arena_alloc(A, sizeof(tv_t *) * (g->n_nodes + 1));
  F->st1 = drk_arena_alloc(A, sizeof(tv_t *) * (g->n_nodes + 1));
  F->not_inplace = drk_arena_alloc(A, sizeof(bool) * nv);
  F->vm = drk_arena_alloc(A, sizeof(vmemo_t *) * nv);
  F->mv = drk_arena_alloc(A, sizeof(mvp_t *) * (g->n_nodes + 1));
  F->gen = 1;
  for (size_t k = 0; k < g->n_nodes; k++) F->pos[g->nodes[k]->id] = (int)k;
  for (int i = 0; i < gr->n_nodes; i++) F->in[gr->nodes[i]] = true;
  const drk_node_t *last = g->nodes[gr->last];
  const drk_node_t *head = gr->anchor >= 0 ? g->nodes[gr->anchor] : last;

  /* which values leave the group: used by a live node outside it, or graph outputs (a
   * Split's results other than the one the group uses have no use) */
  unsigned char *use = drk_arena_alloc(A, nv);
  for (size_t i = 0; i < g->n_outputs; i++) use[g->outputs[i]->id] = USED | LEAVES;
  for (size_t k = 0; k < g->n_nodes; k++) {
    const drk_node_t *e = g->nodes[k];
    for (int j = 0; !e->dead && j < e->n_inputs; j++)
      if (e->inputs[j]) use[e->inputs[j]->id] |= F->in[k] ? USED : USED | LEAVES;
  }
  bool moving = false;
  for (int i = 0; i < gr->n_nodes; i++) {
    const drk_node_t *n = g->nodes[gr->nodes[i]];
    unsigned fl = drk_op_info(n->op)->flags;
    if (F->flat && !drk_op_aliases_input(n->op) && !(fl & DRK_OPF_EW) && n->op != DRK_OP_BATCH_NORMALIZATION) {
      moving = true;
      if (!move_params(F, n, use)) return false;
    }
    for (int o = 0; o < n->n_outputs; o++) {
      const drk_value_t *y = n->outputs[o];
      if (!y || !(use[y->id] & LEAVES)) continue;
      const drk_value_t *r = root_of(F, y);
      if (r) F->store[r->id] = true; /* else a view of an outside value: its bytes hold it already */
    }
  }

  if (!F->flat) {
    F->rows = gr->n;
    F->R = gr->R;
    F->s = drk_sched_rows(F->rows, F->R, true, lw_target_sms(&c->o), &c->o.knobs);
    /* the row's bytes: the anchor's input. Whole rows keep the group's full values live through
     * every pass: up to 64 elements per thread when one full tensor comes from outside (an
     * RMSNorm or softmax written as primitives), 32 for two (a residual add's), else 16 */
    const drk_value_t *rx = gr->anchor >= 0 && g->nodes[gr->anchor]->n_inputs ? g->nodes[gr->anchor]->inputs[0] : NULL;
    int esize = rx ? drk_dtype_bits(rx->dtype) / 8 : 4, full_in = 0;
    for (int i = 0; i < gr->n_nodes; i++) {
      const drk_node_t *n = g->nodes[gr->nodes[i]];
      for (int j = 0; j < n->n_inputs; j++) {
        const drk_value_t *v = n->inputs[j];
        bool seen = false;
        for (int i2 = 0; i2 <= i && !seen; i2++) /* counted once: an earlier use */
          for (int j2 = 0; j2 < g->nodes[gr->nodes[i2]]->n_inputs && (i2 < i || j2 < j) && !seen; j2++)
            seen = g->nodes[gr->nodes[i2]]->inputs[j2] == v;
        if (v && !seen && !made_in(F, v) && numel(v) == F->rows * F->R) full_in++;
      }
    }
    drk_sched_rows_whole(&F->s, F->rows, F->R, esize < 1 ? 1 : esize, lw_target_sms(&c->o),
                         full_in <= 1 ? 64 : full_in == 2 ? 32 : 16, can_split(F), &c->o.knobs);
    plan_split(F);
  }
  if (F->SP <= 1) return emit_kernel(F, last, head, moving, 0);
  F->mode = SPLIT_PARTIAL;
  if (!emit_kernel(F, last, head, moving, 0)) return false;
  reset_kernel_state(F);
  F->mode = SPLIT_FINISH;
  return emit_kernel(F, last, head, moving, 1);
}
