/* Lowering of ConvTranspose: 1 or more spatial dims, strides, dilations, pads, output_padding,
 * output_shape, auto_pad (NOTSET, SAME_UPPER, SAME_LOWER, VALID), group, bias; f64, f32, f16,
 * bf16. The geometry (pads from output_shape or auto_pad) is the interpreter's
 * (ir/interp_mm.c, conv_geo), and the result must have the shape it computes.
 *
 * Direct formulation, a flat kernel over the output Y[n, m, o...] (W is [C, M/group, k...]):
 * each element unravels into (n, m, o...); group g = m / Mg; a `for` over the kernel taps
 * (scalar index unravelled into k...) computes per spatial dim t = o + pad_begin - k*dilation,
 * which hits input position i = t / stride when t >= 0, t % stride == 0 and i < in; an inner
 * `for` over the group's Cg input channels loads X[n, g*Cg + ci, i...] and W[g*Cg + ci, m % Mg,
 * k...] under that mask and accumulates (f32 for f32/f16/bf16, f64 for f64); bias B[m] is
 * added at the end.
 *
 * Cost: numel(Y) * Cg * prod(k) multiply-adds, of which only about 1 / prod(stride) hit (the
 * others are masked off), loads gathered with no shared-memory reuse: a correctness-first
 * kernel (an implicit-GEMM form like Conv's is later work).
 *
 * Requires: static shapes. */
#include <string.h>

#include "lower/lower_internal.h"

#define BIN(op, a, b) lw_bin(c, DRK_TOP_##op, (a), (b))

enum { CT_MAXS = LW_MAX_RANK - 2 };

static bool ct_float(drk_dtype_t t) { return t == DRK_DT_F64 || t == DRK_DT_F32 || t == DRK_DT_F16 || t == DRK_DT_BF16; }

bool drk_lower_conv_transpose_supported(const drk_node_t *n, const char **why) {
  drk_dtype_t t = n->inputs[0]->dtype;
  if (!ct_float(t)) { *why = "dtype"; return false; }
  for (int i = 1; i < n->n_inputs; i++)
    if (n->inputs[i] && n->inputs[i]->dtype != t) { *why = "mixed dtypes"; return false; }
  return true;
}

typedef struct ctgeo {
  int r;
  int64_t in[CT_MAXS], k[CT_MAXS], out[CT_MAXS], s[CT_MAXS], d[CT_MAXS], pb[CT_MAXS], op[CT_MAXS];
  int64_t group;
} ctgeo_t;

static bool attr_vec(drk_lctx_t *c, const char *name, int r, int64_t *out, int64_t dflt) {
  size_t n;
  const int64_t *v = drk_node_attr_ints(c->node, name, &n);
  for (int i = 0; i < r; i++) out[i] = dflt;
  if (!v) return true;
  if ((int)n != r) return lw_err(c, "attribute '%s' has %zu values, expected %d", name, n, r);
  for (int i = 0; i < r; i++) out[i] = v[i];
  return true;
}

/* ConvTranspose geometry as the interpreter computes it (conv_geo with transposed). */
static bool ct_geo(drk_lctx_t *c, const drk_value_t *x, const drk_value_t *w, ctgeo_t *g) {
  memset(g, 0, sizeof *g);
  if (x->shape.rank < 3 || w->shape.rank != x->shape.rank)
    return lw_err(c, "X and W must have the same rank >= 3 (got %d and %d)", x->shape.rank, w->shape.rank);
  int r = g->r = x->shape.rank - 2;
  g->group = drk_node_attr_int(c->node, "group", 1);
  if (g->group <= 0) return lw_err(c, "group must be positive");
  for (int i = 0; i < r; i++) {
    g->in[i] = x->shape.dims[2 + i].size;
    g->k[i] = w->shape.dims[2 + i].size;
  }
  size_t nks;
  const int64_t *ks = drk_node_attr_ints(c->node, "kernel_shape", &nks);
  if (ks) {
    if ((int)nks != r) return lw_err(c, "kernel_shape has %zu values, expected %d", nks, r);
    for (int i = 0; i < r; i++)
      if (ks[i] != g->k[i]) return lw_err(c, "kernel_shape disagrees with W");
  }
  int64_t pads[2 * CT_MAXS];
  if (!attr_vec(c, "strides", r, g->s, 1) || !attr_vec(c, "dilations", r, g->d, 1) ||
      !attr_vec(c, "pads", 2 * r, pads, 0) || !attr_vec(c, "output_padding", r, g->op, 0))
    return false;
  const char *ap = drk_node_attr_string(c->node, "auto_pad", "NOTSET");
  bool upper = !strcmp(ap, "SAME_UPPER"), lower = !strcmp(ap, "SAME_LOWER"), valid = !strcmp(ap, "VALID");
  if (!upper && !lower && !valid && strcmp(ap, "NOTSET")) return lw_err(c, "auto_pad '%s' not supported", ap);
  size_t nos;
  const int64_t *os = drk_node_attr_ints(c->node, "output_shape", &nos);
  if (os && (int)nos != r && (int)nos != r + 2) return lw_err(c, "output_shape has %zu values, expected %d", nos, r);
  if (os && (int)nos == r + 2) os += 2;
  for (int i = 0; i < r; i++) {
    if (g->s[i] <= 0 || g->d[i] <= 0) return lw_err(c, "strides and dilations must be positive");
    if (pads[i] < 0 || pads[r + i] < 0) return lw_err(c, "pads must be non-negative");
    int64_t ek = g->d[i] * (g->k[i] - 1) + 1;
    if (os || upper || lower) {
      int64_t want = os ? os[i] : g->in[i] * g->s[i];
      int64_t tot = g->s[i] * (g->in[i] - 1) + g->op[i] + ek - want;
      if (tot < 0) tot = 0;
      g->pb[i] = lower ? tot - tot / 2 : tot / 2;
      g->out[i] = want;
    } else {
      g->pb[i] = valid ? 0 : pads[i];
      int64_t pe = valid ? 0 : pads[r + i];
      g->out[i] = g->s[i] * (g->in[i] - 1) + g->op[i] + ek - g->pb[i] - pe;
      if (g->out[i] < 0) return lw_err(c, "negative output size");
    }
  }
  return true;
}

bool drk_lower_conv_transpose(drk_lctx_t *c) {
  const drk_node_t *n = c->node;
  const drk_value_t *x = n->inputs[0], *w = n->inputs[1], *b = n->n_inputs > 2 ? n->inputs[2] : NULL, *y = n->outputs[0];
  ctgeo_t g;
  if (!ct_geo(c, x, w, &g)) return false;
  int r = g.r;
  int64_t N = x->shape.dims[0].size, C = x->shape.dims[1].size;
  if (w->shape.dims[0].size != C || C % g.group)
    return lw_err(c, "W's first dimension (%lld) must equal X's channels (%lld), divisible by group=%lld",
                  (long long)w->shape.dims[0].size, (long long)C, (long long)g.group);
  int64_t Mg = w->shape.dims[1].size, M = Mg * g.group, Cg = C / g.group;
  if (b && (b->shape.rank != 1 || b->shape.dims[0].size != M)) return lw_err(c, "B must be 1-D of size %lld", (long long)M);
  bool same = y->shape.rank == r + 2 && y->shape.dims[0].size == N && y->shape.dims[1].size == M;
  for (int i = 0; same && i < r; i++) same = y->shape.dims[2 + i].size == g.out[i];
  if (!same) return lw_err(c, "result '%s' does not have the shape the ConvTranspose attributes give", y->name);
  int64_t KS = 1, OS = 1, IS = 1;
  for (int i = 0; i < r; i++) {
    KS *= g.k[i];
    OS *= g.out[i];
    IS *= g.in[i];
  }
  int64_t big = lw_numel(x) > lw_numel(y) ? lw_numel(x) : lw_numel(y);
  if (lw_numel(w) > big) big = lw_numel(w);
  lw_kernel_begin(c, lw_index_dtype_for(big));
  tv_t *px = lw_param_buf(c, x, "x");
  tv_t *pw = lw_param_buf(c, w, "w");
  tv_t *pb = b ? lw_param_buf(c, b, "bias") : NULL;
  tv_t *py = lw_param_buf(c, y, "y");
  lw_flat_t f;
  lw_flat_begin(c, lw_numel(y), &f);
  drk_dtype_t at = lw_compute_dtype(x->dtype);
  /* output coordinates: (n*M + m, o...) */
  int64_t od[CT_MAXS + 1];
  od[0] = N * M;
  for (int i = 0; i < r; i++) od[1 + i] = g.out[i];
  tv_t *nm = OS > 1 ? BIN(DIV, f.offs, lw_ci(c, f.offs, OS)) : f.offs;
  tv_t *nn = M > 1 ? BIN(DIV, nm, lw_ci(c, nm, M)) : nm;
  tv_t *m = M > 1 ? BIN(REM, nm, lw_ci(c, nm, M)) : lw_ci(c, nm, 0);
  tv_t *gi = Mg > 1 ? BIN(DIV, m, lw_ci(c, m, Mg)) : m;
  tv_t *mm = Mg > 1 ? BIN(REM, m, lw_ci(c, m, Mg)) : lw_ci(c, m, 0);
  /* X[n, g*Cg, 0...] and W[g*Cg, m % Mg, 0...] */
  tv_t *xbase = BIN(ADD, BIN(MUL, nn, lw_ci(c, nn, C * IS)), BIN(MUL, gi, lw_ci(c, gi, Cg * IS)));
  tv_t *wbase = BIN(ADD, BIN(MUL, gi, lw_ci(c, gi, Cg * Mg * KS)), BIN(MUL, mm, lw_ci(c, mm, KS)));
  tv_t *t0[CT_MAXS];
  for (int i = 0; i < r; i++) {
    tv_t *o = lw_coord(c, f.offs, r + 1, od, 1 + i);
    t0[i] = g.pb[i] ? BIN(ADD, o, lw_ci(c, o, g.pb[i])) : o;
  }
  tv_t *acc0 = lw_cdt(c, f.offs, at, 0);
  drk_tile_op_t *kl = drk_tile_build_for_begin(&c->b, lw_sci(c, c->it, 0), lw_sci(c, c->it, KS), lw_sci(c, c->it, 1), 1, &acc0);
  tv_t *kk = kl->regions[0]->args[0], *acc = kl->regions[0]->args[1];
  tv_t *hit = f.mask, *xoff = xbase;
  int64_t istr = 1;
  for (int i = r - 1; i >= 0; i--) {
    tv_t *kc = lw_coord(c, kk, r, g.k, i);
    tv_t *tt = BIN(SUB, t0[i], lw_splat(c, BIN(MUL, kc, lw_sci(c, c->it, g.d[i])), &f.fr));
    hit = BIN(AND, hit, lw_cmp(c, "ge", tt, lw_ci(c, tt, 0)));
    tv_t *ii = tt;
    if (g.s[i] > 1) {
      hit = BIN(AND, hit, lw_cmp(c, "eq", BIN(REM, tt, lw_ci(c, tt, g.s[i])), lw_ci(c, tt, 0)));
      ii = BIN(DIV, tt, lw_ci(c, tt, g.s[i]));
    }
    hit = BIN(AND, hit, lw_cmp(c, "lt", ii, lw_ci(c, ii, g.in[i])));
    xoff = BIN(ADD, xoff, istr == 1 ? ii : BIN(MUL, ii, lw_ci(c, ii, istr)));
    istr *= g.in[i];
  }
  tv_t *woff = BIN(ADD, wbase, lw_splat(c, kk, &f.fr));
  drk_tile_op_t *cl = drk_tile_build_for_begin(&c->b, lw_sci(c, c->it, 0), lw_sci(c, c->it, Cg), lw_sci(c, c->it, 1), 1, &acc);
  tv_t *ci = cl->regions[0]->args[0], *acc2 = cl->regions[0]->args[1];
  tv_t *xo = BIN(ADD, xoff, lw_splat(c, BIN(MUL, ci, lw_sci(c, c->it, IS)), &f.fr));
  tv_t *wo = BIN(ADD, woff, lw_splat(c, BIN(MUL, ci, lw_sci(c, c->it, Mg * KS)), &f.fr));
  tv_t *xv = lw_cast(c, lw_load(c, px, xo, hit, 0), at);
  tv_t *wv = lw_cast(c, lw_load(c, pw, wo, hit, 0), at);
  acc2 = BIN(ADD, acc2, BIN(MUL, xv, wv));
  acc = drk_tile_build_for_end(&c->b, 1, &acc2)->results[0];
  acc = drk_tile_build_for_end(&c->b, 1, &acc)->results[0];
  if (pb) acc = BIN(ADD, acc, lw_cast(c, lw_load(c, pb, m, f.mask, 0), at));
  lw_store(c, py, f.offs, acc, f.mask);
  lw_flat_end(c, &f);
  return true;
}
