/* Dead-code elimination (drk_pass_eliminate_dead).
 *
 * Requires: nodes in topological order; every op is free of side effects (true of all of
 * graph_ops.def), so a node matters only through its results.
 * Guarantees: g->nodes holds exactly the nodes not marked dead from which some graph output
 * can be reached, in their previous relative order; g->consts holds only constants used by
 * those nodes or listed as graph outputs. Graph inputs are never removed (they are the
 * calling convention), even if unused. Removed nodes stay in the arena, marked dead. */
#include "passes/passes.h"

#include <stdlib.h>

bool drk_pass_eliminate_dead(drk_graph_t *g) {
  size_t nv = g->next_value_id;
  unsigned char *used = calloc(nv + 1, 1);
  DRK_ASSERT(used);
  for (size_t i = 0; i < g->n_outputs; i++)
    if (g->outputs[i] && g->outputs[i]->id < nv) used[g->outputs[i]->id] = 1;
  bool changed = false;
  /* reverse topological order: a node's users are decided before the node */
  for (size_t i = g->n_nodes; i-- > 0;) {
    drk_node_t *n = g->nodes[i];
    bool live = false;
    if (!n->dead)
      for (int j = 0; j < n->n_outputs; j++)
        if (n->outputs[j] && n->outputs[j]->id < nv && used[n->outputs[j]->id]) live = true;
    if (!live) {
      n->dead = true;
      continue;
    }
    for (int j = 0; j < n->n_inputs; j++)
      if (n->inputs[j] && n->inputs[j]->id < nv) used[n->inputs[j]->id] = 1;
  }
  size_t k = 0;
  for (size_t i = 0; i < g->n_nodes; i++)
    if (!g->nodes[i]->dead) g->nodes[k++] = g->nodes[i];
  if (k != g->n_nodes) changed = true;
  g->n_nodes = k;
  k = 0;
  for (size_t i = 0; i < g->n_consts; i++)
    if (g->consts[i]->id < nv && used[g->consts[i]->id]) g->consts[k++] = g->consts[i];
  if (k != g->n_consts) changed = true;
  g->n_consts = k;
  free(used);
  return changed;
}
