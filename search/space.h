/* The search space of one kernel: the knobs its lowering consulted (the knob space that
 * `drkc --emit=schedules` lists on the kernel's line) and the legal values of each, from
 * lower/knobs.def (lo..hi, powers of two only where the knob says so).
 *
 * A point of the space is a drk_sched_knobs_t whose pinned set is exactly the space's mask:
 * applying it to the kernel (a --schedules line) needs nothing else. Inside the search a
 * point is also a vector of value indices (one per dimension, in knob id order), which is
 * what policies move along and what features are made of.
 *
 * The space is a plain value (fixed arrays, no pointers it owns): copy it, keep it on the
 * stack; nothing to free. A tuner adds what the knob domains do not know (shared-memory and
 * register budgets, a target without clusters) through the prune hook. */
#ifndef DRK_SEARCH_SPACE_H
#define DRK_SEARCH_SPACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lower/lower.h"

/* The most values one knob may have in a space (knobs.def's widest domain is 16). */
#define DRK_SEARCH_MAX_VALUES 64

/* Whether point p (a full point of the space) may be measured; false with a reason in why
 * (size n) for a point the tuner knows to be invalid (it is never measured: counted as
 * pruned). */
typedef bool (*drk_search_prune_fn)(void *ctx, const drk_sched_knobs_t *p, char *why, size_t n);
/* The verdict the tuner already has on p, without working one out: 1 valid, 0 pruned, -1 not
 * known (drkc tune: the prune hook's memo; its verdicts cost a forked lowering of the model). */
typedef int (*drk_search_prune_known_fn)(void *ctx, const drk_sched_knobs_t *p);

typedef struct drk_search_space {
  uint32_t mask;                            /* knobs of the space (bit = drk_knob_id_t) */
  int n_dims;                               /* knobs in the mask */
  drk_knob_id_t dims[DRK_KNOB_COUNT];       /* knob of each dimension, ascending ids */
  int n_values[DRK_KNOB_COUNT];             /* per dimension */
  int values[DRK_KNOB_COUNT][DRK_SEARCH_MAX_VALUES]; /* per dimension, ascending */
  drk_sched_knobs_t heuristic;              /* the heuristic's pick, every dimension pinned */
  char kernel[128];                         /* kernel name ("" when not from a line) */
  char workload[40];                        /* workload key ("" when not known) */
  char kind[32];                            /* kernel kind (mm_ws, rows, ...; "" when not known) */
  drk_search_prune_fn prune;                /* NULL: every point of the domains is valid */
  /* NULL: prune's verdicts are cheap; else a policy's inner loops (PPO's action masks and
   * rollouts over the cost model) ask this instead of prune, and the search loop prunes only
   * the points proposed for measuring */
  drk_search_prune_known_fn prune_known;
  void *prune_ctx;
} drk_search_space_t;

/* The space of the knobs in mask around the heuristic's values (heuristic->v[k] for every k
 * in mask; a value outside the knob's domain is an error, as is a knob with more than
 * DRK_SEARCH_MAX_VALUES values). The prune hook is unset. False with a message in err. */
bool drk_search_space_init(drk_search_space_t *s, uint32_t mask, const drk_sched_knobs_t *heuristic, char *err,
                           size_t n);
/* The space of one kernel line of `drkc --emit=schedules` (`NAME wl=KEY KIND knob=value ...`):
 * the knobs listed, the values as the heuristic's pick, name, key and kind kept. A line without
 * knobs is an error (nothing to tune). */
bool drk_search_space_parse_line(const char *line, drk_search_space_t *s, char *err, size_t n);

/* Number of points (the product of the dimensions' value counts). */
uint64_t drk_search_space_size(const drk_search_space_t *s);
/* Dimension of knob id in s, or -1. */
int drk_search_space_dim(const drk_search_space_t *s, drk_knob_id_t id);

/* ---- points ---- */
/* The point of value indices idx[0..n_dims). */
void drk_search_point_from_indices(const drk_search_space_t *s, const int *idx, drk_sched_knobs_t *out);
/* The value indices of p; false when p is not a point of s (a knob missing, an extra one, a
 * value not in the domain). */
bool drk_search_point_indices(const drk_search_space_t *s, const drk_sched_knobs_t *p, int *out_idx);
/* The point number `ordinal` (0 .. size-1; the first dimension varies slowest) and back. */
void drk_search_point_from_ordinal(const drk_search_space_t *s, uint64_t ordinal, drk_sched_knobs_t *out);
uint64_t drk_search_point_ordinal(const drk_search_space_t *s, const drk_sched_knobs_t *p);
/* Whether p is a point of s that the prune hook accepts (why: the reason when not). */
bool drk_search_point_valid(const drk_search_space_t *s, const drk_sched_knobs_t *p, char *why, size_t n);
/* Whether p is a point of s not known to be pruned: drk_search_point_valid without prune_known,
 * else prune_known's verdict (an unknown one counts as valid). For a policy's inner loops. */
bool drk_search_point_maybe_valid(const drk_search_space_t *s, const drk_sched_knobs_t *p);
/* Canonical text: the space's knobs in id order, "mm.tile_n=128 mm.split_k=2" (the text
 * drk_sched_knobs_format writes for exactly the mask's knobs). */
void drk_search_point_format(const drk_search_space_t *s, const drk_sched_knobs_t *p, char *buf, size_t n);
/* Parses canonical text (spaces or commas between items) into a point of s; false with a
 * message when a knob is unknown, not of the space, missing, or its value is illegal. */
bool drk_search_point_parse(const drk_search_space_t *s, const char *text, drk_sched_knobs_t *out, char *err,
                            size_t n);
/* 64-bit hash of the point's pinned knobs and values (the `used` pointer and unpinned slots
 * do not count): equal points hash equal, in any space. */
uint64_t drk_search_point_hash(const drk_sched_knobs_t *p);
bool drk_search_point_equal(const drk_sched_knobs_t *a, const drk_sched_knobs_t *b);
/* Features of p: per dimension its value index scaled to 0..1 (a one-value dimension is 0).
 * out gets s->n_dims floats. */
void drk_search_point_features(const drk_search_space_t *s, const drk_sched_knobs_t *p, float *out);

/* ---- deterministic random numbers (splitmix64 seeding xoshiro256**) ---- */
typedef struct drk_search_rng {
  uint64_t s[4];
} drk_search_rng_t;

void drk_search_rng_seed(drk_search_rng_t *r, uint64_t seed);
uint64_t drk_search_rng_next(drk_search_rng_t *r);
/* Uniform in [0, n) (n > 0), unbiased. */
uint32_t drk_search_rng_below(drk_search_rng_t *r, uint32_t n);
/* Uniform in [0, 1). */
double drk_search_rng_uniform(drk_search_rng_t *r);
/* Standard normal. */
double drk_search_rng_normal(drk_search_rng_t *r);
/* A uniformly random point of s (ignores the prune hook). */
void drk_search_point_random(const drk_search_space_t *s, drk_search_rng_t *r, drk_sched_knobs_t *out);

#endif
