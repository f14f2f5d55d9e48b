/* The drkc module file (.drkm): writer (compiler side) and reader (runtime side).
 *
 * A module holds everything a run needs: provenance, the execution plan (kernels with
 * launch shapes and parameters, graph inputs/outputs), the weights, and the code images (a
 * fat binary for NVIDIA; the table has room for other platforms). docs/module-format.md is
 * the byte-level specification; DRK_MODFILE_FORMAT_VERSION changes whenever it does, except
 * for new optional sections, which readers skip when they do not know them and which carry
 * their own version (PRECISION: DRK_MODFILE_PRECISION_VERSION).
 *
 * The code generator fills a drk_modfile_t (plain structs, pointers it owns) and calls
 * drk_modfile_write. The reader validates everything before returning (bounds, alignment,
 * CRC-32 of every section, every cross-reference), so the runtime can trust indices and
 * offsets; it never reads outside the buffer it is given, whatever the bytes are.
 *
 * Memory: the reader allocates one block from the caller's allocator (released with
 * drk_modfile_free) and points into the input buffer for strings, weights and images, so
 * the buffer must outlive the result. The writer returns malloc'ed bytes (compiler side).
 * Requires only libc and the drk_allocator_t type of <drk/drkrt.h>.
 *
 * The PRECISION section (optional; docs/module-format.md) records, for every kernel, the
 * precision its arithmetic runs in and the graph nodes it runs, and for every node of the
 * optimized graph the dtype the precision pass chose. The runtime does not need it to run;
 * tools print it (drk_modfile_print_precision, `drkrun MODULE --list`). */
#ifndef DRK_MODULE_H
#define DRK_MODULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "drk/drkrt.h"

#define DRK_MODFILE_FORMAT_VERSION 1u
/* Modules with shape buckets (drkc --dynamic, the BUCKETS section) are format version 2, so
 * that a reader that predates them refuses them with its version message instead of running
 * the first bucket's kernels with every bucket's records. Static modules stay version 1. */
#define DRK_MODFILE_FORMAT_VERSION_DYNAMIC 2u
#define DRK_MODFILE_MAX_DYN_DIMS 8
#define DRK_MODFILE_MAX_BUCKETS 256
#define DRK_MODFILE_PRECISION_VERSION 1u /* of the PRECISION section (an optional section) */
#define DRK_MODFILE_AUTO_VERSION 1u /* of the PRECISION_AUTO section (an optional section) */
#define DRK_MODFILE_FALLBACK_VERSION 1u /* of the FALLBACK section (an optional section) */
#define DRK_MODFILE_MAGIC "DRKM\r\n\x1a\n" /* 8 bytes; catches text-mode mangling */
#define DRK_MODFILE_WEIGHT_ALIGN 256u
/* Inputs and outputs start at arena offsets that are multiples of this (the memory planner
 * places every value 256-aligned; the runtime copies them with vector loads). */
#define DRK_MODFILE_TENSOR_ALIGN 256u
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
 * as a whole). offset is a multiple of DRK_MODFILE_WEIGHT_ALIGN. Writer only: when the
 * module's `weights` is NULL, the blob is built from the entries: data_size bytes of data at
 * offset (data_size <= size; the rest, and every gap, is zero), so a writer of a large model
 * need not assemble the blob first. The reader leaves data NULL. */
typedef struct drk_modfile_weight {
  const char *name;
  uint64_t offset, size;
  const void *data;
  uint64_t data_size;
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

/* Precision codes of the PRECISION section: the arithmetic a kernel or node does, not a
 * storage type, so tf32 has a code of its own. A mask is a set of codes (bit 1 << code). */
typedef enum drk_modfile_prec {
  DRK_MODFILE_PREC_NONE = 0,   /* no floating-point computation (integer/bool ops, Shape, Size) */
  DRK_MODFILE_PREC_F64 = 1,
  DRK_MODFILE_PREC_F32 = 2,
  DRK_MODFILE_PREC_TF32 = 3,   /* f32 operands of a tensor-core product: tf32 on NVIDIA; gfx942's
                                * f32 MFMA multiplies in full f32 */
  DRK_MODFILE_PREC_F16 = 4,
  DRK_MODFILE_PREC_BF16 = 5,
  DRK_MODFILE_PREC_F8E4M3 = 6,
  DRK_MODFILE_PREC_F8E5M2 = 7,
  DRK_MODFILE_PREC_INT = 8,    /* integer or bool data */
  DRK_MODFILE_PREC_COUNT = 9,
} drk_modfile_prec_t;
#define DRK_MODFILE_PREC_MASK_ALL 0x1feu /* codes 1..8 */

/* Which fusion group a kernel runs (lower/fuse.h: drk_fusion_kind_t). */
typedef enum drk_modfile_group {
  DRK_MODFILE_GROUP_SINGLE = 0,    /* one node */
  DRK_MODFILE_GROUP_FLAT = 1,      /* elementwise nodes */
  DRK_MODFILE_GROUP_ROWS = 2,      /* row reductions/normalizations with prologue and epilogue */
  DRK_MODFILE_GROUP_ATTENTION = 3, /* Q.K^T, masks, Softmax, .V */
  DRK_MODFILE_GROUP_MM = 4,        /* a MatMul/Gemm/Conv with its elementwise epilogue */
  DRK_MODFILE_GROUP_COUNT = 5,
} drk_modfile_group_t;

/* The precision of one kernel, read from its tile IR (what the kernel really does). */
typedef struct drk_modfile_kernel_prec {
  uint32_t anchor;  /* node_precision index of the node the kernel is named after (its group's
                     * principal node); that node's kernel range holds this kernel */
  uint32_t group;   /* drk_modfile_group_t */
  uint16_t dot;     /* mask: operand precisions of its matrix products (tile `dot`) */
  uint16_t acc;     /* mask: accumulator precisions (dot accumulators, reductions) */
  uint16_t math;    /* mask: precisions of its other arithmetic (elementwise ops, compares) */
  uint16_t io;      /* mask: element types of the global buffers it reads and writes */
} drk_modfile_kernel_prec_t;

#define DRK_MODFILE_NO_KERNEL 0xffffffffu

/* The precision of one live node of the optimized graph, in graph order: the dtype the
 * precision pass chose (passes/precision.h: drk_precision_node_dtype; what `drkc --report`
 * counts in its precision mix). */
typedef struct drk_modfile_node_prec {
  const char *name;   /* its first result value, as graph dumps print it (without '%') */
  const char *onnx;   /* ONNX node name; "" when none */
  const char *op;     /* graph IR op name, e.g. "MatMul" */
  uint32_t kernel;    /* first kernel running it (its group's); DRK_MODFILE_NO_KERNEL: none (a view) */
  uint32_t n_kernels; /* its group's kernels, consecutive from `kernel`; 0 with NO_KERNEL */
  uint8_t compute;    /* drk_modfile_prec_t; NONE: computes on no float */
  uint8_t from;       /* a Cast: the code of its input's dtype; else NONE */
} drk_modfile_node_prec_t;

/* A dynamic dim (drkc --dynamic=NAME=LO..HI): the sizes a run may give it. */
typedef struct drk_modfile_dyn_dim {
  const char *name;
  int64_t lo, hi; /* 1 <= lo <= hi */
  /* 0, or 1 + the index among a bucket's inputs of its length input: an int64 scalar that the
   * runtime fills with the dim's actual size (the padding masks of drk_pass_pad_mask); the
   * length inputs are the last inputs, hidden from the API (drk_modfile_user_inputs) */
  uint32_t length_input;
} drk_modfile_dyn_dim_t;

/* Where a dynamic dim appears: axis `axis` of tensor `tensor`, which numbers one bucket's
 * tensors, its inputs first (0 .. inputs-1), then its outputs. */
typedef struct drk_modfile_dyn_axis {
  uint32_t tensor, axis, dim;
} drk_modfile_dyn_axis_t;

/* One shape bucket: a plan compiled for these sizes of the dynamic dims. Its kernels are
 * kernels[first_kernel .. first_kernel + n_kernels) (the buckets partition the table in
 * order); its tensors are inputs[b * per_bucket_inputs ...] and outputs[b * ...]; it uses
 * arena bytes [0, arena_size) (<= the module's arena_size; the weights are shared). */
typedef struct drk_modfile_bucket {
  int64_t size[DRK_MODFILE_MAX_DYN_DIMS]; /* one per dynamic dim, 0 past n_dyn_dims */
  uint64_t arena_size;
  uint32_t first_kernel, n_kernels;
} drk_modfile_bucket_t;

typedef struct drk_modfile_provenance {
  const char *drkc_version;  /* "0.1.0" */
  const char *command_line;  /* as typed, arguments joined by spaces */
  const char *model_hash;    /* "sha256:<64 hex digits>" of the input model file's bytes */
  const char *targets;       /* "sm_90a,sm_87" */
} drk_modfile_provenance_t;

/* PRECISION_AUTO (--precision=auto --accuracy-budget): one op group and the precision chosen
 * for it (a precision code: f32, tf32, f16, bf16, f8e4m3). */
typedef struct drk_modfile_auto_group {
  const char *name;  /* the group's first node: its ONNX node name or first result */
  const char *op;    /* that node's op */
  uint32_t n_nodes;
  uint8_t choice;
} drk_modfile_auto_group_t;

/* One graph output and its measured error on the calibration inputs (relative L2, or absolute
 * where the reference is ~0 everywhere); >= 0, infinity allowed, never NaN. */
typedef struct drk_modfile_auto_output {
  const char *name;
  bool absolute;
  double error;
} drk_modfile_auto_output_t;

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
  /* The optional PRECISION section. precision_version 0: the module has none (written before
   * it existed, or by a writer that leaves it out); DRK_MODFILE_PRECISION_VERSION: the arrays
   * below (kernel_precision has n_kernels entries, parallel to kernels); any other (reader
   * output only): a section of a version this reader does not know, skipped (arrays NULL). */
  uint32_t precision_version;
  const drk_modfile_kernel_prec_t *kernel_precision;
  const drk_modfile_node_prec_t *node_precision;
  uint32_t n_node_precision;
  /* The optional PRECISION_AUTO section: auto_version 0: none (no --accuracy-budget);
   * DRK_MODFILE_AUTO_VERSION: the budget (> 0, < 1), the groups and one record per output; any
   * other (reader output only): skipped, arrays NULL. */
  uint32_t auto_version;
  double auto_budget;
  const drk_modfile_auto_group_t *auto_groups;
  uint32_t n_auto_groups;
  const drk_modfile_auto_output_t *auto_outputs;
  uint32_t n_auto_outputs;
  /* The optional EXTERNAL_WEIGHTS section (drkc --weights=external): NULL, or the base name of
   * the side file that holds the weights blob (weights_size bytes, SHA-256 weights_sha256),
   * found next to the module; the writer then writes an empty WEIGHTS section, the reader
   * returns weights = NULL, and the runtime needs drk_module_load_weights. */
  const char *weights_file;
  uint8_t weights_sha256[32];
  /* The BUCKETS section (format version 2; docs/module-format.md): n_buckets 0 for a static
   * module. With buckets, kernels/inputs/outputs hold every bucket's records, bucket after
   * bucket (n_inputs and n_outputs are multiples of n_buckets), and there is no PRECISION. */
  uint32_t n_dyn_dims;
  const drk_modfile_dyn_dim_t *dyn_dims;
  uint32_t n_buckets;
  const drk_modfile_bucket_t *buckets;
  uint32_t n_dyn_axes;
  const drk_modfile_dyn_axis_t *dyn_axes;
  /* The optional FALLBACK section (docs/module-format.md): a whole second module, the plan a
   * runtime uses when this one has no code for its device (drkc --target=sm_90: the sm_90a
   * plan, and a fallback of sm_80-class kernels with an sm_90 cubin and compute_90 PTX that
   * later GPUs JIT-compile). Writer: fallback (NULL: none) and fallback_size are the nested
   * module's bytes (drk_modfile_write's output; a static module without a fallback of its
   * own); fallback_shares_weights: it was written without weights (weights_size 0, no weight
   * entries, no side file) and runs on this module's, uploaded at the same arena offset.
   * Reader: the same three (fallback points into the input buffer) and fallback_module, the
   * nested module parsed and validated, with this module's weights filled in when it shares
   * them; freed with this module. A FALLBACK section of an unknown version is skipped. */
  const void *fallback;
  uint64_t fallback_size;
  bool fallback_shares_weights;
  struct drk_modfile *fallback_module;
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
/* The weights blob of m (weights_size bytes: m->weights, or built from the entries), malloc'ed
 * (free()); false when out of memory. What --weights=external writes to the side file. */
bool drk_modfile_weights_blob(const drk_modfile_t *m, void **out_data, size_t *out_size);

/* Checks m against the rules above (what the writer and reader both enforce). */
/* A bucket's inputs the caller binds: all but the length inputs of the dynamic dims (which are
 * the last ones; the runtime fills them). Without buckets: every input. */
uint32_t drk_modfile_user_inputs(const drk_modfile_t *m);
drk_modfile_result_t drk_modfile_validate(const drk_modfile_t *m, char *err, size_t err_size);

/* "f32", "tf32", "f16", ..., "int"; "-" for NONE, "?" out of range. */
const char *drk_modfile_prec_name(uint32_t code);
/* "flat", "rows", "attention", "mm"; "single" for one node, "?" out of range. */
const char *drk_modfile_group_name(uint32_t group);
/* Writes the codes of mask in code order, comma-separated ("f32,f16"), into buf; "-" when empty. */
void drk_modfile_prec_mask_format(uint32_t mask, char *buf, size_t n);
/* Prints the precision section of m as a table (one line per kernel, with its nodes, then
 * the nodes that need no kernel, then the mix of node compute dtypes), each line starting
 * with indent; says so in one line when m has none or one of an unknown version. */
void drk_modfile_print_precision(const drk_modfile_t *m, FILE *out, const char *indent);
/* Prints the PRECISION_AUTO section (the budget, each group's precision, each output's error
 * against the budget); nothing when m has none, one line for a version this reader skips. */
void drk_modfile_print_auto(const drk_modfile_t *m, FILE *out, const char *indent);

/* CRC-32 (IEEE 802.3, as zlib's crc32) and SHA-256 used by the format and provenance. */
uint32_t drk_modfile_crc32(uint32_t crc, const void *data, size_t n);
void drk_modfile_sha256(const void *data, size_t n, uint8_t out_digest[32]);
/* The same with a choice of implementation (portable: never the x86 SHA extensions), for
 * tests comparing the two. */
void drk_modfile_sha256_impl(const void *data, size_t n, uint8_t out_digest[32], bool portable);
/* Writes "sha256:<hex>" for data into buf (needs 72 bytes). */
void drk_modfile_sha256_string(const void *data, size_t n, char buf[72]);

#endif
