/* Private to backends/nvptx/lower*.c: the state of one tile-kernel lowering.
 *
 * A tile value becomes an array of per-thread LLVM values ("registers"). Which element of
 * the tile a register holds is given by a distribution (nv_dist_t) computed from the
 * value's layout and shape: every layout drkc has (blocked, slice, mma_sync, wgmma,
 * dot_op) is a product over dimensions, so the coordinate of register r along dim d is
 * (thr[d] + off[d][r_d]) & (dims[d] - 1), with thr[d] an i32 that depends only on the
 * thread and off[d] compile-time constants; registers are numbered row-major over their
 * per-dim indices r_d. */
#ifndef DRK_BACKENDS_NVPTX_LOWER_INTERNAL_H
#define DRK_BACKENDS_NVPTX_LOWER_INTERNAL_H

#include "backends/nvptx/nvptx.h"
#include "ir/tile.h"

#define NV_MAXR DRK_TILE_MAX_RANK

/* Axis facts of an integer/pointer tile (Triton's AxisInfo), per dimension: runs of
 * `contig` consecutive values (pointers: consecutive elements) starting at coordinates that
 * are multiples of contig, whose first value is divisible by `div` (pointers: bytes), and
 * runs of `cnst` equal values. Scalars: dims = 1. */
typedef struct nv_axis {
  int64_t contig[NV_MAXR], div[NV_MAXR], cnst[NV_MAXR];
} nv_axis_t;

typedef struct nv_dist {
  int rank;
  int64_t dims[NV_MAXR];
  int n[NV_MAXR]; /* registers along each dim */
  int nregs;
  int64_t *off[NV_MAXR];
  LLVMValueRef thr[NV_MAXR]; /* i32; NULL means 0 */
  int64_t thr_align[NV_MAXR]; /* thr[d] is a multiple of this */
  bool wrap[NV_MAXR];
  /* reductions: lane xor masks and warps (stride, count) holding distinct data along d */
  int n_xor[NV_MAXR];
  unsigned xr[NV_MAXR][5];
  int wstride[NV_MAXR], wcount[NV_MAXR];
} nv_dist_t;

typedef struct nv_val {
  int n;             /* registers; 1 for scalars, smem and descriptors */
  LLVMValueRef *r;   /* smem: r[0] is the base address (addrspace 3) */
} nv_val_t;

typedef struct nv_lc {
  drk_nvptx_cg_t *cg;
  LLVMBuilderRef b;
  LLVMContextRef ctx;
  const drk_tile_module_t *m;
  const drk_tile_kernel_t *k;
  drk_diag_t *d;
  drk_arena_t *a;
  LLVMValueRef fn;
  nv_val_t **vals;   /* by value id */
  nv_axis_t **axis;  /* by value id (NULL: unknown) */
  uint32_t n_ids;
  int first_warp, n_warps; /* the warps executing the current region */
  bool in_warp_group;
  bool ok;
  LLVMValueRef scratch; /* static scratch placeholder (nv_smem_scratch) */
  unsigned scratch_bytes;
  LLVMTypeRef i1, i8, i16, i32, i64, f16, bf16, f32, f64, vd, p1, p3, p0;
} nv_lc_t;

/* lower.c */
bool nv_err(nv_lc_t *lc, const drk_tile_op_t *op, const char *fmt, ...) DRK_PRINTF(3, 4);
LLVMValueRef nv_i32(nv_lc_t *lc, int64_t v);
LLVMValueRef nv_i64(nv_lc_t *lc, int64_t v);
nv_val_t *nv_val_new(nv_lc_t *lc, int n);
nv_val_t *nv_get(nv_lc_t *lc, const drk_tile_value_t *v);
void nv_set(nv_lc_t *lc, const drk_tile_value_t *v, nv_val_t *x);
bool nv_dist(nv_lc_t *lc, const drk_tile_op_t *op, const drk_tile_type_t *t, nv_dist_t *out);
LLVMValueRef nv_coord(nv_lc_t *lc, const nv_dist_t *D, int reg, int d);
void nv_reg_split(const nv_dist_t *D, int reg, int *idx);
int nv_reg_join(const nv_dist_t *D, const int *idx);
LLVMTypeRef nv_reg_type(nv_lc_t *lc, drk_dtype_t t, bool is_ptr);
LLVMTypeRef nv_mem_type(nv_lc_t *lc, drk_dtype_t t);
LLVMValueRef nv_lane(nv_lc_t *lc);
LLVMValueRef nv_warp(nv_lc_t *lc);
void nv_barrier(nv_lc_t *lc);
LLVMValueRef nv_smem_scratch(nv_lc_t *lc, const drk_tile_op_t *op, unsigned bytes);
LLVMValueRef nv_smem_elem_addr(nv_lc_t *lc, LLVMValueRef base, const drk_tile_type_t *st,
                               LLVMValueRef *coords);

/* lower_math.c: elementwise arithmetic, comparisons, casts, math functions */
LLVMValueRef nv_ew_binary(nv_lc_t *lc, const drk_tile_op_t *op, drk_dtype_t t, LLVMValueRef a,
                          LLVMValueRef b);
LLVMValueRef nv_ew_unary(nv_lc_t *lc, const drk_tile_op_t *op, drk_dtype_t t, LLVMValueRef a);
LLVMValueRef nv_cmp(nv_lc_t *lc, const drk_tile_op_t *op, drk_dtype_t t, const char *pred,
                    LLVMValueRef a, LLVMValueRef b);
LLVMValueRef nv_cast(nv_lc_t *lc, const drk_tile_op_t *op, drk_dtype_t from, drk_dtype_t to,
                     LLVMValueRef v, bool rz);
LLVMValueRef nv_const(nv_lc_t *lc, drk_dtype_t t, const drk_tile_attr_t *a);
/* Combiner of reductions: sum/max/min on the register type of t. */
LLVMValueRef nv_combine(nv_lc_t *lc, const char *comb, drk_dtype_t t, LLVMValueRef a, LLVMValueRef b);
/* Links libdevice into mod when it declares __nv_* functions; false + error if needed and
 * missing. */
bool nv_link_libdevice(LLVMModuleRef mod, drk_diag_t *d);
/* Any-type full-warp shuffle (xor). */
LLVMValueRef nv_shfl_xor(nv_lc_t *lc, LLVMValueRef v, unsigned mask);

/* lower_mem.c: reduce, convert_layout/reshape, shared memory, dot */
bool nv_lower_reduce(nv_lc_t *lc, const drk_tile_op_t *op);
bool nv_lower_relayout(nv_lc_t *lc, const drk_tile_op_t *op);
bool nv_lower_local_load(nv_lc_t *lc, const drk_tile_op_t *op);
bool nv_lower_local_store(nv_lc_t *lc, const drk_tile_op_t *op);
bool nv_lower_cp_async(nv_lc_t *lc, const drk_tile_op_t *op);
bool nv_lower_dot(nv_lc_t *lc, const drk_tile_op_t *op);
/* Vector width for an access of element size esize along the fastest register dim f of D
 * with pointer axis info pa (NULL: 1) and mask axis info ma (NULL: no mask). */
int nv_vec_width(const nv_dist_t *D, int f, int esize, const nv_axis_t *pa, const nv_axis_t *ma);
int nv_fastest_dim(const drk_tile_type_t *t);

/* lower_hopper.c: TMA, bulk groups, mbarriers, fences, setmaxnreg, wgmma_fence/commit/wait
 * (nv_lower_hopper) and dot kind=wgmma (nv_lower_wgmma); sm_90a only. */
bool nv_lower_hopper(nv_lc_t *lc, const drk_tile_op_t *op);
bool nv_lower_wgmma(nv_lc_t *lc, const drk_tile_op_t *op);

#endif
