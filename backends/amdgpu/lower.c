/* Tile IR -> LLVM IR for gfx942 (see docs/backend-amdgpu.md, "Lowering"). Mirrors
 * backends/nvptx/lower.c.
 *
 * Requires a module that passed drk_tile_verify(). Lowers each kernel op by op, in the
 * order of its regions: tile values become arrays of per-thread registers placed by their
 * layout (lower_internal.h), scalars single values, shared-memory buffers addrspace(3)
 * pointers into the kernel's LDS (one static array of the kernel's `smem` bytes, so the
 * code object's group segment size is the whole requirement and launches pass no dynamic
 * LDS). One pre-pass computes axis facts (contiguity, divisibility, constancy) for integer
 * and pointer tiles, with a fixpoint over loops, so loads, stores and LDS accesses are
 * vectorized. Guarantees: a kernel either lowers to a function that LLVMVerifyModule
 * accepts or gets a located error ("amdgpu: cannot lower ..."); only intrinsics the AMDGPU
 * backend selects for gfx942 are emitted, so LLVM never aborts on "Cannot select" or a
 * missing libcall. NVIDIA-only ops (TMA, mbarriers, wgmma, warp groups, setmaxnreg, named
 * barriers, clusters) are located errors. cp_async becomes a synchronous copy (the tile
 * IR's barrier after cp_async_wait orders it), cp_async_commit/wait nothing; a `for` with a
 * barrier in its body stays rolled (lower_for: why). This file
 * holds thread/wave ids, the LDS symbols, the placement of mma_sync/mfma layouts on waves,
 * the ops only this target lowers and the entry point (through the gpu_target_t hooks of
 * backends/common/lower.h, which holds the driver, blocked layouts, axis analysis, data
 * movement and control flow); lower_math.c the math functions, lower_mem.c the cross-wave
 * round of reductions and dot (MFMA).
 *
 * Schedule knob xcd_remap (drk_amdgpu_lower_opts_t): gfx942 dispatches workgroups round-robin
 * over its XCDs (each with its own L2), so neighbouring tiles of a GEMM, which share A rows or
 * B columns, would land on different L2s. Kernels with a dot (the default) get program ids
 * renumbered so that each XCD runs a contiguous range of logical tiles (xcd_remap below).
 * Programs of the tile IR are independent, so any renumbering is correct; only the L2 hit
 * rate changes. */
#include "backends/amdgpu/lower_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Analysis.h>

LLVMValueRef am_tid(am_lc_t *lc) { return drk_amdgpu_workitem_id(lc->cg, 0); }
LLVMValueRef am_lane(am_lc_t *lc) { return LLVMBuildAnd(lc->g.b, am_tid(lc), gpu_i32(&lc->g, 31), "lane"); }
LLVMValueRef am_warp(am_lc_t *lc) { return LLVMBuildLShr(lc->g.b, am_tid(lc), gpu_i32(&lc->g, 5), "warp"); }
LLVMValueRef am_lane64(am_lc_t *lc) { return LLVMBuildAnd(lc->g.b, am_tid(lc), gpu_i32(&lc->g, 63), "lane64"); }
/* Wave-uniform: readfirstlane puts it (and what is computed from it) in scalar registers. */
LLVMValueRef am_wave(am_lc_t *lc) {
  return drk_amdgpu_readfirstlane(lc->cg, LLVMBuildLShr(lc->g.b, am_tid(lc), gpu_i32(&lc->g, 6), "wave"));
}

void am_barrier(am_lc_t *lc) { drk_amdgpu_barrier(lc->cg); }

/* The kernel's LDS: a static array of k->smem bytes (created on first use). */
static LLVMValueRef lds_base(am_lc_t *lc) {
  if (!lc->lds) {
    char name[160];
    snprintf(name, sizeof name, "%s.lds", lc->g.k->name);
    lc->lds = drk_amdgpu_lds_static(lc->cg, name, (unsigned)(lc->g.k->smem > 0 ? lc->g.k->smem : 16), 16);
  }
  return lc->lds;
}

/* ---- distributions ---- */
bool am_mfma_geom(const drk_tile_layout_t *acc, drk_dtype_t ab, am_mfma_geom_t *out) {
  if (acc->kind != DRK_TL_MMA_SYNC && acc->kind != DRK_TL_MFMA) return false;
  int a = acc->wpc[0], b = acc->wpc[1], instr = acc->kind == DRK_TL_MFMA ? acc->instr[0] : 16;
  if (instr != 16 && instr != 32) return false;
  am_mfma_geom_t g;
  /* two layout warps make a wave: pair them along N when possible */
  if (b % 2 == 0) g.wm = a, g.wn = b / 2;
  else if (a % 2 == 0) g.wm = a / 2, g.wn = b;
  else return false;
  int bits = drk_dtype_bits(ab);
  g.instr = instr;
  g.e = bits == 16 ? 4 : bits == 32 ? 1 : bits == 8 ? 8 : 0;
  g.k_per = g.e * (64 / instr);
  *out = g;
  return true;
}

static LLVMValueRef wave_coord(am_lc_t *lc, const am_mfma_geom_t *g, int d) {
  LLVMValueRef w = am_wave(lc);
  if (d == 0) return LLVMBuildURem(lc->g.b, w, gpu_i32(&lc->g, g->wm), "");
  return LLVMBuildURem(lc->g.b, LLVMBuildUDiv(lc->g.b, w, gpu_i32(&lc->g, g->wm), ""), gpu_i32(&lc->g, g->wn), "");
}

/* Lanes l .. l ^ (I-1): the I rows/columns one MFMA spreads over lane % I. */
static void xr_low(gpu_dist_t *D, int s, int instr) {
  D->n_xor[s] = 0;
  for (int m = 1; m < instr; m *= 2) D->xr[s][D->n_xor[s]++] = (unsigned)m;
}

/* MFMA accumulator (mma_sync and mfma layouts on AMD): per wave, instr x instr blocks;
 * 16x16: row 4(l/16) + r (r < 4), column l % 16; 32x32: row 8(r/4) + 4(l/32) + r%4
 * (r < 16), column l % 32. Blocks repeat every instr * waves along each dim. */
static bool dim_mfma_acc(am_lc_t *lc, const drk_tile_layout_t *L, int d, int64_t size, gpu_dist_t *D, int s) {
  am_mfma_geom_t g;
  if (!am_mfma_geom(L, DRK_DT_F16, &g)) return false;
  if (size == 1) {
    gpu_dim_const(&lc->g, D, s, 1);
    return true;
  }
  int I = g.instr;
  int64_t cover = (int64_t)I * (d == 0 ? g.wm : g.wn);
  if (size % cover) return false;
  int64_t reps = size / cover;
  LLVMValueRef l = am_lane64(lc), base = LLVMBuildMul(lc->g.b, wave_coord(lc, &g, d), gpu_i32(&lc->g, I), "");
  D->wrap[s] = false;
  if (d == 0) {
    int per = I == 16 ? 4 : 16;
    LLVMValueRef q = I == 16 ? LLVMBuildShl(lc->g.b, LLVMBuildLShr(lc->g.b, l, gpu_i32(&lc->g, 4), ""), gpu_i32(&lc->g, 2), "")
                             : LLVMBuildShl(lc->g.b, LLVMBuildLShr(lc->g.b, l, gpu_i32(&lc->g, 5), ""), gpu_i32(&lc->g, 2), "");
    D->thr[s] = LLVMBuildAdd(lc->g.b, base, q, "");
    D->thr_align[s] = 4;
    D->n[s] = (int)(reps * per);
    D->off[s] = gpu_offs_new(&lc->g, D->n[s]);
    for (int r = 0; r < D->n[s]; r++) {
      int i = r % per;
      D->off[s][r] = (r / per) * cover + (I == 16 ? i : 8 * (i / 4) + i % 4);
    }
    D->n_xor[s] = 0;
    for (int m = I; m < 64; m *= 2) D->xr[s][D->n_xor[s]++] = (unsigned)m;
    D->wstride[s] = 64, D->wcount[s] = g.wm;
  } else {
    D->thr[s] = LLVMBuildAdd(lc->g.b, base, LLVMBuildAnd(lc->g.b, l, gpu_i32(&lc->g, I - 1), ""), "");
    D->thr_align[s] = 1;
    D->n[s] = (int)reps;
    D->off[s] = gpu_offs_new(&lc->g, D->n[s]);
    for (int r = 0; r < D->n[s]; r++) D->off[s][r] = r * cover;
    xr_low(D, s, I);
    D->wstride[s] = 64 * g.wm, D->wcount[s] = g.wn;
  }
  return true;
}

/* dot_op operands of an MFMA-placed parent (those of a blocked parent are
 * backends/common's): A row (B column) lane % I, K elements e(l / I) + v (v < e) per
 * instruction of K = k_per. */
static bool dim_dot_op(am_lc_t *lc, const drk_tile_layout_t *L, drk_dtype_t dt, int d, int64_t size,
                       gpu_dist_t *D, int s) {
  const drk_tile_layout_t *P = L->parent;
  bool kdim = (L->op_idx == 0) == (d == 1);
  am_mfma_geom_t g;
  if (!am_mfma_geom(P, dt, &g) || !g.e) return false;
  int I = g.instr;
  LLVMValueRef l = am_lane64(lc);
  D->wrap[s] = false;
  if (!kdim) {
    int md = L->op_idx == 0 ? 0 : 1;
    int64_t cover = (int64_t)I * (md == 0 ? g.wm : g.wn);
    if (size % cover) return false;
    LLVMValueRef base = LLVMBuildMul(lc->g.b, wave_coord(lc, &g, md), gpu_i32(&lc->g, I), "");
    D->thr[s] = LLVMBuildAdd(lc->g.b, base, LLVMBuildAnd(lc->g.b, l, gpu_i32(&lc->g, I - 1), ""), "");
    D->thr_align[s] = 1;
    D->n[s] = (int)(size / cover);
    D->off[s] = gpu_offs_new(&lc->g, D->n[s]);
    for (int r = 0; r < D->n[s]; r++) D->off[s][r] = r * cover;
    xr_low(D, s, I);
    D->wstride[s] = md == 0 ? 64 : 64 * g.wm, D->wcount[s] = md == 0 ? g.wm : g.wn;
    return true;
  }
  if (size % g.k_per) return false;
  D->n[s] = (int)(size / g.k_per) * g.e;
  D->off[s] = gpu_offs_new(&lc->g, D->n[s]);
  for (int r = 0; r < D->n[s]; r++) D->off[s][r] = (r / g.e) * g.k_per + r % g.e;
  D->thr[s] = LLVMBuildMul(lc->g.b, LLVMBuildLShr(lc->g.b, l, gpu_i32(&lc->g, I == 16 ? 4 : 5), ""), gpu_i32(&lc->g, g.e), "");
  D->thr_align[s] = g.e;
  D->n_xor[s] = 0;
  for (int m = I; m < 64; m *= 2) D->xr[s][D->n_xor[s]++] = (unsigned)m;
  D->wstride[s] = 64, D->wcount[s] = 1;
  return true;
}

/* gpu_target_t.dist_dim: mma_sync/mfma accumulators (placed as MFMA) and their dot_op
 * operands. */
static bool dist_dim(am_lc_t *lc, const drk_tile_layout_t *L, drk_dtype_t dt, int rank, int d, int64_t size,
                     gpu_dist_t *D, LLVMValueRef lane, LLVMValueRef warp) {
  switch (L->kind) {
  case DRK_TL_MMA_SYNC:
  case DRK_TL_MFMA: return rank == 2 && dim_mfma_acc(lc, L, d, size, D, d);
  case DRK_TL_DOT_OP: return rank == 2 && dim_dot_op(lc, L, dt, d, size, D, d);
  default: return false;
  }
}

static bool lower_barrier(am_lc_t *lc, const drk_tile_op_t *op) {
  if (drk_tile_op_attr(op, "id")) return gpu_err(&lc->g, op, "with an id (named barriers do not exist on AMD GPUs)");
  if (strcmp(drk_tile_op_attr_ident(op, "scope", "cta"), "cta"))
    return gpu_err(&lc->g, op, "of cluster scope (thread-block clusters do not exist on AMD GPUs)");
  am_barrier(lc);
  return true;
}

/* for: backends/common's loop, kept rolled (llvm.loop.unroll.disable) when its body has a
 * workgroup barrier, as the pipelined main loop of a matmul has (wait, barrier, copy the
 * next stage, dot on this one). Unrolling overlaps nothing across barriers, and the
 * straight-line code that LLVM's full unroll makes of a short one (K / BK = 8 fits its
 * threshold) meets MachineSink: a `kind = fma` dot is llvm.fma chains, pure, and the last
 * iteration's are sunk towards their use after the loop (the epilogue's masked loads and
 * stores are branches: blocks without a use on the way count as profitable), then the
 * previous iteration's after them, and so on, past every barrier, so the LDS operands of
 * all iterations end up live at once (mlp's 8 x 128 x 256 matmul: 512 VGPRs, 326 spilled;
 * rolled: 156, none). In a rolled loop the carried accumulator keeps each dot in its
 * iteration. (MFMA intrinsics are convergent, which MachineSink never moves.) */
static bool blocks_have_barrier(LLVMBasicBlockRef from) {
  unsigned id = LLVMLookupIntrinsicID("llvm.amdgcn.s.barrier", 21);
  for (LLVMBasicBlockRef bb = from; bb; bb = LLVMGetNextBasicBlock(bb))
    for (LLVMValueRef i = LLVMGetFirstInstruction(bb); i; i = LLVMGetNextInstruction(i)) {
      if (LLVMGetInstructionOpcode(i) != LLVMCall) continue;
      LLVMValueRef f = LLVMGetCalledValue(i);
      if (f && LLVMIsAFunction(f) && LLVMGetIntrinsicID(f) == id) return true;
    }
  return false;
}

static bool lower_for(am_lc_t *lc, const drk_tile_op_t *op) {
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(lc->g.b);
  if (!gpu_lower_for(&lc->g, op)) return false;
  /* pre ends in the branch to the header; the blocks appended from the header on are the
   * loop's (and its exit, still empty) */
  LLVMBasicBlockRef hdr = LLVMGetSuccessor(LLVMGetBasicBlockTerminator(pre), 0);
  if (!blocks_have_barrier(hdr)) return true;
  for (LLVMUseRef u = LLVMGetFirstUse(LLVMBasicBlockAsValue(hdr)); u; u = LLVMGetNextUse(u)) {
    LLVMValueRef br = LLVMGetUser(u);
    if (LLVMGetInstructionParent(br) != pre) drk_amdgpu_loop_no_unroll(lc->cg, br); /* the back edge */
  }
  return true;
}

/* gpu_target_t.lower_op: the ops AMDGPU lowers its own way (or not at all). */
static gpu_op_result_t target_op(am_lc_t *lc, const drk_tile_op_t *op) {
  bool ok;
  switch (op->code) {
  case DRK_TOP_PROGRAM_ID:
  case DRK_TOP_NUM_PROGRAMS: {
    int ax = (int)drk_tile_op_attr_int(op, "axis", 0);
    gpu_val_t *x = gpu_val_new(&lc->g, 1);
    if (op->code == DRK_TOP_PROGRAM_ID) x->r[0] = lc->pid[ax] ? lc->pid[ax] : drk_amdgpu_workgroup_id(lc->cg, ax);
    else x->r[0] = drk_amdgpu_num_workgroups(lc->cg, ax);
    if (op->results[0]->type.dtype == DRK_DT_I64) x->r[0] = LLVMBuildZExt(lc->g.b, x->r[0], lc->g.i64, "");
    gpu_set(&lc->g, op->results[0], x);
    ok = true;
    break;
  }
  case DRK_TOP_CP_ASYNC: ok = gpu_lower_cp_async(&lc->g, op); break;
  case DRK_TOP_CP_ASYNC_COMMIT:
  case DRK_TOP_CP_ASYNC_WAIT: ok = true; break; /* cp_async copies synchronously */
  case DRK_TOP_DOT: ok = am_lower_dot(lc, op); break;
  case DRK_TOP_TMA_LOAD: case DRK_TOP_TMA_STORE: case DRK_TOP_TMA_STORE_WAIT:
  case DRK_TOP_MBARRIER_INIT: case DRK_TOP_MBARRIER_ARRIVE: case DRK_TOP_MBARRIER_EXPECT_TX:
  case DRK_TOP_MBARRIER_WAIT: case DRK_TOP_FENCE: case DRK_TOP_SETMAXNREG:
  case DRK_TOP_WGMMA_FENCE: case DRK_TOP_WGMMA_COMMIT: case DRK_TOP_WGMMA_WAIT: case DRK_TOP_WARP_GROUP:
    ok = gpu_err(&lc->g, op, "(an NVIDIA Hopper op; the AMDGPU backend has no equivalent: lower for sm_80)");
    break;
  case DRK_TOP_BARRIER: ok = lower_barrier(lc, op); break;
  case DRK_TOP_FOR: ok = lower_for(lc, op); break;
  default: return GPU_OP_NOT_MINE;
  }
  return ok ? GPU_OP_DONE : GPU_OP_FAILED;
}

/* ---- entry points ---- */
static LLVMTypeRef param_type(am_lc_t *lc, const drk_tile_type_t *t) {
  if (t->kind != DRK_TT_SCALAR) return NULL;
  if (t->is_ptr) return lc->g.p1;
  return gpu_reg_type(&lc->g, t->dtype, false);
}

/* ---- the hooks of backends/common (g is the first member of am_lc_t) ---- */
static gpu_op_result_t hk_lower_op(gpu_lc_t *g, const drk_tile_op_t *op) { return target_op((am_lc_t *)g, op); }
static LLVMValueRef hk_lane(gpu_lc_t *g) { return am_lane((am_lc_t *)g); }
static LLVMValueRef hk_warp(gpu_lc_t *g) { return am_warp((am_lc_t *)g); }
static bool hk_dist_dim(gpu_lc_t *g, const drk_tile_layout_t *L, drk_dtype_t dt, int rank, int d, int64_t size,
                        gpu_dist_t *D, LLVMValueRef lane, LLVMValueRef warp) {
  return dist_dim((am_lc_t *)g, L, dt, rank, d, size, D, lane, warp);
}
static LLVMValueRef hk_call_intrinsic(gpu_lc_t *g, const char *name, LLVMTypeRef *over, unsigned n_over,
                                      LLVMValueRef *args, unsigned n_args) {
  return drk_amdgpu_call_intrinsic(((am_lc_t *)g)->cg, name, over, n_over, args, n_args);
}
static LLVMValueRef hk_shfl_xor(gpu_lc_t *g, LLVMValueRef v, unsigned mask) {
  return am_shfl_xor((am_lc_t *)g, v, mask);
}
static LLVMValueRef hk_smem_base(gpu_lc_t *g) { return lds_base((am_lc_t *)g); }
static LLVMValueRef hk_smem_static(gpu_lc_t *g, const char *name, unsigned bytes, unsigned align) {
  return drk_amdgpu_lds_static(((am_lc_t *)g)->cg, name, bytes, align);
}
static bool hk_sync(gpu_lc_t *g, const drk_tile_op_t *op) { return am_cta_sync((am_lc_t *)g, op); }
static bool hk_smem_fits(gpu_lc_t *g, const drk_tile_op_t *op, int64_t bytes) {
  unsigned lds = ((am_lc_t *)g)->cg->arch->lds_bytes;
  if (bytes > (int64_t)lds) return gpu_err(g, op, "of %lld bytes through LDS (%u available)", (long long)bytes, lds);
  return true;
}

static const gpu_target_t am_target = {
    .name = "amdgpu", .desc = "AMDGPU", .lower_op = hk_lower_op,
    .lane = hk_lane, .warp = hk_warp, .wstride_unit = 32, .dist_dim = hk_dist_dim,
    .pow = am_pow, .int_pow = false, .math1 = am_math1,
    .call_intrinsic = hk_call_intrinsic, .f8_encode = am_f8_encode_hw, .fptrunc_rz = am_fptrunc_rz16,
    .smem_base = hk_smem_base, .smem_static = hk_smem_static, .shfl_xor = hk_shfl_xor, .reduce_warps = am_reduce_warps,
    .sync = hk_sync, .smem_fits = hk_smem_fits,
    .cp_async = NULL /* no asynchronous copy into LDS used on gfx942 yet */};

/* ---- XCD remap ---- */
static bool region_has_dot(const drk_tile_region_t *r) {
  for (size_t i = 0; r && i < r->n_ops; i++) {
    const drk_tile_op_t *op = r->ops[i];
    if (op->code == DRK_TOP_DOT) return true;
    for (int j = 0; j < op->n_regions; j++)
      if (region_has_dot(op->regions[j])) return true;
  }
  return false;
}

static bool xcd_wanted(const drk_amdgpu_lower_opts_t *o, const drk_amdgpu_arch_t *ar, const drk_tile_kernel_t *k) {
  if (ar->n_xcd < 2 || o->xcd_remap == DRK_AMDGPU_XCD_REMAP_OFF) return false;
  int64_t g = 1;
  bool known = true;
  for (int i = 0; i < 3; i++) {
    if (k->grid[i].param) known = false;
    else g *= k->grid[i].c;
  }
  if (known && g < 2 * ar->n_xcd) return false; /* the remap would be the identity */
  return o->xcd_remap == DRK_AMDGPU_XCD_REMAP_ALL || region_has_dot(k->body);
}

/* Grid dim i: the constant, or cdiv(param, c) from the (bound) parameter. */
static LLVMValueRef grid_dim(am_lc_t *lc, int i) {
  const drk_tile_grid_dim_t *gd = &lc->g.k->grid[i];
  if (!gd->param) return gpu_i32(&lc->g, gd->c);
  LLVMValueRef p = gpu_get(&lc->g, gd->param)->r[0];
  if (LLVMTypeOf(p) != lc->g.i32) p = LLVMBuildTrunc(lc->g.b, p, lc->g.i32, "");
  if (gd->c == 1) return p;
  return LLVMBuildUDiv(lc->g.b, LLVMBuildAdd(lc->g.b, p, gpu_i32(&lc->g, gd->c - 1), ""), gpu_i32(&lc->g, gd->c), "");
}

/* In the entry block (scalar arithmetic, once per kernel): program_id then reads the
 * remapped ids (drk_amdgpu_xcd_remap). */
static void xcd_remap(am_lc_t *lc) {
  LLVMValueRef n[3], ids[3];
  for (int i = 0; i < 3; i++) {
    n[i] = grid_dim(lc, i);
    ids[i] = drk_amdgpu_workgroup_id(lc->cg, i);
  }
  drk_amdgpu_xcd_remap(lc->cg, lc->cg->arch->n_xcd, n, ids, lc->pid);
}

static bool lower_kernel(drk_amdgpu_cg_t *cg, const drk_tile_module_t *m, const drk_tile_kernel_t *k,
                         const drk_amdgpu_lower_opts_t *o, drk_diag_t *d) {
  am_lc_t lc;
  memset(&lc, 0, sizeof lc);
  gpu_lc_init(&lc.g, &am_target, cg->b, cg->ctx, m, k, d, DRK_AMDGPU_AS_GLOBAL, DRK_AMDGPU_AS_LDS);
  lc.cg = cg;
  bool ok = false;
  LLVMTypeRef pts[64];
  if (k->n_params > 64) {
    drk_diag_error(d, k->loc, "amdgpu: cannot lower kernel '%s' with more than 64 parameters", k->name);
    goto done;
  }
  if (k->cluster[0] * k->cluster[1] * k->cluster[2] != 1) {
    drk_diag_error(d, k->loc, "amdgpu: cannot lower kernel '%s': clusters do not exist on AMD GPUs", k->name);
    goto done;
  }
  if (k->block < 1 || k->block > 1024) {
    drk_diag_error(d, k->loc, "amdgpu: cannot lower kernel '%s': block of %lld threads (AMD GPUs allow 1..1024)",
                   k->name, (long long)k->block);
    goto done;
  }
  if (k->smem > (int64_t)cg->arch->lds_bytes) {
    drk_diag_error(d, k->loc, "amdgpu: cannot lower kernel '%s': %lld bytes of shared memory exceed the %u bytes of LDS of %s",
                   k->name, (long long)k->smem, cg->arch->lds_bytes, cg->arch->name);
    goto done;
  }
  for (int i = 0; i < k->n_params; i++) {
    pts[i] = param_type(&lc, &k->params[i]->type);
    if (!pts[i]) {
      drk_diag_error(d, k->params[i]->loc, "amdgpu: cannot lower parameter '%%%s' of this type%s", k->params[i]->name,
                     k->params[i]->type.kind == DRK_TT_TMADESC ? " (TMA descriptors are NVIDIA-only)" : "");
      goto done;
    }
  }
  lc.g.fn = drk_amdgpu_kernel_add(cg, k->name, pts, (unsigned)k->n_params);
  drk_amdgpu_kernel_set_workgroup_size(cg, lc.g.fn, (int)k->block, (int)k->block);
  LLVMPositionBuilderAtEnd(cg->b, LLVMAppendBasicBlockInContext(cg->ctx, lc.g.fn, "entry"));
  for (int i = 0; i < k->n_params; i++) {
    gpu_bind_param(&lc.g, i);
  }
  if (xcd_wanted(o, cg->arch, k)) xcd_remap(&lc);
  ok = gpu_lower_body(&lc.g);
  if (ok && lc.g.scratch && (uint64_t)lc.g.scratch_bytes + (uint64_t)k->smem > cg->arch->lds_bytes) {
    /* LLVM would stop on "local memory limit exceeded": report it here, located */
    drk_diag_error(d, k->loc, "amdgpu: cannot lower kernel '%s': %lld bytes of shared memory plus %u of scratch exceed the %u bytes of LDS",
                   k->name, (long long)k->smem, lc.g.scratch_bytes, cg->arch->lds_bytes);
    ok = false;
  }
done:
  gpu_lc_finish(&lc.g, ok);
  if (!ok && lc.lds) LLVMDeleteGlobal(lc.lds);
  return ok;
}

LLVMModuleRef drk_amdgpu_lower_module(const drk_tile_module_t *tm, LLVMContextRef ctx, const char *arch,
                                      drk_diag_t *d) {
  drk_amdgpu_lower_opts_t o = {DRK_AMDGPU_XCD_REMAP_DEFAULT};
  return drk_amdgpu_lower_module_opts(tm, ctx, arch, &o, d);
}

LLVMModuleRef drk_amdgpu_lower_module_opts(const drk_tile_module_t *tm, LLVMContextRef ctx, const char *arch,
                                           const drk_amdgpu_lower_opts_t *o, drk_diag_t *d) {
  const drk_amdgpu_arch_t *ar = drk_amdgpu_arch_find(arch, d);
  if (!ar) return NULL;
  LLVMModuleRef mod = drk_amdgpu_module_create(ctx, tm->source ? tm->source : "tile", d);
  if (!mod) return NULL;
  drk_amdgpu_cg_t cg = {ctx, mod, LLVMCreateBuilderInContext(ctx), ar};
  bool ok = true;
  for (size_t i = 0; i < tm->n_kernels; i++) ok &= lower_kernel(&cg, tm, tm->kernels[i], o, d);
  LLVMDisposeBuilder(cg.b);
  char *msg = NULL;
  if (ok && LLVMVerifyModule(mod, LLVMReturnStatusAction, &msg)) {
    drk_diag_error(d, drk_loc_none, "amdgpu: internal error: lowering produced invalid LLVM IR: %.2000s",
                   msg ? msg : "?");
    ok = false;
  }
  LLVMDisposeMessage(msg);
  if (!ok) {
    LLVMDisposeModule(mod);
    return NULL;
  }
  return mod;
}
