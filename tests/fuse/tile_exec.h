/* A CPU executor for the tile IR of flat and row kernels (tests only; see tile_exec.c).
 * te_run runs kernel k of module m over its grid with parameter i bound to bufs[i] (pointer
 * parameters only). Returns TE_UNSUPPORTED for kernels using ops outside the subset, TE_ERROR
 * with a message in err for out-of-bounds accesses and other faults. */
#ifndef DRK_TESTS_TILE_EXEC_H
#define DRK_TESTS_TILE_EXEC_H

#include <stddef.h>

#include "ir/tensor.h"
#include "ir/tile.h"

typedef enum { TE_OK, TE_UNSUPPORTED, TE_ERROR } te_result_t;

te_result_t te_run(const drk_tile_module_t *m, const drk_tile_kernel_t *k, drk_tensor_t *bufs, int n_bufs,
                   char *err, size_t err_n);

#endif
