/* Graph IR data structures and builder; the tables come from dtypes.def and graph_ops.def. */
#include "graph.h"

#include <stdlib.h>
#include <string.h>
#include <ctype.h>
#include <errno.h>

#include "tensor.h"

typedef struct {
  const char *name;
  int bits;
  char kind;
  int onnx;
} dtype_info_t;

static const dtype_info_t dtype_table[] = {
#define DRK_DTYPE(E, name, bits, kind, onnx) {#name, bits, (#kind)[0], onnx},
#include "dtypes.def"
#undef DRK_DTYPE
};

const char *drk_dtype_name(drk_dtype_t t) {
  DRK_ASSERT(t < DRK_DT_COUNT);
  return dtype_table[t].name;
}
int drk_dtype_bits(drk_dtype_t t) { return dtype_table[t].bits; }
bool drk_dtype_is_float(drk_dtype_t t) { return dtype_table[t].kind == 'F'; }
bool drk_dtype_is_signed_int(drk_dtype_t t) { return dtype_table[t].kind == 'I'; }
bool drk_dtype_is_int(drk_dtype_t t) { return dtype_table[t].kind == 'I' || dtype_table[t].kind == 'U'; }

size_t drk_dtype_nbytes(drk_dtype_t t, int64_t n) {
  if (n <= 0) return 0;
  return ((size_t)n * (size_t)dtype_table[t].bits + 7) / 8;
}

bool drk_dtype_from_name(const char *name, size_t len, drk_dtype_t *out_t) {
  for (int i = 0; i < DRK_DT_COUNT; i++)
    if (strlen(dtype_table[i].name) == len && memcmp(dtype_table[i].name, name, len) == 0) {
      *out_t = (drk_dtype_t)i;
      return true;
    }
  return false;
}

bool drk_dtype_from_onnx(int code, drk_dtype_t *out_t) {
  for (int i = 0; i < DRK_DT_COUNT; i++)
    if (dtype_table[i].onnx == code) {
      *out_t = (drk_dtype_t)i;
      return true;
    }
  return false;
}

int drk_dtype_to_onnx(drk_dtype_t t) { return dtype_table[t].onnx; }

static const drk_op_info_t op_table[] = {
#define DRK_OP(E, name, mi, ma, mo, mxo, flags) {#name, mi, ma, mo, mxo, DRK_OPF_##flags},
#include "graph_ops.def"
#undef DRK_OP
};

const drk_op_info_t *drk_op_info(drk_op_t op) {
  DRK_ASSERT(op < DRK_OP_COUNT);
  return &op_table[op];
}
const char *drk_op_name(drk_op_t op) { return drk_op_info(op)->name; }

bool drk_op_aliases_input(drk_op_t op) {
  return op == DRK_OP_RESHAPE || op == DRK_OP_FLATTEN || op == DRK_OP_SQUEEZE || op == DRK_OP_UNSQUEEZE ||
         op == DRK_OP_IDENTITY;
}

bool drk_op_from_name(const char *name, size_t len, drk_op_t *out_op) {
  for (int i = 0; i < DRK_OP_COUNT; i++)
    if (strlen(op_table[i].name) == len && memcmp(op_table[i].name, name, len) == 0) {
      *out_op = (drk_op_t)i;
      return true;
    }
  return false;
}

bool drk_shape_is_static(const drk_shape_t *s) {
  if (s->rank < 0) return false;
  for (int i = 0; i < s->rank; i++)
    if (s->dims[i].sym) return false;
  return true;
}

bool drk_numel_mul(int64_t *acc, int64_t d) {
  int64_t r;
  if (d < 0 || d > DRK_MAX_NUMEL || *acc < 0 || __builtin_mul_overflow(*acc, d, &r) || r > DRK_MAX_NUMEL) return false;
  *acc = r;
  return true;
}

int64_t drk_shape_numel(const drk_shape_t *s) {
  if (!drk_shape_is_static(s)) return -1;
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++)
    if (!drk_numel_mul(&n, s->dims[i].size)) return -1;
  return n;
}

bool drk_shape_equal(const drk_shape_t *a, const drk_shape_t *b) {
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++) {
    const drk_dim_t *x = &a->dims[i], *y = &b->dims[i];
    if ((x->sym == NULL) != (y->sym == NULL)) return false;
    if (x->sym ? strcmp(x->sym, y->sym) != 0 : x->size != y->size) return false;
  }
  return true;
}

/* An open-addressing set of names (at most half full), in the graph's arena; the strings are
 * the values' own (or the arena copies the functions below return). */
typedef struct drk_name_set {
  const char **slots;
  size_t cap, n;
} drk_name_set_t;

drk_graph_t *drk_graph_create(const char *name) {
  drk_arena_t *a = drk_arena_create();
  drk_graph_t *g = drk_arena_alloc(a, sizeof *g);
  g->arena = a;
  g->name = drk_arena_strdup(a, name ? name : "main");
  g->names = drk_arena_alloc(a, sizeof *g->names); /* every value's name from the start */
  return g;
}

void drk_graph_destroy(drk_graph_t *g) {
  if (!g) return;
  for (size_t i = 0; i < g->n_blobs; i++)
    if (g->blobs[i].release) g->blobs[i].release(g->blobs[i].base, g->blobs[i].size);
  drk_arena_destroy(g->arena);
}

void drk_graph_add_blob(drk_graph_t *g, void *base, size_t size, void (*release)(void *, size_t)) {
  drk_blob_t b = {base, size, release};
  DRK_VEC_PUSH(g->arena, g->blobs, g->n_blobs, g->cap_blobs, b);
}

const char *drk_graph_str(drk_graph_t *g, const char *s) { return drk_arena_strdup(g->arena, s); }

drk_shape_t drk_graph_shape(drk_graph_t *g, int rank, const drk_dim_t *dims) {
  drk_shape_t s = {rank, NULL};
  if (rank > 0) {
    s.dims = drk_arena_alloc(g->arena, sizeof(drk_dim_t) * (size_t)rank);
    for (int i = 0; i < rank; i++) {
      s.dims[i] = dims[i];
      if (dims[i].sym) {
        s.dims[i].sym = drk_arena_strdup(g->arena, dims[i].sym);
        s.dims[i].size = -1;
      }
    }
  }
  return s;
}

drk_shape_t drk_graph_shape_static(drk_graph_t *g, int rank, const int64_t *sizes) {
  drk_shape_t s = {rank, NULL};
  if (rank > 0) {
    s.dims = drk_arena_alloc(g->arena, sizeof(drk_dim_t) * (size_t)rank);
    for (int i = 0; i < rank; i++) s.dims[i].size = sizes[i];
  }
  return s;
}

/* ---- value names ---- */
static size_t name_slot(const drk_name_set_t *ns, const char *s) {
  size_t mask = ns->cap - 1, h = (size_t)drk_hash_fnv1a(s, strlen(s), 0) & mask;
  while (ns->slots[h] && strcmp(ns->slots[h], s) != 0) h = (h + 1) & mask;
  return h;
}

static void name_set_add(drk_graph_t *g, const char *s) {
  drk_name_set_t *ns = g->names;
  if (!s) return;
  if (2 * (ns->n + 1) > ns->cap) {
    const char **old = ns->slots;
    size_t oc = ns->cap;
    ns->cap = oc ? 2 * oc : 1024;
    ns->slots = drk_arena_alloc(g->arena, sizeof *ns->slots * ns->cap);
    ns->n = 0;
    for (size_t i = 0; i < oc; i++)
      if (old[i]) ns->slots[name_slot(ns, old[i])] = old[i], ns->n++;
  }
  size_t h = name_slot(ns, s);
  if (!ns->slots[h]) ns->slots[h] = s, ns->n++;
}

static void name_set_add_node(drk_graph_t *g, const drk_node_t *n) {
  for (int j = 0; j < n->n_outputs; j++)
    if (n->outputs[j]) name_set_add(g, n->outputs[j]->name);
  for (int j = 0; j < n->n_attrs; j++)
    if (n->attrs[j].kind == DRK_ATTR_TENSOR && n->attrs[j].tensor) name_set_add(g, n->attrs[j].tensor->name);
}

/* A graph not made by drk_graph_create (none today) gets its index from what it holds. */
static drk_name_set_t *names_index(drk_graph_t *g) {
  if (g->names) return g->names;
  g->names = drk_arena_alloc(g->arena, sizeof *g->names);
  for (size_t i = 0; i < g->n_inputs; i++) name_set_add(g, g->inputs[i]->name);
  for (size_t i = 0; i < g->n_consts; i++) name_set_add(g, g->consts[i]->name);
  for (size_t i = 0; i < g->n_outputs; i++)
    if (g->outputs[i]) name_set_add(g, g->outputs[i]->name);
  for (size_t i = 0; i < g->n_nodes; i++) name_set_add_node(g, g->nodes[i]);
  return g->names;
}

bool drk_graph_name_taken(drk_graph_t *g, const char *name) {
  drk_name_set_t *ns = names_index(g);
  return ns->cap && ns->slots[name_slot(ns, name)] != NULL; /* cap 0: a graph without values yet */
}

void drk_graph_reserve_name(drk_graph_t *g, const char *name) {
  names_index(g);
  if (!drk_graph_name_taken(g, name)) name_set_add(g, drk_arena_strdup(g->arena, name));
}

const char *drk_graph_unique_name(drk_graph_t *g, const char *base) {
  const char *s = base ? base : "v";
  if (drk_graph_name_taken(g, s)) {
    /* base_1, base_2, ...: the first free one (a number already taken by a value of the
     * model, "x_1" next to "x", is skipped) */
    for (unsigned long k = 1;; k++) {
      s = drk_arena_printf(g->arena, "%s_%lu", base ? base : "v", k);
      if (!drk_graph_name_taken(g, s)) break;
    }
  } else {
    s = drk_arena_strdup(g->arena, s);
  }
  name_set_add(g, s);
  return s;
}

const char *drk_graph_unique_namef(drk_graph_t *g, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char buf[512];
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < 0) buf[0] = 0;
  if (n < (int)sizeof buf) return drk_graph_unique_name(g, buf);
  va_start(ap, fmt);
  char *big = drk_arena_alloc(g->arena, (size_t)n + 1);
  vsnprintf(big, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return drk_graph_unique_name(g, big);
}

static drk_value_t *new_value(drk_graph_t *g, const char *name, drk_value_kind_t kind, drk_dtype_t t,
                              drk_shape_t s) {
  drk_value_t *v = drk_arena_alloc(g->arena, sizeof *v);
  v->id = g->next_value_id++;
  if (name) v->name = drk_arena_strdup(g->arena, name);
  else if (g->names) v->name = drk_graph_unique_namef(g, "v%u", v->id);
  else v->name = drk_arena_printf(g->arena, "v%u", v->id);
  v->kind = kind;
  v->dtype = t;
  v->shape = s;
  v->def_index = -1;
  v->loc = drk_loc_none;
  if (g->names) name_set_add(g, v->name);
  return v;
}

drk_value_t *drk_graph_add_input(drk_graph_t *g, const char *name, drk_dtype_t t, drk_shape_t s) {
  drk_value_t *v = new_value(g, name, DRK_VALUE_INPUT, t, s);
  DRK_VEC_PUSH(g->arena, g->inputs, g->n_inputs, g->cap_inputs, v);
  return v;
}

drk_value_t *drk_graph_new_const_value(drk_graph_t *g, const char *name, drk_dtype_t t, drk_shape_t s,
                                       const void *data, size_t nbytes) {
  drk_value_t *v = new_value(g, name, DRK_VALUE_CONST, t, s);
  v->data = data;
  v->nbytes = nbytes;
  return v;
}

drk_value_t *drk_graph_add_const(drk_graph_t *g, const char *name, drk_dtype_t t, drk_shape_t s,
                                 const void *data, size_t nbytes) {
  drk_value_t *v = drk_graph_new_const_value(g, name, t, s, data, nbytes);
  DRK_VEC_PUSH(g->arena, g->consts, g->n_consts, g->cap_consts, v);
  return v;
}

drk_value_t *drk_graph_add_const_copy(drk_graph_t *g, const char *name, drk_dtype_t t, drk_shape_t s,
                                      const void *data, size_t nbytes) {
  return drk_graph_add_const(g, name, t, s, drk_arena_memdup(g->arena, data, nbytes), nbytes);
}

void drk_graph_add_output(drk_graph_t *g, drk_value_t *v) {
  DRK_VEC_PUSH(g->arena, g->outputs, g->n_outputs, g->cap_outputs, v);
}

bool drk_graph_freeze_input(drk_graph_t *g, const char *name, drk_dtype_t t, int rank, const int64_t *dims,
                            const void *data, size_t nbytes, drk_diag_t *d) {
  size_t k = 0;
  while (k < g->n_inputs && strcmp(g->inputs[k]->name, name) != 0) k++;
  if (k == g->n_inputs) {
    drk_diag_error(d, drk_loc_none, "cannot freeze input '%s': the graph has no input of that name", name);
    return false;
  }
  drk_value_t *v = g->inputs[k];
  if (v->dtype != t || (v->shape.rank >= 0 && v->shape.rank != rank)) {
    drk_diag_error(d, v->loc, "cannot freeze input '%s': it is %s of rank %d, the value is %s of rank %d", name,
                   drk_dtype_name(v->dtype), v->shape.rank, drk_dtype_name(t), rank);
    return false;
  }
  for (int i = 0; v->shape.rank >= 0 && i < rank; i++)
    if (!v->shape.dims[i].sym && v->shape.dims[i].size >= 0 && v->shape.dims[i].size != dims[i]) {
      drk_diag_error(d, v->loc, "cannot freeze input '%s': dim %d is %lld, the value has %lld", name, i,
                     (long long)v->shape.dims[i].size, (long long)dims[i]);
      return false;
    }
  int64_t n = 1;
  for (int i = 0; i < rank; i++) n *= dims[i];
  if ((size_t)n * (size_t)drk_dtype_bits(t) / 8 != nbytes) {
    drk_diag_error(d, v->loc, "cannot freeze input '%s': %zu bytes of data for %lld elements", name, nbytes, (long long)n);
    return false;
  }
  v->kind = DRK_VALUE_CONST;
  v->shape = drk_graph_shape_static(g, rank, dims);
  v->data = drk_arena_memdup(g->arena, data, nbytes ? nbytes : 1);
  v->nbytes = nbytes;
  memmove(g->inputs + k, g->inputs + k + 1, (g->n_inputs - k - 1) * sizeof *g->inputs);
  g->n_inputs--;
  DRK_VEC_PUSH(g->arena, g->consts, g->n_consts, g->cap_consts, v);
  return true;
}

drk_node_t *drk_graph_add_node(drk_graph_t *g, drk_op_t op, int n_inputs, drk_value_t *const *inputs,
                               int n_outputs, const char *const *out_names, drk_loc_t loc) {
  drk_node_t *n = drk_arena_alloc(g->arena, sizeof *n);
  n->id = g->next_node_id++;
  n->op = op;
  n->loc = loc;
  n->n_inputs = n_inputs;
  n->inputs = drk_arena_alloc(g->arena, sizeof(drk_value_t *) * (size_t)(n_inputs + 1));
  for (int i = 0; i < n_inputs; i++) n->inputs[i] = inputs[i];
  n->n_outputs = n_outputs;
  n->outputs = drk_arena_alloc(g->arena, sizeof(drk_value_t *) * (size_t)(n_outputs + 1));
  drk_shape_t unknown = {-1, NULL};
  for (int i = 0; i < n_outputs; i++) {
    drk_value_t *v = new_value(g, out_names ? out_names[i] : NULL, DRK_VALUE_NODE, DRK_DT_F32, unknown);
    v->def = n;
    v->def_index = i;
    v->loc = loc;
    n->outputs[i] = v;
  }
  DRK_VEC_PUSH(g->arena, g->nodes, g->n_nodes, g->cap_nodes, n);
  return n;
}

drk_graph_t *drk_graph_clone(const drk_graph_t *g) {
  drk_graph_t *c = drk_graph_create(g->name);
  drk_value_t **vm = calloc((size_t)g->next_value_id + 1, sizeof *vm);
  if (!c || !vm) {
    drk_graph_destroy(c);
    free(vm);
    return NULL;
  }
  c->source = g->source;
  for (size_t i = 0; i < g->n_inputs; i++) {
    const drk_value_t *v = g->inputs[i];
    drk_value_t *w = drk_graph_add_input(c, v->name, v->dtype, drk_graph_shape(c, v->shape.rank, v->shape.dims));
    w->loc = v->loc;
    vm[v->id] = w;
  }
  for (size_t i = 0; i < g->n_consts; i++) {
    const drk_value_t *v = g->consts[i];
    drk_value_t *w = drk_graph_add_const(c, v->name, v->dtype, drk_graph_shape(c, v->shape.rank, v->shape.dims), v->data,
                                         v->nbytes);
    w->loc = v->loc;
    vm[v->id] = w;
  }
  for (size_t i = 0; i < g->n_nodes; i++) {
    const drk_node_t *n = g->nodes[i];
    if (n->dead) continue;
    drk_value_t *in[256];
    const char *names[64];
    DRK_ASSERT(n->n_inputs <= 256 && n->n_outputs <= 64);
    for (int j = 0; j < n->n_inputs; j++) in[j] = n->inputs[j] ? vm[n->inputs[j]->id] : NULL;
    for (int j = 0; j < n->n_outputs; j++) names[j] = n->outputs[j]->name;
    drk_node_t *m = drk_graph_add_node(c, n->op, n->n_inputs, in, n->n_outputs, names, n->loc);
    m->id = n->id;
    m->n_attrs = n->n_attrs;
    m->attrs = n->n_attrs ? drk_arena_memdup(c->arena, n->attrs, sizeof *n->attrs * (size_t)n->n_attrs) : NULL;
    for (int j = 0; j < n->n_outputs; j++) {
      const drk_value_t *v = n->outputs[j];
      drk_value_t *w = m->outputs[j];
      w->dtype = v->dtype;
      w->shape = drk_graph_shape(c, v->shape.rank, v->shape.dims);
      w->loc = v->loc;
      vm[v->id] = w;
    }
  }
  for (size_t i = 0; i < g->n_outputs; i++) {
    DRK_ASSERT(vm[g->outputs[i]->id]);
    drk_graph_add_output(c, vm[g->outputs[i]->id]);
  }
  for (uint32_t id = 0; id < g->next_value_id; id++)
    if (vm[id]) vm[id]->id = id;
  c->next_value_id = g->next_value_id;
  c->next_node_id = g->next_node_id;
  free(vm);
  return c;
}

void drk_node_take_result(drk_node_t *old, drk_node_t *by) {
  drk_value_t *y = old->outputs[0];
  by->outputs[0] = y;
  y->def = by;
  y->def_index = 0;
  old->dead = true;
}

bool drk_graph_rewrite_nodes(drk_graph_t *g, drk_rewrite_t (*rewrite)(drk_graph_t *g, drk_node_t *n, void *ctx), void *ctx,
                             size_t *out_n_rewritten) {
  size_t done = 0, n_orig = g->n_nodes;
  if (out_n_rewritten) *out_n_rewritten = 0;
  if (!n_orig) return true;
  drk_node_t **orig = malloc(sizeof *orig * n_orig);
  if (!orig) return false;
  memcpy(orig, g->nodes, sizeof *orig * n_orig);
  g->n_nodes = 0; /* pushed again in order, each node's replacements right after it */
  bool ok = true;
  for (size_t i = 0; i < n_orig; i++) {
    drk_node_t *n = orig[i];
    DRK_VEC_PUSH(g->arena, g->nodes, g->n_nodes, g->cap_nodes, n);
    if (!ok) continue;
    drk_rewrite_t r = rewrite(g, n, ctx);
    if (r == DRK_REWRITE_FAILED) ok = false;
    else if (r == DRK_REWRITE_DONE) done++;
  }
  free(orig);
  if (out_n_rewritten) *out_n_rewritten = done;
  return ok;
}

drk_attr_t *drk_node_add_attr(drk_graph_t *g, drk_node_t *n, const char *name, drk_attr_kind_t kind) {
  for (int i = 0; i < n->n_attrs; i++)
    if (strcmp(n->attrs[i].name, name) == 0) {
      memset(&n->attrs[i], 0, sizeof n->attrs[i]);
      n->attrs[i].name = drk_arena_strdup(g->arena, name);
      n->attrs[i].kind = kind;
      return &n->attrs[i];
    }
  drk_attr_t *na = drk_arena_alloc(g->arena, sizeof(drk_attr_t) * (size_t)(n->n_attrs + 1));
  if (n->n_attrs) memcpy(na, n->attrs, sizeof(drk_attr_t) * (size_t)n->n_attrs);
  n->attrs = na;
  drk_attr_t *a = &na[n->n_attrs++];
  a->name = drk_arena_strdup(g->arena, name);
  a->kind = kind;
  return a;
}

void drk_node_set_int(drk_graph_t *g, drk_node_t *n, const char *name, int64_t v) {
  drk_node_add_attr(g, n, name, DRK_ATTR_INT)->i = v;
}
void drk_node_set_float(drk_graph_t *g, drk_node_t *n, const char *name, double v) {
  drk_node_add_attr(g, n, name, DRK_ATTR_FLOAT)->f = v;
}
void drk_node_set_string(drk_graph_t *g, drk_node_t *n, const char *name, const char *v) {
  drk_node_add_attr(g, n, name, DRK_ATTR_STRING)->s = drk_arena_strdup(g->arena, v);
}
void drk_node_set_ints(drk_graph_t *g, drk_node_t *n, const char *name, size_t count, const int64_t *v) {
  drk_attr_t *a = drk_node_add_attr(g, n, name, DRK_ATTR_INTS);
  a->n = count;
  a->ints = drk_arena_memdup(g->arena, v, count * sizeof *v);
}
void drk_node_set_floats(drk_graph_t *g, drk_node_t *n, const char *name, size_t count, const double *v) {
  drk_attr_t *a = drk_node_add_attr(g, n, name, DRK_ATTR_FLOATS);
  a->n = count;
  a->floats = drk_arena_memdup(g->arena, v, count * sizeof *v);
}

const drk_attr_t *drk_node_attr(const drk_node_t *n, const char *name) {
  for (int i = 0; i < n->n_attrs; i++)
    if (strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
  return NULL;
}

int64_t drk_node_attr_int(const drk_node_t *n, const char *name, int64_t dflt) {
  const drk_attr_t *a = drk_node_attr(n, name);
  return a && a->kind == DRK_ATTR_INT ? a->i : dflt;
}

double drk_node_attr_float(const drk_node_t *n, const char *name, double dflt) {
  const drk_attr_t *a = drk_node_attr(n, name);
  if (!a) return dflt;
  if (a->kind == DRK_ATTR_FLOAT) return a->f;
  if (a->kind == DRK_ATTR_INT) return (double)a->i;
  return dflt;
}

const char *drk_node_attr_string(const drk_node_t *n, const char *name, const char *dflt) {
  const drk_attr_t *a = drk_node_attr(n, name);
  return a && a->kind == DRK_ATTR_STRING ? a->s : dflt;
}

const int64_t *drk_node_attr_ints(const drk_node_t *n, const char *name, size_t *out_n) {
  const drk_attr_t *a = drk_node_attr(n, name);
  if (!a || a->kind != DRK_ATTR_INTS) return NULL;
  *out_n = a->n;
  return a->ints ? a->ints : (const int64_t *)"";
}

drk_node_t *drk_node_input_def(const drk_node_t *n, int i) {
  if (i < 0 || i >= n->n_inputs || !n->inputs[i]) return NULL;
  return n->inputs[i]->def;
}

/* ---- constants ---- */
double drk_value_const_f64(const drk_value_t *v, int64_t i) {
  const unsigned char *p = v->data;
  switch (v->dtype) {
  case DRK_DT_F64: { double x; memcpy(&x, p + 8 * i, 8); return x; }
  case DRK_DT_F32: { float x; memcpy(&x, p + 4 * i, 4); return x; }
  case DRK_DT_F16: { uint16_t x; memcpy(&x, p + 2 * i, 2); return drk_f16_to_f32(x); }
  case DRK_DT_BF16: { uint16_t x; memcpy(&x, p + 2 * i, 2); return drk_bf16_to_f32(x); }
  case DRK_DT_I64: { int64_t x; memcpy(&x, p + 8 * i, 8); return (double)x; }
  case DRK_DT_I32: { int32_t x; memcpy(&x, p + 4 * i, 4); return x; }
  case DRK_DT_I16: { int16_t x; memcpy(&x, p + 2 * i, 2); return x; }
  case DRK_DT_I8: return (int8_t)p[i];
  case DRK_DT_U8: case DRK_DT_BOOL: return p[i];
  default: return 0;
  }
}

/* ---- binding symbolic dims ---- */
static int bind_value(drk_value_t *v, const char *name, size_t len, int64_t size) {
  int n = 0;
  if (!v || v->shape.rank <= 0) return 0;
  for (int i = 0; i < v->shape.rank; i++) {
    drk_dim_t *dd = &v->shape.dims[i];
    if (dd->sym && strlen(dd->sym) == len && memcmp(dd->sym, name, len) == 0) {
      dd->sym = NULL;
      dd->size = size;
      n++;
    }
  }
  return n;
}

bool drk_graph_bind_dims(drk_graph_t *g, const char *spec, drk_diag_t *d) {
  const char *p = spec ? spec : "";
  bool ok = true;
  while (*p) {
    while (*p == ',' || isspace((unsigned char)*p)) p++;
    if (!*p) break;
    const char *name = p;
    while (*p && *p != '=' && *p != ',') p++;
    size_t len = (size_t)(p - name);
    while (len && isspace((unsigned char)name[len - 1])) len--;
    if (*p != '=' || !len) {
      drk_diag_error(d, drk_loc_none, "bad dim binding '%s': expected NAME=SIZE[,NAME=SIZE...]", spec);
      return false;
    }
    p++;
    char *end;
    errno = 0;
    long long size = strtoll(p, &end, 10);
    if (end == p || size < 0) {
      drk_diag_error(d, drk_loc_none, "bad dim binding '%s': size of '%.*s' must be a non-negative integer", spec, (int)len, name);
      return false;
    }
    if (errno == ERANGE || size > DRK_MAX_NUMEL) {
      drk_diag_error(d, drk_loc_none, "bad dim binding '%s': size of '%.*s' is %.*s, more than a tensor may have (2^56)",
                     spec, (int)len, name, (int)(end - p), p);
      return false;
    }
    /* binding a name twice would find no symbol the second time and say so, misleadingly */
    for (const char *q = spec; q < name;) {
      while (q < name && (*q == ',' || isspace((unsigned char)*q))) q++;
      const char *qn = q;
      while (q < name && *q != '=' && *q != ',') q++;
      size_t ql = (size_t)(q - qn);
      while (ql && isspace((unsigned char)qn[ql - 1])) ql--;
      if (ql == len && memcmp(qn, name, len) == 0) {
        drk_diag_error(d, drk_loc_none, "bad dim binding '%s': '%.*s' is bound twice", spec, (int)len, name);
        return false;
      }
      while (q < name && *q != ',') q++;
    }
    p = end;
    int n = 0;
    for (size_t i = 0; i < g->n_inputs; i++) n += bind_value(g->inputs[i], name, len, size);
    for (size_t i = 0; i < g->n_outputs; i++) n += bind_value(g->outputs[i], name, len, size);
    for (size_t i = 0; i < g->n_nodes; i++)
      for (int j = 0; j < g->nodes[i]->n_outputs; j++) n += bind_value(g->nodes[i]->outputs[j], name, len, size);
    if (!n) {
      char syms[400] = "";
      size_t sl = 0;
      for (size_t i = 0; i < g->n_inputs; i++)
        for (int j = 0; j < g->inputs[i]->shape.rank; j++) {
          const char *s = g->inputs[i]->shape.dims[j].sym;
          if (s && !strstr(syms, s) && sl + strlen(s) + 3 < sizeof syms) sl += (size_t)snprintf(syms + sl, sizeof syms - sl, "%s%s", sl ? ", " : "", s);
        }
      drk_diag_error(d, drk_loc_none, "no symbolic dim named '%.*s' (the graph's inputs have: %s)", (int)len, name,
                     sl ? syms : "none");
      ok = false;
    }
  }
  return ok;
}

bool drk_op_is_view(drk_op_t op) {
  return drk_op_aliases_input(op) || op == DRK_OP_TRANSPOSE || op == DRK_OP_EXPAND || op == DRK_OP_SLICE;
}

/* Follows v through the ops that pass integer values on unchanged (casts, views) to the
 * Gathers that index with it, taking the smallest size of their indexed axes. */
static int64_t index_bound(const drk_graph_t *g, const drk_value_t *v, int64_t bound, int depth) {
  if (depth > 8) return bound;
  for (size_t i = 0; i < g->n_nodes; i++) {
    const drk_node_t *n = g->nodes[i];
    if (n->dead) continue;
    for (int j = 0; j < n->n_inputs; j++) {
      if (n->inputs[j] != v) continue;
      if ((n->op == DRK_OP_GATHER || n->op == DRK_OP_GATHER_ELEMENTS) && j == 1 && n->inputs[0] &&
          n->inputs[0]->shape.rank > 0) {
        int64_t axis = drk_node_attr_int(n, "axis", 0);
        int r = n->inputs[0]->shape.rank;
        if (axis >= -r && axis < r && !n->inputs[0]->shape.dims[drk_axis_norm(axis, r)].sym) {
          int64_t size = n->inputs[0]->shape.dims[drk_axis_norm(axis, r)].size;
          if (size > 0 && size < bound) bound = size;
        }
      } else if (j == 0 && (n->op == DRK_OP_CAST || drk_op_aliases_input(n->op)) && n->n_outputs == 1) {
        bound = index_bound(g, n->outputs[0], bound, depth + 1);
      }
    }
  }
  return bound;
}

int64_t drk_graph_index_bound(const drk_graph_t *g, const drk_value_t *v, int64_t dflt) {
  return index_bound(g, v, dflt, 0);
}
