/* Graph IR -> tile IR lowering: one kernel per fusion group (lower/fuse.h), plus a launch plan (see
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
#ifndef DRK_LOWER_LOWER_H
#define DRK_LOWER_LOWER_H

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

/* The schedule knobs the default heuristic (lower/schedule.c) chose for one kernel. Kernels
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
  /* The partition the kernels were lowered from (lower/fuse.h; owned, freed by
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
  /* Fusion (lower/fuse.h, docs/fusion.md). fusion_set false: the defaults, level
   * DRK_FUSION_DEFAULT_LEVEL (2; 0 while plan_memory.h lacks drk_plan_memory_timed) and
   * depth DRK_FUSION_DEFAULT_DEPTH (50). Otherwise
   * fusion_level 0..3 (--fusion-aggressiveness; 0: one kernel per node) and max_group_depth
   * (--max-graph-depth; < 1 means the default). Memory planning must then use the node
   * times of the same fusion (drk_fusion_node_times). */
  bool fusion_set;
  int fusion_level;
  int max_group_depth;
  /* Schedule knobs (`--schedule=`, drk_sched_knobs_parse): 0 leaves the heuristic's choice
   * (lower/schedule.c). The search sets these; users may pin them. */
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


#endif
