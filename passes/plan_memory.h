/* Memory planning: every tensor a compiled model touches lives in one device arena.
 *
 * Requires: a graph with static shapes (the GPU path binds symbolic dims first) and the
 * aliases the lowering decided (values that share another value's bytes: Reshape, Squeeze,
 * Identity, ...). Guarantees: every graph input, constant, node result and graph output gets
 * an arena range; constants are packed into one weights region at the start of the arena
 * (256-byte aligned, the module file's rule); activations are placed after it, each 256-byte
 * aligned, and two activations share bytes only when their lifetimes (first definition to
 * last use, in node order) do not overlap, or when one is a declared in-place output taking
 * the bytes of an input that dies in its kernel (drk_plan_memory_inplace). Graph inputs and outputs are never shared, so a
 * caller can read outputs after a run and write inputs before the next. */
#ifndef DRK_PLAN_MEMORY_H
#define DRK_PLAN_MEMORY_H

#include "ir/graph.h"

typedef struct drk_value_alias {
  const drk_value_t *value, *base; /* value occupies base's bytes */
} drk_value_alias_t;

typedef struct drk_mem_plan {
  uint32_t n_ids;     /* arrays below are indexed by drk_value_t.id */
  uint64_t *offset;   /* arena offset; UINT64_MAX: value not placed (not used) */
  uint64_t *size;     /* bytes */
  uint64_t arena_size;
  uint64_t weights_size; /* weights region is [0, weights_size) */
  uint64_t naive_size;   /* sum of all activation sizes without reuse, for reports */
  uint32_t n_scratch;
  uint64_t *scratch_offset; /* per scratch request (drk_plan_memory_scratch), else NULL */
} drk_mem_plan_t;

/* Scratch memory one kernel launch (a node, at node time `time`) needs while it runs and
 * nobody reads afterwards: live at exactly that time. */
typedef struct drk_mem_scratch {
  uint64_t bytes;
  int64_t time;
} drk_mem_scratch_t;

/* Plans g. Reports a non-static shape at the value's location. Free with drk_mem_plan_free. */
bool drk_plan_memory(const drk_graph_t *g, const drk_value_alias_t *aliases, size_t n_aliases,
                     drk_mem_plan_t *out_plan, drk_diag_t *d);
void drk_mem_plan_free(drk_mem_plan_t *p);
/* drk_plan_memory for a lowering that fused nodes into kernels (lower/fuse.h): node k runs
 * at node_time[k] (drk_fusion_node_times; the nodes of one fused kernel share a time, never
 * earlier than any producer's), and lifetimes are intervals of those times, so a fused
 * kernel's inputs stay intact and its outputs get bytes of their own while it runs.
 * node_time NULL: positions (drk_plan_memory). */
#define DRK_PLAN_MEMORY_TIMED 1
bool drk_plan_memory_timed(const drk_graph_t *g, const drk_value_alias_t *aliases, size_t n_aliases,
                           const int64_t *node_time, drk_mem_plan_t *out_plan, drk_diag_t *d);
/* drk_plan_memory_timed plus n_scratch scratch ranges: scratch i is placed (256-byte aligned)
 * in the activation area, live from time[i] to time[i] only, so it shares bytes with
 * activations dead before that time and with other scratch of other times, never with
 * anything live at that time (the node's inputs and outputs included);
 * out_plan->scratch_offset[i] gets its offset. */
bool drk_plan_memory_scratch(const drk_graph_t *g, const drk_value_alias_t *aliases, size_t n_aliases,
                             const int64_t *node_time, const drk_mem_scratch_t *scratch, size_t n_scratch,
                             drk_mem_plan_t *out_plan, drk_diag_t *d);
/* drk_plan_memory_scratch plus in-place candidates the lowering declared (drk_lowered_t
 * .inplace): inplace[i].value is a kernel's output that may take the bytes of its input
 * inplace[i].base, because every thread of that kernel reads element j of the input and
 * writes element j of the output at the same flat offset, the read first. The output takes
 * the input's range when the input's base value is an activation (no graph input, output or
 * constant) whose last use is the output's node time, the range is large enough, no other
 * value of that base is read at that time, and the output is no graph output; the input's
 * lifetime ends and the output's begins there. Other candidates are placed as usual. */
bool drk_plan_memory_inplace(const drk_graph_t *g, const drk_value_alias_t *aliases, size_t n_aliases,
                             const int64_t *node_time, const drk_mem_scratch_t *scratch, size_t n_scratch,
                             const drk_value_alias_t *inplace, size_t n_inplace, drk_mem_plan_t *out_plan,
                             drk_diag_t *d);
/* drk_plan_memory_inplace placing only what the kernels touch: referenced (per value id) marks
 * the values some kernel reads or writes; node results that are not (the values inside a fused
 * kernel: attention scores, a paired MatMul's result, an epilogue's temporaries) and are no
 * graph input or output get no range (offset UINT64_MAX, size 0), nor do their aliases. The
 * naive sum still counts them (what one kernel per node would need). */
bool drk_plan_memory_kernels(const drk_graph_t *g, const drk_value_alias_t *aliases, size_t n_aliases,
                             const int64_t *node_time, const drk_mem_scratch_t *scratch, size_t n_scratch,
                             const drk_value_alias_t *inplace, size_t n_inplace, const bool *referenced,
                             drk_mem_plan_t *out_plan, drk_diag_t *d);

#endif
