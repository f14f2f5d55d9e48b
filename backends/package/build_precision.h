/* The PRECISION section of a module (backends/package/module.h, docs/module-format.md) from
 * a lowered graph: for every launch, the precision its kernel computes in, read from the
 * kernel's tile IR (dot operands and accumulators, reductions, other float arithmetic, the
 * element types of its global buffers) with the fusion group it runs; for every live node
 * of the optimized graph, the dtype the precision pass chose (drk_precision_node_dtype, what
 * `drkc --report` counts) and the kernels that run it.
 *
 * Requires l = drk_lower_graph(g, ...) for this g: the groups are l->fusion, the partition
 * the kernels were lowered from. Fails only when out of memory. Strings in the result (node names, op names) are borrowed
 * from g and static tables, so g must outlive it. */
#ifndef DRK_BUILD_PRECISION_H
#define DRK_BUILD_PRECISION_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/package/module.h"
#include "ir/graph.h"
#include "lower/lower.h"

typedef struct drk_build_precision {
  drk_modfile_kernel_prec_t *kernels; /* l->n_launches entries, in launch order */
  drk_modfile_node_prec_t *nodes;     /* live nodes of g, in graph order */
  uint32_t n_kernels, n_nodes;
} drk_build_precision_t;

/* Fills *out (malloc'ed arrays; release with drk_build_precision_free); false (and *out
 * empty) when out of memory. */
bool drk_build_precision(const drk_graph_t *g, const drk_lowered_t *l, drk_build_precision_t *out);
/* Points mf's PRECISION fields at p (mf->kernels must be p's kernels, in the same order). */
void drk_build_precision_attach(const drk_build_precision_t *p, drk_modfile_t *mf);
void drk_build_precision_free(drk_build_precision_t *p);

#endif
