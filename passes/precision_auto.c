/* --precision=auto --accuracy-budget=E: per op group precisions measured against the budget
 * (passes/precision_auto.h, docs/precision.md).
 *
 * Requires: a canonical graph, calibration inputs and the reference outputs on them.
 * Guarantees: g unchanged; out->node_choice, applied by drk_pass_apply_precision, gives outputs
 * whose errors on the calibration inputs are out->outputs, each within the budget unless even
 * fp32 everywhere is not (then said with a warning). */
#include "passes/precision_auto.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/interp.h"

bool drk_precision_budget_parse(const char *s, double *out) {
  if (!s || !*s) return false;
  char *end;
  double v = strtod(s, &end);
  if (*end || !isfinite(v) || !(v > 0) || !(v < 1)) return false;
  *out = v;
  return true;
}

/* ---- op groups ---- */

static bool is_tf32_op(drk_op_t op) { return op == DRK_OP_MATMUL || op == DRK_OP_GEMM || op == DRK_OP_CONV; }

/* Nodes that start a group: the heavy ops, whose precision is the choice that matters. */
static bool is_anchor(const drk_node_t *n) {
  unsigned f = drk_op_info(n->op)->flags;
  if (f & (DRK_OPF_MM | DRK_OPF_NORM | DRK_OPF_RED)) return true;
  switch (n->op) {
    case DRK_OP_MATMUL: case DRK_OP_GEMM: case DRK_OP_CONV: case DRK_OP_CONV_TRANSPOSE: case DRK_OP_EINSUM:
    case DRK_OP_SOFTMAX: case DRK_OP_LOG_SOFTMAX:
      return true;
    default:
      return false;
  }
}

/* A node whose precision the pass may change: it has an f32 result. */
static bool f32_node(const drk_node_t *n) {
  for (int j = 0; j < n->n_outputs; j++)
    if (n->outputs[j] && n->outputs[j]->dtype == DRK_DT_F32) return true;
  return false;
}

/* The precisions a group may take, fastest first. fp8: a MatMul/Gemm/Conv with a constant
 * weight (the fp8 form's candidates; passes/precision.c decides the rest). */
static void group_levels(drk_precision_group_t *gr, const drk_node_t *a, bool fp8) {
  int k = 0;
  bool mm = is_tf32_op(a->op);
  if (fp8 && mm && a->n_inputs >= 2 && a->inputs[1] && a->inputs[1]->kind == DRK_VALUE_CONST)
    gr->levels[k++] = DRK_PREC_FP8;
  gr->levels[k++] = DRK_PREC_FP16;
  gr->levels[k++] = DRK_PREC_BF16;
  if (mm) gr->levels[k++] = DRK_PREC_TF32;
  gr->levels[k++] = DRK_PREC_FP32;
  gr->n_levels = k;
}

typedef struct actx {
  const drk_graph_t *g;
  const drk_precision_options_t *base;
  const drk_tensor_t *inputs, *ref;
  drk_precision_auto_t *a;
  int32_t *gid; /* per node id: its group, -1: none */
  drk_diag_t *d;
} actx_t;

/* Groups in node order: an anchor starts one; another f32 node joins the group of the first
 * of its inputs made by a grouped node, else starts one, but for data movement (a Reshape of a
 * graph input), which has no arithmetic to choose for: it stays f32 (the cast follows it). */
static bool make_groups(actx_t *c) {
  const drk_graph_t *g = c->g;
  drk_precision_auto_t *a = c->a;
  c->gid = malloc(sizeof *c->gid * ((size_t)g->next_node_id + 1));
  a->groups = calloc(g->n_nodes + 1, sizeof *a->groups);
  if (!c->gid || !a->groups) return false;
  for (uint32_t i = 0; i <= g->next_node_id; i++) c->gid[i] = -1;
  for (size_t i = 0; i < g->n_nodes; i++) {
    const drk_node_t *n = g->nodes[i];
    if (n->dead || !f32_node(n)) continue;
    int32_t k = -1;
    for (int j = 0; j < n->n_inputs && k < 0 && !is_anchor(n); j++) {
      const drk_value_t *v = n->inputs[j];
      if (v && v->kind == DRK_VALUE_NODE && v->def && !v->def->dead) k = c->gid[v->def->id];
    }
    if (k < 0 && (drk_op_info(n->op)->flags & DRK_OPF_MOVE)) continue; /* data movement of an input: stays f32 */
    if (k < 0) {
      k = (int32_t)a->n_groups++;
      drk_precision_group_t *gr = &a->groups[k];
      gr->anchor = n->id;
      gr->name = n->loc.node_name ? n->loc.node_name : n->outputs[0]->name;
      gr->op = drk_op_name(n->op);
      group_levels(gr, n, a->fp8);
    }
    c->gid[n->id] = k;
    a->groups[k].n_nodes++;
  }
  return true;
}

/* ---- measuring ---- */

/* The outputs' errors with group k at levels[lev[k]] (lev[k] < 0: fp32): the graph copied,
 * rewritten with those choices, run by the interpreter. *out_max: the largest (NaN counts as
 * infinite); errs (may be NULL): per output. */
static bool evaluate(actx_t *c, const int *lev, double *out_max, drk_precision_output_t *errs) {
  const drk_graph_t *g = c->g;
  drk_precision_auto_t *a = c->a;
  for (uint32_t id = 0; id < a->n_node_choice; id++) {
    int32_t k = c->gid[id];
    a->node_choice[id] = (uint8_t)(k < 0 || lev[k] < 0 ? DRK_PREC_FP32 : a->groups[k].levels[lev[k]]);
  }
  a->evaluations++;
  drk_graph_t *t = drk_graph_clone(g);
  drk_tensor_t *outs = calloc(g->n_outputs + 1, sizeof *outs);
  bool ok = t && outs;
  if (!ok) drk_diag_error(c->d, drk_loc_none, "precision auto: out of memory copying the graph");
  drk_precision_options_t o = *c->base;
  o.node_choice = a->node_choice;
  o.n_node_choice = a->n_node_choice;
  ok = ok && drk_pass_apply_precision(t, &o, c->d) && drk_interp_run(t, c->inputs, outs, c->d);
  double worst = 0;
  for (size_t i = 0; ok && i < g->n_outputs; i++) {
    drk_check_t ck;
    drk_interp_check(&outs[i], &c->ref[i], a->budget, &ck);
    double e = ck.ref_zero ? ck.abs_max : ck.rel;
    if (isnan(e)) e = INFINITY;
    if (e > worst) worst = e;
    if (errs) errs[i] = (drk_precision_output_t){g->outputs[i]->name, e, ck.ref_zero};
  }
  for (size_t i = 0; outs && i < g->n_outputs; i++) drk_tensor_free(&outs[i]);
  free(outs);
  drk_graph_destroy(t);
  *out_max = worst;
  return ok;
}

/* Group k's own error at level l (the rest fp32); 0 at fp32, which is the graph itself. */
static bool alone(actx_t *c, int *lev, size_t k, int l, double *out) {
  drk_precision_group_t *gr = &c->a->groups[k];
  if (gr->levels[l] == DRK_PREC_FP32) {
    *out = 0;
    return true;
  }
  for (size_t j = 0; j < c->a->n_groups; j++) lev[j] = -1;
  lev[k] = l;
  return evaluate(c, lev, out, NULL);
}

/* Moves group k to its next level whose own error is below the current one (or to fp32). */
static bool demote(actx_t *c, int *scratch, size_t k) {
  drk_precision_group_t *gr = &c->a->groups[k];
  double before = gr->alone;
  while (gr->level + 1 < gr->n_levels) {
    gr->level++;
    if (!alone(c, scratch, k, gr->level, &gr->alone)) return false;
    if (gr->alone < before) break;
  }
  return true;
}

bool drk_precision_auto_choose(const drk_graph_t *g, const drk_precision_options_t *base, double budget,
                               const drk_tensor_t *inputs, const drk_tensor_t *ref, drk_precision_auto_t *out,
                               drk_diag_t *d) {
  memset(out, 0, sizeof *out);
  out->budget = budget;
  out->fp8 = base->target_has_fp8;
  out->no_fp8 = base->target_has_fp8 ? NULL : base->target_name ? base->target_name : "a target";
  actx_t c = {g, base, inputs, ref, out, NULL, d};
  out->n_node_choice = g->next_node_id;
  out->node_choice = malloc((size_t)out->n_node_choice + 1);
  out->outputs = calloc(g->n_outputs + 1, sizeof *out->outputs);
  out->n_outputs = g->n_outputs;
  int *lev = NULL, *scratch = NULL;
  bool ok = out->node_choice && out->outputs && make_groups(&c);
  if (ok) {
    lev = calloc(out->n_groups + 1, sizeof *lev);
    scratch = calloc(out->n_groups + 1, sizeof *scratch);
    ok = lev && scratch;
  }
  if (!ok) {
    drk_diag_error(d, drk_loc_none, "precision auto: out of memory");
    free(c.gid);
    return false;
  }
  /* every group alone at its fastest precision, moved on while that alone breaks the budget */
  for (size_t k = 0; ok && k < out->n_groups; k++) {
    drk_precision_group_t *gr = &out->groups[k];
    ok = alone(&c, scratch, k, 0, &gr->alone);
    while (ok && gr->alone > budget && gr->level + 1 < gr->n_levels) ok = demote(&c, scratch, k);
  }
  /* then all together: the group with the largest own error moves on until the budget holds */
  double worst = INFINITY;
  for (;;) {
    for (size_t k = 0; k < out->n_groups; k++) lev[k] = out->groups[k].level;
    if (!ok || !(ok = evaluate(&c, lev, &worst, out->outputs)) || worst <= budget) break;
    size_t pick = out->n_groups;
    for (size_t k = 0; k < out->n_groups; k++) {
      const drk_precision_group_t *gr = &out->groups[k];
      if (gr->level + 1 < gr->n_levels && (pick == out->n_groups || gr->alone > out->groups[pick].alone)) pick = k;
    }
    if (pick == out->n_groups) break; /* all fp32: measured above */
    ok = demote(&c, scratch, pick);
  }
  /* node_choice holds the last evaluation's choices: the ones measured into out->outputs */
  if (ok && worst > budget)
    drk_diag_warning(d, drk_loc_none, "--accuracy-budget=%g: even fp32 everywhere measures %.3g against the model as "
                     "given (the graph passes before the precision stage reorder its f32 arithmetic); kept fp32",
                     budget, worst);
  free(lev);
  free(scratch);
  free(c.gid);
  return ok;
}

void drk_precision_auto_free(drk_precision_auto_t *a) {
  free(a->groups);
  free(a->outputs);
  free(a->node_choice);
  memset(a, 0, sizeof *a);
}

void drk_precision_auto_print(const drk_precision_auto_t *a, FILE *out) {
  fprintf(out, "precision auto: budget %.0e, %zu op groups, %d interpreter runs; fp8 %s%s%s\n", a->budget,
          a->n_groups, a->evaluations, a->fp8 ? "offered (every target has it)" : "not offered: ",
          a->fp8 ? "" : a->no_fp8, a->fp8 ? "" : " has no fp8 tensor cores");
  for (size_t k = 0; k < a->n_groups; k++) {
    const drk_precision_group_t *gr = &a->groups[k];
    char label[160];
    snprintf(label, sizeof label, "%s (%s, %d node%s)", gr->name, gr->op, gr->n_nodes, gr->n_nodes == 1 ? "" : "s");
    fprintf(out, "  group %-52s %-5s alone %.1e\n", label, drk_precision_name(gr->levels[gr->level]), gr->alone);
  }
  for (size_t i = 0; i < a->n_outputs; i++) {
    const drk_precision_output_t *o = &a->outputs[i];
    fprintf(out, "  output '%s': %s error %.2e %s %.0e\n", o->name, o->absolute ? "absolute" : "rel", o->error,
            o->error <= a->budget ? "<=" : "> ", a->budget);
  }
}
