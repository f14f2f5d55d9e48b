/* The drkc module file (.drkm): writer (compiler side) and reader (runtime side).
 *
 * A module holds everything a run needs: provenance, the execution plan (kernels with
 * launch shapes and parameters, graph inputs/outputs), the weights, and the code images (a
 * fat binary for NVIDIA; the table has room for other platforms). docs/module-format.md is
 * the byte-level specification; DRK_MODFILE_FORMAT_VERSION changes whenever it does.
 *
 * The code generator fills a drk_modfile_t (plain structs, pointers it owns) and calls
 * drk_modfile_write. The reader validates everything before returning (bounds, alignment,
 * CRC-32 of every section, every cross-reference), so the runtime can trust indices and
 * offsets; it never reads outside the buffer it is given, whatever the bytes are.
 *
 * Memory: the reader allocates one block from the caller's allocator (released with
 * drk_modfile_free) and points into the input buffer for strings, weights and images, so
 * the buffer must outlive the result. The writer returns malloc'ed bytes (compiler side).
 * Requires only libc and the drk_allocator_t type of <drk/drkrt.h>. */
#ifndef DRK_MODULE_H
#define DRK_MODULE_H

#include <stddef.h>
#include <stdint.h>

#include "drk/drkrt.h"

#define DRK_MODFILE_FORMAT_VERSION 1u
#define DRK_MODFILE_MAGIC "DRKM\r\n\x1a\n" /* 8 bytes; catches text-mode mangling */
#define DRK_MODFILE_WEIGHT_ALIGN 256u
#define DRK_MODFILE_MAX_RANK 8
#define DRK_MODFILE_TMA_MAX_RANK 5

/* How a kernel parameter is produced at launch. */
typedef enum drk_modfile_param_kind {
  DRK_MODFILE_PARAM_BUFFER = 1, /* .u64 pointer: arena base + offset */
  DRK_MODFILE_PARAM_SCALAR = 2, /* scalar_size bytes (1, 2, 4 or 8), little-endian */
  DRK_MODFILE_PARAM_TMA = 3,    /* 128-byte CUtensorMap passed by value (__grid_constant__) */
} drk_modfile_param_kind_t;

typedef struct drk_modfile_param {
  drk_modfile_param_kind_t kind;
  uint64_t offset;       /* BUFFER: arena byte offset */
  uint64_t size;         /* BUFFER: bytes the kernel may touch (offset + size <= arena_size) */
  uint32_t scalar_size;  /* SCALAR */
  uint8_t scalar[8];     /* SCALAR: value bytes, little-endian */
  uint32_t tma;          /* TMA: index into drk_modfile_t.tmas */
} drk_modfile_param_t;

/* A TMA descriptor, encoded by the runtime with cuTensorMapEncodeTiled once the arena
 * address is known. Enum fields hold the CUDA driver's enum values (CUtensorMapDataType,
 * CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion,
 * CUtensorMapFloatOOBfill) so no translation table can drift. */
typedef struct drk_modfile_tma {
  uint32_t data_type;
  uint32_t rank;                                     /* 1..5 */
  uint64_t offset;                                   /* arena offset of element 0, 16B aligned */
  uint64_t dims[DRK_MODFILE_TMA_MAX_RANK];           /* elements, innermost first */
  uint64_t strides[DRK_MODFILE_TMA_MAX_RANK - 1];    /* bytes, of dims 1..rank-1 */
  uint32_t box[DRK_MODFILE_TMA_MAX_RANK];
  uint32_t elem_strides[DRK_MODFILE_TMA_MAX_RANK];
  uint32_t interleave, swizzle, l2_promotion, oob_fill;
} drk_modfile_tma_t;

/* One launch, in plan order. */
typedef struct drk_modfile_kernel {
  const char *name;        /* entry symbol in the image */
  uint32_t slot;           /* code slot: the images with this slot all contain the kernel */
  uint32_t grid[3];        /* blocks (not clusters); all >= 1 */
  uint32_t block[3];       /* threads; all >= 1 */
  uint32_t cluster[3];     /* {0,0,0}: no cluster launch; else divides grid */
  uint32_t dyn_smem;       /* dynamic shared memory bytes (> 48 KiB is allowed) */
  const drk_modfile_param_t *params;
  uint32_t n_params;
} drk_modfile_kernel_t;

/* A graph input or output living in the arena. */
typedef struct drk_modfile_tensor {
  const char *name;
  int32_t dtype;           /* ONNX TensorProto.DataType code */
  uint32_t rank;           /* <= 8 */
  int64_t dims[DRK_MODFILE_MAX_RANK];
  uint64_t offset, size;   /* arena byte range */
} drk_modfile_tensor_t;

/* A named range of the weights blob (for tools and debugging; the runtime uploads the blob
 * as a whole). offset is a multiple of DRK_MODFILE_WEIGHT_ALIGN. */
typedef struct drk_modfile_weight {
  const char *name;
  uint64_t offset, size;
} drk_modfile_weight_t;

typedef enum drk_modfile_image_kind {
  DRK_MODFILE_IMAGE_FATBIN = 1,         /* NVIDIA fat binary (cubins + PTX) */
  DRK_MODFILE_IMAGE_CUBIN = 2,          /* one NVIDIA cubin; targets names its sm */
  DRK_MODFILE_IMAGE_PTX = 3,            /* PTX text (NUL not included); targets names it */
  DRK_MODFILE_IMAGE_HSACO = 4,          /* AMD code object */
  DRK_MODFILE_IMAGE_OFFLOAD_BUNDLE = 5, /* clang offload bundle of AMD code objects */
} drk_modfile_image_kind_t;

/* Images sharing a slot are alternative encodings of the same kernels (e.g. a fat binary
 * for NVIDIA and an offload bundle for AMD): a runtime picks one per slot. */
typedef struct drk_modfile_image {
  drk_modfile_image_kind_t kind;
  uint32_t slot;
  const char *targets;     /* comma-separated, e.g. "sm_90a,sm_87,compute_90a" */
  const void *data;
  uint64_t size;
} drk_modfile_image_t;

typedef struct drk_modfile_provenance {
  const char *drkc_version;  /* "0.1.0" */
  const char *command_line;  /* as typed, arguments joined by spaces */
  const char *model_hash;    /* "sha256:<64 hex digits>" of the input model file's bytes */
  const char *targets;       /* "sm_90a,sm_87" */
} drk_modfile_provenance_t;

typedef struct drk_modfile {
  uint32_t format_version;   /* reader output; the writer always writes the current one */
  drk_modfile_provenance_t prov;
  uint64_t arena_size;       /* the one device allocation, bytes */
  uint64_t weights_offset;   /* arena offset where the weights blob is uploaded (256B aligned) */
  const void *weights;
  uint64_t weights_size;
  const drk_modfile_weight_t *weight_entries;
  uint32_t n_weight_entries;
  const drk_modfile_kernel_t *kernels;
  uint32_t n_kernels;
  const drk_modfile_tensor_t *inputs;
  uint32_t n_inputs;
  const drk_modfile_tensor_t *outputs;
  uint32_t n_outputs;
  const drk_modfile_tma_t *tmas;
  uint32_t n_tmas;
  const drk_modfile_image_t *images;
  uint32_t n_images;
} drk_modfile_t;

typedef enum drk_modfile_result {
  DRK_MODFILE_OK = 0,
  DRK_MODFILE_ERR_FORMAT,  /* not a module, truncated, corrupted, or inconsistent */
  DRK_MODFILE_ERR_VERSION, /* a module of another format version */
  DRK_MODFILE_ERR_NOMEM,   /* allocator returned NULL */
  DRK_MODFILE_ERR_INVALID, /* writer: the description breaks a rule above */
  DRK_MODFILE_ERR_IO,      /* writer: file could not be written */
} drk_modfile_result_t;

/* Serializes m. On success *out_data (malloc'ed; free with free()) and *out_size are set.
 * The same description always gives the same bytes. Errors go to err (may be NULL). */
drk_modfile_result_t drk_modfile_write(const drk_modfile_t *m, void **out_data, size_t *out_size,
                                       char *err, size_t err_size);
drk_modfile_result_t drk_modfile_write_file(const drk_modfile_t *m, const char *path, char *err,
                                            size_t err_size);

/* Parses and validates a module. On success *out_m is set (free with drk_modfile_free and
 * the same allocator; NULL allocator = malloc). A version mismatch message names both
 * format versions and the drkc that wrote the file. */
drk_modfile_result_t drk_modfile_read(const void *data, size_t size, const drk_allocator_t *alloc,
                                      drk_modfile_t **out_m, char *err, size_t err_size);
void drk_modfile_free(const drk_allocator_t *alloc, drk_modfile_t *m);

/* Checks m against the rules above (what the writer and reader both enforce). */
drk_modfile_result_t drk_modfile_validate(const drk_modfile_t *m, char *err, size_t err_size);

/* CRC-32 (IEEE 802.3, as zlib's crc32) and SHA-256 used by the format and provenance. */
uint32_t drk_modfile_crc32(uint32_t crc, const void *data, size_t n);
void drk_modfile_sha256(const void *data, size_t n, uint8_t out_digest[32]);
/* Writes "sha256:<hex>" for data into buf (needs 72 bytes). */
void drk_modfile_sha256_string(const void *data, size_t n, char buf[72]);

#endif
