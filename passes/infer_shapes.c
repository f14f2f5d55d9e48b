/* Shape and dtype inference (drk_pass_infer_shapes).
 *
 * Requires: a structurally valid graph (nodes in topological order, arity as in
 * graph_ops.def); graph inputs and constants carry their dtype and shape.
 * Guarantees: every live node result gets the dtype and, where computable, the rank and dims
 * that ai.onnx opset 21 gives it. Dims keep their symbolic names through broadcasting,
 * matmul, concat, reshape (0 and -1) and shape-tensor chains; a dim that cannot be named
 * gets a fresh symbol "_u<value id>_<i>" (or keeps the one a previous run or value_info
 * gave it). Unknown-rank inputs give unknown-rank results. User errors (incompatible
 * static dims, reshape size mismatch, bad axes, declared shape conflicts) are reported at
 * the node's location, naming the op and the shapes; the pass then returns false.
 *
 * Internally a dim with size -1 and no symbol means "unknown"; it becomes a fresh symbol
 * only when written to a value. Small integer tensors (shape computations) also get their
 * contents tracked, element by element, as dims. */
#include "passes/passes.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/tensor.h"

#define MAXR 32    /* largest rank handled; larger is reported as unsupported */
#define MAXK 64    /* largest shape tensor whose contents are tracked */
#define MAXOUT 64  /* most results of one node handled (Split) */
#define HUGE_END ((int64_t)1 << 40) /* ends past this mean "to the end" (INT64_MAX etc.) */

typedef struct {
  int rank; /* -1: unknown */
  drk_dim_t d[MAXR];
} shp_t;

typedef struct {
  int n;
  drk_dim_t e[MAXK];
} known_t;

typedef struct {
  drk_graph_t *g;
  drk_diag_t *d;
  drk_arena_t *scratch;
  known_t **known; /* by value id */
  uint32_t n_known;
  const drk_node_t *node;
  bool node_failed;
  bool ok;
} ictx_t;

/* ---- dims ---- */
static drk_dim_t dim_s(int64_t v) { drk_dim_t x = {v, NULL}; return x; }
static drk_dim_t dim_unk(void) { drk_dim_t x = {-1, NULL}; return x; }
/* A computed extent; NaN, negative or absurd values give "unknown" rather than UB. */
static drk_dim_t dim_dbl(double v) {
  drk_dim_t x = {-1, NULL};
  if (v >= 0 && v < 4.0e18) x.size = (int64_t)v;
  return x;
}
static bool is_st(drk_dim_t x) { return !x.sym && x.size >= 0; }
static bool is_unk(drk_dim_t x) { return !x.sym && x.size < 0; }
/* Provably equal (same static size, or same symbol). */
static bool dim_same(drk_dim_t a, drk_dim_t b) {
  if (is_st(a) && is_st(b)) return a.size == b.size;
  if (a.sym && b.sym) return strcmp(a.sym, b.sym) == 0;
  return false;
}

static void fmt_dim(drk_dim_t x, char *buf, size_t n) {
  if (x.sym) snprintf(buf, n, "%s", x.sym);
  else if (x.size >= 0) snprintf(buf, n, "%lld", (long long)x.size);
  else snprintf(buf, n, "?");
}

/* Formats a shape as "[N,3,224]" into one of a few rotating buffers (for messages). */
static const char *fmt_shp(const shp_t *s) {
  static char bufs[4][256];
  static int k;
  char *b = bufs[k++ & 3];
  if (s->rank < 0) { snprintf(b, 256, "[unknown rank]"); return b; }
  size_t o = 0;
  b[o++] = '[';
  for (int i = 0; i < s->rank && o < 200; i++) {
    char t[64];
    fmt_dim(s->d[i], t, sizeof t);
    o += (size_t)snprintf(b + o, 256 - o, "%s%s", i ? "," : "", t);
  }
  snprintf(b + o, 256 - o, "]");
  return b;
}

static void shp_unknown(shp_t *s) { s->rank = -1; }
static void shp_rank(shp_t *s, int r) {
  s->rank = r;
  for (int i = 0; i < r; i++) s->d[i] = dim_unk();
}

static shp_t shp_of(const drk_value_t *v) {
  shp_t s;
  s.rank = -1;
  if (!v || v->shape.rank < 0 || v->shape.rank > MAXR) return s;
  s.rank = v->shape.rank;
  for (int i = 0; i < s.rank; i++) {
    s.d[i] = v->shape.dims[i];
    if (!s.d[i].sym && s.d[i].size < 0) s.d[i] = dim_unk();
  }
  return s;
}

/* Multiplies into *acc; false past DRK_MAX_NUMEL (drk_numel_mul). */
static bool mul_into(int64_t *acc, int64_t v) { return drk_numel_mul(acc, v); }

static int64_t shp_numel(const shp_t *s) {
  if (s->rank < 0) return -1;
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++)
    if (!is_st(s->d[i]) || !mul_into(&n, s->d[i].size)) return -1;
  return n;
}

/* ---- errors ---- */
static void DRK_PRINTF(2, 3) err(ictx_t *c, const char *fmt, ...) {
  char msg[700];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  drk_diag_error(c->d, c->node->loc, "%s: %s", drk_op_name(c->node->op), msg);
  c->node_failed = true;
  c->ok = false;
}

static const char *iname(const drk_node_t *n, int i) {
  return i < n->n_inputs && n->inputs[i] ? n->inputs[i]->name : "(none)";
}

/* ---- constant and tracked contents ---- */
static drk_value_t *in(const drk_node_t *n, int i) { return i < n->n_inputs ? n->inputs[i] : NULL; }

/* Elements of tracked contents: a negative static value is stored with sym == "" so that it
 * is not mistaken for "unknown". */
static bool kel_static(drk_dim_t x, int64_t *out) {
  if (x.sym && x.sym[0] == 0) { *out = x.size; return true; }
  if (is_st(x)) { *out = x.size; return true; }
  return false;
}
static drk_dim_t kel_int(int64_t v) {
  drk_dim_t x = {v, NULL};
  if (v < 0) x.sym = "";
  return x;
}
static bool kel_is_sym(drk_dim_t x) { return x.sym && x.sym[0]; }

/* ---- products of symbols ----
 * A symbol with '*' names the product of its factors ("batch*seq", "batch*4": symbols in
 * order, then the static factor). Shape arithmetic makes them (BLOOM's `Gather(Shape) * 4`,
 * batch x heads), and so does a Reshape's -1 over several symbols; binding the symbols lets
 * inference compute them again as static sizes. Factors are substrings of the symbols. */
#define MAXF 8
typedef struct {
  int n;
  const char *s[MAXF];
  size_t len[MAXF];
  int64_t k; /* the static factor */
} factors_t;

/* Appends dim x's factors to f; false when x is unknown or the product does not fit. */
static bool dim_factors(drk_dim_t x, factors_t *f) {
  if (is_st(x)) return mul_into(&f->k, x.size);
  if (!kel_is_sym(x)) return false;
  for (const char *p = x.sym;;) {
    const char *q = strchr(p, '*');
    size_t len = q ? (size_t)(q - p) : strlen(p), i = 0;
    if (!len) return false;
    while (i < len && isdigit((unsigned char)p[i])) i++;
    if (i == len) {
      if (len > 15 || !mul_into(&f->k, strtoll(p, NULL, 10))) return false;
    } else {
      if (f->n == MAXF) return false;
      f->s[f->n] = p, f->len[f->n++] = len;
    }
    if (!q) return true;
    p = q + 1;
  }
}

/* Takes factor symbol (s, len) out of f; false when f has none. */
static bool factors_cancel(factors_t *f, const char *s, size_t len) {
  for (int i = 0; i < f->n; i++)
    if (f->s[i] && f->len[i] == len && !memcmp(f->s[i], s, len)) return f->s[i] = NULL, true;
  return false;
}

/* The dim f names: static, a symbol, or a product symbol (kept in the graph's arena). */
static drk_dim_t factors_dim(ictx_t *c, const factors_t *f) {
  char buf[256];
  size_t o = 0;
  int n = 0;
  for (int i = 0; i < f->n; i++) {
    if (!f->s[i]) continue;
    if (o + f->len[i] + 2 >= sizeof buf) return dim_unk();
    if (n++) buf[o++] = '*';
    memcpy(buf + o, f->s[i], f->len[i]);
    o += f->len[i];
  }
  if (!n) return dim_s(f->k);
  if (f->k == 0) return dim_s(0);
  if (f->k != 1) o += (size_t)snprintf(buf + o, sizeof buf - o, "*%lld", (long long)f->k);
  if (o >= sizeof buf) return dim_unk();
  drk_dim_t d = {-1, drk_arena_strndup(c->g->arena, buf, o)};
  return d;
}

/* Symbol x times (MUL) or exactly divided by (DIV) static v > 0: a product symbol ("batch*4"
 * from batch * 4; "batch*4" / 4 is batch again), else unknown. */
static drk_dim_t scaled(ictx_t *c, drk_dim_t x, drk_op_t op, int64_t v) {
  factors_t f = {.k = 1};
  if (v <= 0 || !dim_factors(x, &f)) return dim_unk();
  if (op == DRK_OP_MUL) return mul_into(&f.k, v) ? factors_dim(c, &f) : dim_unk();
  if (op == DRK_OP_DIV && f.k % v == 0) return f.k /= v, factors_dim(c, &f);
  return dim_unk();
}

/* Reads a constant integer (or float, truncated) tensor of at most MAXK elements. */
static bool const_ints(const drk_value_t *v, int64_t *out, int *out_n) {
  if (!v || v->kind != DRK_VALUE_CONST) return false;
  drk_tensor_t t;
  if (!drk_tensor_from_const(&t, v)) return false;
  int64_t n = drk_tensor_numel(&t);
  if (n > MAXK) return false;
  for (int64_t i = 0; i < n; i++) out[i] = drk_tensor_get_i64(&t, i);
  *out_n = (int)n;
  return true;
}

static const known_t *get_known(ictx_t *c, const drk_value_t *v) {
  if (!v) return NULL;
  if (v->kind == DRK_VALUE_CONST) {
    if (!drk_dtype_is_int(v->dtype)) return NULL;
    int64_t vals[MAXK];
    int n;
    if (!const_ints(v, vals, &n)) return NULL;
    known_t *k = drk_arena_alloc(c->scratch, sizeof *k);
    k->n = n;
    for (int i = 0; i < n; i++) k->e[i] = kel_int(vals[i]);
    return k;
  }
  if (v->id < c->n_known) return c->known[v->id];
  return NULL;
}

/* All elements static: the integer values of a constant or tracked tensor. */
static bool get_ints(ictx_t *c, const drk_value_t *v, int64_t *out, int *out_n) {
  const known_t *k = get_known(c, v);
  if (!k) return false;
  for (int i = 0; i < k->n; i++)
    if (!kel_static(k->e[i], &out[i])) return false;
  *out_n = k->n;
  return true;
}

static void set_known(ictx_t *c, const drk_value_t *v, const known_t *k) {
  if (!v || v->id >= c->n_known || k->n > MAXK) return;
  known_t *p = drk_arena_alloc(c->scratch, sizeof *p);
  *p = *k;
  c->known[v->id] = p;
}

/* ---- dim algebra ---- */
static bool bcast_dim(ictx_t *c, drk_dim_t a, drk_dim_t b, drk_dim_t *out) {
  if (is_st(a) && is_st(b)) {
    if (a.size == b.size || b.size == 1) { *out = a; return true; }
    if (a.size == 1) { *out = b; return true; }
    return false;
  }
  if (is_st(a) && a.size == 1) { *out = b; return true; }
  if (is_st(b) && b.size == 1) { *out = a; return true; }
  if (is_st(a)) { *out = a; return true; } /* the other must be a or 1 */
  if (is_st(b)) { *out = b; return true; }
  if (a.sym && b.sym && strcmp(a.sym, b.sym) == 0) { *out = a; return true; }
  *out = dim_unk();
  (void)c;
  return true;
}

static bool bcast(ictx_t *c, const shp_t *a, const shp_t *b, shp_t *out) {
  if (a->rank < 0 || b->rank < 0) { shp_unknown(out); return true; }
  int r = a->rank > b->rank ? a->rank : b->rank;
  shp_t o;
  o.rank = r;
  for (int i = 0; i < r; i++) {
    int ia = i - (r - a->rank), ib = i - (r - b->rank);
    drk_dim_t x = ia >= 0 ? a->d[ia] : dim_s(1), y = ib >= 0 ? b->d[ib] : dim_s(1);
    if (!bcast_dim(c, x, y, &o.d[i])) {
      err(c, "cannot broadcast shapes %s and %s (dimension %d: %lld vs %lld)", fmt_shp(a), fmt_shp(b), i,
          (long long)x.size, (long long)y.size);
      shp_unknown(out);
      return false;
    }
  }
  *out = o;
  return true;
}

/* Two dims that must be equal: static wins over symbolic, a symbol over unknown. */
static bool unify_dim(drk_dim_t a, drk_dim_t b, drk_dim_t *out) {
  if (is_st(a) && is_st(b)) { *out = a; return a.size == b.size; }
  if (is_st(a)) { *out = a; return true; }
  if (is_st(b)) { *out = b; return true; }
  *out = a.sym ? a : b;
  return true;
}

static bool norm_axis(ictx_t *c, int64_t axis, int rank, int *out, const char *what) {
  if (axis < -rank || axis >= rank) {
    err(c, "%s %lld is out of range for rank %d", what, (long long)axis, rank);
    return false;
  }
  *out = (int)(axis < 0 ? axis + rank : axis);
  return true;
}

/* ONNX pooling/conv output extent for one spatial axis. */
static drk_dim_t pool_out(drk_dim_t in_d, int64_t k, int64_t s, int64_t dil, int64_t pb, int64_t pe,
                          const char *auto_pad, bool ceil_mode) {
  if (!is_st(in_d) || k <= 0 || dil <= 0 || k > ((int64_t)1 << 31) || dil > ((int64_t)1 << 31) || s > ((int64_t)1 << 40) ||
      pb < -((int64_t)1 << 40) ||
      pb > ((int64_t)1 << 40) || pe < -((int64_t)1 << 40) || pe > ((int64_t)1 << 40))
    return dim_unk(); /* absurd attributes: no claim rather than overflow */
  int64_t n = in_d.size, ek = (k - 1) * dil + 1;
  if (s <= 0) s = 1;
  if (strcmp(auto_pad, "SAME_UPPER") == 0 || strcmp(auto_pad, "SAME_LOWER") == 0) return dim_s((n + s - 1) / s);
  if (strcmp(auto_pad, "VALID") == 0) {
    int64_t v = n - ek;
    return dim_s(v < 0 ? 0 : v / s + 1);
  }
  int64_t num = n + pb + pe - ek;
  if (num < 0) return (drk_dim_t){-2, NULL}; /* window larger than the input: callers report it */
  int64_t o = ceil_mode ? (num + s - 1) / s + 1 : num / s + 1;
  /* ceil mode: the last window must start inside the input or the left padding */
  if (ceil_mode && (o - 1) * s >= n + pb) o--;
  return dim_s(o);
}

/* Slice length for a static extent n. */
static int64_t slice_len(int64_t n, int64_t st, int64_t en, int64_t step) {
  if (st < 0) st += n;
  if (en < 0) en += n;
  if (step > 0) {
    st = st < 0 ? 0 : st > n ? n : st;
    en = en < 0 ? 0 : en > n ? n : en;
    return en > st ? (en - st - 1) / step + 1 : 0;
  }
  st = st < -1 ? -1 : st > n - 1 ? n - 1 : st;
  en = en < -1 ? -1 : en > n - 1 ? n - 1 : en;
  return st > en ? (st - en - 1) / (-step) + 1 : 0;
}
static int64_t slice_start(int64_t n, int64_t st, int64_t step) {
  if (st < 0) st += n;
  if (step > 0) return st < 0 ? 0 : st > n ? n : st;
  return st < -1 ? -1 : st > n - 1 ? n - 1 : st;
}

/* Reshape target from a (possibly symbolic) shape tensor. Symbols in the input's element
 * count cancel against those of the given dims to name the -1 dim. */
static void reshape_infer(ictx_t *c, const shp_t *x, const drk_dim_t *sh, int n, bool allowzero, shp_t *o) {
  o->rank = n;
  int neg = -1;
  for (int i = 0; i < n; i++) {
    int64_t v;
    if (kel_static(sh[i], &v)) {
      if (v == -1) {
        if (neg >= 0) { err(c, "shape has more than one -1"); shp_unknown(o); return; }
        neg = i;
        o->d[i] = dim_unk();
      } else if (v < -1) {
        err(c, "invalid shape value %lld", (long long)v); shp_unknown(o); return;
      } else if (v == 0 && !allowzero) {
        if (x->rank < 0) o->d[i] = dim_unk();
        else if (i >= x->rank) { err(c, "shape value 0 at index %d copies a dim the input %s lacks", i, fmt_shp(x)); shp_unknown(o); return; }
        else o->d[i] = x->d[i];
      } else {
        o->d[i] = dim_s(v);
      }
    } else {
      o->d[i] = sh[i];
    }
  }
  if (x->rank < 0) return;
  /* element counts as a static factor times symbols (products split into their factors) */
  factors_t fi = {.k = 1}, fo = {.k = 1};
  bool in_ok = true, out_ok = true, out_syms_cancel = true;
  for (int i = 0; i < x->rank; i++) {
    if (is_st(x->d[i]) && !mul_into(&fi.k, x->d[i].size)) {
      err(c, "input %s has more than 2^56 elements", fmt_shp(x));
      shp_unknown(o);
      return;
    }
    if (!is_st(x->d[i]) && !dim_factors(x->d[i], &fi)) in_ok = false;
  }
  for (int i = 0; i < n; i++) {
    if (i == neg) continue;
    drk_dim_t dd = o->d[i];
    if (is_st(dd)) {
      if (!mul_into(&fo.k, dd.size)) {
        err(c, "shape %s has more than 2^56 elements", fmt_shp(o));
        shp_unknown(o);
        return;
      }
      continue;
    }
    factors_t ft = {.k = 1};
    if (!dim_factors(dd, &ft) || !mul_into(&fo.k, ft.k)) { out_ok = false; continue; }
    for (int j = 0; j < ft.n; j++)
      if (!factors_cancel(&fi, ft.s[j], ft.len[j])) out_syms_cancel = false;
  }
  int nleft = 0;
  for (int j = 0; j < fi.n; j++) nleft += fi.s[j] != NULL;
  if (!in_ok || !out_ok || !out_syms_cancel) return; /* nothing provable */
  if (neg >= 0) {
    if (fo.k == 0) return;
    /* symbols of the input that no given dim cancels carry factors of their own ([N*128]
     * flattened into [-1, 1, 1, 128] where N*128 is a fresh symbol): divisibility is provable
     * only from static counts */
    if (nleft > 0 && fi.k % fo.k != 0) return;
    if (fi.k % fo.k != 0) {
      err(c, "cannot reshape %s into %s: %lld elements are not a multiple of %lld", fmt_shp(x), fmt_shp(o),
          (long long)fi.k, (long long)fo.k);
      shp_unknown(o);
      return;
    }
    fi.k /= fo.k; /* the -1 dim: what the given dims leave (a product of the symbols left) */
    o->d[neg] = factors_dim(c, &fi);
  } else if (nleft == 0 && fi.k != fo.k) {
    err(c, "cannot reshape %s (%lld elements) into %s (%lld elements)", fmt_shp(x), (long long)fi.k,
        fmt_shp(o), (long long)fo.k);
    shp_unknown(o);
  }
}

/* ---- per-op inference ---- */
typedef struct {
  drk_dtype_t dt[MAXOUT];
  shp_t s[MAXOUT];
} outs_t;

static drk_dtype_t dt_in(const drk_node_t *n, int i, drk_dtype_t dflt) {
  drk_value_t *v = in(n, i);
  return v ? v->dtype : dflt;
}

static void infer_matmul(ictx_t *c, const shp_t *a0, const shp_t *b0, shp_t *o) {
  if (a0->rank < 0 || b0->rank < 0) { shp_unknown(o); return; }
  if (a0->rank == 0 || b0->rank == 0) { err(c, "operands must not be scalars (%s x %s)", fmt_shp(a0), fmt_shp(b0)); return; }
  shp_t a = *a0, b = *b0;
  bool a1 = a.rank == 1, b1 = b.rank == 1;
  if (a1) { a.rank = 2; a.d[1] = a.d[0]; a.d[0] = dim_s(1); }
  if (b1) { b.rank = 2; b.d[1] = dim_s(1); }
  drk_dim_t ka = a.d[a.rank - 1], kb = b.d[b.rank - 2], k;
  if (!unify_dim(ka, kb, &k)) {
    err(c, "inner dimensions differ: %s x %s (%lld vs %lld)", fmt_shp(a0), fmt_shp(b0), (long long)ka.size,
        (long long)kb.size);
    return;
  }
  shp_t ba = a, bb = b, bo;
  ba.rank -= 2;
  bb.rank -= 2;
  if (!bcast(c, &ba, &bb, &bo)) return;
  o->rank = bo.rank;
  for (int i = 0; i < bo.rank; i++) o->d[i] = bo.d[i];
  if (!a1) o->d[o->rank++] = a.d[a.rank - 2];
  if (!b1) o->d[o->rank++] = b.d[b.rank - 1];
}

static void infer_conv(ictx_t *c, const drk_node_t *n, const shp_t *x, const shp_t *w, shp_t *o, bool transpose) {
  if (x->rank < 0) { shp_unknown(o); return; }
  if (x->rank < 3) { err(c, "input %s must have rank >= 3 (N, C, spatial...)", fmt_shp(x)); return; }
  int ns = x->rank - 2;
  size_t nk = 0, np = 0, nst = 0, nd = 0, nop = 0, nos = 0;
  const int64_t *ks = drk_node_attr_ints(n, "kernel_shape", &nk);
  const int64_t *pads = drk_node_attr_ints(n, "pads", &np);
  const int64_t *strides = drk_node_attr_ints(n, "strides", &nst);
  const int64_t *dil = drk_node_attr_ints(n, "dilations", &nd);
  const int64_t *opad = drk_node_attr_ints(n, "output_padding", &nop);
  const int64_t *oshape = drk_node_attr_ints(n, "output_shape", &nos);
  const char *ap = drk_node_attr_string(n, "auto_pad", "NOTSET");
  int64_t group = drk_node_attr_int(n, "group", 1);
  if (group <= 0 || group > ((int64_t)1 << 24)) { err(c, "group %lld is out of range", (long long)group); return; }
  if ((ks && (int)nk != ns) || (pads && (int)np != 2 * ns) || (strides && (int)nst != ns) || (dil && (int)nd != ns)) {
    err(c, "kernel_shape/pads/strides/dilations do not match %d spatial dims of %s", ns, fmt_shp(x));
    return;
  }
  if (w && w->rank >= 0 && w->rank != x->rank) {
    err(c, "weight %s and input %s differ in rank", fmt_shp(w), fmt_shp(x));
    return;
  }
  o->rank = x->rank;
  o->d[0] = x->d[0];
  o->d[1] = dim_unk();
  if (w && w->rank >= 0) {
    if (!transpose) {
      o->d[1] = w->d[0];
      drk_dim_t cin = x->d[1], wc = w->d[1];
      if (is_st(cin) && is_st(wc) && cin.size != wc.size * group)
        err(c, "input channels %lld do not match weight %s with group %lld", (long long)cin.size, fmt_shp(w),
            (long long)group);
    } else if (is_st(w->d[1])) {
      o->d[1] = dim_s(w->d[1].size * group);
    }
  }
  for (int i = 0; i < ns; i++) {
    int64_t k = ks ? ks[i] : (w && w->rank >= 0 && is_st(w->d[2 + i]) ? w->d[2 + i].size : -1);
    int64_t s = strides ? strides[i] : 1, dl = dil ? dil[i] : 1;
    int64_t pb = pads ? pads[i] : 0, pe = pads ? pads[ns + i] : 0;
    drk_dim_t xi = x->d[2 + i];
    if (k < 0 || !is_st(xi)) { o->d[2 + i] = dim_unk(); continue; }
    if (!transpose) {
      drk_dim_t r = pool_out(xi, k, s, dl, pb, pe, ap, false);
      if (r.size != -2) o->d[2 + i] = r;
      else { err(c, "kernel %lld (dilation %lld) is larger than padded input %lld on spatial axis %d", (long long)k, (long long)dl, (long long)xi.size, i); return; }
    } else {
      if (oshape && (int)nos >= ns) { o->d[2 + i] = dim_s(oshape[nos - ns + i]); continue; }
      int64_t op = opad && (int)nop == ns ? opad[i] : 0;
      const int64_t lim = (int64_t)1 << 31;
      if (s <= 0 || s > lim || k > lim || dl <= 0 || dl > lim || op < -lim || op > lim || pb < -lim || pb > lim || pe < -lim || pe > lim || xi.size > lim) {
        o->d[2 + i] = dim_unk();
        continue;
      }
      if (strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0) o->d[2 + i] = dim_s(xi.size * s);
      else {
        if (strcmp(ap, "VALID") == 0) pb = pe = 0;
        o->d[2 + i] = dim_s(s * (xi.size - 1) + op + (k - 1) * dl + 1 - pb - pe);
      }
    }
  }
}

static void infer_pool(ictx_t *c, const drk_node_t *n, const shp_t *x, shp_t *o) {
  if (x->rank < 0) { shp_unknown(o); return; }
  if (x->rank < 3) { err(c, "input %s must have rank >= 3 (N, C, spatial...)", fmt_shp(x)); return; }
  int ns = x->rank - 2;
  size_t nk = 0, np = 0, nst = 0, nd = 0;
  const int64_t *ks = drk_node_attr_ints(n, "kernel_shape", &nk);
  const int64_t *pads = drk_node_attr_ints(n, "pads", &np);
  const int64_t *strides = drk_node_attr_ints(n, "strides", &nst);
  const int64_t *dil = drk_node_attr_ints(n, "dilations", &nd);
  const char *ap = drk_node_attr_string(n, "auto_pad", "NOTSET");
  bool ceil_mode = drk_node_attr_int(n, "ceil_mode", 0) != 0;
  if (!ks || (int)nk != ns || (pads && (int)np != 2 * ns) || (strides && (int)nst != ns) || (dil && (int)nd != ns)) {
    err(c, "kernel_shape/pads/strides/dilations do not match %d spatial dims of %s", ns, fmt_shp(x));
    return;
  }
  o->rank = x->rank;
  o->d[0] = x->d[0];
  o->d[1] = x->d[1];
  for (int i = 0; i < ns; i++) {
    drk_dim_t r = pool_out(x->d[2 + i], ks[i], strides ? strides[i] : 1, dil ? dil[i] : 1, pads ? pads[i] : 0,
                           pads ? pads[ns + i] : 0, ap, ceil_mode);
    if (r.size == -2) {
      err(c, "kernel %lld is larger than padded input %s on spatial axis %d", (long long)ks[i], fmt_shp(x), i);
      return;
    }
    o->d[2 + i] = r;
  }
}

/* Channels-last forms (ConvNHWC, MaxPoolNHWC, AveragePoolNHWC: [N, spatial..., C]) are
 * inferred as their channels-first counterparts on shapes with the last dim moved to 1, the
 * result's dim 1 then moved back last. */
static shp_t shp_channels_first(const shp_t *s) {
  shp_t r = *s;
  if (s->rank < 3) return r;
  r.d[1] = s->d[s->rank - 1];
  for (int i = 2; i < s->rank; i++) r.d[i] = s->d[i - 1];
  return r;
}
static void shp_channels_last(shp_t *s) {
  if (s->rank < 3) return;
  drk_dim_t ch = s->d[1];
  for (int i = 1; i < s->rank - 1; i++) s->d[i] = s->d[i + 1];
  s->d[s->rank - 1] = ch;
}

static void infer_nhwc(ictx_t *c, const drk_node_t *n, const shp_t *x, shp_t *o) {
  if (x->rank >= 0 && x->rank < 3) { err(c, "input %s must have rank >= 3 (N, spatial..., C)", fmt_shp(x)); return; }
  shp_t xc = shp_channels_first(x);
  if (n->op == DRK_OP_CONV_NHWC) {
    shp_t w = shp_of(in(n, 1));
    if (w.rank >= 0 && w.rank < 3) { err(c, "weight %s must have rank >= 3 (OC, k..., C/group)", fmt_shp(&w)); return; }
    int64_t group = drk_node_attr_int(n, "group", 1);
    if (x->rank >= 3 && w.rank >= 3 && group > 0 && is_st(x->d[x->rank - 1]) && is_st(w.d[w.rank - 1]) &&
        x->d[x->rank - 1].size != w.d[w.rank - 1].size * group) { /* said in NHWC terms, before infer_conv would */
      err(c, "input channels %lld do not match weight %s with group %lld", (long long)x->d[x->rank - 1].size,
          fmt_shp(&w), (long long)group);
      return;
    }
    shp_t wc = shp_channels_first(&w);
    infer_conv(c, n, &xc, w.rank >= 0 ? &wc : NULL, o, false);
  } else {
    infer_pool(c, n, &xc, o);
  }
  shp_channels_last(o);
}

/* Reduce-style axes: from input 1 (opset 18+) or the "axes" attribute (ArgMax etc. use axis). */
static void infer_reduce(ictx_t *c, const drk_node_t *n, const shp_t *x, shp_t *o) {
  bool keep = drk_node_attr_int(n, "keepdims", 1) != 0;
  bool noop = drk_node_attr_int(n, "noop_with_empty_axes", 0) != 0;
  int64_t axes[MAXK];
  int na = 0;
  bool have = true;
  if (in(n, 1)) {
    if (!get_ints(c, in(n, 1), axes, &na)) have = false;
  } else {
    size_t cnt = 0;
    const int64_t *a = drk_node_attr_ints(n, "axes", &cnt);
    if (a) {
      if (cnt > MAXK) cnt = MAXK;
      for (size_t i = 0; i < cnt; i++) axes[i] = a[i];
      na = (int)cnt;
    }
  }
  if (x->rank < 0) { shp_unknown(o); return; }
  if (!have) {
    if (keep) shp_rank(o, x->rank);
    else shp_unknown(o);
    return;
  }
  if (na == 0 && noop) { *o = *x; return; }
  bool red[MAXR] = {0};
  if (na == 0) for (int i = 0; i < x->rank; i++) red[i] = true;
  for (int i = 0; i < na; i++) {
    int a;
    if (!norm_axis(c, axes[i], x->rank, &a, "axis")) return;
    red[a] = true;
  }
  o->rank = 0;
  for (int i = 0; i < x->rank; i++) {
    if (!red[i]) o->d[o->rank++] = x->d[i];
    else if (keep) o->d[o->rank++] = dim_s(1);
  }
}

static bool dtype_from_attr(const drk_node_t *n, const char *name, drk_dtype_t *out) {
  const drk_attr_t *a = drk_node_attr(n, name);
  if (!a || a->kind != DRK_ATTR_INT) return false;
  return drk_dtype_from_onnx((int)a->i, out);
}

/* Einsum: output dims by letter; "..." is the broadcast (right-aligned) of the dims each
 * operand leaves to it, placed where the output term puts "..." (first when implicit). */
static void infer_einsum(ictx_t *c, const drk_node_t *n, outs_t *o) {
  const char *eq = drk_node_attr_string(n, "equation", NULL);
  if (!eq) { err(c, "missing 'equation'"); return; }
  drk_dim_t letter[128];
  int count[128] = {0};
  bool seen[128] = {0};
  for (int i = 0; i < 128; i++) letter[i] = dim_unk();
  const char *arrow = strstr(eq, "->");
  /* ellipsis rank: the largest any operand leaves to "..." */
  drk_dim_t ell[MAXR];
  int erank = 0;
  for (const char *p = eq; *p && p != arrow; p++) {
    const char *t = p;
    int named = 0;
    bool dots = false;
    for (; *p && *p != ',' && p != arrow; p++) {
      if (*p == '.') dots = true;
      else if (*p != ' ') named++;
    }
    int op = 0;
    for (const char *q = eq; q < t; q++) op += *q == ',';
    shp_t x = shp_of(in(n, op));
    if (dots && x.rank < 0) { shp_unknown(&o->s[0]); return; }
    if (dots && x.rank - named > erank) erank = x.rank - named;
    if (!*p || p == arrow) break;
  }
  if (erank > MAXR) { err(c, "equation '%s': ellipsis of rank %d is too large", eq, erank); return; }
  for (int i = 0; i < erank; i++) ell[i] = dim_s(1);
  const char *p = eq;
  int op = 0;
  while (*p && p != arrow) {
    shp_t x = shp_of(in(n, op));
    int named = 0;
    for (const char *q = p; *q && *q != ',' && q != arrow; q++) named += *q != '.' && *q != ' ';
    int ax = 0;
    while (*p && *p != ',' && p != arrow) {
      unsigned char ch = (unsigned char)*p++;
      if (ch == ' ') continue;
      if (ch == '.') {
        if (p[0] != '.' || p[1] != '.') { err(c, "bad equation '%s'", eq); return; }
        p += 2;
        int er = x.rank - named;
        if (x.rank < 0 || er < 0) { err(c, "equation '%s' gives too many labels for operand %d", eq, op); return; }
        for (int q = 0; q < er; q++, ax++)
          if (!bcast_dim(c, ell[erank - er + q], x.d[ax], &ell[erank - er + q])) {
            err(c, "equation '%s': the '...' dims of operand %d do not broadcast", eq, op);
            return;
          }
        continue;
      }
      if (ch >= 128) { err(c, "bad equation '%s'", eq); return; }
      count[ch]++;
      if (x.rank >= 0 && ax < x.rank) {
        drk_dim_t d = x.d[ax];
        if (!seen[ch]) letter[ch] = d;
        else {
          drk_dim_t u;
          if (is_st(d) && d.size == 1) u = letter[ch];
          else if (is_st(letter[ch]) && letter[ch].size == 1) u = d;
          else if (!unify_dim(letter[ch], d, &u)) {
            err(c, "equation '%s': label '%c' is %lld in one operand and %lld in another", eq, ch,
                (long long)letter[ch].size, (long long)d.size);
            return;
          }
          letter[ch] = u;
        }
      }
      seen[ch] = true;
      ax++;
    }
    if (x.rank >= 0 && ax != x.rank) { err(c, "equation '%s' gives %d labels for operand %d of rank %d", eq, ax, op, x.rank); return; }
    if (x.rank < 0) { shp_unknown(&o->s[0]); return; }
    if (*p == ',') { p++; op++; }
  }
  shp_t r;
  r.rank = 0;
  if (arrow) {
    for (p = arrow + 2; *p; p++) {
      if (*p == '.') {
        if (p[1] != '.' || p[2] != '.') { err(c, "bad equation '%s'", eq); return; }
        p += 2;
        for (int q = 0; q < erank && r.rank < MAXR; q++) r.d[r.rank++] = ell[q];
      } else if (*p != ' ' && r.rank < MAXR) {
        r.d[r.rank++] = letter[(unsigned char)*p & 127];
      }
    }
  } else {
    for (int q = 0; q < erank && r.rank < MAXR; q++) r.d[r.rank++] = ell[q];
    for (int ch = 0; ch < 128; ch++)
      if (count[ch] == 1 && r.rank < MAXR) r.d[r.rank++] = letter[ch];
  }
  o->s[0] = r;
}

/* ---- elementwise and broadcast ---- */

static void infer_ew(ictx_t *c, const drk_node_t *n, const shp_t *x, outs_t *o) {
  /* elementwise: broadcast every present input except Clip's bounds and quantization params */
  int nb = n->n_inputs;
  if (n->op == DRK_OP_CLIP || n->op == DRK_OP_CAST || n->op == DRK_OP_CAST_LIKE || n->op == DRK_OP_QUANTIZE_LINEAR ||
      n->op == DRK_OP_DEQUANTIZE_LINEAR)
    nb = 1;
  shp_t acc = *x;
  for (int i = 1; i < nb; i++) {
    if (!in(n, i)) continue;
    shp_t y = shp_of(in(n, i));
    if (!bcast(c, &acc, &y, &acc)) return;
  }
  o->s[0] = acc;
  switch (n->op) {
    case DRK_OP_EQUAL: case DRK_OP_LESS: case DRK_OP_LESS_OR_EQUAL: case DRK_OP_GREATER:
    case DRK_OP_GREATER_OR_EQUAL: case DRK_OP_IS_NAN: case DRK_OP_IS_INF: case DRK_OP_NOT:
    case DRK_OP_AND: case DRK_OP_OR: case DRK_OP_XOR:
      o->dt[0] = DRK_DT_BOOL;
      break;
    case DRK_OP_WHERE: o->dt[0] = dt_in(n, 1, DRK_DT_F32); break;
    case DRK_OP_CAST:
      if (!dtype_from_attr(n, "to", &o->dt[0])) err(c, "missing or unsupported 'to' dtype");
      break;
    case DRK_OP_CAST_LIKE: o->dt[0] = dt_in(n, 1, DRK_DT_F32); break;
    case DRK_OP_QUANTIZE_LINEAR:
      if (in(n, 2)) o->dt[0] = in(n, 2)->dtype;
      else if (!dtype_from_attr(n, "output_dtype", &o->dt[0])) o->dt[0] = DRK_DT_U8;
      break;
    case DRK_OP_DEQUANTIZE_LINEAR: o->dt[0] = dt_in(n, 1, DRK_DT_F32); break;
    default: break;
  }
}

/* ---- matmul, conv, pool ---- */

static void infer_gemm(ictx_t *c, const drk_node_t *n, const shp_t *x, outs_t *o) {
  shp_t b = shp_of(in(n, 1));
  if (x->rank < 0 || b.rank < 0) return;
  if (x->rank != 2 || b.rank != 2) { err(c, "operands must be 2-D, got %s and %s", fmt_shp(x), fmt_shp(&b)); return; }
  bool ta = drk_node_attr_int(n, "transA", 0) != 0, tb = drk_node_attr_int(n, "transB", 0) != 0;
  drk_dim_t m = x->d[ta ? 1 : 0], ka = x->d[ta ? 0 : 1], kb = b.d[tb ? 1 : 0], nn = b.d[tb ? 0 : 1], k;
  if (!unify_dim(ka, kb, &k)) {
    err(c, "inner dimensions differ: %s%s x %s%s (%lld vs %lld)", fmt_shp(x), ta ? "^T" : "", fmt_shp(&b),
        tb ? "^T" : "", (long long)ka.size, (long long)kb.size);
    return;
  }
  o->s[0].rank = 2;
  o->s[0].d[0] = m;
  o->s[0].d[1] = nn;
  if (in(n, 2)) {
    shp_t cc = shp_of(in(n, 2)), t;
    if (!bcast(c, &o->s[0], &cc, &t)) return;
  }
}

static void infer_max_avg_pool(ictx_t *c, const drk_node_t *n, const shp_t *x, outs_t *o) {
  infer_pool(c, n, x, &o->s[0]);
  if (n->n_outputs > 1) { o->s[1] = o->s[0]; o->dt[1] = DRK_DT_I64; }
}

static void infer_global_pool(ictx_t *c, const shp_t *x, outs_t *o) {
  if (x->rank < 0) return;
  if (x->rank < 2) { err(c, "input %s must have rank >= 2", fmt_shp(x)); return; }
  o->s[0] = *x;
  for (int i = 2; i < x->rank; i++) o->s[0].d[i] = dim_s(1);
}

/* ---- reductions ---- */

static void infer_arg_reduce(ictx_t *c, const drk_node_t *n, const shp_t *x, outs_t *o) {
  o->dt[0] = DRK_DT_I64;
  if (x->rank < 0) return;
  int a;
  if (!norm_axis(c, drk_node_attr_int(n, "axis", 0), x->rank, &a, "axis")) return;
  bool keep = drk_node_attr_int(n, "keepdims", 1) != 0;
  o->s[0].rank = 0;
  for (int i = 0; i < x->rank; i++) {
    if (i != a) o->s[0].d[o->s[0].rank++] = x->d[i];
    else if (keep) o->s[0].d[o->s[0].rank++] = dim_s(1);
  }
}

static void infer_top_k(ictx_t *c, const drk_node_t *n, const shp_t *x, outs_t *o) {
  o->dt[1] = DRK_DT_I64;
  if (x->rank < 0) return;
  int a;
  if (!norm_axis(c, drk_node_attr_int(n, "axis", -1), x->rank, &a, "axis")) return;
  int64_t k[MAXK];
  int nk;
  o->s[0] = *x;
  if (get_ints(c, in(n, 1), k, &nk) && nk == 1) {
    if (k[0] < 0) { err(c, "k = %lld is negative", (long long)k[0]); return; }
    if (is_st(x->d[a]) && k[0] > x->d[a].size) {
      err(c, "k = %lld is larger than axis %d of %s", (long long)k[0], a, fmt_shp(x));
      return;
    }
    o->s[0].d[a] = dim_s(k[0]);
  } else {
    o->s[0].d[a] = dim_unk();
  }
  o->s[1] = o->s[0];
}

/* ---- normalizations ---- */

static void infer_layer_norm(ictx_t *c, const drk_node_t *n, const shp_t *x, outs_t *o) {
  o->s[0] = *x;
  drk_dtype_t st = DRK_DT_F32;
  dtype_from_attr(n, "stash_type", &st);
  for (int i = 1; i < n->n_outputs; i++) {
    o->dt[i] = st;
    if (x->rank < 0) continue;
    int a;
    if (!norm_axis(c, drk_node_attr_int(n, "axis", -1), x->rank, &a, "axis")) return;
    o->s[i] = *x;
    for (int j = a; j < x->rank; j++) o->s[i].d[j] = dim_s(1);
  }
}

/* ---- shape and data movement ---- */

static void infer_reshape(ictx_t *c, const drk_node_t *n, const shp_t *x, outs_t *o) {
  const known_t *k = get_known(c, in(n, 1));
  shp_t sh = shp_of(in(n, 1));
  if (!k) {
    if (sh.rank == 1 && is_st(sh.d[0]) && sh.d[0].size <= MAXR) shp_rank(&o->s[0], (int)sh.d[0].size);
    return;
  }
  if (k->n > MAXR) { err(c, "rank %d is too large", k->n); return; }
  reshape_infer(c, x, k->e, k->n, drk_node_attr_int(n, "allowzero", 0) != 0, &o->s[0]);
}

static void infer_flatten(ictx_t *c, const drk_node_t *n, const shp_t *x, outs_t *o) {
  if (x->rank < 0) return;
  int64_t axis = drk_node_attr_int(n, "axis", 1);
  if (axis < -x->rank || axis > x->rank) { err(c, "axis %lld is out of range for %s", (long long)axis, fmt_shp(x)); return; }
  int a = (int)(axis < 0 ? axis + x->rank : axis);
  /* each side the product of its dims (symbols make a product symbol: [batch, seq] -> batch*seq) */
  factors_t f[2] = {{.k = 1}, {.k = 1}};
  bool ok[2] = {true, true};
  for (int i = 0; i < x->rank; i++) ok[i >= a] = ok[i >= a] && dim_factors(x->d[i], &f[i >= a]);
  o->s[0].rank = 2;
  for (int s = 0; s < 2; s++) o->s[0].d[s] = ok[s] ? factors_dim(c, &f[s]) : dim_unk();
}

static void infer_squeeze(ictx_t *c, const drk_node_t *n, const shp_t *x, outs_t *o) {
  int64_t axes[MAXK];
  int na = 0;
  bool have = in(n, 1) ? get_ints(c, in(n, 1), axes, &na) : false;
  const known_t *k = get_known(c, in(n, 0));
  if (k && in(n, 0)->kind != DRK_VALUE_CONST && x->rank <= 1) set_known(c, n->outputs[0], k);
  if (x->rank < 0) return;
  if (n->op == DRK_OP_UNSQUEEZE) {
    if (!have) { shp_unknown(&o->s[0]); return; }
    int r = x->rank + na;
    if (r > MAXR) { err(c, "rank %d is too large", r); return; }
    bool ins[MAXR] = {0};
    for (int i = 0; i < na; i++) {
      int a;
      if (!norm_axis(c, axes[i], r, &a, "axis")) return;
      if (ins[a]) { err(c, "axis %lld repeats", (long long)axes[i]); return; }
      ins[a] = true;
    }
    o->s[0].rank = r;
    for (int i = 0, j = 0; i < r; i++) o->s[0].d[i] = ins[i] ? dim_s(1) : x->d[j++];
    return;
  }
  bool rm[MAXR] = {0};
  if (!in(n, 1)) {
    for (int i = 0; i < x->rank; i++) {
      if (!is_st(x->d[i])) return; /* a symbolic dim may or may not be 1 */
      rm[i] = x->d[i].size == 1;
    }
  } else if (!have) {
    return;
  } else {
    for (int i = 0; i < na; i++) {
      int a;
      if (!norm_axis(c, axes[i], x->rank, &a, "axis")) return;
      if (is_st(x->d[a]) && x->d[a].size != 1) {
        err(c, "cannot squeeze axis %d of %s: it is not 1", a, fmt_shp(x));
        return;
      }
      rm[a] = true;
    }
  }
  o->s[0].rank = 0;
  for (int i = 0; i < x->rank; i++)
    if (!rm[i]) o->s[0].d[o->s[0].rank++] = x->d[i];
}

static void infer_transpose(ictx_t *c, const drk_node_t *n, const shp_t *x, outs_t *o) {
  if (x->rank < 0) return;
  size_t np = 0;
  const int64_t *perm = drk_node_attr_ints(n, "perm", &np);
  if (perm && (int)np != x->rank) { err(c, "perm has %zu entries for input %s", np, fmt_shp(x)); return; }
  bool used[MAXR] = {0};
  o->s[0].rank = x->rank;
  for (int i = 0; i < x->rank; i++) {
    int64_t p = perm ? perm[i] : x->rank - 1 - i;
    int a;
    if (!norm_axis(c, p, x->rank, &a, "perm entry")) return;
    if (used[a]) { err(c, "perm repeats axis %d", a); return; }
    used[a] = true;
    o->s[0].d[i] = x->d[a];
  }
}

static void infer_concat(ictx_t *c, const drk_node_t *n, const shp_t *x, outs_t *o) {
  int64_t axis = drk_node_attr_int(n, "axis", 0);
  int r = -1;
  for (int i = 0; i < n->n_inputs; i++) {
    shp_t y = shp_of(in(n, i));
    if (y.rank < 0) continue;
    if (r >= 0 && y.rank != r) {
      err(c, "inputs differ in rank: '%s' is %s, '%s' is %s", iname(n, 0), fmt_shp(x), iname(n, i), fmt_shp(&y));
      return;
    }
    r = y.rank;
  }
  if (r < 0) return;
  int a;
  if (!norm_axis(c, axis, r, &a, "axis")) return;
  shp_t acc;
  acc.rank = -1;
  bool sum_known = true;
  int64_t sum = 0;
  const char *only_sym = NULL;
  int n_nonzero = 0;
  for (int i = 0; i < n->n_inputs; i++) {
    shp_t y = shp_of(in(n, i));
    if (y.rank < 0) { sum_known = false; n_nonzero++; continue; }
    drk_dim_t da = y.d[a];
    if (is_st(da)) {
      if (__builtin_add_overflow(sum, da.size, &sum)) { err(c, "concatenated axis overflows"); return; }
    } else {
      sum_known = false;
      only_sym = da.sym;
    }
    if (!is_st(da) || da.size != 0) n_nonzero++;
    if (acc.rank < 0) { acc = y; continue; }
    for (int j = 0; j < r; j++) {
      if (j == a) continue;
      if (!unify_dim(acc.d[j], y.d[j], &acc.d[j])) {
        err(c, "inputs differ in dimension %d: '%s' is %s, '%s' is %s", j, iname(n, 0), fmt_shp(x), iname(n, i),
            fmt_shp(&y));
        return;
      }
    }
  }
  if (acc.rank < 0) { shp_rank(&o->s[0], r); return; }
  if (sum_known) acc.d[a] = dim_s(sum);
  else if (only_sym && n_nonzero == 1 && sum == 0) acc.d[a] = (drk_dim_t){-1, only_sym};
  else acc.d[a] = dim_unk();
  o->s[0] = acc;
  /* tracked contents of 1-D shape tensors */
  if (r == 1 && n->inputs[0]) {
    known_t kk;
    kk.n = 0;
    bool all = true;
    for (int i = 0; i < n->n_inputs && all; i++) {
      const known_t *ki = get_known(c, in(n, i));
      if (!ki || kk.n + ki->n > MAXK) { all = false; break; }
      for (int j = 0; j < ki->n; j++) kk.e[kk.n++] = ki->e[j];
    }
    if (all) set_known(c, n->outputs[0], &kk);
  }
}

static void infer_split(ictx_t *c, const drk_node_t *n, const shp_t *x, outs_t *o) {
  if (x->rank < 0) return;
  int a;
  if (!norm_axis(c, drk_node_attr_int(n, "axis", 0), x->rank, &a, "axis")) return;
  int no = n->n_outputs;
  if (no > MAXOUT) { err(c, "too many outputs (%d)", no); return; }
  int64_t sizes[MAXK];
  int ns = 0;
  for (int i = 0; i < no; i++) { o->s[i] = *x; o->s[i].d[a] = dim_unk(); }
  if (in(n, 1)) {
    if (!get_ints(c, in(n, 1), sizes, &ns)) return;
    if (ns != no) { err(c, "'split' has %d entries for %d outputs", ns, no); return; }
    int64_t tot = 0;
    for (int i = 0; i < ns; i++) {
      if (sizes[i] < 0 || sizes[i] > DRK_MAX_NUMEL) { err(c, "split size %lld is invalid", (long long)sizes[i]); return; }
      tot += sizes[i]; /* at most MAXK values of at most 2^56 each: no wrap */
    }
    if (is_st(x->d[a]) && tot != x->d[a].size) {
      err(c, "split sizes add up to %lld, but axis %d of %s is %lld", (long long)tot, a, fmt_shp(x), (long long)x->d[a].size);
      return;
    }
    for (int i = 0; i < no; i++) o->s[i].d[a] = dim_s(sizes[i]);
    return;
  }
  int64_t parts = drk_node_attr_int(n, "num_outputs", no);
  if (parts != no) { err(c, "num_outputs = %lld but the node has %d outputs", (long long)parts, no); return; }
  if (!is_st(x->d[a])) return;
  int64_t dimv = x->d[a].size, chunk = (dimv + no - 1) / no;
  for (int i = 0; i < no; i++) {
    int64_t s = dimv - chunk * i;
    o->s[i].d[a] = dim_s(s < 0 ? 0 : s < chunk ? s : chunk);
  }
}

static void infer_slice(ictx_t *c, const drk_node_t *n, const shp_t *x, outs_t *o) {
  int64_t st[MAXK], en[MAXK], ax[MAXK], sp[MAXK];
  int nst, nen, nax, nsp;
  const known_t *ke = NULL;
  if (get_ints(c, in(n, 1), st, &nst) && !get_ints(c, in(n, 2), en, &nen) && (ke = get_known(c, in(n, 2))) &&
      ke->n == nst && x->rank >= 0 && (!in(n, 4) || (get_ints(c, in(n, 4), sp, &nsp) && nsp == nst)) &&
      (!in(n, 3) || (get_ints(c, in(n, 3), ax, &nax) && nax == nst))) {
    /* ends with symbolic dims (a position table or a causal mask cut to [:seq, :seq]): an
     * axis cut from 0 with step 1 to dim has that dim (inputs past the axis's size are not
     * valid ones); the others as below when static, else unknown */
    o->s[0] = *x;
    for (int i = 0; i < nst; i++) {
      int a = i;
      if (in(n, 3) && !norm_axis(c, ax[i], x->rank, &a, "axis")) return;
      int64_t step = in(n, 4) ? sp[i] : 1, e;
      if (kel_is_sym(ke->e[i])) o->s[0].d[a] = st[i] == 0 && step == 1 ? ke->e[i] : dim_unk();
      else if (kel_static(ke->e[i], &e) && is_st(x->d[a]) && step != 0 && step != INT64_MIN)
        o->s[0].d[a] = dim_s(slice_len(x->d[a].size, st[i], e, step));
      else o->s[0].d[a] = dim_unk();
    }
    return;
  }
  if (!get_ints(c, in(n, 1), st, &nst) || !get_ints(c, in(n, 2), en, &nen)) {
    if (x->rank >= 0) shp_rank(&o->s[0], x->rank);
    return;
  }
  if (nst != nen) { err(c, "starts has %d entries, ends %d", nst, nen); return; }
  if (in(n, 3)) {
    if (!get_ints(c, in(n, 3), ax, &nax)) { if (x->rank >= 0) shp_rank(&o->s[0], x->rank); return; }
  } else {
    nax = nst;
    for (int i = 0; i < nst; i++) ax[i] = i;
  }
  if (in(n, 4)) {
    if (!get_ints(c, in(n, 4), sp, &nsp)) { if (x->rank >= 0) shp_rank(&o->s[0], x->rank); return; }
  } else {
    nsp = nst;
    for (int i = 0; i < nst; i++) sp[i] = 1;
  }
  if (nax != nst || nsp != nst) { err(c, "starts, ends, axes and steps differ in length"); return; }
  if (x->rank < 0) return;
  o->s[0] = *x;
  for (int i = 0; i < nst; i++) {
    int a;
    if (!norm_axis(c, ax[i], x->rank, &a, "axis")) return;
    if (sp[i] == 0 || sp[i] == INT64_MIN) { err(c, "step %lld is invalid", (long long)sp[i]); return; }
    drk_dim_t d = x->d[a];
    if (is_st(d)) o->s[0].d[a] = dim_s(slice_len(d.size, st[i], en[i], sp[i]));
    else if (sp[i] == 1 && st[i] == 0 && en[i] >= HUGE_END) o->s[0].d[a] = d;
    else if (sp[i] > 0 && st[i] >= 0 && en[i] >= 0 && en[i] < HUGE_END && en[i] <= st[i]) o->s[0].d[a] = dim_s(0);
    else o->s[0].d[a] = dim_unk();
  }
  /* contents of a sliced 1-D shape tensor */
  const known_t *k = get_known(c, in(n, 0));
  if (k && x->rank == 1 && nst == 1 && in(n, 0)->kind != DRK_VALUE_CONST) {
    known_t kk;
    kk.n = (int)slice_len(k->n, st[0], en[0], sp[0]);
    int64_t s0 = slice_start(k->n, st[0], sp[0]);
    for (int i = 0; i < kk.n; i++) kk.e[i] = k->e[s0 + sp[0] * i];
    set_known(c, n->outputs[0], &kk);
  }
}

static void infer_gather(ictx_t *c, const drk_node_t *n, const shp_t *x, outs_t *o) {
  shp_t ix = shp_of(in(n, 1));
  o->dt[0] = dt_in(n, 0, DRK_DT_F32);
  if (x->rank < 0 || ix.rank < 0) return;
  int a;
  if (!norm_axis(c, drk_node_attr_int(n, "axis", 0), x->rank, &a, "axis")) return;
  if (x->rank - 1 + ix.rank > MAXR) { err(c, "result rank is too large"); return; }
  int64_t iv[MAXK];
  int ni;
  bool civ = get_ints(c, in(n, 1), iv, &ni);
  if (civ && is_st(x->d[a]))
    for (int i = 0; i < ni; i++)
      if (iv[i] < -x->d[a].size || iv[i] >= x->d[a].size) {
        err(c, "index %lld is out of range for axis %d of %s", (long long)iv[i], a, fmt_shp(x));
        return;
      }
  shp_t r;
  r.rank = 0;
  for (int i = 0; i < a; i++) r.d[r.rank++] = x->d[i];
  for (int i = 0; i < ix.rank; i++) r.d[r.rank++] = ix.d[i];
  for (int i = a + 1; i < x->rank; i++) r.d[r.rank++] = x->d[i];
  o->s[0] = r;
  const known_t *k = get_known(c, in(n, 0));
  if (k && civ && x->rank == 1 && in(n, 0)->kind != DRK_VALUE_CONST) {
    known_t kk;
    kk.n = ni;
    for (int i = 0; i < ni; i++) {
      int64_t j = iv[i] < 0 ? iv[i] + k->n : iv[i];
      if (j < 0 || j >= k->n) return;
      kk.e[i] = k->e[j];
    }
    set_known(c, n->outputs[0], &kk);
  }
}

static void infer_gather_elements(ictx_t *c, const drk_node_t *n, const shp_t *x, outs_t *o) {
  shp_t ix = shp_of(in(n, 1));
  if (x->rank >= 0 && ix.rank >= 0 && x->rank != ix.rank) {
    err(c, "data %s and indices %s differ in rank", fmt_shp(x), fmt_shp(&ix));
    return;
  }
  o->s[0] = ix;
}

static void infer_gather_nd(ictx_t *c, const drk_node_t *n, const shp_t *x, outs_t *o) {
  shp_t ix = shp_of(in(n, 1));
  if (x->rank < 0 || ix.rank < 1) return;
  int64_t b = drk_node_attr_int(n, "batch_dims", 0);
  drk_dim_t last = ix.d[ix.rank - 1];
  if (!is_st(last)) return;
  if (b < 0 || b + last.size > x->rank) { err(c, "indices %s with batch_dims %lld do not fit data %s", fmt_shp(&ix), (long long)b, fmt_shp(x)); return; }
  shp_t r;
  r.rank = 0;
  for (int i = 0; i < ix.rank - 1; i++) r.d[r.rank++] = ix.d[i];
  for (int i = (int)(b + last.size); i < x->rank && r.rank < MAXR; i++) r.d[r.rank++] = x->d[i];
  o->s[0] = r;
}

static void infer_expand(ictx_t *c, const drk_node_t *n, const shp_t *x, outs_t *o) {
  const known_t *k = get_known(c, in(n, 1));
  if (!k) {
    shp_t sh = shp_of(in(n, 1));
    if (x->rank >= 0 && sh.rank == 1 && is_st(sh.d[0])) {
      int r = (int)(sh.d[0].size > x->rank ? sh.d[0].size : x->rank);
      if (r <= MAXR) shp_rank(&o->s[0], r);
    }
    return;
  }
  if (k->n > MAXR) { err(c, "rank %d is too large", k->n); return; }
  shp_t t;
  t.rank = k->n;
  for (int i = 0; i < k->n; i++) {
    int64_t v;
    if (kel_static(k->e[i], &v)) {
      if (v < 0) { err(c, "invalid shape value %lld", (long long)v); return; }
      t.d[i] = dim_s(v);
    } else {
      t.d[i] = k->e[i];
    }
  }
  shp_t r;
  if (!bcast(c, x, &t, &r)) return;
  o->s[0] = r;
}

static void infer_tile(ictx_t *c, const drk_node_t *n, const shp_t *x, outs_t *o) {
  if (x->rank < 0) return;
  const known_t *k = get_known(c, in(n, 1)); /* repeats: static, or a dim (x.repeat(batch, 1)) */
  if (!k) { shp_rank(&o->s[0], x->rank); return; }
  if (k->n != x->rank) { err(c, "repeats has %d entries for input %s", k->n, fmt_shp(x)); return; }
  o->s[0] = *x;
  for (int i = 0; i < k->n; i++) {
    int64_t rep;
    if (!kel_static(k->e[i], &rep)) { /* a symbolic repeat: repeats times the dim (a product) */
      factors_t f = {.k = 1};
      o->s[0].d[i] = dim_factors(k->e[i], &f) && dim_factors(x->d[i], &f) ? factors_dim(c, &f) : dim_unk();
      continue;
    }
    if (rep < 0) { err(c, "negative repeat %lld", (long long)rep); return; }
    int64_t prod;
    if (is_st(x->d[i]) && !__builtin_mul_overflow(x->d[i].size, rep, &prod)) o->s[0].d[i] = dim_s(prod);
    else if (is_st(x->d[i])) o->s[0].d[i] = dim_unk();
    else if (rep != 1) o->s[0].d[i] = rep == 0 ? dim_s(0) : scaled(c, x->d[i], DRK_OP_MUL, rep);
  }
}

static void infer_pad(ictx_t *c, const drk_node_t *n, const shp_t *x, outs_t *o) {
  if (x->rank < 0) return;
  int64_t pads[MAXK], axes[MAXK];
  int np, na;
  if (!get_ints(c, in(n, 1), pads, &np)) { shp_rank(&o->s[0], x->rank); return; }
  if (in(n, 3)) {
    if (!get_ints(c, in(n, 3), axes, &na)) { shp_rank(&o->s[0], x->rank); return; }
  } else {
    na = x->rank;
    for (int i = 0; i < na; i++) axes[i] = i;
  }
  if (np != 2 * na) { err(c, "pads has %d entries for %d axes of %s", np, na, fmt_shp(x)); return; }
  o->s[0] = *x;
  for (int i = 0; i < na; i++) {
    int a;
    if (!norm_axis(c, axes[i], x->rank, &a, "axis")) return;
    int64_t add, sum;
    if (__builtin_add_overflow(pads[i], pads[na + i], &add)) { err(c, "pads overflow"); return; }
    drk_dim_t d = x->d[a];
    if (is_st(d)) {
      if (__builtin_add_overflow(d.size, add, &sum) || sum < 0) { err(c, "pads shrink axis %d of %s below zero", a, fmt_shp(x)); return; }
      o->s[0].d[a] = dim_s(d.size + add);
    } else if (add != 0) {
      o->s[0].d[a] = dim_unk();
    }
  }
}

static void infer_resize(ictx_t *c, const drk_node_t *n, const shp_t *x, outs_t *o) {
  if (x->rank < 0) return;
  size_t nax = 0;
  const int64_t *ax = drk_node_attr_ints(n, "axes", &nax);
  if (ax && (int)nax > x->rank) { err(c, "'axes' has %zu entries for input %s", nax, fmt_shp(x)); return; }
  int naxes = ax ? (int)nax : x->rank;
  int axv[MAXR];
  for (int i = 0; i < naxes; i++) {
    if (ax) { if (!norm_axis(c, ax[i], x->rank, &axv[i], "axis")) return; }
    else axv[i] = i;
  }
  o->s[0] = *x;
  int64_t sizes[MAXK];
  int nsz;
  if (in(n, 3) && get_ints(c, in(n, 3), sizes, &nsz)) {
    if (nsz != naxes) { err(c, "sizes has %d entries for %d axes", nsz, naxes); return; }
    const char *pol = drk_node_attr_string(n, "keep_aspect_ratio_policy", "stretch");
    if (strcmp(pol, "stretch") == 0) {
      for (int i = 0; i < naxes; i++) o->s[0].d[axv[i]] = dim_s(sizes[i]);
      return;
    }
    double sc = strcmp(pol, "not_larger") == 0 ? INFINITY : 0;
    for (int i = 0; i < naxes; i++) {
      if (!is_st(x->d[axv[i]]) || x->d[axv[i]].size == 0) { for (int j = 0; j < naxes; j++) o->s[0].d[axv[j]] = dim_unk(); return; }
      double r = (double)sizes[i] / (double)x->d[axv[i]].size;
      sc = strcmp(pol, "not_larger") == 0 ? fmin(sc, r) : fmax(sc, r);
    }
    for (int i = 0; i < naxes; i++) o->s[0].d[axv[i]] = dim_dbl(floor(sc * (double)x->d[axv[i]].size + 0.5));
    return;
  }
  const known_t *ks = in(n, 3) ? get_known(c, in(n, 3)) : NULL;
  if (ks && ks->n == naxes && !strcmp(drk_node_attr_string(n, "keep_aspect_ratio_policy", "stretch"), "stretch")) {
    /* sizes with symbols (Concat(Shape(x)[:2], [h, w]) of a traced F.interpolate): each size as
     * tracked, a symbol where it is one */
    for (int i = 0; i < naxes; i++) {
      int64_t v;
      o->s[0].d[axv[i]] = kel_static(ks->e[i], &v) ? (v >= 0 ? dim_s(v) : dim_unk()) : kel_is_sym(ks->e[i]) ? ks->e[i] : dim_unk();
    }
    return;
  }
  if (in(n, 2) && in(n, 2)->kind == DRK_VALUE_CONST) {
    drk_tensor_t t;
    if (drk_tensor_from_const(&t, in(n, 2)) && drk_tensor_numel(&t) > 0) {
      if (drk_tensor_numel(&t) != naxes) { err(c, "scales has %lld entries for %d axes", (long long)drk_tensor_numel(&t), naxes); return; }
      for (int i = 0; i < naxes; i++) {
        drk_dim_t d = x->d[axv[i]];
        double s = drk_tensor_get_f64(&t, i);
        if (is_st(d)) o->s[0].d[axv[i]] = dim_dbl(floor((double)d.size * s));
        else if (s != 1.0) o->s[0].d[axv[i]] = dim_unk();
      }
      return;
    }
  }
  for (int i = 0; i < naxes; i++) o->s[0].d[axv[i]] = dim_unk();
}

static void infer_depth_space(ictx_t *c, const drk_node_t *n, const shp_t *x, outs_t *o) {
  if (x->rank < 0) return;
  if (x->rank != 4) { err(c, "input %s must be 4-D", fmt_shp(x)); return; }
  int64_t b = drk_node_attr_int(n, "blocksize", 0);
  if (b <= 0 || b > 65536) { err(c, "blocksize %lld is out of range", (long long)b); return; }
  o->s[0] = *x;
  bool d2s = n->op == DRK_OP_DEPTH_TO_SPACE;
  drk_dim_t ch = x->d[1];
  if (is_st(ch)) {
    if (d2s && ch.size % (b * b)) { err(c, "channels %lld are not a multiple of blocksize^2 = %lld", (long long)ch.size, (long long)(b * b)); return; }
    o->s[0].d[1] = dim_s(d2s ? ch.size / (b * b) : ch.size * b * b);
  } else {
    o->s[0].d[1] = dim_unk();
  }
  for (int i = 2; i < 4; i++) {
    drk_dim_t d = x->d[i];
    if (!is_st(d)) { o->s[0].d[i] = dim_unk(); continue; }
    if (!d2s && d.size % b) { err(c, "spatial dim %lld is not a multiple of blocksize %lld", (long long)d.size, (long long)b); return; }
    o->s[0].d[i] = dim_s(d2s ? d.size * b : d.size / b);
  }
}

/* ---- shape tensors, generators, pass-through ---- */

static void infer_one_hot(ictx_t *c, const drk_node_t *n, const shp_t *x, outs_t *o) {
  o->dt[0] = dt_in(n, 2, DRK_DT_F32);
  if (x->rank < 0) return;
  int r = x->rank + 1;
  if (r > MAXR) return;
  int a;
  if (!norm_axis(c, drk_node_attr_int(n, "axis", -1), r, &a, "axis")) return;
  int64_t depth[MAXK];
  int nd;
  drk_dim_t dd = dim_unk();
  const drk_value_t *dv = in(n, 1);
  if (dv && dv->kind == DRK_VALUE_CONST) {
    drk_tensor_t t;
    if (drk_tensor_from_const(&t, dv) && drk_tensor_numel(&t) == 1) dd = dim_s((int64_t)drk_tensor_get_f64(&t, 0));
  } else if (get_ints(c, dv, depth, &nd) && nd == 1) {
    dd = dim_s(depth[0]);
  }
  o->s[0].rank = r;
  for (int i = 0, j = 0; i < r; i++) o->s[0].d[i] = i == a ? dd : x->d[j++];
}

static void infer_shape(ictx_t *c, const drk_node_t *n, const shp_t *x, outs_t *o) {
  o->dt[0] = DRK_DT_I64;
  if (x->rank < 0) { shp_rank(&o->s[0], 1); return; }
  int64_t st = drk_node_attr_int(n, "start", 0), en = drk_node_attr_int(n, "end", x->rank);
  if (st < 0) st += x->rank;
  if (en < 0) en += x->rank;
  st = st < 0 ? 0 : st > x->rank ? x->rank : st;
  en = en < 0 ? 0 : en > x->rank ? x->rank : en;
  int64_t len = en > st ? en - st : 0;
  o->s[0].rank = 1;
  o->s[0].d[0] = dim_s(len);
  if (len <= MAXK) {
    known_t kk;
    kk.n = (int)len;
    for (int i = 0; i < kk.n; i++) kk.e[i] = x->d[st + i];
    set_known(c, n->outputs[0], &kk);
  }
}

static void infer_size(ictx_t *c, const drk_node_t *n, const shp_t *x, outs_t *o) {
  o->dt[0] = DRK_DT_I64;
  o->s[0].rank = 0;
  known_t kk;
  kk.n = 1;
  int64_t ne = shp_numel(x);
  kk.e[0] = ne >= 0 ? dim_s(ne) : (x->rank == 1 ? x->d[0] : dim_unk());
  set_known(c, n->outputs[0], &kk);
}

static void infer_constant_of_shape(ictx_t *c, const drk_node_t *n, outs_t *o) {
  const drk_attr_t *va = drk_node_attr(n, "value");
  o->dt[0] = va && va->kind == DRK_ATTR_TENSOR && va->tensor ? va->tensor->dtype : DRK_DT_F32;
  const known_t *k = get_known(c, in(n, 0));
  shp_t sh = shp_of(in(n, 0));
  if (!k) {
    if (sh.rank == 1 && is_st(sh.d[0]) && sh.d[0].size <= MAXR) shp_rank(&o->s[0], (int)sh.d[0].size);
    return;
  }
  if (k->n > MAXR) { err(c, "rank %d is too large", k->n); return; }
  o->s[0].rank = k->n;
  for (int i = 0; i < k->n; i++) {
    int64_t v;
    if (kel_static(k->e[i], &v)) {
      if (v < 0) { err(c, "negative dimension %lld", (long long)v); return; }
      o->s[0].d[i] = dim_s(v);
    } else {
      o->s[0].d[i] = k->e[i];
    }
  }
}

static void infer_range(ictx_t *c, const drk_node_t *n, outs_t *o) {
  o->dt[0] = dt_in(n, 0, DRK_DT_F32);
  o->s[0].rank = 1;
  o->s[0].d[0] = dim_unk();
  double v[3];
  const known_t *lim = NULL; /* a symbolic limit */
  for (int i = 0; i < 3; i++) {
    const drk_value_t *iv = in(n, i);
    int64_t kv[MAXK];
    int nk;
    drk_tensor_t t;
    if (iv && iv->kind == DRK_VALUE_CONST && drk_tensor_from_const(&t, iv) && drk_tensor_numel(&t) == 1)
      v[i] = drk_tensor_get_f64(&t, 0);
    else if (get_ints(c, iv, kv, &nk) && nk == 1)
      v[i] = (double)kv[0];
    else if (i == 1 && (lim = get_known(c, iv)) && lim->n == 1 && kel_is_sym(lim->e[0]))
      v[i] = 0;
    else
      return;
  }
  if (lim) { /* Range(0, dim, 1) of a symbolic dim (drkc --dynamic's padding masks): that dim */
    if (v[0] == 0 && v[2] == 1) o->s[0].d[0] = lim->e[0];
    return;
  }
  if (v[2] == 0) { err(c, "delta must not be 0"); return; }
  double cnt = ceil((v[1] - v[0]) / v[2]);
  if (!(cnt < 9.0e15)) { if (cnt == cnt) err(c, "%g elements are too many", cnt); else err(c, "start, limit or delta is NaN"); return; }
  o->s[0].d[0] = dim_s(cnt > 0 ? (int64_t)cnt : 0);
}

static void infer_same_shape(ictx_t *c, const drk_node_t *n, const shp_t *x, outs_t *o) {
  o->s[0] = *x;
  if (n->op == DRK_OP_IDENTITY) {
    const known_t *k = get_known(c, in(n, 0));
    if (k && in(n, 0)->kind != DRK_VALUE_CONST) set_known(c, n->outputs[0], k);
  }
}

static void infer_dropout(const drk_node_t *n, const shp_t *x, outs_t *o) {
  o->s[0] = *x;
  if (n->n_outputs > 1) { o->s[1] = *x; o->dt[1] = DRK_DT_BOOL; }
}

/* ---- dispatch ---- */

/* Results default to the first input's dtype and unknown shapes; each op family's rule then
 * refines them. An op without a rule here keeps those defaults. */
static void infer_node(ictx_t *c, const drk_node_t *n, outs_t *o) {
  drk_op_t op = n->op;
  const drk_op_info_t *info = drk_op_info(op);
  shp_t x = shp_of(in(n, 0));
  for (int i = 0; i < n->n_outputs && i < MAXOUT; i++) {
    o->dt[i] = dt_in(n, 0, DRK_DT_F32);
    shp_unknown(&o->s[i]);
  }
  if (info->flags & DRK_OPF_EW) {
    infer_ew(c, n, &x, o);
    return;
  }
  /* f8 MatMul/Gemm/Conv (--precision=fp8) accumulate in f32 and give an f32 result */
  if ((op == DRK_OP_MATMUL || op == DRK_OP_GEMM || op == DRK_OP_CONV || op == DRK_OP_CONV_NHWC) &&
      (o->dt[0] == DRK_DT_F8E4M3 || o->dt[0] == DRK_DT_F8E5M2))
    o->dt[0] = DRK_DT_F32;
  switch (op) {
    /* matmul, conv, pool */
    case DRK_OP_MATMUL: {
      shp_t b = shp_of(in(n, 1));
      infer_matmul(c, &x, &b, &o->s[0]);
      /* result_n (drkc's, pad-matmul-n): the result keeps B's first result_n columns */
      int64_t rn = drk_node_attr_int(n, "result_n", 0);
      if (rn > 0 && o->s[0].rank >= 1 && b.rank == 2 && !b.d[1].sym && rn <= b.d[1].size)
        o->s[0].d[o->s[0].rank - 1] = dim_s(rn);
      else if (rn != 0)
        err(c, "result_n %lld needs a 2-D B of static width >= it", (long long)rn);
      return;
    }
    case DRK_OP_GEMM: infer_gemm(c, n, &x, o); return;
    case DRK_OP_CONV: case DRK_OP_CONV_TRANSPOSE: {
      shp_t w = shp_of(in(n, 1));
      infer_conv(c, n, &x, &w, &o->s[0], op == DRK_OP_CONV_TRANSPOSE);
      return;
    }
    case DRK_OP_EINSUM: infer_einsum(c, n, o); return;
    case DRK_OP_MATMUL_NBITS: {
      /* Y [..., N]: A's shape with N (scales [K/G, N]) last; ir/w4.c checks the rest */
      shp_t sc = shp_of(in(n, 2));
      if (x.rank == 0 || (sc.rank >= 0 && sc.rank != 2)) err(c, "A must have rank >= 1 and scales rank 2");
      else if (x.rank > 0 && sc.rank == 2) {
        o->s[0] = x;
        o->s[0].d[x.rank - 1] = sc.d[1];
      }
      return;
    }
    case DRK_OP_CONV_NHWC: case DRK_OP_MAX_POOL_NHWC: case DRK_OP_AVERAGE_POOL_NHWC:
      infer_nhwc(c, n, &x, &o->s[0]);
      return;
    case DRK_OP_MAX_POOL: case DRK_OP_AVERAGE_POOL: infer_max_avg_pool(c, n, &x, o); return;
    case DRK_OP_GLOBAL_AVERAGE_POOL: case DRK_OP_GLOBAL_MAX_POOL: infer_global_pool(c, &x, o); return;
    /* reductions */
    case DRK_OP_REDUCE_SUM: case DRK_OP_REDUCE_MEAN: case DRK_OP_REDUCE_MAX: case DRK_OP_REDUCE_MIN:
    case DRK_OP_REDUCE_PROD: case DRK_OP_REDUCE_L2: case DRK_OP_REDUCE_SUM_SQUARE: case DRK_OP_REDUCE_LOG_SUM_EXP:
      infer_reduce(c, n, &x, &o->s[0]);
      return;
    case DRK_OP_ARG_MAX: case DRK_OP_ARG_MIN: infer_arg_reduce(c, n, &x, o); return;
    case DRK_OP_TOP_K: infer_top_k(c, n, &x, o); return;
    /* normalizations (and other ops whose result has the input's shape) */
    case DRK_OP_BATCH_NORMALIZATION: case DRK_OP_INSTANCE_NORMALIZATION: case DRK_OP_GROUP_NORMALIZATION:
    case DRK_OP_SOFTMAX: case DRK_OP_LOG_SOFTMAX: case DRK_OP_CUM_SUM: case DRK_OP_TRILU:
    case DRK_OP_SCATTER_ND: case DRK_OP_IDENTITY:
      infer_same_shape(c, n, &x, o);
      return;
    case DRK_OP_LAYER_NORMALIZATION: infer_layer_norm(c, n, &x, o); return;
    case DRK_OP_DROPOUT: infer_dropout(n, &x, o); return;
    /* shape and data movement */
    case DRK_OP_RESHAPE: infer_reshape(c, n, &x, o); return;
    case DRK_OP_FLATTEN: infer_flatten(c, n, &x, o); return;
    case DRK_OP_SQUEEZE: case DRK_OP_UNSQUEEZE: infer_squeeze(c, n, &x, o); return;
    case DRK_OP_TRANSPOSE: infer_transpose(c, n, &x, o); return;
    case DRK_OP_CONCAT: infer_concat(c, n, &x, o); return;
    case DRK_OP_SPLIT: infer_split(c, n, &x, o); return;
    case DRK_OP_SLICE: infer_slice(c, n, &x, o); return;
    case DRK_OP_GATHER: infer_gather(c, n, &x, o); return;
    case DRK_OP_GATHER_ELEMENTS: infer_gather_elements(c, n, &x, o); return;
    case DRK_OP_GATHER_ND: infer_gather_nd(c, n, &x, o); return;
    case DRK_OP_EXPAND: infer_expand(c, n, &x, o); return;
    case DRK_OP_TILE: infer_tile(c, n, &x, o); return;
    case DRK_OP_PAD: infer_pad(c, n, &x, o); return;
    case DRK_OP_RESIZE: infer_resize(c, n, &x, o); return;
    case DRK_OP_DEPTH_TO_SPACE: case DRK_OP_SPACE_TO_DEPTH: infer_depth_space(c, n, &x, o); return;
    /* shape tensors and generators */
    case DRK_OP_ONE_HOT: infer_one_hot(c, n, &x, o); return;
    case DRK_OP_SHAPE: infer_shape(c, n, &x, o); return;
    case DRK_OP_SIZE: infer_size(c, n, &x, o); return;
    case DRK_OP_CONSTANT_OF_SHAPE: infer_constant_of_shape(c, n, o); return;
    case DRK_OP_RANGE: infer_range(c, n, o); return;
    default:
      return; /* an op added to graph_ops.def without a rule here: results stay unknown */
  }
}

/* Elementwise integer arithmetic on tracked contents: keeps shape computations such as
 * Gather(Shape) * 2 or Div(hidden, heads) known; symbols survive x*1, x+0, x-0, x/1. */
static void track_arith(ictx_t *c, const drk_node_t *n) {
  drk_op_t op = n->op;
  if (op != DRK_OP_ADD && op != DRK_OP_SUB && op != DRK_OP_MUL && op != DRK_OP_DIV && op != DRK_OP_CAST &&
      op != DRK_OP_MAX && op != DRK_OP_MIN)
    return;
  if (!drk_dtype_is_int(n->outputs[0]->dtype)) return;
  if (op == DRK_OP_CAST) {
    const known_t *k = get_known(c, in(n, 0));
    if (k && in(n, 0)->kind != DRK_VALUE_CONST) set_known(c, n->outputs[0], k);
    return;
  }
  if (n->n_inputs != 2) return;
  const known_t *a = get_known(c, in(n, 0)), *b = get_known(c, in(n, 1));
  if (!a || !b) return;
  if (in(n, 0)->kind == DRK_VALUE_CONST && in(n, 1)->kind == DRK_VALUE_CONST) return;
  int len = a->n > b->n ? a->n : b->n;
  if ((a->n != len && a->n != 1) || (b->n != len && b->n != 1)) return;
  known_t r;
  r.n = len;
  for (int i = 0; i < len; i++) {
    drk_dim_t x = a->e[a->n == 1 ? 0 : i], y = b->e[b->n == 1 ? 0 : i];
    int64_t xv, yv;
    bool xs = kel_static(x, &xv), ys = kel_static(y, &yv);
    drk_dim_t z = dim_unk();
    if (xs && ys) {
      switch (op) {
        case DRK_OP_ADD: if (!__builtin_add_overflow(xv, yv, &xv)) z = kel_int(xv); break;
        case DRK_OP_SUB: if (!__builtin_sub_overflow(xv, yv, &xv)) z = kel_int(xv); break;
        case DRK_OP_MUL: if (!__builtin_mul_overflow(xv, yv, &xv)) z = kel_int(xv); break;
        case DRK_OP_DIV:
          if (yv != 0 && !(xv == INT64_MIN && yv == -1)) {
            int64_t q = xv / yv;
            if ((xv % yv != 0) && ((xv < 0) != (yv < 0))) q--; /* ONNX integer Div floors */
            z = kel_int(q);
          }
          break;
        case DRK_OP_MAX: z = kel_int(xv > yv ? xv : yv); break;
        case DRK_OP_MIN: z = kel_int(xv < yv ? xv : yv); break;
        default: break;
      }
    } else if (kel_is_sym(x) && ys) {
      if ((yv == 0 && (op == DRK_OP_ADD || op == DRK_OP_SUB)) || (yv == 1 && (op == DRK_OP_MUL || op == DRK_OP_DIV))) z = x;
      else z = scaled(c, x, op, yv);
    } else if (xs && kel_is_sym(y)) {
      if ((xv == 0 && op == DRK_OP_ADD) || (xv == 1 && op == DRK_OP_MUL)) z = y;
      else if (op == DRK_OP_MUL) z = scaled(c, y, op, xv);
    } else if (kel_is_sym(x) && kel_is_sym(y) && op == DRK_OP_MUL) {
      factors_t f = {.k = 1};
      if (dim_factors(x, &f) && dim_factors(y, &f)) z = factors_dim(c, &f); /* batch * seq */
    } else if (kel_is_sym(x) && kel_is_sym(y) && strcmp(x.sym, y.sym) == 0 && (op == DRK_OP_MAX || op == DRK_OP_MIN)) {
      z = x;
    }
    r.e[i] = z;
  }
  set_known(c, n->outputs[0], &r);
}

/* Shape vectors passed through the TorchScript exporter's plumbing keep their contents: a 1-D
 * Reshape (Reshape(Concat(...), [-1])), Equal against constants (a dim is never negative: the
 * `shape == -1` test of its expand), and Where selecting between tracked vectors. */
static void track_shape_ops(ictx_t *c, const drk_node_t *n) {
  drk_op_t op = n->op;
  const drk_value_t *y = n->outputs[0];
  if (!y || (op != DRK_OP_RESHAPE && op != DRK_OP_EQUAL && op != DRK_OP_WHERE)) return;
  if (op == DRK_OP_RESHAPE) {
    const known_t *k = get_known(c, in(n, 0));
    if (k && in(n, 0)->kind != DRK_VALUE_CONST && y->shape.rank >= 0 && y->shape.rank <= 1 &&
        drk_shape_numel(&y->shape) == k->n)
      set_known(c, y, k);
    return;
  }
  int base = op == DRK_OP_WHERE ? 1 : 0;
  const known_t *a = get_known(c, in(n, base)), *b = get_known(c, in(n, base + 1));
  const known_t *cond = op == DRK_OP_WHERE ? get_known(c, in(n, 0)) : NULL;
  if (!a || !b || (op == DRK_OP_WHERE && !cond)) return;
  if (in(n, base)->kind == DRK_VALUE_CONST && in(n, base + 1)->kind == DRK_VALUE_CONST &&
      (!cond || in(n, 0)->kind == DRK_VALUE_CONST))
    return; /* constant folding's */
  int len = a->n > b->n ? a->n : b->n;
  if (cond && cond->n > len) len = cond->n;
  if ((a->n != len && a->n != 1) || (b->n != len && b->n != 1) || (cond && cond->n != len && cond->n != 1)) return;
  known_t r;
  r.n = len;
  for (int i = 0; i < len; i++) {
    drk_dim_t x = a->e[a->n == 1 ? 0 : i], z = b->e[b->n == 1 ? 0 : i], res = dim_unk();
    int64_t xv = 0, zv = 0, cv = 0;
    bool xs = kel_static(x, &xv), zs = kel_static(z, &zv);
    if (op == DRK_OP_EQUAL) {
      if (xs && zs) res = kel_int(xv == zv);
      else if (kel_is_sym(x) && kel_is_sym(z) && !strcmp(x.sym, z.sym)) res = kel_int(1);
      else if ((kel_is_sym(x) && zs && zv < 0) || (kel_is_sym(z) && xs && xv < 0)) res = kel_int(0);
    } else if (kel_static(cond->e[cond->n == 1 ? 0 : i], &cv)) {
      res = cv ? x : z;
    }
    r.e[i] = res;
  }
  set_known(c, y, &r);
}

/* Writes the inferred dtype/shape into v, checking it against what v already says. */
static void commit(ictx_t *c, drk_value_t *v, drk_dtype_t dt, const shp_t *s) {
  const drk_shape_t *ex = &v->shape;
  if (ex->rank >= 0 && v->dtype != dt) {
    err(c, "result '%s' is declared %s but the op gives %s", v->name, drk_dtype_name(v->dtype), drk_dtype_name(dt));
    return;
  }
  v->dtype = dt;
  if (s->rank < 0) return; /* keep what was declared */
  int64_t total = 1;
  for (int i = 0; i < s->rank; i++)
    if (is_st(s->d[i]) && !drk_numel_mul(&total, s->d[i].size)) {
      err(c, "result '%s' would have shape %s: more than 2^56 elements", v->name, fmt_shp(s));
      return;
    }
  if (ex->rank >= 0 && ex->rank != s->rank) {
    shp_t e = shp_of(v);
    err(c, "result '%s' is declared with shape %s but the op gives %s", v->name, fmt_shp(&e), fmt_shp(s));
    return;
  }
  drk_dim_t dims[MAXR];
  bool same = ex->rank == s->rank;
  for (int i = 0; i < s->rank; i++) {
    drk_dim_t nd = s->d[i], old = ex->rank >= 0 ? ex->dims[i] : dim_unk();
    bool old_known = old.sym || old.size >= 0;
    if (is_unk(nd)) {
      if (old_known) nd = old;
      else nd.sym = drk_arena_printf(c->g->arena, DRK_FRESH_SYM_PREFIX "%u_%d", v->id, i);
    } else if (is_st(nd)) {
      if (old_known && !old.sym && old.size != nd.size) {
        shp_t e = shp_of(v);
        err(c, "result '%s' is declared with shape %s but the op gives %s", v->name, fmt_shp(&e), fmt_shp(s));
        return;
      }
    } else if (old_known && !old.sym) {
      nd = old; /* a declared static size refines a symbol */
    }
    dims[i] = nd;
    if (!old_known || !dim_same(old, nd)) same = false;
  }
  if (!same) v->shape = drk_graph_shape(c->g, s->rank, dims);
}

bool drk_pass_infer_shapes(drk_graph_t *g, drk_diag_t *d) {
  ictx_t c = {0};
  c.g = g;
  c.d = d;
  c.ok = true;
  c.scratch = drk_arena_create();
  c.n_known = g->next_value_id;
  c.known = drk_arena_alloc(c.scratch, sizeof(known_t *) * (c.n_known + 1));
  outs_t *o = drk_arena_alloc(c.scratch, sizeof *o);
  for (size_t i = 0; i < g->n_nodes; i++) {
    drk_node_t *n = g->nodes[i];
    if (n->dead) continue;
    c.node = n;
    c.node_failed = false;
    if (n->n_outputs > MAXOUT) {
      err(&c, "too many outputs (%d)", n->n_outputs);
      continue;
    }
    infer_node(&c, n, o);
    if (c.node_failed) continue;
    for (int j = 0; j < n->n_outputs && !c.node_failed; j++)
      if (n->outputs[j]) commit(&c, n->outputs[j], o->dt[j], &o->s[j]);
    if (!c.node_failed) track_arith(&c, n), track_shape_ops(&c, n);
  }
  drk_arena_destroy(c.scratch);
  return c.ok;
}
