/* A CPU executor for the tile IR of flat and row kernels (tests only; see tile_exec.c).
 * te_run runs kernel k of module m over its grid with parameter i bound to bufs[i] (a pointer
 * parameter: the tensor it points to; a scalar parameter: a one-element tensor holding its value;
 * a grid cdiv(%p, c) reads it). Returns TE_UNSUPPORTED for kernels using ops outside the subset, TE_ERROR
 * with a message in err for out-of-bounds accesses and other faults. */
#ifndef DRK_TESTS_TILE_EXEC_H
#define DRK_TESTS_TILE_EXEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/tensor.h"
#include "ir/tile.h"

typedef enum { TE_OK, TE_UNSUPPORTED, TE_ERROR } te_result_t;

te_result_t te_run(const drk_tile_module_t *m, const drk_tile_kernel_t *k, drk_tensor_t *bufs, int n_bufs,
                   char *err, size_t err_n);

/* A TMA descriptor parameter: bufs[i] is its tensor, tmas[i] how the descriptor views it
 * (lower.h's drk_larg_tma_t, copied here so the executor needs no lowering header): dims,
 * box and element strides innermost first, strides in bytes of dims 1..rank-1. */
typedef struct te_tma {
  int rank;
  int64_t dims[5], strides[4];
  int32_t box[5], elem_strides[5];
  bool oob_nan;
} te_tma_t;

/* te_run for kernels with TMA descriptors (tmas[i]: parameter i's, NULL for the others; tmas
 * itself may be NULL): also runs the warp-specialized Hopper kernels (warp groups, mbarriers,
 * TMA loads, named barriers, wgmma on shared operands), see tile_exec.c. */
te_result_t te_run_tma(const drk_tile_module_t *m, const drk_tile_kernel_t *k, drk_tensor_t *bufs, int n_bufs,
                       const te_tma_t *const *tmas, char *err, size_t err_n);

#endif
