/* Precision chosen against an accuracy budget: --precision=auto --accuracy-budget=E
 * (docs/precision.md, "auto with a budget").
 *
 * drk_precision_auto_choose() cuts the graph into op groups (a MatMul/Gemm/Conv, a
 * normalization, a reduction or Softmax with the elementwise and data-movement nodes that
 * follow it; a chain that starts elsewhere is a group of its own), gives every group the
 * fastest precision it may take (fp8 for a MatMul/Gemm/Conv with a constant weight when every
 * target has fp8, then fp16, bf16, tf32 for a MatMul/Gemm/Conv, fp32) and then, while the
 * measured error is over the budget, moves the group whose own error is highest to its next
 * precision (skipping one that does not lower that group's own error). The error is measured
 * by running what will run: a copy of the graph rewritten by drk_pass_apply_precision with the
 * choices (node_choice) through the reference interpreter, which rounds each op's result to its
 * dtype and, for tf32, the operands (ir/interp.c), on the calibration inputs; per output it is
 * ‖out − ref‖ / ‖ref‖ against the reference outputs (the model as given), or the absolute
 * error where the reference is ~0 everywhere (drk_interp_check). A choice is kept only when
 * every output is within the budget; fp32 everywhere is the graph itself (error 0), so the
 * search always ends with every output within the budget.
 *
 * Requires: the graph canonical (dtypes and shapes inferred, static), as the precision pass
 * does; inputs: one tensor per graph input; ref: one per graph output (the interpreter on the
 * model as given, on those inputs). Guarantees on success: out->node_choice is the
 * drk_precision_options_t.node_choice to apply to g itself, and out->outputs the errors that
 * choice measured. g is not modified (the trials run on drk_graph_clone copies). */
#ifndef DRK_PRECISION_AUTO_H
#define DRK_PRECISION_AUTO_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ir/graph.h"
#include "ir/tensor.h"
#include "passes/precision.h"

/* The most precisions a group may take (fp8, fp16, bf16, tf32, fp32). */
#define DRK_PRECISION_AUTO_LEVELS 5

typedef struct drk_precision_group {
  uint32_t anchor;     /* node id of the group's first node (the MatMul, norm, ...) */
  const char *name;    /* the anchor's ONNX node name, else its first result's name (borrowed from g) */
  const char *op;      /* the anchor's op name (static) */
  int n_nodes;
  int n_levels;
  drk_precision_t levels[DRK_PRECISION_AUTO_LEVELS]; /* what it may take, fastest first */
  int level;           /* the chosen one */
  double alone;        /* the largest output error with only this group at its choice, the rest
                        * fp32 (its sensitivity; 0 at fp32) */
} drk_precision_group_t;

typedef struct drk_precision_output {
  const char *name;    /* the graph output's name (borrowed from g) */
  double error;        /* relative L2 error, or absolute where the reference is ~0 */
  bool absolute;
} drk_precision_output_t;

typedef struct drk_precision_auto {
  double budget;
  bool fp8;                 /* fp8 offered: every target has fp8 (target_has_fp8) */
  const char *no_fp8;       /* !fp8: the target without it (messages), else NULL */
  size_t n_groups;
  drk_precision_group_t *groups;
  size_t n_outputs;
  drk_precision_output_t *outputs;
  uint8_t *node_choice;     /* per node id, for drk_precision_options_t.node_choice */
  uint32_t n_node_choice;
  int evaluations;          /* interpreter runs the search took */
} drk_precision_auto_t;

/* "1e-2", "0.001": a finite number > 0 and < 1 into *out; false (out untouched) otherwise. */
bool drk_precision_budget_parse(const char *s, double *out);

/* The search above. base: the targets (target_has_fp8, target_name, target_sm); its
 * precision and node_choice are not read. Fills *out (release with drk_precision_auto_free,
 * also after a failure). Errors (the interpreter refusing the graph, out of memory) are
 * reported through d. */
bool drk_precision_auto_choose(const drk_graph_t *g, const drk_precision_options_t *base, double budget,
                               const drk_tensor_t *inputs, const drk_tensor_t *ref, drk_precision_auto_t *out,
                               drk_diag_t *d);
void drk_precision_auto_free(drk_precision_auto_t *a);

/* The choice as --report prints it: one line per op group (name, op, nodes, precision, its
 * own error), one per output (error vs budget), and whether fp8 was offered:
 *   precision auto: budget 1e-02, 7 op groups, 23 interpreter runs; fp8 offered (every target has it)
 *     group %fc1 (MatMul, 3 nodes)                fp16     alone 2.1e-04
 *     output 'y': rel error 3.4e-04 <= 1e-02 */
void drk_precision_auto_print(const drk_precision_auto_t *a, FILE *out);

#endif
