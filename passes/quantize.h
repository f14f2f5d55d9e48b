/* W4A16 graph passes: passes/quantize.c (what each requires and guarantees is written there). */
#ifndef DRK_PASSES_QUANTIZE_H
#define DRK_PASSES_QUANTIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/graph.h"

typedef struct drk_quantize_stats {
  size_t quantized;            /* MatMuls made MatMulNBits */
  size_t skipped;              /* MatMuls by a constant weight left alone: K % group != 0 */
  size_t padded;               /* ... and those of a weight pad-matmul-n padded (result_n) */
  uint64_t bytes_before;       /* their weights as given */
  uint64_t bytes_after;        /* codes + scales + zero points */
} drk_quantize_stats_t;

/* MatMul(A, DequantizeLinear(const int4/uint4 [K, N], ...)) -> MatMulNBits. *out_n: how many. */
bool drk_pass_fold_dequant_matmul(drk_graph_t *g, size_t *out_n);
/* --quantize=int4-weight --group-size=group (a multiple of 16; false otherwise). */
bool drk_pass_quantize_int4(drk_graph_t *g, int64_t group, drk_quantize_stats_t *out_stats);
/* Every MatMulNBits of packing 0 and K % 64 == 0 to packing 1 (ir/w4.h). */
bool drk_pass_pack_w4(drk_graph_t *g, size_t *out_n);

#endif
