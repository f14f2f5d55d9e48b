/* drkc --dynamic: one module for a range of sizes of some symbolic dims (docs/dynamic-shapes.md).
 *
 *   drkc model.onnx --dynamic=batch=1..64,seq=1..2048 [--buckets=batch:1,8,64;seq:128,512,2048]
 *
 * Every dim named in --dynamic gets a list of bucket sizes (powers of two from the smallest one
 * >= LO, and HI itself; or the --buckets list, increasing, inside the range, ending at HI), and
 * the module holds one plan per combination (a bucket): its kernels, launches and arena,
 * compiled by the whole pipeline with the dims bound to the bucket's sizes. A run picks the
 * smallest bucket holding the actual shape, zero-pads the inputs up to it and slices the outputs
 * back (the runtime, docs/runtime.md), which is exact because the graph is first checked with
 * the dims still symbolic (passes/pad_exact.h): where an op would mix padded values into the
 * result, the compile stops with "not implemented: exact padding of DIM through NODE (why)".
 *
 * Shared between buckets, stored once: the weights (content-addressed: a constant the buckets
 * fold differently is stored per version), and every kernel whose tile IR is identical to one
 * of an earlier bucket (its code stays in that bucket's image; the later bucket's launch record
 * names it there). --report prints, per bucket, its kernels (new and shared), its image, its
 * arena and what an exact-shape module of it would weigh, then the module against their sum. */
#ifndef DRK_PIPELINE_DYNAMIC_H
#define DRK_PIPELINE_DYNAMIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pipeline/pipeline.h"

#define DRK_DYN_MAX_DIMS 8
#define DRK_DYN_MAX_SIZES 64   /* bucket sizes per dim */
#define DRK_DYN_MAX_BUCKETS 256 /* combinations */

typedef struct drk_dyn_dim {
  char name[64];
  int64_t lo, hi;
  int n_sizes;
  int64_t sizes[DRK_DYN_MAX_SIZES]; /* increasing, lo <= sizes[0], sizes[n-1] == hi */
} drk_dyn_dim_t;

typedef struct drk_dyn_spec {
  int n_dims;
  drk_dyn_dim_t dims[DRK_DYN_MAX_DIMS];
} drk_dyn_spec_t;

/* Parses --dynamic (NAME=LO..HI, comma-separated) and --buckets (NULL, or NAME:S,S,...
 * groups separated by ';'; dims not listed get powers of two). Errors name the option. */
bool drk_dyn_spec_parse(const char *dynamic, const char *buckets, drk_dyn_spec_t *out, drk_diag_t *d);

/* Compiles the model at path under o (o->dynamic, o->buckets; o->bind binds the other dims)
 * into one module with buckets: *out_data (free()) and *out_size. *out_kernels: launch
 * records over all buckets. */
bool drk_dynamic_build(const drk_compile_options_t *o, const char *path, void **out_data, size_t *out_size,
                       size_t *out_kernels, drk_diag_t *d);

#endif
