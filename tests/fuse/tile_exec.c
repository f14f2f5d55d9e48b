/* A CPU executor for the subset of tile IR that flat and row kernels use (tests only).
 *
 * Runs one kernel of a verified module over its whole grid, program after program, on host
 * tensors bound to its pointer parameters. Tiles are logical arrays (layouts do not change
 * what a program computes, only how threads hold it); every element of a value is computed
 * in f64/i64 and rounded to the value's dtype after each op (f32: (float), f16/bf16: round to
 * nearest even), so an f32 kernel computes what the GPU computes up to the accuracy of its
 * math functions. Every load and store of an active lane is bounds-checked against its
 * buffer. Ops outside the subset (dot, shared memory, async copies...) make it refuse the
 * kernel: te_run returns TE_UNSUPPORTED. */
#include "tile_exec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct tv {
  int64_t n;
  double *f;  /* float dtypes */
  int64_t *i; /* ints, bool, pointer offsets */
  int buf;    /* pointers: parameter index */
} tval_t;

typedef struct ex {
  const drk_tile_kernel_t *k;
  drk_tensor_t *bufs;
  int n_bufs;
  tval_t *vals; /* by value id */
  int64_t pid[3];
  char *err;
  size_t err_n;
  bool failed, unsupported;
} ex_t;

static bool is_fl(drk_dtype_t t) { return drk_dtype_is_float(t); }

static double round_to(drk_dtype_t t, double v) {
  switch (t) {
  case DRK_DT_F32: return (double)(float)v;
  case DRK_DT_F16: return drk_f16_to_f32(drk_f32_to_f16((float)v));
  case DRK_DT_BF16: return drk_bf16_to_f32(drk_f32_to_bf16((float)v));
  default: return v;
  }
}

static int64_t wrap_to(drk_dtype_t t, int64_t v) {
  switch (t) {
  case DRK_DT_BOOL: return v != 0;
  case DRK_DT_I8: return (int8_t)v;
  case DRK_DT_U8: return (uint8_t)v;
  case DRK_DT_I16: return (int16_t)v;
  case DRK_DT_I32: return (int32_t)v;
  default: return v;
  }
}

static void fail(ex_t *e, const char *msg, const drk_tile_op_t *op) {
  if (e->failed) return;
  e->failed = true;
  snprintf(e->err, e->err_n, "%s: %s (op %s)", e->k->name, msg, op ? drk_tile_op_name(op->code) : "-");
}

static tval_t *val(ex_t *e, const drk_tile_value_t *v) { return &e->vals[v->id]; }

static tval_t *res(ex_t *e, const drk_tile_value_t *v) {
  tval_t *t = &e->vals[v->id];
  int64_t n = v->type.kind == DRK_TT_SCALAR ? 1 : drk_tile_type_numel(&v->type);
  if (t->n != n || (is_fl(v->type.dtype) && !v->type.is_ptr ? !t->f : !t->i)) {
    free(t->f);
    free(t->i);
    t->f = NULL;
    t->i = NULL;
    t->n = n;
    if (is_fl(v->type.dtype) && !v->type.is_ptr) t->f = calloc((size_t)n, sizeof(double));
    else t->i = calloc((size_t)n, sizeof(int64_t));
  }
  return t;
}

static bool isf(const drk_tile_value_t *v) { return is_fl(v->type.dtype) && !v->type.is_ptr; }

/* element j of a as double / int, whatever a holds */
static double gf(const tval_t *a, int64_t j) { return a->f ? a->f[a->n == 1 ? 0 : j] : (double)a->i[a->n == 1 ? 0 : j]; }
static int64_t gi(const tval_t *a, int64_t j) { return a->i ? a->i[a->n == 1 ? 0 : j] : (int64_t)a->f[a->n == 1 ? 0 : j]; }

static void copyv(tval_t *d, const tval_t *s) {
  if (d->f) memcpy(d->f, s->f, sizeof(double) * (size_t)d->n);
  else memcpy(d->i, s->i, sizeof(int64_t) * (size_t)d->n);
  d->buf = s->buf;
}

static void run_region(ex_t *e, const drk_tile_region_t *r, const drk_tile_op_t **out_yield);

static double ewb_f(drk_tile_opcode_t c, double a, double b) {
  switch (c) {
  case DRK_TOP_ADD: return a + b;
  case DRK_TOP_SUB: return a - b;
  case DRK_TOP_MUL: return a * b;
  case DRK_TOP_DIV: return a / b;
  case DRK_TOP_REM: return fmod(a, b);
  case DRK_TOP_MAX: return isnan(a) || isnan(b) ? NAN : a > b ? a : b;
  case DRK_TOP_MIN: return isnan(a) || isnan(b) ? NAN : a < b ? a : b;
  case DRK_TOP_POW: return pow(a, b);
  default: return NAN;
  }
}

static int64_t ewb_i(drk_tile_opcode_t c, int64_t a, int64_t b, bool *bad) {
  switch (c) {
  case DRK_TOP_ADD: return (int64_t)((uint64_t)a + (uint64_t)b);
  case DRK_TOP_SUB: return (int64_t)((uint64_t)a - (uint64_t)b);
  case DRK_TOP_MUL: return (int64_t)((uint64_t)a * (uint64_t)b);
  case DRK_TOP_DIV: if (!b) { *bad = true; return 0; } return a / b;
  case DRK_TOP_REM: if (!b) { *bad = true; return 0; } return a % b;
  case DRK_TOP_MAX: return a > b ? a : b;
  case DRK_TOP_MIN: return a < b ? a : b;
  case DRK_TOP_AND: return a & b;
  case DRK_TOP_OR: return a | b;
  default: *bad = true; return 0;
  }
}

static double ewu_f(drk_tile_opcode_t c, double a) {
  switch (c) {
  case DRK_TOP_NEG: return -a;
  case DRK_TOP_ABS: return fabs(a);
  case DRK_TOP_EXP: return exp(a);
  case DRK_TOP_EXP2: return exp2(a);
  case DRK_TOP_LOG: return log(a);
  case DRK_TOP_SQRT: return sqrt(a);
  case DRK_TOP_RSQRT: return 1.0 / sqrt(a);
  case DRK_TOP_TANH: return tanh(a);
  case DRK_TOP_ERF: return erf(a);
  case DRK_TOP_SIN: return sin(a);
  case DRK_TOP_COS: return cos(a);
  case DRK_TOP_FLOOR: return floor(a);
  case DRK_TOP_CEIL: return ceil(a);
  case DRK_TOP_RINT: return nearbyint(a);
  default: return NAN;
  }
}

static bool cmp_pred(const char *p, double a, double b) {
  if (!strcmp(p, "lt")) return a < b;
  if (!strcmp(p, "le")) return a <= b;
  if (!strcmp(p, "gt")) return a > b;
  if (!strcmp(p, "ge")) return a >= b;
  if (!strcmp(p, "eq")) return a == b;
  return a != b; /* ne: true for NaN */
}

static bool cmp_pred_i(const char *p, int64_t a, int64_t b) {
  if (!strcmp(p, "lt")) return a < b;
  if (!strcmp(p, "le")) return a <= b;
  if (!strcmp(p, "gt")) return a > b;
  if (!strcmp(p, "ge")) return a >= b;
  if (!strcmp(p, "eq")) return a == b;
  return a != b;
}

/* row-major index of element j of dims `d` mapped into source dims `s` (1 = broadcast) */
static int64_t bidx(int rank, const int64_t *d, const int64_t *s, int64_t j) {
  int64_t off = 0, st = 1;
  for (int k = rank - 1; k >= 0; k--) {
    int64_t c = j % d[k];
    j /= d[k];
    if (s[k] != 1) off += c * st;
    st *= s[k];
  }
  return off;
}

static void run_op(ex_t *e, const drk_tile_op_t *op) {
  if (e->failed) return;
  drk_tile_opcode_t c = op->code;
  const drk_tile_value_t *r0 = op->n_results ? op->results[0] : NULL;
  unsigned fl = drk_tile_op_info(c)->flags;
  if (fl & DRK_TOPF_EWB) {
    tval_t *a = val(e, op->operands[0]), *b = val(e, op->operands[1]), *y = res(e, r0);
    drk_dtype_t t = r0->type.dtype;
    for (int64_t j = 0; j < y->n; j++) {
      if (isf(r0)) {
        y->f[j] = round_to(t, ewb_f(c, gf(a, j), gf(b, j)));
      } else {
        bool bad = false;
        y->i[j] = wrap_to(t, ewb_i(c, gi(a, j), gi(b, j), &bad));
        if (bad && c != DRK_TOP_DIV && c != DRK_TOP_REM) {
          fail(e, "integer op not supported", op);
          return;
        }
        if (bad) y->i[j] = 0; /* division by zero: only in inactive lanes, never loaded */
      }
    }
    return;
  }
  if (fl & DRK_TOPF_EWU) {
    tval_t *a = val(e, op->operands[0]), *y = res(e, r0);
    for (int64_t j = 0; j < y->n; j++) {
      if (isf(r0)) y->f[j] = round_to(r0->type.dtype, ewu_f(c, gf(a, j)));
      else if (c == DRK_TOP_NEG) y->i[j] = wrap_to(r0->type.dtype, -gi(a, j));
      else if (c == DRK_TOP_ABS) y->i[j] = wrap_to(r0->type.dtype, llabs(gi(a, j)));
      else { fail(e, "integer unary op", op); return; }
    }
    return;
  }
  switch (c) {
  case DRK_TOP_PROGRAM_ID: res(e, r0)->i[0] = e->pid[drk_tile_op_attr_int(op, "axis", 0)]; return;
  case DRK_TOP_CONSTANT: {
    const drk_tile_attr_t *a = drk_tile_op_attr(op, "value");
    tval_t *y = res(e, r0);
    for (int64_t j = 0; j < y->n; j++) {
      if (y->f) y->f[j] = round_to(r0->type.dtype, a->kind == DRK_TA_FLOAT ? a->f : (double)a->i);
      else y->i[j] = wrap_to(r0->type.dtype, a->kind == DRK_TA_FLOAT ? (int64_t)a->f : a->i);
    }
    return;
  }
  case DRK_TOP_MAKE_RANGE: {
    tval_t *y = res(e, r0);
    int64_t s = drk_tile_op_attr_int(op, "start", 0);
    for (int64_t j = 0; j < y->n; j++) y->i[j] = s + j;
    return;
  }
  case DRK_TOP_SPLAT: {
    tval_t *a = val(e, op->operands[0]), *y = res(e, r0);
    for (int64_t j = 0; j < y->n; j++) {
      if (y->f) y->f[j] = gf(a, 0);
      else y->i[j] = gi(a, 0);
    }
    y->buf = op->operands[0]->param_of ? op->operands[0]->index : a->buf;
    return;
  }
  case DRK_TOP_EXPAND_DIMS: case DRK_TOP_CONVERT_LAYOUT: case DRK_TOP_RESHAPE:
    copyv(res(e, r0), val(e, op->operands[0]));
    return;
  case DRK_TOP_BROADCAST: {
    const drk_tile_type_t *st = &op->operands[0]->type, *dt = &r0->type;
    tval_t *a = val(e, op->operands[0]), *y = res(e, r0);
    for (int64_t j = 0; j < y->n; j++) {
      int64_t s = bidx(dt->rank, dt->dims, st->dims, j);
      if (y->f) y->f[j] = a->f[s];
      else y->i[j] = a->i[s];
    }
    y->buf = a->buf;
    return;
  }
  case DRK_TOP_ADDPTR: {
    tval_t *a = val(e, op->operands[0]), *b = val(e, op->operands[1]), *y = res(e, r0);
    for (int64_t j = 0; j < y->n; j++) y->i[j] = gi(a, j) + gi(b, j);
    y->buf = op->operands[0]->param_of ? op->operands[0]->index : a->buf;
    return;
  }
  case DRK_TOP_LOAD: case DRK_TOP_STORE: {
    bool st = c == DRK_TOP_STORE;
    tval_t *p = val(e, op->operands[0]);
    tval_t *v = st ? val(e, op->operands[1]) : NULL;
    tval_t *m = op->n_operands > (st ? 2 : 1) ? val(e, op->operands[st ? 2 : 1]) : NULL;
    tval_t *o = !st && op->n_operands > 2 ? val(e, op->operands[2]) : NULL;
    tval_t *y = st ? NULL : res(e, r0);
    if (p->buf < 0 || p->buf >= e->n_bufs || !e->bufs[p->buf].data) {
      fail(e, "access through an unbound parameter", op);
      return;
    }
    drk_tensor_t *B = &e->bufs[p->buf];
    int64_t nb = drk_tensor_numel(B);
    int64_t n = st ? drk_tile_type_numel(&op->operands[0]->type) : y->n;
    if (op->operands[0]->type.kind == DRK_TT_SCALAR) n = 1;
    for (int64_t j = 0; j < n; j++) {
      bool on = !m || gi(m, j);
      if (!on) {
        if (y) {
          if (y->f) y->f[j] = o ? gf(o, j) : 0;
          else y->i[j] = o ? gi(o, j) : 0;
        }
        continue;
      }
      int64_t off = gi(p, j);
      if (off < 0 || off >= nb) {
        char msg[160];
        snprintf(msg, sizeof msg, "%s out of bounds: element %lld of a buffer of %lld", st ? "store" : "load",
                 (long long)off, (long long)nb);
        fail(e, msg, op);
        return;
      }
      if (st) {
        if (is_fl(B->dtype)) drk_tensor_set_f64(B, off, gf(v, j));
        else drk_tensor_set_i64(B, off, gi(v, j));
      } else if (y->f) {
        y->f[j] = drk_tensor_get_f64(B, off);
      } else {
        y->i[j] = drk_tensor_get_i64(B, off);
      }
    }
    return;
  }
  case DRK_TOP_SELECT: {
    tval_t *cnd = val(e, op->operands[0]), *a = val(e, op->operands[1]), *b = val(e, op->operands[2]), *y = res(e, r0);
    for (int64_t j = 0; j < y->n; j++) {
      bool t = gi(cnd, j) != 0;
      if (y->f) y->f[j] = t ? gf(a, j) : gf(b, j);
      else y->i[j] = t ? gi(a, j) : gi(b, j);
    }
    return;
  }
  case DRK_TOP_CMP: {
    const char *pred = drk_tile_op_attr_ident(op, "pred", "eq");
    tval_t *a = val(e, op->operands[0]), *b = val(e, op->operands[1]), *y = res(e, r0);
    bool fa = isf(op->operands[0]);
    for (int64_t j = 0; j < y->n; j++)
      y->i[j] = fa ? cmp_pred(pred, gf(a, j), gf(b, j)) : cmp_pred_i(pred, gi(a, j), gi(b, j));
    return;
  }
  case DRK_TOP_CAST: {
    tval_t *a = val(e, op->operands[0]), *y = res(e, r0);
    drk_dtype_t t = r0->type.dtype;
    bool fa = isf(op->operands[0]);
    for (int64_t j = 0; j < y->n; j++) {
      if (y->f) y->f[j] = round_to(t, fa ? gf(a, j) : (double)gi(a, j));
      else if (fa) {
        double x = gf(a, j);
        y->i[j] = wrap_to(t, isnan(x) ? 0 : (int64_t)x);
      } else {
        y->i[j] = wrap_to(t, gi(a, j));
      }
    }
    return;
  }
  case DRK_TOP_REDUCE: {
    const drk_tile_type_t *st = &op->operands[0]->type;
    int axis = (int)drk_tile_op_attr_int(op, "axis", 0);
    const char *comb = drk_tile_op_attr_ident(op, "combiner", "sum");
    tval_t *a = val(e, op->operands[0]), *y = res(e, r0);
    int64_t inner = 1, len = st->dims[axis];
    for (int k = axis + 1; k < st->rank; k++) inner *= st->dims[k];
    for (int64_t j = 0; j < y->n; j++) {
      int64_t o = j / inner, in = j % inner;
      double af = 0;
      int64_t ai = 0;
      for (int64_t q = 0; q < len; q++) {
        int64_t s = (o * len + q) * inner + in;
        if (y->f) {
          double x = a->f[s];
          if (q == 0) af = x;
          else if (!strcmp(comb, "sum")) af = round_to(r0->type.dtype, af + x);
          else if (!strcmp(comb, "max")) af = isnan(af) || isnan(x) ? NAN : af > x ? af : x;
          else af = isnan(af) || isnan(x) ? NAN : af < x ? af : x;
        } else {
          int64_t x = a->i[s];
          if (q == 0) ai = x;
          else if (!strcmp(comb, "sum")) ai += x;
          else if (!strcmp(comb, "max")) ai = ai > x ? ai : x;
          else ai = ai < x ? ai : x;
        }
      }
      if (y->f) y->f[j] = af;
      else y->i[j] = wrap_to(r0->type.dtype, ai);
    }
    return;
  }
  case DRK_TOP_FOR: {
    int64_t lb = gi(val(e, op->operands[0]), 0), ub = gi(val(e, op->operands[1]), 0), stp = gi(val(e, op->operands[2]), 0);
    const drk_tile_region_t *body = op->regions[0];
    int nc = op->n_operands - 3;
    for (int q = 0; q < nc; q++) copyv(res(e, body->args[1 + q]), val(e, op->operands[3 + q]));
    if (stp <= 0) { fail(e, "for with step <= 0", op); return; }
    for (int64_t iv = lb; iv < ub && !e->failed; iv += stp) {
      res(e, body->args[0])->i[0] = iv;
      const drk_tile_op_t *y = NULL;
      run_region(e, body, &y);
      if (e->failed) return;
      for (int q = 0; q < nc; q++) copyv(res(e, body->args[1 + q]), val(e, y->operands[q]));
    }
    for (int q = 0; q < nc; q++) copyv(res(e, op->results[q]), val(e, body->args[1 + q]));
    return;
  }
  case DRK_TOP_YIELD: case DRK_TOP_RETURN: case DRK_TOP_BARRIER:
    return;
  default:
    e->unsupported = true;
    fail(e, "op not supported by the CPU executor", op);
    return;
  }
}

static void run_region(ex_t *e, const drk_tile_region_t *r, const drk_tile_op_t **out_yield) {
  for (size_t i = 0; i < r->n_ops && !e->failed; i++) {
    const drk_tile_op_t *op = r->ops[i];
    if (op->code == DRK_TOP_YIELD && out_yield) *out_yield = op;
    run_op(e, op);
  }
}

te_result_t te_run(const drk_tile_module_t *m, const drk_tile_kernel_t *k, drk_tensor_t *bufs, int n_bufs,
                   char *err, size_t err_n) {
  ex_t e = {.k = k, .bufs = bufs, .n_bufs = n_bufs, .err = err, .err_n = err_n};
  if (err_n) err[0] = 0;
  e.vals = calloc(m->next_value_id + 1, sizeof *e.vals);
  for (int i = 0; i < k->n_params; i++) {
    tval_t *t = res(&e, k->params[i]);
    t->buf = i;
  }
  int64_t g[3];
  for (int i = 0; i < 3; i++) g[i] = k->grid[i].param ? -1 : k->grid[i].c;
  if (g[0] < 0 || g[1] < 0 || g[2] < 0) {
    fail(&e, "grid from a parameter", NULL);
    e.unsupported = true;
  }
  for (int64_t z = 0; z < g[2] && !e.failed; z++)
    for (int64_t y = 0; y < g[1] && !e.failed; y++)
      for (int64_t x = 0; x < g[0] && !e.failed; x++) {
        e.pid[0] = x;
        e.pid[1] = y;
        e.pid[2] = z;
        run_region(&e, k->body, NULL);
      }
  for (uint32_t i = 0; i <= m->next_value_id; i++) {
    free(e.vals[i].f);
    free(e.vals[i].i);
  }
  free(e.vals);
  return e.unsupported ? TE_UNSUPPORTED : e.failed ? TE_ERROR : TE_OK;
}
