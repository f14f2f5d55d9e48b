/* Tile IR verifier.
 *
 * Requires: a module from the builder or the parser (any state; it never crashes on
 * malformed IR it can reach). Guarantees: when it returns true, every kernel is in SSA form
 * with each use dominated by its definition inside the enclosing regions, every op has the
 * operand/result/region counts, attributes, types, shapes and layouts docs/tile-ir.md
 * gives it, regions end with the right terminator, warp groups fit the block, and launch
 * limits hold. Each problem is reported at the op's (or value's) location; checking goes
 * on after an error so that one run lists many. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "tile.h"

typedef struct vctx {
  const drk_tile_module_t *m;
  drk_diag_t *d;
  const drk_tile_kernel_t *k;
  uint8_t *state;               /* per value id: 0 undefined yet, 1 visible, 2 out of scope */
  int warps;                    /* warps executing the current region */
  const drk_tile_op_t *wg;      /* enclosing warp_group, or NULL */
  uint64_t wg_mask;             /* warps claimed by warp groups so far */
  bool ok;
} vctx_t;

DRK_PRINTF(3, 4) static void err(vctx_t *c, drk_loc_t loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  drk_diag_verror(c->d, loc, "error", fmt, ap);
  va_end(ap);
  c->ok = false;
}

/* Formats a type into one of a few rotating buffers (for messages with two types). */
static const char *ty(const drk_tile_type_t *t) {
  static _Thread_local char bufs[4][256];
  static _Thread_local int i;
  i = (i + 1) & 3;
  drk_tile_type_format(t, bufs[i], sizeof bufs[i]);
  return bufs[i];
}

static bool is_scalar(const drk_tile_type_t *t) { return t->kind == DRK_TT_SCALAR && !t->is_ptr; }
static bool is_int_dt(drk_dtype_t d) { return drk_dtype_is_int(d); }
static bool is_int_scalar(const drk_tile_type_t *t) { return is_scalar(t) && is_int_dt(t->dtype); }
static bool is_i32(const drk_tile_type_t *t) { return is_scalar(t) && t->dtype == DRK_DT_I32; }
static bool is_value(const drk_tile_type_t *t) { /* a scalar or register tile of numbers */
  return (t->kind == DRK_TT_SCALAR || t->kind == DRK_TT_TILE) && !t->is_ptr;
}
static bool is_ptrish(const drk_tile_type_t *t) { return (t->kind == DRK_TT_SCALAR || t->kind == DRK_TT_TILE) && t->is_ptr; }
static bool is_mbar(const drk_tile_type_t *t) { return t->kind == DRK_TT_SMEM && t->rank == 0 && t->dtype == DRK_DT_I64; }
static bool pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }
static int64_t cluster_size(const drk_tile_kernel_t *k) { return k->cluster[0] * k->cluster[1] * k->cluster[2]; }

/* Same kind, shape and layout (dtype may differ). */
static bool same_frame(const drk_tile_type_t *a, const drk_tile_type_t *b) {
  return a->kind == b->kind && drk_tile_type_same_shape(a, b) && drk_tile_layout_equal(a->layout, b->layout);
}

static int64_t smem_bytes(const drk_tile_type_t *t) {
  int64_t n = drk_tile_type_numel(t);
  if (n > INT64_MAX / 8) return INT64_MAX;
  return (int64_t)drk_dtype_nbytes(t->dtype, n);
}

/* Checks a type where a value is defined. */
static void check_type(vctx_t *c, drk_loc_t loc, const drk_tile_type_t *t, const char *what) {
  if ((unsigned)t->dtype >= DRK_DT_COUNT || t->rank < 0 || t->rank > DRK_TILE_MAX_RANK) {
    err(c, loc, "%s has a malformed type", what);
    return;
  }
  for (int i = 0; i < t->rank; i++) {
    if (t->dims[i] < 1) {
      err(c, loc, "%s: dimensions must be positive in %s", what, ty(t));
      return;
    }
  }
  const drk_tile_layout_t *l = t->layout;
  switch (t->kind) {
  case DRK_TT_SCALAR:
    if (t->rank || l) err(c, loc, "%s: a scalar has no shape or layout", what);
    return;
  case DRK_TT_TILE:
    if (t->rank < 1) { err(c, loc, "%s: a tile needs at least one dimension", what); return; }
    for (int i = 0; i < t->rank; i++)
      if (!pow2(t->dims[i])) { err(c, loc, "%s: tile dimensions must be powers of two in %s", what, ty(t)); return; }
    if (drk_tile_type_numel(t) > (1 << 20)) { err(c, loc, "%s: tile %s is larger than 2^20 elements", what, ty(t)); return; }
    if (!l || l->kind == DRK_TL_SHARED) { err(c, loc, "%s: a register tile needs a register layout, not %s", what, l ? "a shared one" : "none"); return; }
    if (l->rank != t->rank) { err(c, loc, "%s: layout #%s has rank %d but %s has rank %d", what, l->name, l->rank, ty(t), t->rank); return; }
    return;
  case DRK_TT_SMEM:
  case DRK_TT_TMADESC:
    if (t->is_ptr) { err(c, loc, "%s: shared memory and TMA descriptors hold numbers, not pointers", what); return; }
    if (!l || l->kind != DRK_TL_SHARED) { err(c, loc, "%s: %s needs a shared layout", what, ty(t)); return; }
    if (t->kind == DRK_TT_TMADESC) {
      if (t->rank < 1 || l->rank != t->rank) { err(c, loc, "%s: a TMA descriptor's box needs rank 1..5 equal to its layout's", what); return; }
      for (int i = 0; i < t->rank; i++)
        if (t->dims[i] > 256) { err(c, loc, "%s: TMA box dimensions are at most 256", what); return; }
    } else if (t->rank && l->rank > t->rank) {
      err(c, loc, "%s: layout #%s has rank %d, more than %s", what, l->name, l->rank, ty(t));
    }
    return;
  }
  err(c, loc, "%s has a malformed type", what);
}

/* Register tiles defined here must be spread over the warps that run here. */
static void check_def(vctx_t *c, drk_loc_t loc, const drk_tile_value_t *v, const char *what) {
  bool was_ok = c->ok;
  c->ok = true;
  check_type(c, loc, &v->type, what);
  if (c->ok && v->type.kind == DRK_TT_TILE) {
    int w = drk_tile_layout_num_warps(v->type.layout);
    if (w != c->warps)
      err(c, loc, "%s: layout #%s spreads the tile over %d warps, but %d warps execute here", what,
          v->type.layout->name, w, c->warps);
  }
  c->ok = c->ok && was_ok;
}

/* ---- attributes ---- */
static void check_attr_spec(vctx_t *c, const drk_tile_op_t *op) {
  const drk_tile_op_info_t *info = drk_tile_op_info(op->code);
  for (int i = 0; i < op->n_attrs; i++) {
    const char *n = op->attrs[i].name;
    for (int j = 0; j < i; j++)
      if (strcmp(op->attrs[j].name, n) == 0) err(c, op->loc, "duplicate attribute '%s'", n);
    size_t nl = strlen(n);
    bool known = false;
    for (const char *s = info->attrs; *s;) {
      while (*s == ' ') s++;
      const char *e = s + strcspn(s, " ");
      const char *w = *s == '?' ? s + 1 : s;
      if ((size_t)(e - w) == nl && memcmp(w, n, nl) == 0) known = true;
      s = e;
    }
    if (!known) err(c, op->loc, "'%s' has no attribute '%s'", info->name, n);
  }
  for (const char *s = info->attrs; *s;) {
    while (*s == ' ') s++;
    if (!*s) break;
    const char *e = s + strcspn(s, " ");
    if (*s != '?') {
      char name[64];
      snprintf(name, sizeof name, "%.*s", (int)(e - s), s);
      if (!drk_tile_op_attr(op, name)) err(c, op->loc, "'%s' needs attribute '%s'", info->name, name);
    }
    s = e;
  }
}

/* Integer attribute in [lo, hi]; absent optional ones give dflt. false if bad (reported). */
static bool attr_int(vctx_t *c, const drk_tile_op_t *op, const char *name, int64_t lo, int64_t hi, int64_t *out) {
  const drk_tile_attr_t *a = drk_tile_op_attr(op, name);
  if (!a) return false;
  if (a->kind != DRK_TA_INT || a->i < lo || a->i > hi) {
    err(c, op->loc, "attribute '%s' must be an integer in [%lld, %lld]", name, (long long)lo, (long long)hi);
    return false;
  }
  *out = a->i;
  return true;
}

/* Identifier attribute from a space-separated list; returns its index or -1. */
static int attr_ident(vctx_t *c, const drk_tile_op_t *op, const char *name, const char *choices) {
  const drk_tile_attr_t *a = drk_tile_op_attr(op, name);
  if (!a) return -1;
  if (a->kind == DRK_TA_IDENT) {
    int idx = 0;
    size_t nl = strlen(a->s);
    for (const char *s = choices; *s; idx++) {
      const char *e = s + strcspn(s, " ");
      if ((size_t)(e - s) == nl && memcmp(s, a->s, nl) == 0) return idx;
      s = *e ? e + 1 : e;
    }
  }
  err(c, op->loc, "attribute '%s' must be one of: %s", name, choices);
  return -1;
}

/* ---- ops ---- */
static const drk_tile_type_t *T(const drk_tile_op_t *op, int i) { return &op->operands[i]->type; }
static const drk_tile_type_t *R(const drk_tile_op_t *op, int i) { return &op->results[i]->type; }

static void check_dot(vctx_t *c, const drk_tile_op_t *op) {
  int kind = attr_ident(c, op, "kind", "mma_sync wgmma mfma fma");
  if (kind < 0) return;
  const drk_tile_type_t *a = T(op, 0), *b = T(op, 1), *acc = T(op, 2), *r = R(op, 0);
  if (acc->kind != DRK_TT_TILE || acc->is_ptr || acc->rank != 2) { err(c, op->loc, "dot accumulator must be a rank-2 register tile, got %s", ty(acc)); return; }
  if (!drk_tile_type_equal(acc, r)) { err(c, op->loc, "dot result type %s must equal the accumulator type %s", ty(r), ty(acc)); return; }
  for (int i = 0; i < 2; i++) {
    const drk_tile_type_t *t = i ? b : a;
    if ((t->kind != DRK_TT_TILE && t->kind != DRK_TT_SMEM) || t->is_ptr || t->rank != 2) {
      err(c, op->loc, "dot operand %c must be a rank-2 tile or shared buffer, got %s", i ? 'B' : 'A', ty(t));
      return;
    }
  }
  int64_t M = acc->dims[0], N = acc->dims[1], K = a->dims[1];
  if (a->dims[0] != M || b->dims[0] != K || b->dims[1] != N) {
    err(c, op->loc, "dot shapes do not match: A %lldx%lld, B %lldx%lld, accumulator %lldx%lld (need MxK, KxN, MxN)",
        (long long)a->dims[0], (long long)a->dims[1], (long long)b->dims[0], (long long)b->dims[1], (long long)M, (long long)N);
    return;
  }
  static const drk_tile_layout_kind_t acc_kinds[] = {DRK_TL_MMA_SYNC, DRK_TL_WGMMA, DRK_TL_MFMA, DRK_TL_BLOCKED};
  static const char *const kinds[] = {"mma_sync", "wgmma", "mfma", "fma"};
  if (acc->layout->kind != acc_kinds[kind]) {
    err(c, op->loc, "dot kind %s needs a %s accumulator layout, got #%s", kinds[kind],
        drk_tile_layout_kind_name(acc_kinds[kind]), acc->layout->name);
    return;
  }
  if (kind != 3) {
    /* wgmma's m64 instruction belongs to a warpgroup (4 warps), the others to one warp. */
    const drk_tile_layout_t *l = acc->layout;
    int64_t cm = (int64_t)l->instr[0] * (l->kind == DRK_TL_WGMMA ? l->wpc[0] / 4 : l->wpc[0]);
    int64_t cn = (int64_t)l->instr[1] * l->wpc[1];
    if (M % cm || N % cn) {
      err(c, op->loc, "dot accumulator %s is not a multiple of the %s layout's tile (%lldx%lld)", ty(acc),
          drk_tile_layout_kind_name(l->kind), (long long)cm, (long long)cn);
      return;
    }
  }
  /* Operand placement: registers in dot_op layouts of the accumulator, or (wgmma) shared. */
  for (int i = 0; i < 2; i++) {
    const drk_tile_type_t *t = i ? b : a;
    bool smem_ok = kind == 1 && (i == 1 || t->kind == DRK_TT_SMEM);
    if (t->kind == DRK_TT_SMEM) {
      if (!smem_ok) { err(c, op->loc, "dot kind %s takes operand %c in registers, not shared memory", kinds[kind], i ? 'B' : 'A'); return; }
      if (t->layout->rank != 2) { err(c, op->loc, "dot operand %c: shared layout must have rank 2", i ? 'B' : 'A'); return; }
      continue;
    }
    if (kind == 1 && i == 1) { err(c, op->loc, "wgmma takes operand B from shared memory"); return; }
    const drk_tile_layout_t *l = t->layout;
    if (l->kind != DRK_TL_DOT_OP || l->op_idx != i || !drk_tile_layout_equal(l->parent, acc->layout)) {
      err(c, op->loc, "dot operand %c layout #%s must be dot_op{parent = #%s, op_idx = %d}", i ? 'B' : 'A', l->name,
          acc->layout->name, i);
      return;
    }
  }
  /* Element types each instruction family takes. */
  drk_dtype_t ea = a->dtype, eb = b->dtype, ec = acc->dtype;
  bool f8a = ea == DRK_DT_F8E4M3 || ea == DRK_DT_F8E5M2, f8b = eb == DRK_DT_F8E4M3 || eb == DRK_DT_F8E5M2;
  bool ok;
  if (kind == 3) {
    ok = drk_dtype_is_float(ea) && ea == eb && drk_dtype_is_float(ec) && !f8a;
  } else {
    ok = (ea == DRK_DT_F16 && eb == DRK_DT_F16 && (ec == DRK_DT_F32 || (ec == DRK_DT_F16 && kind != 2))) ||
         (ea == DRK_DT_BF16 && eb == DRK_DT_BF16 && ec == DRK_DT_F32) || (f8a && f8b && ec == DRK_DT_F32) ||
         (ea == DRK_DT_I8 && eb == DRK_DT_I8 && ec == DRK_DT_I32) ||
         (ea == DRK_DT_F32 && eb == DRK_DT_F32 && ec == DRK_DT_F32); /* tf32 */
  }
  if (!ok) {
    err(c, op->loc, "dot kind %s does not take %s x %s -> %s", kinds[kind], drk_dtype_name(ea), drk_dtype_name(eb),
        drk_dtype_name(ec));
    return;
  }
  if (kind == 0 || kind == 1) {
    int64_t kstep = 256 / drk_dtype_bits(ea); /* k16 for 16-bit, k32 for 8-bit, k8 for tf32 */
    if (K % kstep) err(c, op->loc, "dot K = %lld must be a multiple of %lld for %s %s", (long long)K, (long long)kstep, kinds[kind], drk_dtype_name(ea));
  }
  if (kind == 1 && c->wg && (drk_tile_op_attr_int(c->wg, "first_warp", 0) % 4))
    err(c, op->loc, "wgmma must run in a warp group starting at a multiple of 4 warps");
}

/* ---- elementwise ---- */
static void check_ew_binary(vctx_t *c, const drk_tile_op_t *op) {
  const char *nm = drk_tile_op_name(op->code);
  const drk_tile_type_t *a = T(op, 0);
  if (!is_value(a) || !drk_tile_type_equal(a, T(op, 1)) || !drk_tile_type_equal(a, R(op, 0)))
    err(c, op->loc, "'%s' needs two operands and a result of one numeric type, got %s, %s -> %s", nm, ty(a), ty(T(op, 1)), ty(R(op, 0)));
  else if ((op->code == DRK_TOP_AND || op->code == DRK_TOP_OR) && !is_int_dt(a->dtype) && a->dtype != DRK_DT_BOOL)
    err(c, op->loc, "'%s' needs integer or bool operands", nm);
  else if (op->code != DRK_TOP_AND && op->code != DRK_TOP_OR && a->dtype == DRK_DT_BOOL)
    err(c, op->loc, "'%s' does not take bool operands", nm);
}

static void check_ew_unary(vctx_t *c, const drk_tile_op_t *op) {
  const char *nm = drk_tile_op_name(op->code);
  const drk_tile_type_t *a = T(op, 0);
  bool sint_ok = op->code == DRK_TOP_NEG || op->code == DRK_TOP_ABS;
  if (!is_value(a) || !drk_tile_type_equal(a, R(op, 0)))
    err(c, op->loc, "'%s' result type %s must equal its operand type %s", nm, ty(R(op, 0)), ty(a));
  else if (!drk_dtype_is_float(a->dtype) && !(sint_ok && drk_dtype_is_signed_int(a->dtype)))
    err(c, op->loc, "'%s' does not take %s", nm, drk_dtype_name(a->dtype));
}

static void check_select(vctx_t *c, const drk_tile_op_t *op) {
  const drk_tile_type_t *k = T(op, 0), *a = T(op, 1);
  if (!is_value(a) || !drk_tile_type_equal(a, T(op, 2)) || !drk_tile_type_equal(a, R(op, 0)))
    err(c, op->loc, "'select' needs two values and a result of one type, got %s, %s -> %s", ty(a), ty(T(op, 2)), ty(R(op, 0)));
  else if (k->is_ptr || k->dtype != DRK_DT_BOOL || !same_frame(k, a))
    err(c, op->loc, "'select' condition must be bool of the values' shape and layout, got %s", ty(k));
}

static void check_fma(vctx_t *c, const drk_tile_op_t *op) {
  const drk_tile_type_t *a = T(op, 0);
  if (!is_value(a) || !drk_dtype_is_float(a->dtype) || !drk_tile_type_equal(a, T(op, 1)) ||
      !drk_tile_type_equal(a, T(op, 2)) || !drk_tile_type_equal(a, R(op, 0)))
    err(c, op->loc, "'fma' needs three float operands and a result of one type, got %s, %s, %s -> %s", ty(a),
        ty(T(op, 1)), ty(T(op, 2)), ty(R(op, 0)));
}

static void check_cmp(vctx_t *c, const drk_tile_op_t *op) {
  const drk_tile_type_t *a = T(op, 0), *r = R(op, 0);
  attr_ident(c, op, "pred", "eq ne lt le gt ge");
  if (!is_value(a) || !drk_tile_type_equal(a, T(op, 1)))
    err(c, op->loc, "'cmp' operands must have one numeric type, got %s and %s", ty(a), ty(T(op, 1)));
  else if (r->is_ptr || r->dtype != DRK_DT_BOOL || !same_frame(a, r))
    err(c, op->loc, "'cmp' gives bool of its operands' shape and layout, not %s", ty(r));
}

static void check_cast(vctx_t *c, const drk_tile_op_t *op) {
  const drk_tile_type_t *a = T(op, 0), *r = R(op, 0);
  if (!is_value(a) || !is_value(r) || !same_frame(a, r))
    err(c, op->loc, "'cast' changes only the element type: %s -> %s", ty(a), ty(r));
  if (drk_tile_op_attr(op, "rounding")) attr_ident(c, op, "rounding", "rn rz");
}

/* bitcast: the same bits read as another dtype of the same width (i16 <-> f16/bf16, i32 <->
 * f32, ...); no bool, no sub-byte dtypes */
static void check_bitcast(vctx_t *c, const drk_tile_op_t *op) {
  const drk_tile_type_t *a = T(op, 0), *r = R(op, 0);
  bool ok = is_value(a) && is_value(r) && same_frame(a, r);
  for (int i = 0; i < 2 && ok; i++) {
    drk_dtype_t t = i ? r->dtype : a->dtype;
    ok = t != DRK_DT_BOOL && drk_dtype_bits(t) >= 8;
  }
  if (!ok || drk_dtype_bits(a->dtype) != drk_dtype_bits(r->dtype))
    err(c, op->loc, "'bitcast' reads the bits as another dtype of the same width (not bool, i4, u4): %s -> %s", ty(a), ty(r));
}

/* ---- values, shapes and layouts ---- */
static void check_program_id(vctx_t *c, const drk_tile_op_t *op) {
  const char *nm = drk_tile_op_name(op->code);
  int64_t v = 0;
  attr_int(c, op, "axis", 0, 2, &v);
  if (!is_i32(R(op, 0))) err(c, op->loc, "'%s' gives an i32", nm);
}

static void check_constant(vctx_t *c, const drk_tile_op_t *op) {
  const drk_tile_attr_t *a = drk_tile_op_attr(op, "value");
  const drk_tile_type_t *r = R(op, 0);
  if (!is_value(r)) err(c, op->loc, "'constant' gives a number or a tile of numbers, not %s", ty(r));
  else if (!a || (a->kind != DRK_TA_INT && a->kind != DRK_TA_FLOAT)) err(c, op->loc, "attribute 'value' must be a number");
  else if (a->kind == DRK_TA_FLOAT && !drk_dtype_is_float(r->dtype)) err(c, op->loc, "a float value needs a float type, not %s", ty(r));
  else if (r->dtype == DRK_DT_BOOL && a->kind == DRK_TA_INT && a->i != 0 && a->i != 1) err(c, op->loc, "a bool constant is 0 or 1");
}

static void check_make_range(vctx_t *c, const drk_tile_op_t *op) {
  int64_t s = 0, e = 0;
  const drk_tile_type_t *r = R(op, 0);
  if (attr_int(c, op, "start", 0, INT32_MAX, &s) && attr_int(c, op, "end", 1, INT32_MAX, &e)) {
    if (r->kind != DRK_TT_TILE || r->rank != 1 || r->is_ptr || r->dtype != DRK_DT_I32 || r->dims[0] != e - s)
      err(c, op->loc, "'make_range' from %lld to %lld gives tile<%lldxi32, #L>, not %s", (long long)s, (long long)e,
          (long long)(e - s), ty(r));
  }
}

static void check_splat(vctx_t *c, const drk_tile_op_t *op) {
  const drk_tile_type_t *a = T(op, 0), *r = R(op, 0);
  if (a->kind != DRK_TT_SCALAR || r->kind != DRK_TT_TILE || a->dtype != r->dtype || a->is_ptr != r->is_ptr)
    err(c, op->loc, "'splat' makes a tile of its scalar's type: %s -> %s", ty(a), ty(r));
}

static void check_broadcast(vctx_t *c, const drk_tile_op_t *op) {
  const drk_tile_type_t *a = T(op, 0), *r = R(op, 0);
  bool ok = a->kind == DRK_TT_TILE && r->kind == DRK_TT_TILE && a->dtype == r->dtype && a->is_ptr == r->is_ptr &&
            a->rank == r->rank && drk_tile_layout_equal(a->layout, r->layout);
  for (int i = 0; ok && i < a->rank; i++) ok = a->dims[i] == r->dims[i] || a->dims[i] == 1;
  if (!ok) err(c, op->loc, "'broadcast' expands size-1 dimensions, keeping element type and layout: %s -> %s", ty(a), ty(r));
}

static void check_expand_dims(vctx_t *c, const drk_tile_op_t *op) {
  int64_t v = 0;
  const drk_tile_type_t *a = T(op, 0), *r = R(op, 0);
  if (a->kind != DRK_TT_TILE || r->kind != DRK_TT_TILE) { err(c, op->loc, "'expand_dims' works on tiles"); return; }
  if (!attr_int(c, op, "axis", 0, a->rank, &v)) return;
  bool ok = r->rank == a->rank + 1 && r->dims[v] == 1 && a->dtype == r->dtype && a->is_ptr == r->is_ptr;
  for (int i = 0, j = 0; ok && i < r->rank; i++)
    if (i != v) ok = r->dims[i] == a->dims[j++];
  if (!ok) { err(c, op->loc, "'expand_dims' axis %lld: %s -> %s inserts a size-1 dimension", (long long)v, ty(a), ty(r)); return; }
  if (a->layout->kind != DRK_TL_SLICE || a->layout->dim != v || !drk_tile_layout_equal(a->layout->parent, r->layout))
    err(c, op->loc, "'expand_dims' operand layout #%s must be slice{parent = #%s, dim = %lld}", a->layout->name, r->layout->name, (long long)v);
}

static void check_reshape(vctx_t *c, const drk_tile_op_t *op) {
  const drk_tile_type_t *a = T(op, 0), *r = R(op, 0);
  if (a->kind != DRK_TT_TILE || r->kind != DRK_TT_TILE || a->dtype != r->dtype || a->is_ptr != r->is_ptr ||
      drk_tile_type_numel(a) != drk_tile_type_numel(r))
    err(c, op->loc, "'reshape' keeps element type and count: %s -> %s", ty(a), ty(r));
}

static void check_convert_layout(vctx_t *c, const drk_tile_op_t *op) {
  int64_t v = 0;
  const drk_tile_type_t *a = T(op, 0), *r = R(op, 0);
  if (a->kind != DRK_TT_TILE || r->kind != DRK_TT_TILE || a->dtype != r->dtype || a->is_ptr != r->is_ptr ||
      !drk_tile_type_same_shape(a, r))
    err(c, op->loc, "'convert_layout' keeps shape and element type: %s -> %s", ty(a), ty(r));
  if (drk_tile_op_attr(op, "scratch") && attr_int(c, op, "scratch", 0, c->k->smem, &v) &&
      v + smem_bytes(a) > c->k->smem)
    err(c, op->loc, "'convert_layout' scratch [%lld, %lld) exceeds smem(%lld)", (long long)v, (long long)(v + smem_bytes(a)), (long long)c->k->smem);
}

static void check_reduce(vctx_t *c, const drk_tile_op_t *op) {
  int64_t v = 0;
  const drk_tile_type_t *a = T(op, 0), *r = R(op, 0);
  attr_ident(c, op, "combiner", "sum max min");
  if (a->kind != DRK_TT_TILE || a->is_ptr) { err(c, op->loc, "'reduce' works on tiles of numbers"); return; }
  if (!attr_int(c, op, "axis", 0, a->rank - 1, &v)) return;
  if (a->rank == 1) {
    if (!is_scalar(r) || r->dtype != a->dtype) err(c, op->loc, "'reduce' of a rank-1 tile gives a %s scalar, not %s", drk_dtype_name(a->dtype), ty(r));
  } else {
    bool ok = r->kind == DRK_TT_TILE && !r->is_ptr && r->dtype == a->dtype && r->rank == a->rank - 1;
    for (int i = 0, j = 0; ok && i < a->rank; i++)
      if (i != v) ok = r->dims[j++] == a->dims[i];
    if (!ok) err(c, op->loc, "'reduce' along axis %lld removes that dimension: %s -> %s", (long long)v, ty(a), ty(r));
    else if (r->layout->kind != DRK_TL_SLICE || r->layout->dim != v || !drk_tile_layout_equal(r->layout->parent, a->layout))
      err(c, op->loc, "'reduce' result layout #%s must be slice{parent = #%s, dim = %lld}", r->layout->name, a->layout->name, (long long)v);
  }
  if (drk_tile_op_attr(op, "scratch")) attr_int(c, op, "scratch", 0, c->k->smem, &v);
}

/* ---- memory: global, shared, async copies, TMA, mbarriers ---- */
static void check_addptr(vctx_t *c, const drk_tile_op_t *op) {
  const drk_tile_type_t *p = T(op, 0), *o = T(op, 1);
  if (!is_ptrish(p)) { err(c, op->loc, "'addptr' operand 0 must be a pointer or pointer tile, got %s", ty(p)); return; }
  if (o->is_ptr || (o->dtype != DRK_DT_I32 && o->dtype != DRK_DT_I64) || !same_frame(p, o))
    err(c, op->loc, "'addptr' offsets must be i32 or i64 of the pointers' shape and layout, got %s for %s", ty(o), ty(p));
  else if (!drk_tile_type_equal(p, R(op, 0))) err(c, op->loc, "'addptr' result must have the pointer type %s", ty(p));
}

static void check_load_store(vctx_t *c, const drk_tile_op_t *op) {
  const char *nm = drk_tile_op_name(op->code);
  const drk_tile_type_t *p = T(op, 0);
  if (!is_ptrish(p)) { err(c, op->loc, "'%s' operand 0 must be a pointer or pointer tile, got %s", nm, ty(p)); return; }
  drk_tile_type_t want = *p;
  want.is_ptr = false;
  bool ld = op->code == DRK_TOP_LOAD;
  const drk_tile_type_t *val = ld ? R(op, 0) : T(op, 1);
  if (!drk_tile_type_equal(val, &want)) {
    err(c, op->loc, "'%s' %s has type %s, expected %s for pointers %s", nm, ld ? "result" : "value", ty(val), ty(&want), ty(p));
    return;
  }
  int mi = ld ? 1 : 2;
  if (op->n_operands > mi) {
    const drk_tile_type_t *mk = T(op, mi);
    if (mk->is_ptr || mk->dtype != DRK_DT_BOOL || !same_frame(mk, p))
      err(c, op->loc, "'%s' mask must be bool with the pointers' shape and layout: %s for %s", nm, ty(mk), ty(p));
  }
  if (ld && op->n_operands > 2 && !drk_tile_type_equal(T(op, 2), &want))
    err(c, op->loc, "'load' other value has type %s, expected %s", ty(T(op, 2)), ty(&want));
  if (drk_tile_op_attr(op, "cache")) attr_ident(c, op, "cache", "ca cg cs");
}

static void check_cp_async(vctx_t *c, const drk_tile_op_t *op) {
  const drk_tile_type_t *dst = T(op, 0), *src = T(op, 1);
  if (dst->kind != DRK_TT_SMEM || src->kind != DRK_TT_TILE || !src->is_ptr || dst->dtype != src->dtype ||
      !drk_tile_type_same_shape(dst, src))
    err(c, op->loc, "'cp_async' copies a pointer tile into shared memory of the same shape and dtype: %s <- %s", ty(dst), ty(src));
  else if (op->n_operands > 2 && (T(op, 2)->dtype != DRK_DT_BOOL || T(op, 2)->is_ptr || !same_frame(T(op, 2), src)))
    err(c, op->loc, "'cp_async' mask must be bool with the pointers' shape and layout");
  if (drk_tile_op_attr(op, "cache")) attr_ident(c, op, "cache", "ca cg");
}

static void check_wait(vctx_t *c, const drk_tile_op_t *op) {
  int64_t v = 0;
  attr_int(c, op, "pending", 0, 63, &v);
  if (op->code == DRK_TOP_WGMMA_WAIT) {
    if (op->n_results != op->n_operands) err(c, op->loc, "'wgmma_wait' passes its operands through: %d operand(s), %d result(s)", op->n_operands, op->n_results);
    for (int i = 0; c->ok && i < op->n_results; i++)
      if (!drk_tile_type_equal(T(op, i), R(op, i))) err(c, op->loc, "'wgmma_wait' result %d must have its operand's type", i);
  }
}

static void check_tma(vctx_t *c, const drk_tile_op_t *op) {
  const char *nm = drk_tile_op_name(op->code);
  int64_t v = 0;
  const drk_tile_type_t *desc = T(op, 0), *buf = T(op, 1);
  bool ld = op->code == DRK_TOP_TMA_LOAD;
  int first = ld ? 3 : 2;
  if (desc->kind != DRK_TT_TMADESC) { err(c, op->loc, "'%s' operand 0 must be a TMA descriptor, got %s", nm, ty(desc)); return; }
  if (buf->kind != DRK_TT_SMEM || buf->dtype != desc->dtype || !drk_tile_type_same_shape(buf, desc) ||
      !drk_tile_layout_equal(buf->layout, desc->layout)) {
    err(c, op->loc, "'%s' shared buffer %s must match the descriptor box %s (shape, dtype, layout)", nm, ty(buf), ty(desc));
    return;
  }
  if (ld && !is_mbar(T(op, 2))) { err(c, op->loc, "'tma_load' operand 2 must be an mbarrier (smem<i64, #S>), got %s", ty(T(op, 2))); return; }
  if (op->n_operands - first != desc->rank) { err(c, op->loc, "'%s' needs %d coordinate(s) for a rank-%d box, got %d", nm, desc->rank, desc->rank, op->n_operands - first); return; }
  for (int i = first; i < op->n_operands; i++)
    if (!is_i32(T(op, i))) { err(c, op->loc, "'%s' coordinates are i32 scalars, got %s", nm, ty(T(op, i))); break; }
  if (ld && drk_tile_op_attr(op, "multicast") && attr_int(c, op, "multicast", 1, 65535, &v) && v >> cluster_size(c->k))
    err(c, op->loc, "'tma_load' multicast mask %lld names CTAs outside the kernel's cluster of %lld", (long long)v, (long long)cluster_size(c->k));
}

static void check_mbarrier(vctx_t *c, const drk_tile_op_t *op) {
  const char *nm = drk_tile_op_name(op->code);
  int64_t v = 0;
  if (!is_mbar(T(op, 0))) {
    err(c, op->loc, "'%s' needs an mbarrier in shared memory (smem<i64, #S>; index arrays with memdesc_index), got %s", nm, ty(T(op, 0)));
    return;
  }
  if (op->code == DRK_TOP_MBARRIER_INIT) attr_int(c, op, "count", 1, 1023, &v);
  if (op->code == DRK_TOP_MBARRIER_EXPECT_TX) attr_int(c, op, "bytes", 0, (1 << 20) - 1, &v);
  if (op->code == DRK_TOP_MBARRIER_WAIT && !is_i32(T(op, 1))) err(c, op->loc, "'mbarrier_wait' phase parity is an i32, got %s", ty(T(op, 1)));
  if (op->code != DRK_TOP_MBARRIER_WAIT && op->n_operands > 1) {
    if (op->code != DRK_TOP_MBARRIER_ARRIVE) err(c, op->loc, "'%s' takes one operand", nm);
    else if (!is_i32(T(op, 1))) err(c, op->loc, "'mbarrier_arrive' target CTA (its rank in the cluster) is an i32, got %s", ty(T(op, 1)));
    else if (cluster_size(c->k) < 2) err(c, op->loc, "'mbarrier_arrive' on another CTA needs a kernel with a cluster");
  }
}

static void check_local_alloc(vctx_t *c, const drk_tile_op_t *op) {
  int64_t v = 0;
  const drk_tile_type_t *r = R(op, 0);
  if (r->kind != DRK_TT_SMEM) { err(c, op->loc, "'local_alloc' gives a shared buffer, not %s", ty(r)); return; }
  if (!attr_int(c, op, "offset", 0, INT32_MAX, &v)) return;
  int64_t align = r->layout->swizzle ? (int64_t)r->layout->swizzle * 8 : (r->dtype == DRK_DT_I64 && r->rank <= 1 ? 8 : 16);
  int64_t bytes = smem_bytes(r);
  if (v % align) err(c, op->loc, "'local_alloc' offset %lld must be a multiple of %lld for %s", (long long)v, (long long)align, ty(r));
  else if (bytes > c->k->smem - v)
    err(c, op->loc, "'local_alloc' [%lld, %lld) exceeds the kernel's smem(%lld)", (long long)v, (long long)(v + bytes), (long long)c->k->smem);
}

static void check_memdesc_index(vctx_t *c, const drk_tile_op_t *op) {
  const drk_tile_type_t *a = T(op, 0), *r = R(op, 0);
  bool ok = a->kind == DRK_TT_SMEM && a->rank >= 1 && r->kind == DRK_TT_SMEM && r->rank == a->rank - 1 &&
            r->dtype == a->dtype && drk_tile_layout_equal(a->layout, r->layout);
  for (int i = 0; ok && i < r->rank; i++) ok = r->dims[i] == a->dims[i + 1];
  if (!ok) err(c, op->loc, "'memdesc_index' drops the leading dimension of a shared buffer: %s -> %s", ty(a), ty(r));
  else if (!is_i32(T(op, 1))) err(c, op->loc, "'memdesc_index' index is an i32, got %s", ty(T(op, 1)));
}

static void check_local_load_store(vctx_t *c, const drk_tile_op_t *op) {
  const char *nm = drk_tile_op_name(op->code);
  const drk_tile_type_t *s = T(op, 0), *t = op->code == DRK_TOP_LOCAL_LOAD ? R(op, 0) : T(op, 1);
  if (s->kind != DRK_TT_SMEM || t->kind != DRK_TT_TILE || t->is_ptr || s->dtype != t->dtype || !drk_tile_type_same_shape(s, t))
    err(c, op->loc, "'%s' moves a tile of the buffer's shape and dtype: %s and %s", nm, ty(s), ty(t));
  else if (s->layout->rank != s->rank)
    err(c, op->loc, "'%s': shared layout #%s must have the buffer's rank %d (index stages first)", nm, s->layout->name, s->rank);
}

/* ---- control flow, barriers, warp specialization ---- */
static void check_for(vctx_t *c, const drk_tile_op_t *op) {
  const drk_tile_type_t *lb = T(op, 0);
  if (!is_int_scalar(lb) || (lb->dtype != DRK_DT_I32 && lb->dtype != DRK_DT_I64) || !drk_tile_type_equal(lb, T(op, 1)) ||
      !drk_tile_type_equal(lb, T(op, 2))) {
    err(c, op->loc, "'for' bounds and step must be i32 or i64 scalars of one type");
    return;
  }
  int n = op->n_operands - 3;
  if (op->n_results != n) { err(c, op->loc, "'for' has %d carried value(s) but %d result(s)", n, op->n_results); return; }
  const drk_tile_region_t *body = op->regions[0];
  if (body->n_args != n + 1) { err(c, op->loc, "'for' body takes the induction variable and %d carried value(s): %d argument(s), got %d", n, n + 1, body->n_args); return; }
  if (!drk_tile_type_equal(&body->args[0]->type, lb)) err(c, op->loc, "'for' induction variable must have the bounds' type %s", ty(lb));
  for (int i = 0; i < n; i++) {
    if (!drk_tile_type_equal(T(op, 3 + i), R(op, i)) || !drk_tile_type_equal(T(op, 3 + i), &body->args[1 + i]->type)) {
      err(c, op->loc, "'for' carried value %d: init %s, argument %s and result %s must have one type", i, ty(T(op, 3 + i)),
          ty(&body->args[1 + i]->type), ty(R(op, i)));
      break;
    }
  }
}

static void check_if(vctx_t *c, const drk_tile_op_t *op) {
  const drk_tile_type_t *k = T(op, 0);
  if (!is_scalar(k) || k->dtype != DRK_DT_BOOL) err(c, op->loc, "'if' condition must be a bool scalar, got %s", ty(k));
  for (int i = 0; i < op->n_regions; i++)
    if (op->regions[i]->n_args) err(c, op->loc, "'if' regions take no arguments");
  if (op->n_results && op->n_regions < 2) err(c, op->loc, "'if' with results needs an else region");
}

static void check_barrier(vctx_t *c, const drk_tile_op_t *op) {
  int64_t id = 0, th = 0;
  bool has_id = drk_tile_op_attr(op, "id") != NULL, has_th = drk_tile_op_attr(op, "threads") != NULL;
  if (has_id) attr_int(c, op, "id", 0, 15, &id);
  if (has_th && attr_int(c, op, "threads", 32, c->k->block, &th) && th % 32)
    err(c, op->loc, "'barrier' threads must be a multiple of 32");
  if (has_th && !has_id) err(c, op->loc, "'barrier' with a thread count needs a named barrier id");
  if (attr_ident(c, op, "scope", "cta cluster") == 1) { /* every thread of every CTA of the cluster */
    if (has_id || has_th) err(c, op->loc, "a cluster 'barrier' takes no id or thread count");
    else if (c->wg) err(c, op->loc, "a cluster 'barrier' must be at the top level, outside warp groups");
    else if (cluster_size(c->k) < 2) err(c, op->loc, "a cluster 'barrier' needs a kernel with a cluster");
    return;
  }
  if (c->ok && c->wg && (!has_id || id == 0 || !has_th))
    err(c, op->loc, "a 'barrier' inside a warp_group needs a named barrier id (1..15) and a thread count");
}

static void check_warp_group(vctx_t *c, const drk_tile_op_t *op) {
  int64_t fw = 0, nw = 0, maxw = c->k->block / 32;
  if (op->parent != c->k->body) { err(c, op->loc, "'warp_group' must be at the top level of the kernel body"); return; }
  const drk_tile_attr_t *role = drk_tile_op_attr(op, "role");
  if (role && role->kind != DRK_TA_IDENT) err(c, op->loc, "attribute 'role' must be an identifier");
  if (!attr_int(c, op, "first_warp", 0, 63, &fw) || !attr_int(c, op, "num_warps", 1, 64, &nw)) return;
  if (fw + nw > maxw) { err(c, op->loc, "warp group warps [%lld, %lld) exceed the block's %lld warps", (long long)fw, (long long)(fw + nw), (long long)maxw); return; }
  uint64_t mask = (nw >= 64 ? ~0ull : ((1ull << nw) - 1)) << fw;
  if (c->wg_mask & mask) err(c, op->loc, "warp group warps [%lld, %lld) overlap another warp group", (long long)fw, (long long)(fw + nw));
  c->wg_mask |= mask;
  if (op->regions[0]->n_args) err(c, op->loc, "'warp_group' region takes no arguments");
}

static void check_setmaxnreg(vctx_t *c, const drk_tile_op_t *op) {
  int64_t v = 0;
  if (!c->wg || op->parent != c->wg->regions[0]) { err(c, op->loc, "'setmaxnreg' belongs directly in a warp_group region"); return; }
  if (attr_int(c, op, "regs", 24, 256, &v) && v % 8) err(c, op->loc, "'setmaxnreg' regs must be a multiple of 8");
  attr_ident(c, op, "action", "inc dec");
  if (drk_tile_op_attr_int(c->wg, "num_warps", 0) % 4 || drk_tile_op_attr_int(c->wg, "first_warp", 0) % 4)
    err(c, op->loc, "'setmaxnreg' needs a warp group of whole warpgroups (multiples of 4 warps)");
}

/* Types, shapes, layouts and attribute values, by op (counts and attribute names are
 * already checked). */
static void check_op_types(vctx_t *c, const drk_tile_op_t *op) {
  const drk_tile_op_info_t *info = drk_tile_op_info(op->code);
  if (info->flags & DRK_TOPF_EWB) { check_ew_binary(c, op); return; }
  if (info->flags & DRK_TOPF_EWU) { check_ew_unary(c, op); return; }
  switch (op->code) {
  case DRK_TOP_PROGRAM_ID:
  case DRK_TOP_NUM_PROGRAMS: check_program_id(c, op); break;
  case DRK_TOP_CONSTANT: check_constant(c, op); break;
  case DRK_TOP_MAKE_RANGE: check_make_range(c, op); break;
  case DRK_TOP_SPLAT: check_splat(c, op); break;
  case DRK_TOP_BROADCAST: check_broadcast(c, op); break;
  case DRK_TOP_EXPAND_DIMS: check_expand_dims(c, op); break;
  case DRK_TOP_RESHAPE: check_reshape(c, op); break;
  case DRK_TOP_CONVERT_LAYOUT: check_convert_layout(c, op); break;
  case DRK_TOP_ADDPTR: check_addptr(c, op); break;
  case DRK_TOP_LOAD:
  case DRK_TOP_STORE: check_load_store(c, op); break;
  case DRK_TOP_CP_ASYNC: check_cp_async(c, op); break;
  case DRK_TOP_CP_ASYNC_WAIT:
  case DRK_TOP_TMA_STORE_WAIT:
  case DRK_TOP_WGMMA_WAIT: check_wait(c, op); break;
  case DRK_TOP_TMA_LOAD:
  case DRK_TOP_TMA_STORE: check_tma(c, op); break;
  case DRK_TOP_MBARRIER_INIT:
  case DRK_TOP_MBARRIER_ARRIVE:
  case DRK_TOP_MBARRIER_EXPECT_TX:
  case DRK_TOP_MBARRIER_WAIT: check_mbarrier(c, op); break;
  case DRK_TOP_FENCE: attr_ident(c, op, "kind", "proxy_async mbarrier_init"); break;
  case DRK_TOP_LOCAL_ALLOC: check_local_alloc(c, op); break;
  case DRK_TOP_MEMDESC_INDEX: check_memdesc_index(c, op); break;
  case DRK_TOP_LOCAL_LOAD:
  case DRK_TOP_LOCAL_STORE: check_local_load_store(c, op); break;
  case DRK_TOP_DOT: check_dot(c, op); break;
  case DRK_TOP_SELECT: check_select(c, op); break;
  case DRK_TOP_FMA: check_fma(c, op); break;
  case DRK_TOP_CMP: check_cmp(c, op); break;
  case DRK_TOP_CAST: check_cast(c, op); break;
  case DRK_TOP_BITCAST: check_bitcast(c, op); break;
  case DRK_TOP_REDUCE: check_reduce(c, op); break;
  case DRK_TOP_FOR: check_for(c, op); break;
  case DRK_TOP_IF: check_if(c, op); break;
  case DRK_TOP_BARRIER: check_barrier(c, op); break;
  case DRK_TOP_WARP_GROUP: check_warp_group(c, op); break;
  case DRK_TOP_SETMAXNREG: check_setmaxnreg(c, op); break;
  default: break;
  }
}

/* ---- structure ---- */
/* Operand, result and region counts, operands defined and in scope, nothing null. */
static void check_counts(vctx_t *c, const drk_tile_op_t *op) {
  const drk_tile_op_info_t *info = drk_tile_op_info(op->code);
  const char *nm = info->name;
  if (op->n_operands < info->min_operands || (info->max_operands >= 0 && op->n_operands > info->max_operands)) {
    if (info->max_operands == info->min_operands) err(c, op->loc, "'%s' takes %d operand(s), got %d", nm, info->min_operands, op->n_operands);
    else if (info->max_operands < 0) err(c, op->loc, "'%s' takes at least %d operand(s), got %d", nm, info->min_operands, op->n_operands);
    else err(c, op->loc, "'%s' takes %d to %d operands, got %d", nm, info->min_operands, info->max_operands, op->n_operands);
  }
  if (info->n_results >= 0 && op->n_results != info->n_results)
    err(c, op->loc, "'%s' has %d result(s), got %d", nm, info->n_results, op->n_results);
  if (op->n_regions < info->min_regions || op->n_regions > info->max_regions)
    err(c, op->loc, "'%s' takes %d to %d region(s), got %d", nm, info->min_regions, info->max_regions, op->n_regions);
  for (int i = 0; i < op->n_operands; i++) {
    const drk_tile_value_t *v = op->operands[i];
    if (!v) { err(c, op->loc, "'%s' operand %d is null", nm, i); continue; }
    if (v->id >= c->m->next_value_id) { err(c, op->loc, "'%s' operand %d is not from this module", nm, i); continue; }
    if (c->state[v->id] == 2) err(c, op->loc, "value '%%%s' is used outside its region", v->name);
    else if (c->state[v->id] == 0) err(c, op->loc, "value '%%%s' is used before its definition", v->name);
  }
  for (int i = 0; i < op->n_results; i++)
    if (!op->results[i]) err(c, op->loc, "'%s' result %d is null", nm, i);
  for (int i = 0; i < op->n_regions; i++)
    if (!op->regions[i]) err(c, op->loc, "'%s' region %d is null", nm, i);
}

static void check_op(vctx_t *c, const drk_tile_op_t *op);

static void check_region(vctx_t *c, const drk_tile_region_t *r, const drk_tile_op_t *owner) {
  for (int i = 0; i < r->n_args; i++) {
    if (!r->args[i]) { err(c, r->loc, "region argument %d is null", i); continue; }
    check_def(c, r->args[i]->loc, r->args[i], "region argument");
    c->state[r->args[i]->id] = 1;
  }
  for (size_t i = 0; i < r->n_ops; i++) {
    const drk_tile_op_t *op = r->ops[i];
    const drk_tile_op_info_t *info = drk_tile_op_info(op->code);
    if ((info->flags & DRK_TOPF_TERM) && i + 1 != r->n_ops)
      err(c, op->loc, "'%s' must be the last op of its region", info->name);
    if (op->code == DRK_TOP_YIELD && !(owner && (owner->code == DRK_TOP_FOR || owner->code == DRK_TOP_IF)))
      err(c, op->loc, "'yield' only ends a 'for' or 'if' region");
    if (op->code == DRK_TOP_RETURN && owner)
      err(c, op->loc, "'return' only ends a kernel body");
    check_op(c, op);
  }
  const drk_tile_op_t *last = r->n_ops ? r->ops[r->n_ops - 1] : NULL;
  if (!owner) {
    if (!last || last->code != DRK_TOP_RETURN) err(c, last ? last->loc : r->loc, "a kernel body must end with 'return'");
  } else if (owner->code == DRK_TOP_FOR || owner->code == DRK_TOP_IF) {
    if (!last || last->code != DRK_TOP_YIELD) {
      err(c, last ? last->loc : owner->loc, "a '%s' region must end with 'yield'", drk_tile_op_name(owner->code));
    } else if (last->n_operands != owner->n_results) {
      err(c, last->loc, "'yield' gives %d value(s), '%s' has %d result(s)", last->n_operands, drk_tile_op_name(owner->code),
          owner->n_results);
    } else {
      for (int j = 0; j < last->n_operands; j++)
        if (last->operands[j] && !drk_tile_type_equal(&last->operands[j]->type, R(owner, j)))
          err(c, last->loc, "'yield' value %d has type %s, '%s' result %d has type %s", j, ty(&last->operands[j]->type),
              drk_tile_op_name(owner->code), j, ty(R(owner, j)));
    }
  }
  /* Leaving the region: its definitions go out of scope. */
  for (int i = 0; i < r->n_args; i++)
    if (r->args[i]) c->state[r->args[i]->id] = 2;
  for (size_t i = 0; i < r->n_ops; i++)
    for (int j = 0; j < r->ops[i]->n_results; j++)
      if (r->ops[i]->results[j]) c->state[r->ops[i]->results[j]->id] = 2;
}

static void check_op_regions(vctx_t *c, const drk_tile_op_t *op) {
  for (int i = 0; i < op->n_regions; i++) {
    const drk_tile_op_t *saved_wg = c->wg;
    int saved_warps = c->warps;
    if (op->code == DRK_TOP_WARP_GROUP) {
      int64_t nw = drk_tile_op_attr_int(op, "num_warps", 0);
      if (nw < 1 || nw > 64) break; /* already reported */
      c->wg = op;
      c->warps = (int)nw;
    }
    bool o = c->ok;
    check_region(c, op->regions[i], op);
    c->ok = c->ok && o;
    c->wg = saved_wg;
    c->warps = saved_warps;
  }
}

static void check_op(vctx_t *c, const drk_tile_op_t *op) {
  bool before = c->ok;
  c->ok = true;
  /* Counts first: everything after indexes operands, results and regions freely. */
  check_counts(c, op);
  if (c->ok) {
    check_attr_spec(c, op);
    for (int i = 0; i < op->n_results; i++) check_def(c, op->results[i]->loc, op->results[i], "result");
    if (c->ok) check_op_types(c, op);
    check_op_regions(c, op);
  }
  for (int i = 0; i < op->n_results; i++)
    if (op->results[i]) c->state[op->results[i]->id] = 1;
  c->ok = c->ok && before;
}

static int cmp_named(const void *a, const void *b) {
  const drk_tile_value_t *x = *(drk_tile_value_t *const *)a, *y = *(drk_tile_value_t *const *)b;
  int r = strcmp(x->name, y->name);
  return r ? r : (x->id > y->id) - (x->id < y->id);
}

static void collect(const drk_tile_region_t *r, const drk_tile_value_t ***arr, size_t *n, size_t *cap) {
  for (int i = 0; i < r->n_args; i++) {
    if (*n == *cap) { *cap = *cap ? *cap * 2 : 64; *arr = realloc(*arr, sizeof **arr * *cap); DRK_ASSERT(*arr); }
    if (r->args[i]) (*arr)[(*n)++] = r->args[i];
  }
  for (size_t i = 0; i < r->n_ops; i++) {
    const drk_tile_op_t *op = r->ops[i];
    for (int j = 0; j < op->n_results; j++) {
      if (*n == *cap) { *cap = *cap ? *cap * 2 : 64; *arr = realloc(*arr, sizeof **arr * *cap); DRK_ASSERT(*arr); }
      if (op->results[j]) (*arr)[(*n)++] = op->results[j];
    }
    for (int j = 0; j < op->n_regions; j++)
      if (op->regions[j]) collect(op->regions[j], arr, n, cap);
  }
}

static void check_kernel(vctx_t *c, const drk_tile_kernel_t *k) {
  c->k = k;
  c->wg = NULL;
  c->wg_mask = 0;
  if (k->block < 32 || k->block > 1024 || k->block % 32) {
    err(c, k->loc, "block(%lld) must be a multiple of 32 in [32, 1024]", (long long)k->block);
    c->warps = 1;
  } else {
    c->warps = (int)(k->block / 32);
  }
  int64_t cl = 1;
  for (int i = 0; i < 3; i++) {
    if (k->cluster[i] < 1 || k->cluster[i] > 16) { cl = 99; break; }
    cl *= k->cluster[i];
  }
  if (cl > 16) err(c, k->loc, "cluster dimensions must be positive with a product of at most 16");
  if (k->smem < 0 || k->smem > 232448) err(c, k->loc, "smem(%lld) must be in [0, 232448] bytes", (long long)k->smem);
  for (int i = 0; i < 3; i++) {
    const drk_tile_grid_dim_t *g = &k->grid[i];
    if (g->c < 1) err(c, k->loc, "grid dimension %d must be positive", i);
    else if (g->param && (g->param->param_of != k || !is_int_scalar(&g->param->type)))
      err(c, k->loc, "grid dimension %d must use an integer scalar parameter of this kernel", i);
  }
  for (int i = 0; i < k->n_params; i++) {
    const drk_tile_value_t *p = k->params[i];
    if (!p) { err(c, k->loc, "parameter %d is null", i); continue; }
    check_type(c, p->loc, &p->type, "parameter");
    if (p->type.kind != DRK_TT_SCALAR && p->type.kind != DRK_TT_TMADESC)
      err(c, p->loc, "parameter '%%%s' must be a scalar, a pointer or a TMA descriptor", p->name);
    for (int j = 0; j < k->param_n_attrs[i]; j++) {
      const drk_tile_attr_t *a = &k->param_attrs[i][j];
      if (strcmp(a->name, "align") == 0 || strcmp(a->name, "div") == 0) {
        if (a->kind != DRK_TA_INT || !pow2(a->i)) err(c, p->loc, "parameter attribute '%s' must be a power of two", a->name);
        else if (strcmp(a->name, "align") == 0 && !p->type.is_ptr) err(c, p->loc, "'align' applies to pointer parameters");
        else if (strcmp(a->name, "div") == 0 && !is_int_scalar(&p->type)) err(c, p->loc, "'div' applies to integer parameters");
      } else {
        err(c, p->loc, "unknown parameter attribute '%s' (align, div)", a->name);
      }
    }
    c->state[p->id] = 1;
  }
  /* Names are unique per kernel, or the text form could not be read back. */
  const drk_tile_value_t **vals = NULL;
  size_t n = 0, cap = 0;
  for (int i = 0; i < k->n_params; i++) {
    if (n == cap) { cap = cap ? cap * 2 : 64; vals = realloc(vals, sizeof *vals * cap); DRK_ASSERT(vals); }
    if (k->params[i]) vals[n++] = k->params[i];
  }
  collect(k->body, &vals, &n, &cap);
  if (n > 1) qsort(vals, n, sizeof *vals, cmp_named);
  for (size_t i = 1; i < n; i++)
    if (strcmp(vals[i]->name, vals[i - 1]->name) == 0) err(c, vals[i]->loc, "redefinition of value '%%%s'", vals[i]->name);
  free(vals);
  check_region(c, k->body, NULL);
}

bool drk_tile_verify(const drk_tile_module_t *m, drk_diag_t *d) {
  vctx_t c;
  memset(&c, 0, sizeof c);
  c.m = m;
  c.d = d;
  c.ok = true;
  for (size_t i = 0; i < m->n_layouts; i++) {
    char msg[200];
    const drk_tile_layout_t *l = m->layouts[i];
    if (!drk_tile_layout_check(l, msg, sizeof msg)) err(&c, l->loc, "layout #%s: %s", l->name, msg);
    for (size_t j = 0; j < i; j++)
      if (strcmp(m->layouts[j]->name, l->name) == 0) err(&c, l->loc, "redefinition of layout '#%s'", l->name);
  }
  c.state = calloc(m->next_value_id ? m->next_value_id : 1, 1);
  DRK_ASSERT(c.state);
  for (size_t i = 0; i < m->n_kernels; i++) {
    for (size_t j = 0; j < i; j++)
      if (strcmp(m->kernels[j]->name, m->kernels[i]->name) == 0)
        err(&c, m->kernels[i]->loc, "redefinition of kernel '@%s'", m->kernels[i]->name);
    memset(c.state, 0, m->next_value_id);
    check_kernel(&c, m->kernels[i]);
  }
  free(c.state);
  return c.ok;
}
