/* Private to backends/nvptx/lower*.c: the state of one tile-kernel lowering.
 *
 * A tile value becomes an array of per-thread LLVM values ("registers"). Which element of
 * the tile a register holds is given by a distribution (am_dist_t) computed from the
 * value's layout and shape: every layout drkc has (blocked, slice, mma_sync, wgmma,
 * dot_op) is a product over dimensions, so the coordinate of register r along dim d is
 * (thr[d] + off[d][r_d]) & (dims[d] - 1), with thr[d] an i32 that depends only on the
 * thread and off[d] compile-time constants; registers are numbered row-major over their
 * per-dim indices r_d. */
#ifndef DRK_BACKENDS_AMDGPU_LOWER_INTERNAL_H
#define DRK_BACKENDS_AMDGPU_LOWER_INTERNAL_H

#include "backends/amdgpu/amdgpu.h"
#include "ir/tile.h"

#define AM_MAXR DRK_TILE_MAX_RANK

/* Axis facts of an integer/pointer tile (Triton's AxisInfo), per dimension: runs of
 * `contig` consecutive values (pointers: consecutive elements) starting at coordinates that
 * are multiples of contig, whose first value is divisible by `div` (pointers: bytes), and
 * runs of `cnst` equal values. Scalars: dims = 1. */
typedef struct am_axis {
  int64_t contig[AM_MAXR], div[AM_MAXR], cnst[AM_MAXR];
} am_axis_t;

typedef struct am_dist {
  int rank;
  int64_t dims[AM_MAXR];
  int n[AM_MAXR]; /* registers along each dim */
  int nregs;
  int64_t *off[AM_MAXR];
  LLVMValueRef thr[AM_MAXR]; /* i32; NULL means 0 */
  int64_t thr_align[AM_MAXR]; /* thr[d] is a multiple of this */
  bool wrap[AM_MAXR];
  /* reductions: lane xor masks and warps (stride in work-items, count) holding distinct
   * data along d */
  int n_xor[AM_MAXR];
  unsigned xr[AM_MAXR][6];
  int wstride[AM_MAXR], wcount[AM_MAXR];
} am_dist_t;

typedef struct am_val {
  int n;             /* registers; 1 for scalars, smem and descriptors */
  LLVMValueRef *r;   /* smem: r[0] is the base address (addrspace 3) */
} am_val_t;

typedef struct am_lc {
  drk_amdgpu_cg_t *cg;
  LLVMBuilderRef b;
  LLVMContextRef ctx;
  const drk_tile_module_t *m;
  const drk_tile_kernel_t *k;
  drk_diag_t *d;
  drk_arena_t *a;
  LLVMValueRef fn;
  am_val_t **vals;   /* by value id */
  am_axis_t **axis;  /* by value id (NULL: unknown) */
  uint32_t n_ids;
  bool ok;
  LLVMValueRef lds;     /* the kernel's LDS of k->smem bytes (local_alloc, `scratch` offsets) */
  LLVMValueRef scratch; /* static scratch placeholder (am_smem_scratch) */
  unsigned scratch_bytes;
  LLVMTypeRef i1, i8, i16, i32, i64, f16, bf16, f32, f64, vd, p1, p3, p0;
} am_lc_t;

/* lower.c */
bool am_err(am_lc_t *lc, const drk_tile_op_t *op, const char *fmt, ...) DRK_PRINTF(3, 4);
LLVMValueRef am_i32(am_lc_t *lc, int64_t v);
LLVMValueRef am_i64(am_lc_t *lc, int64_t v);
am_val_t *am_val_new(am_lc_t *lc, int n);
am_val_t *am_get(am_lc_t *lc, const drk_tile_value_t *v);
void am_set(am_lc_t *lc, const drk_tile_value_t *v, am_val_t *x);
bool am_dist(am_lc_t *lc, const drk_tile_op_t *op, const drk_tile_type_t *t, am_dist_t *out);
LLVMValueRef am_coord(am_lc_t *lc, const am_dist_t *D, int reg, int d);
void am_reg_split(const am_dist_t *D, int reg, int *idx);
int am_reg_join(const am_dist_t *D, const int *idx);
LLVMTypeRef am_reg_type(am_lc_t *lc, drk_dtype_t t, bool is_ptr);
LLVMTypeRef am_mem_type(am_lc_t *lc, drk_dtype_t t);
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
LLVMValueRef am_smem_scratch(am_lc_t *lc, const drk_tile_op_t *op, unsigned bytes);
LLVMValueRef am_smem_elem_addr(am_lc_t *lc, LLVMValueRef base, const drk_tile_type_t *st,
                               LLVMValueRef *coords);

/* lower_math.c: elementwise arithmetic, comparisons, casts, math functions */
LLVMValueRef am_ew_binary(am_lc_t *lc, const drk_tile_op_t *op, drk_dtype_t t, LLVMValueRef a,
                          LLVMValueRef b);
LLVMValueRef am_ew_unary(am_lc_t *lc, const drk_tile_op_t *op, drk_dtype_t t, LLVMValueRef a);
LLVMValueRef am_cmp(am_lc_t *lc, const drk_tile_op_t *op, drk_dtype_t t, const char *pred,
                    LLVMValueRef a, LLVMValueRef b);
LLVMValueRef am_cast(am_lc_t *lc, const drk_tile_op_t *op, drk_dtype_t from, drk_dtype_t to,
                     LLVMValueRef v, bool rz);
LLVMValueRef am_const(am_lc_t *lc, drk_dtype_t t, const drk_tile_attr_t *a);
/* Combiner of reductions: sum/max/min on the register type of t. */
LLVMValueRef am_combine(am_lc_t *lc, const char *comb, drk_dtype_t t, LLVMValueRef a, LLVMValueRef b);
/* Any-type shuffle (xor of the 64-lane wave's lane id; ds_bpermute). */
LLVMValueRef am_shfl_xor(am_lc_t *lc, LLVMValueRef v, unsigned mask);

/* lower_mem.c: reduce, convert_layout/reshape, shared memory, dot */
bool am_lower_reduce(am_lc_t *lc, const drk_tile_op_t *op);
bool am_lower_relayout(am_lc_t *lc, const drk_tile_op_t *op);
bool am_lower_local_load(am_lc_t *lc, const drk_tile_op_t *op);
bool am_lower_local_store(am_lc_t *lc, const drk_tile_op_t *op);
bool am_lower_cp_async(am_lc_t *lc, const drk_tile_op_t *op);
bool am_lower_dot(am_lc_t *lc, const drk_tile_op_t *op);
/* Vector width for an access of element size esize along the fastest register dim f of D
 * with pointer axis info pa (NULL: 1) and mask axis info ma (NULL: no mask). */
int am_vec_width(const am_dist_t *D, int f, int esize, const am_axis_t *pa, const am_axis_t *ma);
int am_fastest_dim(const drk_tile_type_t *t);


#endif
