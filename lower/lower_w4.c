/* Lowering of MatMulNBits (W4A16: 4-bit weights in the GPU's packing, f16/bf16 activations;
 * ir/w4.h, docs/precision.md "W4A16") to an mma_sync kernel.
 *
 * One program computes a BLOCK_M x BLOCK_N tile of Y [M, N] (M: A's rows, A [..., K] taken as
 * [M, K]) over a range of k tiles of 64 (split-K: grid z). Per k tile:
 *  - A's [BM, 64] slice (4 planes of [BM, 16]) and the tile's weights, one [16, BN] i16 load
 *    (32 contiguous bytes per column, 16 per thread), were loaded into registers 2 or 3
 *    steps before (and the scales and zero points with them when a group spans whole k
 *    tiles), so the loads of the next steps are in flight while one computes;
 *  - the A planes go to shared memory; plane t's codes are nibble t of every word,
 *    dequantized in registers in A's dtype without conversions (code | the bits of 1024
 *    (f16) or 128 (bf16) read as that dtype is 1024 + code exactly; minus 1024 + z, times s:
 *    (code - z) * s, one rounding, with the column's scale and zero point of the plane's
 *    group) and stored to shared memory as the [16, BN] B operand of plane t;
 *  - four k16 `dot`s (mma_sync m16n8k16, f32 accumulators) of A plane t by B plane t, both
 *    read by local_load (ldmatrix).
 * Dequantizing in a blocked layout and handing the result to the mma fragments through
 * shared memory keeps every index tile out of the dot_op layouts (whose distribution depends
 * on the element width). With split-K the programs store f32 partial sums to scratch and a
 * second kernel adds them and rounds to A's dtype.
 *
 * Requires: static shapes, packing 1 (K % 64 == 0), block_size % 16 == 0, A f16 or bf16.
 * Guarantees: every edge of M and N masked. */
#include <string.h>

#include "ir/w4.h"
#include "lower/lower_internal.h"

#define BIN(op, a, b) lw_bin(c, DRK_TOP_##op, (a), (b))

bool drk_lower_w4_supported(const drk_node_t *n, const char **why) {
  drk_w4_shape_t s;
  char msg[256];
  if (!drk_w4_shape(n, &s, msg, sizeof msg)) {
    *why = "malformed MatMulNBits (the interpreter names the problem)";
    return false;
  }
  drk_dtype_t t = n->inputs[0]->dtype;
  if (t != DRK_DT_F16 && t != DRK_DT_BF16) {
    *why = "W4A16 kernels take f16 or bf16 activations: add --precision=fp16 or --precision=bf16";
    return false;
  }
  if (s.packing != 1) {
    *why = "not implemented: K not a multiple of 64 (the GPU packing)";
    return false;
  }
  return true;
}

typedef struct w4k {
  drk_w4_shape_t s;
  drk_dtype_t t;
  int64_t M, BM, BN, NK, SP, KPS;
  int warps;
} w4k_t;

/* Tiles and split-K. BM: the smallest of 16, 32, 64 that holds M (64 beyond). BN: for decode
 * shapes (M <= 16) 128, or 64 when 128 leaves fewer programs than SMs; for larger M 128
 * always (each N tile reads all of A's k slice from L2: N / BN re-reads). Split-K until about
 * four programs per SM, at least 2 k tiles per split, at most 16, and no more than keeps the
 * f32 partial sums (written, then read by the sum kernel) within 8 MB or, past that, below
 * half the weight bytes (K / (32 M) splits); the knob mm.split_k pins it. */
static void w4_schedule(const drk_lctx_t *c, w4k_t *w) {
  int sms = lw_target_sms(&c->o);
  w->BM = w->M <= 16 ? 16 : w->M <= 32 ? 32 : 64;
  int64_t mt = (w->M + w->BM - 1) / w->BM;
  w->BN = 128;
  if (w->M <= 16 && mt * ((w->s.N + 127) / 128) < sms) w->BN = 64;
  int64_t programs = mt * ((w->s.N + w->BN - 1) / w->BN);
  w->NK = w->s.K / DRK_W4_BK;
  int64_t sp = (4 * sms + programs - 1) / programs;
  int64_t cap = ((int64_t)8 << 20) / (4 * w->M * w->s.N), traffic = w->s.K / (32 * w->M);
  if (cap < traffic) cap = traffic;
  if (sp > cap) sp = cap;
  if (sp > w->NK / 2) sp = w->NK / 2;
  if (sp > 16) sp = 16;
  int pin;
  if (drk_knob_pinned(&c->o.knobs, DRK_KNOB_MM_SPLIT_K, &pin)) sp = pin > w->NK ? w->NK : pin;
  if (sp < 1) sp = 1;
  w->KPS = (w->NK + sp - 1) / sp;
  w->SP = (w->NK + w->KPS - 1) / w->KPS;
  w->warps = w->BM == 64 ? 8 : 4; /* BM 64: 2 x 4 warps, half the accumulator registers each */
}

static tv_t *w4_alloc(drk_lctx_t *c, int64_t off, drk_dtype_t t, int rank, const int64_t *dims, const drk_tile_layout_t *l) {
  tv_t *v = drk_tile_build1(&c->b, DRK_TOP_LOCAL_ALLOC, 0, NULL, drk_tile_type_smem(t, rank, dims, l));
  drk_tile_op_set_int(c->m, v->def, "offset", off);
  return v;
}

static tv_t *w4_index(drk_lctx_t *c, tv_t *buf, int64_t i) {
  const drk_tile_type_t *t = &buf->type;
  drk_tile_type_t r = drk_tile_type_smem(t->dtype, t->rank - 1, t->dims + 1, t->layout);
  return drk_tile_build1(&c->b, DRK_TOP_MEMDESC_INDEX, 2, (tv_t *[]){buf, lw_sci(c, DRK_DT_I32, i)}, r);
}

/* Nibble t of every i16 word: (w & (15 << 4t)) / 16^t, exact, then & 15 (the top nibble
 * of a negative word divides to -8 .. -1). */
static tv_t *w4_nibble(drk_lctx_t *c, tv_t *w, int t) {
  int64_t mask = (int64_t)(int16_t)(uint16_t)(15u << (4 * t));
  tv_t *q = BIN(AND, w, lw_ci(c, w, mask));
  if (t) q = BIN(DIV, q, lw_ci(c, q, (int64_t)1 << (4 * t)));
  if (t == 3) q = BIN(AND, q, lw_ci(c, q, 15));
  return q;
}

/* What a k step reads from global memory, and where from. */
typedef struct w4_io {
  tv_t *pa, *pb, *ps, *pz;
  tv_t *afix, *amask;  /* A offsets [BM, 16] without the k tile's column, rows < M */
  tv_t *wfix, *wmask;  /* word offsets [16, BN] without the k tile's base, columns < N */
  tv_t *ncol, *nmask;  /* columns [BN] (slice of the word layout), < N */
  const drk_tile_layout_t *AL, *WL;
  bool tile_group;     /* one scale group per k tile: fetched with it */
} w4_io_t;

typedef struct w4_fetch {
  tv_t *a[4];   /* A planes [BM, 16] */
  tv_t *words;  /* [16, BN] i16 */
  tv_t *s, *z;  /* tile_group: the tile's scales and zero points [BN] f32 (z NULL: none) */
} w4_fetch_t;

/* k tiles whose loads are in flight while one is computed (loop-carried in registers): 3 for
 * BLOCK_M <= 32 (about 120 registers at BLOCK_M 16, four programs per SM), 2 for BLOCK_M 64
 * (126 registers) */
#define W4_AHEAD_MAX 3

static void w4_pack_fetch(const w4_fetch_t *f, tv_t **out, bool tile_group, bool zp) {
  int n = 0;
  for (int t = 0; t < 4; t++) out[n++] = f->a[t];
  out[n++] = f->words;
  if (tile_group) out[n++] = f->s;
  if (tile_group && zp) out[n++] = f->z;
}

static void w4_unpack_fetch(tv_t *const *in, w4_fetch_t *f, bool tile_group, bool zp) {
  int n = 0;
  for (int t = 0; t < 4; t++) f->a[t] = in[n++];
  f->words = in[n++];
  f->s = tile_group ? in[n++] : NULL;
  f->z = tile_group && zp ? in[n++] : NULL;
}

/* Scale and zero point (f32, [BN]) of group g (scalar) for the columns, under the extra mask
 * (NULL: none). */
static void w4_group(drk_lctx_t *c, const w4k_t *w, const w4_io_t *io, tv_t *g, tv_t *valid, tv_t **out_s,
                     tv_t **out_z) {
  tv_t *off = BIN(ADD, io->ncol, lw_splat(c, BIN(MUL, g, lw_sci(c, c->it, w->s.N)), &io->ncol->type));
  tv_t *mask = lw_and_mask(c, io->nmask, valid ? lw_splat(c, valid, &io->ncol->type) : NULL);
  *out_s = lw_cast(c, lw_load(c, io->ps, off, mask, 0), DRK_DT_F32);
  *out_z = io->pz ? lw_cast(c, lw_load(c, io->pz, off, mask, 0), DRK_DT_F32) : NULL;
}

/* The loads of k tile kt (scalar), masked off past ke (the last fetch of a split). */
static void w4_issue(drk_lctx_t *c, const w4k_t *w, const w4_io_t *io, tv_t *kt, tv_t *ke, w4_fetch_t *f) {
  const int64_t H = DRK_W4_H;
  tv_t *valid = lw_cmp(c, "lt", kt, ke);
  tv_t *k0 = BIN(MUL, kt, lw_sci(c, c->it, DRK_W4_BK));
  tv_t *am = lw_and_mask(c, io->amask, lw_splat(c, valid, &io->afix->type));
  for (int t = 0; t < 4; t++) {
    tv_t *kofs = BIN(ADD, k0, lw_sci(c, c->it, t * H));
    f->a[t] = lw_load(c, io->pa, BIN(ADD, io->afix, lw_splat(c, kofs, &io->afix->type)), am, 0);
  }
  tv_t *wb = BIN(MUL, kt, lw_sci(c, c->it, w->s.N * H));
  tv_t *wm = lw_and_mask(c, io->wmask, lw_splat(c, valid, &io->wfix->type));
  f->words = lw_load(c, io->pb, BIN(ADD, io->wfix, lw_splat(c, wb, &io->wfix->type)), wm, 0);
  f->s = f->z = NULL;
  if (io->tile_group) w4_group(c, w, io, BIN(DIV, k0, lw_sci(c, c->it, w->s.G)), valid, &f->s, &f->z);
}

/* The f16 / bf16 bits of 1024 / 128, whose unit in the last place is 1: OR-ing a code 0..15
 * into them gives 1024 + code / 128 + code. */
static int64_t w4_magic_bits(drk_dtype_t t) { return t == DRK_DT_F16 ? 0x6400 : 0x4300; }
static double w4_magic(drk_dtype_t t) { return t == DRK_DT_F16 ? 1024.0 : 128.0; }

/* The per-column constants of a group, [BN] f32 -> [16, BN] of A's dtype in layout L: the
 * scale, and magic + zero point (magic + 8 without zero points), both exact in A's dtype but
 * the scale's rounding. */
static void w4_dequant_consts(drk_lctx_t *c, const w4k_t *w, tv_t *s, tv_t *z, const drk_tile_layout_t *L, tv_t **out_s,
                              tv_t **out_mz) {
  *out_s = lw_bcast_col(c, lw_cast(c, s, w->t), L, DRK_W4_H, w->BN);
  tv_t *mz = z ? lw_cast(c, BIN(ADD, z, lw_cf(c, z, w4_magic(w->t))), w->t) : NULL;
  *out_mz = mz ? lw_bcast_col(c, mz, L, DRK_W4_H, w->BN)
               : lw_cf(c, *out_s, w4_magic(w->t) + 8.0);
}

/* The split-K sum: y = sum over splits of ws, rounded to y's dtype. */
static void w4_splitk_sum(drk_lctx_t *c, const w4k_t *w, int ws) {
  const drk_value_t *y = c->node->outputs[0];
  int64_t ny = lw_numel(y);
  lw_kernel_begin(c, lw_index_dtype_for(w->SP * ny));
  tv_t *pw = lw_param_scratch(c, ws, DRK_DT_F32, "ws");
  tv_t *py = lw_param_buf(c, y, "y");
  lw_flat_t F;
  lw_flat_begin(c, ny, &F);
  tv_t *res = lw_load(c, pw, F.offs, F.mask, 0);
  for (int64_t i = 1; i < w->SP; i++) res = BIN(ADD, res, lw_load(c, pw, BIN(ADD, F.offs, lw_ci(c, F.offs, i * ny)), F.mask, 0));
  lw_store(c, py, F.offs, res, F.mask);
  lw_flat_end(c, &F);
}

bool drk_lower_w4(drk_lctx_t *c) {
  const drk_node_t *n = c->node;
  const char *why = NULL;
  if (!drk_lower_w4_supported(n, &why)) return lw_err(c, "MatMulNBits: %s", why);
  w4k_t w;
  memset(&w, 0, sizeof w);
  char msg[256];
  drk_w4_shape(n, &w.s, msg, sizeof msg);
  w.t = n->inputs[0]->dtype;
  w.M = lw_numel(n->inputs[0]) / w.s.K;
  w4_schedule(c, &w);
  const int64_t BM = w.BM, BN = w.BN, H = DRK_W4_H, N = w.s.N, K = w.s.K, G = w.s.G;
  drk_tile_module_t *m = c->m;
  int64_t big = w.SP * w.M * N;
  for (int i = 0; i < n->n_inputs; i++)
    if (n->inputs[i] && lw_numel(n->inputs[i]) > big) big = lw_numel(n->inputs[i]);
  int ws = w.SP > 1 ? lw_scratch_new(c, (uint64_t)(w.SP * w.M * N) * 4u) : -1;
  lw_kernel_begin(c, lw_index_dtype_for(big));
  tv_t *pa = lw_param_buf(c, n->inputs[0], "a");
  tv_t *pb = lw_param_buf(c, n->inputs[1], "b");
  tv_t *ps = lw_param_buf(c, n->inputs[2], "scale");
  tv_t *pz = n->n_inputs > 3 && n->inputs[3] ? lw_param_buf(c, n->inputs[3], "zero") : NULL;
  tv_t *py = w.SP > 1 ? lw_param_scratch(c, ws, DRK_DT_F32, "ws") : lw_param_buf(c, n->outputs[0], "y");

  /* layouts: accumulator (warps/4) x 4 warps of m16n8; A planes copied 8 elements (16 bytes) per
   * thread along k; words 8 per thread (16 bytes) along j, lanes then warps along n */
  const drk_tile_layout_t *accL = drk_tile_layout_mma(m, DRK_TL_MMA_SYNC, w.warps / 4, 4, 16, 8);
  const drk_tile_layout_t *opA = drk_tile_layout_dot_op(m, accL, 0, 8), *opB = drk_tile_layout_dot_op(m, accL, 1, 8);
  const drk_tile_layout_t *AL = drk_tile_layout_blocked(m, 2, (int[]){1, 8}, (int[]){16, 2}, (int[]){w.warps, 1}, (int[]){1, 0});
  const drk_tile_layout_t *WL = drk_tile_layout_blocked(m, 2, (int[]){8, 1}, (int[]){2, 16}, (int[]){1, w.warps}, (int[]){0, 1});
  const drk_tile_layout_t *ALr = drk_tile_layout_slice(m, AL, 1), *ALc = drk_tile_layout_slice(m, AL, 0);
  const drk_tile_layout_t *WLr = drk_tile_layout_slice(m, WL, 1), *WLc = drk_tile_layout_slice(m, WL, 0);
  /* shared: A [4, BM, 16] k fastest (32-byte rows); B [4, 16, BN] also k fastest, so a
   * thread's 8 dequantized k values of a column are one 16-byte store (ldmatrix reads it as
   * the K-major operand) */
  const drk_tile_layout_t *SA = drk_tile_layout_shared(m, 32, 2, (int[]){1, 0});
  const drk_tile_layout_t *SB = drk_tile_layout_shared(m, 32, 2, (int[]){0, 1});
  int64_t es = drk_dtype_bits(w.t) / 8, a_bytes = 4 * BM * H * es, off_b = (a_bytes + 1023) / 1024 * 1024;
  int64_t smem = off_b + 4 * H * BN * es;
  tv_t *sA = w4_alloc(c, 0, w.t, 3, (int64_t[]){4, BM, H}, SA);
  tv_t *sB = w4_alloc(c, off_b, w.t, 3, (int64_t[]){4, H, BN}, SB);

  tv_t *pn = lw_pid(c, 0), *pm = lw_pid(c, 1), *psp = lw_pid(c, 2);
  /* A: rows m (masked m < M) at m * K, columns k0 + t*16 + 0..16 */
  tv_t *mi = lw_cast(c, lw_range(c, BM, ALr), c->it);
  tv_t *mrow = BIN(ADD, lw_splat(c, BIN(MUL, pm, lw_sci(c, c->it, BM)), &mi->type), mi);
  tv_t *amask = w.M % BM ? lw_bcast_row(c, lw_cmp(c, "lt", mrow, lw_ci(c, mrow, w.M)), AL, BM, H) : NULL;
  tv_t *kk = lw_cast(c, lw_range(c, H, ALc), c->it);
  tv_t *afix = BIN(ADD, lw_bcast_row(c, BIN(MUL, mrow, lw_ci(c, mrow, K)), AL, BM, H), lw_bcast_col(c, kk, AL, BM, H));
  /* words: column n of k tile kt at (kt * N + n) * 16 + j */
  tv_t *nj = lw_cast(c, lw_range(c, BN, WLc), c->it);
  tv_t *ncol = BIN(ADD, lw_splat(c, BIN(MUL, pn, lw_sci(c, c->it, BN)), &nj->type), nj);
  tv_t *nmask1 = N % BN ? lw_cmp(c, "lt", ncol, lw_ci(c, ncol, N)) : NULL;
  tv_t *wmask = nmask1 ? lw_bcast_col(c, nmask1, WL, H, BN) : NULL;
  tv_t *jj = lw_cast(c, lw_range(c, H, WLr), c->it);
  tv_t *wfix = BIN(ADD, lw_bcast_col(c, BIN(MUL, ncol, lw_ci(c, ncol, H)), WL, H, BN), lw_bcast_row(c, jj, WL, H, BN));

  int64_t cd[2] = {BM, BN};
  tv_t *zero = drk_tile_build_const_float(&c->b, 0.0, drk_tile_type_tile(DRK_DT_F32, 2, cd, accL));
  tv_t *kb = BIN(MUL, psp, lw_sci(c, c->it, w.KPS));
  tv_t *ke = BIN(MIN, BIN(ADD, kb, lw_sci(c, c->it, w.KPS)), lw_sci(c, c->it, w.NK));
  /* one group per k tile (G a multiple of 64): its scale and zero point travel with the
   * tile's prefetch; smaller groups are loaded per plane in the step */
  bool tile_group = G % DRK_W4_BK == 0;
  w4_io_t io = {pa, pb, ps, pz, afix, amask, wfix, wmask, ncol, nmask1, AL, WL, tile_group};
  /* `ahead` fetches in flight: the loop carries the fetches of k tiles kt .. kt+ahead-1 and
   * issues kt+AHEAD's before computing kt's */
  int per = 5 + (tile_group ? 1 : 0) + (tile_group && pz ? 1 : 0); /* carried values per fetch */
  const int ahead = BM <= 32 ? 3 : 2;
  int ncarry = 1 + ahead * per;
  tv_t *init[1 + W4_AHEAD_MAX * 7];
  init[0] = zero;
  for (int d = 0; d < ahead; d++) {
    w4_fetch_t f;
    w4_issue(c, &w, &io, BIN(ADD, kb, lw_sci(c, c->it, d)), ke, &f);
    w4_pack_fetch(&f, init + 1 + d * per, tile_group, pz != NULL);
  }
  drk_tile_op_t *loop = drk_tile_build_for_begin(&c->b, kb, ke, lw_sci(c, c->it, 1), ncarry, init);
  tv_t **args = loop->regions[0]->args;
  tv_t *kt = args[0], *acc = args[1];
  w4_fetch_t now;
  w4_unpack_fetch(args + 2, &now, tile_group, pz != NULL);
  w4_fetch_t nxt;
  w4_issue(c, &w, &io, BIN(ADD, kt, lw_sci(c, c->it, ahead)), ke, &nxt);
  drk_tile_build(&c->b, DRK_TOP_BARRIER, 0, NULL, 0, NULL); /* the previous step's reads of sA/sB are done */
  tv_t *k0 = BIN(MUL, kt, lw_sci(c, c->it, DRK_W4_BK));
  for (int t = 0; t < 4; t++)
    drk_tile_build(&c->b, DRK_TOP_LOCAL_STORE, 2, (tv_t *[]){w4_index(c, sA, t), now.a[t]}, 0, NULL);
  tv_t *scl = NULL, *zpt = NULL;
  for (int t = 0; t < 4; t++) {
    /* a plane's 16 rows lie in one group (G % 16 == 0) */
    if (tile_group && t == 0) {
      w4_dequant_consts(c, &w, now.s, now.z, WL, &scl, &zpt);
    } else if (!tile_group) {
      tv_t *g = BIN(DIV, BIN(ADD, k0, lw_sci(c, c->it, t * H)), lw_sci(c, c->it, G));
      tv_t *sv, *zv;
      w4_group(c, &w, &io, g, NULL, &sv, &zv);
      w4_dequant_consts(c, &w, sv, zv, WL, &scl, &zpt);
    }
    /* code | magic read as A's dtype is magic's value + code exactly; minus (magic + z)
     * gives code - z exactly, times s one rounding: no int-to-float conversion */
    tv_t *q = w4_nibble(c, now.words, t);
    q = BIN(OR, q, lw_ci(c, q, w4_magic_bits(w.t)));
    tv_t *x = drk_tile_build1(&c->b, DRK_TOP_BITCAST, 1, &q, lw_retype(&q->type, w.t));
    tv_t *bt = BIN(MUL, BIN(SUB, x, zpt), scl);
    drk_tile_build(&c->b, DRK_TOP_LOCAL_STORE, 2, (tv_t *[]){w4_index(c, sB, t), bt}, 0, NULL);
  }
  drk_tile_build(&c->b, DRK_TOP_BARRIER, 0, NULL, 0, NULL);
  for (int t = 0; t < 4; t++) {
    tv_t *fa = drk_tile_build1(&c->b, DRK_TOP_LOCAL_LOAD, 1, (tv_t *[]){w4_index(c, sA, t)},
                               drk_tile_type_tile(w.t, 2, (int64_t[]){BM, H}, opA));
    tv_t *fb = drk_tile_build1(&c->b, DRK_TOP_LOCAL_LOAD, 1, (tv_t *[]){w4_index(c, sB, t)},
                               drk_tile_type_tile(w.t, 2, (int64_t[]){H, BN}, opB));
    drk_tile_op_t *dot = drk_tile_build(&c->b, DRK_TOP_DOT, 3, (tv_t *[]){fa, fb, acc}, 1, &acc->type);
    drk_tile_op_set_ident(m, dot, "kind", "mma_sync");
    acc = dot->results[0];
  }
  tv_t *yl[1 + W4_AHEAD_MAX * 7];
  yl[0] = acc;
  for (int i = per; i < ahead * per; i++) yl[1 + i - per] = args[2 + i]; /* the later fetches move up */
  w4_pack_fetch(&nxt, yl + 1 + (ahead - 1) * per, tile_group, pz != NULL);
  loop = drk_tile_build_for_end(&c->b, ncarry, yl);
  tv_t *res = loop->results[0];

  /* epilogue in the accumulator layout */
  const drk_tile_layout_t *Cr = drk_tile_layout_slice(m, accL, 1), *Cc = drk_tile_layout_slice(m, accL, 0);
  tv_t *ei = lw_cast(c, lw_range(c, BM, Cr), c->it);
  tv_t *erow = BIN(ADD, lw_splat(c, BIN(MUL, pm, lw_sci(c, c->it, BM)), &ei->type), ei);
  tv_t *ej = lw_cast(c, lw_range(c, BN, Cc), c->it);
  tv_t *ecol = BIN(ADD, lw_splat(c, BIN(MUL, pn, lw_sci(c, c->it, BN)), &ej->type), ej);
  tv_t *emask = BIN(AND, lw_bcast_row(c, lw_cmp(c, "lt", erow, lw_ci(c, erow, w.M)), accL, BM, BN),
                    lw_bcast_col(c, lw_cmp(c, "lt", ecol, lw_ci(c, ecol, N)), accL, BM, BN));
  tv_t *yoff = BIN(ADD, lw_bcast_row(c, BIN(MUL, erow, lw_ci(c, erow, N)), accL, BM, BN), lw_bcast_col(c, ecol, accL, BM, BN));
  if (w.SP > 1) yoff = BIN(ADD, yoff, lw_splat(c, BIN(MUL, psp, lw_sci(c, c->it, w.M * N)), &yoff->type));
  lw_store(c, py, yoff, res, emask);
  drk_schedule_t S;
  memset(&S, 0, sizeof S);
  S.kind = "w4";
  S.mma = "mma_sync";
  S.warps = w.warps;
  S.tile_m = (int)BM;
  S.tile_n = (int)BN;
  S.tile_k = DRK_W4_BK;
  S.stages = 1;
  S.split_k = (int)w.SP;
  lw_kernel_end(c, (N + BN - 1) / BN, (w.M + BM - 1) / BM, w.SP, w.warps, smem, &S);
  if (w.SP > 1) w4_splitk_sum(c, &w, ws);
  return true;
}
