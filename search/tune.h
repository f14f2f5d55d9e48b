/* The tuning loop of one kernel: a policy over the kernel's space, within a trial budget, on
 * measurements made by the caller.
 *
 * The caller (drkc tune) owns compilation and the GPU: `measure` gets a point (the kernel's
 * knobs, a --schedules line's worth) and returns its metrics and whether it is valid (it
 * compiled, ran, and every output matched the reference). The loop:
 *   1. stores the workload and target in the database; with resume, reads back every record
 *      of (workload, target, drkc version): those points are not measured again and count
 *      toward the budget;
 *   2. measures the heuristic's point first (unless resumed): the reference of every reward;
 *      a heuristic that fails is an error (nothing to normalize against);
 *   3. with warm_start, seeds the policy and the cost model from the best records of the
 *      nearest workloads of the same kind (by workload + target features);
 *   4. per round: the stage (config) gives weights and the agent's lr (a stage change
 *      rescores the history); the policy proposes batch x screen fresh points; once the cost
 *      model has data it keeps the batch most promising (drk_search_cost_model_score: the
 *      reward if valid + half its spread, unless likely invalid), with the untried one-step
 *      neighbours of the two best points competing as if valid, and one in eight of the
 *      batch drawn uniformly from the whole space; pruned points are logged and skipped (the
 *      policies skip them already); `prepare` (optional) gets the batch (compile it in
 *      parallel), then `measure` each point; each result is committed to the database as it
 *      is measured (a SIGKILL loses only the point being measured) and logged as one JSON
 *      line; the policy observes the batch; the cost model refits;
 *   5. fallback: when the round's best reward drops more than fallback.drop below the
 *      reference round fallback.rounds times in a row, the policy returns to its last
 *      checkpoint and the stable point (the best as of the reference round), and diagnostic
 *      mode logs why: reward variance, failures, clocks and power, and a re-measurement of
 *      the stable point (slower now: the GPU drifted, not the policy);
 *   6. re-measures the winner tune.remeasure times; agreement within tune.stable_tol marks
 *      its record stable (the database returns only stable records as best; with
 *      tune.remeasure = 0 nothing becomes stable). An invalid candidate is never the winner,
 *      whatever time it reports; a candidate reported valid without a positive time, or
 *      with an error above its tolerance, is stored as invalid.
 *
 * Event log (JSON lines, one object per line, "event" first): start, resume, stage, trial
 * (kernel, workload, trial, round, stage, policy, point, valid, reason, metrics, reward and
 * its terms, predicted, best_reward, best_time_us, best_point, t_s, unix), pruned, fallback,
 * diagnostic, remeasure, end. Unknown quantities are null. */
#ifndef DRK_SEARCH_TUNE_H
#define DRK_SEARCH_TUNE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "search/db.h"
#include "search/features.h"
#include "search/policy.h"
#include "search/reward.h"
#include "search/space.h"

/* Measures point p of space s into *out (start from drk_search_metrics_unknown()). Returns 0
 * when the candidate was measured, valid or not: a candidate that fails to compile, crashes,
 * hangs or gives wrong outputs is out->valid = false with the reason in out->msg. Nonzero:
 * measuring cannot go on (the GPU is gone): the tune stops with out->msg; what was measured
 * stays in the database. */
typedef int (*drk_search_measure_fn)(void *ctx, const drk_search_space_t *s, const drk_sched_knobs_t *p,
                                     drk_search_metrics_t *out);
/* Optional: the points about to be measured this round, in order (compile them in parallel).
 * Nonzero stops the tune like measure's. */
typedef int (*drk_search_prepare_fn)(void *ctx, const drk_search_space_t *s, const drk_sched_knobs_t *points, int n);
/* Human-readable progress and diagnostics, one line without '\n'. */
typedef void (*drk_search_log_fn)(void *ctx, const char *line);

typedef struct drk_search_tune_options {
  const char *kernel;        /* kernel name (for logs and records) */
  const char *workload;      /* workload key (32 hex digits); NULL: the space's */
  const char *description;   /* workload description (features.h); may be NULL */
  const drk_search_target_t *target; /* required */
  const char *drkc_version;  /* NULL: this drkc's */
  const char *model, *tags;  /* provenance; may be NULL */
  int budget;                /* measured points, heuristic and resumed ones included */
  double time_limit_s;       /* > 0: no round starts once this many seconds have passed since the
                              * tune began (the round under way ends; the winner is re-measured) */
  uint64_t seed;
  const drk_search_config_t *config; /* NULL: defaults */
  drk_search_db_t *db;       /* NULL: no database (no resume, no warm start) */
  bool resume;
  bool warm_start;
  FILE *events;              /* JSON-lines event log; NULL: none */
  drk_search_measure_fn measure;
  drk_search_prepare_fn prepare; /* NULL: none */
  void *ctx;                 /* for measure and prepare */
  drk_search_log_fn log;     /* NULL: silent */
  void *log_ctx;
} drk_search_tune_options_t;

typedef struct drk_search_tune_result {
  bool found;                     /* a valid point exists (the heuristic at least) */
  drk_sched_knobs_t best;         /* the winner (highest reward under the last stage's weights) */
  char best_text[512];
  drk_search_metrics_t best_metrics;
  double best_reward;
  drk_search_metrics_t heuristic_metrics;
  double speedup;                 /* heuristic time / winner time */
  bool stable;                    /* the winner's re-measurement agreed */
  int64_t best_record;            /* its database record (0: none) */
  int measured, resumed, invalid, pruned, remeasured, rounds, fallbacks;
  bool exhausted;                 /* the policy ran out of new points before the budget */
  bool timed_out;                 /* time_limit_s ended the rounds before the budget */
  bool energy_used, memory_used;  /* false: that reward weight was 0 (no measurement) */
  char note[256];                 /* e.g. "energy unavailable: gamma = 0" */
} drk_search_tune_result_t;

/* Tunes one kernel with policy p over space s (the policy's space). False with a message in
 * err on a user-facing failure (bad options, the heuristic failing, measure stopping, a
 * database error); *out is filled as far as the tune got either way. */
bool drk_search_tune(const drk_search_space_t *s, drk_search_policy_t *p, const drk_search_tune_options_t *o,
                     drk_search_tune_result_t *out, char *err, size_t n);

#endif
