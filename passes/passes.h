/* Graph passes (see docs/passes.md). Each pass rewrites a drk_graph_t in place, reports
 * user-caused problems through a drk_diag_t at the offending node's location, and returns
 * false when it reported an error (the graph is then still structurally valid but may be
 * only partly rewritten). The pipeline is a plain list of calls. */
#ifndef DRK_PASSES_H
#define DRK_PASSES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/graph.h"

/* Symbols that shape inference makes up for dimensions it cannot name start with this
 * prefix ("_u<value id>_<dim index>"); they are unique per value and dimension, so two
 * equal fresh symbols do denote the same extent. */
#define DRK_FRESH_SYM_PREFIX "_u"

/* Largest constant (in elements) that folding materializes from a non-Shape node. */
#define DRK_FOLD_MAX_ELEMS ((int64_t)64 * 1024)

/* Shape and dtype inference. Sets dtype and shape (rank and dims, static or symbolic) of
 * every node result from its inputs, attributes and constant inputs; also follows the
 * contents of small integer shape tensors (Shape -> Gather -> Concat ...) so a Reshape fed
 * by such a chain gets named dims. An existing dtype/shape on a result (ONNX value_info,
 * or an earlier run) is checked against the inferred one (conflict: error) and refined.
 * Dims that cannot be known get a fresh symbol (DRK_FRESH_SYM_PREFIX); unknown-rank inputs
 * give unknown-rank results, never an error. Idempotent. */
bool drk_pass_infer_shapes(drk_graph_t *g, drk_diag_t *d);

/* Constant folding. Replaces by constants (named like the value they replace):
 * - results of nodes whose inputs are all constants and whose results have at most
 *   max_elems elements each (evaluated with drk_interp_node);
 * - Shape/Size of statically-shaped values, and Gather/Slice of a Shape result that pick
 *   only static dims;
 * and rewrites the shape input of Reshape/Expand (and ConstantOfShape/Tile) into a
 * constant when inferred shapes allow it (Reshape: 0 copies a dim, one -1 infers one), which
 * turns exporter shape chains into dead code.
 * Requires shapes inferred (drk_pass_infer_shapes). Folded nodes get node->dead = true;
 * drk_pass_eliminate_dead() then removes them. A node the interpreter cannot evaluate is
 * left alone (not an error). *out_n_folded (may be NULL): rewrites made. */
bool drk_pass_fold_constants_limit(drk_graph_t *g, int64_t max_elems, size_t *out_n_folded,
                                   drk_diag_t *d);
/* drk_pass_fold_constants_limit with DRK_FOLD_MAX_ELEMS. */
bool drk_pass_fold_constants(drk_graph_t *g, drk_diag_t *d);

/* Dead-code elimination: removes from g->nodes the nodes marked dead and those none of
 * whose results reach a graph output, and drops constants no live node or output uses.
 * Graph inputs are kept. Keeps the topological order. Returns true if it removed anything. */
bool drk_pass_eliminate_dead(drk_graph_t *g);

/* Folds inference BatchNormalization into the Conv before it (constant weights, the Conv
 * result used only by the BN): passes/fold_batchnorm.c. *out_n_folded (may be NULL): BNs
 * folded. Never fails. */
bool drk_pass_fold_batchnorm(drk_graph_t *g, size_t *out_n_folded);

/* Pointwise Conv (1x1 kernels, unit strides, no pads, one group, constant weights) as
 * Reshape -> MatMul -> Add(bias) -> Reshape: passes/conv_to_matmul.c. Leaves the Conv nodes
 * dead (run drk_pass_eliminate_dead). *out_n_rewritten (may be NULL): Convs rewritten. */
bool drk_pass_conv_to_matmul(drk_graph_t *g, size_t *out_n_rewritten);

/* infer -> fold -> infer -> dce, repeated until folding finds nothing (bounded). Returns
 * false on the first pass that reports an error. */
bool drk_pass_pipeline_canonicalize(drk_graph_t *g, drk_diag_t *d);

#endif
