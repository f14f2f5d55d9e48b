/* Liveness-based arena placement (see plan_memory.h for the contract).
 *
 * Lifetimes are intervals of node positions: a value is live from the node that defines it
 * (graph inputs: -1) to its last use; graph inputs and outputs live for the whole run. With
 * fusion the positions are replaced by node times (drk_plan_memory_timed): every node of a
 * fused group runs when the group's kernel does. Scratch requests (drk_plan_memory_scratch)
 * live at one time: each is placed once every output of its time is, against everything
 * still live then, and freed before the next time.
 * In-place candidates (drk_plan_memory_inplace) take the live entry of the input that dies at
 * their time instead of a new range; that entry's end becomes the output's last use.
 * Placement is greedy first-fit in order of definition over the free list of the intervals
 * still live, which is what most inference runtimes do and is within a few percent of optimal
 * on chains like ours. */
#include "plan_memory.h"

#include <stdlib.h>
#include <string.h>

#define ALIGN 256u

static uint64_t align_up(uint64_t x) { return (x + ALIGN - 1) & ~(uint64_t)(ALIGN - 1); }

typedef struct placed {
  uint64_t off, size;
  int64_t end; /* last node position using it */
} placed_t;

static bool value_bytes(const drk_value_t *v, uint64_t *out, drk_diag_t *d) {
  int64_t n = drk_shape_numel(&v->shape);
  if (n < 0) {
    drk_diag_error(d, v->loc, "memory planning needs static shapes; value '%s' has shape with %s", v->name,
                   v->shape.rank < 0 ? "unknown rank" : "symbolic dims");
    return false;
  }
  *out = drk_dtype_nbytes(v->dtype, n);
  return true;
}

static const drk_value_t *resolve(const drk_value_t **base_of, const drk_value_t *v) {
  for (int guard = 0; base_of[v->id] && guard < 1 << 20; guard++) v = base_of[v->id];
  return v;
}

typedef struct timed {
  int64_t t, k;
} timed_t;

static int cmp_timed(const void *a, const void *b) {
  const timed_t *x = a, *y = b;
  if (x->t != y->t) return x->t < y->t ? -1 : 1;
  return x->k < y->k ? -1 : x->k > y->k;
}

static int64_t time_of(const int64_t *node_time, int64_t k) { return node_time ? node_time[k] : k; }

bool drk_plan_memory(const drk_graph_t *g, const drk_value_alias_t *aliases, size_t n_aliases,
                     drk_mem_plan_t *out_plan, drk_diag_t *d) {
  return drk_plan_memory_timed(g, aliases, n_aliases, NULL, out_plan, d);
}

bool drk_plan_memory_timed(const drk_graph_t *g, const drk_value_alias_t *aliases, size_t n_aliases,
                           const int64_t *node_time, drk_mem_plan_t *out_plan, drk_diag_t *d) {
  return drk_plan_memory_scratch(g, aliases, n_aliases, node_time, NULL, 0, out_plan, d);
}

/* First fit of need bytes at or after base among the live ranges. */
static uint64_t first_fit(const placed_t *live, size_t n_live, uint64_t base, uint64_t need) {
  uint64_t cand = base;
  bool moved = true;
  while (moved) {
    moved = false;
    for (size_t i = 0; i < n_live; i++)
      if (cand < live[i].off + live[i].size && live[i].off < cand + need) {
        cand = align_up(live[i].off + live[i].size);
        moved = true;
      }
  }
  return cand;
}

typedef struct scratch_order {
  int64_t t;
  size_t i;
} scratch_order_t;

static int cmp_scratch(const void *a, const void *b) {
  const scratch_order_t *x = a, *y = b;
  if (x->t != y->t) return x->t < y->t ? -1 : 1;
  return x->i < y->i ? -1 : x->i > y->i;
}

bool drk_plan_memory_scratch(const drk_graph_t *g, const drk_value_alias_t *aliases, size_t n_aliases,
                             const int64_t *node_time, const drk_mem_scratch_t *scratch, size_t n_scratch,
                             drk_mem_plan_t *out_plan, drk_diag_t *d) {
  return drk_plan_memory_inplace(g, aliases, n_aliases, node_time, scratch, n_scratch, NULL, 0, out_plan, d);
}

/* Whether every input of the nodes at order[lo, hi) (one time) that lives in base b's bytes
 * is the value u itself: the kernel reads b only through the in-place candidate. */
static bool only_read_as(const drk_graph_t *g, const timed_t *order, int64_t lo, int64_t hi,
                         const drk_value_t **base_of, const drk_value_t *b, const drk_value_t *u) {
  for (int64_t oi = lo; oi < hi; oi++) {
    const drk_node_t *nd = g->nodes[order[oi].k];
    if (nd->dead) continue;
    for (int i = 0; i < nd->n_inputs; i++)
      if (nd->inputs[i] && nd->inputs[i] != u && resolve(base_of, nd->inputs[i]) == b) return false;
  }
  return true;
}

/* The live entry output v (need bytes, at time t, nodes order[lo, hi)) may take in place: an
 * input's range per the rules in plan_memory.h, or -1. taken[b]: b's range went to an output. */
static int64_t inplace_slot(const drk_graph_t *g, const drk_value_t *v, uint64_t need, int64_t t,
                            const drk_value_alias_t *inplace, size_t n_inplace, const drk_value_t **base_of,
                            const int64_t *last_use, const drk_mem_plan_t *p, bool *taken,
                            const placed_t *live, size_t n_live, const timed_t *order, int64_t lo, int64_t hi,
                            uint32_t *out_b) {
  if (last_use[v->id] == INT64_MAX) return -1; /* a graph output (or its base) */
  for (size_t i = 0; i < n_inplace; i++) {
    if (inplace[i].value != v) continue;
    const drk_value_t *u = inplace[i].base, *b = resolve(base_of, u);
    /* a node's value (no graph input or constant), placed, dying here, not yet given away */
    if (b->kind != DRK_VALUE_NODE || taken[b->id] || last_use[b->id] != t || p->offset[b->id] == UINT64_MAX) continue;
    if (!only_read_as(g, order, lo, hi, base_of, b, u)) continue;
    for (size_t j = 0; j < n_live; j++)
      if (live[j].off == p->offset[b->id] && live[j].end == t && live[j].size >= need) {
        *out_b = b->id;
        return (int64_t)j;
      }
  }
  return -1;
}

bool drk_plan_memory_inplace(const drk_graph_t *g, const drk_value_alias_t *aliases, size_t n_aliases,
                             const int64_t *node_time, const drk_mem_scratch_t *scratch, size_t n_scratch,
                             const drk_value_alias_t *inplace, size_t n_inplace, drk_mem_plan_t *out_plan,
                             drk_diag_t *d) {
  return drk_plan_memory_kernels(g, aliases, n_aliases, node_time, scratch, n_scratch, inplace, n_inplace, NULL, out_plan, d);
}

bool drk_plan_memory_kernels(const drk_graph_t *g, const drk_value_alias_t *aliases, size_t n_aliases,
                             const int64_t *node_time, const drk_mem_scratch_t *scratch, size_t n_scratch,
                             const drk_value_alias_t *inplace, size_t n_inplace, const bool *referenced,
                             drk_mem_plan_t *out_plan, drk_diag_t *d) {
  uint32_t n = g->next_value_id;
  drk_mem_plan_t p = {.n_ids = n, .n_scratch = (uint32_t)n_scratch};
  p.scratch_offset = calloc(n_scratch + 1, sizeof(uint64_t));
  scratch_order_t *sord = calloc(n_scratch + 1, sizeof *sord);
  size_t next_scratch = 0;
  p.offset = malloc(sizeof(uint64_t) * (n + 1));
  p.size = calloc(n + 1, sizeof(uint64_t));
  const drk_value_t **base_of = calloc(n + 1, sizeof *base_of);
  const drk_value_t **by_id = calloc(n + 1, sizeof *by_id);
  int64_t *last_use = malloc(sizeof(int64_t) * (n + 1));
  placed_t *live = malloc(sizeof(placed_t) * (n + n_scratch + 1));
  timed_t *order = malloc(sizeof(timed_t) * (g->n_nodes + 1));
  bool *taken = calloc(n + 1, sizeof *taken);
  bool *placed = referenced ? calloc(n + 1, sizeof *placed) : NULL; /* which bases get a range */
  bool ok = p.offset && p.size && base_of && by_id && last_use && live && order && p.scratch_offset && sord && taken &&
            (placed || !referenced);
  if (!ok) {
    drk_diag_error(d, drk_loc_none, "memory planning: out of memory");
    goto fail;
  }
  for (uint32_t i = 0; i <= n; i++) {
    p.offset[i] = UINT64_MAX;
    last_use[i] = -2;
  }
  for (size_t i = 0; i < n_aliases; i++) base_of[aliases[i].value->id] = aliases[i].base;
  if (placed) { /* a referenced value's bytes are its base's; graph inputs and outputs always */
    for (uint32_t i = 0; i <= n; i++)
      if (referenced[i]) placed[i] = true;
    for (size_t i = 0; i < n_aliases; i++)
      if (referenced[aliases[i].value->id]) placed[resolve(base_of, aliases[i].value)->id] = true;
    for (size_t i = 0; i < g->n_inputs; i++) placed[resolve(base_of, g->inputs[i])->id] = true;
    for (size_t i = 0; i < g->n_outputs; i++) placed[resolve(base_of, g->outputs[i])->id] = true;
  }

  /* Weights region: constants in order, each 256-byte aligned. */
  uint64_t w = 0;
  for (size_t i = 0; i < g->n_consts; i++) {
    const drk_value_t *c = g->consts[i];
    uint64_t sz;
    if (!value_bytes(c, &sz, d)) goto fail;
    p.offset[c->id] = w;
    p.size[c->id] = sz;
    w = align_up(w + sz);
  }
  p.weights_size = w;

  /* Lifetimes, on resolved (base) values. */
  int64_t n_nodes = (int64_t)g->n_nodes;
  for (int64_t k = 0; k < n_nodes; k++) {
    const drk_node_t *nd = g->nodes[k];
    if (nd->dead) continue;
    int64_t t = time_of(node_time, k);
    for (int i = 0; i < nd->n_inputs; i++)
      if (nd->inputs[i]) {
        const drk_value_t *b = resolve(base_of, nd->inputs[i]);
        if (last_use[b->id] < t) last_use[b->id] = t;
      }
    for (int i = 0; i < nd->n_outputs; i++) {
      const drk_value_t *b = resolve(base_of, nd->outputs[i]);
      if (last_use[b->id] < t) last_use[b->id] = t;
      by_id[nd->outputs[i]->id] = nd->outputs[i];
    }
  }
  for (size_t i = 0; i < g->n_inputs; i++) last_use[resolve(base_of, g->inputs[i])->id] = INT64_MAX;
  for (size_t i = 0; i < g->n_outputs; i++) last_use[resolve(base_of, g->outputs[i])->id] = INT64_MAX;

  uint64_t top = align_up(w);
  size_t n_live = 0;
  /* Graph inputs first: live throughout, never shared. */
  for (size_t i = 0; i < g->n_inputs; i++) {
    const drk_value_t *v = g->inputs[i];
    uint64_t sz;
    if (!value_bytes(v, &sz, d)) goto fail;
    p.offset[v->id] = top;
    p.size[v->id] = sz;
    p.naive_size += align_up(sz);
    top = align_up(top + (sz ? sz : 1));
  }
  uint64_t act_base = top;
  /* Nodes in order of their times (stable: a fused group's nodes share one time, when its
   * kernel reads its inputs and writes its outputs). */
  for (int64_t k = 0; k < n_nodes; k++) order[k] = (timed_t){time_of(node_time, k), k};
  qsort(order, (size_t)n_nodes, sizeof *order, cmp_timed);
  for (size_t i = 0; i < n_scratch; i++) sord[i] = (scratch_order_t){scratch[i].time, i};
  qsort(sord, n_scratch, sizeof *sord, cmp_scratch);
  int64_t lo = 0, hi = 0;
  for (int64_t oi = 0; oi <= n_nodes; oi++) {
    int64_t k = oi < n_nodes ? order[oi].k : -1, t = oi < n_nodes ? order[oi].t : INT64_MAX;
    /* Scratch of the times before t: every output of those times is placed, and everything
     * still in `live` may be live then (a superset), so nothing live at its time overlaps. */
    for (; next_scratch < n_scratch && sord[next_scratch].t < t; next_scratch++) {
      const drk_mem_scratch_t *sc = &scratch[sord[next_scratch].i];
      uint64_t need = align_up(sc->bytes ? sc->bytes : 1);
      uint64_t cand = first_fit(live, n_live, act_base, need);
      p.scratch_offset[sord[next_scratch].i] = cand;
      live[n_live++] = (placed_t){cand, need, sc->time};
      if (cand + need > top) top = cand + need;
    }
    if (oi == n_nodes) break;
    if (oi >= hi) { /* first node of a new time: [lo, hi) are its nodes (a fused kernel's), for the in-place check */
      lo = oi;
      for (hi = oi + 1; hi < n_nodes && order[hi].t == t; hi++) {}
    }
    const drk_node_t *nd = g->nodes[k];
    if (nd->dead) continue;
    /* Free what died before this node's time. */
    size_t j = 0;
    for (size_t i = 0; i < n_live; i++)
      if (live[i].end >= t) live[j++] = live[i];
    n_live = j;
    for (int o = 0; o < nd->n_outputs; o++) {
      const drk_value_t *v = nd->outputs[o];
      if (base_of[v->id]) continue; /* placed with its base */
      uint64_t sz;
      if (!value_bytes(v, &sz, d)) goto fail;
      uint64_t need = align_up(sz ? sz : 1);
      p.naive_size += need;
      if (placed && !placed[v->id]) continue; /* inside a kernel: never in memory */
      int64_t end = last_use[v->id] < t ? t : last_use[v->id];
      uint32_t tb = 0;
      int64_t slot = n_inplace ? inplace_slot(g, v, need, t, inplace, n_inplace, base_of, last_use, &p, taken, live,
                                              n_live, order, lo, hi, &tb)
                               : -1;
      if (slot >= 0) { /* the input dies here: its range becomes the output's */
        placed_t *e = &live[slot];
        taken[tb] = true;
        p.offset[v->id] = e->off;
        p.size[v->id] = sz;
        e->end = end;
        continue;
      }
      /* First fit among the gaps between live ranges. */
      uint64_t cand = first_fit(live, n_live, act_base, need);
      p.offset[v->id] = cand;
      p.size[v->id] = sz;
      live[n_live++] = (placed_t){cand, need, end};
      if (cand + need > top) top = cand + need;
    }
  }
  /* Aliases take their base's range. */
  for (size_t i = 0; i < n_aliases; i++) {
    const drk_value_t *v = aliases[i].value, *b = resolve(base_of, v);
    uint64_t sz;
    if (!value_bytes(v, &sz, d)) goto fail;
    if (placed && !placed[b->id]) continue; /* a view of a value inside a kernel */
    if (p.offset[b->id] == UINT64_MAX || sz > p.size[b->id]) {
      drk_diag_error(d, v->loc, "memory planning: alias '%s' of '%s' does not fit", v->name, b->name);
      goto fail;
    }
    p.offset[v->id] = p.offset[b->id];
    p.size[v->id] = sz;
  }
  p.arena_size = top;
  free(base_of);
  free(by_id);
  free(last_use);
  free(live);
  free(order);
  free(sord);
  free(taken);
  free(placed);
  *out_plan = p;
  return true;
fail:
  free(base_of);
  free(by_id);
  free(last_use);
  free(live);
  free(order);
  free(sord);
  free(taken);
  free(placed);
  drk_mem_plan_free(&p);
  return false;
}

void drk_mem_plan_free(drk_mem_plan_t *p) {
  free(p->offset);
  free(p->size);
  free(p->scratch_offset);
  memset(p, 0, sizeof *p);
}

void *drk_mem_plan_weights(const drk_mem_plan_t *p, const drk_graph_t *g) {
  unsigned char *w = calloc(1, p->weights_size ? p->weights_size : 1);
  if (!w) return NULL;
  for (size_t i = 0; i < g->n_consts; i++) {
    const drk_value_t *c = g->consts[i];
    if (c->nbytes && p->size[c->id]) memcpy(w + p->offset[c->id], c->data, p->size[c->id] < c->nbytes ? p->size[c->id] : c->nbytes);
  }
  return w;
}
