/* Tile IR: the kernel-level IR (see docs/tile-ir.md and ../shared/DESIGN.md).
 *
 * A module holds layouts and kernels. A kernel is one GPU function: typed parameters, a
 * launch shape (grid, block, optional cluster, dynamic shared memory bytes) and a body
 * region. Values are SSA and typed: scalars (uniform per program), global pointers, tiles
 * in registers (static shape, element dtype or pointer-to-dtype, and an explicit layout
 * that says how the tile is spread over threads), shared-memory buffers (shape, dtype,
 * shared layout with swizzle, placed at an explicit byte offset) and TMA descriptors. Every
 * op is explicit enough to be lowered on its own: no backend needs a global analysis.
 *
 * Ownership: a module owns an arena; every layout, kernel, region, op, value, attribute
 * and string hangs off it and lives until drk_tile_module_destroy(). All getters borrow.
 * The builder does not check semantics; drk_tile_verify() does and reports
 * `file:line:col: error: msg` through a drk_diag_t. */
#ifndef DRK_TILE_H
#define DRK_TILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "graph.h" /* drk_dtype_t */
#include "support.h"

#define DRK_TILE_MAX_RANK 5

/* ---- ops ---- */
typedef enum drk_tile_opcode {
#define DRK_TILE_OP(E, name, mino, maxo, nres, minr, maxr, flags, attrs) DRK_TOP_##E,
#include "tile_ops.def"
#undef DRK_TILE_OP
  DRK_TOP_COUNT
} drk_tile_opcode_t;

enum { DRK_TOPF_NONE = 0, DRK_TOPF_EWB = 1, DRK_TOPF_EWU = 2, DRK_TOPF_TERM = 4 };

typedef struct drk_tile_op_info {
  const char *name;
  int min_operands, max_operands; /* max -1: any */
  int n_results;                  /* -1: any */
  int min_regions, max_regions;
  unsigned flags;
  const char *attrs; /* "a b ?c": required a, b; optional c */
} drk_tile_op_info_t;

const drk_tile_op_info_t *drk_tile_op_info(drk_tile_opcode_t op);
const char *drk_tile_op_name(drk_tile_opcode_t op);
bool drk_tile_op_from_name(const char *name, size_t len, drk_tile_opcode_t *out_op);

/* ---- layouts ---- */
typedef enum drk_tile_layout_kind {
  DRK_TL_BLOCKED,  /* blocked{spt, tpw, wpc, order}: contiguous spt elements per thread */
  DRK_TL_SLICE,    /* slice{parent, dim}: parent with dimension `dim` removed (reductions) */
  DRK_TL_MMA_SYNC, /* mma_sync{wpc, instr = [16, 8]}: accumulator of mma.sync m16n8kK */
  DRK_TL_WGMMA,    /* wgmma{wpc, instr = [64, N]}: accumulator of wgmma m64nNk* */
  DRK_TL_MFMA,     /* mfma{wpc, instr = [32, 32] | [16, 16]}: accumulator of MFMA */
  DRK_TL_DOT_OP,   /* dot_op{parent, op_idx, k_width}: A (0) or B (1) operand of parent */
  DRK_TL_SHARED,   /* shared{swizzle = 0|32|64|128, order}: shared memory, swizzled */
  DRK_TL_COUNT
} drk_tile_layout_kind_t;

typedef struct drk_tile_layout drk_tile_layout_t;
struct drk_tile_layout {
  const char *name; /* printed as #name; unique in the module */
  drk_tile_layout_kind_t kind;
  int rank; /* BLOCKED: len(spt); SHARED: len(order); MMA kinds, DOT_OP: 2; SLICE: parent-1 */
  int spt[DRK_TILE_MAX_RANK], tpw[DRK_TILE_MAX_RANK], wpc[DRK_TILE_MAX_RANK];
  int order[DRK_TILE_MAX_RANK]; /* fastest-varying dimension first */
  int instr[2];                 /* MMA kinds: instruction tile M x N */
  const drk_tile_layout_t *parent; /* SLICE, DOT_OP */
  int dim;                         /* SLICE */
  int op_idx, k_width;             /* DOT_OP */
  int swizzle;                     /* SHARED: bytes, 0 = none */
  drk_loc_t loc;
};

const char *drk_tile_layout_kind_name(drk_tile_layout_kind_t k);
/* Structural equality (names ignored). */
bool drk_tile_layout_equal(const drk_tile_layout_t *a, const drk_tile_layout_t *b);
/* Warps the layout spreads a tile over (product of wpc; through parents); 0 for SHARED. */
int drk_tile_layout_num_warps(const drk_tile_layout_t *l);
/* Checks the layout's own fields; on failure writes a message to msg and returns false. */
bool drk_tile_layout_check(const drk_tile_layout_t *l, char *msg, size_t n);

/* ---- types ---- */
typedef enum drk_tile_type_kind {
  DRK_TT_SCALAR, /* dtype, or ptr<dtype> (a global address) when is_ptr: `i32`, `ptr<f16>` */
  DRK_TT_TILE,   /* registers: `tile<128x64xf16, #L>`, `tile<128xptr<f32>, #L>` */
  DRK_TT_SMEM,   /* shared memory buffer: `smem<3x128x64xf16, #S>` (rank may be 0) */
  DRK_TT_TMADESC /* TMA descriptor (grid-constant param): `tmadesc<64x64xf16, #S>`, box shape */
} drk_tile_type_kind_t;

typedef struct drk_tile_type {
  drk_tile_type_kind_t kind;
  drk_dtype_t dtype;
  bool is_ptr; /* SCALAR/TILE: elements are global pointers to dtype */
  int rank;
  int64_t dims[DRK_TILE_MAX_RANK];
  const drk_tile_layout_t *layout; /* TILE, SMEM, TMADESC; NULL for SCALAR */
} drk_tile_type_t;

drk_tile_type_t drk_tile_type_scalar(drk_dtype_t t);
drk_tile_type_t drk_tile_type_ptr(drk_dtype_t pointee);
drk_tile_type_t drk_tile_type_tile(drk_dtype_t t, int rank, const int64_t *dims, const drk_tile_layout_t *l);
drk_tile_type_t drk_tile_type_ptr_tile(drk_dtype_t pointee, int rank, const int64_t *dims,
                                       const drk_tile_layout_t *l);
drk_tile_type_t drk_tile_type_smem(drk_dtype_t t, int rank, const int64_t *dims, const drk_tile_layout_t *l);
drk_tile_type_t drk_tile_type_tmadesc(drk_dtype_t t, int rank, const int64_t *dims, const drk_tile_layout_t *l);
/* Structural equality (layouts compared with drk_tile_layout_equal). */
bool drk_tile_type_equal(const drk_tile_type_t *a, const drk_tile_type_t *b);
bool drk_tile_type_same_shape(const drk_tile_type_t *a, const drk_tile_type_t *b);
/* Element count, saturating at INT64_MAX; 1 for scalars. */
int64_t drk_tile_type_numel(const drk_tile_type_t *t);
/* Writes the textual form ("tile<128xf32, #blk>") into buf (truncated to n). */
void drk_tile_type_format(const drk_tile_type_t *t, char *buf, size_t n);

/* ---- IR objects ---- */
typedef struct drk_tile_op drk_tile_op_t;
typedef struct drk_tile_region drk_tile_region_t;
typedef struct drk_tile_kernel drk_tile_kernel_t;

typedef struct drk_tile_value {
  uint32_t id;      /* unique in the module */
  const char *name; /* printed as %name; must be unique in its kernel (verified) */
  drk_tile_type_t type;
  drk_tile_op_t *def;        /* op result: producer, else NULL */
  int index;                 /* result index, region argument index or parameter index */
  drk_tile_region_t *arg_of; /* region argument: its region, else NULL */
  drk_tile_kernel_t *param_of; /* kernel parameter: its kernel, else NULL */
  drk_loc_t loc;
} drk_tile_value_t;

typedef enum drk_tile_attr_kind {
  DRK_TA_INT,    /* 16 */
  DRK_TA_FLOAT,  /* 1.5, -inf */
  DRK_TA_IDENT,  /* max, mma_sync, producer */
  DRK_TA_INTS,   /* [1, 0] */
  DRK_TA_LAYOUT  /* #name */
} drk_tile_attr_kind_t;

typedef struct drk_tile_attr {
  const char *name;
  drk_tile_attr_kind_t kind;
  int64_t i;
  double f;
  const char *s;
  size_t n;
  int64_t *ints;
  const drk_tile_layout_t *layout;
  drk_loc_t loc;
} drk_tile_attr_t;

struct drk_tile_region {
  int n_args;
  drk_tile_value_t **args; /* FOR: induction variable, then loop-carried values */
  size_t n_ops, cap_ops;
  drk_tile_op_t **ops;
  drk_tile_op_t *parent; /* NULL for a kernel body */
  drk_tile_kernel_t *kernel;
  drk_loc_t loc;
};

struct drk_tile_op {
  uint32_t id;
  drk_tile_opcode_t code;
  int n_operands, n_results, n_attrs, n_regions;
  drk_tile_value_t **operands;
  drk_tile_value_t **results;
  drk_tile_attr_t *attrs;
  size_t cap_attrs;
  drk_tile_region_t **regions;
  drk_tile_region_t *parent;
  drk_loc_t loc;
};

/* A grid dimension: cdiv(param, c) when param != NULL (param: integer scalar parameter),
 * else the constant c. */
typedef struct drk_tile_grid_dim {
  drk_tile_value_t *param;
  int64_t c;
} drk_tile_grid_dim_t;

struct drk_tile_kernel {
  const char *name; /* printed as @name */
  int n_params;
  size_t cap_params;
  drk_tile_value_t **params;
  drk_tile_attr_t **param_attrs; /* per parameter: attribute array (NULL if none) */
  int *param_n_attrs;
  drk_tile_grid_dim_t grid[3];
  int64_t block;      /* threads per program (CTA) */
  int64_t cluster[3]; /* {1,1,1}: no cluster */
  int64_t smem;       /* dynamic shared memory bytes; local_alloc offsets live in it */
  drk_tile_region_t *body;
  drk_loc_t loc;
};

typedef struct drk_tile_module {
  drk_arena_t *arena;
  const char *source; /* file the module came from, for messages; may be NULL */
  size_t n_layouts, cap_layouts;
  drk_tile_layout_t **layouts;
  size_t n_kernels, cap_kernels;
  drk_tile_kernel_t **kernels;
  uint32_t next_value_id, next_op_id;
} drk_tile_module_t;

/* ---- builder ---- */
drk_tile_module_t *drk_tile_module_create(const char *source);
void drk_tile_module_destroy(drk_tile_module_t *m);
const char *drk_tile_str(drk_tile_module_t *m, const char *s);

/* Adds a copy of *proto (kind and its fields) to the module, or returns an existing layout
 * that is structurally equal. proto->name NULL: a fresh name ("L<n>"). Not checked. */
const drk_tile_layout_t *drk_tile_layout_add(drk_tile_module_t *m, const drk_tile_layout_t *proto);
const drk_tile_layout_t *drk_tile_layout_blocked(drk_tile_module_t *m, int rank, const int *spt,
                                                 const int *tpw, const int *wpc, const int *order);
const drk_tile_layout_t *drk_tile_layout_slice(drk_tile_module_t *m, const drk_tile_layout_t *parent, int dim);
const drk_tile_layout_t *drk_tile_layout_mma(drk_tile_module_t *m, drk_tile_layout_kind_t kind, int wpc_m,
                                             int wpc_n, int instr_m, int instr_n);
const drk_tile_layout_t *drk_tile_layout_dot_op(drk_tile_module_t *m, const drk_tile_layout_t *parent,
                                                int op_idx, int k_width);
const drk_tile_layout_t *drk_tile_layout_shared(drk_tile_module_t *m, int swizzle, int rank, const int *order);
const drk_tile_layout_t *drk_tile_layout_find(const drk_tile_module_t *m, const char *name);

/* A kernel with block 128, grid {1,1,1}, no cluster, smem 0 and an empty body. */
drk_tile_kernel_t *drk_tile_kernel_create(drk_tile_module_t *m, const char *name, drk_loc_t loc);
/* name may be NULL: a fresh name ("v<id>"). */
drk_tile_value_t *drk_tile_kernel_add_param(drk_tile_module_t *m, drk_tile_kernel_t *k, const char *name,
                                            drk_tile_type_t t, drk_loc_t loc);
drk_tile_attr_t *drk_tile_param_add_attr(drk_tile_module_t *m, drk_tile_kernel_t *k, int param,
                                         const char *name, drk_tile_attr_kind_t kind);

/* A free-standing region (not yet owned by an op); its argument values are created here. */
drk_tile_region_t *drk_tile_region_create(drk_tile_module_t *m, drk_tile_kernel_t *k, int n_args,
                                          const drk_tile_type_t *arg_types, const char *const *arg_names,
                                          drk_loc_t loc);
/* Makes an op with fresh result values (result_names may be NULL or hold NULLs) and the
 * given regions (which become owned by the op), without placing it anywhere. */
drk_tile_op_t *drk_tile_op_create(drk_tile_module_t *m, drk_tile_opcode_t code, int n_operands,
                                  drk_tile_value_t *const *operands, int n_results,
                                  const drk_tile_type_t *result_types, const char *const *result_names,
                                  int n_regions, drk_tile_region_t *const *regions, drk_loc_t loc);
void drk_tile_region_append(drk_tile_module_t *m, drk_tile_region_t *r, drk_tile_op_t *op);

drk_tile_attr_t *drk_tile_op_add_attr(drk_tile_module_t *m, drk_tile_op_t *op, const char *name,
                                      drk_tile_attr_kind_t kind);
void drk_tile_op_set_int(drk_tile_module_t *m, drk_tile_op_t *op, const char *name, int64_t v);
void drk_tile_op_set_float(drk_tile_module_t *m, drk_tile_op_t *op, const char *name, double v);
void drk_tile_op_set_ident(drk_tile_module_t *m, drk_tile_op_t *op, const char *name, const char *v);
void drk_tile_op_set_ints(drk_tile_module_t *m, drk_tile_op_t *op, const char *name, size_t n, const int64_t *v);
void drk_tile_op_set_layout(drk_tile_module_t *m, drk_tile_op_t *op, const char *name, const drk_tile_layout_t *l);
const drk_tile_attr_t *drk_tile_op_attr(const drk_tile_op_t *op, const char *name);
int64_t drk_tile_op_attr_int(const drk_tile_op_t *op, const char *name, int64_t dflt);
const char *drk_tile_op_attr_ident(const drk_tile_op_t *op, const char *name, const char *dflt);

/* Insertion-point builder: appends ops at the end of the innermost open region. Regions
 * opened by *_begin must be closed by the matching *_end (LIFO; asserted). */
#define DRK_TILE_BUILDER_MAX_DEPTH 32
typedef struct drk_tile_builder {
  drk_tile_module_t *m;
  drk_tile_kernel_t *k;
  drk_loc_t loc; /* given to every op built; set it as lowering moves along */
  int depth;
  drk_tile_region_t *stack[DRK_TILE_BUILDER_MAX_DEPTH]; /* stack[depth-1]: insertion region */
  drk_tile_op_t *open[DRK_TILE_BUILDER_MAX_DEPTH];      /* the op owning each open region */
} drk_tile_builder_t;

/* Inserts at the end of k's body. */
void drk_tile_builder_init(drk_tile_builder_t *b, drk_tile_module_t *m, drk_tile_kernel_t *k);
/* Appends an op (see drk_tile_op_create) with no regions. */
drk_tile_op_t *drk_tile_build(drk_tile_builder_t *b, drk_tile_opcode_t code, int n_operands,
                              drk_tile_value_t *const *operands, int n_results,
                              const drk_tile_type_t *result_types);
/* One-result shorthand: returns the result. */
drk_tile_value_t *drk_tile_build1(drk_tile_builder_t *b, drk_tile_opcode_t code, int n_operands,
                                  drk_tile_value_t *const *operands, drk_tile_type_t result_type);
/* Common leaves. */
drk_tile_value_t *drk_tile_build_const_int(drk_tile_builder_t *b, int64_t v, drk_tile_type_t t);
drk_tile_value_t *drk_tile_build_const_float(drk_tile_builder_t *b, double v, drk_tile_type_t t);

/* `for`: opens the body; its argument 0 is the induction variable (type of lb), then one
 * carried value per init. Close with drk_tile_build_for_end, which appends `yield` with
 * the n_init values and returns the loop op (results: the final carried values). */
drk_tile_op_t *drk_tile_build_for_begin(drk_tile_builder_t *b, drk_tile_value_t *lb, drk_tile_value_t *ub,
                                        drk_tile_value_t *step, int n_init, drk_tile_value_t *const *init);
drk_tile_op_t *drk_tile_build_for_end(drk_tile_builder_t *b, int n_yield, drk_tile_value_t *const *yield);
/* `if`: opens the then-region. build_else yields from then and opens the else-region;
 * build_if_end yields from the open region and closes the op. */
drk_tile_op_t *drk_tile_build_if_begin(drk_tile_builder_t *b, drk_tile_value_t *cond, int n_results,
                                       const drk_tile_type_t *result_types);
void drk_tile_build_else(drk_tile_builder_t *b, int n_yield, drk_tile_value_t *const *yield);
drk_tile_op_t *drk_tile_build_if_end(drk_tile_builder_t *b, int n_yield, drk_tile_value_t *const *yield);
/* `warp_group {role, first_warp, num_warps}`: opens its region; end closes it. */
drk_tile_op_t *drk_tile_build_warp_group_begin(drk_tile_builder_t *b, const char *role, int first_warp,
                                               int num_warps);
drk_tile_op_t *drk_tile_build_warp_group_end(drk_tile_builder_t *b);

/* ---- text form (.drkt) ---- */
/* Prints m in its textual form. print(parse(print(m))) == print(m), byte for byte. */
void drk_tile_print(const drk_tile_module_t *m, FILE *out);
void drk_tile_kernel_print(const drk_tile_module_t *m, const drk_tile_kernel_t *k, FILE *out);
/* The kernel's text with its name, its value names and the names of the layouts it uses
 * replaced by their order of first appearance (%0, %1, ..., #0, ...), followed by the
 * definitions of those layouts (and their parents): two kernels have one canonical text
 * exactly when they are the same kernel up to names, so they compile to the same code, in
 * one module or in two. malloc'd, *out_len bytes (NUL-terminated); NULL when out of memory. */
char *drk_tile_kernel_canonical(const drk_tile_module_t *m, const drk_tile_kernel_t *k, size_t *out_len);
/* One layout definition line ("#name = kind{...}\n"), as drk_tile_print writes it. */
void drk_tile_layout_print(const drk_tile_layout_t *l, FILE *out);
/* Parses the textual form; on error reports `file:line:col: error: ...` through d and
 * returns NULL (nothing leaks). Reentrant. The result is syntactically well formed (names
 * resolve, layouts are valid) but must still be verified. */
drk_tile_module_t *drk_tile_parse(const char *text, size_t len, const char *filename, drk_diag_t *d);
/* Checks every kernel (SSA and dominance, op operand/result/attribute/region rules, types,
 * shapes, layouts, launch limits); reports each problem at the op's location. */
bool drk_tile_verify(const drk_tile_module_t *m, drk_diag_t *d);

#endif
