/* Private to backends/amdgpu/lower*.c: the state of one tile-kernel lowering for AMD GPUs
 * (gfx942). The target-independent part (context, distributions, axis facts, data movement)
 * is backends/common/lower.h; this adds what only this target has: the kernel's LDS, lanes
 * and waves of 64, and how dot accumulator layouts map onto MFMA instructions. */
#ifndef DRK_BACKENDS_AMDGPU_LOWER_INTERNAL_H
#define DRK_BACKENDS_AMDGPU_LOWER_INTERNAL_H

#include "backends/amdgpu/amdgpu.h"
#include "backends/common/lower.h"
#include "ir/tile.h"

/* g is the first member: the hooks of backends/common get &lc->g and cast it back. */
typedef struct am_lc {
  gpu_lc_t g;
  drk_amdgpu_cg_t *cg;
  LLVMValueRef lds;     /* the kernel's LDS of k->smem bytes (local_alloc, `scratch` offsets) */
  LLVMValueRef pid[3];  /* program ids after the XCD remap (NULL: the hardware's) */
} am_lc_t;

/* lower.c: thread ids, barriers, the placement of layouts on waves, the gpu_target_t hooks */
LLVMValueRef am_lane(am_lc_t *lc);
LLVMValueRef am_warp(am_lc_t *lc);
/* Work-item id in the workgroup, lane in the 64-wide wave, wave index (uniform). */
LLVMValueRef am_tid(am_lc_t *lc);
LLVMValueRef am_lane64(am_lc_t *lc);
LLVMValueRef am_wave(am_lc_t *lc);

/* How an accumulator layout (mma_sync, mfma) of a dot maps onto MFMA instructions: waves
 * wm x wn (wave w: wm index w % wm), each computing instr x instr blocks (16 or 32) with
 * k_per = K per instruction for element type dt (16-bit: 4 per lane; f32: 1 per lane). */
typedef struct am_mfma_geom {
  int wm, wn, instr, e, k_per;
} am_mfma_geom_t;
/* false when the layout cannot be placed on waves (fewer than 64 threads, odd warps). */
bool am_mfma_geom(const drk_tile_layout_t *acc, drk_dtype_t ab, am_mfma_geom_t *out);
void am_barrier(am_lc_t *lc);

/* lower_math.c: elementwise arithmetic and math functions */
/* gpu_target_t.pow (pow on a float compute type; NULL: none) and .math1 (the unary math
 * functions beyond neg/abs/sqrt/rsqrt on compute type ct; NULL: none). */
LLVMValueRef am_pow(gpu_lc_t *g, LLVMValueRef x, LLVMValueRef y);
LLVMValueRef am_math1(gpu_lc_t *g, const drk_tile_op_t *op, LLVMTypeRef ct, LLVMValueRef x);
/* gpu_target_t.f8_encode: e4m3fn / e5m2 through v_cvt_pk_{fp8,bf8}_f32 (FNUZ of x / 2).
 * Never gives 0x80. */
LLVMValueRef am_f8_encode_hw(gpu_lc_t *g, drk_dtype_t t, LLVMValueRef f);
/* gpu_target_t.fptrunc_rz: f32 -> f16/bf16 toward zero (round, then step back). */
LLVMValueRef am_fptrunc_rz16(gpu_lc_t *g, LLVMValueRef x, drk_dtype_t to);
/* Any-type shuffle (xor of the 64-lane wave's lane id; ds_bpermute). */
LLVMValueRef am_shfl_xor(am_lc_t *lc, LLVMValueRef v, unsigned mask);

/* lower_mem.c: gpu_target_t.reduce_warps, dot */
/* A CTA-wide barrier for op (false + error where there cannot be one). */
bool am_cta_sync(am_lc_t *lc, const drk_tile_op_t *op);
bool am_reduce_warps(gpu_lc_t *g, const drk_tile_op_t *op, const gpu_dist_t *D, int ax, const char *comb,
                     drk_dtype_t t, LLVMValueRef *xr, int nres);
bool am_lower_dot(am_lc_t *lc, const drk_tile_op_t *op);

#endif
