/* Matmul and convolution epilogues: the lowering of DRK_FUSION_MM groups (lower/fuse.h).
 *
 * A group is a MatMul, Gemm or Conv (its anchor) followed by elementwise nodes and alias views
 * over the anchor's element count (bias, activation, residual add, scaling, casts). The
 * anchor is lowered by drk_lower_matmul as usual; where it would store its result tile it
 * calls lw_mm_store, which evaluates the group's other nodes on that tile, in the
 * accumulator's layout, before anything reaches memory: each value of the group is a tile
 * with the same flat output offsets (yoff) and mask, values from outside the group are loaded
 * at those offsets with their broadcast strides against the consumer's result shape, and
 * the values that leave the group (used outside it, or graph outputs) are stored.
 * A group's paired MatMul (fuse.h, pair) is not evaluated: its result is an input, the tile
 * c->epi_pair_res when the anchor's kernel computes it (lower_matmul.c), else a buffer its own
 * kernel, lowered first by drk_lower_mm_group, wrote.
 *
 * Requires: a group as fuse.c forms it. Guarantees: the same per-op math as the one-node
 * kernels (drk_lower_ew_math), with the values inside the group kept in f32 (the anchor's
 * accumulator is not rounded to f16/bf16 before the epilogue; casts written in the graph
 * still round), like FLAT groups (lower_fused.c). */
#include <string.h>


#include "lower/lower_internal.h"

typedef struct epi {
  drk_lctx_t *c;
  const drk_graph_t *g;
  const drk_fusion_group_t *gr;
  bool *member;   /* per node id */
  tv_t **val;     /* per value id: tile in the accumulator frame */
  tv_t **param;   /* per value id: buffer parameter */
  tv_t *yoff, *mask;
} epi_t;

static bool made_in(const epi_t *E, const drk_value_t *v) {
  return v->kind == DRK_VALUE_NODE && v->def && E->member[v->def->id];
}

static tv_t *param_of(epi_t *E, const drk_value_t *v) {
  if (!E->param[v->id])
    E->param[v->id] = lw_param_buf(E->c, v, drk_arena_printf(E->c->m->arena, "e%u", v->id));
  return E->param[v->id];
}

/* v from outside the group, as seen by a consumer whose result has shape `shape` */
static tv_t *ext_load(epi_t *E, const drk_value_t *v, const drk_shape_t *shape) {
  drk_lctx_t *c = E->c;
  if (v->kind == DRK_VALUE_CONST && v->data && lw_numel(v) == 1) {
    drk_tile_type_t ty = lw_retype(&E->yoff->type, v->dtype);
    if (drk_dtype_is_float(v->dtype)) return drk_tile_build_const_float(&c->b, drk_value_const_f64(v, 0), ty);
    int64_t iv;
    if (v->dtype == DRK_DT_I64) memcpy(&iv, v->data, 8);
    else iv = (int64_t)drk_value_const_f64(v, 0);
    return drk_tile_build_const_int(&c->b, iv, ty);
  }
  tv_t *off = E->yoff;
  if (lw_numel(v) != drk_shape_numel(shape)) {
    int r = shape->rank;
    int64_t od[LW_MAX_RANK], st[LW_MAX_RANK];
    for (int k = 0; k < r; k++) od[k] = shape->dims[k].size;
    lw_bstrides(v, r, od, st);
    off = lw_affine(c, E->yoff, r, od, st, 0);
  }
  return lw_load(c, param_of(E, v), off, E->mask, 0);
}

static tv_t *eval(epi_t *E, const drk_value_t *v);

static tv_t *operand(epi_t *E, const drk_node_t *n, int i) {
  const drk_value_t *v = n->inputs[i];
  if (E->val[v->id]) return E->val[v->id]; /* also the paired MatMul's result */
  if (made_in(E, v)) return eval(E, v);
  return ext_load(E, v, &n->outputs[0]->shape);
}

struct ep_ctx {
  epi_t *E;
  const drk_node_t *n;
};

static tv_t *ep_operand(void *p, int i) {
  struct ep_ctx *e = p;
  return operand(e->E, e->n, i);
}

static tv_t *eval(epi_t *E, const drk_value_t *v) {
  if (E->val[v->id]) return E->val[v->id];
  drk_lctx_t *c = E->c;
  const drk_node_t *n = v->def;
  tv_t *t;
  if (drk_op_aliases_input(n->op)) {
    /* every value of the group has the anchor's element count: a view keeps flat offsets */
    const drk_value_t *x = n->inputs[0];
    t = made_in(E, x) ? eval(E, x) : ext_load(E, x, &x->shape);
  } else {
    struct ep_ctx e = {E, n};
    t = drk_lower_ew_node(c, n, ep_operand, &e);
  }
  E->val[v->id] = t;
  return t;
}

/* whether y is read by a live node outside the group or is a graph output */
static bool leaves(const epi_t *E, const drk_value_t *y) {
  for (size_t i = 0; i < E->g->n_outputs; i++)
    if (E->g->outputs[i] == y) return true;
  for (size_t k = 0; k < E->g->n_nodes; k++) {
    const drk_node_t *e = E->g->nodes[k];
    if (e->dead || E->member[e->id]) continue;
    for (int j = 0; j < e->n_inputs; j++)
      if (e->inputs[j] == y) return true;
  }
  return false;
}

/* the value whose bytes hold y: y itself, or the in-group value a chain of views starts from
 * (NULL: a view of an outside value, whose bytes hold it already) */
static const drk_value_t *root_of(const epi_t *E, const drk_value_t *y) {
  while (made_in(E, y) && drk_op_aliases_input(y->def->op)) y = y->def->inputs[0];
  return made_in(E, y) ? y : NULL;
}

/* the group's nodes the epilogue evaluates: all but the anchor's paired MatMul (whose result
 * is an input: a tile of the kernel, or a buffer its own kernel wrote) */
static bool *members(drk_lctx_t *c, const drk_fusion_group_t *gr) {
  const drk_graph_t *g = c->g;
  bool *member = drk_arena_alloc(c->m->arena, sizeof(bool) * (g->next_node_id + 1));
  for (int i = 0; i < gr->n_nodes; i++) member[g->nodes[gr->nodes[i]]->id] = gr->nodes[i] != gr->pair;
  return member;
}

tv_t *lw_mm_out_param(drk_lctx_t *c, const drk_value_t *y) {
  if (c->epi) {
    /* with an epilogue, the anchor's result gets stored only when something outside reads it */
    const drk_fusion_group_t *gr = &c->epi->groups[c->epi_group];
    const drk_graph_t *g = c->g;
    epi_t E = {.c = c, .g = g, .gr = gr};
    E.member = members(c, gr);
    bool needed = false;
    for (int i = 0; i < gr->n_nodes && !needed; i++) {
      const drk_value_t *v = g->nodes[gr->nodes[i]]->outputs[0];
      needed = leaves(&E, v) && root_of(&E, v) == y;
    }
    if (!needed) return NULL;
  }
  return lw_param_buf(c, y, "y");
}

void lw_mm_store(drk_lctx_t *c, tv_t *py, tv_t *yoff, tv_t *res, tv_t *mask) {
  if (!c->epi) {
    lw_store(c, py, yoff, res, mask);
    return;
  }
  const drk_fusion_t *f = c->epi;
  const drk_fusion_group_t *gr = &f->groups[c->epi_group];
  const drk_graph_t *g = c->g;
  drk_arena_t *A = c->m->arena;
  epi_t E = {.c = c, .g = g, .gr = gr, .yoff = yoff, .mask = mask};
  E.member = members(c, gr);
  E.val = drk_arena_alloc(A, sizeof(tv_t *) * (g->next_value_id + 1));
  E.param = c->epi_param; /* shared by the kernel's store sites (one per warp group) */
  const drk_value_t *y0 = g->nodes[gr->anchor]->outputs[0];
  E.val[y0->id] = res;
  if (c->epi_pair) E.val[c->epi_pair->outputs[0]->id] = c->epi_pair_res;
  if (py) E.param[y0->id] = py;
  bool *stored = drk_arena_alloc(A, sizeof(bool) * (g->next_value_id + 1));
  for (int i = 0; i < gr->n_nodes; i++) {
    const drk_value_t *y = g->nodes[gr->nodes[i]]->outputs[0];
    if (!leaves(&E, y)) continue;
    const drk_value_t *r = root_of(&E, y);
    if (!r || stored[r->id]) continue;
    stored[r->id] = true;
    lw_store(c, param_of(&E, r), yoff, eval(&E, r), mask);
  }
}

bool drk_lower_mm_group(drk_lctx_t *c, const drk_fusion_t *f, int gi) {
  const drk_fusion_group_t *gr = &f->groups[gi];
  const drk_graph_t *g = c->g;
  for (int i = 0; i < gr->n_nodes; i++) {
    const drk_node_t *n = g->nodes[gr->nodes[i]];
    if (drk_op_aliases_input(n->op)) lw_alias(c, n->outputs[0], n->inputs[0]);
  }
  c->epi = f;
  c->epi_group = gi;
  c->node = g->nodes[gr->anchor];
  c->node_index = (size_t)gr->anchor;
  bool ok = true;
  if (gr->pair >= 0) {
    const drk_node_t *p = g->nodes[gr->pair];
    if (drk_lower_matmul_pairs(c)) {
      c->epi_pair = p;
    } else { /* its own kernel first, then the anchor's epilogue loads its result */
      c->epi = NULL;
      c->node = p;
      c->node_index = (size_t)gr->pair;
      ok = drk_lower_matmul(c);
      c->epi = f;
      c->node = g->nodes[gr->anchor];
      c->node_index = (size_t)gr->anchor;
    }
  }
  c->epi_param = drk_arena_alloc(c->m->arena, sizeof(tv_t *) * (g->next_value_id + 1));
  ok = ok && drk_lower_matmul(c);
  c->epi = NULL;
  c->epi_param = NULL;
  c->epi_pair = NULL;
  c->epi_pair_res = NULL;
  return ok;
}
