/* Fusion: partitions the live nodes of a graph into kernel groups (see docs/fusion.md).
 *
 * Requires a graph after drk_pass_pipeline_canonicalize. Guarantees: every live node is in
 * exactly one group; a group of more than one node is FLAT (elementwise ops and alias
 * views over one element count, or also data movement with static index maps: Transpose,
 * Slice, Concat, Expand, Split, constant Pad, storing values of one element count: one flat
 * kernel), ROWS (reductions and normalizations over
 * the innermost elements of one row frame, rows x R, with elementwise prologue and epilogue:
 * one row kernel) or ATTENTION (one flash-attention kernel). Every group can run as one
 * launch at the position of its last node: each node outside a group that consumes a value of the group comes after
 * that position (looking through alias views), so running groups in the order of their last
 * node respects every dependency. The graph is not changed: the interpreter and the other
 * passes still see one node per op.
 *
 * Knobs (schedules are pass parameters, DESIGN.md): level 0 = no fusion; 1 = elementwise
 * chains with broadcasts; 2 (default) = also row reductions with prologue and epilogue
 * (softmax, LayerNorm/RMSNorm from primitives, LayerNormalization, Instance/GroupNormalization,
 * Reduce* over the innermost dims); 3 = 2 plus attention (ATTENTION groups: Q.K^T, scale,
 * masks, Softmax over the last axis, .V, with the views around them, matched first; one
 * flash kernel, lower/lower_attention.c). Matmul prologue fusion is not done yet.
 * Level 2 also fuses matmul/conv epilogues (MM groups: the anchor and elementwise nodes
 * downstream of it over its element count; formed after attention, before rows), and pairs a
 * MatMul anchor with a sibling MatMul whose result only its epilogue reads (drk_fusion_group_t
 * pair).
 * max_depth: the most nodes one group holds.
 *
 * Ownership: everything in a drk_fusion_t lives in its arena; drk_fusion_destroy frees it.
 * Strings in it (reasons) are static or in the arena; node positions index g->nodes. */
#ifndef DRK_FUSE_H
#define DRK_FUSE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ir/graph.h"

#define DRK_FUSION_DEFAULT_LEVEL 2
#define DRK_FUSION_DEFAULT_DEPTH 50

typedef enum drk_fusion_kind {
  DRK_FUSION_SINGLE, /* one node, lowered by its op family's lowering */
  DRK_FUSION_FLAT,   /* elementwise DAG (+ alias views, + data movement), storing values of
                      * one element count: one flat kernel */
  DRK_FUSION_ROWS,   /* row reductions + elementwise prologue/epilogue: one row kernel */
  DRK_FUSION_ATTENTION, /* Q.K^T, scale, masks, Softmax, .V (+ the views around): one flash kernel */
  DRK_FUSION_MM,        /* MatMul/Gemm/Conv (the anchor) + elementwise consumers over its element
                         * count (bias, activation, residual, scaling, casts): one matmul kernel
                         * whose store runs the epilogue (lower/lower_epilogue.c) */
} drk_fusion_kind_t;

/* ---- attention groups (level 3; lower/fuse_attention.c matches, lower_attention.c lowers) ----
 *
 * Operands are read (and the result written) in place through the views the exporter put
 * around the attention (split heads, K's transpose, GQA's repeat of K/V heads, the merge of
 * heads): a view maps element (b..., row, col) of a logical tensor to an element offset into
 * a buffer: offset + the sum over logical dims d of parts ((idx_d / div) % mod) * stride.
 * Every part has div * mod dividing the dim's size; parts of stride 0 are dropped (broadcast
 * dims have none). Slices of constants (a causal mask cut from a max-length buffer) are
 * views too. */
#define DRK_FUSION_MAX_RANK 8
#define DRK_FUSION_MAX_PARTS 4
#define DRK_ATTN_MAX_KEPT 8

typedef struct drk_fusion_part {
  int64_t div, mod, stride;
} drk_fusion_part_t;

typedef struct drk_fusion_view {
  const drk_value_t *value; /* the buffer; NULL: the immediate `imm` (every element) */
  double imm;
  int64_t offset;
  int rank;
  int64_t dims[DRK_FUSION_MAX_RANK];
  int n_parts[DRK_FUSION_MAX_RANK];
  drk_fusion_part_t parts[DRK_FUSION_MAX_RANK][DRK_FUSION_MAX_PARTS];
} drk_fusion_view_t;

/* One elementwise step between the scores MatMul and the Softmax, applied to the scores s in
 * f32: MUL/DIV/ADD/SUB: s op x (x op s when scores_right); WHERE: cond ? s : x (cond ? x : s
 * when scores_right); CAST: round s to `dtype` (a float type). Operands are views over the
 * scores' logical shape [batch..., Sq, Sk]. */
typedef enum {
  DRK_ATTN_MUL, DRK_ATTN_DIV, DRK_ATTN_ADD, DRK_ATTN_SUB, DRK_ATTN_WHERE, DRK_ATTN_CAST
} drk_attn_step_kind_t;

typedef struct drk_attn_step {
  drk_attn_step_kind_t kind;
  bool scores_right;
  drk_fusion_view_t x, cond; /* cond: WHERE only */
  drk_dtype_t dtype;         /* CAST */
} drk_attn_step_t;

typedef struct drk_fusion_attention {
  int nb;                       /* batch dims (the scores' leading dims) */
  int64_t batch[DRK_FUSION_MAX_RANK];
  int64_t Sq, Sk, D, Dv;
  drk_dtype_t dtype;            /* Q, K, V and P (f16, bf16 or f32) */
  /* logical shapes: q [batch..., Sq, D], k [batch..., Sk, D] (K, not K^T), v [batch..., Sk, Dv],
   * out [batch..., Sq, Dv] (written; its value is the group's one result) */
  drk_fusion_view_t q, k, v, out;
  int n_steps;
  drk_attn_step_t *steps;
  /* key blocks past the diagonal can be skipped: step causal_step is a constant mask that
   * keeps exactly the keys j <= i + causal_offset (offset >= 0, so every row keeps a key) and
   * gives the others a value <= -1e4 (their exp is 0 next to any kept score); -1: none */
  int causal_step;
  int64_t causal_offset;
  /* P = Where(IsNaN(Softmax(S)), 0, Softmax(S)) (torch's dynamo exporter, for rows whose keys
   * are all masked): the kernel stores 0 for a row whose running sum l is not > 0 (0: every
   * score -inf; NaN: a NaN or +inf score), the rows where Softmax gives NaN */
  bool zero_nan_rows;
  int scores, softmax, pv;      /* node positions */
  /* Splits whose outputs the group reads (as buffers) but which stay kernels because a used
   * output of theirs is not read through the group's views: positions, and why (the reason
   * of their boundaries). A Split all of whose used outputs are read so is a member. */
  int n_kept;
  int kept[DRK_ATTN_MAX_KEPT];
  const char *kept_why[DRK_ATTN_MAX_KEPT];
} drk_fusion_attention_t;

typedef struct drk_fusion_group {
  drk_fusion_kind_t kind;
  int anchor;     /* position of the first reduction/normalization (ROWS), the Softmax
                   * (ATTENTION), else -1 */
  int n_nodes;
  int *nodes;     /* positions in g->nodes, ascending */
  int last;       /* position of the last node: where the group's launch goes */
  int64_t n;      /* FLAT: elements of every value it stores (with data movement, values
                   * inside may have other counts); ROWS: rows; ATTENTION: query rows (all batches) */
  int64_t R;      /* ROWS: reduced elements per row (innermost); ATTENTION: keys; else 0 */
  const drk_fusion_attention_t *attn; /* ATTENTION: the matched pattern; else NULL */
  int pair;       /* MM: position of a member MatMul paired with the anchor (same A, a constant
                   * B of the anchor B's shape, its result read only by the group: SwiGLU's
                   * up projection next to the gate's), else -1. Lowered as one matmul over
                   * both weights when the target's kernel can (lower_matmul.c, "paired"),
                   * else as a kernel of its own before the group's */
} drk_fusion_group_t;

/* A value that crosses from one group to another, and why the two were not fused. */
typedef struct drk_fusion_boundary {
  int producer, consumer; /* node positions */
  const drk_value_t *value;
  const char *reason;
} drk_fusion_boundary_t;

typedef struct drk_fusion {
  drk_arena_t *arena;
  int level, max_depth;
  size_t n_nodes;             /* g->n_nodes when computed */
  int *group;                 /* per node position: its group index, -1 for dead nodes */
  int n_groups;
  drk_fusion_group_t *groups; /* ascending `last` (launch order) */
  size_t n_boundaries;
  drk_fusion_boundary_t *boundaries;
} drk_fusion_t;

/* Partitions g. level is clamped to 0..3, max_depth to >= 1. Never fails: a node fusion
 * cannot handle (unsupported op, symbolic shape...) gets a group of its own and the lowering
 * reports it as before. */
void drk_fusion_compute(const drk_graph_t *g, int level, int max_depth, drk_fusion_t *out);
void drk_fusion_destroy(drk_fusion_t *f);

/* The fusion drk_lower_graph makes for options o (NULL: defaults): o->fusion_level and
 * o->max_group_depth when o->fusion_set, else the defaults. The default level is
 * DRK_FUSION_DEFAULT_LEVEL once the memory planner knows fused launch times (plan_memory.h
 * defines DRK_PLAN_MEMORY_TIMED), 0 before. Memory planning of a lowering must use the
 * node times of this same fusion. */
struct drk_lower_options;
void drk_fusion_for_lowering(const drk_graph_t *g, const struct drk_lower_options *o, drk_fusion_t *out);

/* Prints the groups (kind, anchor, members) and every boundary with its reason, as `#`
 * comment lines (for --dump-after=fuse). */
void drk_fusion_print(const drk_graph_t *g, const drk_fusion_t *f, FILE *out);

/* out_times[k] (g->n_nodes entries): when node k runs once fused, in node positions: the
 * `last` of its group (-1 for dead nodes). Memory planning must use these instead of the
 * node positions: a fused kernel reads its inputs and writes its outputs at that time. */
void drk_fusion_node_times(const drk_fusion_t *f, int64_t *out_times);

/* ---- internal to the fuse pass and the lowering ---- */
/* Use lists fuse.c computes: per value id its consumer positions (ascending, one entry per
 * consumer node) and whether it is a graph output; per node id its position. */
typedef struct drk_fusion_uses {
  const drk_graph_t *g;
  int **users;
  int *n_users;
  bool *is_out;
  int *pos_of_node;
} drk_fusion_uses_t;

/* fuse_attention.c: whether the MatMul at position k is the P.V of an attention
 * (docs/fusion.md). NULL: *out describes it and members[0..*n_members) (room for g->n_nodes)
 * are its nodes' positions (unsorted); "" when k is no attention at all; else why the pattern
 * does not fuse. Allocations (steps, reasons) come from arena a. */
const char *drk_fusion_match_attention(const drk_fusion_uses_t *u, drk_arena_t *a, int k,
                                       drk_fusion_attention_t *out, int *members, int *n_members);

/* fuse_attention.c: the reason of the boundary from the node at position producer into
 * attention at: why it stays a kernel when it is one of at's kept Splits, else dflt. */
const char *drk_fusion_attention_input_why(const drk_fusion_attention_t *at, int producer, const char *dflt);


#endif
