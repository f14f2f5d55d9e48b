/* The lowering layer's private contract: the context every lower_*.c file builds kernels
 * through, the per-family entry points, the building blocks (lw_*), the schedule heuristic
 * (schedule.c) and what fusion (fuse.c) asks of the lowering. Included only by the files of lower/;
 * the public contract is lower/lower.h. */
#ifndef DRK_LOWER_INTERNAL_H
#define DRK_LOWER_INTERNAL_H

#include "lower/fuse.h"
#include "lower/lower.h"

#define LW_MAX_RANK 8

typedef drk_tile_value_t tv_t;

typedef struct drk_lctx {
  const drk_graph_t *g;
  drk_lower_options_t o;
  drk_diag_t *d;
  drk_tile_module_t *m;
  const drk_node_t *node;
  size_t node_index;
  int n_kernels_node; /* kernels made for this node so far (name suffixes) */
  /* the kernel being built */
  drk_tile_kernel_t *k;
  drk_tile_builder_t b;
  drk_launch_t cur;
  size_t cap_args;
  drk_dtype_t it;                  /* index dtype of the kernel: i32 or i64 */
  const drk_tile_layout_t *lay;    /* current frame layout (for lw_* helpers on tiles) */
  /* results */
  size_t n_launches, cap_launches;
  drk_launch_t *launches;
  size_t n_aliases, cap_aliases;
  drk_alias_t *aliases;
  size_t n_inplace, cap_inplace;
  drk_alias_t *inplace;
  size_t n_scratch, cap_scratch;
  drk_scratch_t *scratch;
  /* a matmul/conv with a fused epilogue (DRK_FUSION_MM group epi_group of epi), else NULL;
   * epi_param: per value id, the kernel's buffer parameters the epilogue made */
  const struct drk_fusion *epi;
  int epi_group;
  tv_t **epi_param;
  /* the group's paired MatMul (fuse.h drk_fusion_group_t pair) when the anchor's kernel
   * computes it too, else NULL; epi_pair_res: its result tile at the store being lowered */
  const drk_node_t *epi_pair;
  tv_t *epi_pair_res;
} drk_lctx_t;

/* per-family entry points: return false after reporting an error */
bool drk_lower_ew(drk_lctx_t *c);
bool drk_lower_reduce(drk_lctx_t *c);
bool drk_lower_matmul(drk_lctx_t *c);
bool drk_lower_move(drk_lctx_t *c);
bool drk_lower_pool(drk_lctx_t *c);
/* A DRK_FUSION_MM group: its anchor lowered by drk_lower_matmul with the epilogue
 * (lower_epilogue.c). */
bool drk_lower_mm_group(drk_lctx_t *c, const struct drk_fusion *f, int gi);
/* Whether the kernel of c->node (a MatMul anchor, with c->epi set) can also compute its
 * group's pair (fuse.c: the same A, a 2-D constant B of the anchor B's shape and dtype, so the
 * anchor's problem decides): the sm_90a kernel over both weights (lower_matmul.c). */
bool drk_lower_matmul_pairs(drk_lctx_t *c);
/* Where a matmul/conv kernel stores its result tile res (accumulator layout) at flat output
 * offsets yoff: a plain masked store, or the fused epilogue of c->epi. */
void lw_mm_store(drk_lctx_t *c, tv_t *py, tv_t *yoff, tv_t *res, tv_t *mask);
/* The buffer parameter for a matmul/conv's result y; NULL when a fused epilogue consumes it
 * entirely (nothing outside the group reads it). */
tv_t *lw_mm_out_param(drk_lctx_t *c, const drk_value_t *y);
bool drk_lower_ew_supported(const drk_node_t *n, const char **why);
bool drk_lower_reduce_supported(const drk_node_t *n, const char **why);
bool drk_lower_matmul_supported(const drk_node_t *n, const char **why);
bool drk_lower_move_supported(const drk_node_t *n, const char **why);
bool drk_lower_pool_supported(const drk_node_t *n, const char **why);
/* GatherND, ScatterND, OneHot, Resize (lower_gather.c; dispatched from lower_move.c) */
bool drk_lower_gather(drk_lctx_t *c);
bool drk_lower_gather_supported(const drk_node_t *n, const char **why);
/* ops outside the flag families of ir/graph_ops.def, dispatched by op: TopK (lower_topk.c),
 * Einsum (lower_einsum.c), ConvTranspose (lower_conv_transpose.c) */
bool drk_lower_topk(drk_lctx_t *c);
bool drk_lower_einsum(drk_lctx_t *c);
bool drk_lower_conv_transpose(drk_lctx_t *c);
bool drk_lower_topk_supported(const drk_node_t *n, const char **why);
/* MatMulNBits, W4A16 (lower_w4.c) */
bool drk_lower_w4(drk_lctx_t *c);
bool drk_lower_w4_supported(const drk_node_t *n, const char **why);
bool drk_lower_einsum_supported(const drk_node_t *n, const char **why);
bool drk_lower_conv_transpose_supported(const drk_node_t *n, const char **why);
/* Depthwise and small-group convolutions (lower_dwconv.c): whether c->node (a Conv or
 * ConvNHWC that drk_lower_matmul was asked to lower) takes the direct kernel (knob
 * dw.direct), and that kernel (with c->epi's fused epilogue, as drk_lower_matmul's). */
bool drk_lower_dwconv_wanted(drk_lctx_t *c);
bool drk_lower_dwconv(drk_lctx_t *c);

/* ---- errors ---- */
bool lw_err(drk_lctx_t *c, const char *fmt, ...) DRK_PRINTF(2, 3); /* always false */
bool lw_unsupported_dtype(drk_lctx_t *c, drk_dtype_t t);          /* always false */

/* ---- kernels ---- */
/* Starts a kernel for the current node (name k<idx>_<Op>[_n]); it: index dtype. */
void lw_kernel_begin(drk_lctx_t *c, drk_dtype_t it);
/* The index dtype of a kernel whose offsets stay below big: i32 with 4096 elements of slack
 * (a padded last block), else i64; lw_index_dtype: big = the node's largest input or result. */
drk_dtype_t lw_index_dtype_for(int64_t big);
drk_dtype_t lw_index_dtype(const drk_node_t *n);
/* A pointer parameter for graph value v (buffer argument). */
tv_t *lw_param_buf(drk_lctx_t *c, const drk_value_t *v, const char *name);
/* A new scratch buffer of `bytes` for the current node (see drk_scratch_t); returns its
 * index for lw_param_scratch. Any kernel of the node may bind it, several kernels the same. */
int lw_scratch_new(drk_lctx_t *c, uint64_t bytes);
/* A pointer parameter (element dtype t) bound to scratch buffer idx. */
tv_t *lw_param_scratch(drk_lctx_t *c, int idx, drk_dtype_t t, const char *name);
/* Appends return and records the launch with grid g0 x g1 x g2, warps*32 threads, smem. */
/* Runtime sizes (drk_lower_options_t.runtime_sizes): size n as a parameter `name` of the index
 * dtype (the launch passes n), else NULL. lw_size_lt: v < the parameter p (NULL: v < n).
 * lw_grid_from: after lw_kernel_end, grid dim d is cdiv(p, per) (p NULL: nothing). */
tv_t *lw_size_param(drk_lctx_t *c, const char *name, int64_t n);
tv_t *lw_size_lt(drk_lctx_t *c, tv_t *v, tv_t *p, int64_t n);
void lw_grid_from(drk_lctx_t *c, int d, tv_t *p, int64_t per);
void lw_kernel_end(drk_lctx_t *c, int64_t g0, int64_t g1, int64_t g2, int warps, int64_t smem,
                   const drk_schedule_t *s);
void lw_alias(drk_lctx_t *c, const drk_value_t *v, const drk_value_t *base);
/* Declares output y an in-place candidate for input x (drk_lowered_t.inplace): call only when
 * every read of x in the kernel is at the flat offset where the same thread then writes y. */
void lw_inplace(drk_lctx_t *c, const drk_value_t *y, const drk_value_t *x);

/* ---- types and building blocks (results take operand a's frame) ---- */
/* v with its op marked {approx = 1} (exp2, tanh, div: docs/tile-ir.md) */
tv_t *lw_approx(drk_lctx_t *c, tv_t *v);
/* acc + x * s (x NULL or s 0: acc; acc NULL: x * s), for index arithmetic */
tv_t *lw_addmul(drk_lctx_t *c, tv_t *acc, tv_t *x, int64_t s);
/* a AND b, either may be NULL (no mask) */
tv_t *lw_and_mask(drk_lctx_t *c, tv_t *a, tv_t *b);
drk_tile_type_t lw_tt(const drk_tile_layout_t *l, int rank, const int64_t *dims, drk_dtype_t t);
drk_tile_type_t lw_retype(const drk_tile_type_t *like, drk_dtype_t t);
tv_t *lw_bin(drk_lctx_t *c, drk_tile_opcode_t code, tv_t *a, tv_t *b);
tv_t *lw_un(drk_lctx_t *c, drk_tile_opcode_t code, tv_t *a);
tv_t *lw_cmp(drk_lctx_t *c, const char *pred, tv_t *a, tv_t *b);
tv_t *lw_sel(drk_lctx_t *c, tv_t *cond, tv_t *a, tv_t *b);
tv_t *lw_fma(drk_lctx_t *c, tv_t *a, tv_t *b, tv_t *acc); /* a * b + acc, one rounding (floats) */
tv_t *lw_cast(drk_lctx_t *c, tv_t *a, drk_dtype_t t); /* no-op when same dtype */
tv_t *lw_ci(drk_lctx_t *c, const tv_t *like, int64_t v);   /* constant of like's type */
tv_t *lw_cf(drk_lctx_t *c, const tv_t *like, double v);    /* float (or int-valued) constant */
tv_t *lw_cdt(drk_lctx_t *c, const tv_t *like, drk_dtype_t t, double v); /* like's frame, dtype t */
tv_t *lw_sci(drk_lctx_t *c, drk_dtype_t t, int64_t v);    /* scalar constant */
tv_t *lw_splat(drk_lctx_t *c, tv_t *s, const drk_tile_type_t *frame); /* scalar -> tile of frame */
tv_t *lw_range(drk_lctx_t *c, int64_t n, const drk_tile_layout_t *l);  /* make_range 0..n (i32) */
tv_t *lw_pid(drk_lctx_t *c, int axis);                                 /* program_id, it */
/* idx (it, any frame) unravelled row-major over dims, sum of coord*strides (coalesces
 * contiguous dims, skips size-1 and stride-0 dims); base added. NULL dims: returns base. */
tv_t *lw_affine(drk_lctx_t *c, tv_t *idx, int n, const int64_t *dims, const int64_t *strides, int64_t base);
/* coordinate k of idx unravelled over dims (row-major). */
tv_t *lw_coord(drk_lctx_t *c, tv_t *idx, int n, const int64_t *dims, int k);
/* load/store through pointer param p at element offsets off (it) with mask (NULL: none) */
tv_t *lw_load(drk_lctx_t *c, tv_t *p, tv_t *off, tv_t *mask, double other);
void lw_store(drk_lctx_t *c, tv_t *p, tv_t *off, tv_t *val, tv_t *mask);
/* 2-D frame helpers: expand a row vector (slice dim 1) or column vector (slice dim 0) of
 * parent P to [R, C] */
tv_t *lw_bcast_row(drk_lctx_t *c, tv_t *v, const drk_tile_layout_t *P, int64_t R, int64_t C);
tv_t *lw_bcast_col(drk_lctx_t *c, tv_t *v, const drk_tile_layout_t *P, int64_t R, int64_t C);

/* ---- static-shape helpers ---- */
int64_t lw_numel(const drk_value_t *v);
void lw_strides(const drk_value_t *v, int64_t *out); /* row-major element strides */
/* strides of v broadcast (right-aligned) to out rank r with 0 for broadcast dims */
void lw_bstrides(const drk_value_t *v, int r, const int64_t *out_dims, int64_t *out);
int64_t lw_pow2ceil(int64_t v);
bool lw_dtype_ok(drk_dtype_t t);        /* a dtype kernels can load/store */
drk_dtype_t lw_compute_dtype(drk_dtype_t t); /* f16/bf16 -> f32, others unchanged */
/* value of constant v at element i as double (v->kind == CONST) */
bool lw_const_ints(drk_lctx_t *c, const drk_value_t *v, int64_t *out, int max, int *out_n);

/* ---- flat 1-D frame: offs = pid*BLOCK + range, mask offs < n ---- */
typedef struct lw_flat {
  int64_t n;
  drk_schedule_t s;
  tv_t *offs, *mask;
  tv_t *n_param; /* runtime_sizes: the element count parameter, else NULL */
  drk_tile_type_t fr; /* the tile frame (it dtype) */
} lw_flat_t;
void lw_flat_begin(drk_lctx_t *c, int64_t n, lw_flat_t *f);
/* lw_flat_begin with schedule s (a flat schedule: drk_sched_flat or one like it) */
void lw_flat_begin_sched(drk_lctx_t *c, int64_t n, drk_schedule_t s, lw_flat_t *f);
void lw_flat_end(drk_lctx_t *c, lw_flat_t *f);

/* Constant parameters of a data-movement node over an input of rank r and dims xd: Transpose
 * perm, Slice starts (clamped as ONNX does) and steps, Pad pads at the beginning of every
 * axis, constant value and mode; other ops: identity values (steps 1). Read with located
 * errors (lower_move.c; shared by the flat groups of lower_fused.c). */
typedef struct lw_move_params {
  int64_t perm[LW_MAX_RANK];                     /* Transpose: out dim k is input dim perm[k] */
  int64_t start[LW_MAX_RANK], step[LW_MAX_RANK]; /* Slice (and Split in a flat group) */
  int64_t pb[LW_MAX_RANK];                       /* Pad: pads at the beginning */
  double padv;                                   /* Pad: constant value */
  const char *mode;                              /* Pad: constant, edge or reflect; else NULL */
} lw_move_params_t;
bool lw_read_move_params(drk_lctx_t *c, const drk_node_t *n, int r, const int64_t *xd, lw_move_params_t *p);

/* ---- schedule (schedule.c) ---- */
drk_schedule_t drk_sched_flat(int64_t n);
drk_schedule_t drk_sched_flat_block(int block); /* a pinned block (>= 1024, power of two) */
/* rows x R reduction: contiguous: the reduced index is memory-contiguous */
drk_schedule_t drk_sched_rows(int64_t rows, int64_t R, bool contiguous, int sms, const drk_sched_knobs_t *kn);
/* programs splitting each of `programs` row tiles of `chunks` chunks (knob rows.split) */
int drk_sched_rows_split(int64_t programs, int64_t chunks, int sms, const drk_sched_knobs_t *kn);
/* strided rows with col_warps > 1: 16 bytes of consecutive rows per thread (esize: bytes per element) */
void drk_sched_rows_vec(drk_schedule_t *s, int esize);
/* contiguous rows: a whole row of 2K..64 KB per program (one chunk, kept in registers) when the
 * rows fill the SMs or the kernel cannot split (!may_split), 16-byte accesses (esize: bytes per element; ept_max: elements per thread
 * the kernel may keep); sets s->whole when one chunk covers a row */
void drk_sched_rows_whole(drk_schedule_t *s, int64_t rows, int64_t R, int esize, int sms, int ept_max, bool may_split,
                          const drk_sched_knobs_t *kn);
/* split rows for s (col_warps > 1): sets s->split_rows (and s->cols), returns chunks per program */
int64_t drk_sched_rows_split_plan(drk_schedule_t *s, int64_t rows, int64_t R, bool contiguous, int sms,
                                  const drk_sched_knobs_t *kn);
drk_schedule_t drk_sched_seq(int64_t rows);
drk_schedule_t drk_sched_mm(int64_t M, int64_t N, int64_t K, int64_t batch, drk_dtype_t t, const drk_lower_options_t *o);
/* The sm_90a warp-specialized TMA + wgmma matmul (lower/lower_matmul.c): mma = "wgmma",
 * kind "mm_ws", or mma = NULL when the target or dtype does not allow it. batch: the
 * kernel's grid z before splitting; epilogue: the kernel evaluates a fused epilogue. */
drk_schedule_t drk_sched_mm_ws(int64_t M, int64_t N, int64_t K, int64_t batch, drk_dtype_t t,
                               const drk_lower_options_t *o, bool epilogue);
/* The sm_90a implicit-GEMM convolution (NHWC, lower_matmul.c's mm_hopper in conv form): the
 * mm_ws schedule of the [Nb*OH*OW, OC] x K problem with kind "conv_ws" (its BN, stages and
 * split-K), no persistent form or cluster, and the M tile's shape images x conv_h x conv_w
 * (128 output pixels of a window of the output); mma = NULL when the target or dtype does
 * not allow it. st: the spatial strides (TMA boxes span conv_h*st[0] rows and conv_w*st[1]
 * columns, <= 256). epi: the fused epilogue, DRK_CONV_EPI_*. */
enum { DRK_CONV_EPI_NONE, DRK_CONV_EPI_LIGHT /* bias, ReLU, Clip, Add, Mul, Cast */, DRK_CONV_EPI_OTHER };
drk_schedule_t drk_sched_conv_ws(int64_t Nb, int64_t OH, int64_t OW, int64_t OC, int64_t K, const int64_t *st,
                                 drk_dtype_t t, const drk_lower_options_t *o, int epi);
/* The multiprocessors of the lowering's target (o->target_sm): 132 (sm_90, H100/H200), 16
 * (sm_87, Orin), 108 otherwise (A100; modules with gfx942 are lowered for sm_80). */
int lw_target_sms(const drk_lower_options_t *o);
/* Split-K count for `programs` output tiles (batch included) of nk k tiles on `sms` SMs
 * (1: no split); see schedule.c. */
int drk_sched_split_k(int64_t programs, int64_t nk, int sms);
/* the 2-D blocked layout of a rows schedule */
const drk_tile_layout_t *drk_sched_rows_layout(drk_tile_module_t *m, const drk_schedule_t *s, bool contiguous);
const drk_tile_layout_t *drk_sched_flat_layout(drk_tile_module_t *m, const drk_schedule_t *s);

/* ---- fusion (lower_ew.c, lower_fused.c) ---- */
/* The dtype node n's math runs in, and whether its operands go in uncast (*out_raw: casts,
 * quantization). */
drk_dtype_t drk_lower_ew_compute_dtype(const drk_node_t *n, bool *out_raw);
/* The math of elementwise node n on operand tiles x[0..nx) of one frame (absent optional
 * operands NULL), each already cast to ct unless raw (Where's condition stays bool). */
tv_t *drk_lower_ew_math(drk_lctx_t *c, const drk_node_t *n, tv_t **x, int nx, drk_dtype_t ct);
tv_t *drk_lower_ew_node(drk_lctx_t *c, const drk_node_t *n, tv_t *(*operand)(void *ctx, int i), void *ctx);
/* One kernel for group gi of fusion f (a FLAT or ROWS group; fuse.h). */
struct drk_fusion;
bool drk_lower_fused(drk_lctx_t *c, const struct drk_fusion *f, int gi);


/* lower_attention.c: the flash kernel of ATTENTION group gi (drk_lower_fused dispatches) */
bool drk_lower_attention(drk_lctx_t *c, const drk_fusion_t *f, int gi);

#endif
