/* Reward, the staged tune configuration and the fallback rule (search/reward.h). */
#include "search/reward.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

drk_search_metrics_t drk_search_metrics_unknown(void) {
  drk_search_metrics_t m;
  memset(&m, 0, sizeof m);
  m.valid = false;
  m.time_us = m.ref_time_us = m.tflops = m.gbs = m.energy_j = m.mem_bytes = -1;
  m.error = m.tolerance = m.sm_mhz = m.power_w = m.variance = -1;
  return m;
}

void drk_search_config_default(drk_search_config_t *c) {
  memset(c, 0, sizeof *c);
  c->n_stages = 2;
  c->stages[0] = (drk_search_stage_t){"warmup", 50, 1e-4, {0.2, 0.1, 0.1, 0.6}};
  c->stages[1] = (drk_search_stage_t){"main", 200, 3e-5, {0.4, 0.3, 0.2, 0.1}};
  c->floor = 0;
  c->tolerance = 1e-2;
  c->fallback_drop = 0.15;
  c->fallback_rounds = 3;
  c->batch = 8;
  c->screen = 4;
  c->remeasure = 1;
  c->stable_tol = 0.05;
  c->stable_abs_us = 0.5;
  snprintf(c->ppo.action, sizeof c->ppo.action, "step");
  c->ppo.epochs = 3;
  c->ppo.batch = 32;
  c->ppo.hidden = 32;
  c->ppo.horizon = 8;
  c->ppo.rollouts = 16;
  c->ppo.iterations = 4;
  c->ppo.gamma = 0.9;
  c->ppo.lambda = 0.99;
  c->ppo.clip = 0.2;
  c->ppo.entropy = 0.01;
  c->ppo.value_coef = 0.5;
  c->ppo.lr_scale = 1;
  c->evo.population = 16;
  c->evo.tournament = 3;
  c->evo.crossover = 0.5;
  c->evo.mutate2 = 0.3;
  c->cost.hidden = 32;
  c->cost.epochs = 40;
  c->cost.ensemble = 3;
  c->cost.lr = 3e-3;
}

/* ---- parsing ---- */
typedef struct cfg_parser {
  const char *path;
  int line;
  char *err;
  size_t n;
} cfg_parser_t;

static bool cfg_error(cfg_parser_t *p, const char *fmt, ...) {
  int w = snprintf(p->err, p->n, "%s:%d: error: ", p->path ? p->path : "<config>", p->line);
  if (w >= 0 && (size_t)w < p->n) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err + w, p->n - (size_t)w, fmt, ap);
    va_end(ap);
  }
  return false;
}

static bool cfg_double(cfg_parser_t *p, const char *key, const char *v, double lo, double hi, double *out) {
  char *end;
  errno = 0;
  double x = strtod(v, &end);
  if (end == v || *end || errno || !isfinite(x))
    return cfg_error(p, "%s: '%s' is not a number", key, v);
  if (x < lo || x > hi) return cfg_error(p, "%s: %g is outside %g..%g", key, x, lo, hi);
  *out = x;
  return true;
}

static bool cfg_int(cfg_parser_t *p, const char *key, const char *v, long lo, long hi, int *out) {
  char *end;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (end == v || *end || errno) return cfg_error(p, "%s: '%s' is not an integer", key, v);
  if (x < lo || x > hi) return cfg_error(p, "%s: %ld is outside %ld..%ld", key, x, lo, hi);
  *out = (int)x;
  return true;
}

/* "0.2, 0.1, 0.1, 0.6" or "[0.2 0.1 0.1 0.6]" */
static bool cfg_weights(cfg_parser_t *p, const char *v, drk_search_weights_t *w) {
  double x[4];
  int k = 0;
  const char *s = v;
  while (*s == ' ' || *s == '[') s++;
  while (*s && *s != ']') {
    if (k == 4) return cfg_error(p, "weights: more than 4 numbers in '%s' (alpha, beta, gamma, delta)", v);
    char *end;
    errno = 0;
    x[k] = strtod(s, &end);
    if (end == s || errno || !isfinite(x[k]))
      return cfg_error(p, "weights: '%s' is not 4 numbers (alpha, beta, gamma, delta)", v);
    if (x[k] < 0) return cfg_error(p, "weights: %g is negative", x[k]);
    k++;
    s = end;
    while (*s == ' ' || *s == ',' || *s == '\t') s++;
  }
  if (*s == ']') s++;
  while (*s == ' ') s++;
  if (*s) return cfg_error(p, "weights: unexpected '%s'", s);
  if (k != 4) return cfg_error(p, "weights: %d number%s in '%s', expected 4 (alpha, beta, gamma, delta)", k,
                               k == 1 ? "" : "s", v);
  if (x[0] + x[1] + x[2] + x[3] <= 0) return cfg_error(p, "weights: all zero (the reward would be constant)");
  *w = (drk_search_weights_t){x[0], x[1], x[2], x[3]};
  return true;
}

/* Settings: key -> parse. */
static bool cfg_setting(cfg_parser_t *p, drk_search_config_t *c, const char *k, const char *v) {
  double big = 1e9;
  if (!strcmp(k, "reward.floor")) return cfg_double(p, k, v, -big, big, &c->floor);
  if (!strcmp(k, "reward.tolerance")) return cfg_double(p, k, v, 1e-12, big, &c->tolerance);
  if (!strcmp(k, "fallback.drop")) return cfg_double(p, k, v, 0, 1, &c->fallback_drop);
  if (!strcmp(k, "fallback.rounds")) return cfg_int(p, k, v, 1, 1000000, &c->fallback_rounds);
  if (!strcmp(k, "tune.batch")) return cfg_int(p, k, v, 1, 4096, &c->batch);
  if (!strcmp(k, "tune.screen")) return cfg_int(p, k, v, 1, 1024, &c->screen);
  if (!strcmp(k, "tune.remeasure")) return cfg_int(p, k, v, 0, 100, &c->remeasure);
  if (!strcmp(k, "tune.stable_tol")) return cfg_double(p, k, v, 0, 10, &c->stable_tol);
  if (!strcmp(k, "tune.stable_abs_us")) return cfg_double(p, k, v, 0, 1e6, &c->stable_abs_us);
  if (!strcmp(k, "ppo.action")) {
    if (strcmp(v, "step") && strcmp(v, "categorical"))
      return cfg_error(p, "ppo.action: '%s' is neither step nor categorical", v);
    snprintf(c->ppo.action, sizeof c->ppo.action, "%s", v);
    return true;
  }
  if (!strcmp(k, "ppo.epochs")) return cfg_int(p, k, v, 1, 1000, &c->ppo.epochs);
  if (!strcmp(k, "ppo.batch")) return cfg_int(p, k, v, 1, 1 << 20, &c->ppo.batch);
  if (!strcmp(k, "ppo.hidden")) return cfg_int(p, k, v, 1, 1024, &c->ppo.hidden);
  if (!strcmp(k, "ppo.horizon")) return cfg_int(p, k, v, 1, 1000, &c->ppo.horizon);
  if (!strcmp(k, "ppo.rollouts")) return cfg_int(p, k, v, 1, 100000, &c->ppo.rollouts);
  if (!strcmp(k, "ppo.iterations")) return cfg_int(p, k, v, 0, 100000, &c->ppo.iterations);
  if (!strcmp(k, "ppo.gamma")) return cfg_double(p, k, v, 0, 1, &c->ppo.gamma);
  if (!strcmp(k, "ppo.lambda")) return cfg_double(p, k, v, 0, 1, &c->ppo.lambda);
  if (!strcmp(k, "ppo.clip")) return cfg_double(p, k, v, 0, 10, &c->ppo.clip);
  if (!strcmp(k, "ppo.entropy")) return cfg_double(p, k, v, 0, 100, &c->ppo.entropy);
  if (!strcmp(k, "ppo.value_coef")) return cfg_double(p, k, v, 0, 100, &c->ppo.value_coef);
  if (!strcmp(k, "ppo.lr_scale")) return cfg_double(p, k, v, 0, 1e6, &c->ppo.lr_scale);
  if (!strcmp(k, "evo.population")) return cfg_int(p, k, v, 2, 100000, &c->evo.population);
  if (!strcmp(k, "evo.tournament")) return cfg_int(p, k, v, 1, 1000, &c->evo.tournament);
  if (!strcmp(k, "evo.crossover")) return cfg_double(p, k, v, 0, 1, &c->evo.crossover);
  if (!strcmp(k, "evo.mutate2")) return cfg_double(p, k, v, 0, 1, &c->evo.mutate2);
  if (!strcmp(k, "cost.hidden")) return cfg_int(p, k, v, 1, 1024, &c->cost.hidden);
  if (!strcmp(k, "cost.epochs")) return cfg_int(p, k, v, 0, 100000, &c->cost.epochs);
  if (!strcmp(k, "cost.ensemble")) return cfg_int(p, k, v, 1, 16, &c->cost.ensemble);
  if (!strcmp(k, "cost.lr")) return cfg_double(p, k, v, 0, 10, &c->cost.lr);
  if (!strcmp(k, "epochs") || !strcmp(k, "lr") || !strcmp(k, "weights") || !strcmp(k, "alpha") ||
      !strcmp(k, "beta") || !strcmp(k, "gamma") || !strcmp(k, "delta"))
    return cfg_error(p, "'%s' belongs in a stage section ([warmup], [main], ...)", k);
  return cfg_error(p, "unknown setting '%s' (reward.floor, reward.tolerance, fallback.drop, fallback.rounds, "
                      "tune.batch, tune.screen, tune.remeasure, tune.stable_tol, tune.stable_abs_us, ppo.action, ppo.epochs, ppo.batch, "
                      "ppo.hidden, ppo.horizon, ppo.rollouts, ppo.iterations, ppo.gamma, ppo.lambda, ppo.clip, "
                      "ppo.entropy, ppo.value_coef, ppo.lr_scale, evo.population, evo.tournament, evo.crossover, "
                      "evo.mutate2, cost.hidden, cost.epochs, cost.ensemble, cost.lr)",
                   k);
}

/* what a stage section has set so far */
enum { ST_EPOCHS = 1, ST_LR = 2, ST_WEIGHTS = 4, ST_A = 8, ST_B = 16, ST_G = 32, ST_D = 64 };

static bool cfg_stage_key(cfg_parser_t *p, drk_search_stage_t *st, unsigned *seen, const char *k, const char *v) {
  static const struct {
    const char *name;
    unsigned bit;
  } keys[] = {{"epochs", ST_EPOCHS}, {"lr", ST_LR},     {"weights", ST_WEIGHTS}, {"alpha", ST_A},
              {"beta", ST_B},       {"gamma", ST_G},    {"delta", ST_D}};
  unsigned bit = 0;
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
    if (!strcmp(k, keys[i].name)) bit = keys[i].bit;
  if (!bit) {
    if (strchr(k, '.')) return cfg_error(p, "setting '%s' must come before the first stage section", k);
    return cfg_error(p, "unknown key '%s' in stage [%s] (epochs, lr, weights, alpha, beta, gamma, delta)", k, st->name);
  }
  if (*seen & bit) return cfg_error(p, "'%s' set twice in stage [%s]", k, st->name);
  if ((bit == ST_WEIGHTS && (*seen & (ST_A | ST_B | ST_G | ST_D))) || (bit > ST_WEIGHTS && (*seen & ST_WEIGHTS)))
    return cfg_error(p, "stage [%s]: give either weights = a, b, g, d or alpha/beta/gamma/delta, not both", st->name);
  *seen |= bit;
  switch (bit) {
    case ST_EPOCHS: return cfg_int(p, k, v, 1, 100000000, &st->epochs);
    case ST_LR: return cfg_double(p, k, v, 0, 10, &st->lr);
    case ST_WEIGHTS: return cfg_weights(p, v, &st->w);
    case ST_A: return cfg_double(p, k, v, 0, 1e6, &st->w.alpha);
    case ST_B: return cfg_double(p, k, v, 0, 1e6, &st->w.beta);
    case ST_G: return cfg_double(p, k, v, 0, 1e6, &st->w.gamma);
    default: return cfg_double(p, k, v, 0, 1e6, &st->w.delta);
  }
}

/* A finished stage section (header at line hline) is complete. */
static bool cfg_stage_done(cfg_parser_t *p, int hline, const drk_search_stage_t *st, unsigned seen) {
  int line = p->line;
  p->line = hline;
  bool ok = true;
  if (!(seen & ST_EPOCHS)) ok = cfg_error(p, "stage [%s] has no 'epochs'", st->name);
  else if (!(seen & ST_LR)) ok = cfg_error(p, "stage [%s] has no 'lr'", st->name);
  else if (!(seen & (ST_WEIGHTS | ST_A | ST_B | ST_G | ST_D)))
    ok = cfg_error(p, "stage [%s] has no 'weights' (alpha, beta, gamma, delta)", st->name);
  else if (st->w.alpha + st->w.beta + st->w.gamma + st->w.delta <= 0)
    ok = cfg_error(p, "stage [%s]: all weights are zero", st->name);
  p->line = line;
  return ok;
}

static char *trim(char *s) {
  while (isspace((unsigned char)*s)) s++;
  size_t n = strlen(s);
  while (n && isspace((unsigned char)s[n - 1])) s[--n] = 0;
  return s;
}

bool drk_search_config_parse(const char *text, const char *path, drk_search_config_t *c, char *err, size_t n) {
  drk_search_config_t t = *c;
  cfg_parser_t p = {path, 0, err, n};
  int n_stages = 0, hline = 0;
  unsigned seen = 0;
  drk_search_stage_t *st = NULL;
  const char *s = text;
  while (*s) {
    p.line++;
    size_t len = strcspn(s, "\n");
    char buf[1024];
    if (len >= sizeof buf) return cfg_error(&p, "line longer than %zu characters", sizeof buf - 1);
    memcpy(buf, s, len);
    buf[len] = 0;
    s += len;
    if (*s == '\n') s++;
    char *hash = strchr(buf, '#');
    if (hash) *hash = 0;
    char *l = trim(buf);
    if (!*l) continue;
    if (*l == '[') {
      char *close = strchr(l, ']');
      if (!close) return cfg_error(&p, "section header '%s' has no ']'", l);
      if (*trim(close + 1)) return cfg_error(&p, "text after the section header: '%s'", trim(close + 1));
      *close = 0;
      char *name = trim(l + 1);
      if (!*name) return cfg_error(&p, "empty section name");
      for (char *q = name; *q; q++)
        if (!isalnum((unsigned char)*q) && *q != '_' && *q != '-')
          return cfg_error(&p, "stage name '%s': letters, digits, '_' and '-' only", name);
      if (strlen(name) >= sizeof t.stages[0].name) return cfg_error(&p, "stage name '%s' is too long", name);
      if (st && !cfg_stage_done(&p, hline, st, seen)) return false;
      for (int i = 0; i < n_stages; i++)
        if (!strcmp(t.stages[i].name, name)) return cfg_error(&p, "stage [%s] defined twice", name);
      if (n_stages == DRK_SEARCH_MAX_STAGES) return cfg_error(&p, "more than %d stages", DRK_SEARCH_MAX_STAGES);
      st = &t.stages[n_stages++];
      memset(st, 0, sizeof *st);
      snprintf(st->name, sizeof st->name, "%s", name);
      seen = 0;
      hline = p.line;
      continue;
    }
    char *eq = strchr(l, '=');
    if (!eq) return cfg_error(&p, "expected 'key = value' or '[stage]', not '%s'", l);
    *eq = 0;
    char *k = trim(l), *v = trim(eq + 1);
    if (!*k) return cfg_error(&p, "missing key before '='");
    if (!*v) return cfg_error(&p, "%s: missing value", k);
    if (st ? !cfg_stage_key(&p, st, &seen, k, v) : !cfg_setting(&p, &t, k, v)) return false;
  }
  if (st && !cfg_stage_done(&p, hline, st, seen)) return false;
  if (n_stages) t.n_stages = n_stages;
  *c = t;
  return true;
}

bool drk_search_config_load(const char *path, drk_search_config_t *c, char *err, size_t n) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, n, "%s: error: cannot open: %s", path, strerror(errno));
    return false;
  }
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  for (;;) {
    if (!buf) break;
    if (len + 1024 + 1 > cap) {
      char *nb = realloc(buf, cap *= 2);
      if (!nb) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = nb;
    }
    size_t r = fread(buf + len, 1, 1024, f);
    len += r;
    if (r < 1024) break;
  }
  bool rerr = ferror(f);
  fclose(f);
  if (!buf || rerr) {
    free(buf);
    snprintf(err, n, "%s: error: cannot read%s", path, buf ? "" : ": out of memory");
    return false;
  }
  buf[len] = 0;
  if (strlen(buf) != len) {
    free(buf);
    snprintf(err, n, "%s: error: a NUL byte in a text file", path);
    return false;
  }
  bool ok = drk_search_config_parse(buf, path, c, err, n);
  free(buf);
  return ok;
}

void drk_search_config_write(const drk_search_config_t *c, FILE *o) {
  fprintf(o, "# drkc tune configuration (search/reward.h)\n");
  fprintf(o, "reward.floor = %.17g\nreward.tolerance = %.17g\n", c->floor, c->tolerance);
  fprintf(o, "fallback.drop = %.17g\nfallback.rounds = %d\n", c->fallback_drop, c->fallback_rounds);
  fprintf(o, "tune.batch = %d\ntune.screen = %d\ntune.remeasure = %d\ntune.stable_tol = %.17g\n", c->batch, c->screen,
          c->remeasure, c->stable_tol);
  fprintf(o, "tune.stable_abs_us = %.17g\n", c->stable_abs_us);
  fprintf(o, "ppo.action = %s\nppo.epochs = %d\nppo.batch = %d\nppo.hidden = %d\nppo.horizon = %d\n", c->ppo.action,
          c->ppo.epochs, c->ppo.batch, c->ppo.hidden, c->ppo.horizon);
  fprintf(o, "ppo.rollouts = %d\nppo.iterations = %d\nppo.gamma = %.17g\nppo.lambda = %.17g\nppo.clip = %.17g\n",
          c->ppo.rollouts, c->ppo.iterations, c->ppo.gamma, c->ppo.lambda, c->ppo.clip);
  fprintf(o, "ppo.entropy = %.17g\nppo.value_coef = %.17g\nppo.lr_scale = %.17g\n", c->ppo.entropy, c->ppo.value_coef,
          c->ppo.lr_scale);
  fprintf(o, "evo.population = %d\nevo.tournament = %d\nevo.crossover = %.17g\nevo.mutate2 = %.17g\n",
          c->evo.population, c->evo.tournament, c->evo.crossover, c->evo.mutate2);
  fprintf(o, "cost.hidden = %d\ncost.epochs = %d\ncost.ensemble = %d\ncost.lr = %.17g\n", c->cost.hidden,
          c->cost.epochs, c->cost.ensemble, c->cost.lr);
  for (int i = 0; i < c->n_stages; i++) {
    const drk_search_stage_t *s = &c->stages[i];
    fprintf(o, "\n[%s]\nepochs = %d\nlr = %.17g\nweights = %.17g, %.17g, %.17g, %.17g\n", s->name, s->epochs, s->lr,
            s->w.alpha, s->w.beta, s->w.gamma, s->w.delta);
  }
}

const drk_search_stage_t *drk_search_config_stage(const drk_search_config_t *c, int round, int *out_index) {
  int i = 0;
  long left = round;
  while (i < c->n_stages - 1 && left >= c->stages[i].epochs) left -= c->stages[i++].epochs;
  if (out_index) *out_index = i;
  return &c->stages[i];
}

/* ---- reward ---- */
double drk_search_reward(const drk_search_config_t *c, const drk_search_weights_t *w, const drk_search_metrics_t *ref,
                         const drk_search_metrics_t *m, drk_search_reward_terms_t *terms) {
  drk_search_reward_terms_t t;
  memset(&t, 0, sizeof t);
  if (!m->valid || !(m->time_us > 0) || !isfinite(m->time_us)) {
    t.reward = c->floor;
    if (terms) *terms = t;
    return c->floor;
  }
  double tref = m->ref_time_us > 0 ? m->ref_time_us : ref && ref->time_us > 0 ? ref->time_us : m->time_us;
  t.throughput = tref / m->time_us;
  t.memory_used = ref && ref->mem_bytes > 0 && m->mem_bytes > 0;
  if (t.memory_used) t.memory = ref->mem_bytes / m->mem_bytes;
  t.energy_used = ref && ref->energy_j > 0 && m->energy_j > 0;
  if (t.energy_used) t.energy = ref->energy_j / m->energy_j;
  double tol = m->tolerance > 0 ? m->tolerance : c->tolerance;
  double err = m->error > 0 ? m->error : 0;
  t.fidelity = 1.0 - err / tol;
  if (t.fidelity < 0) t.fidelity = 0;
  if (t.fidelity > 1) t.fidelity = 1;
  t.reward = w->alpha * t.throughput + (t.memory_used ? w->beta * t.memory : 0) +
             (t.energy_used ? w->gamma * t.energy : 0) + w->delta * t.fidelity;
  if (terms) *terms = t;
  return t.reward;
}

/* ---- fallback ---- */
void drk_search_fallback_init(drk_search_fallback_t *f, double drop, int rounds) {
  memset(f, 0, sizeof *f);
  f->drop = drop;
  f->rounds = rounds < 1 ? 1 : rounds;
}

bool drk_search_fallback_round(drk_search_fallback_t *f, double r) {
  if (!f->have_reference) {
    f->reference = r;
    f->have_reference = true;
    return false;
  }
  double scale = fabs(f->reference) > 1e-12 ? fabs(f->reference) : 1e-12;
  if ((f->reference - r) / scale > f->drop + 1e-12) { /* exactly `drop` is not more */
    if (++f->streak >= f->rounds) {
      f->streak = 0;
      f->triggered++;
      return true;
    }
    return false;
  }
  f->streak = 0;
  f->reference = r;
  return false;
}
