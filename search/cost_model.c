/* The learned cost model (search/policy.h): an ensemble of small MLPs over a point's
 * features, trained online on the tune's measured trials and on prior records.
 *
 * Features per knob: the value index scaled to 0..1 and a one-hot of the value (so a knob
 * with an odd best value is as easy to learn as a monotone one), then the context features
 * (workload, target) that let records of other workloads inform this one.
 *
 * Two heads: the reward of a valid candidate (regression on the valid samples only,
 * standardized) and the probability that a candidate is valid (logistic, on all samples).
 * The prediction is their expectation, p·reward + (1 − p)·floor. Regressing the floor reward
 * of invalid points directly would smear the cliff at an invalid region (shared memory,
 * registers) over its valid neighbours, which are often the best points of the space.
 * Members differ in their initial weights and sample order; their mean is the prediction and
 * their spread an uncertainty that screening adds as a bonus. Each fit continues from the
 * current weights for at most cost.epochs passes and CM_MAX_STEPS minibatches per member. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/support.h"
#include "search/nn.h"
#include "search/policy_internal.h"

#define CM_MAX_MEMBERS 16
#define CM_MIN_SAMPLES 6
#define CM_MAX_STEPS 48
#define CM_BATCH 16
/* Trials to train on: all measured ones up to CM_MAX_TRAIN; beyond, the best half of that
 * and a random sample of the rest (the ranking near the top is what screening needs). */
#define CM_MAX_TRAIN 256

typedef struct cm_sample {
  float *x;
  double y, w;
  bool valid;
} cm_sample_t;

struct drk_search_cost_model {
  drk_search_space_t space;
  drk_search_config_t config;
  int n_members;
  drk_search_mlp_t members[CM_MAX_MEMBERS];
  drk_search_rng_t rng;
  int n_features, n_context;
  float context[DRK_SEARCH_CONTEXT_FEATURES];
  cm_sample_t *priors;
  size_t n_priors, cap_priors;
  double y_mean, y_std;
  size_t fitted_on; /* samples of the last fit */
  float *xbuf;
};

static int point_features(const drk_search_space_t *s) {
  int n = s->n_dims;
  for (int d = 0; d < s->n_dims; d++) n += s->n_values[d];
  return n;
}

static void encode(const drk_search_cost_model_t *m, const drk_sched_knobs_t *p, const float *context, float *x) {
  const drk_search_space_t *s = &m->space;
  int idx[DRK_KNOB_COUNT];
  bool ok = drk_search_point_indices(s, p, idx);
  int w = 0;
  for (int d = 0; d < s->n_dims; d++) {
    int i = ok ? idx[d] : 0;
    x[w++] = s->n_values[d] > 1 ? (float)i / (float)(s->n_values[d] - 1) : 0.0f;
    for (int v = 0; v < s->n_values[d]; v++) x[w++] = v == i ? 1.0f : 0.0f;
  }
  for (int c = 0; c < m->n_context; c++) x[w++] = context ? context[c] : m->context[c];
}

drk_search_cost_model_t *drk_search_cost_model_create(const drk_search_space_t *s, const drk_search_config_t *c,
                                                      const float *context, int n_context, uint64_t seed) {
  drk_search_cost_model_t *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  m->space = *s;
  if (c) m->config = *c;
  else drk_search_config_default(&m->config);
  m->n_context = n_context < 0 ? 0 : n_context > DRK_SEARCH_CONTEXT_FEATURES ? DRK_SEARCH_CONTEXT_FEATURES : n_context;
  if (context && m->n_context) memcpy(m->context, context, sizeof(float) * (size_t)m->n_context);
  m->n_features = point_features(s) + m->n_context;
  m->xbuf = calloc((size_t)m->n_features, sizeof(float));
  drk_search_rng_seed(&m->rng, seed ^ 0x636f73746d6f646cull);
  int e = m->config.cost.ensemble;
  m->n_members = e < 1 ? 1 : e > CM_MAX_MEMBERS ? CM_MAX_MEMBERS : e;
  int hidden = m->config.cost.hidden;
  int sizes[4] = {m->n_features, hidden, hidden, 2};
  m->y_std = 1;
  for (int i = 0; i < m->n_members; i++)
    if (!drk_search_mlp_init(&m->members[i], 3, sizes, 1.0f, &m->rng)) {
      m->n_members = i;
      drk_search_cost_model_destroy(m);
      return NULL;
    }
  if (!m->xbuf) {
    drk_search_cost_model_destroy(m);
    return NULL;
  }
  return m;
}

void drk_search_cost_model_destroy(drk_search_cost_model_t *m) {
  if (!m) return;
  for (int i = 0; i < m->n_members; i++) drk_search_mlp_free(&m->members[i]);
  for (size_t i = 0; i < m->n_priors; i++) free(m->priors[i].x);
  free(m->priors);
  free(m->xbuf);
  free(m);
}

void drk_search_cost_model_add_prior(drk_search_cost_model_t *m, const drk_sched_knobs_t *p, const float *context,
                                     double reward, double weight) {
  int idx[DRK_KNOB_COUNT];
  if (!drk_search_point_indices(&m->space, p, idx) || !isfinite(reward)) return;
  if (m->n_priors == m->cap_priors) {
    size_t cap = m->cap_priors ? m->cap_priors * 2 : 32;
    cm_sample_t *np = realloc(m->priors, cap * sizeof *np);
    if (!np) return;
    m->priors = np;
    m->cap_priors = cap;
  }
  float *x = calloc((size_t)m->n_features, sizeof(float));
  if (!x) return;
  encode(m, p, context, x);
  m->priors[m->n_priors++] = (cm_sample_t){x, reward, weight > 0 ? weight : 0.1, true};
}

static int reward_desc(const void *a, const void *b) {
  double x = (*(const drk_search_trial_t *const *)a)->reward, y = (*(const drk_search_trial_t *const *)b)->reward;
  return x < y ? 1 : x > y ? -1 : 0;
}

static double sigmoid(double z) { return 1.0 / (1.0 + exp(-z)); }

void drk_search_cost_model_fit(drk_search_cost_model_t *m, const drk_search_history_t *h) {
  size_t nh = drk_search_history_count(h), n = 0, nt = 0;
  const drk_search_trial_t **tr = calloc(nh + 1, sizeof *tr);
  cm_sample_t *data = calloc(CM_MAX_TRAIN + m->n_priors + 1, sizeof *data);
  float *xs = calloc((size_t)(CM_MAX_TRAIN + 1) * (size_t)m->n_features, sizeof(float));
  size_t *order = calloc(CM_MAX_TRAIN + m->n_priors + 1, sizeof *order);
  if (!tr || !data || !xs || !order) goto done;
  for (size_t i = 0; i < nh; i++) {
    const drk_search_trial_t *t = drk_search_history_get(h, i);
    if (t->measured) tr[nt++] = t;
  }
  if (nt > CM_MAX_TRAIN) {
    qsort(tr, nt, sizeof *tr, reward_desc);
    for (size_t i = CM_MAX_TRAIN / 2; i < CM_MAX_TRAIN; i++) {
      size_t j = i + drk_search_rng_below(&m->rng, (uint32_t)(nt - i));
      const drk_search_trial_t *x = tr[i];
      tr[i] = tr[j];
      tr[j] = x;
    }
    nt = CM_MAX_TRAIN;
  }
  for (size_t i = 0; i < nt; i++) {
    float *x = xs + n * (size_t)m->n_features;
    encode(m, &tr[i]->point, NULL, x);
    data[n++] = (cm_sample_t){x, tr[i]->reward, 1.0, tr[i]->metrics.valid};
  }
  for (size_t i = 0; i < m->n_priors; i++) data[n++] = m->priors[i];
  m->fitted_on = n;
  if (n < 2) goto done;
  /* the reward head's standardization, over valid samples */
  double sw = 0, mean = 0, var = 0;
  for (size_t i = 0; i < n; i++)
    if (data[i].valid) sw += data[i].w, mean += data[i].w * data[i].y;
  if (sw > 0) {
    mean /= sw;
    for (size_t i = 0; i < n; i++)
      if (data[i].valid) var += data[i].w * (data[i].y - mean) * (data[i].y - mean);
    m->y_mean = mean;
    m->y_std = sqrt(var / sw) > 1e-9 ? sqrt(var / sw) : 1.0;
  }
  int epochs = m->config.cost.epochs;
  for (int e = 0; e < m->n_members; e++) {
    drk_search_mlp_t *net = &m->members[e];
    int steps = 0;
    for (int ep = 0; ep < epochs && steps < CM_MAX_STEPS; ep++) {
      for (size_t i = 0; i < n; i++) order[i] = i;
      for (size_t i = n - 1; i > 0; i--) {
        size_t j = drk_search_rng_below(&m->rng, (uint32_t)(i + 1)), t = order[i];
        order[i] = order[j];
        order[j] = t;
      }
      for (size_t b = 0; b < n && steps < CM_MAX_STEPS; b += CM_BATCH, steps++) {
        size_t end = b + CM_BATCH < n ? b + CM_BATCH : n;
        double wsum = 0;
        for (size_t k = b; k < end; k++) {
          const cm_sample_t *smp = &data[order[k]];
          const float *out = drk_search_mlp_forward(net, smp->x);
          float d[2];
          /* w/2 (out0 - y)^2 on valid samples; w * BCE(sigmoid(out1), valid) on all */
          d[0] = smp->valid ? (float)(smp->w * (out[0] - (smp->y - m->y_mean) / m->y_std)) : 0.0f;
          d[1] = (float)(smp->w * (sigmoid(out[1]) - (smp->valid ? 1.0 : 0.0)));
          drk_search_mlp_backward(net, smp->x, d);
          wsum += smp->w;
        }
        drk_search_mlp_adam(net, m->config.cost.lr, 1.0 / (wsum > 0 ? wsum : 1), 5.0);
      }
    }
  }
done:
  free(order);
  free(tr);
  free(data);
  free(xs);
}

bool drk_search_cost_model_ready(const drk_search_cost_model_t *m) { return m->fitted_on >= CM_MIN_SAMPLES; }

void drk_search_cost_model_predict_parts(drk_search_cost_model_t *m, const drk_sched_knobs_t *p, double *out_reward,
                                         double *out_p_valid, double *out_std) {
  encode(m, p, NULL, m->xbuf);
  double s = 0, s2 = 0, pv = 0;
  for (int e = 0; e < m->n_members; e++) {
    const float *out = drk_search_mlp_forward(&m->members[e], m->xbuf);
    double r = out[0] * m->y_std + m->y_mean, q = sigmoid(out[1]);
    s += r;
    s2 += r * r;
    if (q > pv) pv = q;
  }
  double mean = s / m->n_members, var = s2 / m->n_members - mean * mean;
  if (out_reward) *out_reward = mean;
  if (out_p_valid) *out_p_valid = pv;
  if (out_std) *out_std = var > 0 ? sqrt(var) : 0;
}

double drk_search_cost_model_score(drk_search_cost_model_t *m, const drk_sched_knobs_t *p, double kappa) {
  double r, pv, sd;
  drk_search_cost_model_predict_parts(m, p, &r, &pv, &sd);
  /* a measurement that turns out invalid costs a trial, as one that turns out slower does:
   * only points the model is fairly sure are invalid rank below the others */
  return pv >= DRK_SEARCH_CM_VALID_THRESHOLD ? r + kappa * sd : m->config.floor - 1 + pv;
}

double drk_search_cost_model_predict(drk_search_cost_model_t *m, const drk_sched_knobs_t *p, double *out_std) {
  encode(m, p, NULL, m->xbuf);
  double s = 0, s2 = 0, floor = m->config.floor;
  for (int e = 0; e < m->n_members; e++) {
    const float *out = drk_search_mlp_forward(&m->members[e], m->xbuf);
    double pv = sigmoid(out[1]), r = out[0] * m->y_std + m->y_mean;
    double y = pv * r + (1 - pv) * floor;
    s += y;
    s2 += y * y;
  }
  double mean = s / m->n_members, var = s2 / m->n_members - mean * mean;
  if (out_std) *out_std = var > 0 ? sqrt(var) : 0;
  return mean;
}
