/* Search policies: what to measure next, given what was measured.
 *
 * One interface, three policies (SEARCH.md: baselines in the same harness, compared at equal
 * trials):
 *   "random"  uniform over the points not yet tried (exhaustive: it ends when the space does)
 *   "evo"     steady-state evolution over the history: tournament selection of parents,
 *             uniform crossover, mutation of one or two knobs (a step of the value index,
 *             sometimes a jump)
 *   "ppo"     a PPO agent (search/policy_ppo.c): factored, masked knob actions (per knob
 *             {-1, 0, +1} on the value index, Chameleon-style, or a categorical over the
 *             knob's values), a tanh MLP policy and value net with hand-written backprop and
 *             Adam; state = normalized knob indices + workload + target features. It learns
 *             on the cost model (cheap rollouts rewarded by predicted improvement) and
 *             proposes the points its rollouts visit; measured results retrain the cost
 *             model. Lr, epochs, batch, gamma, lambda, clip, entropy: the config's ppo.*
 *             and the stage's lr.
 * Every policy is deterministic given its seed and the history it is shown.
 *
 * The history of one tune is shared by tuner and policy: every point tried (measured, or
 * pruned without measuring), its metrics and its reward under the current stage's weights. */
#ifndef DRK_SEARCH_POLICY_H
#define DRK_SEARCH_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "search/features.h"
#include "search/reward.h"
#include "search/space.h"

typedef struct drk_search_trial {
  drk_sched_knobs_t point;
  drk_search_metrics_t metrics;
  double reward;      /* under the current stage's weights (drk_search_history_rescore) */
  bool measured;      /* false: pruned, never measured (metrics.msg says why; reward = floor) */
  bool resumed;       /* read back from the database */
  int round;          /* the tune round that measured it; -1 when resumed */
  double predicted;   /* the cost model's prediction when it was chosen; NAN when none */
  int64_t record_id;  /* its database record, 0 when none */
} drk_search_trial_t;

/* ---- history ---- */
typedef struct drk_search_history drk_search_history_t;

/* An empty history over s (copied). NULL when out of memory. */
drk_search_history_t *drk_search_history_create(const drk_search_space_t *s);
void drk_search_history_destroy(drk_search_history_t *h);
const drk_search_space_t *drk_search_history_space(const drk_search_history_t *h);
size_t drk_search_history_count(const drk_search_history_t *h);
/* Trial i (0 .. count-1), in the order added; borrowed, valid until the next add. */
const drk_search_trial_t *drk_search_history_get(const drk_search_history_t *h, size_t i);
/* The trial of point p, or NULL. */
const drk_search_trial_t *drk_search_history_find(const drk_search_history_t *h, const drk_sched_knobs_t *p);
/* Adds t; false when its point is already there (nothing added) or out of memory. */
bool drk_search_history_add(drk_search_history_t *h, const drk_search_trial_t *t);
/* Sets the database record of trial i. */
void drk_search_history_set_record(drk_search_history_t *h, size_t i, int64_t record_id);
/* The valid measured trial with the highest reward (ties: the earlier), or NULL. */
const drk_search_trial_t *drk_search_history_best(const drk_search_history_t *h);
/* Index of the best trial, -1 when none. */
long drk_search_history_best_index(const drk_search_history_t *h);
/* Measured trials (pruned ones excluded). */
size_t drk_search_history_measured(const drk_search_history_t *h);
/* Recomputes every reward with weights w against the reference ref. */
void drk_search_history_rescore(drk_search_history_t *h, const drk_search_config_t *c, const drk_search_weights_t *w,
                                const drk_search_metrics_t *ref);

/* ---- cost model ----
 * A learned model of the reward over points (search/cost_model.c): an ensemble of small MLPs
 * on the point's features (one-hot and normalized value index per knob) and the context
 * features, trained online on the measured trials (and on prior records of similar
 * workloads). It screens candidates: only the most promising reach the measurement. */
typedef struct drk_search_cost_model drk_search_cost_model_t;

/* context: n_context features of this tune's workload and target (may be NULL when 0). */
drk_search_cost_model_t *drk_search_cost_model_create(const drk_search_space_t *s, const drk_search_config_t *c,
                                                      const float *context, int n_context, uint64_t seed);
void drk_search_cost_model_destroy(drk_search_cost_model_t *m);
/* A prior sample: point p of the space measured for another workload (its context features,
 * n_context of them) with reward r; weight < 1 counts it less than own measurements. */
void drk_search_cost_model_add_prior(drk_search_cost_model_t *m, const drk_sched_knobs_t *p, const float *context,
                                     double reward, double weight);
/* Trains (continuing from the current weights) on h's measured trials and the priors. */
void drk_search_cost_model_fit(drk_search_cost_model_t *m, const drk_search_history_t *h);
/* Whether it has been fitted on enough samples to rank candidates. */
bool drk_search_cost_model_ready(const drk_search_cost_model_t *m);
/* Expected reward of p (p_valid * reward + (1 - p_valid) * floor); *out_std (may be NULL)
 * gets the ensemble's spread. */
double drk_search_cost_model_predict(drk_search_cost_model_t *m, const drk_sched_knobs_t *p, double *out_std);
/* The two heads: the reward p would have if valid, the probability that it is, and the
 * ensemble's spread of the reward (any may be NULL). */
void drk_search_cost_model_predict_parts(drk_search_cost_model_t *m, const drk_sched_knobs_t *p, double *out_reward,
                                         double *out_p_valid, double *out_std);
/* The value that ranks candidates: reward-if-valid + kappa * spread when p_valid is at least
 * DRK_SEARCH_CM_VALID_THRESHOLD, else below every such point. Optimistic about validity on
 * purpose: an invalid measurement costs one trial like a slow one, and the best points of a
 * space often border its invalid region. */
#define DRK_SEARCH_CM_VALID_THRESHOLD 0.25
double drk_search_cost_model_score(drk_search_cost_model_t *m, const drk_sched_knobs_t *p, double kappa);

/* ---- policies ---- */
typedef struct drk_search_policy drk_search_policy_t;

typedef struct drk_search_policy_options {
  const drk_search_config_t *config; /* NULL: drk_search_config_default */
  uint64_t seed;
  const float *context;              /* workload + target features (DRK_SEARCH_CONTEXT_FEATURES), may be NULL */
  int n_context;
} drk_search_policy_options_t;

/* name: "random", "evo" or "ppo". NULL with a message for another name. */
drk_search_policy_t *drk_search_policy_create(const char *name, const drk_search_space_t *s,
                                              const drk_search_policy_options_t *o, char *err, size_t n);
void drk_search_policy_destroy(drk_search_policy_t *p);
const char *drk_search_policy_name(const drk_search_policy_t *p);
/* Whether the policy's proposals read the cost model (ppo): the tuner then fits it every round
 * even without screening. */
bool drk_search_policy_wants_cost_model(const drk_search_policy_t *p);
/* Up to n new points (not in h, accepted by the space's prune hook, distinct) into out;
 * returns how many (0: nothing new left). cost (may be NULL) is the tune's cost model,
 * fitted on h. */
int drk_search_policy_propose(drk_search_policy_t *p, const drk_search_history_t *h, drk_search_cost_model_t *cost,
                              drk_sched_knobs_t *out, int n);
/* Trials [first, first + count) of h were just measured (or resumed). */
void drk_search_policy_observe(drk_search_policy_t *p, const drk_search_history_t *h, size_t first, size_t count);
/* Points to propose before anything else (warm start from similar workloads; copied). */
void drk_search_policy_seed(drk_search_policy_t *p, const drk_sched_knobs_t *points, int n);
/* The stage's learning rate (the agent's; others ignore it). */
void drk_search_policy_set_lr(drk_search_policy_t *p, double lr);
/* The policy's state is good (its round was not a drop): remember it. */
void drk_search_policy_checkpoint(drk_search_policy_t *p);
/* Fallback: return to the last checkpoint and to the stable point. */
void drk_search_policy_rollback(drk_search_policy_t *p, const drk_sched_knobs_t *stable);

#endif
