/* Dense MLP with tanh hidden layers, backprop and Adam (search/nn.h). */
#include "search/nn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/support.h"

static size_t layer_offset(const drk_search_mlp_t *m, int l) {
  size_t o = 0;
  for (int i = 0; i < l; i++) o += (size_t)m->sizes[i + 1] * (size_t)m->sizes[i] + (size_t)m->sizes[i + 1];
  return o;
}

static size_t act_offset(const drk_search_mlp_t *m, int l) {
  size_t o = 0;
  for (int i = 1; i <= l; i++) o += (size_t)m->sizes[i];
  return o - (l >= 1 ? (size_t)m->sizes[l] : 0);
}

bool drk_search_mlp_init(drk_search_mlp_t *m, int n_layers, const int *sizes, float out_scale, drk_search_rng_t *rng) {
  memset(m, 0, sizeof *m);
  DRK_ASSERT(n_layers >= 1 && n_layers <= DRK_MLP_MAX_LAYERS);
  m->n_layers = n_layers;
  size_t acts = 0, widest = 0;
  for (int i = 0; i <= n_layers; i++) {
    DRK_ASSERT(sizes[i] > 0);
    m->sizes[i] = sizes[i];
    if (i) acts += (size_t)sizes[i];
    if ((size_t)sizes[i] > widest) widest = (size_t)sizes[i];
  }
  m->n_params = layer_offset(m, n_layers);
  m->w = calloc(m->n_params, sizeof(float));
  m->g = calloc(m->n_params, sizeof(float));
  m->m = calloc(m->n_params, sizeof(float));
  m->v = calloc(m->n_params, sizeof(float));
  m->act = calloc(acts, sizeof(float));
  m->delta = calloc(2 * widest, sizeof(float));
  if (!m->w || !m->g || !m->m || !m->v || !m->act || !m->delta) {
    drk_search_mlp_free(m);
    return false;
  }
  for (int l = 0; l < n_layers; l++) {
    int in = sizes[l], out = sizes[l + 1];
    float *w = m->w + layer_offset(m, l);
    double lim = sqrt(6.0 / (in + out)) * (l == n_layers - 1 ? out_scale : 1.0);
    for (int i = 0; i < in * out; i++) w[i] = (float)((2 * drk_search_rng_uniform(rng) - 1) * lim);
  }
  return true;
}

void drk_search_mlp_free(drk_search_mlp_t *m) {
  free(m->w);
  free(m->g);
  free(m->m);
  free(m->v);
  free(m->act);
  free(m->delta);
  memset(m, 0, sizeof *m);
}

/* tanh by a (7,6) Pade approximant, saturated beyond |x| = 4.97 (error < 1e-4 everywhere, far
 * below what the nets resolve): libm's tanh was a third of the search's CPU time. */
static inline float fast_tanh(float x) {
  if (x > 4.97f) return 1.0f;
  if (x < -4.97f) return -1.0f;
  float x2 = x * x;
  float p = x * (135135.0f + x2 * (17325.0f + x2 * (378.0f + x2)));
  float q = 135135.0f + x2 * (62370.0f + x2 * (3150.0f + x2 * 28.0f));
  return p / q;
}

const float *drk_search_mlp_forward(drk_search_mlp_t *m, const float *x) {
  const float *in = x;
  for (int l = 0; l < m->n_layers; l++) {
    int ni = m->sizes[l], no = m->sizes[l + 1];
    const float *w = m->w + layer_offset(m, l), *b = w + (size_t)ni * no;
    float *out = m->act + act_offset(m, l + 1);
    bool hidden = l < m->n_layers - 1;
    for (int o = 0; o < no; o++) {
      const float *row = w + (size_t)o * ni;
      /* four partial sums: a fixed order the compiler may vectorize */
      float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      int i = 0;
      for (; i + 4 <= ni; i += 4) {
        s0 += row[i] * in[i];
        s1 += row[i + 1] * in[i + 1];
        s2 += row[i + 2] * in[i + 2];
        s3 += row[i + 3] * in[i + 3];
      }
      float s = b[o] + ((s0 + s1) + (s2 + s3));
      for (; i < ni; i++) s += row[i] * in[i];
      out[o] = hidden ? fast_tanh(s) : s;
    }
    in = out;
  }
  return in;
}

void drk_search_mlp_backward(drk_search_mlp_t *m, const float *x, const float *dout) {
  size_t widest = 0;
  for (int i = 0; i <= m->n_layers; i++)
    if ((size_t)m->sizes[i] > widest) widest = (size_t)m->sizes[i];
  float *d = m->delta, *dprev = m->delta + widest;
  int nl = m->n_layers;
  memcpy(d, dout, sizeof(float) * (size_t)m->sizes[nl]);
  for (int l = nl - 1; l >= 0; l--) {
    int ni = m->sizes[l], no = m->sizes[l + 1];
    const float *in = l == 0 ? x : m->act + act_offset(m, l);
    size_t off = layer_offset(m, l);
    const float *w = m->w + off;
    float *gw = m->g + off, *gb = gw + (size_t)ni * no;
    if (l > 0)
      for (int i = 0; i < ni; i++) dprev[i] = 0;
    for (int o = 0; o < no; o++) {
      float dv = d[o];
      if (dv == 0.0f) continue;
      gb[o] += dv;
      float *grow = gw + (size_t)o * ni;
      const float *row = w + (size_t)o * ni;
      for (int i = 0; i < ni; i++) grow[i] += dv * in[i];
      if (l > 0)
        for (int i = 0; i < ni; i++) dprev[i] += row[i] * dv;
    }
    if (l == 0) break;
    for (int i = 0; i < ni; i++) dprev[i] *= 1.0f - in[i] * in[i]; /* tanh' */
    float *t = d;
    d = dprev;
    dprev = t;
  }
}

void drk_search_mlp_zero_grad(drk_search_mlp_t *m) { memset(m->g, 0, m->n_params * sizeof(float)); }

void drk_search_mlp_adam(drk_search_mlp_t *m, double lr, double scale, double max_norm) {
  const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
  double norm = 0;
  for (size_t i = 0; i < m->n_params; i++) norm += (double)m->g[i] * m->g[i];
  norm = sqrt(norm) * scale;
  if (max_norm > 0 && norm > max_norm) scale *= max_norm / norm;
  m->step++;
  double c1 = 1 - pow(b1, (double)m->step), c2 = 1 - pow(b2, (double)m->step);
  /* w -= lr * (m / c1) / (sqrt(v / c2) + eps), with the corrections folded in */
  float step = (float)(lr / c1), rc2 = (float)(1.0 / sqrt(c2)), sc = (float)scale;
  for (size_t i = 0; i < m->n_params; i++) {
    float g = m->g[i] * sc;
    m->m[i] = b1 * m->m[i] + (1 - b1) * g;
    m->v[i] = b2 * m->v[i] + (1 - b2) * g * g;
    m->w[i] -= step * m->m[i] / (sqrtf(m->v[i]) * rc2 + eps);
    m->g[i] = 0;
  }
}

void drk_search_mlp_copy_params(drk_search_mlp_t *dst, const drk_search_mlp_t *src) {
  DRK_ASSERT(dst->n_params == src->n_params);
  memcpy(dst->w, src->w, src->n_params * sizeof(float));
  memcpy(dst->m, src->m, src->n_params * sizeof(float));
  memcpy(dst->v, src->v, src->n_params * sizeof(float));
  dst->step = src->step;
}
