/* Default schedule heuristic of the GPU lowering, in one place: elements per program and
 * per thread for flat kernels, rows x columns per program for row reductions, tile M/N/K,
 * warps, stages, mma kind and split-K for matmul-like kernels.
 *
 * Requires: static sizes. Guarantees: deterministic choices (same sizes, same schedule);
 * every tile dimension is a power of two and every layout spreads over exactly `warps`
 * warps, so the kernels verify. The search later replaces these defaults. */
#include "lower/lower_internal.h"

#include <stdlib.h>
#include <string.h>

int64_t lw_pow2ceil(int64_t v) {
  int64_t p = 1;
  while (p < v && p < ((int64_t)1 << 40)) p <<= 1;
  return p;
}

drk_schedule_t drk_sched_flat(int64_t n) {
  drk_schedule_t s = {0};
  s.kind = "flat";
  if (n >= ((int64_t)1 << 22)) {
    /* Large streams: each thread keeps 4 chunks of 8 elements in flight (the tile is 4x the
     * layout's coverage), enough memory-level parallelism to approach copy bandwidth. */
    s.block_elems = 4096;
    s.warps = 4;
    s.spt = 8;
  } else if (n >= 1024) {
    s.block_elems = 1024;
    s.warps = 4;
    s.spt = 8;
  } else {
    int64_t b = lw_pow2ceil(n < 32 ? 32 : n);
    s.block_elems = (int)b;
    s.warps = (int)(b / 32 >= 4 ? 4 : b / 32);
    s.spt = (int)(b / (32 * s.warps));
  }
  return s;
}

/* drk_sched_flat's schedule for a pinned power-of-two block of at least 1024 elements (8
 * per thread, 4 warps, as many chunks per thread as the block holds) */
drk_schedule_t drk_sched_flat_block(int block) {
  drk_schedule_t s = drk_sched_flat(block);
  s.block_elems = block;
  return s;
}

const drk_tile_layout_t *drk_sched_flat_layout(drk_tile_module_t *m, const drk_schedule_t *s) {
  int spt[1] = {s->spt}, tpw[1] = {32}, wpc[1] = {s->warps}, ord[1] = {0};
  return drk_tile_layout_blocked(m, 1, spt, tpw, wpc, ord);
}

/* Row kernels. By default warps go along rows, so `reduce` along the columns stays inside a
 * warp (shuffles only). Contiguous rows: a warp's lanes walk the columns (coalesced);
 * otherwise lanes walk rows (neighbouring rows are neighbours in memory).
 *
 * Few long rows (the grid of that form has fewer programs than two waves of `sms` and a row
 * is longer than one chunk: GroupNorm(1 group) over [1, 64, 56, 56] is 1 row of 200,704, an
 * NHWC SE block's ReduceMean over [1, 112, 112, 32] 32 rows of 12,544) would leave one warp
 * walking a whole row on one SM. Then warps go along the columns instead (col_warps, knob
 * rows.col_warps): a program takes one row (contiguous) or one 32-row strip (strided), its
 * warps split the columns, and each `reduce` ends with a round through shared memory (the
 * backend's cross-warp reduction). sms <= 0 keeps the warps along rows (TopK). */
static int64_t pow2floor(int64_t v) {
  int64_t p = 1;
  while (p * 2 <= v) p *= 2;
  return p;
}

drk_schedule_t drk_sched_rows(int64_t rows, int64_t R, bool contiguous, int sms, const drk_sched_knobs_t *kn) {
  drk_schedule_t s = {0};
  s.kind = "rows";
  int64_t cols = lw_pow2ceil(R < 1 ? 1 : R);
  if (contiguous) {
    if (cols > 1024) cols = 1024;
    if (cols < 32) cols = 32;
    int64_t rp = 4096 / cols; /* about 4K elements per program */
    if (rp < 1) rp = 1;
    int64_t rr = lw_pow2ceil(rows);
    if (rp > rr) rp = rr;
    if (rp > 64) rp = 64;
    s.rows = (int)rp;
    s.cols = (int)cols;
    s.warps = (int)(rp >= 4 ? 4 : rp);
    int spt = drk_knob_or(kn, DRK_KNOB_ROWS_SPT, 4);
    s.spt = (int)(cols / 32 >= spt ? spt : cols / 32);
    if (sms > 0) {
      /* one row per program, cw warps over the columns: about 1K elements per warp and row */
      int64_t dflt = (rows + rp - 1) / rp < 2 * sms && R > cols ? pow2floor(R / 1024) : 1;
      int cw = drk_knob_or(kn, DRK_KNOB_ROWS_COL_WARPS, (int)(dflt < 1 ? 1 : dflt > 16 ? 16 : dflt));
      if (cw > 1) {
        int sp = drk_knob_or(kn, DRK_KNOB_ROWS_SPT, 4);
        int64_t cover = (int64_t)cw * 32 * sp, want = lw_pow2ceil(R);
        /* two layout repeats per chunk keep more loads in flight, never less than the layout */
        s.rows = 1;
        s.cols = (int)(want < cover ? cover : want > 2 * cover ? 2 * cover : want);
        s.spt = sp;
        s.warps = cw;
        s.col_warps = cw;
      }
    }
  } else {
    if (cols > 64) cols = 64;
    int64_t rp = 128;
    int64_t rr = lw_pow2ceil(rows);
    if (rp > rr) rp = rr;
    if (rp < 32) rp = 32;
    s.rows = (int)rp;
    s.cols = (int)cols;
    s.warps = (int)(rp / 32 >= 4 ? 4 : rp / 32);
    s.spt = 1;
    if (sms > 0) {
      /* a 32-row strip per program (lanes along the rows), cw warps over the columns with
       * four columns each per chunk */
      int64_t dflt = (rows + rp - 1) / rp < 2 * sms && R > cols ? pow2floor(R / 256) : 1;
      int cw = drk_knob_or(kn, DRK_KNOB_ROWS_COL_WARPS, (int)(dflt < 1 ? 1 : dflt > 16 ? 16 : dflt));
      if (cw > 1) {
        s.rows = 32;
        s.cols = 4 * cw;
        s.warps = cw;
        s.col_warps = cw;
      }
    }
  }
  return s;
}

/* Programs sharing each row tile (knob rows.split): when the row tiles (`programs`) fill less
 * than the SMs and a row has at least 8 chunks, about two waves of programs, each keeping at
 * least 2 chunks, at most 128; 1 otherwise. */
int drk_sched_rows_split(int64_t programs, int64_t chunks, int sms, const drk_sched_knobs_t *kn) {
  int64_t sp = 1;
  if (programs < sms && chunks >= 8) {
    sp = (2 * sms + programs - 1) / programs;
    if (sp > chunks / 2) sp = chunks / 2;
    if (sp > 128) sp = 128;
  }
  return drk_knob_or(kn, DRK_KNOB_ROWS_SPLIT, (int)(sp < 1 ? 1 : sp));
}

/* Split rows for a rows schedule s with warps along the row (col_warps > 1): a chunk becomes
 * one layout cover (so that more programs get columns), then drk_sched_rows_split; evens the
 * chunks out so that no program is left without columns. Sets s->split_rows (0: none, and
 * s->cols is kept) and returns the chunks per program.
 *
 * One chunk per program where it fits: a program walking its columns chunk by chunk keeps
 * one load per thread in flight and pays the memory latency once per chunk and pass (the
 * partial kernel of a norm has two passes: GroupNorm(1) over [32, 64, 56, 56] took 11 chunks
 * twice, 17 us for 12.8 MB on the H200). So the chunk grows (powers of two, at most 32
 * elements per thread) to cover a program's columns, the heuristic taking up to
 * min(2 waves / row tiles, chunks, 128) programs per row tile, more when one chunk of that size
 * needs them (at most 128); the kernels then have no chunk loop (lower_reduce.c rv_pass,
 * lower_fused.c loop_begin). A pinned rows.split gets one chunk when a power of two chunk
 * gives exactly that many programs (so --emit=schedules applied back is the same kernel). */
int64_t drk_sched_rows_split_plan(drk_schedule_t *s, int64_t rows, int64_t R, bool contiguous, int sms,
                                  const drk_sched_knobs_t *kn) {
  s->split_rows = 0;
  if (s->col_warps <= 1) return 0;
  int cols = contiguous ? s->col_warps * 32 * s->spt : s->spt > 1 ? s->cols / 2 : s->cols;
  int64_t chunks = (R + cols - 1) / cols, P = (rows + s->rows - 1) / s->rows;
  int sp = drk_sched_rows_split(P, chunks, sms, kn), pin;
  if (sp <= 1) return 0;
  bool pinned = drk_knob_pinned(kn, DRK_KNOB_ROWS_SPLIT, &pin);
  /* the largest chunk: at most 32 elements per thread */
  int64_t cmax = cols;
  while ((int64_t)s->rows * cmax * 2 <= (int64_t)32 * 32 * s->warps) cmax *= 2;
  if (!pinned) {
    int64_t want = (2 * sms + P - 1) / P, one = (R + cmax - 1) / cmax;
    if (want > chunks) want = chunks;
    if (want < one) want = one;
    if (want <= 128 && want > 1) sp = (int)want;
  }
  int64_t span = (R + sp - 1) / sp, c1 = cols;
  while (c1 < span) c1 *= 2;
  int64_t sp1 = (R + c1 - 1) / c1;
  if (c1 <= cmax && sp1 > 1 && (!pinned || sp1 == sp)) {
    s->cols = (int)c1;
    s->split_rows = (int)sp1;
    return 1;
  }
  int64_t cps = (chunks + sp - 1) / sp;
  sp = (int)((chunks + cps - 1) / cps);
  if (sp <= 1) return 0;
  s->cols = cols;
  s->split_rows = sp;
  return cps;
}

/* Strided rows with warps along the reduced axis (an NHWC spatial reduction: the rows are the
 * channels, contiguous): each thread takes 16 bytes of consecutive rows (spt along the rows;
 * the backend makes them one vector load where its axis facts allow), the rest of a warp's
 * lanes go along the columns, two layout covers per chunk. esize: bytes per element.
 * Strided rows with warps along the rows (many channels: an SE squeeze over [32, 7, 7, 1152])
 * likewise: 16 bytes of consecutive rows per thread, 32 / spt lanes along the rows and spt
 * along the columns (a warp: 32 rows x spt columns), when the chunk has that many columns. */
void drk_sched_rows_vec(drk_schedule_t *s, int esize) {
  if (esize < 1 || esize > 8) return;
  int vec = 16 / esize;
  if (vec > 8) vec = 8;
  if (s->col_warps > 1) {
    if (s->rows != 32) return;
    s->spt = vec;
    s->cols = 2 * (32 / (32 / vec)) * s->col_warps;
    return;
  }
  if (vec > 1 && s->rows >= 32 && s->cols >= vec && s->rows % (32 * s->warps) == 0) s->spt = vec;
}

/* Whole rows (knob rows.whole) of a contiguous row kernel, applied after drk_sched_rows. A warp
 * walking a long row chunk by chunk reads it once per pass: LayerNorm's mean, variance and
 * write, softmax's max, sum and write read it three times, the later passes from L2 (the
 * issue's bf16 LayerNorm over 8192 x 8192 at 1684 GB/s of 4200). When the rows fill the SMs
 * (at least one program per SM; or whatever the row count, when the kernel cannot split its
 * rows: an RMSNorm written as primitives at batch 1) and a row holds 2K elements to 64 KB, one program takes one row
 * as one chunk (cols = the next power of two of R): col_warps = cols / (32 ept) warps, ept = 32
 * elements per thread (at most 16 warps: 64 for 32K 16-bit rows; none when that exceeds
 * ept_max, what the caller's kernel can keep live), so that the lowering loads the row once
 * and keeps it in registers through every pass. Rows of up to 1K elements are one chunk of a
 * several-row program already. Both get 16-byte accesses (spt = 16 / esize, capped by the
 * chunk's 32 lanes) unless rows.spt is pinned. s->whole says one chunk covers the row.
 * Pinned rows.col_warps keeps drk_sched_rows' form; rows.whole=0 keeps it too, rows.whole=1
 * takes whole rows whatever the row count. */
void drk_sched_rows_whole(drk_schedule_t *s, int64_t rows, int64_t R, int esize, int sms, int ept_max, bool may_split,
                          const drk_sched_knobs_t *kn) {
  int wpin = -1, cwpin = 0, sptpin = 0;
  bool wpinned = drk_knob_pinned(kn, DRK_KNOB_ROWS_WHOLE, &wpin), cwpinned = drk_knob_pinned(kn, DRK_KNOB_ROWS_COL_WARPS, &cwpin);
  bool spt_pinned = drk_knob_pinned(kn, DRK_KNOB_ROWS_SPT, &sptpin);
  s->whole = s->col_warps <= 1 && R <= s->cols;
  /* a pinned rows.col_warps alone keeps drk_sched_rows' form (with rows.whole=1 it is the
   * whole row's warps: what --emit=schedules prints, applied back) */
  if (sms <= 0 || esize < 1 || esize > 8 || (wpinned && wpin == 0) || (cwpinned && !wpinned)) return;
  /* 16-byte accesses need rows of whole 16-byte units (else the backend splits them into
   * element loads that span more sectors a warp: keep the old 4 elements a thread) */
  int vec = (R * esize) % 16 ? 4 : 16 / esize > 8 ? 8 : 16 / esize;
  int64_t want = lw_pow2ceil(R < 1 ? 1 : R);
  if (want > 1024 && want * esize <= 65536 && (rows >= sms || !may_split || wpin == 1)) {
    int64_t cw = cwpinned ? cwpin : want / (32 * 32);
    if (cw > 16) cw = 16;
    if (cw < 1) cw = 1;
    int64_t ept = want / (32 * cw);
    if (ept <= ept_max) {
      int spt = spt_pinned ? sptpin : vec;
      if (spt > ept) spt = (int)ept;
      s->rows = 1;
      s->cols = (int)want;
      s->warps = (int)cw;
      s->col_warps = (int)cw;
      s->spt = spt;
      s->split_rows = 0;
      s->whole = true;
      return;
    }
  }
  if (s->whole) {
    /* short rows: 16 bytes a thread; a chunk narrower than a warp's 32 lanes of 16 bytes puts
     * 32 / (cols / spt) rows in each warp (drk_sched_rows_layout), when the program has rows
     * for every warp (ConvNeXt's LayerNorm over 96 channels: 2 rows a warp, 16-byte loads) */
    int want = spt_pinned ? sptpin : (R * esize) % 16 ? s->spt : vec;
    int64_t lanes = s->cols / want;
    if (want <= s->cols && (lanes >= 32 || (32 / lanes) * s->warps <= s->rows)) s->spt = want;
    else s->spt = s->cols / 32 >= want ? want : s->cols / 32;
  }
}

const drk_tile_layout_t *drk_sched_rows_layout(drk_tile_module_t *m, const drk_schedule_t *s, bool contiguous) {
  int cw = s->col_warps > 1 ? s->col_warps : 1;
  int spt[2], tpw[2], wpc[2] = {s->warps / cw, cw}, ord[2] = {1, 0};
  if (contiguous) {
    int lanes = s->spt > 0 ? s->cols / s->spt : 32;
    spt[0] = 1;
    spt[1] = s->spt;
    tpw[0] = 1;
    tpw[1] = 32;
    if (cw <= 1 && lanes >= 1 && lanes < 32) { /* drk_sched_rows_whole: several rows a warp */
      tpw[0] = 32 / lanes;
      tpw[1] = lanes;
    }
  } else if (s->spt > 1) { /* drk_sched_rows_vec: 16 bytes of rows per thread */
    spt[0] = s->spt;
    spt[1] = 1;
    tpw[0] = 32 / s->spt;
    tpw[1] = s->spt;
    ord[0] = 0;
    ord[1] = 1;
  } else {
    spt[0] = 1;
    spt[1] = 1;
    tpw[0] = 32;
    tpw[1] = 1;
  }
  return drk_tile_layout_blocked(m, 2, spt, tpw, wpc, ord);
}

drk_schedule_t drk_sched_seq(int64_t rows) {
  drk_schedule_t s = drk_sched_flat(rows);
  s.kind = "seq";
  if (s.block_elems > 256) {
    s.block_elems = 256;
    s.spt = 2;
  }
  return s;
}

/* Split-K: programs (the tile grid times the batch) on a GPU of `sms` SMs with nk k tiles.
 * 1 (no split) unless the grid fills at most half of the SMs and K has at least 8 k tiles;
 * else about sms / programs splits (at most 16), each of at least 4 k tiles, preferring a
 * count that divides nk (every split the same length) when one is within 2/3 of the wanted
 * count, and never an empty split (the count is ceil(nk / k tiles per split)). */
int drk_sched_split_k(int64_t programs, int64_t nk, int sms) {
  if (programs < 1 || programs * 2 > sms || nk < 8) return 1;
  int64_t want = (sms + programs - 1) / programs, most = nk / 4;
  if (want > 16) want = 16;
  if (want > most) want = most;
  if (want < 2) return 1;
  int64_t sp = want;
  for (int64_t d = want; d * 3 >= want * 2 && d >= 2; d--)
    if (nk % d == 0) { sp = d; break; }
  int64_t per = (nk + sp - 1) / sp;
  sp = (nk + per - 1) / per;
  return sp < 2 ? 1 : (int)sp;
}

int lw_target_sms(const drk_lower_options_t *o) {
  int sm = o->target_sm ? o->target_sm : 80;
  return sm == 87 ? 16 : sm == 90 ? 132 : 108;
}

/* split-K of a general-kernel grid of bm x bn tiles: pinned (mm.split_k) or drk_sched_split_k */
static int mm_split(const drk_lower_options_t *o, int64_t M, int64_t N, int64_t nb, int64_t bm, int64_t bn, int64_t nk) {
  int pin;
  if (drk_knob_pinned(&o->knobs, DRK_KNOB_MM_SPLIT_K, &pin)) return pin;
  return drk_sched_split_k(((M + bm - 1) / bm) * ((N + bn - 1) / bn) * nb, nk, lw_target_sms(o));
}

/* Tiles of the general matmul kernel (lower/lower_matmul.c: a ring of `stages` shared
 * buffers filled by cp.async, one barrier per k step).
 * mma_sync (f16/bf16/f8; f32 as tf32 when allowed): BLOCK_M x BLOCK_N the next powers of two of
 * M and N in [32, 128] x [16, 128], then halved (the larger first, not below 32) while the
 * grid has fewer programs than the GPU has SMs (about 108; 16 on Orin), so that small
 * problems still spread; 128x128 tiles take 8 warps (2 x 4 of 64 x 32: 64 accumulator
 * registers per thread), smaller ones 4 (2 x 2). BLOCK_K: 32 (16-bit),
 * 64 (f8) or 16 (tf32), 16 KB of stage for 128x128. Stages: as many as fit 64 KB (sm_80/87,
 * 164 KB per SM; also gfx942's LDS, where the same kernels run with synchronous copies: a
 * module for gfx942 and NVIDIA is lowered for sm_80), 48 KB (sm_86/89: 100 KB per SM) or
 * 96 KB (sm_90: 228 KB per SM, and the 128x128 kernel's ~150 registers leave room for one
 * program of 8 warps per SM, so more stages in flight hide the memory latency), at most 4
 * (sm_90: 6), at most the number of k tiles, at least 2.
 * fma (f32 without tf32, f64): BLOCK_M/N in [16, 64], 4 warps, BLOCK_K 16 (f64: 8, as each
 * thread holds its rows and columns of the whole k tile), 2 stages.
 * Both: split_k from drk_sched_split_k over the final tiles (132 SMs on sm_90, 108 otherwise,
 * 16 on Orin); mma_sync stages are then clamped to the k tiles of one split. */
drk_schedule_t drk_sched_mm(int64_t M, int64_t N, int64_t K, int64_t batch, drk_dtype_t t, const drk_lower_options_t *o) {
  drk_schedule_t s = {0};
  s.kind = "mm";
  s.warps = 4;
  bool f8 = t == DRK_DT_F8E4M3 || t == DRK_DT_F8E5M2; /* f8 has no fma form: always mma_sync */
  bool mma = t == DRK_DT_F16 || t == DRK_DT_BF16 || f8 || (t == DRK_DT_F32 && o->allow_tf32);
  s.mma = mma ? "mma_sync" : "fma";
  s.tf32 = t == DRK_DT_F32 && mma;
  int64_t bm = lw_pow2ceil(M), bn = lw_pow2ceil(N);
  int64_t lo_m = mma ? 32 : 16, lo_n = 16, hi = mma ? 128 : 64;
  bm = bm < lo_m ? lo_m : bm > hi ? hi : bm;
  bn = bn < lo_n ? lo_n : bn > hi ? hi : bn;
  int64_t nb = batch > 0 ? batch : 1;
  if (!mma) {
    s.tile_m = (int)bm, s.tile_n = (int)bn, s.tile_k = t == DRK_DT_F64 ? 8 : 16, s.stages = 2;
    s.split_k = mm_split(o, M, N, nb, bm, bn, (K + s.tile_k - 1) / s.tile_k);
    return s;
  }
  int sm = o->target_sm ? o->target_sm : 80;
  int64_t want = sm == 87 ? 16 : 108;
  for (;;) {
    int64_t progs = ((M + bm - 1) / bm) * ((N + bn - 1) / bn) * (batch > 0 ? batch : 1);
    if (progs >= want) break;
    if (bm >= bn && bm > 32) bm /= 2;
    else if (bn > 32) bn /= 2;
    else if (bm > 32) bm /= 2;
    else break;
  }
  s.tile_m = (int)bm;
  s.tile_n = (int)bn;
  s.tile_k = t == DRK_DT_F32 ? 16 : f8 ? 64 : 32; /* 64 bytes of K per row either way */
  s.warps = bm == 128 && bn == 128 ? 8 : 4;
  int64_t stage = (bm + bn) * s.tile_k * (drk_dtype_bits(t) / 8);
  int64_t budget = sm == 86 || sm == 89 ? 48 * 1024 : sm == 90 ? 96 * 1024 : 64 * 1024;
  int64_t nk = (K + s.tile_k - 1) / s.tile_k, most = sm == 90 ? 6 : 4;
  s.split_k = mm_split(o, M, N, nb, bm, bn, nk);
  if (s.split_k > 1) nk = (nk + s.split_k - 1) / s.split_k; /* k tiles per program */
  int64_t st = budget / stage;
  if (st > most) st = most;
  if (st > nk) st = nk;
  s.stages = (int)(st < 2 ? 2 : st);
  return s;
}

/* Estimated time (us) of the sm_90a kernel with N tile bn and split sp: a fixed cost (launch,
 * pipeline fill, epilogue), then per wave of 132 programs the MMA time of one 128 x bn x
 * K/sp tile at the rate measured for that tile width, and with sp > 1 the reduction kernel
 * (launch plus reading the f32 partials and writing the result). Fitted to the H200 (tests/
 * bench/results/2026-11-30-h200-mm-shapes.md): 128 x 128 tiles take 0.45 us per 10^6
 * multiply-adds; 256-wide ones run 1.1x faster per MAC (operand reuse), 64-wide 0.65x. */
static double ws_cost(int64_t M, int64_t N, int64_t K, int64_t batch, int bn, int sp) {
  double eff = bn == 256 ? 1.1 : bn == 128 ? 1.0 : 0.65;
  int64_t nk = (K + 63) / 64, per = (nk + sp - 1) / sp;
  int64_t tiles = ((M + 127) / 128) * ((N + bn - 1) / bn) * batch * sp, waves = (tiles + 131) / 132;
  double t = 5.0 + (double)waves * (128.0 * bn * 64.0 * (double)per / 1e6 * 0.45 / eff + 1.0);
  if (sp > 1) t += 3.0 + (double)M * (double)N * (double)batch * sp * 8.0 / 3e6;
  return t;
}

/* The sm_90a warp-specialized kernel: 128 x BN x 64 tiles (two consumer warpgroups of
 * 64 rows), a ring of 128-byte swizzled stages filling most of the 227 KB of shared memory
 * (at most 6 stages: 6 of 32 KB for BN = 128, 4 of 48 KB for BN = 256). BN (64, 128, 256)
 * and split-K (1..16, each split at least 4 k tiles) minimize ws_cost, ties to the earlier
 * of BN 128, 256, 64 and the smaller split; mm.tile_n / mm.split_k pin them. */
/* With a fused epilogue BN = 256 (128 f32 accumulators per thread, and as many epilogue
 * values and offsets) is left out unless pinned: it spills (GPT-2's GELU and QKV bias,
 * LLaMA's SiLU and residual Adds, ptxas -v). */
drk_schedule_t drk_sched_mm_ws(int64_t M, int64_t N, int64_t K, int64_t batch, drk_dtype_t t,
                               const drk_lower_options_t *o, bool epilogue) {
  drk_schedule_t s = {0};
  s.kind = "mm_ws";
  if (o->target_sm != 90 || !o->arch_specific || (t != DRK_DT_F16 && t != DRK_DT_BF16)) return s;
  const drk_sched_knobs_t *kn = &o->knobs;
  int64_t nb = batch > 0 ? batch : 1, nk = (K + 63) / 64;
  static const int bns[] = {128, 256, 64};
  double best = 0;
  int best_bn = 128, best_sp = 1;
  /* the persistent forms only when pinned: ping-pong (mm.persistent=1) used to be the default
   * for fused epilogues on big short-K grids (LLaMA's gate with SiLU 102 -> 93 us), until the
   * staged epilogue of the one-tile form beat it on every shape of the sweep (H200,
   * tests/bench/results/2026-11-30-h200-mm-staged.md: 2048x5632x2048 85.8 us vs 90.6
   * ping-pong); cooperative (mm.persistent=2) never won there */
  /* ... except short reductions (at most 3 k tiles) on big grids (4 waves of 128 x 128 tiles),
   * which take the cooperative form: a tile's mainloop is too short to hide the one-tile
   * form's epilogue, and the persistent program loads the next tile while it stores (H200,
   * call 61: 200704x256x64 + ReLU 83.6 -> 47.1 us, cuBLAS's matmul alone 54.3; ConvNeXt's MLP
   * 100352x384x96 + GELU 126 -> 113, 25088x768x192 67 -> 60) */
  int64_t tiles128 = ((M + 127) / 128) * ((N + 127) / 128) * nb;
  int form = drk_knob_or(kn, DRK_KNOB_MM_PERSISTENT, nk <= 3 && tiles128 >= 4 * (int64_t)lw_target_sms(o) ? 2 : 0),
      tile_n = drk_knob_or(kn, DRK_KNOB_MM_TILE_N, 0), split = drk_knob_or(kn, DRK_KNOB_MM_SPLIT_K, 0);
  bool coop = form == 2, pers = form == 1;
  for (int i = 0; i < 3; i++) {
    if (pers && bns[i] > 128) continue; /* ping-pong: 2 x 64 x BN accumulators per thread */
    if (tile_n ? bns[i] != tile_n : epilogue && bns[i] > 128) continue;
    for (int sp = 1; sp <= 16; sp++) {
      if ((pers || coop) ? sp > 1 /* a pinned split is ignored */
                         : split ? sp != split : sp > 1 && (nk / sp < 4 || nb * sp > 65535))
        continue;
      double c = ws_cost(M, N, K, nb, bns[i], sp);
      if (best == 0 || c < best) best = c, best_bn = bns[i], best_sp = sp;
    }
  }
  s.mma = "wgmma";
  s.warps = 12;
  s.tile_m = 128;
  s.tile_n = best_bn;
  s.tile_k = 64;
  int64_t stage = (int64_t)(s.tile_m + s.tile_n) * s.tile_k * 2, st = (200 * 1024) / stage;
  s.stages = drk_knob_or(kn, DRK_KNOB_MM_STAGES, (int)(st > 6 ? 6 : st));
  s.split_k = best_sp;
  s.persistent = pers || coop ? lw_target_sms(o) : 0;
  s.coop = coop;
  s.cluster = drk_knob_or(kn, DRK_KNOB_MM_CLUSTER, 1);
  s.staged = drk_knob_or(kn, DRK_KNOB_MM_STAGED, 1) == 1;
  return s;
}

/* The M tile of the convolution is a window of 128 output pixels: images x h x w (powers of
 * two). TMA fills the window from one box of the NHWC input per tap, and the pixels past the
 * output's edge are computed and thrown away, so the heuristic takes the window with the
 * fewest such pixels over the whole output (ties: the wider window, whose rows are longer
 * runs of memory): at batch 64, 56 x 56 takes 2 images of 8 x 8 and 14 x 14 32 of 2 x 2 (no
 * pixel wasted), 7 x 7 16 of 1 x 8 (14 %); at batch 1, 56 x 56 takes 2 x 64 (12.5 %), 7 x 7
 * 8 x 16 (62 %, the least a 128-pixel window can do). Not measured yet: whether narrow boxes
 * (short contiguous runs) slow TMA down. conv.tile_h / conv.tile_w pin it. The N tile, stages and staging come from drk_sched_mm_ws on the GEMM's sizes. */
drk_schedule_t drk_sched_conv_ws(int64_t Nb, int64_t OH, int64_t OW, int64_t OC, int64_t K, const int64_t *st,
                                 drk_dtype_t t, const drk_lower_options_t *o, int epi) {
  /* Big grids (4 waves or more of 128 x 256 tiles) may take BN = 256 with a light fused
   * epilogue, unstaged: bias, ReLU, the residual Add, a Cast do not spill there (ptxas -v:
   * 0 bytes on a 3x3 conv + bias + Add + ReLU; an erf GELU spills 772 bytes, so other
   * epilogues keep BN <= 128), and on the H200 conv3x3 N64 C256 56x56
   * K256 (with its f32 Cast) ran in 0.345 ms with BN 256 unstaged against 0.409 ms with
   * the default BN 128 staged (device call 36; cuDNN 0.344 ms). Smaller grids keep the
   * matmul's rule (128: conv3x3 at 14 x 14 was 1.51x cuDNN with it). */
  const drk_sched_knobs_t *kn = &o->knobs;
  int64_t M = Nb * OH * OW;
  bool big = ((M + 127) / 128) * ((OC + 255) / 256) >= 4 * (int64_t)lw_target_sms(o);
  drk_schedule_t s = drk_sched_mm_ws(M, OC, K, 1, t, o, epi == DRK_CONV_EPI_OTHER || (epi && !big));
  s.kind = "conv_ws";
  if (!s.mma) return s;
  int pin;
  if (big && s.tile_n == 256 && !drk_knob_pinned(kn, DRK_KNOB_MM_STAGED, &pin)) s.staged = false;
  int ph = drk_knob_or(kn, DRK_KNOB_CONV_TILE_H, 0), pw = drk_knob_or(kn, DRK_KNOB_CONV_TILE_W, 0);
  int64_t best = -1;
  for (int w = 128; w >= 1; w /= 2)
    for (int h = 128 / w; h >= 1; h /= 2) {
      int img = 128 / (w * h);
      if ((pw && w != pw) || (ph && h != ph) || w * st[1] > 256 || h * st[0] > 256) continue;
      int64_t rows = ((Nb + img - 1) / img) * ((OH + h - 1) / h) * ((OW + w - 1) / w) * 128;
      if (best < 0 || rows < best) best = rows, s.conv_h = h, s.conv_w = w;
    }
  if (best < 0) s.mma = NULL; /* pinned to a window TMA cannot load */
  s.persistent = 0;
  s.coop = false;
  s.cluster = 1;
  return s;
}

/* ---- knobs ---- */
static const drk_knob_def_t knob_defs[DRK_KNOB_COUNT] = {
#define DRK_KNOB(ID, name, kinds, lo, hi, pow2, doc) [DRK_KNOB_##ID] = {name, kinds, lo, hi, pow2, doc},
#include "lower/knobs.def"
#undef DRK_KNOB
};

const drk_knob_def_t *drk_knob_def(drk_knob_id_t id) {
  return (int)id >= 0 && id < DRK_KNOB_COUNT ? &knob_defs[id] : NULL;
}

int drk_knob_find(const char *name, size_t len) {
  for (int i = 0; i < DRK_KNOB_COUNT; i++)
    if (strlen(knob_defs[i].name) == len && strncmp(knob_defs[i].name, name, len) == 0) return i;
  return -1;
}

bool drk_knob_pinned(const drk_sched_knobs_t *k, drk_knob_id_t id, int *out) {
  if (!k) return false;
  if (k->used) *k->used |= 1u << id;
  if (!(k->set & (1u << id))) return false;
  *out = k->v[id];
  return true;
}

int drk_knob_or(const drk_sched_knobs_t *k, drk_knob_id_t id, int dflt) {
  int v;
  return drk_knob_pinned(k, id, &v) ? v : dflt;
}

void drk_knob_set(drk_sched_knobs_t *k, drk_knob_id_t id, int v) {
  k->set |= 1u << id;
  k->v[id] = v;
}

void drk_sched_knobs_overlay(drk_sched_knobs_t *base, const drk_sched_knobs_t *over) {
  for (int i = 0; i < DRK_KNOB_COUNT; i++)
    if (over->set & (1u << i)) drk_knob_set(base, (drk_knob_id_t)i, over->v[i]);
}

static bool knob_legal(const drk_knob_def_t *kd, long v) {
  return v >= kd->lo && v <= kd->hi && (!kd->pow2 || (v & (v - 1)) == 0);
}

bool drk_sched_knobs_parse(const char *text, drk_sched_knobs_t *k, char *err, size_t n) {
  const char *p = text;
  while (*p) {
    size_t len = strcspn(p, ",");
    const char *eq = memchr(p, '=', len);
    size_t kl = eq ? (size_t)(eq - p) : len;
    int id = drk_knob_find(p, kl);
    if (!eq || id < 0) {
      int w = snprintf(err, n, "'%.*s' is not KEY=VALUE with a known key (", (int)len, p);
      for (int j = 0; j < DRK_KNOB_COUNT && w >= 0 && (size_t)w < n; j++)
        w += snprintf(err + w, n - (size_t)w, "%s%s", j ? ", " : "", knob_defs[j].name);
      if (w >= 0 && (size_t)w < n) snprintf(err + w, n - (size_t)w, ")");
      return false;
    }
    const drk_knob_def_t *kd = &knob_defs[id];
    char *end;
    long v = strtol(eq + 1, &end, 10);
    if (end != p + len || end == eq + 1 || !knob_legal(kd, v)) {
      snprintf(err, n, "%s: %s%d..%d, not '%.*s'", kd->name, kd->pow2 ? "a power of two in " : "", kd->lo, kd->hi,
               (int)(len - kl - 1), eq + 1);
      return false;
    }
    drk_knob_set(k, (drk_knob_id_t)id, (int)v);
    p += len;
    if (*p == ',') p++;
  }
  return true;
}

void drk_sched_knobs_format(const drk_sched_knobs_t *k, char *buf, size_t n) {
  size_t w = 0;
  if (n) buf[0] = 0;
  for (int i = 0; i < DRK_KNOB_COUNT && w < n; i++)
    if (k->set & (1u << i)) {
      int r = snprintf(buf + w, n - w, "%s%s=%d", w ? " " : "", knob_defs[i].name, k->v[i]);
      if (r < 0) break;
      w += (size_t)r;
    }
}

int drk_schedule_knob_value(const drk_schedule_t *s, drk_knob_id_t id) {
  switch (id) {
    case DRK_KNOB_MM_TILE_N: return s->tile_n ? s->tile_n : -1;
    case DRK_KNOB_MM_SPLIT_K: return s->split_k ? s->split_k : 1;
    case DRK_KNOB_MM_STAGES: return s->stages ? s->stages : -1;
    case DRK_KNOB_MM_PERSISTENT: return s->persistent ? (s->coop ? 2 : 1) : 0;
    case DRK_KNOB_MM_CLUSTER: return s->cluster > 1 ? s->cluster : 1;
    case DRK_KNOB_MM_STAGED: return s->staged;
    case DRK_KNOB_MM_PAIR: return s->pair;
    case DRK_KNOB_FLAT_MOVE_BLOCK: return s->block_elems ? s->block_elems : -1;
    case DRK_KNOB_ROWS_SPT: return s->spt ? s->spt : -1;
    case DRK_KNOB_ATTN_BLOCK_M: return s->tile_m ? s->tile_m : -1;
    case DRK_KNOB_CONV_HOPPER: return s->conv_w ? 1 : 0;
    case DRK_KNOB_CONV_TILE_H: return s->conv_h ? s->conv_h : -1;
    case DRK_KNOB_CONV_TILE_W: return s->conv_w ? s->conv_w : -1;
    case DRK_KNOB_ROWS_COL_WARPS: return s->col_warps > 1 ? s->col_warps : 1;
    case DRK_KNOB_ROWS_SPLIT: return s->split_rows > 1 ? s->split_rows : 1;
    case DRK_KNOB_DW_DIRECT: return s->kind && strcmp(s->kind, "dw") == 0;
    case DRK_KNOB_DW_PIX: return s->spt ? s->spt : -1;
    case DRK_KNOB_DW_CTILE: return s->tile_n ? s->tile_n : -1;
    case DRK_KNOB_DW_WARPS: return s->warps ? s->warps : -1;
    case DRK_KNOB_ROWS_WHOLE: return s->whole ? 1 : 0;
    case DRK_KNOB_COUNT: break;
  }
  return -1;
}
