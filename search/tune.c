/* The tuning loop (search/tune.h). */
#include "search/tune.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ir/support.h"
#include "search/json.h"

/* what the fallback's diagnosis looks at, per round */
typedef struct round_stats {
  double best, mean;      /* rewards */
  int n, invalid;
  double sm_mhz, power_w; /* means over the round's measurements that have them; < 0 none */
  double variance;        /* mean relative spread of timed runs; < 0 none */
  char first_failure[256];
} round_stats_t;

#define MAX_ROUND_STATS 64

typedef struct tuner {
  const drk_search_space_t *s;
  drk_search_policy_t *p;
  const drk_search_tune_options_t *o;
  drk_search_tune_result_t *res;
  char *err;
  size_t n;
  drk_search_config_t cfg;
  drk_search_history_t *h;
  drk_search_cost_model_t *cm;
  drk_search_rng_t rng;
  char target_key[17];
  const char *workload, *version, *kernel;
  float context[DRK_SEARCH_CONTEXT_FEATURES];
  drk_search_metrics_t ref;
  int stage_index;
  const drk_search_stage_t *stage;
  double t0;
  drk_search_fallback_t fb;
  drk_sched_knobs_t stable;
  double stable_time_us;
  long stable_i;
  bool have_stable;
  round_stats_t rounds[MAX_ROUND_STATS]; /* ring, by round */
  round_stats_t reference_round;
  int diag_left;
  int round;
} tuner_t;

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

DRK_PRINTF(2, 3) static void tlog(tuner_t *t, const char *fmt, ...) {
  if (!t->o->log) return;
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  t->o->log(t->o->log_ctx, line);
}

DRK_PRINTF(2, 3) static bool tfail(tuner_t *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(t->err, t->n, fmt, ap);
  va_end(ap);
  return false;
}

/* ---- the event log ---- */
static void ev_begin(tuner_t *t, const char *event) {
  FILE *f = t->o->events;
  if (!f) return;
  fputs("{\"event\":", f);
  drk_json_str(f, event);
  fputs(",\"kernel\":", f);
  drk_json_str(f, t->kernel);
  fputs(",\"workload\":", f);
  drk_json_str(f, t->workload);
}
static void ev_str(tuner_t *t, const char *k, const char *v) {
  if (!t->o->events) return;
  fprintf(t->o->events, ",\"%s\":", k);
  drk_json_str(t->o->events, v);
}
static void ev_num(tuner_t *t, const char *k, double v) {
  if (!t->o->events) return;
  fprintf(t->o->events, ",\"%s\":", k);
  drk_json_num(t->o->events, v);
}
static void ev_known(tuner_t *t, const char *k, double v) {
  if (!t->o->events) return;
  fprintf(t->o->events, ",\"%s\":", k);
  drk_json_num_known(t->o->events, v);
}
static void ev_bool(tuner_t *t, const char *k, bool v) {
  if (t->o->events) fprintf(t->o->events, ",\"%s\":%s", k, v ? "true" : "false");
}
static void ev_end(tuner_t *t) {
  if (!t->o->events) return;
  ev_num(t, "t_s", mono_s() - t->t0);
  ev_num(t, "unix", (double)time(NULL));
  fputs("}\n", t->o->events);
  fflush(t->o->events);
}

static void point_text(const tuner_t *t, const drk_sched_knobs_t *p, char *buf, size_t n) {
  drk_search_point_format(t->s, p, buf, n);
}

/* ---- records ---- */
static bool store(tuner_t *t, size_t i, const char *policy, const char *extra_tag, int64_t *out_id) {
  *out_id = 0;
  if (!t->o->db) return true;
  const drk_search_trial_t *tr = drk_search_history_get(t->h, i);
  drk_search_record_t r;
  drk_search_record_init(&r);
  snprintf(r.workload, sizeof r.workload, "%s", t->workload);
  memcpy(r.target, t->target_key, 17);
  snprintf(r.kernel, sizeof r.kernel, "%s", t->kernel);
  point_text(t, &tr->point, r.schedule, sizeof r.schedule);
  r.valid = tr->metrics.valid;
  if (!r.valid) snprintf(r.reason, sizeof r.reason, "%s", tr->metrics.msg[0] ? tr->metrics.msg : "invalid");
  r.time_us = tr->metrics.time_us;
  r.tflops = tr->metrics.tflops;
  r.gbs = tr->metrics.gbs;
  r.energy_j = tr->metrics.energy_j;
  r.mem_bytes = tr->metrics.mem_bytes;
  r.error = tr->metrics.error;
  r.reward = tr->reward;
  r.weights[0] = t->stage->w.alpha;
  r.weights[1] = t->stage->w.beta;
  r.weights[2] = t->stage->w.gamma;
  r.weights[3] = t->stage->w.delta;
  snprintf(r.drkc_version, sizeof r.drkc_version, "%s", t->version);
  snprintf(r.model, sizeof r.model, "%s", t->o->model ? t->o->model : "");
  snprintf(r.tags, sizeof r.tags, "%s%s%s", t->o->tags ? t->o->tags : "", t->o->tags && *t->o->tags && extra_tag ? "," : "",
           extra_tag ? extra_tag : "");
  snprintf(r.policy, sizeof r.policy, "%s", policy);
  r.trial = (int)i;
  char e[1200];
  if (!drk_search_db_put_record(t->o->db, &r, e, sizeof e)) return tfail(t, "%s", e);
  *out_id = r.id;
  return true;
}

/* Writes metrics into a record-like copy for extra measurements (re-measure, diagnostics):
 * stored as their own records, not in the history (their points are there already). */
static bool store_extra(tuner_t *t, const drk_sched_knobs_t *p, const drk_search_metrics_t *m, const char *policy,
                        int64_t *out_id) {
  *out_id = 0;
  if (!t->o->db) return true;
  drk_search_record_t r;
  drk_search_record_init(&r);
  snprintf(r.workload, sizeof r.workload, "%s", t->workload);
  memcpy(r.target, t->target_key, 17);
  snprintf(r.kernel, sizeof r.kernel, "%s", t->kernel);
  point_text(t, p, r.schedule, sizeof r.schedule);
  r.valid = m->valid;
  if (!r.valid) snprintf(r.reason, sizeof r.reason, "%s", m->msg[0] ? m->msg : "invalid");
  r.time_us = m->time_us;
  r.tflops = m->tflops;
  r.gbs = m->gbs;
  r.energy_j = m->energy_j;
  r.mem_bytes = m->mem_bytes;
  r.error = m->error;
  r.reward = drk_search_reward(&t->cfg, &t->stage->w, &t->ref, m, NULL);
  r.weights[0] = t->stage->w.alpha;
  r.weights[1] = t->stage->w.beta;
  r.weights[2] = t->stage->w.gamma;
  r.weights[3] = t->stage->w.delta;
  snprintf(r.drkc_version, sizeof r.drkc_version, "%s", t->version);
  snprintf(r.model, sizeof r.model, "%s", t->o->model ? t->o->model : "");
  snprintf(r.tags, sizeof r.tags, "%s", t->o->tags ? t->o->tags : "");
  snprintf(r.policy, sizeof r.policy, "%s", policy);
  r.trial = (int)drk_search_history_count(t->h);
  char e[1200];
  if (!drk_search_db_put_record(t->o->db, &r, e, sizeof e)) return tfail(t, "%s", e);
  *out_id = r.id;
  return true;
}

/* ---- measuring ---- */
/* A candidate that claims to be valid without a usable time is not: no reward for a kernel
 * that did not demonstrably run. */
static void sanitize(drk_search_metrics_t *m) {
  if (m->valid && !(m->time_us > 0 && isfinite(m->time_us))) {
    m->valid = false;
    snprintf(m->msg, sizeof m->msg, "reported valid without a positive time (%g us)", m->time_us);
  }
  if (m->valid && m->error > 0 && m->tolerance > 0 && m->error > m->tolerance) {
    m->valid = false;
    snprintf(m->msg, sizeof m->msg, "error %.3g above the tolerance %.3g", m->error, m->tolerance);
  }
}

static int measure_raw(tuner_t *t, const drk_sched_knobs_t *p, drk_search_metrics_t *m) {
  *m = drk_search_metrics_unknown();
  drk_sched_knobs_t q = *p;
  q.used = NULL;
  int rc = t->o->measure(t->o->ctx, t->s, &q, m);
  m->msg[sizeof m->msg - 1] = 0;
  if (!rc) sanitize(m);
  return rc;
}

static void trial_event(tuner_t *t, size_t i, const drk_search_reward_terms_t *terms) {
  if (!t->o->events) return;
  const drk_search_trial_t *tr = drk_search_history_get(t->h, i);
  const drk_search_trial_t *best = drk_search_history_best(t->h);
  char pt[512], bp[512] = "";
  point_text(t, &tr->point, pt, sizeof pt);
  if (best) point_text(t, &best->point, bp, sizeof bp);
  ev_begin(t, "trial");
  ev_num(t, "trial", (double)i);
  ev_num(t, "round", tr->round);
  ev_str(t, "stage", t->stage->name);
  ev_str(t, "policy", drk_search_policy_name(t->p));
  ev_str(t, "point", pt);
  ev_bool(t, "valid", tr->metrics.valid);
  ev_str(t, "reason", tr->metrics.valid ? "" : tr->metrics.msg);
  ev_known(t, "time_us", tr->metrics.time_us);
  ev_known(t, "ref_time_us", tr->metrics.ref_time_us);
  ev_known(t, "tflops", tr->metrics.tflops);
  ev_known(t, "gbs", tr->metrics.gbs);
  ev_known(t, "energy_j", tr->metrics.energy_j);
  ev_known(t, "mem_bytes", tr->metrics.mem_bytes);
  ev_known(t, "error", tr->metrics.error);
  ev_known(t, "sm_mhz", tr->metrics.sm_mhz);
  ev_known(t, "power_w", tr->metrics.power_w);
  ev_num(t, "reward", tr->reward);
  ev_num(t, "throughput", terms->throughput);
  ev_num(t, "memory", terms->memory_used ? terms->memory : NAN);
  ev_num(t, "energy", terms->energy_used ? terms->energy : NAN);
  ev_num(t, "fidelity", tr->metrics.valid ? terms->fidelity : NAN);
  ev_num(t, "predicted", tr->predicted);
  ev_num(t, "best_reward", best ? best->reward : NAN);
  ev_known(t, "best_time_us", best ? best->metrics.time_us : -1);
  ev_str(t, "best_point", bp);
  ev_num(t, "record", (double)tr->record_id);
  ev_end(t);
}

/* Measures p (a fresh point) as a trial of round `round`; *out_i its history index. Returns
 * false on a stop (measure's nonzero, a database error). */
static bool measure_trial(tuner_t *t, const drk_sched_knobs_t *p, int round, double predicted, const char *policy,
                          size_t *out_i) {
  drk_search_trial_t tr;
  memset(&tr, 0, sizeof tr);
  tr.point = *p;
  tr.point.used = NULL;
  tr.round = round;
  tr.predicted = predicted;
  tr.measured = true;
  if (measure_raw(t, p, &tr.metrics) != 0) {
    char pt[512];
    point_text(t, p, pt, sizeof pt);
    return tfail(t, "measuring %s %s stopped the tune: %s", t->kernel, pt,
                 tr.metrics.msg[0] ? tr.metrics.msg : "(no reason given)");
  }
  /* the heuristic's measurement is the reference of every reward, its own included */
  if (!strcmp(policy, "heuristic")) t->ref = tr.metrics;
  drk_search_reward_terms_t terms;
  tr.reward = drk_search_reward(&t->cfg, &t->stage->w, &t->ref, &tr.metrics, &terms);
  if (!drk_search_history_add(t->h, &tr)) return tfail(t, "out of memory (history)");
  size_t i = drk_search_history_count(t->h) - 1;
  int64_t id;
  if (!store(t, i, policy, NULL, &id)) return false;
  drk_search_history_set_record(t->h, i, id);
  if (!tr.metrics.valid) t->res->invalid++;
  trial_event(t, i, &terms);
  *out_i = i;
  return true;
}

/* ---- setup: database, resume, heuristic, warm start ---- */
static bool resume_one(void *vctx, const drk_search_record_t *r) {
  tuner_t *t = vctx;
  /* re-measurements and diagnostics repeat points the history has */
  if (!strcmp(r->policy, "remeasure") || !strcmp(r->policy, "diagnostic")) return true;
  drk_search_trial_t tr;
  memset(&tr, 0, sizeof tr);
  char e[600];
  if (!drk_search_point_parse(t->s, r->schedule, &tr.point, e, sizeof e)) {
    tlog(t, "resume: record %lld skipped: %s", (long long)r->id, e);
    return true;
  }
  tr.metrics = drk_search_metrics_unknown();
  tr.metrics.valid = r->valid;
  tr.metrics.time_us = r->time_us;
  tr.metrics.tflops = r->tflops;
  tr.metrics.gbs = r->gbs;
  tr.metrics.energy_j = r->energy_j;
  tr.metrics.mem_bytes = r->mem_bytes;
  tr.metrics.error = r->error;
  snprintf(tr.metrics.msg, sizeof tr.metrics.msg, "%s", r->reason);
  tr.measured = true;
  tr.resumed = true;
  tr.round = -1;
  tr.predicted = NAN;
  tr.record_id = r->id;
  if (drk_search_history_add(t->h, &tr)) {
    t->res->resumed++;
    if (!r->valid) t->res->invalid++;
  }
  return true;
}

typedef struct near_wl {
  char key[40], desc[512];
  double dist;
} near_wl_t;

typedef struct near_ctx {
  tuner_t *t;
  char kind[32];
  float feat[DRK_SEARCH_WORKLOAD_FEATURES];
  near_wl_t best[3];
  int n;
} near_ctx_t;

static bool near_one(void *vctx, const char *key, const char *kind, const char *desc) {
  near_ctx_t *c = vctx;
  if (!strcmp(key, c->t->workload) || (c->kind[0] && strcmp(kind, c->kind))) return true;
  float f[DRK_SEARCH_WORKLOAD_FEATURES];
  drk_search_workload_features(desc, f);
  double d = 0;
  for (int i = 0; i < DRK_SEARCH_WORKLOAD_FEATURES; i++) d += (f[i] - c->feat[i]) * (f[i] - c->feat[i]);
  int at = c->n;
  while (at > 0 && c->best[at - 1].dist > d) at--;
  if (at >= 3) return true;
  int end = c->n < 3 ? c->n : 2;
  memmove(c->best + at + 1, c->best + at, (size_t)(end - at) * sizeof *c->best);
  snprintf(c->best[at].key, sizeof c->best[at].key, "%s", key);
  snprintf(c->best[at].desc, sizeof c->best[at].desc, "%s", desc);
  c->best[at].dist = d;
  if (c->n < 3) c->n++;
  return true;
}

typedef struct prior_ctx {
  tuner_t *t;
  drk_search_record_t heur, top[8];
  bool have_heur;
  int n_top;
} prior_ctx_t;

static bool prior_one(void *vctx, const drk_search_record_t *r) {
  prior_ctx_t *c = vctx;
  if (!strcmp(r->policy, "heuristic") && r->valid && !c->have_heur) {
    c->heur = *r;
    c->have_heur = true;
  }
  if (r->valid && r->time_us > 0 && c->n_top < 8 && strcmp(r->policy, "remeasure") && strcmp(r->policy, "diagnostic"))
    c->top[c->n_top++] = *r;
  return true;
}

static drk_search_metrics_t metrics_of_record(const drk_search_record_t *r) {
  drk_search_metrics_t m = drk_search_metrics_unknown();
  m.valid = r->valid;
  m.time_us = r->time_us;
  m.energy_j = r->energy_j;
  m.mem_bytes = r->mem_bytes;
  m.error = r->error;
  m.tflops = r->tflops;
  m.gbs = r->gbs;
  return m;
}

/* Seeds from the nearest workloads of the same kind: their best points go first, and all of
 * their records teach the cost model (rewards recomputed against their own heuristic). */
static bool warm_start(tuner_t *t) {
  near_ctx_t c;
  memset(&c, 0, sizeof c);
  c.t = t;
  if (t->s->kind[0]) snprintf(c.kind, sizeof c.kind, "%s", t->s->kind);
  else drk_search_description_kind(t->o->description, c.kind, sizeof c.kind);
  drk_search_workload_features(t->o->description, c.feat);
  char e[1200];
  if (!drk_search_db_workloads(t->o->db, near_one, &c, e, sizeof e)) return tfail(t, "%s", e);
  int seeded = 0, priors = 0;
  /* candidates of all the nearest workloads, ranked by their reward against their own
   * heuristic (times of different workloads do not compare; speedups do) */
  typedef struct seed_cand {
    drk_sched_knobs_t p;
    double r;
  } seed_cand_t;
  seed_cand_t cands[3 * 8];
  int n_cands = 0;
  for (int w = 0; w < c.n; w++) {
    prior_ctx_t pc;
    memset(&pc, 0, sizeof pc);
    pc.t = t;
    drk_search_query_t q = {.workload = c.best[w].key, .best_first = true};
    if (!drk_search_db_query(t->o->db, &q, prior_one, &pc, e, sizeof e)) return tfail(t, "%s", e);
    drk_search_target_t tg;
    float ctx[DRK_SEARCH_CONTEXT_FEATURES];
    for (int i = 0; i < pc.n_top; i++) {
      drk_sched_knobs_t pt;
      if (!drk_search_point_parse(t->s, pc.top[i].schedule, &pt, e, sizeof e)) continue;
      bool have_t = drk_search_db_target(t->o->db, pc.top[i].target, &tg);
      drk_search_context_features(c.best[w].desc, have_t ? &tg : NULL, ctx);
      drk_search_metrics_t m = metrics_of_record(&pc.top[i]), ref = metrics_of_record(&pc.heur);
      double r = pc.have_heur ? drk_search_reward(&t->cfg, &t->stage->w, &ref, &m, NULL) : pc.top[i].reward;
      if (t->cm) {
        drk_search_cost_model_add_prior(t->cm, &pt, ctx, r, 0.5);
        priors++;
      }
      bool dup = false;
      for (int j = 0; j < n_cands && !dup; j++) dup = drk_search_point_equal(&cands[j].p, &pt);
      if (!dup && n_cands < (int)(sizeof cands / sizeof cands[0])) cands[n_cands++] = (seed_cand_t){pt, r};
    }
  }
  for (int k = 0; k < 4 && k < n_cands; k++) {
    int bi = k;
    for (int j = k + 1; j < n_cands; j++)
      if (cands[j].r > cands[bi].r) bi = j;
    seed_cand_t tmp = cands[k];
    cands[k] = cands[bi];
    cands[bi] = tmp;
    drk_search_policy_seed(t->p, &cands[k].p, 1);
    seeded++;
  }
  if (c.n) {
    tlog(t, "%s: warm start from %d similar workload%s (nearest %s): %d points first, %d cost-model priors", t->kernel,
         c.n, c.n == 1 ? "" : "s", c.best[0].key, seeded, priors);
    ev_begin(t, "warm_start");
    ev_num(t, "workloads", c.n);
    ev_str(t, "nearest", c.best[0].key);
    ev_num(t, "seeds", seeded);
    ev_num(t, "priors", priors);
    ev_end(t);
  }
  return true;
}

/* ---- stages and fallback ---- */
static void set_stage(tuner_t *t, int round) {
  int idx;
  const drk_search_stage_t *st = drk_search_config_stage(&t->cfg, round, &idx);
  if (t->stage && idx == t->stage_index) return;
  bool first = !t->stage;
  t->stage = st;
  t->stage_index = idx;
  drk_search_policy_set_lr(t->p, st->lr);
  if (first) return;
  drk_search_history_rescore(t->h, &t->cfg, &st->w, &t->ref);
  tlog(t, "%s: stage %s from round %d: lr %g, weights %g %g %g %g", t->kernel, st->name, round, st->lr, st->w.alpha,
       st->w.beta, st->w.gamma, st->w.delta);
  ev_begin(t, "stage");
  ev_str(t, "stage", st->name);
  ev_num(t, "round", round);
  ev_num(t, "lr", st->lr);
  ev_num(t, "alpha", st->w.alpha);
  ev_num(t, "beta", st->w.beta);
  ev_num(t, "gamma", st->w.gamma);
  ev_num(t, "delta", st->w.delta);
  ev_end(t);
  /* rewards changed scale: the fallback's reference starts over */
  drk_search_fallback_init(&t->fb, t->cfg.fallback_drop, t->cfg.fallback_rounds);
}

static void round_stats(tuner_t *t, size_t first, size_t count, round_stats_t *rs) {
  memset(rs, 0, sizeof *rs);
  rs->best = -INFINITY;
  double clk = 0, pw = 0, var = 0;
  int n_clk = 0, n_pw = 0, n_var = 0;
  for (size_t i = first; i < first + count; i++) {
    const drk_search_trial_t *tr = drk_search_history_get(t->h, i);
    if (!tr->measured) continue;
    rs->n++;
    rs->mean += tr->reward;
    if (tr->reward > rs->best) rs->best = tr->reward;
    if (!tr->metrics.valid) {
      if (!rs->invalid) snprintf(rs->first_failure, sizeof rs->first_failure, "%s", tr->metrics.msg);
      rs->invalid++;
    }
    if (tr->metrics.sm_mhz > 0) clk += tr->metrics.sm_mhz, n_clk++;
    if (tr->metrics.power_w > 0) pw += tr->metrics.power_w, n_pw++;
    if (tr->metrics.variance >= 0) var += tr->metrics.variance, n_var++;
  }
  if (rs->n) rs->mean /= rs->n;
  else rs->best = t->cfg.floor;
  rs->sm_mhz = n_clk ? clk / n_clk : -1;
  rs->power_w = n_pw ? pw / n_pw : -1;
  rs->variance = n_var ? var / n_var : -1;
}

static bool fallback(tuner_t *t) {
  t->res->fallbacks++;
  int k = t->cfg.fallback_rounds;
  /* the drop rounds: rewards, their spread, failures, clocks */
  double s = 0, s2 = 0, clk = 0, pw = 0, var = 0;
  int n = 0, inval = 0, total = 0, n_clk = 0, n_pw = 0, n_var = 0;
  char failure[256] = "";
  for (int r = t->round - k + 1; r <= t->round; r++) {
    if (r < 0) continue;
    const round_stats_t *rs = &t->rounds[r % MAX_ROUND_STATS];
    s += rs->best;
    s2 += rs->best * rs->best;
    n++;
    inval += rs->invalid;
    total += rs->n;
    if (!failure[0] && rs->first_failure[0]) snprintf(failure, sizeof failure, "%s", rs->first_failure);
    if (rs->sm_mhz > 0) clk += rs->sm_mhz, n_clk++;
    if (rs->power_w > 0) pw += rs->power_w, n_pw++;
    if (rs->variance >= 0) var += rs->variance, n_var++;
  }
  double mean = n ? s / n : 0, sd = n ? sqrt(fmax(0, s2 / n - mean * mean)) : 0;
  double clk_now = n_clk ? clk / n_clk : -1, clk_ref = t->reference_round.sm_mhz;
  char stable_text[512] = "(none)";
  if (t->have_stable) point_text(t, &t->stable, stable_text, sizeof stable_text);
  tlog(t, "%s: fallback after %d rounds with the best reward more than %.0f%% below %.4f (now %.4f +- %.4f): back to "
          "the stable point %s; diagnostic mode",
       t->kernel, k, 100 * t->cfg.fallback_drop, t->fb.reference, mean, sd, stable_text);
  /* re-measure the stable point: the same kernel slower now means the GPU changed */
  double again_us = -1, ratio = -1;
  if (t->have_stable) {
    drk_search_metrics_t m;
    if (measure_raw(t, &t->stable, &m) != 0)
      return tfail(t, "measuring %s (diagnostic) stopped the tune: %s", t->kernel, m.msg);
    t->res->remeasured++;
    int64_t id;
    if (!store_extra(t, &t->stable, &m, "diagnostic", &id)) return false;
    if (m.valid && t->stable_time_us > 0) {
      again_us = m.time_us;
      ratio = m.time_us / t->stable_time_us;
    }
  }
  char cause[400];
  if (ratio > 1.10)
    snprintf(cause, sizeof cause,
             "environment: the stable point measures %.0f%% slower than when first measured (%.3f vs %.3f us): clocks, "
             "temperature, power cap or another process, not the policy",
             100 * (ratio - 1), again_us, t->stable_time_us);
  else if (total && inval * 2 > total)
    snprintf(cause, sizeof cause, "failures: %d of %d candidates invalid (first: %s)", inval, total,
             failure[0] ? failure : "?");
  else if (clk_now > 0 && clk_ref > 0 && clk_now < 0.95 * clk_ref)
    snprintf(cause, sizeof cause, "clocks: SM clock %.0f MHz in the drop rounds vs %.0f MHz before", clk_now, clk_ref);
  else
    snprintf(cause, sizeof cause, "policy: it moved to worse points (the stable point measures as before%s)",
             ratio > 0 ? "" : ", or could not be re-measured");
  tlog(t, "%s: diagnosis: %s; reward spread %.4f, %d/%d invalid, SM clock %.0f (before %.0f) MHz, power %.0f W, "
          "timing spread %.3g",
       t->kernel, cause, sd, inval, total, clk_now, clk_ref, n_pw ? pw / n_pw : -1.0, n_var ? var / n_var : -1.0);
  ev_begin(t, "fallback");
  ev_num(t, "round", t->round);
  ev_num(t, "reference_reward", t->fb.reference);
  ev_num(t, "drop_mean_reward", mean);
  ev_num(t, "reward_sd", sd);
  ev_num(t, "invalid", inval);
  ev_num(t, "measured", total);
  ev_str(t, "first_failure", failure);
  ev_known(t, "sm_mhz", clk_now);
  ev_known(t, "sm_mhz_before", clk_ref);
  ev_known(t, "power_w", n_pw ? pw / n_pw : -1);
  ev_known(t, "timing_spread", n_var ? var / n_var : -1);
  ev_str(t, "stable_point", stable_text);
  ev_known(t, "stable_time_us", t->stable_time_us);
  ev_known(t, "stable_time_us_now", again_us);
  ev_str(t, "cause", cause);
  ev_end(t);
  drk_search_policy_rollback(t->p, t->have_stable ? &t->stable : NULL);
  t->diag_left = k;
  return true;
}

static void diagnostic_round(tuner_t *t, const round_stats_t *rs) {
  tlog(t, "%s: diagnostic: round %d best %.4f mean %.4f, %d/%d invalid%s%s, SM %.0f MHz, power %.0f W", t->kernel,
       t->round, rs->best, rs->mean, rs->invalid, rs->n, rs->invalid ? " (first: " : "",
       rs->invalid ? rs->first_failure : "", rs->sm_mhz, rs->power_w);
  ev_begin(t, "diagnostic");
  ev_num(t, "round", t->round);
  ev_num(t, "best_reward", rs->best);
  ev_num(t, "mean_reward", rs->mean);
  ev_num(t, "invalid", rs->invalid);
  ev_num(t, "measured", rs->n);
  ev_str(t, "first_failure", rs->first_failure);
  ev_known(t, "sm_mhz", rs->sm_mhz);
  ev_known(t, "power_w", rs->power_w);
  ev_known(t, "timing_spread", rs->variance);
  ev_end(t);
}

/* ---- selection of the batch among the proposals ---- */
typedef struct scored {
  drk_sched_knobs_t p;
  double pred, score;
} scored_t;

static int scored_cmp(const void *a, const void *b) {
  double x = ((const scored_t *)a)->score, y = ((const scored_t *)b)->score;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* ---- the loop ---- */
static bool tune_rounds(tuner_t *t) {
  int budget = t->o->budget;
  size_t cap = (size_t)t->cfg.batch * (size_t)(t->cfg.screen > 1 ? t->cfg.screen : 1);
  drk_sched_knobs_t *props = calloc(cap, sizeof *props);
  scored_t *sc = calloc(cap + 4 * DRK_KNOB_COUNT, sizeof *sc);
  if (!props || !sc) {
    free(props);
    free(sc);
    return tfail(t, "out of memory");
  }
  bool ok = true;
  bool use_cm = t->cm && (t->cfg.screen > 1 || drk_search_policy_wants_cost_model(t->p));
  while (ok && (int)drk_search_history_measured(t->h) < budget) {
    if (t->o->time_limit_s > 0 && mono_s() - t->t0 >= t->o->time_limit_s) {
      t->res->timed_out = true;
      tlog(t, "%s: the time limit (%.1f s) ends the search after %zu measured points", t->kernel, t->o->time_limit_s,
           drk_search_history_measured(t->h));
      break;
    }
    set_stage(t, t->round);
    int want = budget - (int)drk_search_history_measured(t->h);
    if (want > t->cfg.batch) want = t->cfg.batch;
    bool screen = use_cm && t->cfg.screen > 1 && drk_search_cost_model_ready(t->cm);
    int ask = screen ? want * t->cfg.screen : want;
    int k = drk_search_policy_propose(t->p, t->h, t->cm, props, ask);
    /* the policy promises fresh, unpruned points; the loop checks anyway */
    int m = 0;
    for (int i = 0; i < k; i++) {
      if (drk_search_history_find(t->h, &props[i])) continue;
      char why[200];
      if (!drk_search_point_valid(t->s, &props[i], why, sizeof why)) {
        drk_search_trial_t tr;
        memset(&tr, 0, sizeof tr);
        tr.point = props[i];
        tr.metrics = drk_search_metrics_unknown();
        snprintf(tr.metrics.msg, sizeof tr.metrics.msg, "pruned: %s", why);
        tr.reward = t->cfg.floor;
        tr.round = t->round;
        tr.predicted = NAN;
        if (drk_search_history_add(t->h, &tr)) {
          t->res->pruned++;
          char pt[512];
          point_text(t, &props[i], pt, sizeof pt);
          ev_begin(t, "pruned");
          ev_str(t, "point", pt);
          ev_str(t, "reason", why);
          ev_end(t);
        }
        continue;
      }
      bool dup = false;
      for (int j = 0; j < m && !dup; j++) dup = drk_search_point_equal(&sc[j].p, &props[i]);
      if (dup) continue;
      sc[m].p = props[i];
      sc[m].pred = NAN;
      sc[m].score = -(double)i; /* the policy's order */
      m++;
    }
    if (m == 0) {
      if (k == 0) {
        t->res->exhausted = true;
        tlog(t, "%s: the space is exhausted after %zu points", t->kernel, drk_search_history_count(t->h));
        break;
      }
      continue; /* everything proposed was pruned: ask again */
    }
    if (screen) {
      for (int i = 0; i < m; i++) {
        sc[i].pred = drk_search_cost_model_predict(t->cm, &sc[i].p, NULL);
        sc[i].score = drk_search_cost_model_score(t->cm, &sc[i].p, 0.5);
      }
      /* the untried one-step neighbours of the two best points compete too, as if valid: the
       * model's idea of an invalid region is least reliable at its edge, where the best
       * points of a space often are (two: a plateau of equal points does not stop the walk);
       * with budget left, the winner is compared with every neighbour */
      long top[2] = {-1, -1};
      size_t nh = drk_search_history_count(t->h);
      for (size_t i = 0; i < nh; i++) {
        const drk_search_trial_t *tr = drk_search_history_get(t->h, i);
        if (!tr->measured || !tr->metrics.valid) continue;
        if (top[0] < 0 || tr->reward > drk_search_history_get(t->h, (size_t)top[0])->reward) {
          top[1] = top[0];
          top[0] = (long)i;
        } else if (top[1] < 0 || tr->reward > drk_search_history_get(t->h, (size_t)top[1])->reward) {
          top[1] = (long)i;
        }
      }
      for (int b = 0; b < 2; b++) {
        int bidx[DRK_KNOB_COUNT];
        if (top[b] < 0 || !drk_search_point_indices(t->s, &drk_search_history_get(t->h, (size_t)top[b])->point, bidx))
          continue;
        for (int d = 0; d < t->s->n_dims; d++)
          for (int step = -1; step <= 1; step += 2) {
            int q[DRK_KNOB_COUNT];
            memcpy(q, bidx, sizeof q);
            q[d] += step;
            if (q[d] < 0 || q[d] >= t->s->n_values[d]) continue;
            drk_sched_knobs_t nb;
            drk_search_point_from_indices(t->s, q, &nb);
            char why[8];
            if (drk_search_history_find(t->h, &nb) || !drk_search_point_valid(t->s, &nb, why, sizeof why)) continue;
            double r, sd;
            drk_search_cost_model_predict_parts(t->cm, &nb, &r, NULL, &sd);
            int j = 0;
            while (j < m && !drk_search_point_equal(&sc[j].p, &nb)) j++;
            if (j == m) {
              sc[m].p = nb;
              sc[m].pred = drk_search_cost_model_predict(t->cm, &nb, NULL);
              m++;
            }
            sc[j].score = r + 0.5 * sd;
          }
      }
    }
    if (screen && m > want) {
      qsort(sc, (size_t)m, sizeof *sc, scored_cmp);
      /* one in eight of the batch uniformly from the whole space: the model is not trusted
       * blindly, and a region it wrongly believes invalid or slow gets measured again */
      int explore = want >= 8 ? want / 8 : 0;
      for (int e = 0; e < explore; e++) {
        int slot = want - explore + e;
        for (int tries = 0; tries < 64; tries++) {
          drk_sched_knobs_t q;
          drk_search_point_random(t->s, &t->rng, &q);
          char why[8];
          bool taken = drk_search_history_find(t->h, &q) || !drk_search_point_valid(t->s, &q, why, sizeof why);
          for (int j = 0; j < slot && !taken; j++) taken = drk_search_point_equal(&sc[j].p, &q);
          if (taken) continue;
          sc[slot].p = q;
          sc[slot].pred = drk_search_cost_model_predict(t->cm, &q, NULL);
          break;
        }
      }
      m = want;
    } else if (m > want) {
      m = want;
    } else if (use_cm && drk_search_cost_model_ready(t->cm)) {
      for (int i = 0; i < m; i++) sc[i].pred = drk_search_cost_model_predict(t->cm, &sc[i].p, NULL);
    }
    for (int i = 0; i < m; i++) props[i] = sc[i].p;
    if (t->o->prepare && t->o->prepare(t->o->ctx, t->s, props, m) != 0) {
      ok = tfail(t, "preparing the candidates of %s stopped the tune", t->kernel);
      break;
    }
    size_t first = drk_search_history_count(t->h);
    for (int i = 0; i < m && ok; i++) {
      size_t idx;
      ok = measure_trial(t, &props[i], t->round, sc[i].pred, drk_search_policy_name(t->p), &idx);
    }
    size_t count = drk_search_history_count(t->h) - first;
    drk_search_policy_observe(t->p, t->h, first, count);
    if (!ok) break;
    if (use_cm) drk_search_cost_model_fit(t->cm, t->h);
    round_stats_t *rs = &t->rounds[t->round % MAX_ROUND_STATS];
    round_stats(t, first, count, rs);
    if (t->diag_left > 0) {
      diagnostic_round(t, rs);
      t->diag_left--;
    }
    if (drk_search_fallback_round(&t->fb, rs->best)) {
      ok = fallback(t);
    } else if (t->fb.streak == 0) {
      /* a good round: the state to come back to */
      drk_search_policy_checkpoint(t->p);
      long bi = drk_search_history_best_index(t->h);
      if (bi >= 0) {
        const drk_search_trial_t *b = drk_search_history_get(t->h, (size_t)bi);
        t->stable = b->point;
        t->stable_time_us = b->metrics.time_us;
        t->stable_i = bi;
        t->have_stable = true;
      }
      t->reference_round = *rs;
    }
    t->round++;
  }
  t->res->rounds = t->round;
  free(props);
  free(sc);
  return ok;
}

static bool found_one(void *ctx, const drk_search_record_t *r) {
  (void)r;
  *(bool *)ctx = true;
  return false;
}

/* Re-measures the winner; agreement marks its record stable. */
static bool remeasure(tuner_t *t, long bi) {
  const drk_search_trial_t *b = drk_search_history_get(t->h, (size_t)bi);
  drk_sched_knobs_t pt = b->point;
  double t1 = b->metrics.time_us;
  int64_t rec = b->record_id;
  if (t->o->db && rec > 0) {
    /* already stable (a resumed tune that confirmed it): nothing to confirm */
    drk_search_query_t q = {.id = rec, .stable_only = true};
    bool found = false;
    char e[1200];
    if (!drk_search_db_query(t->o->db, &q, found_one, &found, e, sizeof e)) return tfail(t, "%s", e);
    if (found) {
      t->res->stable = true;
      return true;
    }
  }
  bool agree = t->cfg.remeasure > 0;
  char pt_text[512];
  point_text(t, &pt, pt_text, sizeof pt_text);
  for (int r = 0; r < t->cfg.remeasure; r++) {
    drk_search_metrics_t m;
    if (measure_raw(t, &pt, &m) != 0)
      return tfail(t, "re-measuring %s %s stopped the tune: %s", t->kernel, pt_text, m.msg);
    t->res->remeasured++;
    int64_t id;
    if (!store_extra(t, &pt, &m, "remeasure", &id)) return false;
    /* Only a slower re-measurement is suspect: the winner of many noisy trials is a low draw
     * of its own spread, and a faster one confirms it. */
    double dev = m.valid && t1 > 0 ? (m.time_us - t1) / t1 : INFINITY;
    bool ok = m.valid && t1 > 0 && (dev <= t->cfg.stable_tol || m.time_us - t1 <= t->cfg.stable_abs_us);
    ev_begin(t, "remeasure");
    ev_str(t, "point", pt_text);
    ev_bool(t, "valid", m.valid);
    ev_str(t, "reason", m.valid ? "" : m.msg);
    ev_known(t, "time_us", t1);
    ev_known(t, "time_us_again", m.time_us);
    ev_num(t, "deviation", dev);
    ev_bool(t, "agrees", ok);
    ev_end(t);
    if (!ok) {
      tlog(t, "%s: the winner %s is not stable: %s", t->kernel, pt_text,
           m.valid ? "its re-measurement differs" : m.msg);
      agree = false;
    }
  }
  t->res->stable = agree;
  if (agree && t->o->db && rec > 0) {
    char e[1200];
    if (!drk_search_db_set_stable(t->o->db, rec, true, e, sizeof e)) return tfail(t, "%s", e);
  }
  return true;
}

bool drk_search_tune(const drk_search_space_t *s, drk_search_policy_t *p, const drk_search_tune_options_t *o,
                     drk_search_tune_result_t *out, char *err, size_t n) {
  memset(out, 0, sizeof *out);
  tuner_t t;
  memset(&t, 0, sizeof t);
  t.s = s;
  t.p = p;
  t.o = o;
  t.res = out;
  t.err = err;
  t.n = n;
  t.t0 = mono_s();
  t.stable_i = -1;
  if (o->config) t.cfg = *o->config;
  else drk_search_config_default(&t.cfg);
  t.workload = o->workload ? o->workload : s->workload;
  t.version = o->drkc_version ? o->drkc_version : DRK_VERSION_STRING;
  t.kernel = o->kernel ? o->kernel : s->kernel[0] ? s->kernel : "kernel";
  if (!o->measure) return tfail(&t, "tune: no measure callback");
  if (!o->target) return tfail(&t, "tune: no target");
  if (o->budget < 1) return tfail(&t, "tune: the budget must be at least 1 trial, not %d", o->budget);
  if (o->db && (!t.workload || strlen(t.workload) != 32))
    return tfail(&t, "tune: the workload key '%s' is not 32 hex digits", t.workload ? t.workload : "");
  if (!t.workload) t.workload = "";
  drk_search_rng_seed(&t.rng, o->seed ^ 0x74756e65ull);
  drk_search_target_key(o->target, t.target_key);
  drk_search_context_features(o->description, o->target, t.context);
  drk_search_fallback_init(&t.fb, t.cfg.fallback_drop, t.cfg.fallback_rounds);
  t.h = drk_search_history_create(s);
  t.cm = drk_search_cost_model_create(s, &t.cfg, t.context, DRK_SEARCH_CONTEXT_FEATURES, o->seed);
  bool ok = t.h && t.cm;
  if (!ok) tfail(&t, "out of memory");
  set_stage(&t, 0);
  char e[1200];
  if (ok && o->db) {
    char kind[32];
    if (s->kind[0]) snprintf(kind, sizeof kind, "%s", s->kind);
    else drk_search_description_kind(o->description, kind, sizeof kind);
    ok = (drk_search_db_put_workload(o->db, t.workload, kind, o->description ? o->description : "", e, sizeof e) &&
          drk_search_db_put_target(o->db, o->target, NULL, e, sizeof e)) ||
         tfail(&t, "%s", e);
  }
  uint64_t size = drk_search_space_size(s);
  if (ok) {
    char fp[512];
    drk_search_target_format(o->target, fp, sizeof fp);
    ev_begin(&t, "start");
    ev_str(&t, "policy", drk_search_policy_name(p));
    ev_num(&t, "budget", o->budget);
    ev_num(&t, "space_size", (double)size);
    ev_num(&t, "knobs", s->n_dims);
    ev_str(&t, "target", t.target_key);
    ev_str(&t, "fingerprint", fp);
    ev_str(&t, "drkc_version", t.version);
    ev_str(&t, "description", o->description ? o->description : "");
    ev_num(&t, "seed", (double)o->seed);
    ev_num(&t, "batch", t.cfg.batch);
    ev_num(&t, "screen", t.cfg.screen);
    ev_end(&t);
  }
  if (ok && o->db && o->resume) {
    drk_search_query_t q = {.workload = t.workload, .target = t.target_key, .drkc_version = t.version};
    ok = drk_search_db_query(o->db, &q, resume_one, &t, e, sizeof e) || tfail(&t, "%s", e);
    if (ok && out->resumed) {
      tlog(&t, "%s: resumed %d measured points from %s", t.kernel, out->resumed, drk_search_db_path(o->db));
      ev_begin(&t, "resume");
      ev_num(&t, "records", out->resumed);
      ev_end(&t);
    }
  }
  /* the reference: the heuristic's point */
  if (ok) {
    const drk_search_trial_t *h0 = drk_search_history_find(t.h, &s->heuristic);
    size_t hi = 0;
    if (!h0) {
      t.ref = drk_search_metrics_unknown();
      ok = measure_trial(&t, &s->heuristic, -1, NAN, "heuristic", &hi);
      if (ok) h0 = drk_search_history_get(t.h, hi);
    }
    if (ok && !h0->metrics.valid)
      ok = tfail(&t, "%s: the heuristic's kernel failed (%s): nothing to compare candidates with", t.kernel,
                 h0->metrics.msg[0] ? h0->metrics.msg : "invalid");
    if (ok) {
      t.ref = h0->metrics;
      out->heuristic_metrics = h0->metrics;
      out->energy_used = t.ref.energy_j > 0;
      out->memory_used = t.ref.mem_bytes > 0;
      snprintf(out->note, sizeof out->note, "%s%s%s", out->energy_used ? "" : "energy unavailable: gamma = 0",
               !out->energy_used && !out->memory_used ? "; " : "",
               out->memory_used ? "" : "memory not measured: beta = 0");
      if (out->note[0]) tlog(&t, "%s: %s", t.kernel, out->note);
      drk_search_history_rescore(t.h, &t.cfg, &t.stage->w, &t.ref);
      drk_search_policy_observe(p, t.h, 0, drk_search_history_count(t.h));
      drk_search_cost_model_fit(t.cm, t.h);
    }
  }
  if (ok && o->db && o->warm_start) ok = warm_start(&t);
  if (ok) ok = tune_rounds(&t);
  /* the winner, re-measured */
  long bi = t.h ? drk_search_history_best_index(t.h) : -1;
  if (ok && bi >= 0) ok = remeasure(&t, bi);
  if (bi >= 0) {
    const drk_search_trial_t *b = drk_search_history_get(t.h, (size_t)bi);
    out->found = true;
    out->best = b->point;
    point_text(&t, &b->point, out->best_text, sizeof out->best_text);
    out->best_metrics = b->metrics;
    out->best_reward = b->reward;
    out->best_record = b->record_id;
    out->speedup = b->metrics.time_us > 0 && t.ref.time_us > 0 ? t.ref.time_us / b->metrics.time_us : 0;
  }
  out->measured = t.h ? (int)drk_search_history_measured(t.h) : 0;
  if (t.h && (ok || out->measured)) {
    ev_begin(&t, "end");
    ev_bool(&t, "ok", ok);
    ev_str(&t, "best_point", out->best_text);
    ev_num(&t, "best_reward", out->found ? out->best_reward : NAN);
    ev_known(&t, "best_time_us", out->found ? out->best_metrics.time_us : -1);
    ev_known(&t, "heuristic_time_us", t.ref.time_us);
    ev_num(&t, "speedup", out->speedup);
    ev_bool(&t, "stable", out->stable);
    ev_num(&t, "measured", out->measured);
    ev_num(&t, "resumed", out->resumed);
    ev_num(&t, "invalid", out->invalid);
    ev_num(&t, "pruned", out->pruned);
    ev_num(&t, "remeasured", out->remeasured);
    ev_num(&t, "fallbacks", out->fallbacks);
    ev_bool(&t, "exhausted", out->exhausted);
    ev_bool(&t, "timed_out", out->timed_out);
    ev_bool(&t, "energy_used", out->energy_used);
    ev_bool(&t, "memory_used", out->memory_used);
    ev_str(&t, "note", out->note);
    if (!ok) ev_str(&t, "error", err);
    ev_end(&t);
  }
  drk_search_cost_model_destroy(t.cm);
  drk_search_history_destroy(t.h);
  return ok;
}
