/* Private to backends/nvptx/lower*.c: the state of one tile-kernel lowering for NVIDIA GPUs. The
 * target-independent part (context, distributions, axis facts, data movement) is
 * backends/common/lower.h; this adds what only this target has. */
#ifndef DRK_BACKENDS_NVPTX_LOWER_INTERNAL_H
#define DRK_BACKENDS_NVPTX_LOWER_INTERNAL_H

#include "backends/nvptx/nvptx.h"
#include "backends/common/lower.h"
#include "ir/tile.h"

/* g is the first member: the hooks of backends/common get &lc->g and cast it back. */
typedef struct nv_lc {
  gpu_lc_t g;
  drk_nvptx_cg_t *cg;
  int first_warp, n_warps; /* the warps executing the current region */
  bool in_warp_group;
} nv_lc_t;

/* lower.c: thread ids, barriers, the placement of layouts on warps, the gpu_target_t hooks */
LLVMValueRef nv_lane(nv_lc_t *lc);
LLVMValueRef nv_warp(nv_lc_t *lc);
void nv_barrier(nv_lc_t *lc);

/* lower_math.c: elementwise arithmetic and math functions */
/* gpu_target_t.pow (pow on a float compute type; NULL: none) and .math1 (the unary math
 * functions beyond neg/abs/sqrt/rsqrt on compute type ct; NULL: none). */
LLVMValueRef nv_pow(gpu_lc_t *g, LLVMValueRef x, LLVMValueRef y);
LLVMValueRef nv_math1(gpu_lc_t *g, const drk_tile_op_t *op, LLVMTypeRef ct, LLVMValueRef x);
/* gpu_target_t.f8_encode and .fptrunc_rz (sm_89+ conversions, cvt.rz). */
LLVMValueRef nv_f8_encode_hw(gpu_lc_t *g, drk_dtype_t t, LLVMValueRef f);
LLVMValueRef nv_fptrunc_rz(gpu_lc_t *g, LLVMValueRef x, drk_dtype_t to);
/* Links libdevice into mod when it declares __nv_* functions; false + error if needed and
 * missing. Thread-safe (one module per thread). */
bool nv_link_libdevice(LLVMModuleRef mod, drk_diag_t *d);
/* The same bringing in only the functions mod needs (lazily read bitcode): the same code,
 * much faster for a module of one kernel; libdevice's tables may come in another order. */
bool nv_link_libdevice_needed(LLVMModuleRef mod, drk_diag_t *d);
/* Whether mod declares __nv_* functions. */
bool nv_needs_libdevice(LLVMModuleRef mod);
/* The libdevice bitcode of $DRK_LIBDEVICE / $CUDA_HOME / /usr/local/cuda, read once per process
 * and path; borrowed for the life of the process. */
typedef struct nv_libdevice {
  char *path;
  void *data;
  size_t size;
  char hash[72];       /* "sha256:<hex>" of the bytes: part of kernel cache keys */
  char **order;        /* see nv_libdevice_order */
  size_t n_order;
} nv_libdevice_t;
/* NULL when not found (*out_error untouched) or unreadable (*out_error, borrowed: "path: why"). */
const nv_libdevice_t *nv_libdevice_get(char **out_error);
/* The names of the global variables, then of the functions, a module has after linking all
 * of lib into it, in the module's order (computed once, by linking into an empty module):
 * drk_nvptx_ptx_join's lib_order. */
const char *const *nv_libdevice_order(const nv_libdevice_t *lib, size_t *out_n);
/* Any-type full-warp shuffle (xor). */
LLVMValueRef nv_shfl_xor(nv_lc_t *lc, LLVMValueRef v, unsigned mask);

/* lower_mem.c: gpu_target_t.reduce_warps, dot */
/* A CTA-wide barrier for op (false + error where there cannot be one). */
bool nv_cta_sync(nv_lc_t *lc, const drk_tile_op_t *op);
bool nv_reduce_warps(gpu_lc_t *g, const drk_tile_op_t *op, const gpu_dist_t *D, int ax, const char *comb,
                     drk_dtype_t t, LLVMValueRef *xr, int nres);
bool nv_lower_dot(nv_lc_t *lc, const drk_tile_op_t *op);
/* local_load of a 16-bit mma_sync dot_op operand through ldmatrix (sm_80+); GPU_OP_NOT_MINE
 * for other loads (backends/common's plain shared loads). */
gpu_op_result_t nv_lower_ldmatrix(nv_lc_t *lc, const drk_tile_op_t *op);

/* lower_hopper.c: TMA, bulk groups, mbarriers, fences, setmaxnreg, wgmma_fence/commit/wait
 * (nv_lower_hopper) and dot kind=wgmma (nv_lower_wgmma); sm_90a only. */
bool nv_lower_hopper(nv_lc_t *lc, const drk_tile_op_t *op);
bool nv_lower_wgmma(nv_lc_t *lc, const drk_tile_op_t *op);

#endif
