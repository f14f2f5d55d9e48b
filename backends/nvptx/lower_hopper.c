/* Tile IR -> LLVM IR for NVPTX: the Hopper asynchronous ops (part of lower.c's lowering; see
 * lower_internal.h): TMA loads/stores (cp.async.bulk.tensor), bulk-group waits, mbarriers,
 * proxy fences, setmaxnreg and `dot kind=wgmma` with wgmma_fence/commit/wait.
 *
 * Requires sm_90a for every op here (TMA and mbarrier expect_tx forms need PTX 8.6 in LLVM,
 * wgmma and setmaxnreg the 'a' arch); other archs get a located error, never an LLVM abort.
 * Ops the tile IR defines as "one elected thread" (mbarrier_init, mbarrier_arrive and
 * _expect_tx, tma_load, tma_store, tma_store_wait) run on the first thread of the executing
 * warps (the warp group's first warp, lane 0; thread 0 at the top level): one arrival per
 * program or warp group. mbarrier_wait, fences, wgmma_* and setmaxnreg run on every thread.
 *
 * wgmma operands in shared memory follow the tile IR's shared layouts (lower.c,
 * nv_smem_elem_addr): rows of the fastest dimension, split into chunks of `swizzle` bytes
 * when longer, each chunk a [rows][swizzle bytes] block XOR-swizzled like TMA writes it.
 * Those are the canonical wgmma layouts (PTX ISA "Shared Memory Matrix Layout"):
 *   K-major (fastest dim is K): ((8,m),(T,2k)):((8T,SBO),(1,T)) with SBO = 8 rows x swizzle
 *     bytes, LBO unused (encoded 1); stepping K by 16 inside a chunk moves the start address
 *     by 32 bytes, across chunks by rows x swizzle bytes.
 *   MN-major (fastest dim is M or N): ((T,S/16,m),(8,k)):((1,T,LBO),(S/16 T,SBO)) with
 *     LBO = rows x swizzle bytes (next chunk along M/N), SBO = 8 x swizzle bytes (next 8
 *     K rows); stepping K by 16 moves the start address by 16 x swizzle bytes.
 * Every buffer must start on an 8 x swizzle byte boundary (base offset field 0), which
 * local_alloc's verifier enforces for whole buffers and stage strides keep for stages.
 * Accumulator: wgmma m64nNk16 register d[i] of a thread holds row 16 w + lane/4 +
 * 8 ((i/2) % 2), column 8 (i/4) + 2 (lane % 4) + i % 2 (PTX ISA "Matrix Fragments for
 * wgmma.mma_async.m64nNk16"); the `wgmma` layout's distribution (lower.c, dim_mma) numbers
 * the same elements as registers r0 * N/4 + r1 with row offset 8 r0 and column offset
 * 8 (r1/2) + r1 % 2, so d[i] is register ((i/2)%2) N/4 + 2 (i/4) + i % 2. */
#include "backends/nvptx/lower_internal.h"

#include <stdio.h>
#include <string.h>

static bool need_90a(nv_lc_t *lc, const drk_tile_op_t *op) {
  const drk_nvptx_arch_t *ar = lc->cg->arch;
  if (ar && ar->sm >= 90 && ar->arch_specific) return true;
  return gpu_err(&lc->g, op, "for %s (needs sm_90a)", ar ? ar->name : "an unknown arch");
}

static LLVMBasicBlockRef block(nv_lc_t *lc, const char *name) {
  return LLVMAppendBasicBlockInContext(lc->g.ctx, lc->g.fn, name);
}

/* Opens `if (tid.x == first thread of the executing warps)`; returns the join block. */
static LLVMBasicBlockRef leader_begin(nv_lc_t *lc) {
  LLVMValueRef tid = drk_nvptx_tid(lc->cg, 0);
  LLVMValueRef is = LLVMBuildICmp(lc->g.b, LLVMIntEQ, tid, gpu_i32(&lc->g, (int64_t)lc->first_warp * 32), "leader");
  LLVMBasicBlockRef bt = block(lc, "leader"), bj = block(lc, "leader.end");
  LLVMBuildCondBr(lc->g.b, is, bt, bj);
  LLVMPositionBuilderAtEnd(lc->g.b, bt);
  return bj;
}
static void leader_end(nv_lc_t *lc, LLVMBasicBlockRef join) {
  LLVMBuildBr(lc->g.b, join);
  LLVMPositionBuilderAtEnd(lc->g.b, join);
}

static LLVMValueRef scalar_i32(nv_lc_t *lc, const drk_tile_value_t *v) {
  LLVMValueRef x = gpu_get(&lc->g, v)->r[0];
  if (LLVMTypeOf(x) != lc->g.i32) x = LLVMBuildTrunc(lc->g.b, x, lc->g.i32, "");
  return x;
}

/* TMA coordinates, innermost first: the op lists them in box (tile) dimension order, the
 * descriptor's innermost dimension is its shared layout's fastest one. */
static bool tma_coords(nv_lc_t *lc, const drk_tile_op_t *op, int first, LLVMValueRef *out) {
  const drk_tile_type_t *desc = &op->operands[0]->type;
  const drk_tile_layout_t *L = desc->layout;
  if (L->rank != desc->rank) return gpu_err(&lc->g, op, "with a shared layout of rank %d for a rank-%d box", L->rank, desc->rank);
  int64_t inner = desc->dims[L->order[0]] * (drk_dtype_bits(desc->dtype) / 8);
  if (inner % 16) return gpu_err(&lc->g, op, "with an innermost box dimension of %lld bytes (TMA needs a multiple of 16)", (long long)inner);
  if (L->swizzle && inner > L->swizzle)
    return gpu_err(&lc->g, op, "with an innermost box dimension of %lld bytes (at most the %d-byte swizzle)", (long long)inner, L->swizzle);
  for (int i = 0; i < desc->rank; i++) {
    if (desc->dims[i] > 256) return gpu_err(&lc->g, op, "with a box dimension of %lld (TMA allows 256)", (long long)desc->dims[i]);
    out[i] = scalar_i32(lc, op->operands[first + L->order[i]]);
  }
  return true;
}

static bool lower_tma(nv_lc_t *lc, const drk_tile_op_t *op) {
  bool ld = op->code == DRK_TOP_TMA_LOAD;
  LLVMValueRef co[DRK_TILE_MAX_RANK];
  if (!tma_coords(lc, op, ld ? 3 : 2, co)) return false;
  unsigned rank = (unsigned)op->operands[0]->type.rank;
  if (rank < 1 || rank > 5) return gpu_err(&lc->g, op, "of rank %u (TMA takes 1..5)", rank);
  LLVMValueRef tmap = gpu_get(&lc->g, op->operands[0])->r[0], sm = gpu_get(&lc->g, op->operands[1])->r[0];
  LLVMBasicBlockRef j = leader_begin(lc);
  if (ld) {
    drk_nvptx_tma_load(lc->cg, sm, gpu_get(&lc->g, op->operands[2])->r[0], tmap, co, rank,
                       (unsigned)drk_tile_op_attr_int(op, "multicast", 0));
  } else {
    drk_nvptx_tma_store(lc->cg, sm, tmap, co, rank);
    drk_nvptx_bulk_commit(lc->cg);
  }
  leader_end(lc, j);
  return true;
}

/* Empty asm that takes v and gives it back: uses after it cannot move above the wgmma wait
 * that precedes it (CUTLASS's warpgroup_fence_operand). */
static LLVMValueRef fence_operand(nv_lc_t *lc, LLVMValueRef v) {
  LLVMTypeRef t = LLVMTypeOf(v);
  const char *cons = t == lc->g.f32 ? "=f,0" : t == lc->g.i32 ? "=r,0" : NULL;
  if (!cons) return v;
  LLVMTypeRef ft = LLVMFunctionType(t, &t, 1, 0);
  LLVMValueRef ia = LLVMGetInlineAsm(ft, "", 0, cons, strlen(cons), 1, 0, LLVMInlineAsmDialectATT, 0);
  return LLVMBuildCall2(lc->g.b, ft, ia, &v, 1, "");
}

bool nv_lower_hopper(nv_lc_t *lc, const drk_tile_op_t *op) {
  if (!need_90a(lc, op)) return false;
  drk_nvptx_cg_t *cg = lc->cg;
  switch (op->code) {
  case DRK_TOP_TMA_LOAD:
  case DRK_TOP_TMA_STORE: return lower_tma(lc, op);
  case DRK_TOP_TMA_STORE_WAIT: {
    LLVMBasicBlockRef j = leader_begin(lc);
    drk_nvptx_bulk_wait(cg, (unsigned)drk_tile_op_attr_int(op, "pending", 0), true);
    leader_end(lc, j);
    return true;
  }
  case DRK_TOP_MBARRIER_ARRIVE: {
    /* A predicated arrive, not a branch: consumers arrive between wgmmas, and a divergent
     * path there makes ptxas serialize the wgmma pipeline (C7520). With a target CTA: the
     * barrier at the same offset in that CTA of the cluster (mapa), with the default
     * semantics (release at CTA scope) as CUTLASS's ClusterBarrier::arrive: the reads it
     * releases are wgmma operand reads that a wgmma wait has already completed. */
    bool remote = op->n_operands > 1;
    LLVMValueRef args[3] = {drk_nvptx_tid(cg, 0), gpu_get(&lc->g, op->operands[0])->r[0],
                            remote ? scalar_i32(lc, op->operands[1]) : NULL};
    LLVMTypeRef ts[3] = {lc->g.i32, LLVMTypeOf(args[1]), lc->g.i32};
    char text[256];
    if (remote)
      snprintf(text, sizeof text,
               "{\n.reg .pred p;\n.reg .b64 ra;\nsetp.eq.u32 p, $0, %d;\nmapa.shared::cluster.u64 ra, $1, $2;\n"
               "@p mbarrier.arrive.shared::cluster.b64 _, [ra];\n}",
               lc->first_warp * 32);
    else
      snprintf(text, sizeof text,
               "{\n.reg .pred p;\nsetp.eq.u32 p, $0, %d;\n@p mbarrier.arrive.shared::cta.b64 _, [$1];\n}",
               lc->first_warp * 32);
    const char *cons = remote ? "r,l,r,~{memory}" : "r,l,~{memory}";
    unsigned na = remote ? 3 : 2;
    LLVMTypeRef ft = LLVMFunctionType(lc->g.vd, ts, na, 0);
    LLVMValueRef ia = LLVMGetInlineAsm(ft, text, strlen(text), cons, strlen(cons), 1, 0, LLVMInlineAsmDialectATT, 0);
    LLVMBuildCall2(lc->g.b, ft, ia, args, na, "");
    return true;
  }
  case DRK_TOP_MBARRIER_INIT:
  case DRK_TOP_MBARRIER_EXPECT_TX: {
    LLVMValueRef bar = gpu_get(&lc->g, op->operands[0])->r[0];
    LLVMBasicBlockRef j = leader_begin(lc);
    if (op->code == DRK_TOP_MBARRIER_INIT)
      drk_nvptx_mbarrier_init(cg, bar, gpu_i32(&lc->g, drk_tile_op_attr_int(op, "count", 1)));
    else
      drk_nvptx_mbarrier_arrive_expect_tx(cg, bar, gpu_i32(&lc->g, drk_tile_op_attr_int(op, "bytes", 0)));
    leader_end(lc, j);
    return true;
  }
  case DRK_TOP_MBARRIER_WAIT:
    drk_nvptx_mbarrier_wait_parity(cg, gpu_get(&lc->g, op->operands[0])->r[0], scalar_i32(lc, op->operands[1]));
    return true;
  case DRK_TOP_FENCE: {
    const char *k = drk_tile_op_attr_ident(op, "kind", "");
    if (strcmp(k, "proxy_async") == 0) drk_nvptx_fence_proxy_async(cg);
    else if (strcmp(k, "mbarrier_init") == 0) drk_nvptx_fence_mbarrier_init(cg);
    else return gpu_err(&lc->g, op, "of kind '%s'", k);
    return true;
  }
  case DRK_TOP_SETMAXNREG: {
    /* .minnctapersm 1: without it ptxas cannot tell the register count at entry and ignores
     * every setmaxnreg (C7508), so the consumers never get their 232 registers */
    drk_nvptx_kernel_set_minctasm(cg, lc->g.fn, 1);
    bool inc = strcmp(drk_tile_op_attr_ident(op, "action", "inc"), "inc") == 0;
    LLVMValueRef n = gpu_i32(&lc->g, drk_tile_op_attr_int(op, "regs", 0));
    drk_nvptx_call_intrinsic(cg, inc ? "llvm.nvvm.setmaxnreg.inc.sync.aligned.u32" : "llvm.nvvm.setmaxnreg.dec.sync.aligned.u32",
                             NULL, 0, &n, 1);
    return true;
  }
  case DRK_TOP_WGMMA_FENCE: drk_nvptx_wgmma_fence(cg); return true;
  case DRK_TOP_WGMMA_COMMIT: drk_nvptx_wgmma_commit(cg); return true;
  case DRK_TOP_WGMMA_WAIT: {
    int64_t pend = drk_tile_op_attr_int(op, "pending", 0);
    drk_nvptx_wgmma_wait(cg, (unsigned)pend);
    for (int i = 0; i < op->n_results; i++) {
      gpu_val_t *in = gpu_get(&lc->g, op->operands[i]);
      /* Values still in flight (pending > 0) must not be touched, not even by a copy. */
      if (pend > 0 || op->operands[i]->type.kind != DRK_TT_TILE) {
        gpu_set(&lc->g, op->results[i], in);
        continue;
      }
      gpu_val_t *x = gpu_val_new(&lc->g, in->n);
      for (int r = 0; r < in->n; r++) x->r[r] = fence_operand(lc, in->r[r]);
      gpu_set(&lc->g, op->results[i], x);
    }
    return true;
  }
  default: return gpu_err(&lc->g, op, "(not a Hopper op)");
  }
}

/* ---- dot kind=wgmma ---- */
typedef struct wg_opnd {
  LLVMValueRef base; /* addrspace(3) */
  bool mn_major;
  int64_t rows;      /* extent of the non-fastest dim */
  int64_t swz;       /* swizzle bytes */
  unsigned lbo, sbo, mode;
} wg_opnd_t;

/* kdim: which dim of the operand's [.,.] shape is K (A: 1, B: 0). */
static bool wg_operand(nv_lc_t *lc, const drk_tile_op_t *op, const drk_tile_value_t *v, int kdim, char name,
                       wg_opnd_t *o) {
  const drk_tile_type_t *t = &v->type;
  if (t->kind != DRK_TT_SMEM) return gpu_err(&lc->g, op, "kind=wgmma with operand %c in registers (only shared memory is lowered yet)", name);
  const drk_tile_layout_t *L = t->layout;
  int es = drk_dtype_bits(t->dtype) / 8;
  int f = L->order[0];
  o->base = gpu_get(&lc->g, v)->r[0];
  o->mn_major = f != kdim;
  o->swz = L->swizzle;
  o->rows = t->dims[1 - f];
  int64_t fb = t->dims[f] * es;
  if (o->swz != 32 && o->swz != 64 && o->swz != 128)
    return gpu_err(&lc->g, op, "kind=wgmma with operand %c in a shared layout of swizzle %d (32, 64 or 128 are lowered)", name, L->swizzle);
  if (fb % o->swz)
    return gpu_err(&lc->g, op, "kind=wgmma with operand %c's fastest dimension of %lld bytes (a multiple of the %lld-byte swizzle is needed)",
                  name, (long long)fb, (long long)o->swz);
  if (o->rows % 8) return gpu_err(&lc->g, op, "kind=wgmma with operand %c of %lld rows (a multiple of 8 is needed)", name, (long long)o->rows);
  o->mode = o->swz == 128 ? 1 : o->swz == 64 ? 2 : 3;
  o->sbo = (unsigned)(8 * o->swz);
  o->lbo = o->mn_major ? (unsigned)(o->rows * o->swz) : 16;
  if (o->lbo >= (1u << 18) || o->sbo >= (1u << 18)) return gpu_err(&lc->g, op, "kind=wgmma with operand %c too large for a descriptor", name);
  return true;
}

/* Descriptor of the operand's K slice [k0, k0 + 16). */
static LLVMValueRef wg_desc(nv_lc_t *lc, const wg_opnd_t *o, int64_t k0, int es) {
  int64_t off;
  if (o->mn_major) {
    off = k0 * o->swz;
  } else {
    int64_t kb = k0 * es;
    off = (kb / o->swz) * o->rows * o->swz + kb % o->swz;
  }
  LLVMValueRef idx = gpu_i64(&lc->g, off);
  LLVMValueRef p = LLVMBuildGEP2(lc->g.b, lc->g.i8, o->base, &idx, 1, "");
  return drk_nvptx_wgmma_desc(lc->cg, p, o->lbo, o->sbo, o->mode);
}

bool nv_lower_wgmma(nv_lc_t *lc, const drk_tile_op_t *op) {
  if (!need_90a(lc, op)) return false;
  const drk_tile_value_t *A = op->operands[0], *Bv = op->operands[1], *C = op->operands[2], *res = op->results[0];
  drk_dtype_t ti = A->type.dtype;
  if (!((ti == DRK_DT_F16 || ti == DRK_DT_BF16) && Bv->type.dtype == ti && C->type.dtype == DRK_DT_F32))
    return gpu_err(&lc->g, op, "kind=wgmma on %s x %s -> %s (f16/bf16 x same -> f32 are lowered)", drk_dtype_name(ti),
                  drk_dtype_name(Bv->type.dtype), drk_dtype_name(C->type.dtype));
  if (lc->n_warps != 4) return gpu_err(&lc->g, op, "kind=wgmma on %d warps (one warpgroup of 4 is lowered)", lc->n_warps);
  const drk_tile_layout_t *L = C->type.layout;
  int64_t M = C->type.dims[0], N = C->type.dims[1], K = A->type.dims[1];
  if (L->wpc[0] != 4 || L->wpc[1] != 1 || L->instr[0] != 64 || L->instr[1] != N || M != 64 || N < 8 || N > 256 || N % 8)
    return gpu_err(&lc->g, op, "kind=wgmma with a %lldx%lld accumulator in layout #%s (64xN with wgmma{wpc = [4, 1], instr = [64, N]} is lowered)",
                  (long long)M, (long long)N, L->name);
  wg_opnd_t oa, ob;
  if (!wg_operand(lc, op, A, 1, 'A', &oa) || !wg_operand(lc, op, Bv, 0, 'B', &ob)) return false;
  gpu_dist_t D;
  if (!gpu_dist(&lc->g, op, &C->type, &D)) return false;
  if (D.rank != 2 || D.n[0] != 2 || D.n[1] != N / 4) return gpu_err(&lc->g, op, "(internal: unexpected accumulator distribution)");
  int nacc = (int)(N / 2);
  gpu_val_t *c = gpu_get(&lc->g, C);
  LLVMValueRef acc[128];
  int map[128];
  for (int i = 0; i < nacc; i++) {
    map[i] = (int)(((i >> 1) & 1) * (N / 4) + 2 * (i >> 2) + (i & 1));
    acc[i] = c->r[map[i]];
  }
  /* Accumulators that are constant zeros (the consumer's peeled first k step): the first
   * wgmma ignores them (scale-d 0) and gets none, so only wgmma defines the registers (zero
   * moves before it, merged by LLVM with other zero registers, made ptxas serialize, C7520) */
  bool zero = true;
  for (int i = 0; i < nacc && zero; i++) zero = LLVMIsConstant(acc[i]) && LLVMIsNull(acc[i]);
  if (zero)
    for (int i = 0; i < nacc; i++) acc[i] = LLVMGetUndef(lc->g.f32);
  int es = drk_dtype_bits(ti) / 8;
  drk_nvptx_mma_in_t in = ti == DRK_DT_BF16 ? DRK_NVPTX_MMA_BF16 : DRK_NVPTX_MMA_F16;
  for (int64_t k0 = 0; k0 < K; k0 += 16) {
    LLVMValueRef da = wg_desc(lc, &oa, k0, es), db = wg_desc(lc, &ob, k0, es);
    drk_nvptx_wgmma_mma_async(lc->cg, in, (unsigned)N, da, db, gpu_i32(&lc->g, !(zero && k0 == 0)), oa.mn_major,
                              ob.mn_major, acc);
  }
  gpu_val_t *x = gpu_val_new(&lc->g, D.nregs);
  for (int i = 0; i < nacc; i++) x->r[map[i]] = acc[i];
  gpu_set(&lc->g, res, x);
  return true;
}
