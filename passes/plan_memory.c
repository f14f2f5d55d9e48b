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

bool drk_plan_memory_inplace(const drk_graph_t *g, const drk_value_alias_t *aliases, size_t n_aliases,
                             const int64_t *node_time, const drk_mem_scratch_t *scratch, size_t n_scratch,
                             const drk_value_alias_t *inplace, size_t n_inplace, drk_mem_plan_t *out_plan,
                             drk_diag_t *d) {
  return drk_plan_memory_kernels(g, aliases, n_aliases, node_time, scratch, n_scratch, inplace, n_inplace, NULL, out_plan, d);
}

/* One run of drk_plan_memory_kernels: its inputs, the plan being built, and the working
 * arrays the steps below share (all indexed by value id, 0..n). */
typedef struct planner {
  const drk_graph_t *g;
  drk_diag_t *d;
  const drk_value_alias_t *aliases;
  size_t n_aliases;
  const int64_t *node_time;
  const drk_mem_scratch_t *scratch;
  size_t n_scratch;
  const drk_value_alias_t *inplace;
  size_t n_inplace;
  uint32_t n;
  drk_mem_plan_t p;
  const drk_value_t **base_of; /* alias -> base */
  int64_t *last_use;           /* on bases: time of the last use; INT64_MAX for graph inputs/outputs */
  placed_t *live;              /* ranges live at the current time */
  size_t n_live;
  timed_t *order;              /* nodes by time */
  scratch_order_t *sord;       /* scratch requests by time */
  size_t next_scratch;
  bool *taken;                 /* a base whose range an in-place output took */
  bool *placed;                /* which bases get a range (NULL: all) */
  uint64_t top, act_base;      /* arena end so far; start of the activations */
} planner_t;

/* The live entry output v (need bytes, at time t, nodes order[lo, hi)) may take in place: an
 * input's range per the rules in plan_memory.h, or -1. */
static int64_t inplace_slot(const planner_t *pl, const drk_value_t *v, uint64_t need, int64_t t, int64_t lo,
                            int64_t hi, uint32_t *out_b) {
  if (pl->last_use[v->id] == INT64_MAX) return -1; /* a graph output (or its base) */
  for (size_t i = 0; i < pl->n_inplace; i++) {
    if (pl->inplace[i].value != v) continue;
    const drk_value_t *u = pl->inplace[i].base, *b = resolve(pl->base_of, u);
    /* a node's value (no graph input or constant), placed, dying here, not yet given away */
    if (b->kind != DRK_VALUE_NODE || pl->taken[b->id] || pl->last_use[b->id] != t || pl->p.offset[b->id] == UINT64_MAX) continue;
    if (!only_read_as(pl->g, pl->order, lo, hi, pl->base_of, b, u)) continue;
    for (size_t j = 0; j < pl->n_live; j++)
      if (pl->live[j].off == pl->p.offset[b->id] && pl->live[j].end == t && pl->live[j].size >= need) {
        *out_b = b->id;
        return (int64_t)j;
      }
  }
  return -1;
}

static void planner_free(planner_t *pl) {
  free(pl->base_of);
  free(pl->last_use);
  free(pl->live);
  free(pl->order);
  free(pl->sord);
  free(pl->taken);
  free(pl->placed);
}

/* The arrays, offsets unplaced, aliases' bases; false (reported) when out of memory. */
static bool planner_init(planner_t *pl, const bool *referenced) {
  uint32_t n = pl->n;
  size_t n_scratch = pl->n_scratch;
  pl->p = (drk_mem_plan_t){.n_ids = n, .n_scratch = (uint32_t)n_scratch};
  pl->p.scratch_offset = calloc(n_scratch + 1, sizeof(uint64_t));
  pl->sord = calloc(n_scratch + 1, sizeof *pl->sord);
  pl->p.offset = malloc(sizeof(uint64_t) * (n + 1));
  pl->p.size = calloc(n + 1, sizeof(uint64_t));
  pl->base_of = calloc(n + 1, sizeof *pl->base_of);
  pl->last_use = malloc(sizeof(int64_t) * (n + 1));
  pl->live = malloc(sizeof(placed_t) * (n + n_scratch + 1));
  pl->order = malloc(sizeof(timed_t) * (pl->g->n_nodes + 1));
  pl->taken = calloc(n + 1, sizeof *pl->taken);
  pl->placed = referenced ? calloc(n + 1, sizeof *pl->placed) : NULL;
  if (!(pl->p.offset && pl->p.size && pl->base_of && pl->last_use && pl->live && pl->order && pl->p.scratch_offset &&
        pl->sord && pl->taken && (pl->placed || !referenced))) {
    drk_diag_error(pl->d, drk_loc_none, "memory planning: out of memory");
    return false;
  }
  for (uint32_t i = 0; i <= n; i++) {
    pl->p.offset[i] = UINT64_MAX;
    pl->last_use[i] = -2;
  }
  for (size_t i = 0; i < pl->n_aliases; i++) pl->base_of[pl->aliases[i].value->id] = pl->aliases[i].base;
  return true;
}

/* A referenced value's bytes are its base's; graph inputs and outputs always get a range. */
static void mark_placed(planner_t *pl, const bool *referenced) {
  const drk_graph_t *g = pl->g;
  for (uint32_t i = 0; i <= pl->n; i++)
    if (referenced[i]) pl->placed[i] = true;
  for (size_t i = 0; i < pl->n_aliases; i++)
    if (referenced[pl->aliases[i].value->id]) pl->placed[resolve(pl->base_of, pl->aliases[i].value)->id] = true;
  for (size_t i = 0; i < g->n_inputs; i++) pl->placed[resolve(pl->base_of, g->inputs[i])->id] = true;
  for (size_t i = 0; i < g->n_outputs; i++) pl->placed[resolve(pl->base_of, g->outputs[i])->id] = true;
}

/* Weights region: constants in order, each 256-byte aligned. */
static bool place_weights(planner_t *pl) {
  uint64_t w = 0;
  for (size_t i = 0; i < pl->g->n_consts; i++) {
    const drk_value_t *c = pl->g->consts[i];
    uint64_t sz;
    if (!value_bytes(c, &sz, pl->d)) return false;
    pl->p.offset[c->id] = w;
    pl->p.size[c->id] = sz;
    w = align_up(w + sz);
  }
  pl->p.weights_size = w;
  pl->top = align_up(w);
  return true;
}

/* Lifetimes, on resolved (base) values. */
static void compute_lifetimes(planner_t *pl) {
  const drk_graph_t *g = pl->g;
  for (int64_t k = 0; k < (int64_t)g->n_nodes; k++) {
    const drk_node_t *nd = g->nodes[k];
    if (nd->dead) continue;
    int64_t t = time_of(pl->node_time, k);
    for (int i = 0; i < nd->n_inputs; i++)
      if (nd->inputs[i]) {
        const drk_value_t *b = resolve(pl->base_of, nd->inputs[i]);
        if (pl->last_use[b->id] < t) pl->last_use[b->id] = t;
      }
    for (int i = 0; i < nd->n_outputs; i++) {
      const drk_value_t *b = resolve(pl->base_of, nd->outputs[i]);
      if (pl->last_use[b->id] < t) pl->last_use[b->id] = t;
    }
  }
  for (size_t i = 0; i < g->n_inputs; i++) pl->last_use[resolve(pl->base_of, g->inputs[i])->id] = INT64_MAX;
  for (size_t i = 0; i < g->n_outputs; i++) pl->last_use[resolve(pl->base_of, g->outputs[i])->id] = INT64_MAX;
}

/* Graph inputs first: live throughout, never shared. */
static bool place_inputs(planner_t *pl) {
  for (size_t i = 0; i < pl->g->n_inputs; i++) {
    const drk_value_t *v = pl->g->inputs[i];
    uint64_t sz;
    if (!value_bytes(v, &sz, pl->d)) return false;
    pl->p.offset[v->id] = pl->top;
    pl->p.size[v->id] = sz;
    pl->p.naive_size += align_up(sz);
    pl->top = align_up(pl->top + (sz ? sz : 1));
  }
  pl->act_base = pl->top;
  return true;
}

/* Scratch of the times before t: every output of those times is placed, and everything
 * still in `live` may be live then (a superset), so nothing live at its time overlaps. */
static void place_scratch_before(planner_t *pl, int64_t t) {
  for (; pl->next_scratch < pl->n_scratch && pl->sord[pl->next_scratch].t < t; pl->next_scratch++) {
    const drk_mem_scratch_t *sc = &pl->scratch[pl->sord[pl->next_scratch].i];
    uint64_t need = align_up(sc->bytes ? sc->bytes : 1);
    uint64_t cand = first_fit(pl->live, pl->n_live, pl->act_base, need);
    pl->p.scratch_offset[pl->sord[pl->next_scratch].i] = cand;
    pl->live[pl->n_live++] = (placed_t){cand, need, sc->time};
    if (cand + need > pl->top) pl->top = cand + need;
  }
}

/* The outputs of node nd at time t (the time's nodes are order[lo, hi)): in place of a dying
 * input where allowed, else first fit among the gaps between live ranges. */
static bool place_outputs(planner_t *pl, const drk_node_t *nd, int64_t t, int64_t lo, int64_t hi) {
  drk_mem_plan_t *p = &pl->p;
  for (int o = 0; o < nd->n_outputs; o++) {
    const drk_value_t *v = nd->outputs[o];
    if (pl->base_of[v->id]) continue; /* placed with its base */
    uint64_t sz;
    if (!value_bytes(v, &sz, pl->d)) return false;
    uint64_t need = align_up(sz ? sz : 1);
    p->naive_size += need;
    if (pl->placed && !pl->placed[v->id]) continue; /* inside a kernel: never in memory */
    int64_t end = pl->last_use[v->id] < t ? t : pl->last_use[v->id];
    uint32_t tb = 0;
    int64_t slot = pl->n_inplace ? inplace_slot(pl, v, need, t, lo, hi, &tb) : -1;
    if (slot >= 0) { /* the input dies here: its range becomes the output's */
      placed_t *e = &pl->live[slot];
      pl->taken[tb] = true;
      p->offset[v->id] = e->off;
      p->size[v->id] = sz;
      e->end = end;
      continue;
    }
    uint64_t cand = first_fit(pl->live, pl->n_live, pl->act_base, need);
    p->offset[v->id] = cand;
    p->size[v->id] = sz;
    pl->live[pl->n_live++] = (placed_t){cand, need, end};
    if (cand + need > pl->top) pl->top = cand + need;
  }
  return true;
}

/* Nodes in order of their times (stable: a fused group's nodes share one time, when its
 * kernel reads its inputs and writes its outputs), each time's scratch after its outputs. */
static bool place_nodes(planner_t *pl) {
  const drk_graph_t *g = pl->g;
  int64_t n_nodes = (int64_t)g->n_nodes;
  for (int64_t k = 0; k < n_nodes; k++) pl->order[k] = (timed_t){time_of(pl->node_time, k), k};
  qsort(pl->order, (size_t)n_nodes, sizeof *pl->order, cmp_timed);
  for (size_t i = 0; i < pl->n_scratch; i++) pl->sord[i] = (scratch_order_t){pl->scratch[i].time, i};
  qsort(pl->sord, pl->n_scratch, sizeof *pl->sord, cmp_scratch);
  int64_t lo = 0, hi = 0;
  for (int64_t oi = 0; oi <= n_nodes; oi++) {
    int64_t k = oi < n_nodes ? pl->order[oi].k : -1, t = oi < n_nodes ? pl->order[oi].t : INT64_MAX;
    place_scratch_before(pl, t);
    if (oi == n_nodes) break;
    if (oi >= hi) { /* first node of a new time: [lo, hi) are its nodes (a fused kernel's), for the in-place check */
      lo = oi;
      for (hi = oi + 1; hi < n_nodes && pl->order[hi].t == t; hi++) {}
    }
    const drk_node_t *nd = g->nodes[k];
    if (nd->dead) continue;
    /* Free what died before this node's time. */
    size_t j = 0;
    for (size_t i = 0; i < pl->n_live; i++)
      if (pl->live[i].end >= t) pl->live[j++] = pl->live[i];
    pl->n_live = j;
    if (!place_outputs(pl, nd, t, lo, hi)) return false;
  }
  return true;
}

/* Aliases take their base's range. */
static bool place_aliases(planner_t *pl) {
  drk_mem_plan_t *p = &pl->p;
  for (size_t i = 0; i < pl->n_aliases; i++) {
    const drk_value_t *v = pl->aliases[i].value, *b = resolve(pl->base_of, v);
    uint64_t sz;
    if (!value_bytes(v, &sz, pl->d)) return false;
    if (pl->placed && !pl->placed[b->id]) continue; /* a view of a value inside a kernel */
    if (p->offset[b->id] == UINT64_MAX || sz > p->size[b->id]) {
      drk_diag_error(pl->d, v->loc, "memory planning: alias '%s' of '%s' does not fit", v->name, b->name);
      return false;
    }
    p->offset[v->id] = p->offset[b->id];
    p->size[v->id] = sz;
  }
  return true;
}

bool drk_plan_memory_kernels(const drk_graph_t *g, const drk_value_alias_t *aliases, size_t n_aliases,
                             const int64_t *node_time, const drk_mem_scratch_t *scratch, size_t n_scratch,
                             const drk_value_alias_t *inplace, size_t n_inplace, const bool *referenced,
                             drk_mem_plan_t *out_plan, drk_diag_t *d) {
  planner_t pl = {.g = g, .d = d, .aliases = aliases, .n_aliases = n_aliases, .node_time = node_time,
                  .scratch = scratch, .n_scratch = n_scratch, .inplace = inplace, .n_inplace = n_inplace,
                  .n = g->next_value_id};
  bool ok = planner_init(&pl, referenced);
  if (ok && pl.placed) mark_placed(&pl, referenced);
  ok = ok && place_weights(&pl);
  if (ok) compute_lifetimes(&pl);
  ok = ok && place_inputs(&pl) && place_nodes(&pl) && place_aliases(&pl);
  planner_free(&pl);
  if (!ok) {
    drk_mem_plan_free(&pl.p);
    return false;
  }
  pl.p.arena_size = pl.top;
  *out_plan = pl.p;
  return true;
}

void drk_mem_plan_free(drk_mem_plan_t *p) {
  free(p->offset);
  free(p->size);
  free(p->scratch_offset);
  memset(p, 0, sizeof *p);
}

