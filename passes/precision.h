/* Precision policy as a graph pass (see docs/precision.md).
 *
 * drk_pass_apply_precision() rewrites the f32 part of a graph to compute in f16 or bf16
 * (or, for --matmul-precision=medium, runs f32 MatMul/Gemm/Conv in bf16; for fp8, runs
 * MatMul/Gemm/Conv with constant weights on e4m3 operands and the rest in f16), keeping the
 * model's interface (graph input and output dtypes) and keeping in f32 the primitive-op
 * chains whose numerics break in half precision. The chosen dtype of every node is visible
 * as its result types (drk_graph_print) and in drk_precision_report().
 *
 * Requires: dtypes and shapes inferred (after drk_pass_pipeline_canonicalize); shapes are
 * only used to size reductions (unknown sizes count as large), so symbolic dims are fine.
 * Guarantees on success: the graph verifies and drk_pass_infer_shapes() agrees with every
 * dtype it set; integer and bool values, f64 and values that were already f16/bf16 are
 * untouched (fp8: but an f16/bf16 MatMul/Gemm/Conv with a constant weight gets the fp8 form
 * too, its result value keeping its dtype); graph inputs and outputs keep their names and
 * dtypes. */
#ifndef DRK_PRECISION_H
#define DRK_PRECISION_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ir/graph.h"

typedef enum drk_precision {
  DRK_PREC_AUTO, /* keep the model's dtypes (an f32 model stays f32, a half model stays half) */
  DRK_PREC_FP32,
  DRK_PREC_TF32, /* f32 graph; f32 matmuls use tf32 (matmul precision at least "high") */
  DRK_PREC_BF16,
  DRK_PREC_FP16,
  DRK_PREC_FP8 /* e4m3 MatMul/Gemm/Conv on fp8 targets, the rest f16; fp16 + warning elsewhere */
} drk_precision_t;

typedef enum drk_matmul_precision {
  DRK_MMP_HIGHEST, /* f32 matmuls in f32 */
  DRK_MMP_HIGH,    /* f32 matmuls through tf32 (a lowering option: drk_precision_allow_tf32) */
  DRK_MMP_MEDIUM   /* f32 MatMul/Gemm/Conv/ConvTranspose/Einsum rewritten to bf16 operands */
} drk_matmul_precision_t;

typedef struct drk_precision_options {
  drk_precision_t precision;
  drk_matmul_precision_t matmul;
  int target_sm;       /* lowest target, e.g. 80 (messages only); 0: unknown */
  bool target_has_fp8; /* every target has fp8 tensor cores (sm_89+, gfx942) */
  const char *target_name; /* the target named in messages (one without fp8); NULL: sm_<target_sm> */
  bool fp8_head; /* fp8: also the output head (a matmul whose result reaches a graph output
                  * through elementwise ops only), which otherwise stays f16 */
  /* Per node id (< n_node_choice): the precision that node computes in (a drk_precision_t:
   * FP32, TF32, BF16, FP16 or FP8), as --precision=auto --accuracy-budget chose it
   * (passes/precision_auto.h). NULL: `precision` says it for every node. Given, `precision`
   * and `matmul` are not read; nodes beyond n_node_choice or marked AUTO stay as the model has
   * them. The fragile patterns stay f32 under each node's own half dtype; FP8 is the fp8 form
   * (its output head included: the choice was measured) where target_has_fp8, else FP16; TF32
   * marks an f32 MatMul/Gemm/Conv with the internal attribute tf32 = 1 (the interpreter rounds
   * its operands to tf32, the lowering runs it on tf32 tensor cores). */
  const uint8_t *node_choice;
  uint32_t n_node_choice;
} drk_precision_options_t;

/* A ReduceSum/ReduceMean/GlobalAveragePool over at least this many elements (or over a
 * symbolic extent) stays f32. */
#define DRK_PRECISION_LARGE_REDUCE 1024

/* "auto|fp32|tf32|bf16|fp16|fp8"; false (out untouched) for anything else. */
bool drk_precision_parse(const char *s, drk_precision_t *out);
/* "highest|high|medium"; false (out untouched) for anything else. */
bool drk_matmul_precision_parse(const char *s, drk_matmul_precision_t *out);
const char *drk_precision_name(drk_precision_t p);
const char *drk_matmul_precision_name(drk_matmul_precision_t m);
/* sm_89 and sm_90 (and newer) have fp8 tensor cores. */
bool drk_precision_target_has_fp8(int sm);
/* What drk_lower_options_t.allow_tf32 should be: precision tf32, or matmul precision high
 * with an f32 graph (auto/fp32). */
bool drk_precision_allow_tf32(const drk_precision_options_t *o);

/* Rewrites g in place (see the file comment and docs/precision.md). fp8 without
 * target_has_fp8: warns naming the target and applies fp16. Returns false only after
 * reporting an error (none is reported today). */
bool drk_pass_apply_precision(drk_graph_t *g, const drk_precision_options_t *o, drk_diag_t *d);

/* An f32 MatMul, Gemm or Conv: what tf32 applies to (the choice's TF32, the tf32 attribute). */
bool drk_precision_tf32_op(const drk_node_t *n);

/* The dtype node n computes in: its first floating-point result's dtype, else (comparisons,
 * ArgMax, ...) its first floating-point input's; DRK_DT_COUNT when it computes on no float
 * (integer/bool ops, Shape, Size). For a Cast, the dtype it casts to. For a MatMul, Gemm or
 * Conv on f8 operands, the f8 dtype (its result is the f32 accumulator). */
drk_dtype_t drk_precision_node_dtype(const drk_node_t *n);

/* One line per live node: name (ONNX node name, else its first result), op, compute dtype
 * (Casts as "f32->f16"); then a summary line:
 *   precision mix: 120 f16, 14 f32; 12 casts, 30 non-float */
void drk_precision_report(const drk_graph_t *g, FILE *out);

#endif
