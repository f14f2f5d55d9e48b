/* Sibling MatMuls as one wider MatMul: MatMuls that multiply the same activation x
 * [..., M, K] by constant matrices W_i [K, N_i] (LLaMA's q/k/v projections of the normalized
 * hidden state; BERT's and ViT's, each followed by its bias Add) become one
 * x . [W_1 | W_2 | ...] of [..., M, sum N_i] (plus one Add of the concatenated biases), and
 * each former result is a Slice of the columns [off_i, off_i + N_i) of it. The merged
 * product runs as one kernel with a grid sum N_i wide instead of several narrow ones; the
 * Slices are views that flat groups (the rope) and the attention group read in place, and
 * the bias stays a matmul epilogue. A Slice, not a Split: flat groups take a Split only when
 * one of its results is used.
 *
 * Which MatMuls. A member: a live MatMul with x static, rank >= 2 and float, and a constant
 * [K, N_i] of x's dtype, its result static. Its replaced value is its result, or, when that
 * result's only user is an Add with a constant bias of shape [N_i] (or [1, .., 1, N_i]) of
 * the same dtype and the result's shape, that Add's result. A member is left alone unless
 * every user of its replaced value is a view (Reshape, Transpose, Slice, Squeeze,
 * Unsqueeze, Flatten, Identity, Expand: as data input) or a MatMul and the value is no graph
 * output: an elementwise consumer (LLaMA's gate/up feeding SiLU and Mul) is a matmul
 * epilogue the merge would lose. Two or more remaining members of one x merge when all of
 * them have a bias or none has (a bias behind a Slice would lose the epilogue too).
 *
 * Requires: shapes inferred (static where it applies). Guarantees: the same function (each
 * output element is the same dot product over the same K, plus the same bias; the summation
 * order is the matmul kernel's); the replaced values keep their names and users (each becomes
 * a Slice's result); the merged block goes where the first MatMul on x was (its first member,
 * or one that did not qualify), which keeps the topological order since it reads only x and
 * constants. Member MatMuls and Adds are left out of g->nodes and marked dead; run
 * drk_pass_eliminate_dead (drops the old weights) and drk_pass_infer_shapes after it.
 * New values are named after the first member's ("<w>_merged", ...) through
 * drk_graph_unique_name: one bias or weight can be every group's (an exporter keeps a single
 * initializer for identical ones, e.g. the all-zero biases of a freshly initialised model). */
#include <stdlib.h>
#include <string.h>

#include "passes.h"
#include "ir/tensor.h"

#define MAX_MEMBERS 64

typedef struct use {
  int n;              /* input slots reading the value */
  drk_node_t *first;  /* the first reader */
  bool other, output; /* read by a node that is neither a view nor a MatMul; a graph output */
} use_t;

typedef struct member {
  drk_node_t *mm, *add; /* add: the bias Add, or NULL */
  drk_value_t *w, *b, *y; /* y: the replaced value (the Add's result with a bias) */
  int64_t n;
} member_t;

static bool value_static(const drk_value_t *v) {
  return v && v->shape.rank >= 0 && drk_shape_is_static(&v->shape);
}

static use_t *compute_uses(const drk_graph_t *g) {
  use_t *u = calloc(g->next_value_id + 1, sizeof *u);
  if (!u) return NULL;
  for (size_t i = 0; i < g->n_nodes; i++) {
    drk_node_t *n = g->nodes[i];
    if (n->dead) continue;
    for (int j = 0; j < n->n_inputs; j++) {
      const drk_value_t *v = n->inputs[j];
      if (!v || v->id > g->next_value_id) continue;
      use_t *e = &u[v->id];
      if (!e->n++) e->first = n;
      if (!((drk_op_is_view(n->op) && j == 0) || n->op == DRK_OP_MATMUL)) e->other = true;
    }
  }
  for (size_t i = 0; i < g->n_outputs; i++)
    if (g->outputs[i] && g->outputs[i]->id <= g->next_value_id) u[g->outputs[i]->id].output = true;
  return u;
}

/* n multiplies a static float x by a constant [K, N] of x's dtype into a static result. */
static bool candidate(const drk_node_t *n) {
  if (n->op != DRK_OP_MATMUL || n->dead || n->n_inputs != 2 || n->n_outputs != 1) return false;
  if (drk_node_attr_int(n, "result_n", 0)) return false; /* a padded B (pad-matmul-n) */
  const drk_value_t *x = n->inputs[0], *w = n->inputs[1], *y = n->outputs[0];
  if (!x || !w || !y || !value_static(x) || !value_static(y) || x->shape.rank < 2 || x->shape.rank > DRK_MAX_RANK ||
      !drk_dtype_is_float(x->dtype))
    return false;
  int bits = drk_dtype_bits(x->dtype);
  if (bits < 8 || bits % 8) return false;
  if (w->kind != DRK_VALUE_CONST || !w->data || w->dtype != x->dtype || !value_static(w) || w->shape.rank != 2)
    return false;
  int64_t K = x->shape.dims[x->shape.rank - 1].size, N = w->shape.dims[1].size;
  if (w->shape.dims[0].size != K || N < 1 || w->nbytes < drk_dtype_nbytes(w->dtype, K * N)) return false;
  return y->dtype == x->dtype && y->shape.rank == x->shape.rank && y->shape.dims[y->shape.rank - 1].size == N;
}

/* The bias of Add a reading y (a constant [N] or [1, .., 1, N] of y's dtype), or NULL. */
static drk_value_t *bias_of(const drk_node_t *a, const drk_value_t *y, int64_t n) {
  if (a->op != DRK_OP_ADD || a->dead || a->n_inputs != 2 || a->n_outputs != 1 || a->inputs[0] == a->inputs[1])
    return NULL;
  drk_value_t *b = a->inputs[0] == y ? a->inputs[1] : a->inputs[0];
  const drk_value_t *z = a->outputs[0];
  if (!b || b->kind != DRK_VALUE_CONST || !b->data || b->dtype != y->dtype || !value_static(b) ||
      b->shape.rank < 1 || b->shape.rank > y->shape.rank || b->shape.dims[b->shape.rank - 1].size != n ||
      b->nbytes < drk_dtype_nbytes(b->dtype, n))
    return NULL;
  for (int i = 0; i + 1 < b->shape.rank; i++)
    if (b->shape.dims[i].size != 1) return NULL;
  if (!z || z->dtype != y->dtype || !drk_shape_equal(&z->shape, &y->shape)) return NULL;
  return b;
}

/* Fills m for MatMul n; false when its replaced value has a user the merge would hurt. */
static bool member_of(const use_t *u, drk_node_t *n, member_t *m) {
  drk_value_t *y = n->outputs[0];
  memset(m, 0, sizeof *m);
  m->mm = n, m->w = n->inputs[1], m->n = m->w->shape.dims[1].size, m->y = y;
  const use_t *e = &u[y->id];
  if (e->n == 1 && !e->output && (m->b = bias_of(e->first, y, m->n))) {
    m->add = e->first;
    m->y = m->add->outputs[0];
    e = &u[m->y->id];
  }
  return e->n >= 1 && !e->other && !e->output;
}

static drk_value_t *i64_const(drk_graph_t *g, const char *name, int64_t v) {
  int64_t len = 1;
  return drk_graph_add_const_copy(g, name, DRK_DT_I64, drk_graph_shape_static(g, 1, &len), &v, sizeof v);
}

typedef struct concat_job {
  const member_t *m;
  int cnt;
  bool bias;
  int64_t total;
  size_t es;
  char *data;
} concat_job_t;

static void concat_rows(void *p, int64_t lo, int64_t hi, int tid) {
  (void)tid;
  const concat_job_t *j = p;
  int64_t off = 0;
  for (int i = 0; i < j->cnt; i++) {
    const char *src = (j->bias ? j->m[i].b : j->m[i].w)->data;
    size_t row = (size_t)j->m[i].n * j->es;
    for (size_t r = (size_t)lo; r < (size_t)hi; r++) memcpy(j->data + (r * (size_t)j->total + (size_t)off) * j->es, src + r * row, row);
    off += j->m[i].n;
  }
}

/* A [rows, sum n] constant whose row r is the members' rows r side by side (biases: rows = 1). */
static drk_value_t *concat_const(drk_graph_t *g, const char *name, const member_t *m, int cnt, bool bias,
                                 int64_t rows, int64_t total) {
  drk_value_t *first = bias ? m[0].b : m[0].w;
  size_t es = (size_t)drk_dtype_bits(first->dtype) / 8, nbytes = (size_t)(rows * total) * es;
  char *data = drk_arena_alloc(g->arena, nbytes ? nbytes : 1);
  concat_job_t j = {m, cnt, bias, total, es, data};
  drk_ipar_for(rows, (4 << 20) / (total * (int64_t)es) + 1, concat_rows, &j); /* ~4 MB a range */
  int64_t dims[2] = {rows, total};
  return drk_graph_add_const(g, name, first->dtype, bias ? drk_graph_shape_static(g, 1, &total)
                                                         : drk_graph_shape_static(g, 2, dims), data, nbytes);
}

/* Pushes the merged MatMul (+ Add) and one Slice per member, whose result is the member's
 * replaced value; leaves the members' nodes dead. */
static void emit(drk_graph_t *g, member_t *m, int cnt) {
  drk_value_t *x = m[0].mm->inputs[0];
  const drk_value_t *y0 = m[0].mm->outputs[0];
  int r = y0->shape.rank;
  int64_t K = m[0].w->shape.dims[0].size, total = 0, dims[DRK_MAX_RANK];
  for (int i = 0; i < cnt; i++) total += m[i].n;
  for (int i = 0; i < r; i++) dims[i] = y0->shape.dims[i].size;
  dims[r - 1] = total;
  drk_loc_t loc = m[0].mm->loc;
  const char *base = y0->name;
  drk_value_t *w = concat_const(g, drk_graph_unique_namef(g, "%s_merged", m[0].w->name), m, cnt, false, K, total);
  const char *name = drk_graph_unique_namef(g, "%s_merged", base);
  drk_node_t *mm = drk_graph_add_node(g, DRK_OP_MATMUL, 2, (drk_value_t *[]){x, w}, 1, &name, loc);
  drk_value_t *v = mm->outputs[0];
  v->dtype = y0->dtype;
  v->shape = drk_graph_shape_static(g, r, dims);
  if (m[0].add) {
    drk_value_t *b = concat_const(g, drk_graph_unique_namef(g, "%s_merged", m[0].b->name), m, cnt, true, 1, total);
    name = drk_graph_unique_namef(g, "%s_merged", m[0].y->name);
    drk_node_t *add = drk_graph_add_node(g, DRK_OP_ADD, 2, (drk_value_t *[]){v, b}, 1, &name, m[0].add->loc);
    add->outputs[0]->dtype = v->dtype;
    add->outputs[0]->shape = v->shape;
    v = add->outputs[0];
  }
  drk_value_t *axes = i64_const(g, drk_graph_unique_namef(g, "%s_merged_axes", base), -1);
  int64_t off = 0;
  for (int i = 0; i < cnt; i++) {
    drk_value_t *y = m[i].y;
    drk_value_t *st = i64_const(g, drk_graph_unique_namef(g, "%s_starts", y->name), off);
    drk_value_t *en = i64_const(g, drk_graph_unique_namef(g, "%s_ends", y->name), off + m[i].n);
    const char *tmp = drk_graph_unique_namef(g, "%s_slice", y->name);
    drk_node_t *s = drk_graph_add_node(g, DRK_OP_SLICE, 4, (drk_value_t *[]){v, st, en, axes}, 1, &tmp, m[i].mm->loc);
    /* the replaced value (its name, its users) becomes the Slice's result */
    s->outputs[0] = y;
    y->def = s;
    y->def_index = 0;
    m[i].mm->dead = true;
    if (m[i].add) m[i].add->dead = true;
    off += m[i].n;
  }
}

/* The members of the group of x = orig[i0]->inputs[0] (the candidates on x from i0 on that
 * qualify); returns how many, 0 when they do not merge. */
static int collect(const use_t *u, drk_node_t **orig, size_t n_orig, size_t i0, member_t *m) {
  const drk_value_t *x = orig[i0]->inputs[0];
  int cnt = 0, biased = 0;
  for (size_t i = i0; i < n_orig && cnt < MAX_MEMBERS; i++) {
    drk_node_t *n = orig[i];
    if (!candidate(n) || n->inputs[0] != x || !member_of(u, n, &m[cnt])) continue;
    biased += m[cnt].add != NULL;
    cnt++;
  }
  return cnt >= 2 && (biased == 0 || biased == cnt) ? cnt : 0;
}

bool drk_pass_merge_matmul(drk_graph_t *g, size_t *out_n_groups, size_t *out_n_merged) {
  size_t groups = 0, merged = 0, n_orig = g->n_nodes;
  if (out_n_groups) *out_n_groups = 0;
  if (out_n_merged) *out_n_merged = 0;
  if (!n_orig) return true;
  drk_node_t **orig = malloc(sizeof *orig * n_orig);
  bool *taken = calloc(g->next_node_id + 1, sizeof *taken), *seen = calloc(g->next_value_id + 1, sizeof *seen);
  member_t *m = malloc(sizeof *m * MAX_MEMBERS);
  use_t *u = compute_uses(g);
  if (!orig || !taken || !seen || !m || !u) {
    free(orig), free(taken), free(seen), free(m), free(u);
    return false;
  }
  memcpy(orig, g->nodes, sizeof *orig * n_orig);
  g->n_nodes = 0; /* nodes are pushed again in order, each merged block at its group's first candidate */
  for (size_t i = 0; i < n_orig; i++) {
    drk_node_t *n = orig[i];
    if (taken[n->id]) continue; /* a member of a group emitted earlier */
    /* x's group is decided once, at its first candidate (which may itself not qualify) */
    if (candidate(n) && !seen[n->inputs[0]->id]) {
      seen[n->inputs[0]->id] = true;
      int cnt = collect(u, orig, n_orig, i, m);
      if (cnt) {
        for (int k = 0; k < cnt; k++) {
          taken[m[k].mm->id] = true;
          if (m[k].add) taken[m[k].add->id] = true;
        }
        emit(g, m, cnt);
        groups++;
        merged += (size_t)cnt;
        if (taken[n->id]) continue;
      }
    }
    DRK_VEC_PUSH(g->arena, g->nodes, g->n_nodes, g->cap_nodes, n);
  }
  free(orig), free(taken), free(seen), free(m), free(u);
  if (out_n_groups) *out_n_groups = groups;
  if (out_n_merged) *out_n_merged = merged;
  return true;
}
