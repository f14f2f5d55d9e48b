/* Measurements, the reward that scores them, the staged configuration of a tune, and the
 * fallback rule.
 *
 * Reward (SEARCH.md): r = α·throughput + β·memory + γ·energy + δ·fidelity, each term relative
 * to the heuristic's kernel (the reference):
 *   throughput = t_ref / t            (> 1: faster than the heuristic)
 *   memory     = mem_ref / mem        (workspace + shared memory + registers, as the caller counts)
 *   energy     = e_ref / e            (joules per run)
 *   fidelity   = 1 − error/tolerance  (clamped to 0..1)
 * A term whose measurement is unavailable (energy without NVML, memory not counted: < 0 in
 * the candidate or the reference) gets weight 0 and the reward says so (terms.energy_used):
 * the tune report must print it. The remaining weights are not rescaled, so rewards of one
 * tune stay comparable. An invalid candidate (wrong output, crash, hang, compile error) gets
 * the floor reward whatever its time: a fast wrong kernel scores as low as a broken one.
 *
 * Configuration: a `key = value` text file. Settings come before the first section; every
 * `[name]` section is a stage of the schedule (in file order; a file with stages replaces the
 * default ones). '#' starts a comment. Errors are reported as `file:line: error: ...`.
 *
 *   # settings (defaults shown)
 *   reward.floor = 0            # reward of an invalid candidate
 *   reward.tolerance = 0.01     # error tolerance when the measurement gives none
 *   fallback.drop = 0.15        # a round whose best reward is this much below the reference...
 *   fallback.rounds = 3         # ...this many rounds in a row: back to the last stable point
 *   tune.batch = 8              # candidates measured per round
 *   tune.screen = 4             # the cost model ranks batch*screen proposals (1: no screening)
 *   tune.remeasure = 1          # re-measurements of the winner (0: none)
 *   tune.stable_tol = 0.05      # a re-measurement at most 5% (or tune.stable_abs_us) slower than the
 *   tune.stable_abs_us = 0.5    # first marks the record stable (a faster one agrees: the winner of
 *                               # many noisy trials is a low draw, so only "slower" is suspect)
 *   ppo.action = step           # step: {-1,0,+1} per knob index (Chameleon); categorical: a value per knob
 *   ppo.epochs = 3   ppo.batch = 32   ppo.gamma = 0.9   ppo.lambda = 0.99   ppo.clip = 0.2
 *   ppo.entropy = 0.01   ppo.hidden = 32   ppo.horizon = 8   ppo.rollouts = 16   ppo.iterations = 4
 *   ppo.lr_scale = 1            # multiplies every stage's lr
 *   evo.population = 16   evo.tournament = 3   evo.crossover = 0.5   evo.mutate2 = 0.3
 *   cost.hidden = 32   cost.epochs = 40   cost.lr = 0.003   cost.ensemble = 3
 *
 *   [warmup]                    # a stage: its rounds, the agent's learning rate, the weights
 *   epochs = 50                 # rounds (a round: propose a batch, measure it, learn)
 *   lr = 1e-4
 *   weights = 0.2, 0.1, 0.1, 0.6   # α β γ δ (or alpha = ..., beta = ..., gamma = ..., delta = ...)
 *
 *   [main]
 *   epochs = 200
 *   lr = 3e-5
 *   weights = 0.4, 0.3, 0.2, 0.1
 *
 * After the last stage's epochs the tune stays in the last stage. */
#ifndef DRK_SEARCH_REWARD_H
#define DRK_SEARCH_REWARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* What a measurement of one candidate gives (the measure callback fills it; tune.h).
 * Unknown quantities are < 0. */
typedef struct drk_search_metrics {
  bool valid;           /* every output matched the reference within tolerance, it ran, it compiled */
  double time_us;       /* median kernel time (required when valid) */
  double ref_time_us;   /* > 0: the heuristic's kernel timed in the same request (normalizes
                         * throughput against drift); else the tune's first measurement is used */
  double tflops, gbs;   /* achieved */
  double energy_j;      /* per run (NVML) */
  double mem_bytes;     /* workspace + shared memory + registers */
  double error;         /* relative error against the reference */
  double tolerance;     /* the dtype's tolerance (> 0), else the config's */
  double sm_mhz, power_w; /* clock and power during the run (diagnostics) */
  double variance;      /* relative spread of the timed runs (diagnostics) */
  char msg[256];        /* why invalid, or a note */
} drk_search_metrics_t;

/* A metrics value with every quantity unknown and valid = false. */
drk_search_metrics_t drk_search_metrics_unknown(void);

typedef struct drk_search_weights {
  double alpha, beta, gamma, delta; /* throughput, memory, energy, fidelity */
} drk_search_weights_t;

#define DRK_SEARCH_MAX_STAGES 8

typedef struct drk_search_stage {
  char name[32];
  int epochs;  /* rounds */
  double lr;   /* the agent's learning rate */
  drk_search_weights_t w;
} drk_search_stage_t;

typedef struct drk_search_ppo_config {
  char action[16]; /* "step" or "categorical" */
  int epochs, batch, hidden, horizon, rollouts, iterations;
  double gamma, lambda, clip, entropy, value_coef, lr_scale;
} drk_search_ppo_config_t;

typedef struct drk_search_config {
  int n_stages;
  drk_search_stage_t stages[DRK_SEARCH_MAX_STAGES];
  double floor, tolerance;
  double fallback_drop;
  int fallback_rounds;
  int batch, screen, remeasure;
  double stable_tol, stable_abs_us;
  drk_search_ppo_config_t ppo;
  struct {
    int population, tournament;
    double crossover, mutate2;
  } evo;
  struct {
    int hidden, epochs, ensemble;
    double lr;
  } cost;
} drk_search_config_t;

/* The defaults above. */
void drk_search_config_default(drk_search_config_t *c);
/* Parses text over *c (starting from what *c holds: call drk_search_config_default first).
 * path names the file in errors. False with "path:line: error: message" in err; *c is then
 * unchanged. */
bool drk_search_config_parse(const char *text, const char *path, drk_search_config_t *c, char *err, size_t n);
/* Reads and parses the file at path over *c. */
bool drk_search_config_load(const char *path, drk_search_config_t *c, char *err, size_t n);
/* Writes c as a config file that parses back to c. */
void drk_search_config_write(const drk_search_config_t *c, FILE *out);
/* The stage of round (0-based; past the last stage: the last one); *out_index its index. */
const drk_search_stage_t *drk_search_config_stage(const drk_search_config_t *c, int round, int *out_index);

typedef struct drk_search_reward_terms {
  double throughput, memory, energy, fidelity; /* the terms (0 when unused) */
  bool memory_used, energy_used;               /* false: that weight was zeroed */
  double reward;
} drk_search_reward_terms_t;

/* The reward of m against the reference ref under weights w (c gives floor and default
 * tolerance); terms (may be NULL) gets the breakdown. Invalid m, or a valid m without a
 * positive time: the floor. */
double drk_search_reward(const drk_search_config_t *c, const drk_search_weights_t *w, const drk_search_metrics_t *ref,
                         const drk_search_metrics_t *m, drk_search_reward_terms_t *terms);

/* The fallback rule: a round whose reward (the best of the round) is more than `drop`
 * (relative) below the reference reward is a drop; the reference is the reward of the last
 * round that was not a drop. `rounds` drops in a row trigger: the tuner returns to the last
 * stable point and diagnoses; the streak then starts over (the reference stays). */
typedef struct drk_search_fallback {
  double drop;
  int rounds;
  double reference;
  bool have_reference;
  int streak;
  int triggered; /* times triggered */
} drk_search_fallback_t;

void drk_search_fallback_init(drk_search_fallback_t *f, double drop, int rounds);
/* Feeds one round's reward; true when this round triggers the fallback. */
bool drk_search_fallback_round(drk_search_fallback_t *f, double round_reward);

#endif
