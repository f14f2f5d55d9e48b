/* Tile IR data structures and builder.
 *
 * Requires: nothing beyond support.h and the dtype table. Guarantees: every object is
 * allocated from the module's arena; the builder never checks semantics (drk_tile_verify
 * does) but asserts its own protocol (balanced begin/end, nesting depth). */
#include "tile.h"

#include <string.h>

static const drk_tile_op_info_t op_table[DRK_TOP_COUNT] = {
#define DRK_TILE_OP(E, name, mino, maxo, nres, minr, maxr, flags, attrs) \
  {#name, mino, maxo, nres, minr, maxr, DRK_TOPF_##flags, attrs},
#include "tile_ops.def"
#undef DRK_TILE_OP
};

const drk_tile_op_info_t *drk_tile_op_info(drk_tile_opcode_t op) {
  DRK_ASSERT((unsigned)op < DRK_TOP_COUNT);
  return &op_table[op];
}

const char *drk_tile_op_name(drk_tile_opcode_t op) { return drk_tile_op_info(op)->name; }

bool drk_tile_op_from_name(const char *name, size_t len, drk_tile_opcode_t *out_op) {
  for (int i = 0; i < DRK_TOP_COUNT; i++) {
    if (strlen(op_table[i].name) == len && memcmp(op_table[i].name, name, len) == 0) {
      *out_op = (drk_tile_opcode_t)i;
      return true;
    }
  }
  return false;
}

/* ---- layouts ---- */
static const char *const layout_kind_names[DRK_TL_COUNT] = {"blocked", "slice",  "mma_sync", "wgmma",
                                                             "mfma",    "dot_op", "shared"};

const char *drk_tile_layout_kind_name(drk_tile_layout_kind_t k) {
  DRK_ASSERT((unsigned)k < DRK_TL_COUNT);
  return layout_kind_names[k];
}

static bool ints_eq(const int *a, const int *b, int n) { return n <= 0 || memcmp(a, b, sizeof(int) * (size_t)n) == 0; }

bool drk_tile_layout_equal(const drk_tile_layout_t *a, const drk_tile_layout_t *b) {
  if (a == b) return true;
  if (!a || !b || a->kind != b->kind || a->rank != b->rank) return false;
  switch (a->kind) {
  case DRK_TL_BLOCKED:
    return ints_eq(a->spt, b->spt, a->rank) && ints_eq(a->tpw, b->tpw, a->rank) &&
           ints_eq(a->wpc, b->wpc, a->rank) && ints_eq(a->order, b->order, a->rank);
  case DRK_TL_SLICE: return a->dim == b->dim && drk_tile_layout_equal(a->parent, b->parent);
  case DRK_TL_MMA_SYNC:
  case DRK_TL_WGMMA:
  case DRK_TL_MFMA: return ints_eq(a->wpc, b->wpc, 2) && ints_eq(a->instr, b->instr, 2);
  case DRK_TL_DOT_OP:
    return a->op_idx == b->op_idx && a->k_width == b->k_width && drk_tile_layout_equal(a->parent, b->parent);
  case DRK_TL_SHARED: return a->swizzle == b->swizzle && ints_eq(a->order, b->order, a->rank);
  case DRK_TL_COUNT: break;
  }
  return false;
}

int drk_tile_layout_num_warps(const drk_tile_layout_t *l) {
  switch (l->kind) {
  case DRK_TL_SLICE:
  case DRK_TL_DOT_OP: return l->parent ? drk_tile_layout_num_warps(l->parent) : 0;
  case DRK_TL_SHARED: return 0;
  default: break;
  }
  int64_t w = 1;
  int r = l->kind == DRK_TL_BLOCKED ? l->rank : 2;
  for (int i = 0; i < r; i++) {
    w *= l->wpc[i];
    if (w > 1 << 20) return 1 << 20; /* nonsense either way; keep it from overflowing */
  }
  return (int)w;
}

static bool is_perm(const int *p, int n) {
  unsigned seen = 0;
  for (int i = 0; i < n; i++) {
    if (p[i] < 0 || p[i] >= n || (seen >> p[i]) & 1) return false;
    seen |= 1u << p[i];
  }
  return true;
}

static bool pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

bool drk_tile_layout_check(const drk_tile_layout_t *l, char *msg, size_t n) {
  const char *kn = drk_tile_layout_kind_name(l->kind);
  switch (l->kind) {
  case DRK_TL_BLOCKED: {
    if (l->rank < 1 || l->rank > DRK_TILE_MAX_RANK) {
      snprintf(msg, n, "blocked layout needs rank 1..%d", DRK_TILE_MAX_RANK);
      return false;
    }
    int64_t t = 1;
    for (int i = 0; i < l->rank; i++) {
      if (!pow2(l->spt[i]) || !pow2(l->tpw[i]) || !pow2(l->wpc[i])) {
        snprintf(msg, n, "blocked layout: spt, tpw and wpc entries must be powers of two");
        return false;
      }
      t *= l->tpw[i];
    }
    if (t != 32) {
      snprintf(msg, n, "blocked layout: product of tpw is %lld, must be 32 (threads per warp)", (long long)t);
      return false;
    }
    if (!is_perm(l->order, l->rank)) {
      snprintf(msg, n, "blocked layout: order must be a permutation of 0..%d", l->rank - 1);
      return false;
    }
    return true;
  }
  case DRK_TL_SLICE:
    if (!l->parent || l->parent->kind == DRK_TL_SHARED || l->parent->rank < 2) {
      snprintf(msg, n, "slice layout needs a register layout parent of rank >= 2");
      return false;
    }
    if (l->dim < 0 || l->dim >= l->parent->rank) {
      snprintf(msg, n, "slice layout: dim %d out of range for parent rank %d", l->dim, l->parent->rank);
      return false;
    }
    return true;
  case DRK_TL_MMA_SYNC:
  case DRK_TL_WGMMA:
  case DRK_TL_MFMA: {
    if (!pow2(l->wpc[0]) || !pow2(l->wpc[1])) {
      snprintf(msg, n, "%s layout: wpc entries must be powers of two", kn);
      return false;
    }
    bool ok;
    if (l->kind == DRK_TL_MMA_SYNC) ok = l->instr[0] == 16 && l->instr[1] == 8;
    else if (l->kind == DRK_TL_WGMMA)
      ok = l->instr[0] == 64 && l->instr[1] >= 8 && l->instr[1] <= 256 && l->instr[1] % 8 == 0 &&
           (l->wpc[0] * l->wpc[1]) % 4 == 0 && l->wpc[0] % 4 == 0;
    else ok = (l->instr[0] == 32 && l->instr[1] == 32) || (l->instr[0] == 16 && l->instr[1] == 16);
    if (!ok) {
      snprintf(msg, n,
               l->kind == DRK_TL_MMA_SYNC ? "mma_sync layout: instr must be [16, 8]"
               : l->kind == DRK_TL_WGMMA  ? "wgmma layout: instr must be [64, N] with N in 8..256 a multiple of 8, and wpc[0] a multiple of 4"
                                          : "mfma layout: instr must be [32, 32] or [16, 16]");
      return false;
    }
    return true;
  }
  case DRK_TL_DOT_OP:
    if (!l->parent || l->parent->rank != 2 || l->parent->kind == DRK_TL_SHARED || l->parent->kind == DRK_TL_SLICE ||
        l->parent->kind == DRK_TL_DOT_OP) {
      snprintf(msg, n, "dot_op layout: parent must be an mma_sync, wgmma, mfma or rank-2 blocked layout");
      return false;
    }
    if (l->op_idx != 0 && l->op_idx != 1) {
      snprintf(msg, n, "dot_op layout: op_idx must be 0 (A) or 1 (B)");
      return false;
    }
    if (!pow2(l->k_width) || l->k_width > 32) {
      snprintf(msg, n, "dot_op layout: k_width must be a power of two <= 32");
      return false;
    }
    return true;
  case DRK_TL_SHARED:
    if (l->swizzle != 0 && l->swizzle != 32 && l->swizzle != 64 && l->swizzle != 128) {
      snprintf(msg, n, "shared layout: swizzle must be 0, 32, 64 or 128 (bytes)");
      return false;
    }
    if (l->rank < 1 || l->rank > DRK_TILE_MAX_RANK || !is_perm(l->order, l->rank)) {
      snprintf(msg, n, "shared layout: order must be a permutation of 0..rank-1 (rank 1..%d)", DRK_TILE_MAX_RANK);
      return false;
    }
    return true;
  case DRK_TL_COUNT: break;
  }
  snprintf(msg, n, "unknown layout kind");
  return false;
}

const drk_tile_layout_t *drk_tile_layout_find(const drk_tile_module_t *m, const char *name) {
  for (size_t i = 0; i < m->n_layouts; i++)
    if (strcmp(m->layouts[i]->name, name) == 0) return m->layouts[i];
  return NULL;
}

const drk_tile_layout_t *drk_tile_layout_add(drk_tile_module_t *m, const drk_tile_layout_t *proto) {
  if (!proto->name) {
    for (size_t i = 0; i < m->n_layouts; i++)
      if (drk_tile_layout_equal(m->layouts[i], proto)) return m->layouts[i];
  }
  drk_tile_layout_t *l = drk_arena_memdup(m->arena, proto, sizeof *proto);
  if (proto->name) {
    l->name = drk_arena_strdup(m->arena, proto->name);
  } else {
    for (size_t k = m->n_layouts;; k++) {
      char buf[32];
      snprintf(buf, sizeof buf, "L%zu", k);
      if (!drk_tile_layout_find(m, buf)) {
        l->name = drk_arena_strdup(m->arena, buf);
        break;
      }
    }
  }
  DRK_VEC_PUSH(m->arena, m->layouts, m->n_layouts, m->cap_layouts, l);
  return l;
}

const drk_tile_layout_t *drk_tile_layout_blocked(drk_tile_module_t *m, int rank, const int *spt, const int *tpw,
                                                 const int *wpc, const int *order) {
  DRK_ASSERT(rank >= 1 && rank <= DRK_TILE_MAX_RANK);
  drk_tile_layout_t p = {0};
  p.kind = DRK_TL_BLOCKED;
  p.rank = rank;
  p.loc = drk_loc_none;
  for (int i = 0; i < rank; i++) {
    p.spt[i] = spt[i];
    p.tpw[i] = tpw[i];
    p.wpc[i] = wpc[i];
    p.order[i] = order[i];
  }
  return drk_tile_layout_add(m, &p);
}

const drk_tile_layout_t *drk_tile_layout_slice(drk_tile_module_t *m, const drk_tile_layout_t *parent, int dim) {
  drk_tile_layout_t p = {0};
  p.kind = DRK_TL_SLICE;
  p.parent = parent;
  p.dim = dim;
  p.rank = parent->rank - 1;
  p.loc = drk_loc_none;
  return drk_tile_layout_add(m, &p);
}

const drk_tile_layout_t *drk_tile_layout_mma(drk_tile_module_t *m, drk_tile_layout_kind_t kind, int wpc_m, int wpc_n,
                                             int instr_m, int instr_n) {
  DRK_ASSERT(kind == DRK_TL_MMA_SYNC || kind == DRK_TL_WGMMA || kind == DRK_TL_MFMA);
  drk_tile_layout_t p = {0};
  p.kind = kind;
  p.rank = 2;
  p.wpc[0] = wpc_m;
  p.wpc[1] = wpc_n;
  p.instr[0] = instr_m;
  p.instr[1] = instr_n;
  p.loc = drk_loc_none;
  return drk_tile_layout_add(m, &p);
}

const drk_tile_layout_t *drk_tile_layout_dot_op(drk_tile_module_t *m, const drk_tile_layout_t *parent, int op_idx,
                                                int k_width) {
  drk_tile_layout_t p = {0};
  p.kind = DRK_TL_DOT_OP;
  p.rank = 2;
  p.parent = parent;
  p.op_idx = op_idx;
  p.k_width = k_width;
  p.loc = drk_loc_none;
  return drk_tile_layout_add(m, &p);
}

const drk_tile_layout_t *drk_tile_layout_shared(drk_tile_module_t *m, int swizzle, int rank, const int *order) {
  DRK_ASSERT(rank >= 1 && rank <= DRK_TILE_MAX_RANK);
  drk_tile_layout_t p = {0};
  p.kind = DRK_TL_SHARED;
  p.rank = rank;
  p.swizzle = swizzle;
  for (int i = 0; i < rank; i++) p.order[i] = order[i];
  p.loc = drk_loc_none;
  return drk_tile_layout_add(m, &p);
}

/* ---- types ---- */
drk_tile_type_t drk_tile_type_scalar(drk_dtype_t t) {
  drk_tile_type_t r = {0};
  r.kind = DRK_TT_SCALAR;
  r.dtype = t;
  return r;
}

drk_tile_type_t drk_tile_type_ptr(drk_dtype_t pointee) {
  drk_tile_type_t r = drk_tile_type_scalar(pointee);
  r.is_ptr = true;
  return r;
}

static drk_tile_type_t shaped(drk_tile_type_kind_t k, drk_dtype_t t, int rank, const int64_t *dims,
                              const drk_tile_layout_t *l) {
  DRK_ASSERT(rank >= 0 && rank <= DRK_TILE_MAX_RANK);
  drk_tile_type_t r = {0};
  r.kind = k;
  r.dtype = t;
  r.rank = rank;
  for (int i = 0; i < rank; i++) r.dims[i] = dims[i];
  r.layout = l;
  return r;
}

drk_tile_type_t drk_tile_type_tile(drk_dtype_t t, int rank, const int64_t *dims, const drk_tile_layout_t *l) {
  return shaped(DRK_TT_TILE, t, rank, dims, l);
}

drk_tile_type_t drk_tile_type_ptr_tile(drk_dtype_t pointee, int rank, const int64_t *dims,
                                       const drk_tile_layout_t *l) {
  drk_tile_type_t r = shaped(DRK_TT_TILE, pointee, rank, dims, l);
  r.is_ptr = true;
  return r;
}

drk_tile_type_t drk_tile_type_smem(drk_dtype_t t, int rank, const int64_t *dims, const drk_tile_layout_t *l) {
  return shaped(DRK_TT_SMEM, t, rank, dims, l);
}

drk_tile_type_t drk_tile_type_tmadesc(drk_dtype_t t, int rank, const int64_t *dims, const drk_tile_layout_t *l) {
  return shaped(DRK_TT_TMADESC, t, rank, dims, l);
}

bool drk_tile_type_same_shape(const drk_tile_type_t *a, const drk_tile_type_t *b) {
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

bool drk_tile_type_equal(const drk_tile_type_t *a, const drk_tile_type_t *b) {
  return a->kind == b->kind && a->dtype == b->dtype && a->is_ptr == b->is_ptr && drk_tile_type_same_shape(a, b) &&
         drk_tile_layout_equal(a->layout, b->layout);
}

int64_t drk_tile_type_numel(const drk_tile_type_t *t) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++) {
    if (t->dims[i] <= 0) return 0;
    if (n > INT64_MAX / t->dims[i]) return INT64_MAX;
    n *= t->dims[i];
  }
  return n;
}

void drk_tile_type_format(const drk_tile_type_t *t, char *buf, size_t n) {
  static const char *const kinds[] = {"", "tile", "smem", "tmadesc"};
  const char *dt = drk_dtype_name(t->dtype);
  if (t->kind == DRK_TT_SCALAR) {
    if (t->is_ptr) snprintf(buf, n, "ptr<%s>", dt);
    else snprintf(buf, n, "%s", dt);
    return;
  }
  size_t at = 0;
  int w = snprintf(buf, n, "%s<", kinds[t->kind]);
  for (int i = 0; i < t->rank && w >= 0; i++) {
    at += (size_t)w;
    w = snprintf(buf + (at < n ? at : n), at < n ? n - at : 0, "%lldx", (long long)t->dims[i]);
  }
  if (w < 0) return;
  at += (size_t)w;
  if (t->is_ptr)
    snprintf(buf + (at < n ? at : n), at < n ? n - at : 0, "ptr<%s>, #%s>", dt, t->layout ? t->layout->name : "?");
  else
    snprintf(buf + (at < n ? at : n), at < n ? n - at : 0, "%s, #%s>", dt, t->layout ? t->layout->name : "?");
}

/* ---- module, kernels, values ---- */
drk_tile_module_t *drk_tile_module_create(const char *source) {
  drk_arena_t *a = drk_arena_create();
  drk_tile_module_t *m = drk_arena_alloc(a, sizeof *m);
  m->arena = a;
  m->source = drk_arena_strdup(a, source);
  return m;
}

void drk_tile_module_destroy(drk_tile_module_t *m) {
  if (m) drk_arena_destroy(m->arena);
}

const char *drk_tile_str(drk_tile_module_t *m, const char *s) { return drk_arena_strdup(m->arena, s); }

static drk_tile_value_t *new_value(drk_tile_module_t *m, const char *name, drk_tile_type_t t, drk_loc_t loc) {
  drk_tile_value_t *v = drk_arena_alloc(m->arena, sizeof *v);
  v->id = m->next_value_id++;
  v->name = name ? drk_arena_strdup(m->arena, name) : drk_arena_printf(m->arena, "v%u", v->id);
  v->type = t;
  v->loc = loc;
  return v;
}

drk_tile_kernel_t *drk_tile_kernel_create(drk_tile_module_t *m, const char *name, drk_loc_t loc) {
  drk_tile_kernel_t *k = drk_arena_alloc(m->arena, sizeof *k);
  k->name = drk_arena_strdup(m->arena, name);
  k->loc = loc;
  for (int i = 0; i < 3; i++) {
    k->grid[i].c = 1;
    k->cluster[i] = 1;
  }
  k->block = 128;
  k->body = drk_tile_region_create(m, k, 0, NULL, NULL, loc);
  DRK_VEC_PUSH(m->arena, m->kernels, m->n_kernels, m->cap_kernels, k);
  return k;
}

drk_tile_value_t *drk_tile_kernel_add_param(drk_tile_module_t *m, drk_tile_kernel_t *k, const char *name,
                                            drk_tile_type_t t, drk_loc_t loc) {
  drk_tile_value_t *v = new_value(m, name, t, loc);
  v->param_of = k;
  v->index = k->n_params;
  size_t cap = k->cap_params, n = (size_t)k->n_params;
  k->params = drk_arena_grow(m->arena, k->params, sizeof *k->params, &cap, n + 1);
  cap = k->cap_params;
  k->param_attrs = drk_arena_grow(m->arena, k->param_attrs, sizeof *k->param_attrs, &cap, n + 1);
  cap = k->cap_params;
  k->param_n_attrs = drk_arena_grow(m->arena, k->param_n_attrs, sizeof *k->param_n_attrs, &cap, n + 1);
  k->cap_params = cap;
  k->params[n] = v;
  k->param_attrs[n] = NULL;
  k->param_n_attrs[n] = 0;
  k->n_params++;
  return v;
}

static drk_tile_attr_t *attr_append(drk_tile_module_t *m, drk_tile_attr_t **arr, int *n, size_t *cap,
                                    const char *name, drk_tile_attr_kind_t kind) {
  size_t nn = (size_t)*n;
  *arr = drk_arena_grow(m->arena, *arr, sizeof **arr, cap, nn + 1);
  drk_tile_attr_t *a = &(*arr)[nn];
  memset(a, 0, sizeof *a);
  a->name = drk_arena_strdup(m->arena, name);
  a->kind = kind;
  a->loc = drk_loc_none;
  (*n)++;
  return a;
}

drk_tile_attr_t *drk_tile_param_add_attr(drk_tile_module_t *m, drk_tile_kernel_t *k, int param, const char *name,
                                         drk_tile_attr_kind_t kind) {
  DRK_ASSERT(param >= 0 && param < k->n_params);
  /* Parameters rarely carry more than one or two attributes: grow by copying exactly. */
  size_t cap = (size_t)k->param_n_attrs[param];
  return attr_append(m, &k->param_attrs[param], &k->param_n_attrs[param], &cap, name, kind);
}

drk_tile_region_t *drk_tile_region_create(drk_tile_module_t *m, drk_tile_kernel_t *k, int n_args,
                                          const drk_tile_type_t *arg_types, const char *const *arg_names,
                                          drk_loc_t loc) {
  drk_tile_region_t *r = drk_arena_alloc(m->arena, sizeof *r);
  r->kernel = k;
  r->loc = loc;
  r->n_args = n_args;
  if (n_args > 0) r->args = drk_arena_alloc(m->arena, sizeof *r->args * (size_t)n_args);
  for (int i = 0; i < n_args; i++) {
    r->args[i] = new_value(m, arg_names ? arg_names[i] : NULL, arg_types[i], loc);
    r->args[i]->arg_of = r;
    r->args[i]->index = i;
  }
  return r;
}

drk_tile_op_t *drk_tile_op_create(drk_tile_module_t *m, drk_tile_opcode_t code, int n_operands,
                                  drk_tile_value_t *const *operands, int n_results,
                                  const drk_tile_type_t *result_types, const char *const *result_names,
                                  int n_regions, drk_tile_region_t *const *regions, drk_loc_t loc) {
  DRK_ASSERT((unsigned)code < DRK_TOP_COUNT && n_operands >= 0 && n_results >= 0 && n_regions >= 0);
  drk_tile_op_t *op = drk_arena_alloc(m->arena, sizeof *op);
  op->id = m->next_op_id++;
  op->code = code;
  op->loc = loc;
  op->n_operands = n_operands;
  op->n_results = n_results;
  op->n_regions = n_regions;
  if (n_operands) op->operands = drk_arena_memdup(m->arena, operands, sizeof *operands * (size_t)n_operands);
  if (n_results) op->results = drk_arena_alloc(m->arena, sizeof *op->results * (size_t)n_results);
  for (int i = 0; i < n_results; i++) {
    op->results[i] = new_value(m, result_names ? result_names[i] : NULL, result_types[i], loc);
    op->results[i]->def = op;
    op->results[i]->index = i;
  }
  if (n_regions) op->regions = drk_arena_memdup(m->arena, regions, sizeof *regions * (size_t)n_regions);
  for (int i = 0; i < n_regions; i++) op->regions[i]->parent = op;
  return op;
}

void drk_tile_region_append(drk_tile_module_t *m, drk_tile_region_t *r, drk_tile_op_t *op) {
  op->parent = r;
  DRK_VEC_PUSH(m->arena, r->ops, r->n_ops, r->cap_ops, op);
}

drk_tile_attr_t *drk_tile_op_add_attr(drk_tile_module_t *m, drk_tile_op_t *op, const char *name,
                                      drk_tile_attr_kind_t kind) {
  return attr_append(m, &op->attrs, &op->n_attrs, &op->cap_attrs, name, kind);
}

/* Setters replace an attribute of the same name so a pass can update in place. */
static drk_tile_attr_t *set_attr(drk_tile_module_t *m, drk_tile_op_t *op, const char *name,
                                 drk_tile_attr_kind_t kind) {
  for (int i = 0; i < op->n_attrs; i++) {
    if (strcmp(op->attrs[i].name, name) == 0) {
      drk_tile_attr_t *a = &op->attrs[i];
      const char *nm = a->name;
      memset(a, 0, sizeof *a);
      a->name = nm;
      a->kind = kind;
      a->loc = drk_loc_none;
      return a;
    }
  }
  return drk_tile_op_add_attr(m, op, name, kind);
}

void drk_tile_op_set_int(drk_tile_module_t *m, drk_tile_op_t *op, const char *name, int64_t v) {
  set_attr(m, op, name, DRK_TA_INT)->i = v;
}

void drk_tile_op_set_float(drk_tile_module_t *m, drk_tile_op_t *op, const char *name, double v) {
  set_attr(m, op, name, DRK_TA_FLOAT)->f = v;
}

void drk_tile_op_set_ident(drk_tile_module_t *m, drk_tile_op_t *op, const char *name, const char *v) {
  set_attr(m, op, name, DRK_TA_IDENT)->s = drk_arena_strdup(m->arena, v);
}

void drk_tile_op_set_ints(drk_tile_module_t *m, drk_tile_op_t *op, const char *name, size_t n, const int64_t *v) {
  drk_tile_attr_t *a = set_attr(m, op, name, DRK_TA_INTS);
  a->n = n;
  a->ints = drk_arena_memdup(m->arena, v, sizeof *v * n);
}

void drk_tile_op_set_layout(drk_tile_module_t *m, drk_tile_op_t *op, const char *name, const drk_tile_layout_t *l) {
  set_attr(m, op, name, DRK_TA_LAYOUT)->layout = l;
}

const drk_tile_attr_t *drk_tile_op_attr(const drk_tile_op_t *op, const char *name) {
  for (int i = 0; i < op->n_attrs; i++)
    if (strcmp(op->attrs[i].name, name) == 0) return &op->attrs[i];
  return NULL;
}

int64_t drk_tile_op_attr_int(const drk_tile_op_t *op, const char *name, int64_t dflt) {
  const drk_tile_attr_t *a = drk_tile_op_attr(op, name);
  return a && a->kind == DRK_TA_INT ? a->i : dflt;
}

const char *drk_tile_op_attr_ident(const drk_tile_op_t *op, const char *name, const char *dflt) {
  const drk_tile_attr_t *a = drk_tile_op_attr(op, name);
  return a && a->kind == DRK_TA_IDENT ? a->s : dflt;
}

/* ---- insertion-point builder ---- */
void drk_tile_builder_init(drk_tile_builder_t *b, drk_tile_module_t *m, drk_tile_kernel_t *k) {
  memset(b, 0, sizeof *b);
  b->m = m;
  b->k = k;
  b->loc = drk_loc_none;
  b->stack[0] = k->body;
  b->depth = 1;
}

static drk_tile_region_t *cur(drk_tile_builder_t *b) {
  DRK_ASSERT(b->depth > 0);
  return b->stack[b->depth - 1];
}

drk_tile_op_t *drk_tile_build(drk_tile_builder_t *b, drk_tile_opcode_t code, int n_operands,
                              drk_tile_value_t *const *operands, int n_results, const drk_tile_type_t *result_types) {
  drk_tile_op_t *op = drk_tile_op_create(b->m, code, n_operands, operands, n_results, result_types, NULL, 0, NULL, b->loc);
  drk_tile_region_append(b->m, cur(b), op);
  return op;
}

drk_tile_value_t *drk_tile_build1(drk_tile_builder_t *b, drk_tile_opcode_t code, int n_operands,
                                  drk_tile_value_t *const *operands, drk_tile_type_t result_type) {
  return drk_tile_build(b, code, n_operands, operands, 1, &result_type)->results[0];
}

drk_tile_value_t *drk_tile_build_const_int(drk_tile_builder_t *b, int64_t v, drk_tile_type_t t) {
  drk_tile_op_t *op = drk_tile_build(b, DRK_TOP_CONSTANT, 0, NULL, 1, &t);
  drk_tile_op_set_int(b->m, op, "value", v);
  return op->results[0];
}

drk_tile_value_t *drk_tile_build_const_float(drk_tile_builder_t *b, double v, drk_tile_type_t t) {
  drk_tile_op_t *op = drk_tile_build(b, DRK_TOP_CONSTANT, 0, NULL, 1, &t);
  drk_tile_op_set_float(b->m, op, "value", v);
  return op->results[0];
}

static void push(drk_tile_builder_t *b, drk_tile_op_t *op, drk_tile_region_t *r) {
  DRK_ASSERT(b->depth < DRK_TILE_BUILDER_MAX_DEPTH);
  b->open[b->depth] = op;
  b->stack[b->depth++] = r;
}

static drk_tile_op_t *pop(drk_tile_builder_t *b, drk_tile_opcode_t expect) {
  DRK_ASSERT(b->depth > 1 && b->open[b->depth - 1]->code == expect);
  b->depth--;
  return b->open[b->depth];
}

static void yield(drk_tile_builder_t *b, int n, drk_tile_value_t *const *v) {
  drk_tile_build(b, DRK_TOP_YIELD, n, v, 0, NULL);
}

drk_tile_op_t *drk_tile_build_for_begin(drk_tile_builder_t *b, drk_tile_value_t *lb, drk_tile_value_t *ub,
                                        drk_tile_value_t *step, int n_init, drk_tile_value_t *const *init) {
  drk_arena_t *a = b->m->arena;
  drk_tile_value_t **ops = drk_arena_alloc(a, sizeof *ops * (size_t)(3 + n_init));
  drk_tile_type_t *types = drk_arena_alloc(a, sizeof *types * (size_t)(1 + n_init));
  ops[0] = lb;
  ops[1] = ub;
  ops[2] = step;
  types[0] = lb->type;
  for (int i = 0; i < n_init; i++) {
    ops[3 + i] = init[i];
    types[1 + i] = init[i]->type;
  }
  drk_tile_region_t *body = drk_tile_region_create(b->m, b->k, 1 + n_init, types, NULL, b->loc);
  drk_tile_op_t *op = drk_tile_op_create(b->m, DRK_TOP_FOR, 3 + n_init, ops, n_init, types + 1, NULL, 1, &body, b->loc);
  drk_tile_region_append(b->m, cur(b), op);
  push(b, op, body);
  return op;
}

drk_tile_op_t *drk_tile_build_for_end(drk_tile_builder_t *b, int n_yield, drk_tile_value_t *const *v) {
  yield(b, n_yield, v);
  return pop(b, DRK_TOP_FOR);
}

drk_tile_op_t *drk_tile_build_if_begin(drk_tile_builder_t *b, drk_tile_value_t *cond, int n_results,
                                       const drk_tile_type_t *result_types) {
  drk_tile_region_t *then_r = drk_tile_region_create(b->m, b->k, 0, NULL, NULL, b->loc);
  drk_tile_op_t *op = drk_tile_op_create(b->m, DRK_TOP_IF, 1, &cond, n_results, result_types, NULL, 1, &then_r, b->loc);
  drk_tile_region_append(b->m, cur(b), op);
  push(b, op, then_r);
  return op;
}

void drk_tile_build_else(drk_tile_builder_t *b, int n_yield, drk_tile_value_t *const *v) {
  yield(b, n_yield, v);
  drk_tile_op_t *op = b->open[b->depth - 1];
  DRK_ASSERT(op->code == DRK_TOP_IF && op->n_regions == 1);
  drk_tile_region_t *else_r = drk_tile_region_create(b->m, b->k, 0, NULL, NULL, b->loc);
  else_r->parent = op;
  drk_tile_region_t **regs = drk_arena_alloc(b->m->arena, sizeof *regs * 2);
  regs[0] = op->regions[0];
  regs[1] = else_r;
  op->regions = regs;
  op->n_regions = 2;
  b->stack[b->depth - 1] = else_r;
}

drk_tile_op_t *drk_tile_build_if_end(drk_tile_builder_t *b, int n_yield, drk_tile_value_t *const *v) {
  yield(b, n_yield, v);
  return pop(b, DRK_TOP_IF);
}

drk_tile_op_t *drk_tile_build_warp_group_begin(drk_tile_builder_t *b, const char *role, int first_warp,
                                               int num_warps) {
  drk_tile_region_t *r = drk_tile_region_create(b->m, b->k, 0, NULL, NULL, b->loc);
  drk_tile_op_t *op = drk_tile_op_create(b->m, DRK_TOP_WARP_GROUP, 0, NULL, 0, NULL, NULL, 1, &r, b->loc);
  drk_tile_op_set_ident(b->m, op, "role", role);
  drk_tile_op_set_int(b->m, op, "first_warp", first_warp);
  drk_tile_op_set_int(b->m, op, "num_warps", num_warps);
  drk_tile_region_append(b->m, cur(b), op);
  push(b, op, r);
  return op;
}

drk_tile_op_t *drk_tile_build_warp_group_end(drk_tile_builder_t *b) { return pop(b, DRK_TOP_WARP_GROUP); }
