/* A small multilayer perceptron with hand-written backpropagation and Adam, for the search's
 * learned parts (the PPO agent's policy and value nets, the cost model). Private to search/.
 *
 * Layers are dense; hidden layers use tanh, the last layer is linear. One sample at a time:
 * forward keeps the activations that the next backward (of the same sample) reads, backward
 * adds that sample's gradient to the accumulated ones, adam applies and clears them. Sizes
 * are tiny (tens of inputs, tens of hidden units): plain loops, float, deterministic. */
#ifndef DRK_SEARCH_NN_H
#define DRK_SEARCH_NN_H

#include <stdbool.h>
#include <stddef.h>

#include "search/space.h"

#define DRK_MLP_MAX_LAYERS 4

typedef struct drk_search_mlp {
  int n_layers;                      /* weight layers */
  int sizes[DRK_MLP_MAX_LAYERS + 1]; /* sizes[0] inputs ... sizes[n_layers] outputs */
  size_t n_params;
  float *w, *g, *m, *v; /* parameters, gradients, Adam moments (n_params each) */
  long step;            /* Adam steps taken */
  float *act;           /* activations of every layer of the last forward */
  float *delta;         /* scratch for backward */
} drk_search_mlp_t;

/* sizes: n_layers + 1 entries. Weights Xavier-uniform from rng, biases zero, the last layer's
 * weights scaled by out_scale (small for policy heads: a near-uniform first policy). False
 * when out of memory. */
bool drk_search_mlp_init(drk_search_mlp_t *m, int n_layers, const int *sizes, float out_scale, drk_search_rng_t *rng);
void drk_search_mlp_free(drk_search_mlp_t *m);
/* The outputs for input x (sizes[n_layers] floats, valid until the next forward). */
const float *drk_search_mlp_forward(drk_search_mlp_t *m, const float *x);
/* Adds d(loss)/d(params) for the sample of the last forward, given dout = d(loss)/d(outputs). */
void drk_search_mlp_backward(drk_search_mlp_t *m, const float *x, const float *dout);
void drk_search_mlp_zero_grad(drk_search_mlp_t *m);
/* One Adam step with learning rate lr over the accumulated gradients times scale (e.g.
 * 1/batch), their norm clipped to max_norm (<= 0: no clipping); clears the gradients. */
void drk_search_mlp_adam(drk_search_mlp_t *m, double lr, double scale, double max_norm);
/* Copies src's parameters (and Adam state) into dst, of the same shape. */
void drk_search_mlp_copy_params(drk_search_mlp_t *dst, const drk_search_mlp_t *src);

#endif
