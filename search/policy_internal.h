/* The policy interface's implementation side, private to search/policy*.c. */
#ifndef DRK_SEARCH_POLICY_INTERNAL_H
#define DRK_SEARCH_POLICY_INTERNAL_H

#include "search/policy.h"

typedef struct drk_search_policy_ops {
  const char *name;
  bool wants_cost_model; /* propose reads the cost model (the tuner then fits it every round) */
  int (*propose)(drk_search_policy_t *p, const drk_search_history_t *h, drk_search_cost_model_t *cost,
                 drk_sched_knobs_t *out, int n);
  void (*observe)(drk_search_policy_t *p, const drk_search_history_t *h, size_t first, size_t count);
  void (*set_lr)(drk_search_policy_t *p, double lr);
  void (*checkpoint)(drk_search_policy_t *p);
  void (*rollback)(drk_search_policy_t *p, const drk_sched_knobs_t *stable);
  void (*destroy)(drk_search_policy_t *p);
} drk_search_policy_ops_t;

#define DRK_POLICY_MAX_SEEDS 64

struct drk_search_policy {
  const drk_search_policy_ops_t *ops;
  drk_search_space_t space;
  drk_search_config_t config;
  drk_search_rng_t rng;
  float context[DRK_SEARCH_CONTEXT_FEATURES];
  int n_context;
  /* warm-start points not yet proposed */
  drk_sched_knobs_t seeds[DRK_POLICY_MAX_SEEDS];
  int n_seeds;
  void *impl; /* the policy's own state */
};

/* Set of points proposed in one call, to keep a batch distinct. */
typedef struct drk_point_set {
  uint64_t *slots; /* hash + 1, 0 = empty */
  size_t cap, n;
} drk_point_set_t;

void drk_point_set_init(drk_point_set_t *s);
void drk_point_set_free(drk_point_set_t *s);
/* True when p was new (and is now in the set). */
bool drk_point_set_add(drk_point_set_t *s, const drk_sched_knobs_t *p);

/* Whether a policy may propose q: not in h, not already in `taken`, accepted by the prune
 * hook. Adds it to taken when true. */
bool drk_policy_fresh(const drk_search_policy_t *p, const drk_search_history_t *h, drk_point_set_t *taken,
                      const drk_sched_knobs_t *q);
/* Fills out[k..n) with fresh uniformly random points (enumerating the untried ones when
 * random draws keep hitting tried points); returns the new k. */
int drk_policy_fill_random(drk_search_policy_t *p, const drk_search_history_t *h, drk_point_set_t *taken,
                           drk_sched_knobs_t *out, int k, int n);
/* Proposes pending warm-start seeds first; returns the new k. */
int drk_policy_take_seeds(drk_search_policy_t *p, const drk_search_history_t *h, drk_point_set_t *taken,
                          drk_sched_knobs_t *out, int k, int n);

bool drk_policy_evo_init(drk_search_policy_t *p, char *err, size_t n);
bool drk_policy_ppo_init(drk_search_policy_t *p, char *err, size_t n);
extern const drk_search_policy_ops_t drk_policy_random_ops, drk_policy_evo_ops, drk_policy_ppo_ops;

#endif
