/* Fusion: partitions the live nodes of a graph into kernel groups (see docs/fusion.md).
 *
 * Requires a graph after drk_pass_pipeline_canonicalize. Guarantees: every live node is in
 * exactly one group; a group of more than one node is either FLAT (elementwise ops and
 * alias views over one element count: one flat kernel) or ROWS (reductions and
 * normalizations over the innermost elements of one row frame, rows x R, with elementwise
 * prologue and epilogue: one row kernel). Every group can run as one launch at the position
 * of its last node: each node outside a group that consumes a value of the group comes after
 * that position (looking through alias views), so running groups in the order of their last
 * node respects every dependency. The graph is not changed: the interpreter and the other
 * passes still see one node per op.
 *
 * Knobs (schedules are pass parameters, DESIGN.md): level 0 = no fusion; 1 = elementwise
 * chains with broadcasts; 2 (default) = also row reductions with prologue and epilogue
 * (softmax, LayerNorm/RMSNorm from primitives, LayerNormalization, Instance/GroupNormalization,
 * Reduce* over the innermost dims); 3 = 2 plus attention and matmul prologue fusion, which
 * need matmul hooks that passes/lower_matmul.c does not have yet (3 groups like 2).
 * max_depth: the most nodes one group holds. Matmul/conv epilogues are not fused at any level
 * (lower_matmul.c has no epilogue hook yet).
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
  DRK_FUSION_FLAT,   /* elementwise DAG (+ alias views), one element count: one flat kernel */
  DRK_FUSION_ROWS,   /* row reductions + elementwise prologue/epilogue: one row kernel */
} drk_fusion_kind_t;

typedef struct drk_fusion_group {
  drk_fusion_kind_t kind;
  int anchor;     /* position of the first reduction/normalization (ROWS), else -1 */
  int n_nodes;
  int *nodes;     /* positions in g->nodes, ascending */
  int last;       /* position of the last node: where the group's launch goes */
  int64_t n;      /* FLAT: elements of every value; ROWS: rows */
  int64_t R;      /* ROWS: reduced elements per row (innermost); else 0 */
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

#endif
