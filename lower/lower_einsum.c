/* Lowering of Einsum: every equation the interpreter (ir/interp_mm.c) takes: explicit or
 * implicit output (implicit: the '...' dims, then the labels seen once, a-z then A-Z),
 * labels repeated within an operand (diagonals, traces), '...' batch dims broadcast between
 * operands (a size-1 dim has stride 0), labels summed away; float (f64, f32, f16, bf16)
 * and integer (i64, i32, i16, i8, u8) operands of one dtype.
 *
 * One generic flat kernel over the output: each element unravels over the output labels
 * into one offset per operand (the label's stride in that operand, summed over its
 * repetitions); a `for` over the product T of the summed labels' sizes unravels its scalar
 * (uniform) induction variable over those labels into one more offset per operand, loads
 * one element of each operand and accumulates their product: in f32 for f32/f16/bf16, f64
 * for f64, i64 for integers (stored with a truncating cast, as the interpreter's int64 store
 * does; it accumulates in f64, exact while sums stay below 2^53).
 *
 * Cost: numel(output) * T multiply-adds, each with one gathered load per operand and no
 * reuse through shared memory: fine for the small contractions Einsum usually carries
 * (transposes, diagonals, traces, batched dot products of modest size); a large
 * matmul-shaped Einsum is far slower than MatMul (rewriting those to MatMul is later work).
 *
 * Requires: static shapes. The output shape must be the one the interpreter computes. */
#include <string.h>

#include "lower/lower_internal.h"
#include "ir/einsum.h"

#define BIN(op, a, b) lw_bin(c, DRK_TOP_##op, (a), (b))

enum { EMAX = 64, EIN = 16 };

static bool einsum_dtype(drk_dtype_t t) {
  switch (t) {
  case DRK_DT_F64: case DRK_DT_F32: case DRK_DT_F16: case DRK_DT_BF16:
  case DRK_DT_I64: case DRK_DT_I32: case DRK_DT_I16: case DRK_DT_I8: case DRK_DT_U8:
    return true;
  default: return false;
  }
}

bool drk_lower_einsum_supported(const drk_node_t *n, const char **why) {
  for (int i = 0; i < n->n_inputs; i++)
    if (!n->inputs[i] || !einsum_dtype(n->inputs[i]->dtype) || n->inputs[i]->dtype != n->inputs[0]->dtype) {
      *why = "dtype";
      return false;
    }
  return true;
}


/* The index space: sizes of labels (ids 0..51 letters, 52.. ellipsis dims; -1 unused),
 * strides of each label in each operand, the output labels in order. */
typedef struct espace {
  int nin, nout;
  int64_t size[EMAX];
  int64_t st[EIN][EMAX];
  int out[EMAX];
} espace_t;

static bool parse_equation(drk_lctx_t *c, const char *eq, espace_t *S) {
  const drk_node_t *n = c->node;
  int nin = S->nin = n->n_inputs;
  if (nin < 1 || nin > EIN) return lw_err(c, "Einsum with %d operands (1..%d lowered)", nin, EIN);
  const char *arrow = strstr(eq, "->");
  const char *lhs_end = arrow ? arrow : eq + strlen(eq);
  int lab[EIN][EMAX], nl[EIN];
  bool ell[EIN];
  const char *p = eq;
  int t = 0;
  for (;;) {
    const char *comma = memchr(p, ',', (size_t)(lhs_end - p));
    const char *e = comma ? comma : lhs_end;
    if (t >= nin) return lw_err(c, "equation '%s' has more terms than the %d inputs", eq, nin);
    nl[t] = drk_einsum_parse_term(p, e, lab[t], EMAX, &ell[t]);
    if (nl[t] < 0) return lw_err(c, "bad term in equation '%s'", eq);
    t++;
    if (!comma) break;
    p = comma + 1;
  }
  if (t != nin) return lw_err(c, "equation '%s' has %d terms, %d inputs given", eq, t, nin);
  int erank = 0;
  for (int i = 0; i < EMAX; i++) S->size[i] = -1;
  memset(S->st, 0, sizeof S->st);
  int cnt[EMAX] = {0};
  for (int i = 0; i < nin; i++) {
    int named = nl[i] - (ell[i] ? 1 : 0), rank = n->inputs[i]->shape.rank;
    if (named > rank || (!ell[i] && named != rank))
      return lw_err(c, "operand %d has rank %d, the equation says %d", i, rank, named);
    if (rank - named > erank) erank = rank - named;
  }
  if (52 + erank > EMAX) return lw_err(c, "ellipsis of rank %d too large", erank);
  for (int i = 0; i < nin; i++) {
    const drk_value_t *x = n->inputs[i];
    int64_t xs[LW_MAX_RANK];
    lw_strides(x, xs);
    int er = x->shape.rank - (nl[i] - (ell[i] ? 1 : 0)), ax = 0;
    for (int j = 0; j < nl[i]; j++) {
      if (lab[i][j] == -2) {
        for (int q = 0; q < er; q++, ax++) {
          int id = 52 + (erank - er) + q;
          int64_t dsz = x->shape.dims[ax].size;
          if (S->size[id] < 0 || S->size[id] == 1) S->size[id] = dsz;
          else if (dsz != 1 && dsz != S->size[id]) return lw_err(c, "ellipsis dimensions do not broadcast");
          if (dsz != 1) S->st[i][id] += xs[ax];
          cnt[id]++;
        }
        continue;
      }
      int id = lab[i][j];
      int64_t dsz = x->shape.dims[ax].size;
      if (S->size[id] >= 0 && S->size[id] != dsz)
        return lw_err(c, "label '%c' has sizes %lld and %lld", id < 26 ? 'a' + id : 'A' + id - 26,
                      (long long)S->size[id], (long long)dsz);
      S->size[id] = dsz;
      S->st[i][id] += xs[ax];
      cnt[id]++;
      ax++;
    }
  }
  for (int id = 52; id < 52 + erank; id++)
    if (S->size[id] < 0) S->size[id] = 1;
  int no = 0;
  if (arrow) {
    bool oell;
    int ol[EMAX];
    int k = drk_einsum_parse_term(arrow + 2, arrow + 2 + strlen(arrow + 2), ol, EMAX, &oell);
    if (k < 0) return lw_err(c, "bad output term in '%s'", eq);
    for (int j = 0; j < k; j++) {
      if (ol[j] == -2) {
        for (int q = 0; q < erank; q++) S->out[no++] = 52 + q;
        continue;
      }
      if (S->size[ol[j]] < 0) return lw_err(c, "output label not in any input in '%s'", eq);
      for (int q = 0; q < no; q++)
        if (S->out[q] == ol[j]) return lw_err(c, "output label repeated in '%s'", eq);
      S->out[no++] = ol[j];
    }
  } else {
    for (int q = 0; q < erank; q++) S->out[no++] = 52 + q;
    for (int id = 0; id < 52; id++)
      if (cnt[id] == 1) S->out[no++] = id;
  }
  S->nout = no;
  return true;
}

bool drk_lower_einsum(drk_lctx_t *c) {
  const drk_node_t *n = c->node;
  const drk_value_t *y = n->outputs[0];
  const char *eq = drk_node_attr_string(n, "equation", NULL);
  if (!eq) return lw_err(c, "attribute 'equation' is required");
  espace_t S;
  if (!parse_equation(c, eq, &S)) return false;
  /* the output must have the interpreter's shape */
  bool same = y->shape.rank == S.nout;
  for (int k = 0; same && k < S.nout; k++) same = y->shape.dims[k].size == S.size[S.out[k]];
  if (!same) return lw_err(c, "result '%s' does not have the shape equation '%s' gives", y->name, eq);
  int nin = S.nin;
  bool isout[EMAX] = {false};
  int64_t od[EMAX], ost[EIN][EMAX];
  for (int k = 0; k < S.nout; k++) {
    isout[S.out[k]] = true;
    od[k] = S.size[S.out[k]];
    for (int i = 0; i < nin; i++) ost[i][k] = S.st[i][S.out[k]];
  }
  /* summed labels, in id order (the interpreter's loop order) */
  int ns = 0;
  int64_t sd[EMAX], sst[EIN][EMAX], T = 1;
  for (int id = 0; id < EMAX; id++) {
    if (S.size[id] < 0 || isout[id]) continue;
    sd[ns] = S.size[id];
    for (int i = 0; i < nin; i++) sst[i][ns] = S.st[i][id];
    T *= S.size[id];
    ns++;
  }
  if (S.nout > LW_MAX_RANK * 2 || ns > LW_MAX_RANK * 2)
    return lw_err(c, "equation '%s' has too many labels to lower (at most %d output and %d summed)", eq,
                  LW_MAX_RANK * 2, LW_MAX_RANK * 2);
  int64_t big = lw_numel(y) > T ? lw_numel(y) : T;
  for (int i = 0; i < nin; i++)
    if (lw_numel(n->inputs[i]) > big) big = lw_numel(n->inputs[i]);
  lw_kernel_begin(c, lw_index_dtype_for(big));
  tv_t *px[EIN];
  for (int i = 0; i < nin; i++) px[i] = lw_param_buf(c, n->inputs[i], drk_arena_printf(c->m->arena, "x%d", i));
  tv_t *py = lw_param_buf(c, y, "y");
  lw_flat_t f;
  lw_flat_begin(c, lw_numel(y), &f);
  drk_dtype_t dt = n->inputs[0]->dtype;
  drk_dtype_t at = drk_dtype_is_float(dt) ? lw_compute_dtype(dt) : DRK_DT_I64;
  tv_t *base[EIN];
  for (int i = 0; i < nin; i++) base[i] = lw_affine(c, f.offs, S.nout, od, ost[i], 0);
  tv_t *acc0 = lw_cdt(c, f.offs, at, 0);
  drk_tile_op_t *loop = NULL;
  tv_t *iv = NULL, *acc = acc0;
  if (ns > 0) {
    loop = drk_tile_build_for_begin(&c->b, lw_sci(c, c->it, 0), lw_sci(c, c->it, T), lw_sci(c, c->it, 1), 1, &acc0);
    iv = loop->regions[0]->args[0];
    acc = loop->regions[0]->args[1];
  }
  tv_t *prod = NULL;
  for (int i = 0; i < nin; i++) {
    tv_t *off = base[i];
    if (iv) off = BIN(ADD, off, lw_splat(c, lw_affine(c, iv, ns, sd, sst[i], 0), &f.fr));
    tv_t *v = lw_cast(c, lw_load(c, px[i], off, f.mask, 0), at);
    prod = prod ? BIN(MUL, prod, v) : v;
  }
  acc = BIN(ADD, acc, prod);
  if (loop) acc = drk_tile_build_for_end(&c->b, 1, &acc)->results[0];
  lw_store(c, py, f.offs, acc, f.mask);
  lw_flat_end(c, &f);
  return true;
}
