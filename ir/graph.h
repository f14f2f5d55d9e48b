/* Graph IR: SSA dataflow of tensor ops (see docs/graph-ir.md and ../shared/DESIGN.md).
 *
 * A graph owns an arena; every value, node, attribute and string hangs off it and lives
 * until drk_graph_destroy(). Constant data (weights) is borrowed: either from an arena copy
 * (small constants, text form), or from a blob registered with drk_graph_add_blob() (an
 * mmap of a model or external-data file), so weights are never copied needlessly.
 *
 * Ops follow ai.onnx opset 21 semantics (graph_ops.def). Optional inputs that are absent
 * are NULL in node->inputs. */
#ifndef DRK_GRAPH_H
#define DRK_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "support.h"

typedef enum drk_dtype {
#define DRK_DTYPE(E, name, bits, kind, onnx) DRK_DT_##E,
#include "dtypes.def"
#undef DRK_DTYPE
  DRK_DT_COUNT
} drk_dtype_t;

const char *drk_dtype_name(drk_dtype_t t);
int drk_dtype_bits(drk_dtype_t t);
bool drk_dtype_is_float(drk_dtype_t t);
bool drk_dtype_is_signed_int(drk_dtype_t t);
bool drk_dtype_is_int(drk_dtype_t t); /* signed or unsigned integer (not bool) */
/* Bytes for n elements (sub-byte types pack two per byte, rounded up). */
size_t drk_dtype_nbytes(drk_dtype_t t, int64_t n);
/* Returns false if the name is not a dtype. */
bool drk_dtype_from_name(const char *name, size_t len, drk_dtype_t *out_t);
/* ONNX TensorProto.DataType code <-> dtype; returns false if unsupported. */
bool drk_dtype_from_onnx(int code, drk_dtype_t *out_t);
int drk_dtype_to_onnx(drk_dtype_t t);

typedef enum drk_op {
#define DRK_OP(E, name, mi, ma, mo, mxo, flags) DRK_OP_##E,
#include "graph_ops.def"
#undef DRK_OP
  DRK_OP_COUNT
} drk_op_t;

enum { DRK_OPF_EW = 1, DRK_OPF_RED = 2, DRK_OPF_MOVE = 4, DRK_OPF_NORM = 8, DRK_OPF_MM = 16 };

typedef struct drk_op_info {
  const char *name;
  int min_inputs, max_inputs; /* max -1: variadic */
  int min_outputs, max_outputs;
  unsigned flags;
} drk_op_info_t;

const drk_op_info_t *drk_op_info(drk_op_t op);
const char *drk_op_name(drk_op_t op);
/* Reshape, Flatten, Squeeze, Unsqueeze, Identity: the result is the data input's elements in
 * the same order (a kernel can read and write it as that input's bytes). */
bool drk_op_aliases_input(drk_op_t op);
bool drk_op_from_name(const char *name, size_t len, drk_op_t *out_op);

/* A dimension: static (sym == NULL, size >= 0) or symbolic (sym != NULL, size == -1). */
typedef struct drk_dim {
  int64_t size;
  const char *sym;
} drk_dim_t;

/* rank < 0: unknown rank. */
typedef struct drk_shape {
  int rank;
  drk_dim_t *dims;
} drk_shape_t;

bool drk_shape_is_static(const drk_shape_t *s);
/* The most elements (and the largest dim) a tensor may have: 2^56, so that its size in bytes
 * (at most 8 a element) and sums of such sizes stay far from int64 overflow. Larger static
 * shapes are user errors, reported where they arise (the verifier, --bind, shape inference). */
#define DRK_MAX_NUMEL ((int64_t)1 << 56)
/* The one checked step of shape arithmetic: *acc *= d when d is in [0, DRK_MAX_NUMEL] and the
 * product is at most DRK_MAX_NUMEL; otherwise false and *acc unchanged. */
bool drk_numel_mul(int64_t *acc, int64_t d);
/* Element count; -1 unless static with at most DRK_MAX_NUMEL elements and no dim above it. */
int64_t drk_shape_numel(const drk_shape_t *s);
bool drk_shape_equal(const drk_shape_t *a, const drk_shape_t *b);

typedef struct drk_node drk_node_t;

typedef enum drk_value_kind {
  DRK_VALUE_INPUT, /* graph input */
  DRK_VALUE_CONST, /* constant (weight) with data */
  DRK_VALUE_NODE   /* result of a node */
} drk_value_kind_t;

typedef struct drk_value {
  uint32_t id;      /* unique in the graph; stable across print/parse */
  const char *name; /* printed as %name; unique in the graph */
  drk_value_kind_t kind;
  drk_dtype_t dtype;
  drk_shape_t shape;
  drk_node_t *def; /* DRK_VALUE_NODE: producer */
  int def_index;   /* which output of def */
  const void *data; /* DRK_VALUE_CONST: element data, row-major, packed as dtype */
  size_t nbytes;
  drk_loc_t loc;
} drk_value_t;

typedef enum drk_attr_kind {
  DRK_ATTR_INT,
  DRK_ATTR_FLOAT,
  DRK_ATTR_STRING,
  DRK_ATTR_INTS,
  DRK_ATTR_FLOATS,
  DRK_ATTR_STRINGS,
  DRK_ATTR_TENSOR /* a constant value (not listed among the graph's constants) */
} drk_attr_kind_t;

typedef struct drk_attr {
  const char *name;
  drk_attr_kind_t kind;
  int64_t i;
  double f;
  const char *s;
  size_t n; /* element count of ints / floats / strings */
  int64_t *ints;
  double *floats;
  const char **strings;
  drk_value_t *tensor;
} drk_attr_t;

struct drk_node {
  uint32_t id;
  drk_op_t op;
  int n_inputs, n_outputs, n_attrs;
  drk_value_t **inputs; /* NULL entries: omitted optional inputs */
  drk_value_t **outputs;
  drk_attr_t *attrs;
  drk_loc_t loc;
  bool dead; /* removed by a pass; skipped by iteration helpers and the printer */
};

typedef struct drk_graph {
  drk_arena_t *arena;
  const char *name;
  const char *source; /* file the graph came from, for messages */
  size_t n_inputs, cap_inputs;
  drk_value_t **inputs;
  size_t n_outputs, cap_outputs;
  drk_value_t **outputs;
  size_t n_consts, cap_consts;
  drk_value_t **consts;
  size_t n_nodes, cap_nodes; /* in a valid topological order */
  drk_node_t **nodes;
  size_t n_blobs, cap_blobs;
  struct drk_blob *blobs;
  uint32_t next_value_id, next_node_id;
  struct drk_name_set *names; /* every value name made so far (drk_graph_unique_name) */
} drk_graph_t;

/* A memory region constants may point into; released with the graph. */
typedef struct drk_blob {
  void *base;
  size_t size;
  void (*release)(void *base, size_t size); /* e.g. munmap; NULL: not owned */
} drk_blob_t;

/* ---- builder ---- */
drk_graph_t *drk_graph_create(const char *name);
void drk_graph_destroy(drk_graph_t *g);
void drk_graph_add_blob(drk_graph_t *g, void *base, size_t size, void (*release)(void *, size_t));
/* A copy of g's live part (inputs, constants, live nodes in order, outputs) with the same value
 * and node ids, names, dtypes, shapes, attributes and locations, for trying a rewrite without
 * touching g (passes/precision_auto.c). Constant data and attribute arrays are borrowed from g:
 * g must outlive the copy, and passes on the copy must replace, never modify, what they borrow
 * (as every pass does: convert_const gives a constant new data). NULL when memory runs out. */
drk_graph_t *drk_graph_clone(const drk_graph_t *g);

/* Interns a string in the graph's arena. */
const char *drk_graph_str(drk_graph_t *g, const char *s);
/* Copies dims into the graph's arena. */
drk_shape_t drk_graph_shape(drk_graph_t *g, int rank, const drk_dim_t *dims);
drk_shape_t drk_graph_shape_static(drk_graph_t *g, int rank, const int64_t *sizes);

/* name may be NULL: a fresh name ("v<id>") is made. Names must be unique; the builder
 * does not check (the verifier does). */
drk_value_t *drk_graph_add_input(drk_graph_t *g, const char *name, drk_dtype_t t, drk_shape_t s);
/* data is borrowed (must outlive the graph: arena memory or a registered blob);
 * use drk_graph_add_const_copy to copy small data into the arena. */
drk_value_t *drk_graph_add_const(drk_graph_t *g, const char *name, drk_dtype_t t, drk_shape_t s,
                                 const void *data, size_t nbytes);
drk_value_t *drk_graph_add_const_copy(drk_graph_t *g, const char *name, drk_dtype_t t,
                                      drk_shape_t s, const void *data, size_t nbytes);
/* A constant not listed in g->consts (used for TENSOR attributes). */
drk_value_t *drk_graph_new_const_value(drk_graph_t *g, const char *name, drk_dtype_t t,
                                       drk_shape_t s, const void *data, size_t nbytes);
void drk_graph_add_output(drk_graph_t *g, drk_value_t *v);
/* Specializes the graph on a value of input `name` (TensorRT's shape-tensor values, given at
 * build time): the input becomes a constant holding a copy of data, so passes and the GPU
 * lowering see it (Slice starts, Pad pads, Reduce axes ... given as graph inputs). dtype and
 * rank must match the input's; its static dims must match dims, symbolic ones take them.
 * The input leaves g->inputs (later inputs move up one index). Errors name the input. */
bool drk_graph_freeze_input(drk_graph_t *g, const char *name, drk_dtype_t t, int rank, const int64_t *dims,
                            const void *data, size_t nbytes, drk_diag_t *d);

/* Names for values a pass or an importer adds. Value names must be unique in a graph and the
 * builder does not check (the verifier does), so every pass that makes up a name takes it
 * from here: base itself when no value of g has it and no earlier call returned or reserved
 * it, else "<base>_1", "<base>_2", ... (the first free one). The name is reserved at once, so
 * two calls with one base never return the same name, even before a value carries it.
 * The index behind it records the name of every value made through this builder from
 * drk_graph_create on (also of values since dropped, so it never depends on g->nodes being
 * complete while a pass rebuilds it); a value renamed by hand must take its new name from
 * here. Returns arena memory of g. */
const char *drk_graph_unique_name(drk_graph_t *g, const char *base);
/* printf form of drk_graph_unique_name: the base is the formatted text. */
const char *drk_graph_unique_namef(drk_graph_t *g, const char *fmt, ...) DRK_PRINTF(2, 3);
/* Marks name as used without a value (an importer claiming the names of values it will
 * create later, so fresh names made before then cannot take them). */
void drk_graph_reserve_name(drk_graph_t *g, const char *name);
/* Whether name is a value's name in g or was returned or reserved by the functions above. */
bool drk_graph_name_taken(drk_graph_t *g, const char *name);

/* Appends a node with n_outputs fresh result values (dtype F32, unknown rank until set by
 * the caller or shape inference). out_names may be NULL or hold NULLs. */
drk_node_t *drk_graph_add_node(drk_graph_t *g, drk_op_t op, int n_inputs, drk_value_t *const *inputs,
                               int n_outputs, const char *const *out_names, drk_loc_t loc);

/* by takes over old's first result value (its name, its users, graph outputs that read it):
 * by's own fresh outputs[0] is dropped, and old is marked dead (eliminate_dead removes it). */
void drk_node_take_result(drk_node_t *old, drk_node_t *by);

/* What a drk_graph_rewrite_nodes callback did with a node. */
typedef enum { DRK_REWRITE_KEPT, DRK_REWRITE_DONE, DRK_REWRITE_FAILED } drk_rewrite_t;
/* Calls rewrite(g, n, ctx) on every node of g, in order; the nodes it adds (drk_graph_add_node)
 * land right after n, so the order stays topological when they only read n's inputs. A
 * rewritten node stays in the list, dead (drk_node_take_result). Stops at the first FAILED
 * (returns false; also false when out of memory); *out_n_rewritten (may be NULL) counts DONE. */
bool drk_graph_rewrite_nodes(drk_graph_t *g, drk_rewrite_t (*rewrite)(drk_graph_t *g, drk_node_t *n, void *ctx), void *ctx,
                             size_t *out_n_rewritten);

drk_attr_t *drk_node_add_attr(drk_graph_t *g, drk_node_t *n, const char *name, drk_attr_kind_t kind);
void drk_node_set_int(drk_graph_t *g, drk_node_t *n, const char *name, int64_t v);
void drk_node_set_float(drk_graph_t *g, drk_node_t *n, const char *name, double v);
void drk_node_set_string(drk_graph_t *g, drk_node_t *n, const char *name, const char *v);
void drk_node_set_ints(drk_graph_t *g, drk_node_t *n, const char *name, size_t count, const int64_t *v);
void drk_node_set_floats(drk_graph_t *g, drk_node_t *n, const char *name, size_t count, const double *v);

/* ---- queries ---- */
const drk_attr_t *drk_node_attr(const drk_node_t *n, const char *name);
int64_t drk_node_attr_int(const drk_node_t *n, const char *name, int64_t dflt);
double drk_node_attr_float(const drk_node_t *n, const char *name, double dflt);
const char *drk_node_attr_string(const drk_node_t *n, const char *name, const char *dflt);
/* Returns the ints of an INTS attribute (count in *out_n), or NULL if absent. */
const int64_t *drk_node_attr_ints(const drk_node_t *n, const char *name, size_t *out_n);
drk_node_t *drk_node_input_def(const drk_node_t *n, int i);

/* ---- text form (.drkg) ---- */
/* Prints g in its textual form. print(parse(print(g))) == print(g). */
void drk_graph_print(const drk_graph_t *g, FILE *out);
/* Parses the textual form; on error reports `file:line:col: error: ...` through d and
 * returns NULL. Reentrant. */
drk_graph_t *drk_graph_parse(const char *text, size_t len, const char *filename, drk_diag_t *d);
/* Checks structural invariants (SSA, arity, defined-before-use, unique names, dtype and
 * shape consistency where both are known); reports each problem with the node's location. */
bool drk_graph_verify(const drk_graph_t *g, drk_diag_t *d);
/* Like drk_graph_print, but constant data (graph constants and TENSOR attributes) larger
 * than max_const_bytes prints as `elided(N bytes)`, which the parser rejects with "constant
 * data elided". SIZE_MAX prints everything (drk_graph_print). For dumps meant for reading. */
void drk_graph_print_ex(const drk_graph_t *g, FILE *out, size_t max_const_bytes);
/* The text form in malloc'ed memory (NUL-terminated, length in *out_len if not NULL); the
 * caller frees it with free(). Returns NULL if memory runs out. */
char *drk_graph_print_string(const drk_graph_t *g, size_t max_const_bytes, size_t *out_len);

/* Element i of constant v (v->kind == DRK_VALUE_CONST, any numeric dtype) as a double; 0 for
 * dtypes without a numeric reading. */
double drk_value_const_f64(const drk_value_t *v, int64_t i);
/* An ONNX axis in [-rank, rank) as an index in [0, rank) (callers check the range). */
static inline int drk_axis_norm(int64_t axis, int rank) { return (int)(axis < 0 ? axis + rank : axis); }

/* Binds symbolic dims to sizes in place, e.g. "batch=2,seq=64": every dim named so, on graph
 * inputs and on any value, becomes static. Run before drk_pass_pipeline_canonicalize.
 * Unknown names in spec are an error (reported with the list of symbolic dims the graph
 * has); a malformed spec too. */
bool drk_graph_bind_dims(drk_graph_t *g, const char *spec, drk_diag_t *d);

/* Ops that only move or alias data and that fusion reads through as views of their input
 * (index maps): the aliases (drk_op_aliases_input), Transpose, Expand and Slice. */
bool drk_op_is_view(drk_op_t op);

/* For an integer value v (a graph input): the largest exclusive bound its elements may take
 * as indices, the smallest indexed axis of the Gathers that read it (through casts and
 * views), capped at dflt. Random test inputs stay in range with it (token type ids: 2). */
int64_t drk_graph_index_bound(const drk_graph_t *g, const drk_value_t *v, int64_t dflt);

#endif
