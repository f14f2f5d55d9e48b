/* The evolutionary policy (search/policy.h): steady state over the history. The population
 * is the best `evo.population` valid measured trials; a child comes from one tournament-
 * selected parent, or with probability `evo.crossover` from two (uniform crossover per knob),
 * then mutates one knob (two with probability `evo.mutate2`): a step of one value index up or
 * down, or now and then a jump to any value, so narrow optima and far regions stay reachable.
 * Until two valid trials exist it proposes random points. */
#include <stdlib.h>
#include <string.h>

#include "search/policy_internal.h"

typedef struct evo_state {
  drk_sched_knobs_t stable;
  bool have_stable;
} evo_state_t;

/* The population: indices of the best valid trials, best first. */
static size_t population(const drk_search_history_t *h, int cap, size_t *out) {
  size_t n = 0, nh = drk_search_history_count(h);
  for (size_t i = 0; i < nh; i++) {
    const drk_search_trial_t *t = drk_search_history_get(h, i);
    if (!t->measured || !t->metrics.valid) continue;
    /* insertion into the sorted top list */
    size_t at = n;
    while (at > 0 && drk_search_history_get(h, out[at - 1])->reward < t->reward) at--;
    if (at >= (size_t)cap) continue;
    size_t end = n < (size_t)cap ? n : (size_t)cap - 1;
    memmove(out + at + 1, out + at, (end - at) * sizeof *out);
    out[at] = i;
    if (n < (size_t)cap) n++;
  }
  return n;
}

static size_t tournament(drk_search_policy_t *p, const drk_search_history_t *h, const size_t *pop, size_t n) {
  size_t best = pop[drk_search_rng_below(&p->rng, (uint32_t)n)];
  for (int k = 1; k < p->config.evo.tournament; k++) {
    size_t c = pop[drk_search_rng_below(&p->rng, (uint32_t)n)];
    if (drk_search_history_get(h, c)->reward > drk_search_history_get(h, best)->reward) best = c;
  }
  return best;
}

static void mutate_dim(drk_search_policy_t *p, int *idx, int d) {
  int nv = p->space.n_values[d];
  if (nv < 2) return;
  if (drk_search_rng_uniform(&p->rng) < 0.2) {
    int v = (int)drk_search_rng_below(&p->rng, (uint32_t)(nv - 1));
    idx[d] = v >= idx[d] ? v + 1 : v;
    return;
  }
  int step = drk_search_rng_below(&p->rng, 2) ? 1 : -1;
  if (idx[d] + step < 0 || idx[d] + step >= nv) step = -step;
  idx[d] += step;
}

/* A dimension that can change (more than one value), or -1. */
static int mutable_dim(drk_search_policy_t *p) {
  int cand[DRK_KNOB_COUNT], n = 0;
  for (int d = 0; d < p->space.n_dims; d++)
    if (p->space.n_values[d] > 1) cand[n++] = d;
  return n ? cand[drk_search_rng_below(&p->rng, (uint32_t)n)] : -1;
}

static int evo_propose(drk_search_policy_t *p, const drk_search_history_t *h, drk_search_cost_model_t *cost,
                       drk_sched_knobs_t *out, int n) {
  evo_state_t *st = p->impl;
  drk_point_set_t taken;
  drk_point_set_init(&taken);
  int k = drk_policy_take_seeds(p, h, &taken, out, 0, n);
  int cap = p->config.evo.population;
  size_t *pop = malloc(sizeof(size_t) * (size_t)cap);
  size_t np = pop ? population(h, cap, pop) : 0;
  const drk_search_space_t *s = &p->space;
  /* after a fallback the stable point parents the next batch */
  bool from_stable = st->have_stable;
  st->have_stable = false;
  for (int tries = 0; k < n && np >= 2 && tries < 50 * n; tries++) {
    int a[DRK_KNOB_COUNT], b[DRK_KNOB_COUNT];
    const drk_search_trial_t *pa = drk_search_history_get(h, tournament(p, h, pop, np));
    if (from_stable) pa = NULL;
    if (!drk_search_point_indices(s, pa ? &pa->point : &st->stable, a)) continue;
    if (drk_search_rng_uniform(&p->rng) < p->config.evo.crossover) {
      const drk_search_trial_t *pb = drk_search_history_get(h, tournament(p, h, pop, np));
      if (drk_search_point_indices(s, &pb->point, b))
        for (int d = 0; d < s->n_dims; d++)
          if (drk_search_rng_below(&p->rng, 2)) a[d] = b[d];
    }
    int d1 = mutable_dim(p);
    if (d1 < 0) break;
    mutate_dim(p, a, d1);
    if (drk_search_rng_uniform(&p->rng) < p->config.evo.mutate2) {
      int d2 = mutable_dim(p);
      if (d2 >= 0 && d2 != d1) mutate_dim(p, a, d2);
    }
    drk_sched_knobs_t q;
    drk_search_point_from_indices(s, a, &q);
    if (drk_policy_fresh(p, h, &taken, &q)) out[k++] = q;
  }
  free(pop);
  k = drk_policy_fill_random(p, h, &taken, out, k, n);
  drk_point_set_free(&taken);
  return k;
}

static void evo_rollback(drk_search_policy_t *p, const drk_sched_knobs_t *stable) {
  evo_state_t *st = p->impl;
  if (!stable) return;
  st->stable = *stable;
  st->have_stable = true;
}

static void evo_destroy(drk_search_policy_t *p) { free(p->impl); }

const drk_search_policy_ops_t drk_policy_evo_ops = {"evo", false, evo_propose, NULL, NULL, NULL, evo_rollback, evo_destroy};

bool drk_policy_evo_init(drk_search_policy_t *p, char *err, size_t n) {
  p->impl = calloc(1, sizeof(evo_state_t));
  if (!p->impl) {
    snprintf(err, n, "out of memory");
    return false;
  }
  return true;
}
