/* Lowering of MatMul (batched, with batch broadcast, 1-D operands), Gemm and Conv (implicit
 * GEMM, 1-3 spatial dims, groups, dilations, pads, auto_pad) to tiled `dot` kernels.
 *
 * One program computes a BLOCK_M x BLOCK_N tile of one batch (grid axis 2: batch or conv
 * group). A loop over K in BLOCK_K steps carries the accumulator: masked global loads in a
 * blocked layout, staged through shared memory (local_store, barrier, local_load into the
 * dot_op layouts), then `dot`. f16/bf16 use mma_sync (f32 accumulator), f32 fma (or
 * mma_sync as tf32 when allowed), f64 fma in f64. The epilogue applies alpha/beta/C (Gemm)
 * or the bias (Conv) and stores with masks.
 *
 * Requires: static shapes. Guarantees: every edge is masked (any M, N, K). */
#include <string.h>

#define DRK_LOWER_INTERNAL
#include "lower_to_tile.h"

#define BIN(op, a, b) lw_bin(c, DRK_TOP_##op, (a), (b))

bool drk_lower_matmul_supported(const drk_node_t *n, const char **why) {
  if (n->op != DRK_OP_MATMUL && n->op != DRK_OP_GEMM && n->op != DRK_OP_CONV) { *why = "op not lowered"; return false; }
  drk_dtype_t t = n->inputs[0]->dtype;
  if (t != DRK_DT_F32 && t != DRK_DT_F16 && t != DRK_DT_BF16 && t != DRK_DT_F64) { *why = "dtype"; return false; }
  for (int i = 1; i < n->n_inputs; i++)
    if (n->inputs[i] && n->inputs[i]->dtype != t) { *why = "mixed dtypes"; return false; }
  return true;
}

typedef struct mm {
  drk_dtype_t t;
  int64_t M, N, K, batch;
  int nb;
  int64_t bd[LW_MAX_RANK], bas[LW_MAX_RANK], bbs[LW_MAX_RANK];
  int64_t sam, sak, sbk, sbn;
  /* Gemm */
  double alpha, beta;
  const drk_value_t *cval;
  /* Conv */
  bool conv;
  int nsp;
  int64_t C, OC, G, Nb, I[3], O[3], Kk[3], st[3], dil[3], pad[3], PI, PO, KS;
} mm_t;

static bool conv_setup(drk_lctx_t *c, mm_t *s) {
  const drk_node_t *n = c->node;
  const drk_value_t *x = n->inputs[0], *w = n->inputs[1], *y = n->outputs[0];
  int r = x->shape.rank;
  s->nsp = r - 2;
  if (s->nsp < 1 || s->nsp > 3) return lw_err(c, "Conv with %d spatial dims is not lowered for GPU yet", s->nsp);
  s->conv = true;
  s->Nb = x->shape.dims[0].size;
  s->C = x->shape.dims[1].size;
  s->OC = w->shape.dims[0].size;
  s->G = drk_node_attr_int(n, "group", 1);
  if (s->G < 1 || s->C % s->G || s->OC % s->G) return lw_err(c, "bad group count");
  size_t cnt;
  const int64_t *strides = drk_node_attr_ints(n, "strides", &cnt);
  const int64_t *dils = drk_node_attr_ints(n, "dilations", &cnt);
  const int64_t *pads = drk_node_attr_ints(n, "pads", &cnt);
  const char *ap = drk_node_attr_string(n, "auto_pad", "NOTSET");
  s->PI = s->PO = s->KS = 1;
  for (int d = 0; d < s->nsp; d++) {
    s->I[d] = x->shape.dims[2 + d].size;
    s->O[d] = y->shape.dims[2 + d].size;
    s->Kk[d] = w->shape.dims[2 + d].size;
    s->st[d] = strides ? strides[d] : 1;
    s->dil[d] = dils ? dils[d] : 1;
    s->pad[d] = pads ? pads[d] : 0;
    if (strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0) {
      int64_t tot = (s->O[d] - 1) * s->st[d] + (s->Kk[d] - 1) * s->dil[d] + 1 - s->I[d];
      if (tot < 0) tot = 0;
      s->pad[d] = strcmp(ap, "SAME_UPPER") == 0 ? tot / 2 : tot - tot / 2;
    } else if (strcmp(ap, "VALID") == 0) {
      s->pad[d] = 0;
    }
    s->PI *= s->I[d];
    s->PO *= s->O[d];
    s->KS *= s->Kk[d];
  }
  s->M = s->Nb * s->PO;
  s->N = s->OC / s->G;
  s->K = (s->C / s->G) * s->KS;
  s->batch = s->G;
  s->sbk = 1; /* weights [OC, C/G, k...]: row oc of the group's [OC/G, K] matrix */
  s->sbn = s->K;
  return true;
}

static bool mm_setup(drk_lctx_t *c, mm_t *s) {
  const drk_node_t *n = c->node;
  memset(s, 0, sizeof *s);
  s->t = n->inputs[0]->dtype;
  s->batch = 1;
  if (n->op == DRK_OP_CONV) return conv_setup(c, s);
  const drk_value_t *a = n->inputs[0], *b = n->inputs[1], *y = n->outputs[0];
  if (n->op == DRK_OP_GEMM) {
    if (a->shape.rank != 2 || b->shape.rank != 2) return lw_err(c, "Gemm operands must be 2-D");
    bool ta = drk_node_attr_int(n, "transA", 0) != 0, tb = drk_node_attr_int(n, "transB", 0) != 0;
    s->M = a->shape.dims[ta ? 1 : 0].size;
    s->K = a->shape.dims[ta ? 0 : 1].size;
    s->N = b->shape.dims[tb ? 0 : 1].size;
    s->sam = ta ? 1 : s->K;
    s->sak = ta ? s->M : 1;
    s->sbk = tb ? 1 : s->N;
    s->sbn = tb ? s->K : 1;
    s->alpha = drk_node_attr_float(n, "alpha", 1.0);
    s->beta = drk_node_attr_float(n, "beta", 1.0);
    s->cval = n->n_inputs > 2 ? n->inputs[2] : NULL;
    return true;
  }
  int ra = a->shape.rank, rb = b->shape.rank;
  if (ra < 1 || rb < 1) return lw_err(c, "MatMul operands must have rank >= 1");
  s->K = a->shape.dims[ra - 1].size;
  s->M = ra >= 2 ? a->shape.dims[ra - 2].size : 1;
  s->N = rb >= 2 ? b->shape.dims[rb - 1].size : 1;
  s->sam = s->K;
  s->sak = 1;
  s->sbk = rb >= 2 ? s->N : 1;
  s->sbn = 1;
  /* batch dims: those of the output before M, N */
  int ry = y->shape.rank - (ra >= 2) - (rb >= 2);
  s->nb = ry;
  int64_t ast[LW_MAX_RANK], bst[LW_MAX_RANK];
  lw_strides(a, ast);
  lw_strides(b, bst);
  for (int i = 0; i < ry; i++) {
    s->bd[i] = y->shape.dims[i].size;
    s->batch *= s->bd[i];
    int ja = i - (ry - (ra - 2)), jb = i - (ry - (rb - 2));
    s->bas[i] = ra > 2 && ja >= 0 && a->shape.dims[ja].size != 1 ? ast[ja] : 0;
    s->bbs[i] = rb > 2 && jb >= 0 && b->shape.dims[jb].size != 1 ? bst[jb] : 0;
  }
  return true;
}

bool drk_lower_matmul(drk_lctx_t *c) {
  const drk_node_t *n = c->node;
  mm_t s;
  if (!mm_setup(c, &s)) return false;
  if (s.batch > 65535) return lw_err(c, "batch of %lld matrices exceeds the grid limit", (long long)s.batch);
  drk_schedule_t S = drk_sched_mm(s.M, s.N, s.K, s.t, &c->o);
  bool mma = strcmp(S.mma, "mma_sync") == 0;
  drk_dtype_t at = s.t == DRK_DT_F64 ? DRK_DT_F64 : DRK_DT_F32;
  int64_t BM = S.tile_m, BN = S.tile_n, BK = S.tile_k;
  int64_t big = 0;
  for (int i = 0; i < n->n_inputs; i++)
    if (n->inputs[i] && lw_numel(n->inputs[i]) > big) big = lw_numel(n->inputs[i]);
  if (lw_numel(n->outputs[0]) > big) big = lw_numel(n->outputs[0]);
  lw_kernel_begin(c, big < ((int64_t)1 << 31) - 65536 ? DRK_DT_I32 : DRK_DT_I64);
  drk_tile_module_t *m = c->m;
  tv_t *pa = lw_param_buf(c, n->inputs[0], "a");
  tv_t *pb = lw_param_buf(c, n->inputs[1], "b");
  tv_t *pc = n->n_inputs > 2 && n->inputs[2] ? lw_param_buf(c, n->inputs[2], n->op == DRK_OP_CONV ? "bias" : "c") : NULL;
  tv_t *py = lw_param_buf(c, n->outputs[0], "y");

  const drk_tile_layout_t *LA = drk_tile_layout_blocked(m, 2, (int[]){1, 4}, (int[]){4, 8}, (int[]){4, 1}, (int[]){1, 0});
  const drk_tile_layout_t *LB = LA;
  const drk_tile_layout_t *acc_l =
      mma ? drk_tile_layout_mma(m, DRK_TL_MMA_SYNC, 2, 2, 16, 8)
          : drk_tile_layout_blocked(m, 2, (int[]){2, 2}, (int[]){4, 8}, (int[]){2, 2}, (int[]){1, 0});
  int kw = mma ? (s.t == DRK_DT_F32 ? 4 : 8) : 1;
  const drk_tile_layout_t *opA = drk_tile_layout_dot_op(m, acc_l, 0, kw), *opB = drk_tile_layout_dot_op(m, acc_l, 1, kw);
  const drk_tile_layout_t *SL = drk_tile_layout_shared(m, 0, 2, (int[]){1, 0});
  int64_t es = drk_dtype_bits(s.t) / 8;
  int64_t a_bytes = (BM * BK * es + 15) / 16 * 16, smem = a_bytes + BK * BN * es;

  tv_t *pm = lw_pid(c, 0), *pn = lw_pid(c, 1), *pz = lw_pid(c, 2);
  const drk_tile_layout_t *LAr = drk_tile_layout_slice(m, LA, 1), *LAc = drk_tile_layout_slice(m, LA, 0);
  tv_t *mi = lw_cast(c, lw_range(c, BM, LAr), c->it);
  tv_t *mrow = BIN(ADD, lw_splat(c, BIN(MUL, pm, lw_sci(c, c->it, BM)), &mi->type), mi);
  tv_t *mmask = lw_bcast_row(c, lw_cmp(c, "lt", mrow, lw_ci(c, mrow, s.M)), LA, BM, BK);
  tv_t *ka = lw_cast(c, lw_range(c, BK, LAc), c->it);
  tv_t *kb = lw_cast(c, lw_range(c, BK, LAr), c->it);
  tv_t *nj = lw_cast(c, lw_range(c, BN, LAc), c->it);
  tv_t *ncol = BIN(ADD, lw_splat(c, BIN(MUL, pn, lw_sci(c, c->it, BN)), &nj->type), nj);
  tv_t *nmask = lw_bcast_col(c, lw_cmp(c, "lt", ncol, lw_ci(c, ncol, s.N)), LB, BK, BN);

  /* per-batch (or per-group) base offsets, scalars */
  tv_t *abase, *bbase;
  tv_t *arow; /* A row part [BM] (LAr) */
  tv_t *conv_rowsp[3] = {0};
  if (s.conv) {
    int64_t Cg = s.C / s.G, OCg = s.OC / s.G;
    abase = BIN(MUL, pz, lw_sci(c, c->it, Cg * s.PI));
    bbase = BIN(MUL, pz, lw_sci(c, c->it, OCg * s.K));
    /* m -> (nb, o...): row part nb*C*PI; spatial row parts o_d*stride - pad */
    tv_t *nbi = s.PO > 1 ? BIN(DIV, mrow, lw_ci(c, mrow, s.PO)) : mrow;
    arow = BIN(MUL, nbi, lw_ci(c, nbi, s.C * s.PI));
    for (int d = 0; d < s.nsp; d++) {
      tv_t *od = lw_coord(c, mrow, s.nsp + 1, (int64_t[]){s.Nb, s.O[0], s.O[1], s.O[2]}, d + 1);
      conv_rowsp[d] = BIN(SUB, BIN(MUL, od, lw_ci(c, od, s.st[d])), lw_ci(c, od, s.pad[d]));
    }
  } else {
    abase = lw_affine(c, pz, s.nb, s.bd, s.bas, 0);
    bbase = lw_affine(c, pz, s.nb, s.bd, s.bbs, 0);
    arow = BIN(MUL, mrow, lw_ci(c, mrow, s.sam));
  }
  tv_t *arow2 = lw_bcast_row(c, BIN(ADD, arow, lw_splat(c, abase, &arow->type)), LA, BM, BK);
  tv_t *bcol2 = lw_bcast_col(c, BIN(ADD, BIN(MUL, ncol, lw_ci(c, ncol, s.sbn)), lw_splat(c, bbase, &ncol->type)), LB, BK, BN);

  int64_t ad[2] = {BM, BK}, bd[2] = {BK, BN}, cd[2] = {BM, BN};
  tv_t *sa = drk_tile_build1(&c->b, DRK_TOP_LOCAL_ALLOC, 0, NULL, drk_tile_type_smem(s.t, 2, ad, SL));
  drk_tile_op_set_int(m, sa->def, "offset", 0);
  tv_t *sb = drk_tile_build1(&c->b, DRK_TOP_LOCAL_ALLOC, 0, NULL, drk_tile_type_smem(s.t, 2, bd, SL));
  drk_tile_op_set_int(m, sb->def, "offset", a_bytes);
  tv_t *zero = drk_tile_build_const_float(&c->b, 0.0, drk_tile_type_tile(at, 2, cd, acc_l));
  drk_tile_op_t *f = drk_tile_build_for_begin(&c->b, lw_sci(c, c->it, 0), lw_sci(c, c->it, s.K), lw_sci(c, c->it, BK), 1, &zero);
  tv_t *k0 = f->regions[0]->args[0], *acc = f->regions[0]->args[1];
  /* A tile */
  tv_t *kk = BIN(ADD, lw_splat(c, k0, &ka->type), ka);
  tv_t *amask = BIN(AND, mmask, lw_bcast_col(c, lw_cmp(c, "lt", kk, lw_ci(c, kk, s.K)), LA, BM, BK));
  tv_t *aoff;
  if (s.conv) {
    /* k -> (ci, kk...): column part ci*PI; spatial kk_d*dil */
    tv_t *ci = s.KS > 1 ? BIN(DIV, kk, lw_ci(c, kk, s.KS)) : kk;
    aoff = BIN(ADD, arow2, lw_bcast_col(c, BIN(MUL, ci, lw_ci(c, ci, s.PI)), LA, BM, BK));
    int64_t istr = 1;
    for (int d = s.nsp - 1; d >= 0; d--) {
      tv_t *kd = lw_coord(c, kk, s.nsp + 1, (int64_t[]){s.C / s.G, s.Kk[0], s.Kk[1], s.Kk[2]}, d + 1);
      tv_t *kc = BIN(MUL, kd, lw_ci(c, kd, s.dil[d]));
      tv_t *ih = BIN(ADD, lw_bcast_row(c, conv_rowsp[d], LA, BM, BK), lw_bcast_col(c, kc, LA, BM, BK));
      amask = BIN(AND, amask, BIN(AND, lw_cmp(c, "ge", ih, lw_ci(c, ih, 0)), lw_cmp(c, "lt", ih, lw_ci(c, ih, s.I[d]))));
      aoff = BIN(ADD, aoff, istr == 1 ? ih : BIN(MUL, ih, lw_ci(c, ih, istr)));
      istr *= s.I[d];
    }
  } else {
    aoff = BIN(ADD, arow2, lw_bcast_col(c, BIN(MUL, kk, lw_ci(c, kk, s.sak)), LA, BM, BK));
  }
  tv_t *av = lw_load(c, pa, aoff, amask, 0);
  /* B tile */
  tv_t *kk2 = BIN(ADD, lw_splat(c, k0, &kb->type), kb);
  tv_t *bmask = BIN(AND, nmask, lw_bcast_row(c, lw_cmp(c, "lt", kk2, lw_ci(c, kk2, s.K)), LB, BK, BN));
  tv_t *boff = BIN(ADD, bcol2, lw_bcast_row(c, BIN(MUL, kk2, lw_ci(c, kk2, s.sbk)), LB, BK, BN));
  tv_t *bv = lw_load(c, pb, boff, bmask, 0);
  drk_tile_build(&c->b, DRK_TOP_BARRIER, 0, NULL, 0, NULL);
  drk_tile_build(&c->b, DRK_TOP_LOCAL_STORE, 2, (tv_t *[]){sa, av}, 0, NULL);
  drk_tile_build(&c->b, DRK_TOP_LOCAL_STORE, 2, (tv_t *[]){sb, bv}, 0, NULL);
  drk_tile_build(&c->b, DRK_TOP_BARRIER, 0, NULL, 0, NULL);
  tv_t *fa = drk_tile_build1(&c->b, DRK_TOP_LOCAL_LOAD, 1, &sa, drk_tile_type_tile(s.t, 2, ad, opA));
  tv_t *fb = drk_tile_build1(&c->b, DRK_TOP_LOCAL_LOAD, 1, &sb, drk_tile_type_tile(s.t, 2, bd, opB));
  drk_tile_op_t *dot = drk_tile_build(&c->b, DRK_TOP_DOT, 3, (tv_t *[]){fa, fb, acc}, 1, &acc->type);
  drk_tile_op_set_ident(m, dot, "kind", mma ? "mma_sync" : "fma");
  f = drk_tile_build_for_end(&c->b, 1, dot->results);
  tv_t *res = f->results[0];

  /* epilogue in the accumulator layout */
  const drk_tile_layout_t *Cr = drk_tile_layout_slice(m, acc_l, 1), *Cc = drk_tile_layout_slice(m, acc_l, 0);
  tv_t *ei = lw_cast(c, lw_range(c, BM, Cr), c->it);
  tv_t *erow = BIN(ADD, lw_splat(c, BIN(MUL, pm, lw_sci(c, c->it, BM)), &ei->type), ei);
  tv_t *ej = lw_cast(c, lw_range(c, BN, Cc), c->it);
  tv_t *ecol = BIN(ADD, lw_splat(c, BIN(MUL, pn, lw_sci(c, c->it, BN)), &ej->type), ej);
  tv_t *emask = BIN(AND, lw_bcast_row(c, lw_cmp(c, "lt", erow, lw_ci(c, erow, s.M)), acc_l, BM, BN),
                    lw_bcast_col(c, lw_cmp(c, "lt", ecol, lw_ci(c, ecol, s.N)), acc_l, BM, BN));
  tv_t *yoff;
  if (s.conv) {
    int64_t OCg = s.OC / s.G;
    tv_t *nbi = s.PO > 1 ? BIN(DIV, erow, lw_ci(c, erow, s.PO)) : erow;
    tv_t *of = s.PO > 1 ? BIN(REM, erow, lw_ci(c, erow, s.PO)) : lw_ci(c, erow, 0);
    tv_t *rp = BIN(ADD, BIN(MUL, nbi, lw_ci(c, nbi, s.OC * s.PO)), of);
    tv_t *oc = BIN(ADD, ecol, lw_splat(c, BIN(MUL, pz, lw_sci(c, c->it, OCg)), &ecol->type));
    yoff = BIN(ADD, lw_bcast_row(c, rp, acc_l, BM, BN), lw_bcast_col(c, BIN(MUL, oc, lw_ci(c, oc, s.PO)), acc_l, BM, BN));
    if (pc) {
      tv_t *bias = lw_cast(c, lw_load(c, pc, oc, lw_cmp(c, "lt", ecol, lw_ci(c, ecol, s.N)), 0), at);
      res = BIN(ADD, res, lw_bcast_col(c, bias, acc_l, BM, BN));
    }
  } else {
    tv_t *yb = BIN(MUL, pz, lw_sci(c, c->it, s.M * s.N));
    tv_t *rp = BIN(ADD, BIN(MUL, erow, lw_ci(c, erow, s.N)), lw_splat(c, yb, &erow->type));
    yoff = BIN(ADD, lw_bcast_row(c, rp, acc_l, BM, BN), lw_bcast_col(c, ecol, acc_l, BM, BN));
    if (n->op == DRK_OP_GEMM) {
      if (s.alpha != 1.0) res = BIN(MUL, res, lw_cf(c, res, s.alpha));
      if (pc && s.beta != 0.0) {
        const drk_value_t *cv = s.cval;
        int64_t cst[2];
        lw_bstrides(cv, 2, (int64_t[]){s.M, s.N}, cst);
        tv_t *coff = BIN(ADD, lw_bcast_row(c, BIN(MUL, erow, lw_ci(c, erow, cst[0])), acc_l, BM, BN),
                         lw_bcast_col(c, BIN(MUL, ecol, lw_ci(c, ecol, cst[1])), acc_l, BM, BN));
        tv_t *cvv = lw_cast(c, lw_load(c, pc, coff, emask, 0), at);
        if (s.beta != 1.0) cvv = BIN(MUL, cvv, lw_cf(c, cvv, s.beta));
        res = BIN(ADD, res, cvv);
      }
    }
  }
  lw_store(c, py, yoff, res, emask);
  S.tile_k = (int)BK;
  S.stages = 1;
  lw_kernel_end(c, (s.M + BM - 1) / BM, (s.N + BN - 1) / BN, s.batch, S.warps, smem, &S);
  return true;
}
