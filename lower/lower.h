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
  int32_t elem_strides[5]; /* traversal stride per dim (0 or 1: every element): the box
                            * spans box[i] elements and lands ceil(box[i] / elem_strides[i])
                            * of them (a strided convolution's input rows and columns) */
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
  int col_warps;        /* rows: warps along the reduced axis (reductions cross warps through shared memory), 0/1: none */
  int split_rows;       /* rows (plain reductions): programs sharing one row tile's reduction (partials through scratch), 0/1: none */
  bool whole;           /* rows: one chunk covers a (contiguous) row (drk_sched_rows_whole; the kernel keeps it in registers) */
  int tile_m, tile_n, tile_k, stages;
  const char *mma;      /* "mma_sync", "wgmma", "fma", or NULL */
  bool tf32;
  int split_k;          /* mm, mm_ws: programs splitting K (grid z = batch * split_k), 0/1: none */
  int persistent;       /* mm_ws: programs of a persistent form (at most one per SM), 0: a tile per program */
  bool coop;            /* mm_ws persistent: both consumer warpgroups on every tile (else ping-pong) */
  bool staged;          /* mm_ws, a tile per program without split-K: the epilogue reads the tile back from shared memory, 16 bytes per thread and row */
  int cluster;          /* mm_ws: programs per cluster along M sharing B's k tiles (TMA multicast), 0/1: none */
  bool pair;            /* mm_ws: the tile's N columns are tile_n / 2 of the anchor's weight and as many of its paired MatMul's */
  const char *note;     /* why the kernel is not the faster form (a static string; --report prints it), or NULL */
  int conv_h, conv_w;   /* conv_ws: the M tile is images x conv_h x conv_w output pixels (images = tile_m / (conv_h conv_w)) */
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
  uint32_t knob_space; /* bit per drk_knob_id_t: the knobs its node's lowering consulted */
  char workload[33];   /* workload key of its node's computation (drk_lower_workload_key) */
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

/* ---- schedules as data ----
 * A schedule knob is a named parameter of a kernel's lowering that the heuristic chooses
 * unless a schedule pins it. The knobs are defined once, in lower/knobs.def (name, the kernel
 * kinds it applies to, its domain, what the heuristic picks). A drk_sched_knobs_t is a set of
 * pinned values: zero-initialized, nothing is pinned. Text form: comma-separated KEY=VALUE, e.g. "mm.tile_n=128,mm.split_k=2" (--schedule= pins every kernel; a line of a
 * schedules file pins one kernel). */
typedef enum drk_knob_id {
#define DRK_KNOB(ID, name, kinds, lo, hi, pow2, doc) DRK_KNOB_##ID,
#include "lower/knobs.def"
#undef DRK_KNOB
  DRK_KNOB_COUNT
} drk_knob_id_t;

typedef struct drk_knob_def {
  const char *name;  /* "mm.tile_n" */
  const char *kinds; /* drk_schedule_t kinds it applies to, space-separated */
  int lo, hi;
  bool pow2;
  const char *doc;
} drk_knob_def_t;

/* The definition of knob id (lower/knobs.def); NULL when id is out of range. */
const drk_knob_def_t *drk_knob_def(drk_knob_id_t id);
/* The knob named name (length len), or -1. */
int drk_knob_find(const char *name, size_t len);

typedef struct drk_sched_knobs {
  uint32_t set;           /* bit id: knob id is pinned to v[id] */
  int v[DRK_KNOB_COUNT];
  /* when not NULL, every knob the lowering consults (pinned or not) gets its bit set here: a
   * kernel's knob space is what its lowering read (--emit=schedules) */
  uint32_t *used;
} drk_sched_knobs_t;

/* Whether knob id is pinned in k (recording the consultation in k->used); *out gets its value. */
bool drk_knob_pinned(const drk_sched_knobs_t *k, drk_knob_id_t id, int *out);
/* The pinned value of knob id, or dflt when not pinned. */
int drk_knob_or(const drk_sched_knobs_t *k, drk_knob_id_t id, int dflt);
/* Pins knob id to v (no domain check: the caller checked it). */
void drk_knob_set(drk_sched_knobs_t *k, drk_knob_id_t id, int v);
/* over's pinned knobs replace base's. */
void drk_sched_knobs_overlay(drk_sched_knobs_t *base, const drk_sched_knobs_t *over);

/* Parses text (KEY=VALUE items separated by commas) into *k: knobs named are pinned,
 * others keep their state. False with a message naming the bad item in err (size n): an
 * unknown key (the known ones are listed), a value outside the knob's domain. */
bool drk_sched_knobs_parse(const char *text, drk_sched_knobs_t *k, char *err, size_t n);
/* The pinned knobs of k as text ("mm.tile_n=128 mm.split_k=2"; "" when none) into buf. */
void drk_sched_knobs_format(const drk_sched_knobs_t *k, char *buf, size_t n);

/* Per-kernel schedules (--schedules=FILE, the text --emit=schedules prints): one line per
 * kernel, `NAME [wl=KEY] [KIND] KNOB=VALUE ...`, '#' starts a comment. NAME is a kernel name
 * of the model (k<node>_<what>); its knobs apply to the kernels its node lowers to. With wl=
 * the kernel's workload key must match (a schedule made for another computation is an error,
 * not silently applied). Lines may pin any subset of the kernel's knobs; the others keep the
 * heuristic's choice (or --schedule's pins, which a line overrides). */
typedef struct drk_sched_entry {
  const char *name;     /* kernel name */
  size_t node;          /* the node index its name starts with (k<node>_) */
  char wl[40];          /* workload key, "" when not given */
  drk_sched_knobs_t knobs;
  drk_loc_t loc;        /* file and line, for errors */
  bool used;            /* set by drk_lower_graph when the kernel exists */
  bool lenient;         /* knobs the kernel's form does not read are ignored, not an error
                         * (drkc tune's points: conv.hopper=0 leaves the Hopper knobs unread) */
} drk_sched_entry_t;

typedef struct drk_schedules {
  size_t n;
  drk_sched_entry_t *entries; /* malloc'ed, with their strings; drk_schedules_free */
  char *text;                 /* the file's bytes (names point into it) */
} drk_schedules_t;

/* Parses a schedules file's text (path for locations). Errors (located at the line): a
 * malformed line, an unknown knob or an illegal value, a name that is not a kernel name, two
 * lines for one kernel. On failure *out is untouched. */
bool drk_schedules_parse(const char *text, size_t len, const char *path, drk_schedules_t *out, drk_diag_t *d);
void drk_schedules_free(drk_schedules_t *s);

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
  /* Schedule knobs pinned for every kernel (`--schedule=`, drk_sched_knobs_parse); unpinned
   * knobs are the heuristic's (lower/schedule.c). */
  drk_sched_knobs_t knobs;
  /* Per-kernel schedules (`--schedules=FILE`; NULL: none), over knobs; borrowed. Entries whose
   * kernel does not exist, or whose workload key differs, are errors of drk_lower_graph. */
  const drk_schedules_t *schedules;
  /* Tuned schedules (drkc --db): asked for every kernel without a --schedules line, by its
   * workload key and kind-independent knob set; true and *out filled when a tuned record
   * exists (its knobs replace --schedule's). NULL: none. */
  bool (*lookup)(void *ctx, const char *workload, drk_sched_knobs_t *out);
  void *lookup_ctx;
  /* Kernels take the size their grid runs over as a parameter (an i32 or i64 argument of the
   * launch, the grid cdiv(param, per program)) instead of a constant in their masks: flat
   * kernels their element count `%n`, row kernels (norms, softmax, reductions, row groups)
   * their row count `%rows`, matmuls of one problem their M `%m`. Kernels of one form over
   * different sizes are then the same kernel (drkc --dynamic's buckets share them). */
  bool runtime_sizes;
} drk_lower_options_t;

/* Lowers every live node of g. On failure reports at least one error (each node that cannot
 * be lowered gets its own; lowering goes on past errors to list them all) and leaves *out
 * untouched. o may be NULL (defaults). */
bool drk_lower_graph(const drk_graph_t *g, const drk_lower_options_t *o, drk_lowered_t *out, drk_diag_t *d);
/* drk_lower_graph over partition *fusion (drk_fusion_for_lowering of g with the same options:
 * the pipeline's fuse stage), which it takes: *fusion is emptied, and freed with the result
 * (or on failure). */
struct drk_fusion;
bool drk_lower_graph_fused(const drk_graph_t *g, const drk_lower_options_t *o, struct drk_fusion *fusion,
                           drk_lowered_t *out, drk_diag_t *d);
/* Kernels that are the same kernel up to names (drk_tile_kernel_canonical: the layers of a
 * transformer lower to the same LayerNorm, the same attention) become one: every launch of a
 * twin names the first of them, and the others leave l->module, so codegen compiles each
 * once and the image holds it once. *out_removed: how many left. False (nothing changed)
 * when out of memory. */
bool drk_lowered_dedupe(drk_lowered_t *l, size_t *out_removed);
void drk_lowered_destroy(drk_lowered_t *l);

/* The memory plan of g as lowered into l: the lowering's aliases, node times (a fused kernel
 * reads all its inputs and writes all its outputs at its group's time), scratch buffers (live
 * at their node's time only) and in-place candidates; only the values some kernel takes as a
 * buffer or TMA argument get bytes (drk_plan_memory_kernels), and graph inputs and outputs. */
bool drk_lowered_plan_memory(const drk_graph_t *g, const drk_lowered_t *l, drk_mem_plan_t *out_plan, drk_diag_t *d);
/* Per value id: whether a launch of l takes it as a buffer or TMA argument (calloc'ed; NULL
 * when out of memory). */
bool *drk_lowered_referenced(const drk_graph_t *g, const drk_lowered_t *l);

/* The schedules of l's kernels in the text form drk_schedules_parse reads: per kernel its
 * name, workload key, kind and the value of every knob its lowering consulted (the
 * heuristic's pick, or the pinned value), preceded by a comment with each knob's domain. */
void drk_lowered_print_schedules(const drk_lowered_t *l, FILE *out);
/* The value schedule s has for knob id (what the lowering chose); -1 when s has none. */
int drk_schedule_knob_value(const drk_schedule_t *s, drk_knob_id_t id);
/* The workload key of fusion group gi of g lowered with options o: a hash (32 hex digits) of
 * the computation, independent of the schedule: the members' ops, attributes, the dtypes and
 * shapes of their values, how they connect, small constants' values, the lowering's target
 * (target_sm, arch_specific, allow_tf32). Equal keys: the same kernel problem. */
void drk_lower_workload_key(const drk_graph_t *g, const struct drk_fusion *f, int gi, const drk_lower_options_t *o,
                            char out[33]);

/* Prints the module with each kernel preceded by a comment line giving its node, launch and
 * schedule (the result still parses as .drkt). */
void drk_lowered_print(const drk_lowered_t *l, FILE *out);

/* Whether drk_lower_graph would try to lower node n (op and dtypes supported); when not and
 * why is not NULL, *why gets a static reason. For test summaries. */
bool drk_lower_node_supported(const drk_node_t *n, const char **why);


#endif
