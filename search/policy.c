/* The history of a tune and the policy interface (search/policy.h); the policies are in
 * policy_random.c, policy_evo.c, policy_ppo.c. */
#include "search/policy_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/support.h"

/* ---- point sets (open addressing on the point hash; the hash stands for the point: 64-bit
 * collisions among the few thousand points of a tune are not a practical concern) ---- */
void drk_point_set_init(drk_point_set_t *s) { memset(s, 0, sizeof *s); }
void drk_point_set_free(drk_point_set_t *s) {
  free(s->slots);
  memset(s, 0, sizeof *s);
}

static bool set_insert(uint64_t *slots, size_t cap, uint64_t key) {
  for (size_t i = key & (cap - 1);; i = (i + 1) & (cap - 1)) {
    if (slots[i] == key) return false;
    if (!slots[i]) {
      slots[i] = key;
      return true;
    }
  }
}

bool drk_point_set_add(drk_point_set_t *s, const drk_sched_knobs_t *p) {
  uint64_t key = drk_search_point_hash(p) | 1; /* never 0 */
  if ((s->n + 1) * 2 > s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 64;
    uint64_t *slots = calloc(cap, sizeof *slots);
    DRK_ASSERT(slots);
    for (size_t i = 0; i < s->cap; i++)
      if (s->slots[i]) set_insert(slots, cap, s->slots[i]);
    free(s->slots);
    s->slots = slots;
    s->cap = cap;
  }
  if (!set_insert(s->slots, s->cap, key)) return false;
  s->n++;
  return true;
}

/* ---- history ---- */
struct drk_search_history {
  drk_search_space_t space;
  drk_search_trial_t *trials;
  size_t n, cap;
  /* index + 1 of each trial by point hash */
  size_t *slots;
  uint64_t *keys;
  size_t n_slots;
};

drk_search_history_t *drk_search_history_create(const drk_search_space_t *s) {
  drk_search_history_t *h = calloc(1, sizeof *h);
  if (!h) return NULL;
  h->space = *s;
  return h;
}

void drk_search_history_destroy(drk_search_history_t *h) {
  if (!h) return;
  free(h->trials);
  free(h->slots);
  free(h->keys);
  free(h);
}

const drk_search_space_t *drk_search_history_space(const drk_search_history_t *h) { return &h->space; }
size_t drk_search_history_count(const drk_search_history_t *h) { return h->n; }

const drk_search_trial_t *drk_search_history_get(const drk_search_history_t *h, size_t i) {
  return i < h->n ? &h->trials[i] : NULL;
}

static long find_index(const drk_search_history_t *h, const drk_sched_knobs_t *p, uint64_t key) {
  if (!h->n_slots) return -1;
  for (size_t i = key & (h->n_slots - 1);; i = (i + 1) & (h->n_slots - 1)) {
    if (!h->slots[i]) return -1;
    if (h->keys[i] == key && drk_search_point_equal(&h->trials[h->slots[i] - 1].point, p))
      return (long)h->slots[i] - 1;
  }
}

const drk_search_trial_t *drk_search_history_find(const drk_search_history_t *h, const drk_sched_knobs_t *p) {
  long i = find_index(h, p, drk_search_point_hash(p));
  return i < 0 ? NULL : &h->trials[i];
}

static bool rehash(drk_search_history_t *h, size_t n_slots) {
  size_t *slots = calloc(n_slots, sizeof *slots);
  uint64_t *keys = calloc(n_slots, sizeof *keys);
  if (!slots || !keys) {
    free(slots);
    free(keys);
    return false;
  }
  for (size_t t = 0; t < h->n; t++) {
    uint64_t key = drk_search_point_hash(&h->trials[t].point);
    size_t i = key & (n_slots - 1);
    while (slots[i]) i = (i + 1) & (n_slots - 1);
    slots[i] = t + 1;
    keys[i] = key;
  }
  free(h->slots);
  free(h->keys);
  h->slots = slots;
  h->keys = keys;
  h->n_slots = n_slots;
  return true;
}

bool drk_search_history_add(drk_search_history_t *h, const drk_search_trial_t *t) {
  uint64_t key = drk_search_point_hash(&t->point);
  if (find_index(h, &t->point, key) >= 0) return false;
  if (h->n == h->cap) {
    size_t cap = h->cap ? h->cap * 2 : 64;
    drk_search_trial_t *nt = realloc(h->trials, cap * sizeof *nt);
    if (!nt) return false;
    h->trials = nt;
    h->cap = cap;
  }
  if ((h->n + 1) * 2 > h->n_slots && !rehash(h, h->n_slots ? h->n_slots * 2 : 128)) return false;
  h->trials[h->n] = *t;
  h->trials[h->n].point.used = NULL;
  size_t i = key & (h->n_slots - 1);
  while (h->slots[i]) i = (i + 1) & (h->n_slots - 1);
  h->slots[i] = h->n + 1;
  h->keys[i] = key;
  h->n++;
  return true;
}

void drk_search_history_set_record(drk_search_history_t *h, size_t i, int64_t record_id) {
  if (i < h->n) h->trials[i].record_id = record_id;
}

long drk_search_history_best_index(const drk_search_history_t *h) {
  long best = -1;
  for (size_t i = 0; i < h->n; i++) {
    const drk_search_trial_t *t = &h->trials[i];
    if (!t->measured || !t->metrics.valid) continue;
    if (best < 0 || t->reward > h->trials[best].reward) best = (long)i;
  }
  return best;
}

const drk_search_trial_t *drk_search_history_best(const drk_search_history_t *h) {
  long i = drk_search_history_best_index(h);
  return i < 0 ? NULL : &h->trials[i];
}

size_t drk_search_history_measured(const drk_search_history_t *h) {
  size_t n = 0;
  for (size_t i = 0; i < h->n; i++) n += h->trials[i].measured;
  return n;
}

void drk_search_history_rescore(drk_search_history_t *h, const drk_search_config_t *c, const drk_search_weights_t *w,
                                const drk_search_metrics_t *ref) {
  for (size_t i = 0; i < h->n; i++) {
    drk_search_trial_t *t = &h->trials[i];
    t->reward = t->measured ? drk_search_reward(c, w, ref, &t->metrics, NULL) : c->floor;
  }
}

/* ---- shared helpers of the policies ---- */
bool drk_policy_fresh(const drk_search_policy_t *p, const drk_search_history_t *h, drk_point_set_t *taken,
                      const drk_sched_knobs_t *q) {
  if (drk_search_history_find(h, q)) return false;
  char why[8];
  if (!drk_search_point_valid(&p->space, q, why, sizeof why)) return false;
  return drk_point_set_add(taken, q);
}

int drk_policy_fill_random(drk_search_policy_t *p, const drk_search_history_t *h, drk_point_set_t *taken,
                           drk_sched_knobs_t *out, int k, int n) {
  const drk_search_space_t *s = &p->space;
  uint64_t size = drk_search_space_size(s);
  int misses = 0;
  while (k < n && misses < 64) {
    drk_sched_knobs_t q;
    drk_search_point_random(s, &p->rng, &q);
    if (drk_policy_fresh(p, h, taken, &q)) {
      out[k++] = q;
      misses = 0;
    } else {
      misses++;
    }
  }
  if (k < n) {
    /* the space is nearly covered: walk it from a random ordinal with a stride coprime to its
     * size, so every point is visited once, in an order that depends on the seed */
    uint64_t start = drk_search_rng_next(&p->rng) % size, stride = 1 + drk_search_rng_next(&p->rng) % size;
    while (stride > 1) {
      uint64_t a = stride, b = size;
      while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
      }
      if (a == 1) break;
      stride--;
    }
    for (uint64_t i = 0; i < size && k < n; i++) {
      drk_sched_knobs_t q;
      drk_search_point_from_ordinal(s, (start + i * stride) % size, &q);
      if (drk_policy_fresh(p, h, taken, &q)) out[k++] = q;
    }
  }
  return k;
}

int drk_policy_take_seeds(drk_search_policy_t *p, const drk_search_history_t *h, drk_point_set_t *taken,
                          drk_sched_knobs_t *out, int k, int n) {
  int kept = 0;
  for (int i = 0; i < p->n_seeds; i++) {
    if (k < n && drk_policy_fresh(p, h, taken, &p->seeds[i])) out[k++] = p->seeds[i];
    else if (k >= n) p->seeds[kept++] = p->seeds[i];
  }
  p->n_seeds = kept;
  return k;
}

/* ---- the random policy ---- */
static int random_propose(drk_search_policy_t *p, const drk_search_history_t *h, drk_search_cost_model_t *cost,
                          drk_sched_knobs_t *out, int n) {
  drk_point_set_t taken;
  drk_point_set_init(&taken);
  int k = drk_policy_take_seeds(p, h, &taken, out, 0, n);
  k = drk_policy_fill_random(p, h, &taken, out, k, n);
  drk_point_set_free(&taken);
  return k;
}

const drk_search_policy_ops_t drk_policy_random_ops = {"random", false, random_propose, NULL, NULL, NULL, NULL, NULL};

/* ---- the interface ---- */
drk_search_policy_t *drk_search_policy_create(const char *name, const drk_search_space_t *s,
                                              const drk_search_policy_options_t *o, char *err, size_t n) {
  const drk_search_policy_ops_t *ops = NULL;
  if (!strcmp(name, "random")) ops = &drk_policy_random_ops;
  else if (!strcmp(name, "evo") || !strcmp(name, "evolutionary")) ops = &drk_policy_evo_ops;
  else if (!strcmp(name, "ppo") || !strcmp(name, "rl")) ops = &drk_policy_ppo_ops;
  if (!ops) {
    snprintf(err, n, "unknown policy '%s' (random, evo, ppo)", name);
    return NULL;
  }
  drk_search_policy_t *p = calloc(1, sizeof *p);
  if (!p) {
    snprintf(err, n, "out of memory");
    return NULL;
  }
  p->ops = ops;
  p->space = *s;
  if (o && o->config) p->config = *o->config;
  else drk_search_config_default(&p->config);
  drk_search_rng_seed(&p->rng, o ? o->seed : 0);
  if (o && o->context && o->n_context > 0) {
    p->n_context = o->n_context < DRK_SEARCH_CONTEXT_FEATURES ? o->n_context : DRK_SEARCH_CONTEXT_FEATURES;
    memcpy(p->context, o->context, sizeof(float) * (size_t)p->n_context);
  }
  bool ok = true;
  if (ops == &drk_policy_evo_ops) ok = drk_policy_evo_init(p, err, n);
  else if (ops == &drk_policy_ppo_ops) ok = drk_policy_ppo_init(p, err, n);
  if (!ok) {
    free(p);
    return NULL;
  }
  return p;
}

void drk_search_policy_destroy(drk_search_policy_t *p) {
  if (!p) return;
  if (p->ops->destroy) p->ops->destroy(p);
  free(p);
}

const char *drk_search_policy_name(const drk_search_policy_t *p) { return p->ops->name; }
bool drk_search_policy_wants_cost_model(const drk_search_policy_t *p) { return p->ops->wants_cost_model; }

int drk_search_policy_propose(drk_search_policy_t *p, const drk_search_history_t *h, drk_search_cost_model_t *cost,
                              drk_sched_knobs_t *out, int n) {
  if (n <= 0) return 0;
  return p->ops->propose(p, h, cost, out, n);
}

void drk_search_policy_observe(drk_search_policy_t *p, const drk_search_history_t *h, size_t first, size_t count) {
  if (p->ops->observe && count) p->ops->observe(p, h, first, count);
}

void drk_search_policy_seed(drk_search_policy_t *p, const drk_sched_knobs_t *points, int n) {
  for (int i = 0; i < n && p->n_seeds < DRK_POLICY_MAX_SEEDS; i++) {
    p->seeds[p->n_seeds] = points[i];
    p->seeds[p->n_seeds++].used = NULL;
  }
}

void drk_search_policy_set_lr(drk_search_policy_t *p, double lr) {
  if (p->ops->set_lr) p->ops->set_lr(p, lr);
}

void drk_search_policy_checkpoint(drk_search_policy_t *p) {
  if (p->ops->checkpoint) p->ops->checkpoint(p);
}

void drk_search_policy_rollback(drk_search_policy_t *p, const drk_sched_knobs_t *stable) {
  if (p->ops->rollback) p->ops->rollback(p, stable);
}
