/* Graph IR -> tile IR lowering: one kernel per fusion group (passes/fuse.h), plus a launch plan (see
 * docs/lowering.md).
 *
 * Requires a graph after drk_pass_pipeline_canonicalize (dtypes and shapes inferred, shape
 * chains folded) whose shapes are all static: bind symbolic dims first with
 * drk_graph_bind_dims(). Guarantees, when drk_lower_graph() returns true: every kernel of
 * out->module passes drk_tile_verify(); out->launches lists, in the graph's topological
 * order, one or more launches per lowered node, each naming the kernel, its launch shape
 * and its arguments (graph values for buffers, immediates for scalars) in the kernel's
 * parameter order; out->aliases lists values that share another value's bytes (no kernel);
 * out->inplace the outputs that may take a dying input's bytes (memory planning).
 *
 * Errors (user-visible, reported at the node through d, never a crash): a symbolic dim
 * ("GPU lowering needs static shapes; ..."), an op/dtype combination not lowered yet
 * ("... not lowered for GPU yet"), attributes out of the supported range.
 *
 * Ownership: everything in *out (launch and alias arrays, argument arrays) lives in
 * out->module's arena and is released by drk_lowered_destroy(); graph values in launches
 * and aliases are borrowed from the graph, which must outlive *out. */
#ifndef DRK_LOWER_TO_TILE_H
#define DRK_LOWER_TO_TILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ir/graph.h"
#include "ir/tile.h"
#include "passes/plan_memory.h"

/* DRK_LARG_TMA: a TMA descriptor (CUtensorMap, passed as a 128-byte __grid_constant__
 * parameter) over buffer `value`; `i` indexes the launch's `tmas` array (its spec).
 * DRK_LARG_SCRATCH: a pointer to scratch memory (no graph value; `value` NULL): `i` indexes
 * drk_lowered_t.scratch. Passed like a buffer (an arena offset). */
typedef enum { DRK_LARG_BUFFER, DRK_LARG_I32, DRK_LARG_I64, DRK_LARG_F32, DRK_LARG_TMA, DRK_LARG_SCRATCH } drk_larg_kind_t;

/* What cuTensorMapEncodeTiled needs besides the address: the tensor seen by a tma_load or
 * tma_store, starting at the buffer's first element. Dims and the box run innermost first
 * (the box matches the kernel's tmadesc<...> type read in its shared layout's order). */
typedef struct drk_larg_tma {
  drk_dtype_t dtype;
  int rank;            /* 1..5 */
  int64_t dims[5];     /* elements */
  int64_t strides[4];  /* bytes between consecutive indices of dims 1..rank-1 (multiples of 16) */
  int32_t box[5];      /* elements, each <= 256 */
  int swizzle;         /* bytes: 0, 32, 64 or 128 (the shared layout's swizzle) */
  int l2_promotion;    /* bytes: 0, 64, 128 or 256 */
  bool oob_nan;        /* out-of-bounds elements read as NaN (else zero) */
} drk_larg_tma_t;

typedef struct drk_larg {
  drk_larg_kind_t kind;
  const drk_value_t *value; /* BUFFER: graph value (input, const, or node result) */
  int64_t i;                /* I32, I64 */
  double f;                 /* F32 */
} drk_larg_t;

/* The schedule knobs the default heuristic (passes/schedule.c) chose for one kernel. Kernels
 * of the tile IR carry no free-form attributes, so these live here and are printed as a
 * comment above the kernel by drk_lowered_print(). 0: not applicable. */
typedef struct drk_schedule {
  const char *kind;     /* "flat", "rows", "seq", "mm", "pool" */
  int block_elems;      /* flat: elements per program */
  int spt;              /* elements per thread (fastest dim) */
  int warps;
  int rows, cols;       /* rows: rows per program, columns per chunk */
  int tile_m, tile_n, tile_k, stages;
  const char *mma;      /* "mma_sync", "wgmma", "fma", or NULL */
  bool tf32;
  int split_k;          /* mm, mm_ws: programs splitting K (grid z = batch * split_k), 0/1: none */
  int persistent;       /* mm_ws: programs of a persistent form (at most one per SM), 0: a tile per program */
  bool coop;            /* mm_ws persistent: both consumer warpgroups on every tile (else ping-pong) */
  bool staged;          /* mm_ws, a tile per program without split-K: the epilogue reads the tile back from shared memory, 16 bytes per thread and row */
  int cluster;          /* mm_ws: programs per cluster along M sharing B's k tiles (TMA multicast), 0/1: none */
  bool pair;            /* mm_ws: the tile's N columns are tile_n / 2 of the anchor's weight and as many of its paired MatMul's */
} drk_schedule_t;

typedef struct drk_launch {
  const drk_node_t *node;
  drk_tile_kernel_t *kernel;
  uint32_t grid[3];
  uint32_t block;      /* threads per program */
  uint32_t smem_bytes; /* dynamic shared memory */
  int n_args;
  drk_larg_t *args; /* in kernel parameter order */
  drk_schedule_t sched;
  int n_tmas;
  drk_larg_tma_t *tmas; /* specs of the DRK_LARG_TMA arguments */
} drk_launch_t;

/* value shares base's bytes (Reshape, Squeeze, Unsqueeze, Flatten, Identity, Dropout in
 * inference). base may itself be an alias; resolve transitively. */
typedef drk_value_alias_t drk_alias_t; /* the planner's alias pair: value uses base's bytes */

/* Scratch memory a node's kernels share while the node runs (e.g. split-K partial sums):
 * not a graph value; the memory planner gives it arena bytes live at exactly `time` (the
 * node's time), so it reuses bytes of activations dead by then, and its contents do not
 * survive the node. */
typedef struct drk_scratch {
  uint64_t bytes;
  size_t node;  /* index in the graph's nodes of the node (a fused group's anchor) */
  int64_t time; /* node_time[node] */
} drk_scratch_t;

typedef struct drk_lowered {
  drk_tile_module_t *module;
  size_t n_launches;
  drk_launch_t *launches;
  size_t n_aliases;
  drk_alias_t *aliases;
  /* In-place candidates: {value: a kernel's output, base: its input} where every thread of
   * the kernel reads input element j and then writes output element j at the same flat
   * offset, and reads that input nowhere else (flat elementwise kernels, identity-offset
   * inputs of the output's element count and element size). The memory planner may give the
   * output the input's bytes when the input dies there (drk_plan_memory_inplace). */
  size_t n_inplace;
  drk_alias_t *inplace;
  /* node_time[k] (g->n_nodes entries): when node k runs, in node positions: a fused group's
   * nodes all run at its last node, where its kernel reads every input and writes every
   * output (-1: dead). Memory planning uses these (drk_plan_memory_timed). */
  int64_t *node_time;
  size_t n_scratch;
  drk_scratch_t *scratch; /* indexed by DRK_LARG_SCRATCH arguments' i */
  /* The partition the kernels were lowered from (passes/fuse.h; owned, freed by
   * drk_lowered_destroy): group of every node, kinds, anchors, members. */
  struct drk_fusion *fusion;
} drk_lowered_t;

/* Schedule parameters a user or the search may pin, for every kernel of a kind; 0 = the
 * default heuristic. Text form (--schedule=): comma list of KEY=VALUE with keys
 *   mm.tile_n     64 | 128 | 256   N tile of the sm_90a TMA + wgmma matmul kernel
 *   mm.split_k    1..16            split-K of matmul kernels (1: none)
 *   mm.stages     2..8             ring stages of the sm_90a matmul kernel
 *   mm.persistent 0 | 1 | 2        sm_90a matmul: a tile per program (0), persistent
 *                                  ping-pong (1) or persistent cooperative (2); stored as
 *                                  value + 1
 *   mm.cluster    1 | 2            sm_90a matmul: programs per cluster along M sharing B by
 *                                  TMA multicast (1: none)
 *   mm.staged     0 | 1            sm_90a matmul: epilogue from the accumulator registers (0)
 *                                  or staged through shared memory (1); stored as value + 1
 *   mm.pair       0 | 1            sm_90a matmul: a fused group's paired MatMul (fuse.h) in
 *                                  the anchor's kernel (1) or in a kernel of its own (0);
 *                                  stored as value + 1
 *   attn.block_m  64 | 128         query rows per flash-attention program (16-bit inputs)
 *   flat.move_block 1024..8192     elements per program of flat groups with data movement
 *   rows.spt      1 | 2 | 4 | 8    consecutive elements per thread of row kernels over
 *                                  contiguous rows (default 4) */
typedef struct drk_sched_knobs {
  int mm_tile_n, mm_split_k, mm_stages, mm_persistent, mm_cluster, mm_staged, mm_pair, attn_block_m, flat_move_block, rows_spt;
} drk_sched_knobs_t;

/* Parses the --schedule text into *k (fields not named keep their value); false with a
 * message naming the bad item in err (size n). */
bool drk_sched_knobs_parse(const char *text, drk_sched_knobs_t *k, char *err, size_t n);

typedef struct drk_lower_options {
  int target_sm;   /* 80..90; 0 means 80 */
  bool allow_tf32; /* --matmul-precision=high: f32 MatMul/Gemm/Conv through tf32 mma.sync */
  bool arch_specific; /* the kernels only run on exactly target_sm (sm_90a): wgmma, setmaxnreg, TMA */
  /* Fusion (passes/fuse.h, docs/fusion.md). fusion_set false: the defaults, level
   * DRK_FUSION_DEFAULT_LEVEL (2; 0 while plan_memory.h lacks drk_plan_memory_timed) and
   * depth DRK_FUSION_DEFAULT_DEPTH (50). Otherwise
   * fusion_level 0..3 (--fusion-aggressiveness; 0: one kernel per node) and max_group_depth
   * (--max-graph-depth; < 1 means the default). Memory planning must then use the node
   * times of the same fusion (drk_fusion_node_times). */
  bool fusion_set;
  int fusion_level;
  int max_group_depth;
  /* Schedule knobs (`--schedule=`, drk_sched_knobs_parse): 0 leaves the heuristic's choice
   * (passes/schedule.c). The search sets these; users may pin them. */
  drk_sched_knobs_t knobs;
} drk_lower_options_t;

/* Lowers every live node of g. On failure reports at least one error (each node that cannot
 * be lowered gets its own; lowering goes on past errors to list them all) and leaves *out
 * untouched. o may be NULL (defaults). */
bool drk_lower_graph(const drk_graph_t *g, const drk_lower_options_t *o, drk_lowered_t *out, drk_diag_t *d);
void drk_lowered_destroy(drk_lowered_t *l);

/* The memory plan of g as lowered into l: the lowering's aliases, node times (a fused kernel
 * reads all its inputs and writes all its outputs at its group's time), scratch buffers (live
 * at their node's time only) and in-place candidates; only the values some kernel takes as a
 * buffer or TMA argument get bytes (drk_plan_memory_kernels), and graph inputs and outputs. */
bool drk_lowered_plan_memory(const drk_graph_t *g, const drk_lowered_t *l, drk_mem_plan_t *out_plan, drk_diag_t *d);
/* Per value id: whether a launch of l takes it as a buffer or TMA argument (calloc'ed; NULL
 * when out of memory). */
bool *drk_lowered_referenced(const drk_graph_t *g, const drk_lowered_t *l);

/* Prints the module with each kernel preceded by a comment line giving its node, launch and
 * schedule (the result still parses as .drkt). */
void drk_lowered_print(const drk_lowered_t *l, FILE *out);

/* Whether drk_lower_graph would try to lower node n (op and dtypes supported); when not and
 * why is not NULL, *why gets a static reason. For test summaries. */
bool drk_lower_node_supported(const drk_node_t *n, const char **why);

/* Binds symbolic dims to sizes in place, e.g. "batch=2,seq=64": every dim named so, on graph
 * inputs and on any value, becomes static. Run before drk_pass_pipeline_canonicalize.
 * Unknown names in spec are an error (reported with the list of symbolic dims the graph
 * has); a malformed spec too. */
bool drk_graph_bind_dims(drk_graph_t *g, const char *spec, drk_diag_t *d);

/* ------------------------------------------------------------------------------------------
 * Internal to passes/lower_*.c and passes/schedule.c (not a public contract). */
#ifdef DRK_LOWER_INTERNAL

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
bool drk_lower_einsum_supported(const drk_node_t *n, const char **why);
bool drk_lower_conv_transpose_supported(const drk_node_t *n, const char **why);

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
double lw_const_f64(const drk_value_t *v, int64_t i);
bool lw_const_ints(drk_lctx_t *c, const drk_value_t *v, int64_t *out, int max, int *out_n);
int lw_norm_axis(int64_t axis, int rank);

/* ---- flat 1-D frame: offs = pid*BLOCK + range, mask offs < n ---- */
typedef struct lw_flat {
  int64_t n;
  drk_schedule_t s;
  tv_t *offs, *mask;
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
drk_schedule_t drk_sched_rows(int64_t rows, int64_t R, bool contiguous, const drk_sched_knobs_t *kn);
drk_schedule_t drk_sched_seq(int64_t rows);
drk_schedule_t drk_sched_mm(int64_t M, int64_t N, int64_t K, int64_t batch, drk_dtype_t t, const drk_lower_options_t *o);
/* The sm_90a warp-specialized TMA + wgmma matmul (passes/lower_matmul.c): mma = "wgmma",
 * kind "mm_ws", or mma = NULL when the target or dtype does not allow it. batch: the
 * kernel's grid z before splitting; epilogue: the kernel evaluates a fused epilogue. */
drk_schedule_t drk_sched_mm_ws(int64_t M, int64_t N, int64_t K, int64_t batch, drk_dtype_t t,
                               const drk_lower_options_t *o, bool epilogue);
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

#endif /* DRK_LOWER_INTERNAL */

#endif
