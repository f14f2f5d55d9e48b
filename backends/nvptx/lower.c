/* Tile IR -> LLVM IR for NVPTX (see docs/backend-nvptx.md, "Lowering").
 *
 * Requires a module that passed drk_tile_verify(). Lowers each kernel op by op, in the
 * order of its regions (the tile IR is explicit enough that no op needs a global view):
 * tile values become arrays of per-thread registers placed by their layout
 * (lower_internal.h), scalars single values, shared-memory buffers addrspace(3) pointers
 * into the module's dynamic shared memory. One pre-pass computes axis facts (contiguity,
 * divisibility, constancy) for integer and pointer tiles, with a fixpoint over loops, so
 * loads, stores and cp.async can be vectorized. Guarantees: a kernel either lowers to a
 * function that LLVMVerifyModule accepts or gets a located error ("nvptx: cannot lower
 * ..."); arch-specific intrinsics are only emitted after checking the arch, so LLVM never
 * aborts on "Cannot select". This file holds thread ids,
 * the placement of mma/wgmma layouts on warps, the ops only this target lowers (warp groups,
 * named barriers, cp.async, Hopper ops through lower_hopper.c) and the public entry points,
 * through the gpu_target_t hooks of backends/common/lower.h (which holds the driver,
 * blocked layouts, axis analysis, data movement and control flow); lower_math.c the math
 * functions (libdevice), lower_mem.c the cross-warp round of reductions and dot.
 * drk_nvptx_compile_tile_module_opts compiles a module one kernel at a time on worker
 * threads, through the kernel cache (backends/common/kcache.h), with the same PTX as the
 * one-module path (drk_nvptx_lower_module); see "a module compiled one kernel at a time". */
#include "backends/nvptx/lower_internal.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <llvm-c/Analysis.h>

LLVMValueRef nv_lane(nv_lc_t *lc) {
  return LLVMBuildAnd(lc->g.b, drk_nvptx_tid(lc->cg, 0), gpu_i32(&lc->g, 31), "lane");
}
LLVMValueRef nv_warp(nv_lc_t *lc) {
  LLVMValueRef w = LLVMBuildLShr(lc->g.b, drk_nvptx_tid(lc->cg, 0), gpu_i32(&lc->g, 5), "warp");
  if (lc->first_warp) w = LLVMBuildSub(lc->g.b, w, gpu_i32(&lc->g, lc->first_warp), "");
  return w;
}

void nv_barrier(nv_lc_t *lc) { drk_nvptx_bar_sync(lc->cg, 0, 0); }

/* ---- distributions ---- */
/* mma_sync / wgmma accumulator dims: 16 rows per warp (lane/4 + 8h), `wn` columns per warp
 * (8q + 2(lane%4) + j). */
static bool dim_mma(nv_lc_t *lc, const drk_tile_layout_t *L, int d, int64_t size, gpu_dist_t *D,
                    int s, LLVMValueRef lane, LLVMValueRef warp) {
  int wm = L->wpc[0], wn = L->wpc[1];
  int64_t pw = d == 0 ? 16 : (L->kind == DRK_TL_WGMMA ? L->instr[1] : 8);
  int64_t cover = pw * (d == 0 ? wm : wn);
  if (size == 1) {
    gpu_dim_const(&lc->g, D, s, 1);
    return true;
  }
  if (size % cover) return false;
  LLVMValueRef wi = d == 0 ? LLVMBuildURem(lc->g.b, warp, gpu_i32(&lc->g, wm), "")
                           : LLVMBuildURem(lc->g.b, LLVMBuildUDiv(lc->g.b, warp, gpu_i32(&lc->g, wm), ""), gpu_i32(&lc->g, wn), "");
  LLVMValueRef lp = d == 0 ? LLVMBuildLShr(lc->g.b, lane, gpu_i32(&lc->g, 2), "")
                           : LLVMBuildMul(lc->g.b, LLVMBuildAnd(lc->g.b, lane, gpu_i32(&lc->g, 3), ""), gpu_i32(&lc->g, 2), "");
  D->thr[s] = LLVMBuildAdd(lc->g.b, LLVMBuildMul(lc->g.b, wi, gpu_i32(&lc->g, pw), ""), lp, "");
  D->thr_align[s] = d == 0 ? 1 : 2;
  D->wrap[s] = false;
  int64_t reps = size / cover;
  D->n[s] = (int)(2 * reps * (pw / (d == 0 ? 16 : 8)));
  D->off[s] = gpu_offs_new(&lc->g, D->n[s]);
  for (int r = 0; r < D->n[s]; r++) {
    if (d == 0) {
      D->off[s][r] = (r / 2) * cover + (r % 2) * 8;
    } else {
      int q = r / 2, per = (int)(pw / 8);
      D->off[s][r] = (q / per) * cover + (q % per) * 8 + r % 2;
    }
  }
  D->n_xor[s] = 0;
  if (d == 0) {
    D->xr[s][0] = 4, D->xr[s][1] = 8, D->xr[s][2] = 16, D->n_xor[s] = 3;
    D->wstride[s] = 1, D->wcount[s] = wm;
  } else {
    D->xr[s][0] = 1, D->xr[s][1] = 2, D->n_xor[s] = 2;
    D->wstride[s] = wm, D->wcount[s] = wn;
  }
  return true;
}

/* dot_op of an mma_sync parent: the m16n8kK operand fragments. */
static bool dim_dot_op(nv_lc_t *lc, const drk_tile_layout_t *L, drk_dtype_t dt, int d, int64_t size,
                       gpu_dist_t *D, int s, LLVMValueRef lane, LLVMValueRef warp) {
  const drk_tile_layout_t *P = L->parent;
  bool kdim = (L->op_idx == 0) == (d == 1);
  if (P->kind != DRK_TL_MMA_SYNC) return false;
  if (!kdim) {
    if (L->op_idx == 0) return dim_mma(lc, P, 0, size, D, s, lane, warp);
    /* B's N dim: 8 columns per warp, lane/4 */
    int wm = P->wpc[0], wn = P->wpc[1];
    int64_t cover = 8 * wn;
    if (size % cover) return false;
    LLVMValueRef wi = LLVMBuildURem(lc->g.b, LLVMBuildUDiv(lc->g.b, warp, gpu_i32(&lc->g, wm), ""), gpu_i32(&lc->g, wn), "");
    D->thr[s] = LLVMBuildAdd(lc->g.b, LLVMBuildMul(lc->g.b, wi, gpu_i32(&lc->g, 8), ""),
                             LLVMBuildLShr(lc->g.b, lane, gpu_i32(&lc->g, 2), ""), "");
    D->thr_align[s] = 1;
    D->wrap[s] = false;
    D->n[s] = (int)(size / cover);
    D->off[s] = gpu_offs_new(&lc->g, D->n[s]);
    for (int r = 0; r < D->n[s]; r++) D->off[s][r] = r * cover;
    D->xr[s][0] = 4, D->xr[s][1] = 8, D->xr[s][2] = 16, D->n_xor[s] = 3;
    D->wstride[s] = wm, D->wcount[s] = wn;
    return true;
  }
  int bits = drk_dtype_bits(dt);
  int64_t kinstr = bits == 16 ? 16 : bits == 32 ? 8 : 32;
  if (size % kinstr) return false;
  int per = (int)(kinstr / 4); /* K elements per thread per instruction */
  int pair = per / 2;          /* consecutive K elements per register group */
  D->n[s] = (int)(size / kinstr) * per;
  D->off[s] = gpu_offs_new(&lc->g, D->n[s]);
  for (int r = 0; r < D->n[s]; r++)
    D->off[s][r] = (r / per) * kinstr + ((r / pair) % 2) * (kinstr / 2) + r % pair;
  D->thr[s] = LLVMBuildMul(lc->g.b, LLVMBuildAnd(lc->g.b, lane, gpu_i32(&lc->g, 3), ""), gpu_i32(&lc->g, pair), "");
  D->thr_align[s] = pair;
  D->wrap[s] = false;
  D->xr[s][0] = 1, D->xr[s][1] = 2, D->n_xor[s] = 2;
  D->wstride[s] = 1, D->wcount[s] = 1;
  return true;
}

/* gpu_target_t.dist_dim: mma_sync/wgmma accumulators and their dot_op operands. */
static bool dist_dim(nv_lc_t *lc, const drk_tile_layout_t *L, drk_dtype_t dt, int rank, int d, int64_t size,
                     gpu_dist_t *D, LLVMValueRef lane, LLVMValueRef warp) {
  switch (L->kind) {
  case DRK_TL_MMA_SYNC:
  case DRK_TL_WGMMA: return rank == 2 && dim_mma(lc, L, d, size, D, d, lane, warp);
  case DRK_TL_DOT_OP: return rank == 2 && dim_dot_op(lc, L, dt, d, size, D, d, lane, warp);
  default: return false;
  }
}

/* ---- control flow ---- */
static bool lower_warp_group(nv_lc_t *lc, const drk_tile_op_t *op) {
  int fw = (int)drk_tile_op_attr_int(op, "first_warp", 0), nw = (int)drk_tile_op_attr_int(op, "num_warps", 1);
  LLVMValueRef w = LLVMBuildLShr(lc->g.b, drk_nvptx_tid(lc->cg, 0), gpu_i32(&lc->g, 5), "");
  LLVMValueRef in = LLVMBuildICmp(lc->g.b, LLVMIntULT, LLVMBuildSub(lc->g.b, w, gpu_i32(&lc->g, fw), ""), gpu_i32(&lc->g, nw), "");
  LLVMBasicBlockRef bt = gpu_block(&lc->g, "wg"), bj = gpu_block(&lc->g, "wg.end");
  LLVMBuildCondBr(lc->g.b, in, bt, bj);
  LLVMPositionBuilderAtEnd(lc->g.b, bt);
  int ofw = lc->first_warp, onw = lc->n_warps;
  bool oin = lc->in_warp_group;
  lc->first_warp = fw, lc->n_warps = nw, lc->in_warp_group = true;
  const drk_tile_op_t *y = NULL;
  bool ok = gpu_lower_region(&lc->g, op->regions[0], &y);
  lc->first_warp = ofw, lc->n_warps = onw, lc->in_warp_group = oin;
  if (!ok) return false;
  LLVMBuildBr(lc->g.b, bj);
  LLVMPositionBuilderAtEnd(lc->g.b, bj);
  return true;
}

static bool need_sm(nv_lc_t *lc, const drk_tile_op_t *op, int sm, bool a) {
  const drk_nvptx_arch_t *ar = lc->cg->arch;
  if (ar && ar->sm >= sm && (!a || ar->arch_specific)) return true;
  return gpu_err(&lc->g, op, "for %s (needs sm_%d%s)", ar ? ar->name : "an unknown arch", sm, a ? "a" : "");
}

static bool lower_barrier(nv_lc_t *lc, const drk_tile_op_t *op) {
  if (strcmp(drk_tile_op_attr_ident(op, "scope", "cta"), "cluster") == 0) {
    if (!need_sm(lc, op, 90, false)) return false;
    drk_nvptx_cluster_sync(lc->cg);
    return true;
  }
  int64_t id = drk_tile_op_attr_int(op, "id", 0), th = drk_tile_op_attr_int(op, "threads", 0);
  drk_nvptx_bar_sync(lc->cg, (unsigned)id, (unsigned)th);
  return true;
}

/* gpu_target_t.lower_op: the ops NVPTX lowers its own way. */
static gpu_op_result_t target_op(nv_lc_t *lc, const drk_tile_op_t *op) {
  bool ok;
  switch (op->code) {
  case DRK_TOP_PROGRAM_ID:
  case DRK_TOP_NUM_PROGRAMS: {
    int ax = (int)drk_tile_op_attr_int(op, "axis", 0);
    gpu_val_t *x = gpu_val_new(&lc->g, 1);
    x->r[0] = op->code == DRK_TOP_PROGRAM_ID ? drk_nvptx_ctaid(lc->cg, ax) : drk_nvptx_nctaid(lc->cg, ax);
    if (op->results[0]->type.dtype == DRK_DT_I64) x->r[0] = LLVMBuildZExt(lc->g.b, x->r[0], lc->g.i64, "");
    gpu_set(&lc->g, op->results[0], x);
    ok = true;
    break;
  }
  case DRK_TOP_CP_ASYNC: ok = need_sm(lc, op, 80, false) && gpu_lower_cp_async(&lc->g, op); break;
  case DRK_TOP_CP_ASYNC_COMMIT:
    ok = need_sm(lc, op, 80, false);
    if (ok) drk_nvptx_cp_async_commit(lc->cg);
    break;
  case DRK_TOP_CP_ASYNC_WAIT:
    ok = need_sm(lc, op, 80, false);
    if (ok) drk_nvptx_cp_async_wait(lc->cg, (unsigned)drk_tile_op_attr_int(op, "pending", 0));
    break;
  case DRK_TOP_LOCAL_LOAD: return nv_lower_ldmatrix(lc, op);
  case DRK_TOP_DOT:
    if (strcmp(drk_tile_op_attr_ident(op, "kind", ""), "wgmma") == 0) ok = nv_lower_wgmma(lc, op);
    else ok = nv_lower_dot(lc, op);
    break;
  case DRK_TOP_TMA_LOAD: case DRK_TOP_TMA_STORE: case DRK_TOP_TMA_STORE_WAIT:
  case DRK_TOP_MBARRIER_INIT: case DRK_TOP_MBARRIER_ARRIVE: case DRK_TOP_MBARRIER_EXPECT_TX:
  case DRK_TOP_MBARRIER_WAIT: case DRK_TOP_FENCE: case DRK_TOP_SETMAXNREG:
  case DRK_TOP_WGMMA_FENCE: case DRK_TOP_WGMMA_COMMIT: case DRK_TOP_WGMMA_WAIT:
    ok = nv_lower_hopper(lc, op);
    break;
  case DRK_TOP_BARRIER: ok = lower_barrier(lc, op); break;
  case DRK_TOP_WARP_GROUP: ok = lower_warp_group(lc, op); break;
  default: return GPU_OP_NOT_MINE;
  }
  return ok ? GPU_OP_DONE : GPU_OP_FAILED;
}

/* ---- entry points ---- */
static LLVMTypeRef param_type(nv_lc_t *lc, const drk_tile_type_t *t) {
  if (t->kind == DRK_TT_TMADESC) return lc->g.p0;
  if (t->kind != DRK_TT_SCALAR) return NULL;
  if (t->is_ptr) return lc->g.p1;
  return gpu_reg_type(&lc->g, t->dtype, false);
}

/* ---- the hooks of backends/common (g is the first member of nv_lc_t) ---- */
static gpu_op_result_t hk_lower_op(gpu_lc_t *g, const drk_tile_op_t *op) { return target_op((nv_lc_t *)g, op); }
static LLVMValueRef hk_lane(gpu_lc_t *g) { return nv_lane((nv_lc_t *)g); }
static LLVMValueRef hk_warp(gpu_lc_t *g) { return nv_warp((nv_lc_t *)g); }
static bool hk_dist_dim(gpu_lc_t *g, const drk_tile_layout_t *L, drk_dtype_t dt, int rank, int d, int64_t size,
                        gpu_dist_t *D, LLVMValueRef lane, LLVMValueRef warp) {
  return dist_dim((nv_lc_t *)g, L, dt, rank, d, size, D, lane, warp);
}
static LLVMValueRef hk_call_intrinsic(gpu_lc_t *g, const char *name, LLVMTypeRef *over, unsigned n_over,
                                      LLVMValueRef *args, unsigned n_args) {
  return drk_nvptx_call_intrinsic(((nv_lc_t *)g)->cg, name, over, n_over, args, n_args);
}
static LLVMValueRef hk_shfl_xor(gpu_lc_t *g, LLVMValueRef v, unsigned mask) {
  return nv_shfl_xor((nv_lc_t *)g, v, mask);
}
static LLVMValueRef hk_smem_base(gpu_lc_t *g) { return drk_nvptx_smem_dynamic(((nv_lc_t *)g)->cg); }
static LLVMValueRef hk_smem_static(gpu_lc_t *g, const char *name, unsigned bytes, unsigned align) {
  return drk_nvptx_smem_static(((nv_lc_t *)g)->cg, name, bytes, align);
}
static bool hk_sync(gpu_lc_t *g, const drk_tile_op_t *op) { return nv_cta_sync((nv_lc_t *)g, op); }
static bool hk_smem_fits(gpu_lc_t *g, const drk_tile_op_t *op, int64_t bytes) {
  if (bytes > 96 * 1024) return gpu_err(g, op, "of %lld bytes through shared memory", (long long)bytes);
  return true;
}
/* cp.async copies 4, 8 or 16 bytes; narrower accesses are copied synchronously. */
static bool hk_cp_async(gpu_lc_t *g, LLVMValueRef saddr, LLVMValueRef gptr, int bytes, LLVMValueRef mask) {
  if (bytes < 4) return false;
  LLVMValueRef sz = mask ? LLVMBuildSelect(g->b, mask, gpu_i32(g, bytes), gpu_i32(g, 0), "") : NULL;
  drk_nvptx_cp_async(((nv_lc_t *)g)->cg, saddr, gptr, (unsigned)bytes, sz);
  return true;
}

static const gpu_target_t nv_target = {
    .name = "nvptx", .desc = "NVPTX", .lower_op = hk_lower_op,
    .lane = hk_lane, .warp = hk_warp, .wstride_unit = 1, .dist_dim = hk_dist_dim,
    .pow = nv_pow, .int_pow = true, .math1 = nv_math1,
    .call_intrinsic = hk_call_intrinsic, .f8_encode = nv_f8_encode_hw, .fptrunc_rz = nv_fptrunc_rz,
    .smem_base = hk_smem_base, .smem_static = hk_smem_static, .shfl_xor = hk_shfl_xor, .reduce_warps = nv_reduce_warps,
    .sync = hk_sync, .smem_fits = hk_smem_fits,
    .cp_async = hk_cp_async};

bool drk_nvptx_lower_kernel(drk_nvptx_cg_t *cg, const drk_tile_module_t *m, const drk_tile_kernel_t *k,
                            drk_diag_t *d) {
  nv_lc_t lc;
  memset(&lc, 0, sizeof lc);
  gpu_lc_init(&lc.g, &nv_target, cg->b, cg->ctx, m, k, d, 1, 3);
  lc.cg = cg;
  lc.first_warp = 0, lc.n_warps = (int)(k->block / 32);
  bool ok = false;
  if (!cg->arch) {
    drk_diag_error(d, k->loc, "nvptx: cannot lower kernel '%s' without a target arch", k->name);
    goto done;
  }
  LLVMTypeRef pts[64];
  if (k->n_params > 64) {
    drk_diag_error(d, k->loc, "nvptx: cannot lower kernel '%s' with more than 64 parameters", k->name);
    goto done;
  }
  for (int i = 0; i < k->n_params; i++) {
    pts[i] = param_type(&lc, &k->params[i]->type);
    if (!pts[i]) {
      drk_diag_error(d, k->params[i]->loc, "nvptx: cannot lower parameter '%%%s' of this type",
                     k->params[i]->name);
      goto done;
    }
  }
  lc.g.fn = drk_nvptx_kernel_add(cg, k->name, pts, (unsigned)k->n_params);
  drk_nvptx_kernel_set_maxntid(cg, lc.g.fn, (int)k->block, 1, 1);
  if (k->cluster[0] * k->cluster[1] * k->cluster[2] > 1) {
    if (cg->arch->sm < 90) {
      drk_diag_error(d, k->loc, "nvptx: cannot lower kernel '%s' with a cluster for %s (needs sm_90)",
                     k->name, cg->arch->name);
      goto done;
    }
    drk_nvptx_kernel_set_cluster_dim(cg, lc.g.fn, (int)k->cluster[0], (int)k->cluster[1], (int)k->cluster[2]);
  }
  LLVMPositionBuilderAtEnd(cg->b, LLVMAppendBasicBlockInContext(cg->ctx, lc.g.fn, "entry"));
  for (int i = 0; i < k->n_params; i++) {
    gpu_bind_param(&lc.g, i);
    if (k->params[i]->type.kind == DRK_TT_TMADESC) drk_nvptx_param_set_tensormap(cg, lc.g.fn, (unsigned)i);
  }
  ok = gpu_lower_body(&lc.g);
done:
  gpu_lc_finish(&lc.g, ok);
  return ok;
}

bool drk_nvptx_lower_module(LLVMContextRef ctx, const drk_tile_module_t *m, const char *arch,
                            LLVMModuleRef *out_mod, drk_diag_t *d) {
  const drk_nvptx_arch_t *ar = drk_nvptx_arch_find(arch, d);
  if (!ar) return false;
  LLVMModuleRef mod = drk_nvptx_module_create(ctx, m->source ? m->source : "tile", d);
  if (!mod) return false;
  drk_nvptx_cg_t cg = {ctx, mod, LLVMCreateBuilderInContext(ctx), ar};
  bool ok = true;
  for (size_t i = 0; i < m->n_kernels; i++) ok &= drk_nvptx_lower_kernel(&cg, m, m->kernels[i], d);
  LLVMDisposeBuilder(cg.b);
  if (ok) ok = nv_link_libdevice(mod, d);
  char *msg = NULL;
  if (ok && LLVMVerifyModule(mod, LLVMReturnStatusAction, &msg)) {
    drk_diag_error(d, drk_loc_none, "nvptx: internal error: lowering produced invalid LLVM IR: %.2000s",
                   msg ? msg : "?");
    ok = false;
  }
  LLVMDisposeMessage(msg);
  if (!ok) {
    LLVMDisposeModule(mod);
    return false;
  }
  *out_mod = mod;
  return true;
}

/* ---- a module compiled one kernel at a time, on worker threads ----
 * Each kernel gets its own LLVM context and module (LLVM contexts are not shared between
 * threads), so the workers share nothing but the tile module, which they only read, the
 * cache (thread-safe) and libdevice's bytes (read-only). What a kernel reports is kept in
 * its job and replayed into the caller's diag in kernel order, so the output does not depend
 * on the job count or on which thread finished first. Only kernels that compile are cached:
 * the lowering reports no warnings, so a hit loses nothing (a warning added later must go
 * into the entry too). */
typedef struct nv_kjob {
  const drk_tile_kernel_t *k;
  char *ptx; /* its PTX, as a module of this kernel alone prints (malloc'ed) */
  size_t ptx_len;
  char *early, *late; /* formatted messages: of the lowering; of libdevice, the verifier, codegen */
  size_t early_n, late_n;
  drk_diag_t ed, ld; /* their counts and first errors */
  bool lowered, ok;
} nv_kjob_t;

typedef struct nv_batch {
  const drk_tile_module_t *m;
  const drk_nvptx_arch_t *ar;
  drk_kcache_t *cache;
  const char *libdevice; /* libdevice's hash, or "none" */
  nv_kjob_t *jobs;
  atomic_bool lower_failed; /* then no kernel needs code: the compile fails */
} nv_batch_t;

/* The canonical text of kernel k's PTX (see drk_nvptx_compile_tile_module_opts) -> key. */
static void kernel_key(const nv_batch_t *b, const drk_tile_kernel_t *k, uint8_t key[32]) {
  const drk_tile_module_t *m = b->m;
  char *text = NULL, *lays = NULL;
  size_t n = 0, ln = 0;
  FILE *f = open_memstream(&text, &n);
  if (!f) drk_fatal_internal(__FILE__, __LINE__, "out of memory");
  drk_tile_kernel_print(m, k, f);
  fclose(f);
  /* the layouts the kernel names (#name, the lexer's identifiers), with their parents */
  bool *used = calloc(m->n_layouts ? m->n_layouts : 1, 1);
  if (!used) drk_fatal_internal(__FILE__, __LINE__, "out of memory");
  for (const char *p = text; (p = strchr(p, '#')) != NULL;) {
    const char *q = ++p;
    if (!((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || *q == '_')) continue;
    while ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') || *q == '_' || *q == '.') q++;
    for (size_t i = 0; i < m->n_layouts; i++)
      if (strlen(m->layouts[i]->name) == (size_t)(q - p) && !strncmp(m->layouts[i]->name, p, (size_t)(q - p)))
        used[i] = true;
    p = q;
  }
  for (bool grew = true; grew;) {
    grew = false;
    for (size_t i = 0; i < m->n_layouts; i++)
      if (used[i] && m->layouts[i]->parent)
        for (size_t j = 0; j < m->n_layouts; j++)
          if (m->layouts[j] == m->layouts[i]->parent && !used[j]) used[j] = grew = true;
  }
  f = open_memstream(&lays, &ln);
  if (!f) drk_fatal_internal(__FILE__, __LINE__, "out of memory");
  for (size_t i = 0; i < m->n_layouts; i++)
    if (used[i]) drk_tile_layout_print(m->layouts[i], f);
  fclose(f);
  unsigned maj, min, pat;
  LLVMGetVersion(&maj, &min, &pat);
  char llvm[48];
  snprintf(llvm, sizeof llvm, "%u.%u.%u", maj, min, pat);
  drk_kcache_key_t kk;
  drk_kcache_key_init(&kk, DRK_KCACHE_PTX);
  drk_kcache_key_add_str(&kk, "compiler", drk_kcache_compiler_id());
  drk_kcache_key_add_str(&kk, "llvm", llvm);
  drk_kcache_key_add_str(&kk, "arch", b->ar->name);
  drk_kcache_key_add_str(&kk, "features", b->ar->features);
  drk_kcache_key_add_str(&kk, "opt", "3");
  drk_kcache_key_add_str(&kk, "libdevice", b->libdevice);
  drk_kcache_key_add(&kk, "layouts", lays, ln);
  drk_kcache_key_add(&kk, "kernel", text, n);
  drk_kcache_key_finish(&kk, key);
  free(used);
  free(text);
  free(lays);
}

static FILE *memstream(char **buf, size_t *n) {
  FILE *f = open_memstream(buf, n);
  if (!f) drk_fatal_internal(__FILE__, __LINE__, "out of memory");
  return f;
}

/* drk_codegen_parallel's task: kernel i from cache, or lowered and compiled. */
static void kernel_task(void *ctx, int i) {
  nv_batch_t *b = ctx;
  nv_kjob_t *j = &b->jobs[i];
  uint8_t key[32];
  if (b->cache) {
    kernel_key(b, j->k, key);
    void *data;
    size_t n;
    if (drk_kcache_get(b->cache, DRK_KCACHE_PTX, key, &data, &n)) {
      j->ptx = data, j->ptx_len = n;
      j->lowered = j->ok = true;
      return;
    }
  }
  FILE *ef = memstream(&j->early, &j->early_n);
  drk_diag_init(&j->ed, ef);
  LLVMContextRef lctx = LLVMContextCreate();
  LLVMModuleRef mod = drk_nvptx_module_create(lctx, b->m->source ? b->m->source : "tile", &j->ed);
  if (mod) {
    drk_nvptx_cg_t cg = {lctx, mod, LLVMCreateBuilderInContext(lctx), b->ar};
    j->lowered = drk_nvptx_lower_kernel(&cg, b->m, j->k, &j->ed);
    LLVMDisposeBuilder(cg.b);
  }
  fclose(ef);
  j->ed.out = NULL;
  if (!j->lowered) atomic_store(&b->lower_failed, true);
  if (j->lowered && !atomic_load(&b->lower_failed)) {
    FILE *lf = memstream(&j->late, &j->late_n);
    drk_diag_init(&j->ld, lf);
    bool ok = nv_link_libdevice_needed(mod, &j->ld);
    char *msg = NULL;
    if (ok && LLVMVerifyModule(mod, LLVMReturnStatusAction, &msg)) {
      drk_diag_error(&j->ld, drk_loc_none, "nvptx: internal error: lowering produced invalid LLVM IR: %.2000s",
                     msg ? msg : "?");
      ok = false;
    }
    LLVMDisposeMessage(msg);
    drk_nvptx_opts_t po = {.opt_level = 3, .no_verify = true};
    if (ok) ok = drk_nvptx_compile_module_opts(mod, b->ar->name, &po, &j->ptx, &j->ptx_len, &j->ld);
    fclose(lf);
    j->ld.out = NULL;
    j->ok = ok;
    if (ok && b->cache) drk_kcache_put(b->cache, DRK_KCACHE_PTX, key, j->ptx, j->ptx_len);
  }
  if (mod) LLVMDisposeModule(mod);
  LLVMContextDispose(lctx);
}

/* Adds what one job reported to d, as if it had been reported there. */
static void diag_replay(drk_diag_t *d, const drk_diag_t *from, const char *text, size_t n) {
  if (from->n_errors && !d->n_errors) memcpy(d->first, from->first, sizeof d->first);
  d->n_errors += from->n_errors;
  d->n_warnings += from->n_warnings;
  if (d->out && n) fwrite(text, 1, n, d->out);
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The one-module path: for a module without kernels (no kernel PTX to join). */
static bool compile_whole(const drk_tile_module_t *m, const char *arch, char **out_ptx, size_t *out_len,
                          drk_diag_t *d) {
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef mod = NULL;
  bool ok = drk_nvptx_lower_module(ctx, m, arch, &mod, d) && drk_nvptx_compile_module(mod, arch, out_ptx, out_len, d);
  if (mod) LLVMDisposeModule(mod);
  LLVMContextDispose(ctx);
  return ok;
}

bool drk_nvptx_compile_tile_module_opts(const drk_tile_module_t *m, const char *arch, const drk_codegen_opts_t *o,
                                        char **out_ptx, void **out_cubin, size_t *out_cubin_size, drk_diag_t *d) {
  const drk_nvptx_arch_t *ar = drk_nvptx_arch_find(arch, d);
  if (!ar) return false;
  /* what the workers would otherwise race to initialise */
  drk_nvptx_init();
  (void)drk_kcache_compiler_id();
  drk_kcache_t *cache = drk_kcache_open(o);
  const nv_libdevice_t *lib = nv_libdevice_get(NULL);
  size_t nk = m->n_kernels;
  nv_batch_t b = {.m = m, .ar = ar, .cache = cache, .libdevice = lib ? lib->hash : "none"};
  atomic_init(&b.lower_failed, false);
  b.jobs = calloc(nk ? nk : 1, sizeof *b.jobs);
  if (!b.jobs) drk_fatal_internal(__FILE__, __LINE__, "out of memory");
  for (size_t i = 0; i < nk; i++) b.jobs[i].k = m->kernels[i];
  int jobs = drk_codegen_jobs(o, (int)nk);
  char *ptx = NULL;
  size_t ptx_len = 0;
  bool ok = true;
  double t0 = now_s(), t1;
  if (nk == 0) {
    ok = compile_whole(m, arch, &ptx, &ptx_len, d);
  } else {
    drk_codegen_parallel((int)nk, jobs, kernel_task, &b, o ? o->progress : NULL, o ? o->progress_ctx : NULL);
    for (size_t i = 0; i < nk; i++) {
      diag_replay(d, &b.jobs[i].ed, b.jobs[i].early, b.jobs[i].early_n);
      ok &= b.jobs[i].lowered;
    }
    for (size_t i = 0; ok && i < nk; i++)
      if (!b.jobs[i].ok) {
        diag_replay(d, &b.jobs[i].ld, b.jobs[i].late, b.jobs[i].late_n);
        ok = false;
      }
  }
  bool whole = false;
  if (ok && nk) {
    const char **parts = malloc(nk * sizeof *parts);
    if (!parts) drk_fatal_internal(__FILE__, __LINE__, "out of memory");
    bool lib_used = false;
    for (size_t i = 0; i < nk; i++) {
      parts[i] = b.jobs[i].ptx;
      /* libdevice's tables and helpers are module-scope variables and functions: lines
       * that start with these ('\t' indents instructions) */
      lib_used |= strstr(parts[i], "\n.global ") || strstr(parts[i], "\n.const ") || strstr(parts[i], "\n.func ");
    }
    size_t n_lib = 0;
    const char *const *lib_order = lib_used && lib ? nv_libdevice_order(lib, &n_lib) : NULL;
    char *jbuf = NULL;
    size_t jn = 0;
    FILE *jf = memstream(&jbuf, &jn);
    drk_diag_t jd;
    drk_diag_init(&jd, jf);
    ok = drk_nvptx_ptx_join(parts, nk, lib_order, n_lib, &ptx, &ptx_len, &jd);
    fclose(jf);
    if (!ok) {
      /* Parts that do not join (a helper the optimizer specialised differently for two
       * kernels' modules) come from the one-module path: the same PTX, serially. */
      whole = true;
      ok = compile_whole(m, arch, &ptx, &ptx_len, d);
      if (o && o->stats) snprintf(o->stats->whole_reason, sizeof o->stats->whole_reason, "%.*s", (int)strcspn(jbuf, "\n"), jbuf);
    }
    free(jbuf);
    free(parts);
  }
  t1 = now_s();
  void *cub = NULL;
  size_t cn = 0;
  if (ok && out_cubin) ok = drk_nvptx_ptxas_cached(ptx, ptx_len, arch, cache, &cub, &cn, d);
  if (o && o->stats) {
    drk_codegen_stats_t *s = o->stats;
    s->jobs = jobs;
    s->kernels += (int)nk;
    s->whole_modules += whole;
    s->lower_s += t1 - t0;
    s->assemble_s += now_s() - t1;
    drk_kcache_stats_add(cache, s);
  }
  for (size_t i = 0; i < nk; i++) {
    free(b.jobs[i].ptx);
    free(b.jobs[i].early);
    free(b.jobs[i].late);
  }
  free(b.jobs);
  drk_kcache_close(cache);
  if (!ok) {
    free(ptx);
    return false;
  }
  if (out_cubin) {
    *out_cubin = cub;
    if (out_cubin_size) *out_cubin_size = cn;
  }
  *out_ptx = ptx;
  return true;
}

bool drk_nvptx_compile_tile_module(const drk_tile_module_t *m, const char *arch, char **out_ptx,
                                   void **out_cubin, size_t *out_cubin_size, drk_diag_t *d) {
  return drk_nvptx_compile_tile_module_opts(m, arch, NULL, out_ptx, out_cubin, out_cubin_size, d);
}
