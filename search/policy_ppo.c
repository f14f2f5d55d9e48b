/* The PPO agent (search/policy.h).
 *
 * Environment: the kernel's space with the cost model as the reward signal (Chameleon, ICLR
 * 2020: the agent explores a learned model, the GPU only measures what it finds promising).
 *   step mode (ppo.action = step): state = the point's normalized knob indices + context
 *     (workload and target features); action = per knob a step in {-1, 0, +1} of its value
 *     index, masked where it would leave the domain or land on a point known to be pruned
 *     (space.h: prune_known, so that rollouts over the cost model cost no lowerings; the
 *     proposals are pruned for real before measuring); an episode is
 *     ppo.horizon steps from a start point (the best measured points, the stable point after
 *     a fallback, random points); reward = predicted improvement (standardized).
 *   categorical mode (ppo.action = categorical): state = the best measured point + context;
 *     action = per knob a value (a categorical over its legal values); one-step episodes;
 *     reward = the predicted reward of the point (standardized).
 * A pruned point ends nowhere: the state stays and the step costs -1.
 *
 * Learning: per propose, ppo.iterations rounds of ppo.rollouts episodes, GAE(gamma, lambda)
 * advantages (normalized), then ppo.epochs passes over minibatches of ppo.batch samples of
 * the clipped surrogate (clip) with an entropy bonus (entropy) and a value loss (value_coef),
 * Adam at the stage's lr times ppo.lr_scale. Policy: state -> tanh hidden x2 -> the
 * concatenated logits of every knob's action; value: state -> tanh hidden x2 -> 1.
 * Proposals: the fresh points its rollouts visited, best predicted first. Before the cost
 * model is ready (the first round), random points. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/support.h"
#include "search/nn.h"
#include "search/policy_internal.h"

typedef struct ppo_sample {
  int a[DRK_KNOB_COUNT];
  float logp, value, reward, adv, ret;
  bool done;
} ppo_sample_t;

typedef struct ppo_cand {
  drk_sched_knobs_t p;
  double pred;
} ppo_cand_t;

typedef struct ppo_state {
  bool step_mode;
  int S, A;
  int off[DRK_KNOB_COUNT], width[DRK_KNOB_COUNT];
  drk_search_mlp_t pi, vf, pi_ck, vf_ck;
  bool have_ck;
  double lr;
  float *xs;       /* states of the samples, S each */
  uint8_t *masks;  /* legal actions, A each */
  ppo_sample_t *samples;
  size_t n, cap;
  ppo_cand_t *cands;
  size_t n_cands, cap_cands;
  drk_point_set_t visited;
  drk_sched_knobs_t stable;
  bool have_stable;
  float *probs, *dlogits;
  double y_scale; /* the reward's standardization */
} ppo_state_t;

static void encode_state(const drk_search_policy_t *p, const int *idx, float *x) {
  const drk_search_space_t *s = &p->space;
  for (int d = 0; d < s->n_dims; d++) x[d] = s->n_values[d] > 1 ? (float)idx[d] / (float)(s->n_values[d] - 1) : 0.0f;
  for (int c = 0; c < p->n_context; c++) x[s->n_dims + c] = p->context[c];
}

/* Per knob: softmax over its legal logits into probs; entropy sum into *ent. */
static void masked_softmax(const ppo_state_t *st, int n_dims, const float *logits, const uint8_t *mask, float *probs,
                           double *ent) {
  double h = 0;
  for (int d = 0; d < n_dims; d++) {
    int o = st->off[d], w = st->width[d];
    float mx = -INFINITY;
    for (int j = 0; j < w; j++)
      if (mask[o + j] && logits[o + j] > mx) mx = logits[o + j];
    double z = 0;
    for (int j = 0; j < w; j++) {
      probs[o + j] = mask[o + j] ? (float)exp(logits[o + j] - mx) : 0.0f;
      z += probs[o + j];
    }
    for (int j = 0; j < w; j++) {
      probs[o + j] = (float)(probs[o + j] / z);
      if (probs[o + j] > 0) h -= probs[o + j] * log(probs[o + j]);
    }
  }
  if (ent) *ent = h;
}

/* The legal actions at idx (step mode: steps that stay in the domain and, moving one knob,
 * do not land on a pruned point; categorical: every value). */
static void action_mask(drk_search_policy_t *p, ppo_state_t *st, const int *idx, uint8_t *mask) {
  const drk_search_space_t *s = &p->space;
  for (int d = 0; d < s->n_dims; d++) {
    int o = st->off[d], nv = s->n_values[d];
    if (!st->step_mode) {
      for (int j = 0; j < nv; j++) mask[o + j] = 1;
      continue;
    }
    mask[o + 1] = 1;
    for (int j = 0; j < 3; j += 2) {
      int t = idx[d] + (j - 1);
      bool ok = t >= 0 && t < nv;
      if (ok && s->prune) {
        int q[DRK_KNOB_COUNT];
        memcpy(q, idx, sizeof(int) * (size_t)s->n_dims);
        q[d] = t;
        drk_sched_knobs_t k;
        drk_search_point_from_indices(s, q, &k);
        ok = drk_search_point_maybe_valid(s, &k);
      }
      mask[o + j] = ok;
    }
  }
}

static int sample_cat(drk_search_rng_t *r, const float *probs, int w) {
  double u = drk_search_rng_uniform(r), c = 0;
  int last = -1;
  for (int j = 0; j < w; j++) {
    if (probs[j] <= 0) continue;
    last = j;
    c += probs[j];
    if (u < c) return j;
  }
  return last;
}

static bool grow_samples(ppo_state_t *st) {
  if (st->n < st->cap) return true;
  size_t cap = st->cap ? st->cap * 2 : 256;
  float *xs = realloc(st->xs, cap * (size_t)st->S * sizeof(float));
  if (!xs) return false;
  st->xs = xs;
  uint8_t *masks = realloc(st->masks, cap * (size_t)st->A);
  if (!masks) return false;
  st->masks = masks;
  ppo_sample_t *smp = realloc(st->samples, cap * sizeof *smp);
  if (!smp) return false;
  st->samples = smp;
  st->cap = cap;
  return true;
}

static void add_cand(ppo_state_t *st, const drk_sched_knobs_t *k, double pred) {
  if (!drk_point_set_add(&st->visited, k)) return;
  if (st->n_cands == st->cap_cands) {
    size_t cap = st->cap_cands ? st->cap_cands * 2 : 256;
    ppo_cand_t *c = realloc(st->cands, cap * sizeof *c);
    if (!c) return;
    st->cands = c;
    st->cap_cands = cap;
  }
  st->cands[st->n_cands++] = (ppo_cand_t){*k, pred};
}

/* The start point of an episode: the stable point (after a fallback), one of the best
 * measured points, or a random point. */
static void start_point(drk_search_policy_t *p, ppo_state_t *st, const drk_search_history_t *h, const size_t *top,
                        size_t n_top, int episode, int *idx) {
  const drk_search_space_t *s = &p->space;
  double u = drk_search_rng_uniform(&p->rng);
  if (st->have_stable && (episode == 0 || u < 0.25) && drk_search_point_indices(s, &st->stable, idx)) return;
  if (n_top && (episode == 0 || u < 0.6)) {
    size_t pick = episode == 0 ? 0 : drk_search_rng_below(&p->rng, (uint32_t)n_top);
    if (drk_search_point_indices(s, &drk_search_history_get(h, top[pick])->point, idx)) return;
  }
  for (int d = 0; d < s->n_dims; d++) idx[d] = (int)drk_search_rng_below(&p->rng, (uint32_t)s->n_values[d]);
}

/* One episode of rollouts into the sample buffer. */
static void rollout(drk_search_policy_t *p, ppo_state_t *st, drk_search_cost_model_t *cost, const int *start,
                    const int *best_idx) {
  const drk_search_space_t *s = &p->space;
  int idx[DRK_KNOB_COUNT];
  memcpy(idx, start, sizeof(int) * (size_t)s->n_dims);
  drk_sched_knobs_t k;
  drk_search_point_from_indices(s, idx, &k);
  double pred = drk_search_cost_model_score(cost, &k, 0);
  int horizon = st->step_mode ? p->config.ppo.horizon : 1;
  for (int t = 0; t < horizon; t++) {
    if (!grow_samples(st)) return;
    ppo_sample_t *smp = &st->samples[st->n];
    float *x = st->xs + st->n * (size_t)st->S;
    uint8_t *mask = st->masks + st->n * (size_t)st->A;
    encode_state(p, st->step_mode ? idx : best_idx, x);
    action_mask(p, st, idx, mask);
    const float *logits = drk_search_mlp_forward(&st->pi, x);
    masked_softmax(st, s->n_dims, logits, mask, st->probs, NULL);
    double logp = 0;
    int next[DRK_KNOB_COUNT];
    for (int d = 0; d < s->n_dims; d++) {
      int a = sample_cat(&p->rng, st->probs + st->off[d], st->width[d]);
      smp->a[d] = a;
      logp += log(st->probs[st->off[d] + a]);
      next[d] = st->step_mode ? idx[d] + (a - 1) : a;
    }
    smp->logp = (float)logp;
    smp->value = drk_search_mlp_forward(&st->vf, x)[0];
    drk_sched_knobs_t nk;
    drk_search_point_from_indices(s, next, &nk);
    if (!drk_search_point_maybe_valid(s, &nk)) {
      smp->reward = -1.0f;
    } else {
      double np = drk_search_cost_model_score(cost, &nk, 0);
      smp->reward = (float)((st->step_mode ? np - pred : np) / st->y_scale);
      add_cand(st, &nk, np);
      if (st->step_mode) {
        memcpy(idx, next, sizeof(int) * (size_t)s->n_dims);
        pred = np;
      }
    }
    smp->done = t == horizon - 1;
    st->n++;
  }
}

static void ppo_update(drk_search_policy_t *p, ppo_state_t *st) {
  const drk_search_ppo_config_t *c = &p->config.ppo;
  size_t n = st->n;
  if (!n) return;
  /* GAE, backwards; episodes end at done */
  double adv = 0, next_v = 0;
  for (size_t i = n; i-- > 0;) {
    ppo_sample_t *smp = &st->samples[i];
    if (smp->done) adv = 0, next_v = 0;
    double delta = smp->reward + c->gamma * next_v - smp->value;
    adv = delta + c->gamma * c->lambda * adv;
    smp->adv = (float)adv;
    smp->ret = (float)(adv + smp->value);
    next_v = smp->value;
  }
  double mean = 0, var = 0;
  for (size_t i = 0; i < n; i++) mean += st->samples[i].adv;
  mean /= (double)n;
  for (size_t i = 0; i < n; i++) var += (st->samples[i].adv - mean) * (st->samples[i].adv - mean);
  double sd = sqrt(var / (double)n) + 1e-8;
  for (size_t i = 0; i < n; i++) st->samples[i].adv = (float)((st->samples[i].adv - mean) / sd);
  size_t *order = malloc(n * sizeof *order);
  if (!order) return;
  int n_dims = p->space.n_dims;
  double lr = st->lr * c->lr_scale;
  for (int ep = 0; ep < c->epochs; ep++) {
    for (size_t i = 0; i < n; i++) order[i] = i;
    for (size_t i = n - 1; i > 0; i--) {
      size_t j = drk_search_rng_below(&p->rng, (uint32_t)(i + 1)), t = order[i];
      order[i] = order[j];
      order[j] = t;
    }
    for (size_t b = 0; b < n; b += (size_t)c->batch) {
      size_t end = b + (size_t)c->batch < n ? b + (size_t)c->batch : n;
      for (size_t k = b; k < end; k++) {
        const ppo_sample_t *smp = &st->samples[order[k]];
        const float *x = st->xs + order[k] * (size_t)st->S;
        const uint8_t *mask = st->masks + order[k] * (size_t)st->A;
        const float *logits = drk_search_mlp_forward(&st->pi, x);
        double ent;
        masked_softmax(st, n_dims, logits, mask, st->probs, &ent);
        double logp = 0;
        for (int d = 0; d < n_dims; d++) logp += log(st->probs[st->off[d] + smp->a[d]]);
        double ratio = exp(logp - smp->logp), A = smp->adv;
        bool clipped = (A > 0 && ratio > 1 + c->clip) || (A < 0 && ratio < 1 - c->clip);
        double dlogp = clipped ? 0 : -A * ratio; /* d(-min(rA, clip(r)A))/d logp */
        for (int d = 0; d < n_dims; d++) {
          int o = st->off[d], w = st->width[d];
          double hd = 0;
          for (int j = 0; j < w; j++)
            if (st->probs[o + j] > 0) hd -= st->probs[o + j] * log(st->probs[o + j]);
          for (int j = 0; j < w; j++) {
            double pj = st->probs[o + j];
            if (pj <= 0) {
              st->dlogits[o + j] = 0;
              continue;
            }
            double g = dlogp * ((j == smp->a[d]) - pj);
            g += c->entropy * pj * (log(pj) + hd); /* d(-entropy * H)/d logit */
            st->dlogits[o + j] = (float)g;
          }
        }
        drk_search_mlp_backward(&st->pi, x, st->dlogits);
        float v = drk_search_mlp_forward(&st->vf, x)[0];
        float dv = (float)(c->value_coef * (v - smp->ret));
        drk_search_mlp_backward(&st->vf, x, &dv);
      }
      double scale = 1.0 / (double)(end - b);
      drk_search_mlp_adam(&st->pi, lr, scale, 1.0);
      drk_search_mlp_adam(&st->vf, lr, scale, 1.0);
    }
  }
  free(order);
}

static int cand_cmp(const void *a, const void *b) {
  double x = ((const ppo_cand_t *)a)->pred, y = ((const ppo_cand_t *)b)->pred;
  return x < y ? 1 : x > y ? -1 : 0;
}

static int ppo_propose(drk_search_policy_t *p, const drk_search_history_t *h, drk_search_cost_model_t *cost,
                       drk_sched_knobs_t *out, int n) {
  ppo_state_t *st = p->impl;
  const drk_search_space_t *s = &p->space;
  drk_point_set_t taken;
  drk_point_set_init(&taken);
  int k = drk_policy_take_seeds(p, h, &taken, out, 0, n);
  if (!cost || !drk_search_cost_model_ready(cost)) {
    k = drk_policy_fill_random(p, h, &taken, out, k, n);
    drk_point_set_free(&taken);
    return k;
  }
  /* the best measured points start episodes; their predicted spread scales rewards */
  enum { TOP = 8 };
  size_t top[TOP], n_top = 0, nh = drk_search_history_count(h);
  for (size_t i = 0; i < nh; i++) {
    const drk_search_trial_t *t = drk_search_history_get(h, i);
    if (!t->measured || !t->metrics.valid) continue;
    size_t at = n_top;
    while (at > 0 && drk_search_history_get(h, top[at - 1])->reward < t->reward) at--;
    if (at >= TOP) continue;
    size_t end = n_top < TOP ? n_top : TOP - 1;
    memmove(top + at + 1, top + at, (end - at) * sizeof *top);
    top[at] = i;
    if (n_top < TOP) n_top++;
  }
  double lo = INFINITY, hi = -INFINITY;
  for (size_t i = 0; i < nh; i++) {
    const drk_search_trial_t *t = drk_search_history_get(h, i);
    if (!t->measured) continue;
    lo = t->reward < lo ? t->reward : lo;
    hi = t->reward > hi ? t->reward : hi;
  }
  st->y_scale = hi > lo ? (hi - lo) / 4 : 1.0;
  int best_idx[DRK_KNOB_COUNT];
  if (!n_top || !drk_search_point_indices(s, &drk_search_history_get(h, top[0])->point, best_idx))
    drk_search_point_indices(s, &s->heuristic, best_idx);
  st->n_cands = 0;
  drk_point_set_free(&st->visited);
  drk_point_set_init(&st->visited);
  for (int it = 0; it < (p->config.ppo.iterations > 0 ? p->config.ppo.iterations : 1); it++) {
    st->n = 0;
    for (int e = 0; e < p->config.ppo.rollouts; e++) {
      int start[DRK_KNOB_COUNT];
      start_point(p, st, h, top, n_top, e, start);
      rollout(p, st, cost, start, best_idx);
    }
    if (p->config.ppo.iterations > 0) ppo_update(p, st);
  }
  st->have_stable = false;
  qsort(st->cands, st->n_cands, sizeof *st->cands, cand_cmp);
  for (size_t i = 0; i < st->n_cands && k < n; i++)
    if (drk_policy_fresh(p, h, &taken, &st->cands[i].p)) out[k++] = st->cands[i].p;
  k = drk_policy_fill_random(p, h, &taken, out, k, n);
  drk_point_set_free(&taken);
  return k;
}

static void ppo_set_lr(drk_search_policy_t *p, double lr) { ((ppo_state_t *)p->impl)->lr = lr; }

static void ppo_checkpoint(drk_search_policy_t *p) {
  ppo_state_t *st = p->impl;
  drk_search_mlp_copy_params(&st->pi_ck, &st->pi);
  drk_search_mlp_copy_params(&st->vf_ck, &st->vf);
  st->have_ck = true;
}

static void ppo_rollback(drk_search_policy_t *p, const drk_sched_knobs_t *stable) {
  ppo_state_t *st = p->impl;
  if (st->have_ck) {
    drk_search_mlp_copy_params(&st->pi, &st->pi_ck);
    drk_search_mlp_copy_params(&st->vf, &st->vf_ck);
  }
  if (stable) {
    st->stable = *stable;
    st->have_stable = true;
  }
}

static void ppo_destroy(drk_search_policy_t *p) {
  ppo_state_t *st = p->impl;
  if (!st) return;
  drk_search_mlp_free(&st->pi);
  drk_search_mlp_free(&st->vf);
  drk_search_mlp_free(&st->pi_ck);
  drk_search_mlp_free(&st->vf_ck);
  free(st->xs);
  free(st->masks);
  free(st->samples);
  free(st->cands);
  drk_point_set_free(&st->visited);
  free(st->probs);
  free(st->dlogits);
  free(st);
}

const drk_search_policy_ops_t drk_policy_ppo_ops = {"ppo", true, ppo_propose,  NULL,       ppo_set_lr,
                                                    ppo_checkpoint, ppo_rollback, ppo_destroy};

bool drk_policy_ppo_init(drk_search_policy_t *p, char *err, size_t n) {
  ppo_state_t *st = calloc(1, sizeof *st);
  if (!st) {
    snprintf(err, n, "out of memory");
    return false;
  }
  p->impl = st;
  const drk_search_space_t *s = &p->space;
  st->step_mode = strcmp(p->config.ppo.action, "categorical") != 0;
  st->S = s->n_dims + p->n_context;
  for (int d = 0; d < s->n_dims; d++) {
    st->off[d] = st->A;
    st->width[d] = st->step_mode ? 3 : s->n_values[d];
    st->A += st->width[d];
  }
  st->lr = p->config.stages[0].lr;
  st->y_scale = 1;
  int hdn = p->config.ppo.hidden;
  int pi_sizes[4] = {st->S, hdn, hdn, st->A}, vf_sizes[4] = {st->S, hdn, hdn, 1};
  drk_point_set_init(&st->visited);
  bool ok = drk_search_mlp_init(&st->pi, 3, pi_sizes, 0.01f, &p->rng) &&
            drk_search_mlp_init(&st->vf, 3, vf_sizes, 1.0f, &p->rng) &&
            drk_search_mlp_init(&st->pi_ck, 3, pi_sizes, 0.01f, &p->rng) &&
            drk_search_mlp_init(&st->vf_ck, 3, vf_sizes, 1.0f, &p->rng);
  st->probs = calloc((size_t)st->A, sizeof(float));
  st->dlogits = calloc((size_t)st->A, sizeof(float));
  if (!ok || !st->probs || !st->dlogits) {
    ppo_destroy(p);
    p->impl = NULL;
    snprintf(err, n, "out of memory");
    return false;
  }
  return true;
}
