/* Whether padding dynamic dims is exact (drkc --dynamic, docs/dynamic-shapes.md).
 *
 * A module compiled for a shape bucket runs an actual shape by zero-padding its inputs up to
 * the bucket's sizes and slicing the outputs back. That is exact when no op mixes values
 * along a padded axis: every element of the result at an index inside the actual shape then
 * depends only on input elements inside it. drk_pass_check_padding proves it on the graph
 * with the dynamic dims still symbolic (after drk_pass_pipeline_canonicalize, every other
 * symbolic dim bound), or reports each node where it cannot, naming the node, the dim and
 * why: "not implemented: exact padding of seq through %Softmax_0_out = Softmax (Softmax over
 * it)". What it accepts:
 *   - elementwise ops (any broadcasting), Transpose, Squeeze, Unsqueeze, Expand, Identity;
 *   - Reshape/Flatten that keep every dynamic axis as an axis of its own, with the same
 *     static element counts between them (so element (.., i, ..) keeps its place);
 *   - MatMul/Gemm not contracting over a padded axis; Softmax, LogSoftmax, norms, reductions,
 *     ArgMax, CumSum, TopK not over one; Concat/Split along other axes;
 *   - Slice of other axes, or of a static axis from 0 with step 1 up to a dynamic size (a
 *     causal mask cut to [:seq, :seq]); Gather along a static axis with indices that are a
 *     graph input (its padding is zeros, a valid index) or a cast/view of one;
 *   - Conv, pools, group/instance/batch norms, Resize, Trilu... when only axis 0 is padded;
 *   - Shape/Size of a padded value only where the size shapes something (a Reshape or Expand
 *     shape, ConstantOfShape, a Slice end, a Range limit), never as data.
 * Every graph output's padded axes must each be one dynamic dim (to slice it back).
 * Requires: shapes inferred; dims named in dyn are the only symbolic ones (others are
 * treated as products of dynamic dims: conservative). Guarantees: nothing is changed. */
#ifndef DRK_PASSES_PAD_EXACT_H
#define DRK_PASSES_PAD_EXACT_H

#include <stdbool.h>

#include "ir/graph.h"

#define DRK_PAD_MAX_DIMS 8

/* True when padding every dim named in dyn[0..n) is exact for g; otherwise reports every
 * node in the way (errors through d) and returns false. */
bool drk_pass_check_padding(const drk_graph_t *g, const char *const *dyn, int n, drk_diag_t *d);

/* The same, on a graph drk_pass_pad_mask masked: lens[i] is dim i's length input (or NULL).
 * It also accepts a Softmax over a padded axis whose input is masked with that dim's keep
 * mask, and a MatMul contracting over a padded axis where one operand is exactly zero there
 * (the masked Softmax's probabilities, through Cast, Transpose, Where(c, 0, p), products), and
 * a sum (ReduceSum, ReduceSumSquare, ReduceL2) over a padded axis whose operand is exactly zero
 * there: an input (the runtime zero-fills its padded positions) through Unsqueeze, Expand, Cast
 * and products (sentence-transformers' sum(x * mask) / sum(mask)), or Where(keep, x, 0) (the
 * masked mean), and a max (min) over a padded axis of Where(keep, x, -inf) (+inf). Products
 * assume the other factor is finite at the padded positions. */
bool drk_pass_check_padding_masked(const drk_graph_t *g, const char *const *dyn, int n, drk_value_t *const *lens,
                                   drk_diag_t *d);

/* Masks the padded positions where a Softmax or LogSoftmax normalizes over a dynamic dim
 * (attention over padded keys): each becomes Softmax(Where(Range(0, size, 1) < len, x, -inf))
 * along that axis, len a new graph input (int64 scalar, named drk_len_<dim>, appended to the
 * inputs; lens[i] for dim i, NULL where no op needed one) that the runtime fills with the
 * actual size. The padded positions then get probability exactly 0, so P x V over them adds
 * nothing. A ReduceMean over one axis of a dynamic dim (mean pooling of tokens) becomes
 * ReduceSum(Where(keep, x, 0)) / Cast(len), a ReduceMax (ReduceMin) ReduceMax(Where(keep, x,
 * -inf)) (+inf). Requires: a canonical graph with the dynamic dims
 * symbolic; leaves it canonical. */
bool drk_pass_pad_mask(drk_graph_t *g, const char *const *dyn, int n, drk_value_t **lens, drk_diag_t *d);

#endif
