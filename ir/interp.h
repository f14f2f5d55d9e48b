/* The CPU reference interpreter: runs graph IR for every op and dtype in scope, accumulating
 * in f64 for reductions and matmuls. It is the oracle for every pass and every GPU result.
 *
 * Shapes are taken from the actual input tensors (symbolic dims need no binding). */
#ifndef DRK_INTERP_H
#define DRK_INTERP_H

#include "tensor.h"

/* Runs g. inputs: one per graph input, in order. out_outputs: one per graph output, filled
 * with tensors the caller frees with drk_tensor_free(). On error (an input of the wrong
 * dtype or rank, an unsupported op/dtype combination, an out-of-range index) reports through
 * d naming the node's location and returns false; nothing is written to out_outputs then. */
bool drk_interp_run(const drk_graph_t *g, const drk_tensor_t *inputs, drk_tensor_t *out_outputs,
                    drk_diag_t *d);

/* Evaluates one node on concrete inputs (NULL for omitted optional inputs); used by constant
 * folding. out_outputs: n->n_outputs tensors, caller frees. */
bool drk_interp_node(const drk_node_t *n, const drk_tensor_t *const *inputs, drk_tensor_t *out_outputs,
                     drk_diag_t *d);

/* Threads for the heavy ops (GEMM, Conv, batched MatMul, normalizations, reductions):
 * n >= 1, or 0 for the default: $DRK_INTERP_THREADS when set, else every CPU this process may
 * run on. Results are bit-identical for every thread count. */
void drk_interp_set_threads(int n);
int drk_interp_threads(void);

/* `drkc run --check`: out against the reference ref (interp_check.c). rel: ‖out − ref‖ / ‖ref‖
 * (drk_tensor_rel_error); abs_max: max |out − ref| over the finite reference elements
 * (infinite if one of those outputs is NaN); ref_max: max |ref| over them. ref_zero: every
 * reference element finite and below DRK_CHECK_TINY_REF in magnitude, where the relative
 * error means nothing: pass then judges abs_max <= tol, else rel <= tol. NaN never passes. */
#define DRK_CHECK_TINY_REF 1e-9
typedef struct drk_check {
  double rel, abs_max, ref_max;
  bool ref_zero, pass;
} drk_check_t;
void drk_interp_check(const drk_tensor_t *out, const drk_tensor_t *ref, double tol, drk_check_t *r);
/* The line --check prints for output i (no newline). */
void drk_interp_check_line(const drk_check_t *r, size_t i, const char *name, double tol, char *buf, size_t n);

#endif
