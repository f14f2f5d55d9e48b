/* Lowering of depthwise and small-group convolutions (Conv and ConvNHWC with group > 1 and at
 * most DW_MAX_CG input channels per group, 1 or 2 spatial dims) to a direct kernel.
 *
 * Why not the implicit GEMM: a depthwise conv's GEMM per group is [pixels, 1] x [1 * taps]:
 * one output column per group (grid z = C groups), K = 9..49, so the mma tiles are almost all
 * padding and every program reads a strided column of the image. The direct kernel reads
 * each input element from memory about once and does taps multiply-adds per output.
 *
 * Kernel: a program computes a tile of R pixel groups x CT output channels (grid x: pixel
 * groups, grid y: channel tiles). A pixel group is PW consecutive output columns of one
 * output row of one image, so a row of the tile is (n, oh, ow0..ow0+PW). The frame is a 2-D
 * blocked layout [R, CT]: channels last (ConvNHWC) puts V channels per thread along the
 * contiguous channel axis (V = 16 bytes of the input dtype: 8 fp16 channels, one 16-byte
 * load) and lanes along channels first; NCHW puts lanes along the pixel groups (consecutive
 * output columns are consecutive in memory) and CT channels per thread.
 * Register blocking: each thread keeps PW accumulator tiles, one per output column of its
 * group. For each kernel row kh (a `for`), the input columns the group's PW outputs touch,
 * U = (PW - 1) * stride + (KW - 1) * dilation + 1 of them, are each loaded once and feed every
 * (output column j, tap kw) pair with u = j * stride + kw * dilation: 3x3 stride 1 with PW = 4
 * loads 6 columns per row instead of 12. The KW weights of the row are loaded once per row
 * (a column vector of the tile, broadcast along the pixel groups). Input positions outside
 * the image (padding) are masked loads of 0. The bias is added, then each column's tile goes
 * through lw_mm_store: the fused epilogue of the conv's DRK_FUSION_MM group (BatchNorm folded
 * before, Relu/HardSwish/SiLU/residual Add after) or a plain store.
 *
 * Small groups (Cg = C / group input channels per group, Mg = OC / group outputs per group):
 * output channel oc reads input channels (oc / Mg) * Cg + ci, ci < Cg, unrolled; depthwise
 * (Cg = 1, Mg = 1) is the case whose channel loads are contiguous vectors.
 *
 * Accumulation in f32 (f64 for f64), over kh, then ci, then kw per output (the interpreter
 * accumulates in f64): within the f32 tolerance of docs' oracles.
 *
 * Schedule (kind "dw", knobs dw.direct, dw.pix, dw.ctile, dw.warps in lower/knobs.def):
 * heuristic PW = 4 unless that pads the output row by more than a sixth (then 2, then 1);
 * CT the largest of 8V, 4V, 2V, V (NHWC) whose padding of OC is at most an eighth; 4 warps;
 * while the grid has fewer than two programs per SM: 2 warps, then PW halved, then 1 warp.
 *
 * Each tap is one `fma` (a mul and an add would be two FP32 instructions: a 7x7 kernel
 * at f32 accumulation is then bound by the FP32 pipe, not HBM).
 *
 * Requires: static shapes; weights (constant or not) and bias of the input's dtype. */
#include <string.h>

#include "lower/lower_internal.h"

#define BIN(op, a, b) lw_bin(c, DRK_TOP_##op, (a), (b))

enum { DW_MAX_CG = 8, DW_MAX_U = 64 };

typedef struct dwgeo {
  bool nhwc;
  int64_t N, C, OC, G, Cg, Mg;
  int64_t H, W, OH, OW, KH, KW, sh, sw, dh, dw, ph, pw;
} dwgeo_t;

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* The geometry as lower_matmul.c's conv_setup reads it; false (no error) when the node is
 * not a 1-D/2-D grouped conv this kernel takes. */
static bool dw_geo(const drk_node_t *n, dwgeo_t *g) {
  memset(g, 0, sizeof *g);
  if (n->op != DRK_OP_CONV && n->op != DRK_OP_CONV_NHWC) return false;
  const drk_value_t *x = n->inputs[0], *w = n->inputs[1], *y = n->outputs[0];
  int r = x->shape.rank, nsp = r - 2;
  if (nsp < 1 || nsp > 2 || w->shape.rank != r || y->shape.rank != r) return false;
  g->nhwc = n->op == DRK_OP_CONV_NHWC;
  int sp0 = g->nhwc ? 1 : 2;
  g->N = x->shape.dims[0].size;
  g->C = x->shape.dims[g->nhwc ? r - 1 : 1].size;
  g->OC = w->shape.dims[0].size;
  g->G = drk_node_attr_int(n, "group", 1);
  if (g->G < 2 || g->C % g->G || g->OC % g->G) return false;
  g->Cg = g->C / g->G;
  g->Mg = g->OC / g->G;
  size_t cnt;
  const int64_t *st = drk_node_attr_ints(n, "strides", &cnt);
  const int64_t *di = drk_node_attr_ints(n, "dilations", &cnt);
  const int64_t *pa = drk_node_attr_ints(n, "pads", &cnt);
  const char *ap = drk_node_attr_string(n, "auto_pad", "NOTSET");
  int64_t I[2] = {1, 1}, O[2] = {1, 1}, K[2] = {1, 1}, S[2] = {1, 1}, D[2] = {1, 1}, P[2] = {0, 0};
  for (int d = 0; d < nsp; d++) {
    int e = d + 2 - nsp; /* 1-D convs are one row high: their dim is the width */
    I[e] = x->shape.dims[sp0 + d].size;
    O[e] = y->shape.dims[sp0 + d].size;
    K[e] = w->shape.dims[sp0 + d].size;
    S[e] = st ? st[d] : 1;
    D[e] = di ? di[d] : 1;
    P[e] = pa ? pa[d] : 0;
    if (strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0) {
      int64_t tot = (O[e] - 1) * S[e] + (K[e] - 1) * D[e] + 1 - I[e];
      if (tot < 0) tot = 0;
      P[e] = strcmp(ap, "SAME_UPPER") == 0 ? tot / 2 : tot - tot / 2;
    } else if (strcmp(ap, "VALID") == 0) {
      P[e] = 0;
    }
    if (S[e] < 1 || D[e] < 1) return false;
  }
  g->H = I[0], g->W = I[1], g->OH = O[0], g->OW = O[1], g->KH = K[0], g->KW = K[1];
  g->sh = S[0], g->sw = S[1], g->dh = D[0], g->dw = D[1], g->ph = P[0], g->pw = P[1];
  return true;
}

bool drk_lower_dwconv_wanted(drk_lctx_t *c) {
  const drk_node_t *n = c->node;
  dwgeo_t g;
  if (!dw_geo(n, &g) || g.Cg > DW_MAX_CG) return false;
  drk_dtype_t t = n->inputs[0]->dtype;
  if (t != DRK_DT_F32 && t != DRK_DT_F16 && t != DRK_DT_BF16 && t != DRK_DT_F64) return false;
  for (int i = 1; i < n->n_inputs; i++)
    if (n->inputs[i] && n->inputs[i]->dtype != t) return false;
  /* the unrolled column loads of one kernel row must stay a reasonable amount of code */
  if ((4 - 1) * g.sw + (g.KW - 1) * g.dw + 1 > DW_MAX_U || g.KH * g.KW * g.Cg > 1024) return false;
  return drk_knob_or(&c->o.knobs, DRK_KNOB_DW_DIRECT, 1) == 1;
}

/* the default schedule (file header), knobs applied */
static drk_schedule_t dw_sched(drk_lctx_t *c, const dwgeo_t *g, int V) {
  drk_schedule_t s = {0};
  s.kind = "dw";
  int pw = 4;
  while (pw > 1 && (ceil_div(g->OW, pw) * pw - g->OW) * 6 > g->OW) pw /= 2;
  pw = drk_knob_or(&c->o.knobs, DRK_KNOB_DW_PIX, pw);
  if ((pw - 1) * g->sw + (g->KW - 1) * g->dw + 1 > DW_MAX_U) pw = 1;
  int ct;
  if (g->nhwc) {
    ct = V;
    for (int m = 8; m >= 1; m /= 2)
      if ((ceil_div(g->OC, (int64_t)m * V) * m * V - g->OC) * 8 <= g->OC) {
        ct = m * V;
        break;
      }
  } else {
    ct = g->OC >= 4 ? 4 : (int)lw_pow2ceil(g->OC);
  }
  ct = drk_knob_or(&c->o.knobs, DRK_KNOB_DW_CTILE, ct);
  /* small grids (batch 1 late layers): fewer warps per program, then fewer columns per
   * thread (more threads, less reuse), then one warp, until two programs per SM */
  int sms = lw_target_sms(&c->o);
  int lanes_c = g->nhwc ? (ct / V > 32 ? 32 : ct / V < 1 ? 1 : ct / V) : 1;
  bool pix_pinned = drk_knob_pinned(&c->o.knobs, DRK_KNOB_DW_PIX, &(int){0});
  int warps = 4;
  for (;;) {
    int64_t rows = (int64_t)(32 / lanes_c) * warps;
    if (ceil_div(g->N * g->OH * ceil_div(g->OW, pw), rows) * ceil_div(g->OC, ct) >= 2 * sms) break;
    if (warps > 2) warps /= 2;
    else if (pw > 1 && !pix_pinned) pw /= 2;
    else if (warps > 1) warps /= 2;
    else break;
  }
  warps = drk_knob_or(&c->o.knobs, DRK_KNOB_DW_WARPS, warps);
  s.spt = pw;
  s.tile_n = ct;
  s.warps = warps;
  return s;
}

bool drk_lower_dwconv(drk_lctx_t *c) {
  const drk_node_t *n = c->node;
  const drk_value_t *x = n->inputs[0], *w = n->inputs[1], *b = n->n_inputs > 2 ? n->inputs[2] : NULL, *y = n->outputs[0];
  dwgeo_t g;
  if (!dw_geo(n, &g)) return lw_err(c, "not a 1-D or 2-D grouped convolution");
  if (b && lw_numel(b) != g.OC) return lw_err(c, "bias has %lld values, expected %lld", (long long)lw_numel(b), (long long)g.OC);
  int64_t es = drk_dtype_bits(x->dtype) / 8;
  int V = g.nhwc ? (int)(16 / es) : 1;
  drk_schedule_t S = dw_sched(c, &g, V);
  int PW = S.spt, CT = S.tile_n, warps = S.warps;
  /* the frame [R, CT]: see the file header */
  int spt[2], tpw[2], wpc[2] = {warps, 1}, ord[2];
  if (g.nhwc) {
    int v = CT < V ? CT : V;
    int lc = CT / v > 32 ? 32 : CT / v;
    spt[0] = 1, spt[1] = CT / (v * lc) * v; /* CT beyond 32 vectors: more per thread */
    tpw[0] = 32 / lc, tpw[1] = lc;
    ord[0] = 1, ord[1] = 0;
  } else {
    spt[0] = 1, spt[1] = CT;
    tpw[0] = 32, tpw[1] = 1;
    ord[0] = 0, ord[1] = 1;
  }
  int64_t R = (int64_t)spt[0] * tpw[0] * warps;
  S.tile_m = (int)R;
  int64_t OWG = ceil_div(g.OW, PW), ROWS = g.N * g.OH * OWG, CTILES = ceil_div(g.OC, CT);
  if (CTILES > 65535) return lw_err(c, "%lld channel tiles exceed the grid limit", (long long)CTILES);
  int64_t U = (PW - 1) * g.sw + (g.KW - 1) * g.dw + 1, KS = g.KH * g.KW;
  /* element strides of X and Y: (n, h, w, c) */
  int64_t xs[4], ys[4];
  if (g.nhwc) {
    xs[3] = 1, xs[2] = g.C, xs[1] = g.W * g.C, xs[0] = g.H * g.W * g.C;
    ys[3] = 1, ys[2] = g.OC, ys[1] = g.OW * g.OC, ys[0] = g.OH * g.OW * g.OC;
  } else {
    xs[2] = 1, xs[1] = g.W, xs[3] = g.H * g.W, xs[0] = g.C * g.H * g.W;
    ys[2] = 1, ys[1] = g.OW, ys[3] = g.OH * g.OW, ys[0] = g.OC * g.OH * g.OW;
  }
  /* weights: (oc, ci, kh, kw) -> NHWC [OC, KH, KW, Cg], NCHW [OC, Cg, KH, KW] */
  int64_t wso = KS * g.Cg, wsc = g.nhwc ? 1 : KS, wsh = g.nhwc ? g.KW * g.Cg : g.KW, wsw = g.nhwc ? g.Cg : 1;

  int64_t big = lw_numel(x) > lw_numel(y) ? lw_numel(x) : lw_numel(y);
  if (lw_numel(w) > big) big = lw_numel(w);
  /* slack for the padded row tiles' and columns' offsets (masked, never dereferenced) */
  /* the padded last row tile and channel tile compute offsets up to an image and a tile past
   * the end (masked, never dereferenced) */
  lw_kernel_begin(c, lw_index_dtype_for(big + (xs[0] > ys[0] ? xs[0] : ys[0]) + (int64_t)CT * wso));
  tv_t *px = lw_param_buf(c, x, "x");
  tv_t *pwt = lw_param_buf(c, w, "w");
  tv_t *pb = b ? lw_param_buf(c, b, "bias") : NULL;
  tv_t *py = lw_mm_out_param(c, y);
  drk_tile_module_t *m = c->m;
  const drk_tile_layout_t *P = drk_tile_layout_blocked(m, 2, spt, tpw, wpc, ord);
  const drk_tile_layout_t *Lr = drk_tile_layout_slice(m, P, 1), *Lc = drk_tile_layout_slice(m, P, 0);
  c->lay = P;
  drk_dtype_t at = lw_compute_dtype(x->dtype);
  drk_dtype_t it = c->it;

  /* rows: pixel group -> (n, oh, owg) */
  tv_t *ri = lw_cast(c, lw_range(c, R, Lr), it);
  tv_t *row = BIN(ADD, lw_splat(c, BIN(MUL, lw_pid(c, 0), lw_sci(c, it, R)), &ri->type), ri);
  tv_t *rmask = ROWS % R ? lw_cmp(c, "lt", row, lw_ci(c, row, ROWS)) : NULL;
  tv_t *owg = OWG > 1 ? BIN(REM, row, lw_ci(c, row, OWG)) : lw_ci(c, row, 0);
  tv_t *t = OWG > 1 ? BIN(DIV, row, lw_ci(c, row, OWG)) : row;
  tv_t *oh = g.OH > 1 ? BIN(REM, t, lw_ci(c, t, g.OH)) : lw_ci(c, t, 0);
  tv_t *nb = g.OH > 1 ? BIN(DIV, t, lw_ci(c, t, g.OH)) : t;
  tv_t *ih0 = BIN(SUB, BIN(MUL, oh, lw_ci(c, oh, g.sh)), lw_ci(c, oh, g.ph));
  tv_t *iw0 = BIN(SUB, BIN(MUL, owg, lw_ci(c, owg, PW * g.sw)), lw_ci(c, owg, g.pw));
  tv_t *xrow = BIN(MUL, nb, lw_ci(c, nb, xs[0]));
  /* columns: output channel -> its group's first input channel and its weights */
  tv_t *cj = lw_cast(c, lw_range(c, CT, Lc), it);
  tv_t *oc = BIN(ADD, lw_splat(c, BIN(MUL, lw_pid(c, 1), lw_sci(c, it, CT)), &cj->type), cj);
  tv_t *cmask = g.OC % CT ? lw_cmp(c, "lt", oc, lw_ci(c, oc, g.OC)) : NULL;
  tv_t *grp = g.Mg > 1 ? BIN(DIV, oc, lw_ci(c, oc, g.Mg)) : oc;
  tv_t *xcol = lw_addmul(c, NULL, grp, g.Cg * xs[3]);
  tv_t *wcol = lw_addmul(c, NULL, oc, wso);
  tv_t *cmask2 = cmask ? lw_bcast_col(c, cmask, P, R, CT) : NULL;

  tv_t *zero = lw_cdt(c, lw_bcast_col(c, oc, P, R, CT), at, 0);
  tv_t *init[8];
  for (int j = 0; j < PW; j++) init[j] = zero;
  drk_tile_op_t *loop = drk_tile_build_for_begin(&c->b, lw_sci(c, it, 0), lw_sci(c, it, g.KH), lw_sci(c, it, 1), PW, init);
  tv_t *kh = loop->regions[0]->args[0];
  tv_t *acc[8];
  for (int j = 0; j < PW; j++) acc[j] = loop->regions[0]->args[1 + j];
  tv_t *ih = BIN(ADD, ih0, lw_splat(c, BIN(MUL, kh, lw_sci(c, it, g.dh)), &ih0->type));
  tv_t *hok = lw_and_mask(c, rmask, BIN(AND, lw_cmp(c, "ge", ih, lw_ci(c, ih, 0)), lw_cmp(c, "lt", ih, lw_ci(c, ih, g.H))));
  tv_t *xrh = BIN(ADD, xrow, BIN(MUL, ih, lw_ci(c, ih, xs[1])));
  tv_t *wkh = BIN(MUL, kh, lw_sci(c, it, wsh));
  for (int64_t ci = 0; ci < g.Cg; ci++) {
    /* the kernel row's weights: [CT] per tap, broadcast over the pixel groups */
    tv_t *wv[DW_MAX_U];
    for (int64_t kw = 0; kw < g.KW; kw++) {
      tv_t *wo = BIN(ADD, wcol, lw_splat(c, BIN(ADD, wkh, lw_sci(c, it, ci * wsc + kw * wsw)), &wcol->type));
      wv[kw] = lw_bcast_col(c, lw_cast(c, lw_load(c, pwt, wo, cmask, 0), at), P, R, CT);
    }
    tv_t *xc2 = lw_bcast_col(c, xcol, P, R, CT);
    if (ci) xc2 = BIN(ADD, xc2, lw_ci(c, xc2, ci * xs[3]));
    for (int64_t u = 0; u < U; u++) {
      bool used = false;
      for (int j = 0; j < PW && !used; j++) {
        int64_t d = u - j * g.sw;
        used = d >= 0 && d % g.dw == 0 && d / g.dw < g.KW;
      }
      if (!used) continue;
      tv_t *iw = BIN(ADD, iw0, lw_ci(c, iw0, u));
      tv_t *ok = BIN(AND, hok, BIN(AND, lw_cmp(c, "ge", iw, lw_ci(c, iw, 0)), lw_cmp(c, "lt", iw, lw_ci(c, iw, g.W))));
      tv_t *off = BIN(ADD, lw_bcast_row(c, BIN(ADD, xrh, BIN(MUL, iw, lw_ci(c, iw, xs[2]))), P, R, CT), xc2);
      tv_t *mask = lw_and_mask(c, lw_bcast_row(c, ok, P, R, CT), cmask2);
      tv_t *xv = lw_cast(c, lw_load(c, px, off, mask, 0), at);
      for (int j = 0; j < PW; j++) {
        int64_t d = u - j * g.sw;
        if (d < 0 || d % g.dw || d / g.dw >= g.KW) continue;
        acc[j] = lw_fma(c, xv, wv[d / g.dw], acc[j]);
      }
    }
  }
  loop = drk_tile_build_for_end(&c->b, PW, acc);
  tv_t *bias = pb ? lw_bcast_col(c, lw_cast(c, lw_load(c, pb, oc, cmask, 0), at), P, R, CT) : NULL;
  tv_t *yrow = BIN(ADD, BIN(MUL, nb, lw_ci(c, nb, ys[0])), BIN(MUL, oh, lw_ci(c, oh, ys[1])));
  tv_t *ycol = lw_bcast_col(c, lw_addmul(c, NULL, oc, ys[3]), P, R, CT);
  for (int j = 0; j < PW; j++) {
    tv_t *ow = BIN(ADD, BIN(MUL, owg, lw_ci(c, owg, PW)), lw_ci(c, owg, j));
    tv_t *okj = g.OW % PW ? lw_cmp(c, "lt", ow, lw_ci(c, ow, g.OW)) : NULL;
    okj = lw_and_mask(c, rmask, okj);
    tv_t *res = loop->results[j];
    if (bias) res = BIN(ADD, res, bias);
    tv_t *yoff = BIN(ADD, lw_bcast_row(c, BIN(ADD, yrow, BIN(MUL, ow, lw_ci(c, ow, ys[2]))), P, R, CT), ycol);
    tv_t *mask = lw_and_mask(c, okj ? lw_bcast_row(c, okj, P, R, CT) : NULL, cmask2);
    lw_mm_store(c, py, yoff, res, mask);
  }
  lw_kernel_end(c, ceil_div(ROWS, R), CTILES, 1, warps, 0, &S);
  return true;
}
