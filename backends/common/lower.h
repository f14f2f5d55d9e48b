/* Private to backends/{nvptx,amdgpu}/lower*.c and backends/common: the state of one
 * tile-kernel lowering and the target-independent helpers both GPU backends share.
 *
 * A tile value becomes an array of per-thread LLVM values ("registers"). Which element of
 * the tile a register holds is given by a distribution (gpu_dist_t) computed from the
 * value's layout and shape: every layout drkc has (blocked, slice, mma_sync, wgmma, mfma,
 * dot_op) is a product over dimensions, so the coordinate of register r along dim d is
 * (thr[d] + off[d][r_d]) & (dims[d] - 1), with thr[d] an i32 that depends only on the
 * thread and off[d] compile-time constants; registers are numbered row-major over their
 * per-dim indices r_d. How a layout maps onto warps (NVIDIA) or waves (AMD) is the
 * target's: gpu_target_t.dist_layout. */
#ifndef DRK_BACKENDS_COMMON_LOWER_H
#define DRK_BACKENDS_COMMON_LOWER_H

#include "ir/tile.h"

#include <llvm-c/Core.h>

#define GPU_MAXR DRK_TILE_MAX_RANK

/* Axis facts of an integer/pointer tile (Triton's AxisInfo), per dimension: runs of
 * `contig` consecutive values (pointers: consecutive elements) starting at coordinates that
 * are multiples of contig, whose first value is divisible by `div` (pointers: bytes), and
 * runs of `cnst` equal values. Scalars: dims = 1. */
typedef struct gpu_axis {
  int64_t contig[GPU_MAXR], div[GPU_MAXR], cnst[GPU_MAXR];
} gpu_axis_t;

typedef struct gpu_dist {
  int rank;
  int64_t dims[GPU_MAXR];
  int n[GPU_MAXR]; /* registers along each dim */
  int nregs;
  int64_t *off[GPU_MAXR];
  LLVMValueRef thr[GPU_MAXR]; /* i32; NULL means 0 */
  int64_t thr_align[GPU_MAXR]; /* thr[d] is a multiple of this */
  bool wrap[GPU_MAXR];
  /* reductions: lane xor masks and warps (stride, count) holding distinct data along d;
   * the stride counts warps on NVIDIA, work-items on AMD (see each dist_layout) */
  int n_xor[GPU_MAXR];
  unsigned xr[GPU_MAXR][6];
  int wstride[GPU_MAXR], wcount[GPU_MAXR];
} gpu_dist_t;

typedef struct gpu_val {
  int n;             /* registers; 1 for scalars, smem and descriptors */
  LLVMValueRef *r;   /* smem: r[0] is the base address (addrspace 3) */
} gpu_val_t;

typedef struct gpu_lc gpu_lc_t;

typedef enum gpu_op_result { GPU_OP_FAILED, GPU_OP_DONE, GPU_OP_NOT_MINE } gpu_op_result_t;

/* What a backend supplies. Every hook gets the gpu_lc_t embedded (first member) in the
 * backend's own context. */
typedef struct gpu_target {
  const char *name; /* "nvptx", "amdgpu": the prefix of error messages */
  const char *desc; /* "NVPTX", "AMDGPU": in "not supported by the <desc> lowering" */
  /* Lowers op when it is one the target lowers its own way (thread ids, barriers, dot,
   * reduce, async copies, target-only ops); GPU_OP_NOT_MINE leaves it to gpu_lower_region. */
  gpu_op_result_t (*lower_op)(gpu_lc_t *lc, const drk_tile_op_t *op);
  LLVMValueRef (*lane)(gpu_lc_t *lc);
  LLVMValueRef (*warp)(gpu_lc_t *lc);
  /* What the warp strides of blocked layouts count: 1 (warps) or 32 (work-items). */
  int wstride_unit;
  /* Places dim d (of size) of a layout other than slice, blocked and dot_op of blocked
   * (mma_sync, wgmma, mfma, dot_op of those) on threads; false when it cannot. */
  bool (*dist_dim)(gpu_lc_t *lc, const drk_tile_layout_t *L, drk_dtype_t dt, int rank, int d, int64_t size,
                   gpu_dist_t *D, LLVMValueRef lane, LLVMValueRef warp);
  /* pow on a float compute type (f32/f64); NULL: not available for that type. */
  LLVMValueRef (*pow)(gpu_lc_t *lc, LLVMValueRef x, LLVMValueRef y);
  bool int_pow; /* integer pow through pow on f64 */
  /* Unary math beyond neg/abs/sqrt/rsqrt on x of compute type ct; NULL: not available. */
  LLVMValueRef (*math1)(gpu_lc_t *lc, const drk_tile_op_t *op, LLVMTypeRef ct, LLVMValueRef x);
  LLVMValueRef (*call_intrinsic)(gpu_lc_t *lc, const char *name, LLVMTypeRef *over, unsigned n_over,
                                 LLVMValueRef *args, unsigned n_args);
  /* f32 -> f8 bits (i8) in hardware; NULL (or a NULL result): the software encoding. */
  LLVMValueRef (*f8_encode)(gpu_lc_t *lc, drk_dtype_t t, LLVMValueRef f);
  /* f32 -> f16/bf16 rounding toward zero. */
  LLVMValueRef (*fptrunc_rz)(gpu_lc_t *lc, LLVMValueRef x, drk_dtype_t to);
  /* The base (addrspace 3, i8) of the shared memory that `offset`/`scratch` attributes
   * index, and a new static shared-memory array. */
  LLVMValueRef (*smem_base)(gpu_lc_t *lc);
  LLVMValueRef (*smem_static)(gpu_lc_t *lc, const char *name, unsigned bytes, unsigned align);
  /* Any-type xor shuffle among the lanes of a warp (wave). */
  LLVMValueRef (*shfl_xor)(gpu_lc_t *lc, LLVMValueRef v, unsigned mask);
  /* The cross-warp part of a reduce along ax (D->wcount[ax] > 1): combines the nres partial
   * results xr of the warps holding distinct positions, in place; false + error. */
  bool (*reduce_warps)(gpu_lc_t *lc, const drk_tile_op_t *op, const gpu_dist_t *D, int ax, const char *comb,
                       drk_dtype_t t, LLVMValueRef *xr, int nres);
  /* A barrier of all the threads of the block for op; false + error where there cannot be
   * one. */
  bool (*sync)(gpu_lc_t *lc, const drk_tile_op_t *op);
  /* Whether `bytes` of staging through shared memory fit the target; false + error. */
  bool (*smem_fits)(gpu_lc_t *lc, const drk_tile_op_t *op, int64_t bytes);
  /* cp_async of `bytes` from global gptr to shared saddr (mask: i1 or NULL, zero-filling
   * when false) as the target's asynchronous copy; false when it has none for this width
   * (the caller copies synchronously). NULL: never. */
  bool (*cp_async)(gpu_lc_t *lc, LLVMValueRef saddr, LLVMValueRef gptr, int bytes, LLVMValueRef mask);
} gpu_target_t;

struct gpu_lc {
  const gpu_target_t *t;
  LLVMBuilderRef b;
  LLVMContextRef ctx;
  const drk_tile_module_t *m;
  const drk_tile_kernel_t *k;
  drk_diag_t *d;
  drk_arena_t *a;
  LLVMValueRef fn;
  gpu_val_t **vals;   /* by value id */
  gpu_axis_t **axis;  /* by value id (NULL: unknown) */
  uint32_t n_ids;
  bool ok;
  LLVMValueRef scratch; /* static scratch placeholder (gpu_smem_scratch) */
  unsigned scratch_bytes;
  LLVMTypeRef i1, i8, i16, i32, i64, f16, bf16, f32, f64, vd, p1, p3, p0;
};

/* Reports "<target>: cannot lower 'op' ..." at op (the kernel when NULL); always false. */
bool gpu_err(gpu_lc_t *lc, const drk_tile_op_t *op, const char *fmt, ...) DRK_PRINTF(3, 4);
LLVMValueRef gpu_i32(gpu_lc_t *lc, int64_t v);
LLVMValueRef gpu_i64(gpu_lc_t *lc, int64_t v);
gpu_val_t *gpu_val_new(gpu_lc_t *lc, int n);
gpu_val_t *gpu_get(gpu_lc_t *lc, const drk_tile_value_t *v);
void gpu_set(gpu_lc_t *lc, const drk_tile_value_t *v, gpu_val_t *x);
LLVMTypeRef gpu_reg_type(gpu_lc_t *lc, drk_dtype_t t, bool is_ptr);
LLVMTypeRef gpu_mem_type(gpu_lc_t *lc, drk_dtype_t t);
LLVMBasicBlockRef gpu_block(gpu_lc_t *lc, const char *name);

/* Scratch shared memory for op: its `scratch` attribute (offset into smem_base) or the
 * kernel's static scratch buffer. Every user brackets its use with barriers (write,
 * barrier, read, barrier), so all ops share one buffer, sized by gpu_scratch_finish at the
 * end of the kernel. */
LLVMValueRef gpu_smem_scratch(gpu_lc_t *lc, const drk_tile_op_t *op, unsigned bytes);
/* Replaces the placeholder scratch buffer by one of the final size. */
void gpu_scratch_finish(gpu_lc_t *lc);
LLVMValueRef gpu_smem_elem_addr(gpu_lc_t *lc, LLVMValueRef base, const drk_tile_type_t *st,
                                LLVMValueRef *coords);

/* Building blocks of dist_layout: n offsets from the kernel's arena; a dim every thread
 * holds whole; a dim of a blocked layout (lane, warp: the thread's ids; wstride_unit: what
 * the layout's warp strides are counted in, 1 for warps, 32 for work-items). */
int64_t *gpu_offs_new(gpu_lc_t *lc, int n);
void gpu_dim_const(gpu_lc_t *lc, gpu_dist_t *D, int s, int64_t size);
void gpu_dim_blocked(gpu_lc_t *lc, const drk_tile_layout_t *L, int d, int64_t size, gpu_dist_t *D, int s,
                     LLVMValueRef lane, LLVMValueRef warp, int wstride_unit);
/* Distribution of a value of type t (scalars: rank 0, one register); false + error. */
bool gpu_dist(gpu_lc_t *lc, const drk_tile_op_t *op, const drk_tile_type_t *t, gpu_dist_t *out);
LLVMValueRef gpu_coord(gpu_lc_t *lc, const gpu_dist_t *D, int reg, int d);
void gpu_reg_split(const gpu_dist_t *D, int reg, int *idx);
int gpu_reg_join(const gpu_dist_t *D, const int *idx);
/* Vector width for an access of element size esize along the fastest register dim f of D
 * with pointer axis info pa (NULL: 1) and mask axis info ma (NULL: no mask). */
int gpu_vec_width(const gpu_dist_t *D, int f, int esize, const gpu_axis_t *pa, const gpu_axis_t *ma);
int gpu_fastest_dim(const drk_tile_type_t *t);

/* Axis analysis: facts for kernel parameter i (from its align/div attributes), then for
 * every op of a region (fixpoint over loops). */
void gpu_axis_param(gpu_lc_t *lc, int i);
void gpu_axis_region(gpu_lc_t *lc, const drk_tile_region_t *r);

/* Ops lowered the same way on every target. */
bool gpu_lower_load(gpu_lc_t *lc, const drk_tile_op_t *op);
bool gpu_lower_store(gpu_lc_t *lc, const drk_tile_op_t *op);
bool gpu_lower_broadcast(gpu_lc_t *lc, const drk_tile_op_t *op);
bool gpu_lower_expand_dims(gpu_lc_t *lc, const drk_tile_op_t *op);
bool gpu_lower_elementwise(gpu_lc_t *lc, const drk_tile_op_t *op);
bool gpu_lower_addptr(gpu_lc_t *lc, const drk_tile_op_t *op);
bool gpu_lower_splat_const_range(gpu_lc_t *lc, const drk_tile_op_t *op);
bool gpu_lower_local_alloc(gpu_lc_t *lc, const drk_tile_op_t *op);
bool gpu_lower_memdesc_index(gpu_lc_t *lc, const drk_tile_op_t *op);
bool gpu_lower_for(gpu_lc_t *lc, const drk_tile_op_t *op);
bool gpu_lower_if(gpu_lc_t *lc, const drk_tile_op_t *op);
/* Lowers the ops of r in order (target ops through lower_op); *out_yield: its yield, if any. */
bool gpu_lower_region(gpu_lc_t *lc, const drk_tile_region_t *r, const drk_tile_op_t **out_yield);

/* lower_math.c: calls of LLVM intrinsics overloaded on t; f8 and the f32 compute type of
 * f16/bf16/f8; reduction combiners (sum/max/min on the register type of t); comparisons,
 * casts (rz: toward zero) and constants. NULL: not supported for these types. */
LLVMValueRef gpu_call1(gpu_lc_t *lc, const char *intr, LLVMTypeRef t, LLVMValueRef a);
LLVMValueRef gpu_call2(gpu_lc_t *lc, const char *intr, LLVMTypeRef t, LLVMValueRef a, LLVMValueRef b);
bool gpu_is_f8(drk_dtype_t t);
bool gpu_is_unsigned(drk_dtype_t t);
LLVMValueRef gpu_f8_decode(gpu_lc_t *lc, drk_dtype_t t, LLVMValueRef v);
LLVMValueRef gpu_f8_encode(gpu_lc_t *lc, drk_dtype_t t, LLVMValueRef f);
LLVMValueRef gpu_to_compute(gpu_lc_t *lc, drk_dtype_t t, LLVMValueRef v);
LLVMValueRef gpu_from_compute(gpu_lc_t *lc, drk_dtype_t t, LLVMValueRef v);
LLVMValueRef gpu_combine(gpu_lc_t *lc, const char *comb, drk_dtype_t t, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef gpu_cmp(gpu_lc_t *lc, const drk_tile_op_t *op, drk_dtype_t t, const char *pred,
                     LLVMValueRef a, LLVMValueRef b);
LLVMValueRef gpu_cast(gpu_lc_t *lc, const drk_tile_op_t *op, drk_dtype_t from, drk_dtype_t to,
                      LLVMValueRef v, bool rz);
LLVMValueRef gpu_const(gpu_lc_t *lc, drk_dtype_t t, const drk_tile_attr_t *a);
/* Elementwise arithmetic on registers of dtype t; NULL: not supported. */
LLVMValueRef gpu_ew_binary(gpu_lc_t *lc, const drk_tile_op_t *op, drk_dtype_t t, LLVMValueRef a,
                           LLVMValueRef b);
LLVMValueRef gpu_ew_unary(gpu_lc_t *lc, const drk_tile_op_t *op, drk_dtype_t t, LLVMValueRef a);

/* lower_mem.c: element pointer base + idx (elements of et); ops through shared memory. */
LLVMValueRef gpu_gep_elems(gpu_lc_t *lc, LLVMTypeRef et, LLVMValueRef base, LLVMValueRef idx);
bool gpu_lower_reduce(gpu_lc_t *lc, const drk_tile_op_t *op);
bool gpu_lower_relayout(gpu_lc_t *lc, const drk_tile_op_t *op);
bool gpu_lower_local_load(gpu_lc_t *lc, const drk_tile_op_t *op);
bool gpu_lower_local_store(gpu_lc_t *lc, const drk_tile_op_t *op);
bool gpu_lower_cp_async(gpu_lc_t *lc, const drk_tile_op_t *op);

/* A kernel's lowering: gpu_lc_init (types with the target's global and shared address
 * spaces, value tables; lc->fn is the backend's to create), gpu_bind_param for each
 * parameter once the entry block is current, gpu_lower_body (axis analysis, the ops, the
 * return; false + error), gpu_lc_finish (deletes the function and scratch buffer on
 * failure, sizes the scratch buffer on success, frees the arena). */
void gpu_lc_init(gpu_lc_t *lc, const gpu_target_t *t, LLVMBuilderRef b, LLVMContextRef ctx,
                 const drk_tile_module_t *m, const drk_tile_kernel_t *k, drk_diag_t *d, unsigned as_global,
                 unsigned as_shared);
void gpu_bind_param(gpu_lc_t *lc, int i);
bool gpu_lower_body(gpu_lc_t *lc);
void gpu_lc_finish(gpu_lc_t *lc, bool ok);

#endif
