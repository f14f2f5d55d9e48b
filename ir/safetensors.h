/* Reader of safetensors weight files (the .drkg `weights "FILE"` sidecar; docs/graph-ir.md).
 *
 * A safetensors file is an 8-byte little-endian header length N, N bytes of JSON
 * {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}}
 * and the tensor bytes; offsets count from the end of the header. The file is mapped once,
 * read-only; entries point into the mapping. */
#ifndef DRK_IR_SAFETENSORS_H
#define DRK_IR_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "support.h"
#include "graph.h"

#define DRK_ST_MAX_RANK 16

typedef struct drk_st_entry {
  const char *name;
  drk_dtype_t dtype;
  int rank;
  int64_t dims[DRK_ST_MAX_RANK];
  uint64_t begin, end; /* absolute file offsets */
} drk_st_entry_t;

typedef struct drk_safetensors {
  void *base; /* the mapping (NULL for an empty file) */
  size_t size;
  drk_st_entry_t *entries; /* in the arena */
  size_t n;
} drk_safetensors_t;

/* Maps and checks path (header well formed, known dtypes, offsets inside the file, byte
 * counts equal dtype x shape). On failure writes a message to err and returns false (nothing
 * stays mapped). On success the caller owns the mapping: drk_safetensors_release. */
bool drk_safetensors_open(const char *path, drk_arena_t *a, drk_safetensors_t *out, char *err, size_t errn);
void drk_safetensors_release(void *base, size_t size);
const drk_st_entry_t *drk_safetensors_find(const drk_safetensors_t *s, const char *name);

#endif
