/* Lowering of MatMul (batched, with batch broadcast, 1-D operands), Gemm, Conv and ConvNHWC
 * (implicit GEMM, 1-3 spatial dims, groups, dilations, pads, auto_pad) to tiled `dot` kernels.
 *
 * One program computes a BLOCK_M x BLOCK_N tile of one batch (grid axis 2: batch or conv
 * group). The general kernel (every target) streams the k tiles of A and B through a ring of
 * shared stages filled by masked cp_async (see "the general kernel" below) and carries the
 * accumulator over a loop of k steps: local_load into the dot_op layouts, then `dot`.
 * f16/bf16 use mma_sync (f32 accumulator), f32 fma (or mma_sync as tf32 when allowed), f64
 * fma in f64. On sm_90a alone, f16/bf16 MatMuls take the warp-specialized TMA + wgmma kernel
 * (mm_hopper). The epilogue applies alpha/beta/C (Gemm) or the bias (Conv) and stores with
 * masks.
 *
 * Convolutions: row m of the implicit GEMM is an output pixel (n, o...), column the output
 * channel of the group (grid z), k a (channel, tap) pair of the group's inputs. Conv (NCHW):
 * k = (c, kh, kw), A gathered element by element (lanes along the pixels, which are
 * contiguous for stride 1); y[n, oc, o...]. ConvNHWC (X [N, spatial..., C], W [OC, k..., C/G],
 * from the layout pass): k = (kh, kw, c) with c innermost, so A's k run is contiguous in
 * memory, B is W as the [OC/G, K] matrix it already is, and y[n, o..., oc] sits at
 * m * OC + oc. When C/G is a multiple of BLOCK_K a k tile lies within one tap: its tap and
 * first channel are scalars, the padding mask a per-row vector, and A's copies are 16-byte
 * cp_async along k (the backend's axis facts prove it); otherwise the (tap, c) split is done
 * per element (correct, copies one element at a time).
 *
 * Requires: static shapes. Guarantees: every edge is masked or zero-filled (any M, N, K). */
#include <string.h>

#include "lower/lower_internal.h"

#define BIN(op, a, b) lw_bin(c, DRK_TOP_##op, (a), (b))

bool drk_lower_matmul_supported(const drk_node_t *n, const char **why) {
  if (n->op != DRK_OP_MATMUL && n->op != DRK_OP_GEMM && n->op != DRK_OP_CONV && n->op != DRK_OP_CONV_NHWC) {
    *why = "op not lowered";
    return false;
  }
  drk_dtype_t t = n->inputs[0]->dtype;
  bool f8 = t == DRK_DT_F8E4M3 || t == DRK_DT_F8E5M2; /* --precision=fp8: mma_sync, f32 result (C, bias f32) */
  if (t != DRK_DT_F32 && t != DRK_DT_F16 && t != DRK_DT_BF16 && t != DRK_DT_F64 && !f8) { *why = "dtype"; return false; }
  for (int i = 1; i < n->n_inputs; i++)
    if (n->inputs[i] && n->inputs[i]->dtype != (f8 && i >= 2 ? DRK_DT_F32 : t)) { *why = "mixed dtypes"; return false; }
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
  /* Conv, ConvNHWC (nhwc: channels last; fastk: a k tile lies within one kernel tap) */
  bool conv, nhwc, fastk;
  int nsp;
  int64_t C, OC, G, Nb, I[3], O[3], Kk[3], st[3], dil[3], pad[3], PI, PO, KS;
} mm_t;

static bool conv_setup(drk_lctx_t *c, mm_t *s) {
  const drk_node_t *n = c->node;
  const drk_value_t *x = n->inputs[0], *w = n->inputs[1], *y = n->outputs[0];
  int r = x->shape.rank;
  s->nsp = r - 2;
  if (s->nsp < 1 || s->nsp > 3)
    return lw_err(c, "%s with %d spatial dims is not lowered for GPU yet", drk_op_name(n->op), s->nsp);
  if (w->shape.rank != r || y->shape.rank != r) return lw_err(c, "weight and result must have the input's rank %d", r);
  s->conv = true;
  s->nhwc = n->op == DRK_OP_CONV_NHWC;
  int sp0 = s->nhwc ? 1 : 2; /* first spatial dim of X, Y and W */
  s->Nb = x->shape.dims[0].size;
  s->C = x->shape.dims[s->nhwc ? r - 1 : 1].size;
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
    s->I[d] = x->shape.dims[sp0 + d].size;
    s->O[d] = y->shape.dims[sp0 + d].size;
    s->Kk[d] = w->shape.dims[sp0 + d].size;
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
  s->sbk = 1; /* weights [OC, C/G, k...] ([OC, k..., C/G]): row oc of the group's [OC/G, K] matrix */
  s->sbn = s->K;
  return true;
}

static bool mm_setup(drk_lctx_t *c, mm_t *s) {
  const drk_node_t *n = c->node;
  memset(s, 0, sizeof *s);
  s->t = n->inputs[0]->dtype;
  s->batch = 1;
  if (n->op == DRK_OP_CONV || n->op == DRK_OP_CONV_NHWC) return conv_setup(c, s);
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
  /* result_n (pad-matmul-n): B's rows are N wide in memory (a multiple of 8: the TMA kernel's
   * 16-byte strides), the result has the first result_n columns, stored masked */
  int64_t rn = drk_node_attr_int(n, "result_n", 0);
  if (rn) {
    if (rb != 2 || rn < 1 || rn > s->N || y->shape.dims[y->shape.rank - 1].size != rn)
      return lw_err(c, "result_n %lld needs a 2-D B at least that wide and a result that wide", (long long)rn);
    s->N = rn;
  }
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

/* ---- split-K ----
 *
 * With split_k = SP > 1 (drk_sched_mm, drk_sched_mm_ws: few output tiles, long K) the
 * matmul kernel runs on grid z = batch * SP: program z computes batch z % batch over the
 * k tiles [sp * KPS, min((sp + 1) * KPS, NK)) of split sp = z / batch (KPS = ceil(NK / SP))
 * and stores its f32 (f64: f64) partial accumulator, masked, into a scratch workspace of
 * SP copies of the output: element sp * numel(y) + yoff, yoff the output element's flat
 * offset. A second kernel of the node (mm_splitk_sum), flat over numel(y), adds the SP
 * partials in split order (deterministic), applies what the one-kernel epilogue would (Gemm's
 * alpha and beta * C, Conv's bias) and stores through lw_mm_store (the fused epilogue of a
 * DRK_FUSION_MM group, or a plain store). The workspace is scratch (lw_scratch_new): live
 * only while the node runs. */

/* Kernel 2: the partial sums of scratch `ws` (SP copies of y, dtype at) into y. */
static void mm_splitk_sum(drk_lctx_t *c, const mm_t *s, int ws, int64_t SP, drk_dtype_t at) {
  const drk_node_t *n = c->node;
  const drk_value_t *y = n->outputs[0];
  int64_t ny = lw_numel(y);
  lw_kernel_begin(c, SP * ny < ((int64_t)1 << 31) - 65536 ? DRK_DT_I32 : DRK_DT_I64);
  if (c->epi) /* the epilogue's parameters are per kernel */
    c->epi_param = drk_arena_alloc(c->m->arena, sizeof(tv_t *) * (c->g->next_value_id + 1));
  tv_t *pw = lw_param_scratch(c, ws, at, "ws");
  tv_t *pc = n->n_inputs > 2 && n->inputs[2] ? lw_param_buf(c, n->inputs[2], s->conv ? "bias" : "c") : NULL;
  tv_t *py = lw_mm_out_param(c, y);
  lw_flat_t F;
  lw_flat_begin(c, ny, &F);
  tv_t *res = lw_load(c, pw, F.offs, F.mask, 0);
  for (int64_t i = 1; i < SP; i++)
    res = BIN(ADD, res, lw_load(c, pw, BIN(ADD, F.offs, lw_ci(c, F.offs, i * ny)), F.mask, 0));
  if (s->conv && pc) {
    /* y [Nb, OC, spatial...]: channel (offs / PO) % OC; y [Nb, spatial..., OC]: offs % OC */
    tv_t *oc = s->PO > 1 && !s->nhwc ? BIN(DIV, F.offs, lw_ci(c, F.offs, s->PO)) : F.offs;
    oc = BIN(REM, oc, lw_ci(c, oc, s->OC));
    res = BIN(ADD, res, lw_cast(c, lw_load(c, pc, oc, F.mask, 0), at));
  } else if (n->op == DRK_OP_GEMM) {
    if (s->alpha != 1.0) res = BIN(MUL, res, lw_cf(c, res, s->alpha));
    if (pc && s->beta != 0.0) {
      int64_t cst[2];
      lw_bstrides(s->cval, 2, (int64_t[]){s->M, s->N}, cst);
      tv_t *row = BIN(DIV, F.offs, lw_ci(c, F.offs, s->N)), *col = BIN(REM, F.offs, lw_ci(c, F.offs, s->N));
      tv_t *coff = BIN(ADD, BIN(MUL, row, lw_ci(c, row, cst[0])), BIN(MUL, col, lw_ci(c, col, cst[1])));
      tv_t *cvv = lw_cast(c, lw_load(c, pc, coff, F.mask, 0), at);
      if (s->beta != 1.0) cvv = BIN(MUL, cvv, lw_cf(c, cvv, s->beta));
      res = BIN(ADD, res, cvv);
    }
  }
  lw_mm_store(c, py, F.offs, res, F.mask);
  lw_flat_end(c, &F);
}

/* ---- sm_90a: warp-specialized TMA + mbarrier + wgmma kernel ----
 *
 * 12 warps: warpgroup 0 is the producer (one thread issues TMA loads of the A tile
 * [BM x 64] and of B's [64 x 64] column chunks into a ring of S stages of 128-byte swizzled
 * shared memory; full[s] completes on the transaction bytes, empty[s] when the consumers
 * are done with the stage), warpgroups 1 and 2 are consumers (wgmma m64nBNk16 with A
 * K-major and B N-major from shared memory, f32 accumulators in registers), then a masked
 * store from the accumulator layout. TMA zero-fills rows and columns past the tensor, so
 * any M, N and K work; row strides must be multiples of 16 bytes (K and N multiples of 8).
 * Batches: A rows [batch*M, K] and B rows [batch*K, N] in 2-D descriptors (rows of A past
 * M belong to the next batch and only reach masked-off output rows; B needs K % 64 == 0
 * when batched).
 *
 * Three forms (schedule `persistent`, `coop`):
 * - one tile per program (grid: M tiles x N tiles x batch * split-K): both consumers work
 *   on the tile, rows [0, 64) and [64, 128), and release each stage together (empty[s]
 *   counts 2 arrivals). Without split-K the epilogue is staged (ws_store). Optionally
 *   clusters of CL = 2 programs along M (grid x rounded up to even): program x loads its A
 *   and B's chunks j = 2 i + rank, multicast to both; each consumer releases the stage in
 *   both programs (empty[s] counts 2 CL arrivals); cluster barriers after the mbarrier init
 *   (no multicast or remote arrival reaches an uninitialized barrier) and before the exit
 *   (none reaches a finished program);
 * - persistent cooperative (no split-K): one program per SM walks the tiles t = pid, pid +
 *   programs, ..., both consumers on every tile as in the one-tile form;
 * - persistent ping-pong (no split-K): one program per SM walks the tiles t = pid, pid +
 *   programs, ...; the producer streams their k steps through the ring without a break and
 *   the consumers take whole tiles in turn (warpgroup w the program's tiles w, w + 2, ...;
 *   both 64-row halves, 2 x 64 x BN accumulators), so one warpgroup's epilogue runs while
 *   the other's wgmmas keep the tensor cores busy. order[w] (one arrival) hands the ring
 *   to warpgroup w when the other one has issued its tile's last wgmma: a consumer only
 *   waits on full[s] for the fill the producer makes next, never one a lap ahead (parity
 *   waits cannot tell those apart). Stage releases count 1 arrival.
 * Ring position of a k step: g = (tiles before it in this program) * k steps + k, stage
 * g % S, fill parity (g / S) & 1.
 * Paired (c->epi_pair, fuse.h: a MatMul with the anchor's A and a weight of its shape, whose
 * result only the epilogue reads; drk_lower_matmul_pairs says when): the schedule of [M, 2N],
 * each stage's B tile G = BN/2 columns of the anchor's weight then the same G columns of the
 * pair's (descriptors desc_b, desc_b2), the grid over N/G column tiles, and the staged
 * epilogue reads the two [64 x G] halves as the anchor's result and the pair's. */

typedef enum { WS_NONE, WS_BCAST, WS_FULL } ws_batch_t;

/* dynamic shared memory a program may use on sm_90 (227 KB) */
#define WS_SMEM_MAX 232448

/* wgmma groups left in flight at the end of a K step: 1 overlaps a step's MMAs with the
 * next step's barrier wait and issue (the stage is released one step later); 0 waits. */
#define WS_PENDING 1

/* Whether the operand's batch strides are all 0 (broadcast) or those of a contiguous batch
 * of mat-sized matrices. */
static ws_batch_t ws_batch_kind(const mm_t *s, const int64_t *bst, int64_t mat) {
  bool zero = true, full = true;
  int64_t st = mat;
  for (int i = s->nb - 1; i >= 0; i--) {
    zero &= bst[i] == 0;
    full &= bst[i] == st || s->bd[i] == 1;
    st *= s->bd[i];
  }
  return zero ? WS_BCAST : full ? WS_FULL : WS_NONE;
}

static tv_t *ws_param_tma(drk_lctx_t *c, const drk_value_t *v, const char *name, drk_tile_type_t t,
                          const drk_larg_tma_t *spec) {
  tv_t *p = drk_tile_kernel_add_param(c->m, c->k, name, t, c->node->loc);
  if (!c->cur.tmas) c->cur.tmas = drk_arena_alloc(c->m->arena, 4 * sizeof *c->cur.tmas);
  DRK_ASSERT(c->cur.n_tmas < 4);
  c->cur.tmas[c->cur.n_tmas] = *spec;
  drk_larg_t a = {DRK_LARG_TMA, v, c->cur.n_tmas++, 0};
  size_t n = (size_t)c->cur.n_args;
  DRK_VEC_PUSH(c->m->arena, c->cur.args, n, c->cap_args, a);
  c->cur.n_args = (int)n;
  return p;
}

static tv_t *ws_alloc(drk_lctx_t *c, int64_t off, drk_dtype_t t, int rank, const int64_t *dims, const drk_tile_layout_t *l) {
  tv_t *v = drk_tile_build1(&c->b, DRK_TOP_LOCAL_ALLOC, 0, NULL, drk_tile_type_smem(t, rank, dims, l));
  drk_tile_op_set_int(c->m, v->def, "offset", off);
  return v;
}

static tv_t *ws_index(drk_lctx_t *c, tv_t *buf, tv_t *i) {
  const drk_tile_type_t *t = &buf->type;
  drk_tile_type_t r = drk_tile_type_smem(t->dtype, t->rank - 1, t->dims + 1, t->layout);
  return drk_tile_build1(&c->b, DRK_TOP_MEMDESC_INDEX, 2, (tv_t *[]){buf, i}, r);
}

static void ws_op1(drk_lctx_t *c, drk_tile_opcode_t code, tv_t *x, const char *attr, int64_t v) {
  drk_tile_op_t *op = drk_tile_build(&c->b, code, x ? 1 : 0, x ? &x : NULL, 0, NULL);
  if (attr) drk_tile_op_set_int(c->m, op, attr, v);
}

static void ws_wait(drk_lctx_t *c, tv_t *bar, tv_t *parity) {
  drk_tile_build(&c->b, DRK_TOP_MBARRIER_WAIT, 2, (tv_t *[]){bar, parity}, 0, NULL);
}

/* named barrier `id` of `threads` threads (inside warp groups) */
static void ws_bar(drk_lctx_t *c, int id, int threads) {
  drk_tile_op_t *op = drk_tile_build(&c->b, DRK_TOP_BARRIER, 0, NULL, 0, NULL);
  drk_tile_op_set_int(c->m, op, "id", id);
  drk_tile_op_set_int(c->m, op, "threads", threads);
}

static void ws_setmaxnreg(drk_lctx_t *c, int regs, const char *action) {
  drk_tile_op_t *op = drk_tile_build(&c->b, DRK_TOP_SETMAXNREG, 0, NULL, 0, NULL);
  drk_tile_op_set_int(c->m, op, "regs", regs);
  drk_tile_op_set_ident(c->m, op, "action", action);
}

/* Whether the Hopper kernel takes this node; false leaves the general kernel to it. */
static bool ws_eligible(drk_lctx_t *c, const mm_t *s, const drk_schedule_t *S, ws_batch_t *ba, ws_batch_t *bb) {
  const drk_node_t *n = c->node;
  if (!S->mma || n->op != DRK_OP_MATMUL || n->inputs[0]->shape.rank < 2 || n->inputs[1]->shape.rank < 2) return false;
  if (s->K % 8 || s->sbk % 8 || s->M < 1 || s->K < 1) return false; /* B's rows: 16-byte strides */
  *ba = ws_batch_kind(s, s->bas, s->M * s->K);
  *bb = ws_batch_kind(s, s->bbs, s->K * s->N);
  if (*ba == WS_NONE || *bb == WS_NONE) return false;
  if (*bb == WS_FULL && s->batch > 1 && s->K % S->tile_k) return false;
  if (s->batch * s->M >= ((int64_t)1 << 31) - 256 || s->batch * s->K >= ((int64_t)1 << 31) - 256) return false;
  return true;
}

/* A 1-D or 2-D convolution's geometry as 2-D (a 1-D one is one row high): input, output and
 * kernel extents, strides, begin pads, dilations, rows then columns. */
typedef struct conv2 {
  int64_t I[2], O[2], K[2], st[2], pad[2], dil[2];
} conv2_t;

static conv2_t conv2_of(const mm_t *s) {
  conv2_t v = {{1, 1}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {1, 1}};
  for (int d = 0; d < s->nsp && d < 2; d++) {
    int j = d + 2 - s->nsp;
    v.I[j] = s->I[d], v.O[j] = s->O[d], v.K[j] = s->Kk[d], v.st[j] = s->st[d], v.pad[j] = s->pad[d], v.dil[j] = s->dil[d];
  }
  return v;
}

/* The conv's fused epilogue for drk_sched_conv_ws: light when every member is a cheap
 * per-element op (few registers per accumulator), so BN = 256 does not spill. */
static int conv_epi_kind(const drk_lctx_t *c) {
  if (!c->epi) return DRK_CONV_EPI_NONE;
  const drk_fusion_group_t *gr = &c->epi->groups[c->epi_group];
  for (int i = 0; i < gr->n_nodes; i++) {
    const drk_node_t *n = c->g->nodes[gr->nodes[i]];
    switch (n->op) {
      case DRK_OP_CONV_NHWC: case DRK_OP_ADD: case DRK_OP_SUB: case DRK_OP_MUL: case DRK_OP_RELU:
      case DRK_OP_CLIP: case DRK_OP_MAX: case DRK_OP_MIN: case DRK_OP_CAST: case DRK_OP_IDENTITY:
        break;
      default: return DRK_CONV_EPI_OTHER;
    }
  }
  return DRK_CONV_EPI_LIGHT;
}

/* Whether a ConvNHWC on sm_90a (16-bit: the caller checked drk_sched_mm_ws) takes the
 * implicit-GEMM form of the Hopper kernel; false sets *why (--report) for the mma_sync one. */
static bool conv_ws_eligible(drk_lctx_t *c, const mm_t *s, const char **why) {
  if (s->nsp > 2) return *why = "TMA + wgmma convolution: 3-D convolutions (the box per tap is [images, rows, columns, C])", false;
  if (s->G != 1) return *why = "TMA + wgmma convolution: groups > 1 (one GEMM per group is not written yet)", false;
  if (s->C % 8) return *why = "TMA + wgmma convolution: C is not a multiple of 8 (TMA strides are multiples of 16 bytes)", false;
  conv2_t v = conv2_of(s);
  if (v.st[0] > 8 || v.st[1] > 8) return *why = "TMA + wgmma convolution: stride > 8 (TMA element strides are 1..8)", false;
  /* on by default since the H200 checked it (device call 36: ResNet-50 b1 within 0.0053 of the
   * interpreter, conv3x3 56x56 C256 at 0.84x cuDNN where mma_sync is at 0.28x); below 64
   * channels only when pinned: the 16/32-channel k steps are exact but slow (device call 38:
   * ResNet-50's stem padded to C = 8 took 1.12 ms on them, 0.24 ms on mma_sync) */
  int pin = drk_knob_or(&c->o.knobs, DRK_KNOB_CONV_HOPPER, -1);
  if (pin == 0) return *why = "TMA + wgmma convolution off (conv.hopper=0 pinned)", false;
  if (pin != 1 && s->C < 64)
    return *why = "TMA + wgmma convolution: C < 64 (its 16/32-channel steps are slower than mma_sync; conv.hopper=1 forces it)",
           false;
  drk_schedule_t S = drk_sched_conv_ws(s->Nb, v.O[0], v.O[1], s->N, s->K, v.st, s->t, &c->o, conv_epi_kind(c));
  if (!S.mma) return *why = "TMA + wgmma convolution: the pinned conv.tile_h x conv.tile_w window needs a TMA box over 256", false;
  return true;
}

/* The kernel's fixed parts. */
typedef struct ws {
  const mm_t *s;
  ws_batch_t ba, bb;
  int64_t M, batch, BM, BN, BK, ST, NC, SP, NK, KPS, TM, TN;
  int64_t CL;  /* programs per cluster along M (1 or 2), sharing B by multicast */
  int64_t G;   /* output columns per tile: BN, or BN / 2 when paired */
  bool pair;   /* paired (c->epi_pair): B chunks [0, NC/2) from the anchor's weight (db), the
                * rest from the paired MatMul's (db2), the same G columns of each */
  bool staged; /* the epilogue reads the tile back from shared memory in rows of 16 bytes */
  int64_t stage_off; /* staged persistent forms: staging buffers of their own at this offset
                      * (the ring is still filling for the next tile); 0: in the ring */
  tv_t *rank; /* CL > 1: the program's rank in its cluster */
  /* conv (ConvNHWC, 2-D, groups 1): the M tile is CI images x CH rows x CW columns of the
   * output (TH x TW windows per image group), k step kp = tap * CB + channel chunk (CB chunks
   * of 64 channels per tap); pb: the bias or NULL */
  bool conv;
  conv2_t cv;
  int64_t CI, CH, CW, TH, TW, CB;
  tv_t *pb;
  tv_t *msize; /* runtime sizes: M as a parameter (one problem, a tile per program), else NULL */
  tv_t *da, *db, *db2, *py;
  tv_t *sa_t, *sa_w, *sb_t, *sb_w, *full, *empty, *order;
} ws_t;

/* One tile's coordinates: first row and column, grid z (split * batch + batch index), its
 * k tiles [kbeg, kbeg + nk), A's first row and B's first row in the 2-D descriptors. */
typedef struct ws_tile {
  tv_t *m0, *n0, *pz, *kbeg, *nk, *arow, *bk0;
  tv_t *cn, *coh, *cow; /* conv: the window's first image, output row and column */
} ws_tile_t;

static ws_tile_t ws_tile(drk_lctx_t *c, const ws_t *W, tv_t *pm, tv_t *pn, tv_t *pz) {
  drk_dtype_t I = DRK_DT_I32;
  ws_tile_t T = {BIN(MUL, pm, lw_sci(c, I, W->BM)), BIN(MUL, pn, lw_sci(c, I, W->G)), pz, lw_sci(c, I, 0),
                 lw_sci(c, I, W->NK), NULL, NULL, NULL, NULL, NULL};
  tv_t *pb = pz;
  if (W->SP > 1) {
    tv_t *sp = W->batch > 1 ? BIN(DIV, pz, lw_sci(c, I, W->batch)) : pz;
    pb = W->batch > 1 ? BIN(REM, pz, lw_sci(c, I, W->batch)) : lw_sci(c, I, 0);
    T.kbeg = BIN(MUL, sp, lw_sci(c, I, W->KPS));
    T.nk = BIN(MIN, lw_sci(c, I, W->KPS), BIN(SUB, lw_sci(c, I, W->NK), T.kbeg));
  }
  if (W->conv) {
    tv_t *win = BIN(REM, pm, lw_sci(c, I, W->TH * W->TW));
    T.cn = BIN(MUL, BIN(DIV, pm, lw_sci(c, I, W->TH * W->TW)), lw_sci(c, I, W->CI));
    T.coh = BIN(MUL, BIN(DIV, win, lw_sci(c, I, W->TW)), lw_sci(c, I, W->CH));
    T.cow = BIN(MUL, BIN(REM, win, lw_sci(c, I, W->TW)), lw_sci(c, I, W->CW));
  }
  T.arow = W->ba == WS_FULL && W->batch > 1 ? BIN(ADD, BIN(MUL, pb, lw_sci(c, I, W->M)), T.m0) : T.m0;
  T.bk0 = W->bb == WS_FULL && W->batch > 1 ? BIN(MUL, pb, lw_sci(c, I, W->s->K)) : lw_sci(c, I, 0);
  return T;
}

/* Persistent form: tile t of the grid (M tiles fastest, then N tiles, then batch). */
static ws_tile_t ws_tile_at(drk_lctx_t *c, const ws_t *W, tv_t *t) {
  drk_dtype_t I = DRK_DT_I32;
  tv_t *r = BIN(DIV, t, lw_sci(c, I, W->TM));
  return ws_tile(c, W, BIN(REM, t, lw_sci(c, I, W->TM)), BIN(REM, r, lw_sci(c, I, W->TN)), BIN(DIV, r, lw_sci(c, I, W->TN)));
}

/* ring stage and fill parity of ring position g */
static tv_t *ws_stage(drk_lctx_t *c, const ws_t *W, tv_t *g) { return BIN(REM, g, lw_sci(c, DRK_DT_I32, W->ST)); }
static tv_t *ws_parity(drk_lctx_t *c, const ws_t *W, tv_t *g) {
  return BIN(AND, BIN(DIV, g, lw_sci(c, DRK_DT_I32, W->ST)), lw_sci(c, DRK_DT_I32, 1));
}

/* Producer: the tile's k steps at ring positions g0 + k. */
static void ws_produce(drk_lctx_t *c, const ws_t *W, const ws_tile_t *T, tv_t *g0) {
  drk_dtype_t I = DRK_DT_I32;
  drk_tile_op_t *f = drk_tile_build_for_begin(&c->b, lw_sci(c, I, 0), T->nk, lw_sci(c, I, 1), 0, NULL);
  tv_t *kp = f->regions[0]->args[0], *g = g0 ? BIN(ADD, g0, kp) : kp;
  tv_t *st = ws_stage(c, W, g);
  ws_wait(c, ws_index(c, W->empty, st), BIN(SUB, lw_sci(c, I, 1), ws_parity(c, W, g)));
  tv_t *fb = ws_index(c, W->full, st);
  int64_t es = drk_dtype_bits(W->s->t) / 8;
  ws_op1(c, DRK_TOP_MBARRIER_EXPECT_TX, fb, "bytes", (W->BM + W->BN) * W->BK * es);
  if (W->conv) {
    /* tap (r, q) and channels [c0, c0 + BK): A is the input window shifted by the tap, one
     * 4-D box [images, CH, CW, BK] (rows and columns `stride` apart: the descriptor's element
     * strides); coordinates off the input (padding, channels past C, pixels past the
     * output's edge) read zeros. B is the filter's [BN, 1, BK] box at (n0, tap, c0). */
    tv_t *ks = W->SP > 1 ? BIN(ADD, T->kbeg, kp) : kp;
    tv_t *tap = BIN(DIV, ks, lw_sci(c, I, W->CB)), *c0 = BIN(MUL, BIN(REM, ks, lw_sci(c, I, W->CB)), lw_sci(c, I, W->BK));
    const conv2_t *v = &W->cv;
    tv_t *r = BIN(DIV, tap, lw_sci(c, I, v->K[1])), *q = BIN(REM, tap, lw_sci(c, I, v->K[1]));
    tv_t *ih = BIN(ADD, BIN(SUB, BIN(MUL, T->coh, lw_sci(c, I, v->st[0])), lw_sci(c, I, v->pad[0])), BIN(MUL, r, lw_sci(c, I, v->dil[0])));
    tv_t *iw = BIN(ADD, BIN(SUB, BIN(MUL, T->cow, lw_sci(c, I, v->st[1])), lw_sci(c, I, v->pad[1])), BIN(MUL, q, lw_sci(c, I, v->dil[1])));
    drk_tile_build(&c->b, DRK_TOP_TMA_LOAD, 7, (tv_t *[]){W->da, ws_index(c, W->sa_t, st), fb, T->cn, ih, iw, c0}, 0, NULL);
    drk_tile_build(&c->b, DRK_TOP_TMA_LOAD, 6, (tv_t *[]){W->db, ws_index(c, W->sb_t, st), fb, T->n0, tap, c0}, 0, NULL);
    drk_tile_build_for_end(&c->b, 0, NULL);
    return;
  }
  tv_t *kk = BIN(MUL, W->SP > 1 ? BIN(ADD, T->kbeg, kp) : kp, lw_sci(c, I, W->BK));
  drk_tile_build(&c->b, DRK_TOP_TMA_LOAD, 5, (tv_t *[]){W->da, ws_index(c, W->sa_t, st), fb, T->arow, kk}, 0, NULL);
  tv_t *sbs = ws_index(c, W->sb_t, st), *kb = BIN(ADD, T->bk0, kk);
  /* cluster: chunks j = CL i + rank, each multicast to every program of the cluster */
  for (int64_t i = 0; i < W->NC / W->CL; i++) {
    int64_t col = W->pair && i >= W->NC / 2 ? i - W->NC / 2 : i; /* chunk's column offset / 64 in its weight */
    tv_t *j = lw_sci(c, I, i), *nj = col ? BIN(ADD, T->n0, lw_sci(c, I, 64 * col)) : T->n0;
    if (W->CL > 1) {
      j = BIN(ADD, lw_sci(c, I, W->CL * i), W->rank);
      nj = BIN(ADD, T->n0, BIN(MUL, j, lw_sci(c, I, 64)));
    }
    tv_t *desc = W->pair && i >= W->NC / 2 ? W->db2 : W->db;
    drk_tile_op_t *ld = drk_tile_build(&c->b, DRK_TOP_TMA_LOAD, 5, (tv_t *[]){desc, ws_index(c, sbs, j), fb, kb, nj}, 0, NULL);
    if (W->CL > 1) drk_tile_op_set_int(c->m, ld, "multicast", (1 << W->CL) - 1);
  }
  drk_tile_build_for_end(&c->b, 0, NULL);
}

/* A consumer warpgroup is done with ring stage `bar`'s buffers: one arrival on its empty
 * barrier, in every program of the cluster (each one's producer multicasts into all). */
static void ws_release(drk_lctx_t *c, const ws_t *W, tv_t *st) {
  if (W->CL == 1) {
    ws_op1(c, DRK_TOP_MBARRIER_ARRIVE, ws_index(c, W->empty, st), NULL, 0);
    return;
  }
  for (int64_t r = 0; r < W->CL; r++)
    drk_tile_build(&c->b, DRK_TOP_MBARRIER_ARRIVE, 2, (tv_t *[]){ws_index(c, W->empty, st), lw_sci(c, DRK_DT_I32, r)}, 0, NULL);
}

/* Masked store of rows [m0 + 64 h, +64) of the tile from the accumulator layout (through
 * the fused epilogue, if any). Staged (a tile per program, no split-K): the tile, rounded to
 * the output dtype (the MatMul result the epilogue reads), goes through shared memory into a
 * layout where each thread holds 8 consecutive columns, so the epilogue's loads and the
 * stores are 16 bytes wide instead of the accumulator layout's 4 (whose 8-row x 16-byte
 * store per instruction throttled the LSU: H200, Nsight Compute, 2048x5632x2048). Both
 * one-tile form: both consumer warpgroups first wait for each other (named barrier 1): the
 * ring is free then (every stage consumed, no wgmma in flight) and holds the two 64 x BN
 * staging buffers. Persistent forms: buffer `slot` of their own (the cooperative form's
 * warpgroup w its half, slot w; ping-pong's warpgroup w both halves, slots 2 w + h), between
 * two barriers of the warpgroup (named barrier 2 + slot): the previous tile's reads of the
 * buffer are done before it is overwritten. */
static void ws_store(drk_lctx_t *c, const ws_t *W, const ws_tile_t *T, int h, int slot, tv_t *res) {
  drk_tile_module_t *m = c->m;
  const int64_t G = W->G, M = W->M, N = W->s->N, es = drk_dtype_bits(W->s->t) / 8;
  if (W->pb) {
    /* Conv's bias, added to the f32 accumulator as the general kernel does */
    const drk_tile_layout_t *al = res->type.layout;
    tv_t *bj = lw_cast(c, lw_range(c, G, drk_tile_layout_slice(m, al, 0)), c->it);
    tv_t *bc = BIN(ADD, lw_splat(c, lw_cast(c, T->n0, c->it), &bj->type), bj);
    tv_t *bias = lw_cast(c, lw_load(c, W->pb, bc, lw_cmp(c, "lt", bc, lw_ci(c, bc, N)), 0), DRK_DT_F32);
    res = BIN(ADD, res, lw_bcast_col(c, bias, al, 64, G));
  }
  if (W->staged) {
    int64_t off = W->stage_off ? W->stage_off + slot * 64 * W->BN * es : h * 64 * W->BN * es;
    ws_bar(c, W->stage_off ? 2 + slot : 1, W->stage_off ? 128 : 256);
    const drk_tile_layout_t *SL = drk_tile_layout_shared(m, 128, 2, (int[]){1, 0});
    tv_t *buf = drk_tile_build1(&c->b, DRK_TOP_LOCAL_ALLOC, 0, NULL, drk_tile_type_smem(W->s->t, 2, (int64_t[]){64, W->BN}, SL));
    drk_tile_op_set_int(m, buf->def, "offset", off);
    drk_tile_build(&c->b, DRK_TOP_LOCAL_STORE, 2, (tv_t *[]){buf, lw_cast(c, res, W->s->t)}, 0, NULL);
    ws_bar(c, 2 + (W->stage_off ? slot : h), 128);
    /* 8 columns a thread (16-byte vectors) where rows start aligned; else (result_n: a
     * padded LM head's 50257-wide rows) one column a thread, a warp's lanes along the row,
     * so that the element-wise stores of a warp still cover whole sectors */
    int v = N % 8 == 0 ? 8 : 1;
    int tc = (int)(G / v < 32 ? G / v : 32);
    const drk_tile_layout_t *L = drk_tile_layout_blocked(m, 2, (int[]){1, v}, (int[]){32 / tc, tc}, (int[]){4, 1}, (int[]){1, 0});
    drk_tile_type_t ht = drk_tile_type_tile(W->s->t, 2, (int64_t[]){64, G}, L);
    if (W->pair) {
      /* the halves [64 x G] (the anchor's columns, then the paired MatMul's): each its own
       * run of 64-column chunks, so a buffer of the same layout at the half's offset */
      tv_t *hb[2];
      for (int k = 0; k < 2; k++) {
        hb[k] = drk_tile_build1(&c->b, DRK_TOP_LOCAL_ALLOC, 0, NULL, drk_tile_type_smem(W->s->t, 2, (int64_t[]){64, G}, SL));
        drk_tile_op_set_int(m, hb[k]->def, "offset", off + k * 64 * G * es);
      }
      res = drk_tile_build1(&c->b, DRK_TOP_LOCAL_LOAD, 1, &hb[0], ht);
      c->epi_pair_res = drk_tile_build1(&c->b, DRK_TOP_LOCAL_LOAD, 1, &hb[1], ht);
    } else {
      res = drk_tile_build1(&c->b, DRK_TOP_LOCAL_LOAD, 1, &buf, ht);
    }
  }
  const drk_tile_layout_t *acc_l = res->type.layout;
  const drk_tile_layout_t *Cr = drk_tile_layout_slice(m, acc_l, 1), *Cc = drk_tile_layout_slice(m, acc_l, 0);
  tv_t *mw = lw_cast(c, BIN(ADD, T->m0, lw_sci(c, DRK_DT_I32, 64 * h)), c->it), *nw = lw_cast(c, T->n0, c->it);
  tv_t *ei = lw_cast(c, lw_range(c, 64, Cr), c->it);
  tv_t *erow = BIN(ADD, lw_splat(c, mw, &ei->type), ei);
  tv_t *ej = lw_cast(c, lw_range(c, G, Cc), c->it);
  tv_t *ecol = BIN(ADD, lw_splat(c, nw, &ej->type), ej);
  tv_t *rmask = lw_size_lt(c, erow, W->msize, M), *rp;
  if (W->conv) {
    /* tile row i: pixel (cn + i / (CH CW), coh + i / CW % CH, cow + i % CW) of the output,
     * stored when inside it; y [Nb, OH, OW, OC] */
    const mm_t *s = W->s;
    tv_t *li = BIN(ADD, ei, lw_ci(c, ei, 64 * h));
    tv_t *im = BIN(ADD, lw_splat(c, lw_cast(c, T->cn, c->it), &li->type), BIN(DIV, li, lw_ci(c, li, W->CH * W->CW)));
    tv_t *oh = BIN(ADD, lw_splat(c, lw_cast(c, T->coh, c->it), &li->type), BIN(REM, BIN(DIV, li, lw_ci(c, li, W->CW)), lw_ci(c, li, W->CH)));
    tv_t *ow = BIN(ADD, lw_splat(c, lw_cast(c, T->cow, c->it), &li->type), BIN(REM, li, lw_ci(c, li, W->CW)));
    const int64_t *O = W->cv.O;
    rmask = BIN(AND, BIN(AND, lw_cmp(c, "lt", im, lw_ci(c, im, s->Nb)), lw_cmp(c, "lt", oh, lw_ci(c, oh, O[0]))),
                lw_cmp(c, "lt", ow, lw_ci(c, ow, O[1])));
    rp = BIN(MUL, BIN(ADD, BIN(MUL, BIN(ADD, BIN(MUL, im, lw_ci(c, im, O[0])), oh), lw_ci(c, oh, O[1])), ow), lw_ci(c, ow, N));
  } else {
    rp = BIN(MUL, erow, lw_ci(c, erow, N));
  }
  tv_t *emask = BIN(AND, lw_bcast_row(c, rmask, acc_l, 64, G), lw_bcast_col(c, lw_cmp(c, "lt", ecol, lw_ci(c, ecol, N)), acc_l, 64, G));
  /* split-K: z * M * N is split * numel(y) + the batch's offset */
  if (W->batch > 1 || W->SP > 1)
    rp = BIN(ADD, rp, lw_splat(c, BIN(MUL, lw_cast(c, T->pz, c->it), lw_sci(c, c->it, M * N)), &rp->type));
  tv_t *yoff = BIN(ADD, lw_bcast_row(c, rp, acc_l, 64, G), lw_bcast_col(c, ecol, acc_l, 64, G));
  if (W->SP > 1) lw_store(c, W->py, yoff, res, emask);
  else lw_mm_store(c, W->py, yoff, res, emask);
}

/* Consumer: the tile's k steps at ring positions g0 + k on row halves [h0, h0 + nh) (64
 * rows each), then their stores. handoff (or NULL): arrived on once the last wgmma is
 * issued. persistent: the tile's last stage is released after the final wait (the ring
 * goes on), one arrival per stage. */
/* One k step of a consumer: wait for ring stage g % ST, its wgmma on the accumulators acc
 * (rows [64 h0, +64 nh) of the tile), commit, wait until WS_PENDING groups remain; the
 * stage of the step before is released (this step's wgmma may still read its own), except
 * after the first step. out: the accumulators, possibly still in flight. */
static void ws_step(drk_lctx_t *c, const ws_t *W, tv_t *g, int h0, int nh, tv_t *const *acc, bool first, tv_t **out) {
  drk_dtype_t I = DRK_DT_I32;
  tv_t *st = ws_stage(c, W, g);
  ws_wait(c, ws_index(c, W->full, st), ws_parity(c, W, g));
  drk_tile_build(&c->b, DRK_TOP_WGMMA_FENCE, 0, NULL, 0, NULL);
  tv_t *d[2], *b = ws_index(c, W->sb_w, st), *sas = ws_index(c, W->sa_w, st);
  drk_tile_type_t ts[2] = {acc[0]->type, acc[0]->type};
  for (int h = 0; h < nh; h++) {
    tv_t *a = ws_index(c, sas, lw_sci(c, I, h0 + h));
    drk_tile_op_t *dot = drk_tile_build(&c->b, DRK_TOP_DOT, 3, (tv_t *[]){a, b, acc[h]}, 1, &ts[0]);
    drk_tile_op_set_ident(c->m, dot, "kind", "wgmma");
    d[h] = dot->results[0];
  }
  drk_tile_build(&c->b, DRK_TOP_WGMMA_COMMIT, 0, NULL, 0, NULL);
  drk_tile_op_t *wt = drk_tile_build(&c->b, DRK_TOP_WGMMA_WAIT, nh, d, nh, ts);
  drk_tile_op_set_int(c->m, wt, "pending", WS_PENDING);
  if (WS_PENDING == 0) ws_release(c, W, st);
  else if (!first) ws_release(c, W, BIN(REM, BIN(ADD, g, lw_sci(c, I, W->ST - 1)), lw_sci(c, I, W->ST)));
  for (int h = 0; h < nh; h++) out[h] = wt->results[h];
}

/* The first k step is peeled off the loop: its dot starts from constant zero accumulators,
 * which the NVPTX backend issues as scale-d 0 with no accumulator input (nothing but wgmma
 * defines them), and the loop over the others has no branch. With the zeros going into the
 * loop instead, k loops of 1-4 steps that LLVM unrolled made ptxas serialize the wgmma
 * (C7520: ConvNeXt's K = 96 MLP matmul, 55 TFLOP/s on the H200); the loop is also kept a
 * loop ({unroll = 0}). */
static void ws_consume(drk_lctx_t *c, const ws_t *W, const ws_tile_t *T, tv_t *g0, int w, int h0, int nh, tv_t *handoff,
                       bool persistent) {
  drk_dtype_t I = DRK_DT_I32;
  const drk_tile_layout_t *acc_l = drk_tile_layout_mma(c->m, DRK_TL_WGMMA, 4, 1, 64, (int)W->BN);
  drk_tile_type_t at = drk_tile_type_tile(DRK_DT_F32, 2, (int64_t[]){64, W->BN}, acc_l), ts[2] = {at, at};
  tv_t *zero[2], *first[2];
  for (int h = 0; h < nh; h++) zero[h] = drk_tile_build_const_float(&c->b, 0.0, at);
  ws_step(c, W, g0 ? g0 : lw_sci(c, I, 0), h0, nh, zero, true, first);
  drk_tile_op_t *f = drk_tile_build_for_begin(&c->b, lw_sci(c, I, 1), T->nk, lw_sci(c, I, 1), nh, first);
  drk_tile_op_set_int(c->m, f, "unroll", 0);
  tv_t *k = f->regions[0]->args[0], *out[2];
  ws_step(c, W, g0 ? BIN(ADD, g0, k) : k, h0, nh, &f->regions[0]->args[1], false, out);
  f = drk_tile_build_for_end(&c->b, nh, out);
  if (handoff) ws_op1(c, DRK_TOP_MBARRIER_ARRIVE, handoff, NULL, 0);
  tv_t *res[2] = {f->results[0], nh > 1 ? f->results[1] : NULL};
  if (WS_PENDING) {
    drk_tile_op_t *wt = drk_tile_build(&c->b, DRK_TOP_WGMMA_WAIT, nh, res, nh, ts);
    drk_tile_op_set_int(c->m, wt, "pending", 0);
    for (int h = 0; h < nh; h++) res[h] = wt->results[h];
  }
  if (persistent) {
    tv_t *last = BIN(SUB, BIN(ADD, g0 ? g0 : lw_sci(c, I, 0), T->nk), lw_sci(c, I, 1));
    ws_release(c, W, ws_stage(c, W, last));
  }
  for (int h = 0; h < nh; h++) ws_store(c, W, T, h0 + h, nh > 1 ? 2 * w + h : w, res[h]);
}

/* B shared by every batch and A a contiguous batch: one [batch*M, N] problem */
static void ws_fold(ws_batch_t ba, ws_batch_t bb, int64_t *M, int64_t *batch) {
  if (*batch > 1 && bb == WS_BCAST && ba == WS_FULL) *M *= *batch, *batch = 1;
}

/* The schedule of a paired kernel: that of the problem [M, 2N] with no epilogue (the
 * epilogue runs on [64 x BN/2] halves after the staging, so BN = 256 does not spill). */
static drk_schedule_t ws_pair_sched(drk_lctx_t *c, const mm_t *s, int64_t M, int64_t batch) {
  /* the one-tile form unless pinned (the short-K cooperative default was measured unpaired) */
  drk_lower_options_t o = c->o;
  int pin;
  if (!drk_knob_pinned(&o.knobs, DRK_KNOB_MM_PERSISTENT, &pin)) drk_knob_set(&o.knobs, DRK_KNOB_MM_PERSISTENT, 0);
  drk_schedule_t S = drk_sched_mm_ws(M, 2 * s->N, s->K, batch, s->t, &o, false);
  if (S.tile_n >= 128 || drk_knob_pinned(&c->o.knobs, DRK_KNOB_MM_TILE_N, &pin)) return S;
  /* halves of at least one 64-column chunk: BN 128 where the heuristic (small problems) took 64 */
  drk_knob_set(&o.knobs, DRK_KNOB_MM_TILE_N, 128);
  return drk_sched_mm_ws(M, 2 * s->N, s->K, batch, s->t, &o, false);
}

bool drk_lower_matmul_pairs(drk_lctx_t *c) {
  mm_t s;
  if (drk_knob_or(&c->o.knobs, DRK_KNOB_MM_PAIR, 1) == 0 || !mm_setup(c, &s)) return false;
  drk_schedule_t W = drk_sched_mm_ws(s.M, s.N, s.K, s.batch, s.t, &c->o, true);
  ws_batch_t ba, bb;
  if (!ws_eligible(c, &s, &W, &ba, &bb)) return false;
  int64_t M = s.M, batch = s.batch;
  ws_fold(ba, bb, &M, &batch);
  W = ws_pair_sched(c, &s, M, batch);
  return W.split_k <= 1 && W.staged && W.tile_n >= 128;
}

static bool mm_hopper(drk_lctx_t *c, mm_t *s, drk_schedule_t S, ws_batch_t ba, ws_batch_t bb) {
  const drk_node_t *n = c->node;
  drk_tile_module_t *m = c->m;
  int64_t es = drk_dtype_bits(s->t) / 8;
  int64_t M = s->M, batch = s->batch;
  ws_fold(ba, bb, &M, &batch);
  /* tiles, split-K and form for the grid this kernel has (and its epilogue); paired: the
   * problem of both weights side by side */
  bool pair = c->epi_pair != NULL;
  conv2_t cv;
  memset(&cv, 0, sizeof cv);
  if (s->conv) cv = conv2_of(s);
  S = s->conv ? drk_sched_conv_ws(s->Nb, cv.O[0], cv.O[1], s->N, s->K, cv.st, s->t, &c->o, conv_epi_kind(c))
      : pair  ? ws_pair_sched(c, s, M, batch)
              : drk_sched_mm_ws(M, s->N, s->K, batch, s->t, &c->o, c->epi != NULL);
  ws_t W = {.s = s, .ba = ba, .bb = bb, .M = M, .batch = batch, .BM = S.tile_m, .BN = S.tile_n, .BK = S.tile_k,
            .ST = S.stages, .NC = S.tile_n / 64, .G = pair ? S.tile_n / 2 : S.tile_n, .pair = pair};
  W.SP = S.split_k > 1 && batch * S.split_k <= 65535 && !S.persistent ? S.split_k : 1;
  S.split_k = (int)W.SP;
  W.NK = (s->K + W.BK - 1) / W.BK, W.KPS = (W.NK + W.SP - 1) / W.SP;
  /* every split gets a k tile (a pinned split_k past the tiles: fewer splits); the consumer
   * issues its first k step unconditionally */
  W.SP = (W.NK + W.KPS - 1) / W.KPS;
  S.split_k = (int)W.SP;
  W.TM = (M + W.BM - 1) / W.BM, W.TN = (s->N + W.G - 1) / W.G;
  if (s->conv) {
    W.conv = true;
    W.cv = cv;
    /* k step: one tap's chunk of BK channels; few channels (C <= 32: the stem, padded to 8 by
     * the layout pass) take 16- or 32-channel chunks (32- or 64-byte swizzle) so that the
     * chunk is not mostly zeros (C = 8 in 64-channel chunks computes 8x the work), and more
     * stages of the smaller ring to keep as many bytes in flight */
    int pin;
    W.BK = s->C <= 16 ? 16 : s->C <= 32 ? 32 : 64;
    S.tile_k = (int)W.BK;
    if (W.BK < 64 && !drk_knob_pinned(&c->o.knobs, DRK_KNOB_MM_STAGES, &pin)) W.ST = W.ST * 64 / W.BK > 8 ? 8 : W.ST * 64 / W.BK;
    W.CH = S.conv_h, W.CW = S.conv_w, W.CI = W.BM / (W.CH * W.CW);
    W.TH = (cv.O[0] + W.CH - 1) / W.CH, W.TW = (cv.O[1] + W.CW - 1) / W.CW, W.CB = (s->C + W.BK - 1) / W.BK;
    /* split-K over the (tap, chunk) steps, none empty */
    W.NK = s->KS * W.CB, W.KPS = (W.NK + W.SP - 1) / W.SP, W.SP = (W.NK + W.KPS - 1) / W.KPS;
    S.split_k = (int)W.SP;
    W.TM = (s->Nb + W.CI - 1) / W.CI * W.TH * W.TW;
  }
  int64_t tiles = W.TM * W.TN * batch, NP = tiles < S.persistent ? tiles : S.persistent;
  W.CL = S.cluster > 1 && !NP && !pair && W.NC % S.cluster == 0 && W.TM > 1 ? S.cluster : 1;
  W.staged = W.SP == 1 && S.staged;
  /* persistent and staged: staging buffers of their own (2 slots cooperative, 4 ping-pong)
   * after the ring and its barriers, 1024-byte aligned; the ring gives up stages to make room */
  int64_t stage_bufs = W.staged && NP ? (S.coop ? 2 : 4) * 64 * W.BN * es : 0;
  if (stage_bufs) {
    int64_t fit = (WS_SMEM_MAX - stage_bufs - 1024 - 32) / ((W.BM + W.BN) * W.BK * es + 16);
    if (fit < W.ST) W.ST = fit;
    if (W.ST < 2) W.staged = false, W.ST = S.stages, stage_bufs = 0;
  }
  S.staged = W.staged;
  S.stages = (int)W.ST;
  S.cluster = (int)W.CL;
  S.pair = pair;
  { /* a pinned schedule whose ring does not fit: the user's error, named (not a tile IR
     * that fails to verify); the byte count is the one the kernel below lays out */
    int64_t ob = W.ST * W.BM * W.BK * es, obar = ob + W.ST * W.BK * W.BN * es;
    if (W.staged && !stage_bufs && obar < 2 * 64 * W.BN * es) obar = 2 * 64 * W.BN * es;
    int64_t need = obar + 16 * W.ST + (NP ? 16 : 0);
    if (stage_bufs) need = (need + 1023) / 1024 * 1024 + stage_bufs;
    if (need > WS_SMEM_MAX)
      return lw_err(c, "the schedule needs %lld bytes of shared memory (%lld stages of %lld x %lld and %lld x %lld tiles), "
                    "more than the %d a program has on sm_90a: pin fewer mm.stages or a narrower mm.tile_n",
                    (long long)need, (long long)W.ST, (long long)W.BM, (long long)W.BK, (long long)W.BK, (long long)W.BN,
                    WS_SMEM_MAX);
  }
  int64_t rows_a = ba == WS_FULL ? batch * M : M, rows_b = bb == WS_FULL ? batch * s->K : s->K;
  int64_t big = W.SP * lw_numel(n->outputs[0]);
  int ws = W.SP > 1 ? lw_scratch_new(c, (uint64_t)big * 4) : -1;
  lw_kernel_begin(c, big < ((int64_t)1 << 31) - 65536 ? DRK_DT_I32 : DRK_DT_I64);

  const drk_tile_layout_t *SW = drk_tile_layout_shared(m, 128, 2, (int[]){1, 0});
  const drk_tile_layout_t *BAR = drk_tile_layout_shared(m, 0, 1, (int[]){0});
  drk_larg_tma_t ta = {s->t, 2, {s->K, rows_a}, {s->K * es}, {(int32_t)W.BK, (int32_t)W.BM}, 128, 256, false, {0}};
  drk_larg_tma_t tb = {s->t, 2, {s->N, rows_b}, {s->sbk * es}, {64, (int32_t)W.BK}, 128, 256, false, {0}};
  /* conv: X [Nb, IH, IW, C] as a 4-D tensor, W [OC, KH, KW, C] as [OC, taps, C] (channels
   * past C zero-filled in both, so C need not be a multiple of 64); strides of 16 bytes need
   * C % 8 == 0 (conv_ws_eligible) */
  /* conv: rows of BK channels, swizzled over their BK * es bytes (128 for 64 channels) */
  int csw = (int)(W.BK * es);
  const drk_tile_layout_t *SW4 = drk_tile_layout_shared(m, csw, 4, (int[]){3, 2, 1, 0});
  const drk_tile_layout_t *SW3 = drk_tile_layout_shared(m, csw, 3, (int[]){2, 1, 0});
  const drk_tile_layout_t *SWK = drk_tile_layout_shared(m, csw, 2, (int[]){0, 1}); /* B K-major: [BK, BN], K fastest */
  const drk_tile_layout_t *SWA = s->conv ? drk_tile_layout_shared(m, csw, 2, (int[]){1, 0}) : SW;
  if (s->conv) {
    int64_t C = s->C, IH = cv.I[0], IW = cv.I[1];
    int32_t bk = (int32_t)W.BK;
    drk_larg_tma_t ca = {s->t, 4, {C, IW, IH, s->Nb}, {C * es, IW * C * es, IH * IW * C * es},
                         {bk, (int32_t)(W.CW * cv.st[1]), (int32_t)(W.CH * cv.st[0]), (int32_t)W.CI}, csw, 256, false,
                         {1, (int32_t)cv.st[1], (int32_t)cv.st[0], 1}};
    drk_larg_tma_t cb = {s->t, 3, {C, s->KS, s->OC}, {C * es, s->KS * C * es}, {bk, 1, (int32_t)W.BN}, csw, 256, false, {0}};
    W.da = ws_param_tma(c, n->inputs[0], "desc_a", drk_tile_type_tmadesc(s->t, 4, (int64_t[]){W.CI, W.CH, W.CW, W.BK}, SW4), &ca);
    W.db = ws_param_tma(c, n->inputs[1], "desc_b", drk_tile_type_tmadesc(s->t, 3, (int64_t[]){W.BN, 1, W.BK}, SW3), &cb);
    /* split-K: the sum kernel adds the bias */
    if (W.SP == 1 && n->n_inputs > 2 && n->inputs[2]) W.pb = lw_param_buf(c, n->inputs[2], "bias");
  } else {
    W.da = ws_param_tma(c, n->inputs[0], "desc_a", drk_tile_type_tmadesc(s->t, 2, (int64_t[]){W.BM, W.BK}, SW), &ta);
    W.db = ws_param_tma(c, n->inputs[1], "desc_b", drk_tile_type_tmadesc(s->t, 2, (int64_t[]){W.BK, 64}, SW), &tb);
  }
  if (pair) W.db2 = ws_param_tma(c, c->epi_pair->inputs[1], "desc_b2", drk_tile_type_tmadesc(s->t, 2, (int64_t[]){W.BK, 64}, SW), &tb);
  W.py = W.SP > 1 ? lw_param_scratch(c, ws, DRK_DT_F32, "ws") : lw_mm_out_param(c, n->outputs[0]);
  /* M bounds only the rows stored when there is one problem and a tile per program (A's rows
   * past M read zeros through the descriptor, whose dims are launch arguments) */
  W.msize = !s->conv && !NP && batch == 1 && W.SP == 1 && W.CL == 1 ? lw_size_param(c, "m", M) : NULL;
  /* and the batch count (grid z; the outermost batch dim's size is in no offset) */
  tv_t *pbatch = !s->conv && !NP && batch > 1 && W.SP == 1 ? lw_size_param(c, "batch", batch) : NULL;

  const int64_t ST = W.ST;
  int64_t off_b = ST * W.BM * W.BK * es, off_bar = off_b + ST * W.BK * W.BN * es;
  /* the staged epilogue of a tile per program writes its two [64 x BN] halves over the ring:
   * a ring of narrow conv chunks (BK < 64) may be smaller, and the barriers stay past them */
  if (W.staged && !stage_bufs && off_bar < 2 * 64 * W.BN * es) off_bar = 2 * 64 * W.BN * es;
  int64_t smem = off_bar + 16 * ST + (NP ? 16 : 0);
  if (stage_bufs) {
    W.stage_off = (smem + 1023) / 1024 * 1024;
    smem = W.stage_off + stage_bufs;
  }
  drk_dtype_t I = DRK_DT_I32;
  if (s->conv) {
    /* the same bytes as the matmul's: A's box rows (image, row, column) are the tile's 128
     * rows of 128 bytes; B's box is BN rows of 64 k, read by wgmma as K-major [BK, BN] */
    W.sa_t = ws_alloc(c, 0, s->t, 5, (int64_t[]){ST, W.CI, W.CH, W.CW, W.BK}, SW4);
    W.sb_t = ws_alloc(c, off_b, s->t, 4, (int64_t[]){ST, W.BN, 1, W.BK}, SW3);
    W.sb_w = ws_alloc(c, off_b, s->t, 3, (int64_t[]){ST, W.BK, W.BN}, SWK);
  } else {
    W.sa_t = ws_alloc(c, 0, s->t, 3, (int64_t[]){ST, W.BM, W.BK}, SW);
    W.sb_t = ws_alloc(c, off_b, s->t, 4, (int64_t[]){ST, W.NC, W.BK, 64}, SW);
    W.sb_w = ws_alloc(c, off_b, s->t, 3, (int64_t[]){ST, W.BK, W.BN}, SW);
  }
  W.sa_w = ws_alloc(c, 0, s->t, 4, (int64_t[]){ST, 2, 64, W.BK}, SWA);
  W.full = ws_alloc(c, off_bar, DRK_DT_I64, 1, (int64_t[]){ST}, BAR);
  W.empty = ws_alloc(c, off_bar + 8 * ST, DRK_DT_I64, 1, (int64_t[]){ST}, BAR);
  if (NP) W.order = ws_alloc(c, off_bar + 16 * ST, DRK_DT_I64, 1, (int64_t[]){2}, BAR);
  for (int64_t i = 0; i < ST; i++) {
    tv_t *ci = lw_sci(c, I, i);
    ws_op1(c, DRK_TOP_MBARRIER_INIT, ws_index(c, W.full, ci), "count", 1);
    ws_op1(c, DRK_TOP_MBARRIER_INIT, ws_index(c, W.empty, ci), "count", NP && !S.coop ? 1 : 2 * W.CL);
  }
  for (int64_t i = 0; NP && !S.coop && i < 2; i++) ws_op1(c, DRK_TOP_MBARRIER_INIT, ws_index(c, W.order, lw_sci(c, I, i)), "count", 1);
  drk_tile_op_t *fe = drk_tile_build(&c->b, DRK_TOP_FENCE, 0, NULL, 0, NULL);
  drk_tile_op_set_ident(m, fe, "kind", "mbarrier_init");
  /* cluster: every program's barriers are initialized before any multicast or remote
   * arrival reaches them */
  drk_tile_op_t *sync = drk_tile_build(&c->b, DRK_TOP_BARRIER, 0, NULL, 0, NULL);
  if (W.CL > 1) drk_tile_op_set_ident(m, sync, "scope", "cluster");

  tv_t *pid = lw_pid(c, 0);
  if (c->it != I) pid = lw_cast(c, pid, I);
  if (W.CL > 1) {
    c->k->cluster[0] = W.CL; /* programs x .. x + CL-1: rows of one N tile */
    W.rank = BIN(REM, pid, lw_sci(c, I, W.CL));
  }
  /* tiles of this program (persistent): ceil((tiles - pid) / NP) */
  tv_t *mine = NP ? BIN(DIV, BIN(SUB, lw_sci(c, I, tiles + NP - 1), pid), lw_sci(c, I, NP)) : NULL;
  ws_tile_t T0 = {0};
  if (!NP) {
    tv_t *pn = lw_pid(c, 1), *pz = lw_pid(c, 2);
    if (c->it != I) pn = lw_cast(c, pn, I), pz = lw_cast(c, pz, I);
    T0 = ws_tile(c, &W, pid, pn, pz);
  }

  /* producer */
  drk_tile_build_warp_group_begin(&c->b, "producer", 0, 4);
  ws_setmaxnreg(c, 40, "dec");
  if (NP) {
    drk_tile_op_t *f = drk_tile_build_for_begin(&c->b, lw_sci(c, I, 0), mine, lw_sci(c, I, 1), 0, NULL);
    tv_t *j = f->regions[0]->args[0];
    ws_tile_t T = ws_tile_at(c, &W, BIN(ADD, pid, BIN(MUL, j, lw_sci(c, I, NP))));
    ws_produce(c, &W, &T, BIN(MUL, j, lw_sci(c, I, W.NK)));
    drk_tile_build_for_end(&c->b, 0, NULL);
  } else {
    ws_produce(c, &W, &T0, NULL);
  }
  drk_tile_build_warp_group_end(&c->b);

  /* consumers */
  for (int w = 0; w < 2; w++) {
    drk_tile_build_warp_group_begin(&c->b, "consumer", 4 + 4 * w, 4);
    ws_setmaxnreg(c, 232, "inc");
    if (NP && S.coop) {
      /* cooperative: every tile of the program, rows [64 w, +64) of each */
      drk_tile_op_t *f = drk_tile_build_for_begin(&c->b, lw_sci(c, I, 0), mine, lw_sci(c, I, 1), 0, NULL);
      tv_t *j = f->regions[0]->args[0];
      ws_tile_t T = ws_tile_at(c, &W, BIN(ADD, pid, BIN(MUL, j, lw_sci(c, I, NP))));
      ws_consume(c, &W, &T, BIN(MUL, j, lw_sci(c, I, W.NK)), w, w, 1, NULL, true);
      drk_tile_build_for_end(&c->b, 0, NULL);
    } else if (NP) {
      drk_tile_op_t *f = drk_tile_build_for_begin(&c->b, lw_sci(c, I, w), mine, lw_sci(c, I, 2), 0, NULL);
      tv_t *j = f->regions[0]->args[0];
      /* turn i = j / 2 of warpgroup w: wait for the other one's turn before (w 0: i - 1) */
      tv_t *par = BIN(AND, BIN(DIV, j, lw_sci(c, I, 2)), lw_sci(c, I, 1));
      if (w == 0) par = BIN(SUB, lw_sci(c, I, 1), par);
      ws_wait(c, ws_index(c, W.order, lw_sci(c, I, w)), par);
      ws_tile_t T = ws_tile_at(c, &W, BIN(ADD, pid, BIN(MUL, j, lw_sci(c, I, NP))));
      ws_consume(c, &W, &T, BIN(MUL, j, lw_sci(c, I, W.NK)), w, 0, 2, ws_index(c, W.order, lw_sci(c, I, 1 - w)), true);
      drk_tile_build_for_end(&c->b, 0, NULL);
    } else {
      ws_consume(c, &W, &T0, NULL, w, w, 1, NULL, false);
    }
    drk_tile_build_warp_group_end(&c->b);
  }
  /* cluster: no program exits while the other one may still arrive on its barriers */
  if (W.CL > 1) drk_tile_op_set_ident(m, drk_tile_build(&c->b, DRK_TOP_BARRIER, 0, NULL, 0, NULL), "scope", "cluster");
  if (NP) lw_kernel_end(c, NP, 1, 1, 12, smem, &S);
  else lw_kernel_end(c, (W.TM + W.CL - 1) / W.CL * W.CL, W.TN, batch * W.SP, 12, smem, &S);
  lw_grid_from(c, 0, W.msize, W.BM);
  lw_grid_from(c, 2, pbatch, 1);
  if (W.SP > 1) mm_splitk_sum(c, s, ws, W.SP, DRK_DT_F32);
  return true;
}

/* ---- the general kernel (every target): a ring of shared stages filled by cp_async ----
 *
 * k tile kt (BK wide) of A [BM x BK] and of B [BK x BN] goes global -> shared with cp_async
 * into stage kt % S of a ring of S buffers: 16-byte copies along the dim that is contiguous
 * in memory where the backend's axis facts allow (masked-off lanes zero-filled), narrower
 * or synchronous copies otherwise (the backend chooses per access; on AMD every copy is
 * synchronous). The prologue issues tiles 0..S-2, one commit group each. Step kt:
 *   cp_async_wait {pending = S-2}  groups 0..kt are complete: tile kt has landed;
 *   barrier                        tile kt is visible to every warp, and every warp is done
 *                                  reading stage (kt-1) % S (read at step kt-1);
 *   if kt+S-1 < NK: copy tile kt+S-1 into stage (kt+S-1) % S == (kt-1) % S;
 *   cp_async_commit                one group per step, empty past the end, so the count of
 *                                  groups before step kt's wait is always S-1+kt;
 *   local_load stage kt % S into the dot_op layouts (ldmatrix on NVIDIA), dot.
 * One barrier per step. Rows past M, columns past N and k past K are zero-filled in shared
 * memory, so they add nothing and any M, N, K (K not a multiple of BK included) work; the
 * epilogue masks the store. */

/* One operand's tile as the pipeline copies it. */
typedef struct mm_opnd {
  int64_t dims[2];                      /* A [BM, BK], B [BK, BN] */
  int kd;                               /* the K dim: A 1, B 0 */
  const drk_tile_layout_t *L, *Lr, *Lc; /* copy layout (blocked) and its row / column slices */
  tv_t *param, *ring;                   /* global buffer; smem<S x dims> */
  tv_t *fixed;                          /* [dims] element offsets that do not depend on k (it) */
  tv_t *mask;                           /* [dims] mask that does not depend on k, or NULL */
  tv_t *krange;                         /* 0..BK along kd (it), in the slice layout */
  int64_t kstride;                      /* elements between consecutive k (unused for Conv's A) */
} mm_opnd_t;

typedef struct mm_pipe {
  mm_opnd_t a, b;
  int64_t BK;
  int64_t NK;   /* k tiles each program runs */
  tv_t *kbeg;   /* the program's first k tile (scalar, it): split-K, else NULL (0) */
  bool kmask;   /* mask k < K (K not a multiple of BK, or splits of unequal length) */
  tv_t *conv_rowsp[3]; /* Conv: o_d*stride - pad of each row [BM] (a.Lr) */
  tv_t *conv_rowbase;  /* ConvNHWC: the row's image and group channel offset [BM] (a.Lr) */
} mm_pipe_t;

/* Blocked layout copying a tile of `dims`: vec elements per thread along vd (the dim that
 * is contiguous in memory), the lanes along vd first, the warps along the other dim. Tiles
 * smaller than the layout replicate it (equal copies from several threads: harmless). */
static const drk_tile_layout_t *mm_copy_layout(drk_tile_module_t *m, const int64_t *dims, int vd, int vec, int warps) {
  int od = 1 - vd, spt[2], tpw[2], wpc[2], ord[2] = {vd, od};
  if (vec > dims[vd]) vec = (int)dims[vd];
  int64_t lanes = dims[vd] / vec;
  if (lanes > 32) lanes = 32;
  spt[vd] = vec, spt[od] = 1;
  tpw[vd] = (int)lanes, tpw[od] = 32 / (int)lanes;
  wpc[vd] = 1, wpc[od] = warps;
  return drk_tile_layout_blocked(m, 2, spt, tpw, wpc, ord);
}

/* Shared layout of a stage with dim fd fastest, XOR-swizzled over rows as wide as the
 * swizzle allows (up to 128 bytes; wider rows are stored in 128-byte column chunks): the 8
 * rows one ldmatrix phase reads hit 8 distinct 16-byte bank groups. */
static const drk_tile_layout_t *mm_shared_layout(drk_tile_module_t *m, const int64_t *dims, int fd, int64_t es) {
  int64_t row = dims[fd] * es;
  int sw = row >= 128 ? 128 : row >= 64 ? 64 : row >= 32 ? 32 : 0;
  return drk_tile_layout_shared(m, sw, 2, (int[]){fd, 1 - fd});
}

static tv_t *mm_and(drk_lctx_t *c, tv_t *a, tv_t *b) { return !a ? b : !b ? a : BIN(AND, a, b); }

/* cp_async of the elements at offsets off (it) of o's buffer, under mask (NULL: all), into
 * stage st (i32) of its ring. */
static void mm_copy(drk_lctx_t *c, const mm_opnd_t *o, tv_t *off, tv_t *mask, tv_t *st) {
  drk_tile_type_t pt = off->type;
  pt.dtype = o->param->type.dtype;
  pt.is_ptr = true;
  tv_t *ps = drk_tile_build1(&c->b, DRK_TOP_SPLAT, 1, (tv_t *[]){o->param}, pt);
  tv_t *pp = drk_tile_build1(&c->b, DRK_TOP_ADDPTR, 2, (tv_t *[]){ps, off}, pt);
  drk_tile_build(&c->b, DRK_TOP_CP_ASYNC, mask ? 3 : 2, (tv_t *[]){ws_index(c, o->ring, st), pp, mask}, 0, NULL);
}

/* ConvNHWC's A offsets for the k tile starting at k0 (scalar; kk = k0 + 0..BK along k):
 * k -> (tap, ci) with ci innermost; input pixel ih_d = o_d*stride - pad + k_d*dil (the
 * masked-off taps fall in the padding); offset rowbase + sum_d ih_d * (inner spatial size * C)
 * + ci. With fastk the tap is one scalar for the tile, so everything but ci is per row and
 * ci = c0 + 0..BK is a contiguous run. ANDs the padding mask into *mask. */
static tv_t *mm_conv_nhwc_a(drk_lctx_t *c, const mm_t *s, const mm_pipe_t *P, tv_t *k0, tv_t *kk, tv_t **mask) {
  const mm_opnd_t *A = &P->a;
  int64_t BM = A->dims[0], BK = P->BK, Cg = s->C / s->G;
  if (s->fastk) {
    tv_t *tap = Cg > 1 ? BIN(DIV, k0, lw_sci(c, c->it, Cg)) : k0;
    tv_t *c0 = BIN(SUB, k0, BIN(MUL, tap, lw_sci(c, c->it, Cg)));
    tv_t *row = P->conv_rowbase, *rmask = NULL;
    int64_t istr = s->C;
    for (int d = s->nsp - 1; d >= 0; d--) {
      tv_t *kd = lw_coord(c, tap, s->nsp, s->Kk, d);
      if (s->dil[d] != 1) kd = BIN(MUL, kd, lw_sci(c, c->it, s->dil[d]));
      tv_t *ih = BIN(ADD, P->conv_rowsp[d], lw_splat(c, kd, &P->conv_rowsp[d]->type));
      rmask = mm_and(c, rmask, BIN(AND, lw_cmp(c, "ge", ih, lw_ci(c, ih, 0)), lw_cmp(c, "lt", ih, lw_ci(c, ih, s->I[d]))));
      row = BIN(ADD, row, istr == 1 ? ih : BIN(MUL, ih, lw_ci(c, ih, istr)));
      istr *= s->I[d];
    }
    tv_t *col = BIN(ADD, lw_splat(c, c0, &A->krange->type), A->krange);
    *mask = mm_and(c, *mask, lw_bcast_row(c, rmask, A->L, BM, BK));
    return BIN(ADD, lw_bcast_row(c, row, A->L, BM, BK), lw_bcast_col(c, col, A->L, BM, BK));
  }
  tv_t *tap = Cg > 1 ? BIN(DIV, kk, lw_ci(c, kk, Cg)) : kk;
  tv_t *off = A->fixed;
  if (Cg > 1) off = BIN(ADD, off, lw_bcast_col(c, BIN(REM, kk, lw_ci(c, kk, Cg)), A->L, BM, BK));
  int64_t istr = s->C;
  for (int d = s->nsp - 1; d >= 0; d--) {
    tv_t *kd = lw_coord(c, tap, s->nsp, s->Kk, d);
    if (s->dil[d] != 1) kd = BIN(MUL, kd, lw_ci(c, kd, s->dil[d]));
    tv_t *ih = BIN(ADD, lw_bcast_row(c, P->conv_rowsp[d], A->L, BM, BK), lw_bcast_col(c, kd, A->L, BM, BK));
    *mask = mm_and(c, *mask, BIN(AND, lw_cmp(c, "ge", ih, lw_ci(c, ih, 0)), lw_cmp(c, "lt", ih, lw_ci(c, ih, s->I[d]))));
    off = BIN(ADD, off, istr == 1 ? ih : BIN(MUL, ih, lw_ci(c, ih, istr)));
    istr *= s->I[d];
  }
  return off;
}

/* Copies k tile kt (scalar, it) of A and B into stage st (scalar i32). */
static void mm_issue(drk_lctx_t *c, const mm_t *s, const mm_pipe_t *P, tv_t *kt, tv_t *st) {
  const mm_opnd_t *A = &P->a, *B = &P->b;
  int64_t BM = A->dims[0], BK = P->BK, BN = B->dims[1];
  tv_t *k0 = BIN(MUL, P->kbeg ? BIN(ADD, P->kbeg, kt) : kt, lw_sci(c, c->it, BK));
  bool kedge = P->kmask;
  /* A */
  tv_t *kk = BIN(ADD, lw_splat(c, k0, &A->krange->type), A->krange);
  tv_t *mask = mm_and(c, A->mask, kedge ? lw_bcast_col(c, lw_cmp(c, "lt", kk, lw_ci(c, kk, s->K)), A->L, BM, BK) : NULL);
  tv_t *off;
  if (s->conv && s->nhwc) {
    off = mm_conv_nhwc_a(c, s, P, k0, kk, &mask);
  } else if (s->conv) {
    /* k -> (ci, kk...): column part ci*PI; spatial ih_d = o_d*stride - pad + kk_d*dil, in range */
    tv_t *ci = s->KS > 1 ? BIN(DIV, kk, lw_ci(c, kk, s->KS)) : kk;
    off = BIN(ADD, A->fixed, lw_bcast_col(c, BIN(MUL, ci, lw_ci(c, ci, s->PI)), A->L, BM, BK));
    int64_t istr = 1;
    for (int d = s->nsp - 1; d >= 0; d--) {
      tv_t *kd = lw_coord(c, kk, s->nsp + 1, (int64_t[]){s->C / s->G, s->Kk[0], s->Kk[1], s->Kk[2]}, d + 1);
      tv_t *kc = s->dil[d] != 1 ? BIN(MUL, kd, lw_ci(c, kd, s->dil[d])) : kd;
      tv_t *ih = BIN(ADD, lw_bcast_row(c, P->conv_rowsp[d], A->L, BM, BK), lw_bcast_col(c, kc, A->L, BM, BK));
      mask = mm_and(c, mask, BIN(AND, lw_cmp(c, "ge", ih, lw_ci(c, ih, 0)), lw_cmp(c, "lt", ih, lw_ci(c, ih, s->I[d]))));
      off = BIN(ADD, off, istr == 1 ? ih : BIN(MUL, ih, lw_ci(c, ih, istr)));
      istr *= s->I[d];
    }
  } else {
    tv_t *kc = A->kstride != 1 ? BIN(MUL, kk, lw_ci(c, kk, A->kstride)) : kk;
    off = BIN(ADD, A->fixed, lw_bcast_col(c, kc, A->L, BM, BK));
  }
  mm_copy(c, A, off, mask, st);
  /* B */
  kk = BIN(ADD, lw_splat(c, k0, &B->krange->type), B->krange);
  mask = mm_and(c, B->mask, kedge ? lw_bcast_row(c, lw_cmp(c, "lt", kk, lw_ci(c, kk, s->K)), B->L, BK, BN) : NULL);
  tv_t *kc = B->kstride != 1 ? BIN(MUL, kk, lw_ci(c, kk, B->kstride)) : kk;
  mm_copy(c, B, BIN(ADD, B->fixed, lw_bcast_row(c, kc, B->L, BK, BN)), mask, st);
}

/* Copy and shared layouts of operand o (tile dims set), vectors along vd, vec elements. */
static void mm_opnd_layouts(drk_lctx_t *c, mm_opnd_t *o, int vd, int vec, int warps) {
  o->L = mm_copy_layout(c->m, o->dims, vd, vec, warps);
  o->Lr = drk_tile_layout_slice(c->m, o->L, 1);
  o->Lc = drk_tile_layout_slice(c->m, o->L, 0);
  o->krange = lw_cast(c, lw_range(c, o->dims[o->kd], o->kd == 1 ? o->Lc : o->Lr), c->it);
}

/* The pipelined main loop; returns the accumulator after the last k tile. */
static tv_t *mm_pipeline(drk_lctx_t *c, const mm_t *s, const mm_pipe_t *P, int64_t S, tv_t *zero,
                         const drk_tile_layout_t *opA, const drk_tile_layout_t *opB, bool mma) {
  drk_tile_module_t *m = c->m;
  int64_t NK = P->NK;
  (void)s;
  for (int64_t i = 0; i < S - 1; i++) {
    if (i < NK) mm_issue(c, s, P, lw_sci(c, c->it, i), lw_sci(c, DRK_DT_I32, i));
    drk_tile_build(&c->b, DRK_TOP_CP_ASYNC_COMMIT, 0, NULL, 0, NULL);
  }
  drk_tile_op_t *f = drk_tile_build_for_begin(&c->b, lw_sci(c, c->it, 0), lw_sci(c, c->it, NK), lw_sci(c, c->it, 1), 1, &zero);
  tv_t *kt = f->regions[0]->args[0], *acc = f->regions[0]->args[1];
  ws_op1(c, DRK_TOP_CP_ASYNC_WAIT, NULL, "pending", S - 2);
  drk_tile_build(&c->b, DRK_TOP_BARRIER, 0, NULL, 0, NULL);
  if (S - 1 < NK) {
    tv_t *kn = BIN(ADD, kt, lw_sci(c, c->it, S - 1));
    drk_tile_build_if_begin(&c->b, lw_cmp(c, "lt", kn, lw_sci(c, c->it, NK)), 0, NULL);
    mm_issue(c, s, P, kn, lw_cast(c, BIN(REM, kn, lw_sci(c, c->it, S)), DRK_DT_I32));
    drk_tile_build_if_end(&c->b, 0, NULL);
  }
  drk_tile_build(&c->b, DRK_TOP_CP_ASYNC_COMMIT, 0, NULL, 0, NULL);
  tv_t *st = lw_cast(c, BIN(REM, kt, lw_sci(c, c->it, S)), DRK_DT_I32);
  tv_t *sa = ws_index(c, P->a.ring, st), *sb = ws_index(c, P->b.ring, st);
  tv_t *fa = drk_tile_build1(&c->b, DRK_TOP_LOCAL_LOAD, 1, &sa, drk_tile_type_tile(s->t, 2, P->a.dims, opA));
  tv_t *fb = drk_tile_build1(&c->b, DRK_TOP_LOCAL_LOAD, 1, &sb, drk_tile_type_tile(s->t, 2, P->b.dims, opB));
  drk_tile_op_t *dot = drk_tile_build(&c->b, DRK_TOP_DOT, 3, (tv_t *[]){fa, fb, acc}, 1, &acc->type);
  drk_tile_op_set_ident(m, dot, "kind", mma ? "mma_sync" : "fma");
  f = drk_tile_build_for_end(&c->b, 1, dot->results);
  ws_op1(c, DRK_TOP_CP_ASYNC_WAIT, NULL, "pending", 0);
  return f->results[0];
}

bool drk_lower_matmul(drk_lctx_t *c) {
  const drk_node_t *n = c->node;
  if (drk_lower_dwconv_wanted(c)) return drk_lower_dwconv(c); /* depthwise, small groups */
  mm_t s;
  if (!mm_setup(c, &s)) return false;
  if (s.batch > 65535) return lw_err(c, "batch of %lld matrices exceeds the grid limit", (long long)s.batch);
  drk_schedule_t W = drk_sched_mm_ws(s.M, s.N, s.K, s.batch, s.t, &c->o, c->epi != NULL);
  ws_batch_t ba, bb;
  if (ws_eligible(c, &s, &W, &ba, &bb)) return mm_hopper(c, &s, W, ba, bb);
  const char *note = NULL;
  if (s.nhwc && W.mma && conv_ws_eligible(c, &s, &note)) return mm_hopper(c, &s, W, WS_NONE, WS_NONE);
  drk_schedule_t S = drk_sched_mm(s.M, s.N, s.K, s.batch, s.t, &c->o);
  S.note = note;
  bool mma = strcmp(S.mma, "mma_sync") == 0;
  drk_dtype_t at = s.t == DRK_DT_F64 ? DRK_DT_F64 : DRK_DT_F32;
  int64_t BM = S.tile_m, BN = S.tile_n, BK = S.tile_k, ST = S.stages < 2 ? 2 : S.stages;
  int64_t SP = S.split_k > 1 && s.batch * S.split_k <= 65535 ? S.split_k : 1;
  S.split_k = (int)SP;
  int64_t NK = (s.K + BK - 1) / BK, KPS = (NK + SP - 1) / SP;
  int64_t big = SP * lw_numel(n->outputs[0]);
  for (int i = 0; i < n->n_inputs; i++)
    if (n->inputs[i] && lw_numel(n->inputs[i]) > big) big = lw_numel(n->inputs[i]);
  int ws = SP > 1 ? lw_scratch_new(c, (uint64_t)(SP * lw_numel(n->outputs[0])) * (uint64_t)drk_dtype_bits(at) / 8) : -1;
  lw_kernel_begin(c, big < ((int64_t)1 << 31) - 65536 ? DRK_DT_I32 : DRK_DT_I64);
  drk_tile_module_t *m = c->m;
  mm_pipe_t P;
  memset(&P, 0, sizeof P);
  P.BK = BK;
  P.NK = KPS;
  P.kmask = s.K % BK != 0 || KPS * SP != NK;
  P.a.param = lw_param_buf(c, n->inputs[0], "a");
  P.b.param = lw_param_buf(c, n->inputs[1], "b");
  /* split-K: the first kernel stores partial sums only (C, bias and the epilogue: kernel 2) */
  tv_t *pc = SP == 1 && n->n_inputs > 2 && n->inputs[2] ? lw_param_buf(c, n->inputs[2], s.conv ? "bias" : "c") : NULL;
  tv_t *py = SP > 1 ? lw_param_scratch(c, ws, at, "ws") : lw_mm_out_param(c, n->outputs[0]);
  /* runtime sizes: M, where it only bounds rows (one problem, no split) */
  tv_t *msz = !s.conv && SP == 1 && s.batch == 1 ? lw_size_param(c, "m", s.M) : NULL;
  tv_t *pbatch = !s.conv && SP == 1 && s.batch > 1 ? lw_size_param(c, "batch", s.batch) : NULL;

  /* accumulator: mma_sync with 2 x (warps/2) warps, or blocked (fma) */
  const drk_tile_layout_t *acc_l =
      mma ? drk_tile_layout_mma(m, DRK_TL_MMA_SYNC, 2, S.warps / 2, 16, 8)
          : drk_tile_layout_blocked(m, 2, (int[]){2, 2}, (int[]){4, 8}, (int[]){2, 2}, (int[]){1, 0});
  int kw = mma ? (s.t == DRK_DT_F32 ? 4 : 8) : 1;
  const drk_tile_layout_t *opA = drk_tile_layout_dot_op(m, acc_l, 0, kw), *opB = drk_tile_layout_dot_op(m, acc_l, 1, kw);
  int64_t es = drk_dtype_bits(s.t) / 8;
  int vec = (int)(16 / es);
  P.a.dims[0] = BM, P.a.dims[1] = BK, P.a.kd = 1;
  P.b.dims[0] = BK, P.b.dims[1] = BN, P.b.kd = 0;
  /* vectors along the dim contiguous in memory: A's K unless transposed (Gemm transA), B's N
   * unless transposed (Gemm transB, Conv weights); Conv's A is a gather (one element each,
   * lanes along the output pixels); ConvNHWC's A runs along K (vectors when a k tile lies
   * within one tap, else one element each) */
  s.fastk = s.nhwc && (s.C / s.G) % BK == 0;
  int avd = s.nhwc ? 1 : s.conv ? 0 : (s.sak == 1 && s.K > 1) || s.sam != 1 ? 1 : 0;
  int bvd = (s.sbn == 1 && s.N > 1) || s.sbk != 1 ? 1 : 0;
  mm_opnd_layouts(c, &P.a, avd, s.conv && !s.fastk ? 1 : vec, S.warps);
  mm_opnd_layouts(c, &P.b, bvd, vec, S.warps);
  P.a.kstride = s.sak;
  P.b.kstride = s.sbk;
  int64_t a_stage = BM * BK * es, b_stage = BK * BN * es;
  int64_t off_b = (ST * a_stage + 1023) / 1024 * 1024, smem = off_b + ST * b_stage;
  P.a.ring = ws_alloc(c, 0, s.t, 3, (int64_t[]){ST, BM, BK}, mm_shared_layout(m, P.a.dims, avd, es));
  P.b.ring = ws_alloc(c, off_b, s.t, 3, (int64_t[]){ST, BK, BN}, mm_shared_layout(m, P.b.dims, bvd, es));

  tv_t *pm = lw_pid(c, 0), *pn = lw_pid(c, 1), *pz = lw_pid(c, 2), *sp = NULL;
  if (SP > 1) { /* z = split * batch + batch index */
    sp = s.batch > 1 ? BIN(DIV, pz, lw_sci(c, c->it, s.batch)) : pz;
    pz = s.batch > 1 ? BIN(REM, pz, lw_sci(c, c->it, s.batch)) : lw_sci(c, c->it, 0);
    P.kbeg = BIN(MUL, sp, lw_sci(c, c->it, KPS));
  }
  tv_t *mi = lw_cast(c, lw_range(c, BM, P.a.Lr), c->it);
  tv_t *mrow = BIN(ADD, lw_splat(c, BIN(MUL, pm, lw_sci(c, c->it, BM)), &mi->type), mi);
  if (s.M % BM || s.M == 0) P.a.mask = lw_bcast_row(c, lw_size_lt(c, mrow, msz, s.M), P.a.L, BM, BK);
  tv_t *nj = lw_cast(c, lw_range(c, BN, P.b.Lc), c->it);
  tv_t *ncol = BIN(ADD, lw_splat(c, BIN(MUL, pn, lw_sci(c, c->it, BN)), &nj->type), nj);
  if (s.N % BN || s.N == 0) P.b.mask = lw_bcast_col(c, lw_cmp(c, "lt", ncol, lw_ci(c, ncol, s.N)), P.b.L, BK, BN);

  /* per-batch (or per-group) base offsets, scalars */
  tv_t *abase, *bbase, *arow; /* arow: A row part [BM] (a.Lr) */
  if (s.conv) {
    int64_t Cg = s.C / s.G, OCg = s.OC / s.G;
    /* the group's first channel: NCHW a plane of PI, NHWC the next element */
    abase = BIN(MUL, pz, lw_sci(c, c->it, s.nhwc ? Cg : Cg * s.PI));
    bbase = BIN(MUL, pz, lw_sci(c, c->it, OCg * s.K));
    /* m -> (nb, o...): row part nb*C*PI; spatial row parts o_d*stride - pad */
    tv_t *nbi = s.PO > 1 ? BIN(DIV, mrow, lw_ci(c, mrow, s.PO)) : mrow;
    arow = BIN(MUL, nbi, lw_ci(c, nbi, s.C * s.PI));
    for (int d = 0; d < s.nsp; d++) {
      tv_t *od = lw_coord(c, mrow, s.nsp + 1, (int64_t[]){s.Nb, s.O[0], s.O[1], s.O[2]}, d + 1);
      P.conv_rowsp[d] = BIN(SUB, BIN(MUL, od, lw_ci(c, od, s.st[d])), lw_ci(c, od, s.pad[d]));
    }
  } else {
    abase = lw_affine(c, pz, s.nb, s.bd, s.bas, 0);
    bbase = lw_affine(c, pz, s.nb, s.bd, s.bbs, 0);
    arow = s.sam != 1 ? BIN(MUL, mrow, lw_ci(c, mrow, s.sam)) : mrow;
  }
  P.conv_rowbase = BIN(ADD, arow, lw_splat(c, abase, &arow->type));
  P.a.fixed = lw_bcast_row(c, P.conv_rowbase, P.a.L, BM, BK);
  tv_t *bcol = s.sbn != 1 ? BIN(MUL, ncol, lw_ci(c, ncol, s.sbn)) : ncol;
  P.b.fixed = lw_bcast_col(c, BIN(ADD, bcol, lw_splat(c, bbase, &ncol->type)), P.b.L, BK, BN);

  int64_t cd[2] = {BM, BN};
  tv_t *zero = drk_tile_build_const_float(&c->b, 0.0, drk_tile_type_tile(at, 2, cd, acc_l));
  tv_t *res = mm_pipeline(c, &s, &P, ST, zero, opA, opB, mma);

  /* epilogue in the accumulator layout */
  const drk_tile_layout_t *Cr = drk_tile_layout_slice(m, acc_l, 1), *Cc = drk_tile_layout_slice(m, acc_l, 0);
  tv_t *ei = lw_cast(c, lw_range(c, BM, Cr), c->it);
  tv_t *erow = BIN(ADD, lw_splat(c, BIN(MUL, pm, lw_sci(c, c->it, BM)), &ei->type), ei);
  tv_t *ej = lw_cast(c, lw_range(c, BN, Cc), c->it);
  tv_t *ecol = BIN(ADD, lw_splat(c, BIN(MUL, pn, lw_sci(c, c->it, BN)), &ej->type), ej);
  tv_t *emask = BIN(AND, lw_bcast_row(c, lw_size_lt(c, erow, msz, s.M), acc_l, BM, BN),
                    lw_bcast_col(c, lw_cmp(c, "lt", ecol, lw_ci(c, ecol, s.N)), acc_l, BM, BN));
  tv_t *yoff, *oc = NULL;
  if (s.conv && s.nhwc) {
    /* y [Nb, out..., OC]: row m holds its OC channels */
    oc = BIN(ADD, ecol, lw_splat(c, BIN(MUL, pz, lw_sci(c, c->it, s.OC / s.G)), &ecol->type));
    yoff = BIN(ADD, lw_bcast_row(c, BIN(MUL, erow, lw_ci(c, erow, s.OC)), acc_l, BM, BN), lw_bcast_col(c, oc, acc_l, BM, BN));
  } else if (s.conv) {
    int64_t OCg = s.OC / s.G;
    tv_t *nbi = s.PO > 1 ? BIN(DIV, erow, lw_ci(c, erow, s.PO)) : erow;
    tv_t *of = s.PO > 1 ? BIN(REM, erow, lw_ci(c, erow, s.PO)) : lw_ci(c, erow, 0);
    tv_t *rp = BIN(ADD, BIN(MUL, nbi, lw_ci(c, nbi, s.OC * s.PO)), of);
    oc = BIN(ADD, ecol, lw_splat(c, BIN(MUL, pz, lw_sci(c, c->it, OCg)), &ecol->type));
    yoff = BIN(ADD, lw_bcast_row(c, rp, acc_l, BM, BN), lw_bcast_col(c, BIN(MUL, oc, lw_ci(c, oc, s.PO)), acc_l, BM, BN));
  } else {
    tv_t *yb = BIN(MUL, pz, lw_sci(c, c->it, s.M * s.N));
    tv_t *rp = BIN(ADD, BIN(MUL, erow, lw_ci(c, erow, s.N)), lw_splat(c, yb, &erow->type));
    yoff = BIN(ADD, lw_bcast_row(c, rp, acc_l, BM, BN), lw_bcast_col(c, ecol, acc_l, BM, BN));
  }
  S.tile_k = (int)BK;
  S.stages = (int)ST;
  if (SP > 1) {
    /* partials: split sp's copy of y, at the output element's flat offset; then kernel 2 */
    tv_t *wb = BIN(MUL, sp, lw_sci(c, c->it, lw_numel(n->outputs[0])));
    lw_store(c, py, BIN(ADD, yoff, lw_splat(c, wb, &yoff->type)), res, emask);
    lw_kernel_end(c, (s.M + BM - 1) / BM, (s.N + BN - 1) / BN, s.batch * SP, S.warps, smem, &S);
    mm_splitk_sum(c, &s, ws, SP, at);
    return true;
  }
  if (s.conv && pc) {
    tv_t *bias = lw_cast(c, lw_load(c, pc, oc, lw_cmp(c, "lt", ecol, lw_ci(c, ecol, s.N)), 0), at);
    res = BIN(ADD, res, lw_bcast_col(c, bias, acc_l, BM, BN));
  } else if (n->op == DRK_OP_GEMM) {
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
  lw_mm_store(c, py, yoff, res, emask);
  lw_kernel_end(c, (s.M + BM - 1) / BM, (s.N + BN - 1) / BN, s.batch, S.warps, smem, &S);
  lw_grid_from(c, 0, msz, BM);
  lw_grid_from(c, 2, pbatch, 1);
  return true;
}
