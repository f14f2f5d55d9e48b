/* Graph passes (see docs/passes.md). Each pass rewrites a drk_graph_t in place, reports
 * user-caused problems through a drk_diag_t at the offending node's location, and returns
 * false when it reported an error (the graph is then still structurally valid but may be
 * only partly rewritten). The pipeline is a plain list of calls. */
#ifndef DRK_PASSES_H
#define DRK_PASSES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <stdio.h>

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

/* Gemm (static 2-D operands, float) as MatMul -> Mul(alpha) -> Add(beta * C), constant
 * transposed operands stored transposed: passes/gemm_to_matmul.c. Leaves the Gemm nodes
 * dead. *out_n_rewritten: how many. False only when out of memory. */
bool drk_pass_gemm_to_matmul(drk_graph_t *g, size_t *out_n_rewritten);

/* MatMul by a constant [K, N] weight with N % 8 != 0 (K % 8 == 0, N >= 64): the weight padded
 * with zero columns to a multiple of 8 once, the result a Slice of the wider product (the
 * sm_90a TMA + wgmma kernel's alignment): passes/pad_matmul_n.c. False only when out of
 * memory. */
bool drk_pass_pad_matmul_n(drk_graph_t *g, size_t *out_n_rewritten);

/* Sibling MatMuls of one activation x by constant [K, N_i] matrices (with or without a
 * constant bias Add each) as one MatMul by the side-by-side matrix, each former result a
 * Slice of its columns: passes/merge_matmul.c (which ones: the file's header). Only members
 * whose results reach views or MatMuls merge, so no matmul epilogue is lost. Leaves the
 * replaced nodes dead (run drk_pass_eliminate_dead, then drk_pass_infer_shapes).
 * *out_n_groups / *out_n_merged (may be NULL): merged MatMuls made / MatMuls they replace.
 * Fails only when out of memory. */
bool drk_pass_merge_matmul(drk_graph_t *g, size_t *out_n_groups, size_t *out_n_merged);

/* Activation layout of 2-D convolutions (drk option `layout`, drkc --layout=). */
typedef enum drk_layout {
  DRK_LAYOUT_AUTO, /* NHWC for convs computing in f16/bf16/f8 when every target is NVIDIA */
  DRK_LAYOUT_NCHW, /* the model's layout: the layout pass does nothing */
  DRK_LAYOUT_NHWC  /* NHWC for every 2-D float conv with a constant weight */
} drk_layout_t;

typedef struct drk_layout_options {
  drk_layout_t layout;
  bool nvidia_only; /* every target is NVIDIA (auto keeps NCHW otherwise) */
  /* > 1: each chosen 16-bit conv of one group whose C is not a multiple of this gets its
   * channels zero-padded to one (the weight here, the channels-last input by a constant Pad):
   * the sm_90a TMA convolution needs C % 8 == 0 (the pipeline sets 8 there); 0: never */
  int pad_channels;
  FILE *explain;    /* not NULL: one `// layout:` line per 2-D Conv (the layout it computes in
                       and why) and per layout change placed (which consumer needs it) */
} drk_layout_options_t;

typedef struct drk_layout_stats {
  size_t convs;      /* Convs rewritten to ConvNHWC */
  size_t pools;      /* MaxPool/AveragePool rewritten to their NHWC forms */
  size_t transposes; /* Transpose nodes the pass left in the graph (layout changes, each a kernel) */
  size_t padded;     /* ConvNHWCs whose channels were padded (pad_channels) */
} drk_layout_stats_t;

/* "auto|nchw|nhwc"; false (out untouched) for anything else. */
bool drk_layout_parse(const char *s, drk_layout_t *out);
const char *drk_layout_name(drk_layout_t l);

/* Channels-last convolutions with the layout changes placed once: passes/layout_nhwc.c
 * (Conv -> ConvNHWC with constant weights re-laid, the Transposes sunk through elementwise
 * ops, reshapes, pointwise-conv MatMuls, reductions and pools, cancelled where they meet,
 * materialized once where a consumer needs the NCHW value). Run after the precision policy.
 * Leaves replaced nodes dead (run drk_pass_eliminate_dead, then drk_pass_infer_shapes).
 * *out_stats (may be NULL): what it did. Never fails. */
bool drk_pass_layout_nhwc(drk_graph_t *g, const drk_layout_options_t *o, drk_layout_stats_t *out_stats);

/* infer -> fold -> infer -> dce, repeated until folding finds nothing (bounded). Returns
 * false on the first pass that reports an error. */
bool drk_pass_pipeline_canonicalize(drk_graph_t *g, drk_diag_t *d);

#endif
