/* Graph IR -> tile IR: the driver (walks the nodes, checks static shapes, dispatches per op
 * family, builds the launch plan) and the building blocks every lower_*.c file shares.
 *
 * Requires: a canonicalized graph (passes.h) with static shapes. Guarantees: see
 * lower/lower.h. A node that fails to lower has its partial kernels removed, so the
 * module holds only complete kernels; lowering goes on to report every failing node. */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ir/tensor.h"
#include "lower/lower_internal.h"
#include "passes/passes.h"


/* ---- errors ---- */
bool lw_err(drk_lctx_t *c, const char *fmt, ...) {
  char buf[800];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  drk_diag_error(c->d, c->node->loc, "%s (node #%zu %s)", buf, c->node_index, drk_op_name(c->node->op));
  return false;
}

bool lw_unsupported_dtype(drk_lctx_t *c, drk_dtype_t t) {
  return lw_err(c, "%s on %s is not lowered for GPU yet", drk_op_name(c->node->op), drk_dtype_name(t));
}

/* ---- static shapes ---- */
int64_t lw_numel(const drk_value_t *v) {
  int64_t n = 1;
  for (int i = 0; i < v->shape.rank; i++) n *= v->shape.dims[i].size;
  return n;
}

void lw_strides(const drk_value_t *v, int64_t *out) {
  int64_t s = 1;
  for (int i = v->shape.rank - 1; i >= 0; i--) {
    out[i] = s;
    s *= v->shape.dims[i].size;
  }
}

void lw_bstrides(const drk_value_t *v, int r, const int64_t *out_dims, int64_t *out) {
  int64_t st[LW_MAX_RANK];
  lw_strides(v, st);
  int off = r - v->shape.rank;
  for (int i = 0; i < r; i++) {
    int j = i - off;
    if (j < 0 || v->shape.dims[j].size == 1 || out_dims[i] == 1) out[i] = 0;
    else out[i] = st[j];
  }
}

bool lw_dtype_ok(drk_dtype_t t) { return t != DRK_DT_I4 && t != DRK_DT_U4 && t < DRK_DT_COUNT; }

drk_dtype_t lw_compute_dtype(drk_dtype_t t) {
  if (t == DRK_DT_F16 || t == DRK_DT_BF16 || t == DRK_DT_F8E4M3 || t == DRK_DT_F8E5M2) return DRK_DT_F32;
  return t;
}


static int64_t const_i64(const drk_value_t *v, int64_t i) {
  const unsigned char *p = v->data;
  if (v->dtype == DRK_DT_I64) { int64_t x; memcpy(&x, p + 8 * i, 8); return x; }
  double d = drk_value_const_f64(v, i); /* an integer dtype, or a float a malformed model gave */
  return d >= -9.0e18 && d <= 9.0e18 ? (int64_t)d : 0;
}

bool lw_const_ints(drk_lctx_t *c, const drk_value_t *v, int64_t *out, int max, int *out_n) {
  if (!v || v->kind != DRK_VALUE_CONST || !v->data)
    return lw_err(c, "input '%s' must be a constant for GPU lowering", v ? v->name : "?");
  int64_t n = lw_numel(v);
  if (n > max) return lw_err(c, "constant '%s' has %lld elements, at most %d supported", v->name, (long long)n, max);
  for (int64_t i = 0; i < n; i++) out[i] = const_i64(v, i);
  *out_n = (int)n;
  return true;
}


/* ---- kernels ---- */
void lw_kernel_begin(drk_lctx_t *c, drk_dtype_t it) {
  const char *name = c->n_kernels_node
                         ? drk_arena_printf(c->m->arena, "k%zu_%s_%d", c->node_index, drk_op_name(c->node->op), c->n_kernels_node)
                         : drk_arena_printf(c->m->arena, "k%zu_%s", c->node_index, drk_op_name(c->node->op));
  c->n_kernels_node++;
  c->k = drk_tile_kernel_create(c->m, name, c->node->loc);
  drk_tile_builder_init(&c->b, c->m, c->k);
  c->b.loc = c->node->loc;
  memset(&c->cur, 0, sizeof c->cur);
  c->cur.node = c->node;
  c->cur.kernel = c->k;
  c->cap_args = 0;
  c->it = it;
  c->lay = NULL;
}

static void push_arg(drk_lctx_t *c, drk_larg_t a) {
  size_t n = (size_t)c->cur.n_args;
  DRK_VEC_PUSH(c->m->arena, c->cur.args, n, c->cap_args, a);
  c->cur.n_args = (int)n;
}

drk_dtype_t lw_index_dtype_for(int64_t big) { return big < ((int64_t)1 << 31) - 4096 ? DRK_DT_I32 : DRK_DT_I64; }

drk_dtype_t lw_index_dtype(const drk_node_t *n) {
  int64_t big = 0;
  for (int i = 0; i < n->n_inputs; i++)
    if (n->inputs[i] && lw_numel(n->inputs[i]) > big) big = lw_numel(n->inputs[i]);
  for (int i = 0; i < n->n_outputs; i++)
    if (n->outputs[i] && lw_numel(n->outputs[i]) > big) big = lw_numel(n->outputs[i]);
  return lw_index_dtype_for(big);
}

tv_t *lw_param_buf(drk_lctx_t *c, const drk_value_t *v, const char *name) {
  tv_t *p = drk_tile_kernel_add_param(c->m, c->k, name, drk_tile_type_ptr(v->dtype), c->node->loc);
  drk_tile_attr_t *a = drk_tile_param_add_attr(c->m, c->k, c->k->n_params - 1, "align", DRK_TA_INT);
  a->i = 16;
  push_arg(c, (drk_larg_t){DRK_LARG_BUFFER, v, 0, 0});
  return p;
}

int lw_scratch_new(drk_lctx_t *c, uint64_t bytes) {
  drk_scratch_t sc = {bytes ? bytes : 1, c->node_index, -1};
  DRK_VEC_PUSH(c->m->arena, c->scratch, c->n_scratch, c->cap_scratch, sc);
  return (int)c->n_scratch - 1;
}

tv_t *lw_param_scratch(drk_lctx_t *c, int idx, drk_dtype_t t, const char *name) {
  DRK_ASSERT(idx >= 0 && (size_t)idx < c->n_scratch);
  tv_t *p = drk_tile_kernel_add_param(c->m, c->k, name, drk_tile_type_ptr(t), c->node->loc);
  drk_tile_attr_t *a = drk_tile_param_add_attr(c->m, c->k, c->k->n_params - 1, "align", DRK_TA_INT);
  a->i = 16;
  push_arg(c, (drk_larg_t){DRK_LARG_SCRATCH, NULL, idx, 0});
  return p;
}

void lw_kernel_end(drk_lctx_t *c, int64_t g0, int64_t g1, int64_t g2, int warps, int64_t smem,
                   const drk_schedule_t *s) {
  drk_tile_build(&c->b, DRK_TOP_RETURN, 0, NULL, 0, NULL);
  int64_t g[3] = {g0 < 1 ? 1 : g0, g1 < 1 ? 1 : g1, g2 < 1 ? 1 : g2};
  for (int i = 0; i < 3; i++) {
    c->k->grid[i] = (drk_tile_grid_dim_t){NULL, g[i]};
    c->cur.grid[i] = (uint32_t)g[i];
  }
  c->k->block = warps * 32;
  c->k->smem = smem;
  c->cur.block = (uint32_t)(warps * 32);
  c->cur.smem_bytes = (uint32_t)smem;
  if (s) c->cur.sched = *s;
  DRK_VEC_PUSH(c->m->arena, c->launches, c->n_launches, c->cap_launches, c->cur);
}

tv_t *lw_size_param(drk_lctx_t *c, const char *name, int64_t n) {
  if (!c->o.runtime_sizes) return NULL;
  tv_t *p = drk_tile_kernel_add_param(c->m, c->k, name, drk_tile_type_scalar(c->it), c->node->loc);
  push_arg(c, (drk_larg_t){c->it == DRK_DT_I32 ? DRK_LARG_I32 : DRK_LARG_I64, NULL, n, 0});
  return p;
}

tv_t *lw_size_lt(drk_lctx_t *c, tv_t *v, tv_t *p, int64_t n) {
  return lw_cmp(c, "lt", v, p ? lw_splat(c, lw_cast(c, p, v->type.dtype), &v->type) : lw_ci(c, v, n));
}

void lw_grid_from(drk_lctx_t *c, int d, tv_t *p, int64_t per) {
  if (p) c->k->grid[d] = (drk_tile_grid_dim_t){p, per};
}

void lw_alias(drk_lctx_t *c, const drk_value_t *v, const drk_value_t *base) {
  DRK_VEC_PUSH(c->m->arena, c->aliases, c->n_aliases, c->cap_aliases, ((drk_alias_t){v, base}));
}

void lw_inplace(drk_lctx_t *c, const drk_value_t *y, const drk_value_t *x) {
  DRK_VEC_PUSH(c->m->arena, c->inplace, c->n_inplace, c->cap_inplace, ((drk_alias_t){y, x}));
}

/* ---- building blocks ---- */
tv_t *lw_addmul(drk_lctx_t *c, tv_t *acc, tv_t *x, int64_t s) {
  if (s == 0 || !x) return acc;
  if (s != 1) x = lw_bin(c, DRK_TOP_MUL, x, lw_ci(c, x, s));
  return acc ? lw_bin(c, DRK_TOP_ADD, acc, x) : x;
}

tv_t *lw_and_mask(drk_lctx_t *c, tv_t *a, tv_t *b) { return !a ? b : !b ? a : lw_bin(c, DRK_TOP_AND, a, b); }

tv_t *lw_approx(drk_lctx_t *c, tv_t *v) {
  drk_tile_op_set_int(c->m, v->def, "approx", 1);
  return v;
}

drk_tile_type_t lw_tt(const drk_tile_layout_t *l, int rank, const int64_t *dims, drk_dtype_t t) {
  return drk_tile_type_tile(t, rank, dims, l);
}

drk_tile_type_t lw_retype(const drk_tile_type_t *like, drk_dtype_t t) {
  drk_tile_type_t r = *like;
  r.dtype = t;
  r.is_ptr = false;
  return r;
}

tv_t *lw_bin(drk_lctx_t *c, drk_tile_opcode_t code, tv_t *a, tv_t *b) {
  return drk_tile_build1(&c->b, code, 2, (tv_t *[]){a, b}, a->type);
}

tv_t *lw_un(drk_lctx_t *c, drk_tile_opcode_t code, tv_t *a) { return drk_tile_build1(&c->b, code, 1, &a, a->type); }

tv_t *lw_cmp(drk_lctx_t *c, const char *pred, tv_t *a, tv_t *b) {
  drk_tile_op_t *op = drk_tile_build(&c->b, DRK_TOP_CMP, 2, (tv_t *[]){a, b}, 1,
                                     (drk_tile_type_t[]){lw_retype(&a->type, DRK_DT_BOOL)});
  drk_tile_op_set_ident(c->m, op, "pred", pred);
  return op->results[0];
}

tv_t *lw_sel(drk_lctx_t *c, tv_t *cond, tv_t *a, tv_t *b) {
  return drk_tile_build1(&c->b, DRK_TOP_SELECT, 3, (tv_t *[]){cond, a, b}, a->type);
}

tv_t *lw_fma(drk_lctx_t *c, tv_t *a, tv_t *b, tv_t *acc) {
  return drk_tile_build1(&c->b, DRK_TOP_FMA, 3, (tv_t *[]){a, b, acc}, acc->type);
}

tv_t *lw_cast(drk_lctx_t *c, tv_t *a, drk_dtype_t t) {
  if (a->type.dtype == t) return a;
  drk_tile_op_t *op = drk_tile_build(&c->b, DRK_TOP_CAST, 1, &a, 1, (drk_tile_type_t[]){lw_retype(&a->type, t)});
  /* narrowing float casts round to nearest even */
  if (drk_dtype_is_float(t) && drk_dtype_is_float(a->type.dtype) && drk_dtype_bits(t) < drk_dtype_bits(a->type.dtype))
    drk_tile_op_set_ident(c->m, op, "rounding", "rn");
  return op->results[0];
}

tv_t *lw_ci(drk_lctx_t *c, const tv_t *like, int64_t v) {
  return drk_tile_build_const_int(&c->b, v, lw_retype(&like->type, like->type.dtype));
}

tv_t *lw_cdt(drk_lctx_t *c, const tv_t *like, drk_dtype_t t, double v) {
  drk_tile_type_t ty = lw_retype(&like->type, t);
  if (drk_dtype_is_float(t)) return drk_tile_build_const_float(&c->b, v, ty);
  if (t == DRK_DT_BOOL) return drk_tile_build_const_int(&c->b, v != 0, ty);
  if (isnan(v)) v = 0;
  if (v >= 9.2e18) return drk_tile_build_const_int(&c->b, INT64_MAX, ty);
  if (v <= -9.2e18) return drk_tile_build_const_int(&c->b, INT64_MIN, ty);
  return drk_tile_build_const_int(&c->b, (int64_t)v, ty);
}

tv_t *lw_cf(drk_lctx_t *c, const tv_t *like, double v) { return lw_cdt(c, like, like->type.dtype, v); }

tv_t *lw_sci(drk_lctx_t *c, drk_dtype_t t, int64_t v) { return drk_tile_build_const_int(&c->b, v, drk_tile_type_scalar(t)); }

tv_t *lw_splat(drk_lctx_t *c, tv_t *s, const drk_tile_type_t *frame) {
  drk_tile_type_t t = *frame;
  t.dtype = s->type.dtype;
  t.is_ptr = s->type.is_ptr;
  return drk_tile_build1(&c->b, DRK_TOP_SPLAT, 1, &s, t);
}

tv_t *lw_range(drk_lctx_t *c, int64_t n, const drk_tile_layout_t *l) {
  drk_tile_op_t *op = drk_tile_build(&c->b, DRK_TOP_MAKE_RANGE, 0, NULL, 1, (drk_tile_type_t[]){lw_tt(l, 1, &n, DRK_DT_I32)});
  drk_tile_op_set_int(c->m, op, "start", 0);
  drk_tile_op_set_int(c->m, op, "end", n);
  return op->results[0];
}

tv_t *lw_pid(drk_lctx_t *c, int axis) {
  drk_tile_op_t *op = drk_tile_build(&c->b, DRK_TOP_PROGRAM_ID, 0, NULL, 1, (drk_tile_type_t[]){drk_tile_type_scalar(DRK_DT_I32)});
  drk_tile_op_set_int(c->m, op, "axis", axis);
  return lw_cast(c, op->results[0], c->it);
}

tv_t *lw_coord(drk_lctx_t *c, tv_t *idx, int n, const int64_t *dims, int k) {
  int64_t inner = 1;
  for (int i = k + 1; i < n; i++) inner *= dims[i];
  tv_t *r = idx;
  if (inner > 1) r = lw_bin(c, DRK_TOP_DIV, r, lw_ci(c, idx, inner));
  if (k > 0 && dims[k] > 0) {
    int64_t outer = 1;
    for (int i = 0; i < k; i++) outer *= dims[i];
    if (outer > 1) r = lw_bin(c, DRK_TOP_REM, r, lw_ci(c, idx, dims[k]));
  }
  return r;
}

tv_t *lw_affine(drk_lctx_t *c, tv_t *idx, int n, const int64_t *dims, const int64_t *strides, int64_t base) {
  int64_t d[LW_MAX_RANK * 2], s[LW_MAX_RANK * 2];
  int m = 0;
  for (int i = 0; i < n; i++) {
    if (dims[i] == 1) continue;
    if (m > 0 && s[m - 1] == strides[i] * dims[i]) {
      d[m - 1] *= dims[i];
      s[m - 1] = strides[i];
      continue;
    }
    d[m] = dims[i];
    s[m] = strides[i];
    m++;
  }
  tv_t *acc = NULL;
  for (int k = 0; k < m; k++) {
    if (s[k] == 0) continue;
    tv_t *co = lw_coord(c, idx, m, d, k);
    if (s[k] != 1) co = lw_bin(c, DRK_TOP_MUL, co, lw_ci(c, idx, s[k]));
    acc = acc ? lw_bin(c, DRK_TOP_ADD, acc, co) : co;
  }
  if (!acc) return lw_ci(c, idx, base);
  if (base) acc = lw_bin(c, DRK_TOP_ADD, acc, lw_ci(c, idx, base));
  return acc;
}

tv_t *lw_load(drk_lctx_t *c, tv_t *p, tv_t *off, tv_t *mask, double other) {
  drk_dtype_t dt = p->type.dtype;
  drk_tile_type_t pt = off->type;
  pt.dtype = dt;
  pt.is_ptr = true;
  tv_t *ps = drk_tile_build1(&c->b, DRK_TOP_SPLAT, 1, &p, pt);
  tv_t *pp = drk_tile_build1(&c->b, DRK_TOP_ADDPTR, 2, (tv_t *[]){ps, off}, pt);
  drk_tile_type_t vt = lw_retype(&off->type, dt);
  if (!mask) return drk_tile_build1(&c->b, DRK_TOP_LOAD, 1, &pp, vt);
  tv_t *o = lw_cdt(c, off, dt, other);
  return drk_tile_build1(&c->b, DRK_TOP_LOAD, 3, (tv_t *[]){pp, mask, o}, vt);
}

void lw_store(drk_lctx_t *c, tv_t *p, tv_t *off, tv_t *val, tv_t *mask) {
  drk_tile_type_t pt = off->type;
  pt.dtype = p->type.dtype;
  pt.is_ptr = true;
  tv_t *ps = drk_tile_build1(&c->b, DRK_TOP_SPLAT, 1, &p, pt);
  tv_t *pp = drk_tile_build1(&c->b, DRK_TOP_ADDPTR, 2, (tv_t *[]){ps, off}, pt);
  val = lw_cast(c, val, p->type.dtype);
  if (mask) drk_tile_build(&c->b, DRK_TOP_STORE, 3, (tv_t *[]){pp, val, mask}, 0, NULL);
  else drk_tile_build(&c->b, DRK_TOP_STORE, 2, (tv_t *[]){pp, val}, 0, NULL);
}

static tv_t *bcast2(drk_lctx_t *c, tv_t *v, const drk_tile_layout_t *P, int64_t R, int64_t C, int axis) {
  int64_t ed[2] = {axis == 1 ? R : 1, axis == 1 ? 1 : C};
  drk_tile_op_t *op = drk_tile_build(&c->b, DRK_TOP_EXPAND_DIMS, 1, &v, 1,
                                     (drk_tile_type_t[]){drk_tile_type_tile(v->type.dtype, 2, ed, P)});
  drk_tile_op_set_int(c->m, op, "axis", axis);
  int64_t fd[2] = {R, C};
  if (ed[0] == R && ed[1] == C) return op->results[0];
  return drk_tile_build1(&c->b, DRK_TOP_BROADCAST, 1, op->results, drk_tile_type_tile(v->type.dtype, 2, fd, P));
}

tv_t *lw_bcast_row(drk_lctx_t *c, tv_t *v, const drk_tile_layout_t *P, int64_t R, int64_t C) { return bcast2(c, v, P, R, C, 1); }
tv_t *lw_bcast_col(drk_lctx_t *c, tv_t *v, const drk_tile_layout_t *P, int64_t R, int64_t C) { return bcast2(c, v, P, R, C, 0); }

/* ---- flat frame ---- */
void lw_flat_begin(drk_lctx_t *c, int64_t n, lw_flat_t *f) { lw_flat_begin_sched(c, n, drk_sched_flat(n), f); }

void lw_flat_begin_sched(drk_lctx_t *c, int64_t n, drk_schedule_t s, lw_flat_t *f) {
  f->n = n;
  f->s = s;
  c->lay = drk_sched_flat_layout(c->m, &f->s);
  tv_t *r = lw_cast(c, lw_range(c, f->s.block_elems, c->lay), c->it);
  tv_t *pid = lw_pid(c, 0);
  tv_t *base = lw_bin(c, DRK_TOP_MUL, pid, lw_sci(c, c->it, f->s.block_elems));
  f->offs = lw_bin(c, DRK_TOP_ADD, lw_splat(c, base, &r->type), r);
  f->fr = f->offs->type;
  f->n_param = lw_size_param(c, "n", n);
  f->mask = lw_size_lt(c, f->offs, f->n_param, n);
}

void lw_flat_end(drk_lctx_t *c, lw_flat_t *f) {
  lw_kernel_end(c, (f->n + f->s.block_elems - 1) / f->s.block_elems, 1, 1, f->s.warps, 0, &f->s);
  lw_grid_from(c, 0, f->n_param, f->s.block_elems);
}

/* ---- driver ---- */
static bool is_pool(drk_op_t op) {
  return op == DRK_OP_MAX_POOL || op == DRK_OP_AVERAGE_POOL || op == DRK_OP_MAX_POOL_NHWC ||
         op == DRK_OP_AVERAGE_POOL_NHWC || op == DRK_OP_GLOBAL_AVERAGE_POOL ||
         op == DRK_OP_GLOBAL_MAX_POOL;
}

bool drk_lower_node_supported(const drk_node_t *n, const char **why) {
  const char *w = NULL;
  if (!why) why = &w;
  if (drk_op_aliases_input(n->op)) return true;
  /* by op before the flags: TopK carries RED, Einsum and ConvTranspose MM */
  if (n->op == DRK_OP_TOP_K) return drk_lower_topk_supported(n, why);
  if (n->op == DRK_OP_EINSUM) return drk_lower_einsum_supported(n, why);
  if (n->op == DRK_OP_MATMUL_NBITS) return drk_lower_w4_supported(n, why);
  if (n->op == DRK_OP_CONV_TRANSPOSE) return drk_lower_conv_transpose_supported(n, why);
  if (is_pool(n->op)) return drk_lower_pool_supported(n, why);
  unsigned f = drk_op_info(n->op)->flags;
  if (f & DRK_OPF_EW) return drk_lower_ew_supported(n, why);
  if (f & (DRK_OPF_RED | DRK_OPF_NORM)) return drk_lower_reduce_supported(n, why);
  if (f & DRK_OPF_MM) return drk_lower_matmul_supported(n, why);
  if (f & DRK_OPF_MOVE) return drk_lower_move_supported(n, why);
  *why = "op not lowered";
  return false;
}

static bool check_static(drk_lctx_t *c) {
  const drk_node_t *n = c->node;
  for (int io = 0; io < 2; io++) {
    int cnt = io ? n->n_outputs : n->n_inputs;
    for (int i = 0; i < cnt; i++) {
      const drk_value_t *v = io ? n->outputs[i] : n->inputs[i];
      if (!v) continue;
      if (v->shape.rank < 0)
        return lw_err(c, "GPU lowering needs static shapes; %s '%s' has unknown rank", io ? "result" : "input", v->name);
      if (v->shape.rank > LW_MAX_RANK)
        return lw_err(c, "%s '%s' has rank %d; GPU lowering supports rank <= %d", io ? "result" : "input", v->name,
                      v->shape.rank, LW_MAX_RANK);
      for (int j = 0; j < v->shape.rank; j++) {
        const drk_dim_t *dd = &v->shape.dims[j];
        if (dd->sym && strncmp(dd->sym, DRK_FRESH_SYM_PREFIX, strlen(DRK_FRESH_SYM_PREFIX)) == 0)
          return lw_err(c, "GPU lowering needs static shapes; dim %d of %s '%s' depends on data or on a symbolic dim "
                        "(bind the graph's symbolic dims: drkc --bind=NAME=SIZE, drk_graph_bind_dims)", j,
                        io ? "result" : "input", v->name);
        if (dd->sym || dd->size < 0)
          return lw_err(c, "GPU lowering needs static shapes; dim '%s' of %s '%s' is symbolic: bind it with "
                        "drkc --bind=%s=1 (drk_graph_bind_dims)",
                        dd->sym ? dd->sym : "?", io ? "result" : "input", v->name, dd->sym ? dd->sym : "?");
      }
      if (lw_numel(v) >= ((int64_t)1 << 40)) return lw_err(c, "value '%s' is too large to lower", v->name);
    }
  }
  return true;
}

static bool lower_node(drk_lctx_t *c) {
  const drk_node_t *n = c->node;
  const char *why = NULL;
  if (!drk_lower_node_supported(n, &why)) {
    drk_dtype_t t = n->n_inputs && n->inputs[0] ? n->inputs[0]->dtype : n->outputs[0]->dtype;
    return lw_err(c, "%s on %s is not lowered for GPU yet (%s)", drk_op_name(n->op), drk_dtype_name(t), why ? why : "");
  }
  if (!check_static(c)) return false;
  /* results with no elements need no kernel (and the index arithmetic of a zero-sized axis
   * would divide the flat index by 0: a fuzzed Split of a [1, 4, 8, 0] tensor) */
  bool empty = true;
  for (int i = 0; i < n->n_outputs && empty; i++) empty = !n->outputs[i] || lw_numel(n->outputs[i]) == 0;
  if (empty) return true;
  if (drk_op_aliases_input(n->op)) {
    lw_alias(c, n->outputs[0], n->inputs[0]);
    return true;
  }
  if (n->op == DRK_OP_TOP_K) return drk_lower_topk(c);
  if (n->op == DRK_OP_EINSUM) return drk_lower_einsum(c);
  if (n->op == DRK_OP_MATMUL_NBITS) return drk_lower_w4(c);
  if (n->op == DRK_OP_CONV_TRANSPOSE) return drk_lower_conv_transpose(c);
  if (is_pool(n->op)) return drk_lower_pool(c);
  unsigned f = drk_op_info(n->op)->flags;
  if (f & DRK_OPF_EW) return drk_lower_ew(c);
  if (f & (DRK_OPF_RED | DRK_OPF_NORM)) return drk_lower_reduce(c);
  if (f & DRK_OPF_MM) return drk_lower_matmul(c);
  return drk_lower_move(c);
}

/* ---- per-kernel schedules ---- */
/* The --schedules line of the kernels of node i's group, or NULL. A kernel is named after
 * the node its lowering starts from (a fused group's anchor or last node), any node of the
 * group. */
static drk_sched_entry_t *node_schedule(const drk_lower_options_t *o, const drk_fusion_t *fu, size_t i) {
  if (!o || !o->schedules) return NULL;
  for (size_t k = 0; k < o->schedules->n; k++) {
    size_t n = o->schedules->entries[k].node;
    if (n < fu->n_nodes && fu->group[n] == fu->group[i]) return &o->schedules->entries[k];
  }
  return NULL;
}

/* The knobs of `used` that apply to kernels of schedule kind `kind` (knobs.def): a heuristic
 * may consult a knob of a form it then does not take (the sm_90a matmul's before falling back
 * to mma.sync), which is not part of the kernel's space. */
static uint32_t knobs_of_kind(uint32_t used, const char *kind) {
  uint32_t r = 0;
  size_t kl = kind ? strlen(kind) : 0;
  for (int i = 0; i < DRK_KNOB_COUNT; i++) {
    if (!(used & (1u << i)) || !kl) continue;
    for (const char *p = drk_knob_def((drk_knob_id_t)i)->kinds; *p;) {
      size_t n = strcspn(p, " ");
      if (n == kl && strncmp(p, kind, kl) == 0) r |= 1u << i;
      p += n;
      while (*p == ' ') p++;
    }
  }
  return r;
}

/* Line e of --schedules against the kernels its node made (launches from first): one of them
 * has e's name, the workload key is e's when given, and every knob e pins is in the kernel's
 * space (a knob that would have no effect is an error, not silently dropped, unless the entry
 * is lenient: the tuner's points, whose form may not read every knob of the space). */
static bool check_schedule(drk_lctx_t *c, drk_sched_entry_t *e, size_t first, const char *wl) {
  const drk_launch_t *la = NULL;
  for (size_t k = first; k < c->n_launches && !la; k++)
    if (strcmp(c->launches[k].kernel->name, e->name) == 0) la = &c->launches[k];
  e->used = true;
  if (!la) {
    drk_diag_error(c->d, e->loc, "schedule for kernel '%s': node %zu lowers to '%s' instead", e->name, e->node,
                   c->launches[first].kernel->name);
    return false;
  }
  if (e->wl[0] && strcmp(e->wl, wl) != 0) {
    drk_diag_error(c->d, e->loc, "schedule for kernel '%s' was made for workload %s; this model's kernel is workload %s "
                   "(another shape, dtype or computation)", e->name, e->wl, wl);
    return false;
  }
  uint32_t space = 0;
  for (size_t k = first; k < c->n_launches; k++) space |= c->launches[k].knob_space;
  for (int i = 0; i < DRK_KNOB_COUNT; i++)
    if ((e->knobs.set & (1u << i)) && !(space & (1u << i)) && !e->lenient) {
      drk_diag_error(c->d, e->loc, "schedule for kernel '%s': knob %s does not apply to it (a %s kernel)", e->name,
                     drk_knob_def((drk_knob_id_t)i)->name, la->sched.kind ? la->sched.kind : "plain");
      return false;
    }
  return true;
}

/* A node of the group carries tf32 = 1 (precision auto chose tf32 for it): its f32 products
 * run on tf32 tensor cores whatever --matmul-precision says. */
static bool group_tf32(const drk_graph_t *g, const drk_fusion_group_t *gr, const drk_node_t *n) {
  if (drk_node_attr_int(n, "tf32", 0)) return true;
  for (int m = 0; gr->kind != DRK_FUSION_SINGLE && m < gr->n_nodes; m++)
    if (drk_node_attr_int(g->nodes[gr->nodes[m]], "tf32", 0)) return true;
  return false;
}

bool drk_lower_graph(const drk_graph_t *g, const drk_lower_options_t *o, drk_lowered_t *out, drk_diag_t *d) {
  drk_lower_options_t dflt = {0};
  drk_fusion_t fu;
  drk_fusion_for_lowering(g, o ? o : &dflt, &fu);
  return drk_lower_graph_fused(g, o, &fu, out, d);
}

bool drk_lower_graph_fused(const drk_graph_t *g, const drk_lower_options_t *o, drk_fusion_t *fusion, drk_lowered_t *out,
                           drk_diag_t *d) {
  drk_lctx_t c;
  memset(&c, 0, sizeof c);
  c.g = g;
  c.d = d;
  if (o) c.o = *o;
  if (!c.o.target_sm) c.o.target_sm = 80;
  c.m = drk_tile_module_create(g->source ? g->source : g->name);
  drk_fusion_t fu = *fusion;
  memset(fusion, 0, sizeof *fusion);
  bool ok = true;
  for (size_t i = 0; i < g->n_nodes; i++) {
    const drk_node_t *n = g->nodes[i];
    if (n->dead) continue;
    /* a fused group launches at its last node (fuse.h) */
    const drk_fusion_group_t *gr = &fu.groups[fu.group[i]];
    if (gr->kind != DRK_FUSION_SINGLE && (size_t)gr->last != i) continue;
    c.node = n;
    c.node_index = i;
    c.n_kernels_node = 0;
    /* the node's knobs: --schedule's, then its line of --schedules; record what it consults */
    uint32_t used = 0;
    drk_sched_entry_t *e = node_schedule(o, &fu, i);
    c.o.knobs = o ? o->knobs : (drk_sched_knobs_t){0};
    c.o.allow_tf32 = (o && o->allow_tf32) || group_tf32(g, gr, n);
    char wl[33];
    drk_lower_workload_key(g, &fu, fu.group[i], &c.o, wl);
    drk_sched_knobs_t tuned = {0};
    if (e) drk_sched_knobs_overlay(&c.o.knobs, &e->knobs);
    else if (o && o->lookup && o->lookup(o->lookup_ctx, wl, &tuned)) drk_sched_knobs_overlay(&c.o.knobs, &tuned);
    c.o.knobs.used = &used;
    size_t nk = c.m->n_kernels, nl = c.n_launches, na = c.n_aliases, ns = c.n_scratch, ni = c.n_inplace;
    if (!(gr->kind == DRK_FUSION_SINGLE ? lower_node(&c) : drk_lower_fused(&c, &fu, fu.group[i]))) {
      ok = false;
      c.m->n_kernels = nk; /* drop the node's partial kernels */
      c.n_launches = nl;
      c.n_aliases = na;
      c.n_scratch = ns;
      c.n_inplace = ni;
      if (e) e->used = true; /* the node's own error says why */
      continue;
    }
    if (c.n_launches == nl) continue; /* aliases only */
    for (size_t k = nl; k < c.n_launches; k++) {
      drk_launch_t *la = &c.launches[k];
      la->knob_space = knobs_of_kind(used, la->sched.kind);
      memcpy(la->workload, wl, sizeof wl);
    }
    if (e && !check_schedule(&c, e, nl, wl)) ok = false;
  }
  c.o.knobs.used = NULL;
  if (o && o->schedules)
    for (size_t k = 0; k < o->schedules->n; k++) {
      const drk_sched_entry_t *e = &o->schedules->entries[k];
      if (!e->used) {
        drk_diag_error(d, e->loc, "schedule for kernel '%s': the model has no such kernel (--emit=schedules lists them)",
                       e->name);
        ok = false;
      }
    }
  int64_t *times = drk_arena_alloc(c.m->arena, sizeof(int64_t) * (g->n_nodes + 1));
  drk_fusion_node_times(&fu, times);
  for (size_t i = 0; i < c.n_scratch; i++) c.scratch[i].time = times[c.scratch[i].node];
  if (ok && !drk_tile_verify(c.m, d)) {
    drk_diag_error(d, drk_loc_none, "internal: lowered tile IR does not verify");
    ok = false;
  }
  drk_fusion_t *keep = ok ? malloc(sizeof *keep) : NULL;
  if (!keep) {
    if (ok) drk_diag_error(d, drk_loc_none, "lowering: out of memory");
    drk_fusion_destroy(&fu);
    drk_tile_module_destroy(c.m);
    return false;
  }
  *keep = fu;
  out->fusion = keep;
  out->module = c.m;
  out->n_launches = c.n_launches;
  out->launches = c.launches;
  out->n_aliases = c.n_aliases;
  out->aliases = c.aliases;
  out->n_inplace = c.n_inplace;
  out->inplace = c.inplace;
  out->node_time = times;
  out->n_scratch = c.n_scratch;
  out->scratch = c.scratch;
  return true;
}

bool *drk_lowered_referenced(const drk_graph_t *g, const drk_lowered_t *l) {
  bool *r = calloc((size_t)g->next_value_id + 1, sizeof *r);
  if (!r) return NULL;
  for (size_t i = 0; i < l->n_launches; i++)
    for (int j = 0; j < l->launches[i].n_args; j++) {
      const drk_larg_t *a = &l->launches[i].args[j];
      if ((a->kind == DRK_LARG_BUFFER || a->kind == DRK_LARG_TMA) && a->value) r[a->value->id] = true;
    }
  return r;
}

bool drk_lowered_plan_memory(const drk_graph_t *g, const drk_lowered_t *l, drk_mem_plan_t *out_plan, drk_diag_t *d) {
  drk_mem_scratch_t *sc = calloc(l->n_scratch + 1, sizeof *sc);
  bool *ref = drk_lowered_referenced(g, l);
  if (!sc || !ref) {
    free(sc);
    free(ref);
    drk_diag_error(d, drk_loc_none, "memory planning: out of memory");
    return false;
  }
  for (size_t i = 0; i < l->n_scratch; i++) sc[i] = (drk_mem_scratch_t){l->scratch[i].bytes, l->scratch[i].time};
  bool ok = drk_plan_memory_kernels(g, l->aliases, l->n_aliases, l->node_time, sc, l->n_scratch, l->inplace,
                                    l->n_inplace, ref, out_plan, d);
  free(sc);
  free(ref);
  return ok;
}

bool drk_lowered_dedupe(drk_lowered_t *l, size_t *out_removed) {
  drk_tile_module_t *m = l->module;
  size_t n = m->n_kernels;
  *out_removed = 0;
  char **text = calloc(n + 1, sizeof *text);
  size_t *len = calloc(n + 1, sizeof *len), *hash = calloc(n + 1, sizeof *hash), *rep = calloc(n + 1, sizeof *rep);
  bool ok = text && len && hash && rep;
  for (size_t i = 0; ok && i < n; i++) {
    ok = (text[i] = drk_tile_kernel_canonical(m, m->kernels[i], &len[i])) != NULL;
    size_t h = ok ? (size_t)drk_hash_fnv1a(text[i], len[i], 0) : 0;
    hash[i] = h, rep[i] = i;
    for (size_t j = 0; ok && j < i; j++)
      if (rep[j] == j && hash[j] == h && len[j] == len[i] && !memcmp(text[j], text[i], len[i])) {
        rep[i] = j;
        break;
      }
  }
  if (ok) {
    for (size_t li = 0; li < l->n_launches; li++) {
      size_t i = 0;
      while (i < n && m->kernels[i] != l->launches[li].kernel) i++;
      if (i < n) l->launches[li].kernel = m->kernels[rep[i]];
    }
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
      if (rep[i] == i) m->kernels[kept++] = m->kernels[i];
    *out_removed = n - kept;
    m->n_kernels = kept;
  }
  for (size_t i = 0; i < n && text; i++) free(text[i]);
  free(text), free(len), free(hash), free(rep);
  return ok;
}

void drk_lowered_destroy(drk_lowered_t *l) {
  if (!l) return;
  if (l->module) drk_tile_module_destroy(l->module);
  if (l->fusion) drk_fusion_destroy(l->fusion);
  free(l->fusion);
  memset(l, 0, sizeof *l);
}

void drk_lowered_print(const drk_lowered_t *l, FILE *out) {
  for (size_t i = 0; i < l->n_launches; i++) {
    const drk_launch_t *L = &l->launches[i];
    const drk_schedule_t *s = &L->sched;
    fprintf(out, "# launch @%s node %s grid(%u, %u, %u) block(%u) smem(%u) args(", L->kernel->name,
            L->node->outputs[0] ? L->node->outputs[0]->name : "?", L->grid[0], L->grid[1], L->grid[2], L->block,
            L->smem_bytes);
    for (int j = 0; j < L->n_args; j++) {
      const drk_larg_t *a = &L->args[j];
      if (j) fputs(", ", out);
      if (a->kind == DRK_LARG_BUFFER) fprintf(out, "%%%s", a->value->name);
      else if (a->kind == DRK_LARG_F32) fprintf(out, "%g", a->f);
      else if (a->kind == DRK_LARG_SCRATCH) fprintf(out, "scratch%lld", (long long)a->i);
      else fprintf(out, "%lld", (long long)a->i);
    }
    fprintf(out, ")\n#   schedule {kind = %s", s->kind ? s->kind : "?");
    if (s->block_elems) fprintf(out, ", block_elems = %d", s->block_elems);
    if (s->spt) fprintf(out, ", spt = %d", s->spt);
    if (s->warps) fprintf(out, ", warps = %d", s->warps);
    if (s->rows) fprintf(out, ", rows = %d, cols = %d", s->rows, s->cols);
    if (s->col_warps > 1) fprintf(out, ", col_warps = %d", s->col_warps);
    if (s->split_rows > 1) fprintf(out, ", split = %d", s->split_rows);
    if (s->tile_m) fprintf(out, ", tile = [%d, %d, %d], stages = %d", s->tile_m, s->tile_n, s->tile_k, s->stages);
    if (s->mma) fprintf(out, ", mma = %s%s", s->mma, s->tf32 ? " (tf32)" : "");
    if (s->split_k > 1) fprintf(out, ", split_k = %d", s->split_k);
    if (s->persistent) fprintf(out, ", persistent = %d%s", s->persistent, s->coop ? " (cooperative)" : "");
    if (s->cluster > 1) fprintf(out, ", cluster = %d", s->cluster);
    if (s->staged) fprintf(out, ", staged");
    if (s->pair) fprintf(out, ", paired");
    fputs("}\n", out);
  }
  for (size_t i = 0; i < l->n_scratch; i++)
    fprintf(out, "# scratch%zu: %llu bytes at time %lld\n", i, (unsigned long long)l->scratch[i].bytes,
            (long long)l->scratch[i].time);
  for (size_t i = 0; i < l->n_aliases; i++)
    fprintf(out, "# alias %%%s = %%%s\n", l->aliases[i].value->name, l->aliases[i].base->name);
  drk_tile_print(l->module, out);
}

