/* Internal interface of the ONNX importer (frontend/onnx/ only): the import context shared
 * by onnx_import.c (model, initializers, types) and onnx_opset.c (nodes and their opset
 * normalization), and TensorProto decoding shared with tensor_io.c.
 *
 * Requires the protobuf-c code generated at build time from the system's onnx.proto. */
#ifndef DRK_ONNX_INTERNAL_H
#define DRK_ONNX_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/graph.h"
#include "onnx/onnx.pb-c.h"

#define DRK_ONNX_MIN_IR 3
#define DRK_ONNX_MAX_IR 14
#define DRK_ONNX_MIN_OPSET 1
#define DRK_ONNX_MAX_OPSET 25
/* Ranks beyond this are rejected as corrupt (no real model comes near). */
#define DRK_ONNX_MAX_RANK 64

/* String -> pointer map (open addressing), memory from an arena. */
typedef struct drk_onnx_map {
  drk_arena_t *arena;
  const char **keys;
  void **vals;
  size_t cap, n;
} drk_onnx_map_t;

void drk_onnx_map_init(drk_onnx_map_t *m, drk_arena_t *a);
void *drk_onnx_map_get(const drk_onnx_map_t *m, const char *key);
/* Returns false if the key is present already (the map is unchanged). */
bool drk_onnx_map_put(drk_onnx_map_t *m, const char *key, void *val);

typedef struct drk_onnx_ext {
  char *path;
  void *base;
  size_t size;
} drk_onnx_ext_t;

typedef struct drk_onnx_ctx {
  drk_graph_t *g;
  drk_diag_t *d;
  drk_arena_t *scratch; /* freed when the import ends */
  const char *file;     /* model path or buffer name, for messages (graph arena) */
  const char *base_dir; /* for external data; NULL: none allowed */
  const Onnx__ModelProto *model;
  int64_t opset; /* ai.onnx */
  drk_onnx_map_t values; /* ONNX name -> drk_value_t * */
  drk_onnx_map_t infos;  /* ONNX name -> const Onnx__ValueInfoProto * */
  bool *dtype_known;     /* by value id */
  size_t cap_known;
  uint32_t fresh;
  drk_onnx_ext_t *ext;
  size_t n_ext, cap_ext;
  const char *bind; /* NAME=SIZE,...: sizes the caller will bind symbolic dims to (or NULL); an
                     * import that needs a size (a recurrence's length) may read them */
  bool inputs_only; /* drk_onnx_import_inputs: the graph's inputs, no nodes */
} drk_onnx_ctx_t;

/* The size `bind` gives the symbol (NAME=SIZE,... as drk_graph_bind_dims reads it), or -1. */
int64_t drk_onnx_bound_size(const drk_onnx_ctx_t *c, const char *sym);

/* A decoded TensorProto header, and its data unless stored externally. */
typedef struct drk_onnx_tensor {
  drk_dtype_t dtype;
  int rank;
  const int64_t *dims;
  int64_t numel;
  size_t nbytes; /* expected size of the data */
  const void *data; /* NULL when external (or nbytes == 0) */
  bool external;
} drk_onnx_tensor_t;

/* Decodes t (raw_data or typed fields). Data of the message's own type is pointed at, not
 * copied; narrowed typed fields (int32_data holding int8, f16 bits, ...) are converted into
 * memory from `a`. Returns false with a message in err ("unsupported ..." for valid tensors
 * drkc cannot represent). */
bool drk_onnx_tensor_decode(const Onnx__TensorProto *t, drk_arena_t *a, drk_onnx_tensor_t *out,
                            char *err, size_t errn);
/* The ONNX name of a TensorProto.DataType code ("FLOAT", "STRING", ...). */
const char *drk_onnx_dtype_name(int code);

/* Helpers of the import context (onnx_import.c). */
bool drk_onnx_is_known(const drk_onnx_ctx_t *c, const drk_value_t *v);
void drk_onnx_set_known(drk_onnx_ctx_t *c, const drk_value_t *v);
/* A fresh value name derived from hint, unused in the model. */
const char *drk_onnx_fresh_name(drk_onnx_ctx_t *c, const char *hint);
/* Decodes a TensorProto into a constant value (data borrowed from the message or an
 * external-data mmap). listed: add to g->consts; otherwise a free value (TENSOR attrs). */
drk_value_t *drk_onnx_tensor_value(drk_onnx_ctx_t *c, const Onnx__TensorProto *t, const char *name,
                                   bool listed, drk_loc_t loc);
/* Applies a ValueInfoProto's type to v (dtype and shape where given). */
bool drk_onnx_apply_type(drk_onnx_ctx_t *c, drk_value_t *v, const Onnx__ValueInfoProto *vi,
                         drk_loc_t loc);
/* The model's opset for domain ("" = ai.onnx), or -1. */
int64_t drk_onnx_domain_opset(const drk_onnx_ctx_t *c, const char *domain);

/* Converts a node of domain com.microsoft (onnx_contrib.c: MatMulNBits). Returns false
 * after reporting. */
bool drk_onnx_import_contrib(drk_onnx_ctx_t *c, const Onnx__NodeProto *np, drk_loc_t loc);

/* Converts node #index (onnx_opset.c). Returns false after reporting. */
bool drk_onnx_import_node(drk_onnx_ctx_t *c, const Onnx__NodeProto *np, int index);

#endif
