/* The reward, the staged configuration (defaults, round trip, errors located at file:line)
 * and the fallback rule (search/reward.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search/reward.h"
#include "tests/common/check.h"

#define NEAR(a, b) (fabs((a) - (b)) < 1e-9)

static drk_search_metrics_t metrics(double t, double mem, double energy, double error) {
  drk_search_metrics_t m = drk_search_metrics_unknown();
  m.valid = true;
  m.time_us = t;
  m.mem_bytes = mem;
  m.energy_j = energy;
  m.error = error;
  return m;
}

static void test_reward(void) {
  drk_search_config_t c;
  drk_search_config_default(&c);
  drk_search_weights_t w = {0.4, 0.3, 0.2, 0.1};
  drk_search_metrics_t ref = metrics(100, 1000, 2.0, 0), m = metrics(50, 500, 1.0, 0.005);
  m.tolerance = 0.01;
  drk_search_reward_terms_t t;
  double r = drk_search_reward(&c, &w, &ref, &m, &t);
  /* 2x faster, half the memory, half the energy, error half the tolerance */
  CHECK(NEAR(t.throughput, 2) && NEAR(t.memory, 2) && NEAR(t.energy, 2) && NEAR(t.fidelity, 0.5));
  CHECK(NEAR(r, 0.4 * 2 + 0.3 * 2 + 0.2 * 2 + 0.1 * 0.5), "r = %g", r);
  CHECK(t.energy_used && t.memory_used);
  /* the heuristic itself scores the weights' sum */
  CHECK(NEAR(drk_search_reward(&c, &w, &ref, &ref, NULL), 1.0));
  /* energy unavailable: gamma = 0, said so */
  drk_search_metrics_t ref_ne = metrics(100, 1000, -1, 0), m_ne = metrics(50, 1000, -1, 0);
  r = drk_search_reward(&c, &w, &ref_ne, &m_ne, &t);
  CHECK(!t.energy_used && t.energy == 0 && NEAR(r, 0.4 * 2 + 0.3 + 0.1), "r = %g", r);
  /* throughput against the reference timed in the same request, when given */
  m_ne.ref_time_us = 75;
  drk_search_reward(&c, &w, &ref_ne, &m_ne, &t);
  CHECK(NEAR(t.throughput, 1.5));
  /* an invalid candidate gets the floor, however fast */
  drk_search_metrics_t bad = metrics(0.001, 1, 0.001, 0);
  bad.valid = false;
  c.floor = -0.5;
  CHECK(drk_search_reward(&c, &w, &ref, &bad, &t) == -0.5 && t.reward == -0.5);
  /* valid without a time: the floor */
  drk_search_metrics_t notime = metrics(-1, 1000, 1, 0);
  CHECK(drk_search_reward(&c, &w, &ref, &notime, NULL) == -0.5);
  /* error beyond the tolerance: fidelity clamps to 0, the config's tolerance when none given */
  drk_search_metrics_t err = metrics(100, 1000, 2, 0.05);
  drk_search_reward(&c, &w, &ref, &err, &t);
  CHECK(t.fidelity == 0);
}

static void test_config_defaults(void) {
  drk_search_config_t c;
  drk_search_config_default(&c);
  CHECK(c.n_stages == 2);
  CHECK(!strcmp(c.stages[0].name, "warmup") && c.stages[0].epochs == 50 && NEAR(c.stages[0].lr, 1e-4));
  CHECK(NEAR(c.stages[0].w.alpha, 0.2) && NEAR(c.stages[0].w.beta, 0.1) && NEAR(c.stages[0].w.gamma, 0.1) &&
        NEAR(c.stages[0].w.delta, 0.6));
  CHECK(!strcmp(c.stages[1].name, "main") && c.stages[1].epochs == 200 && NEAR(c.stages[1].lr, 3e-5));
  CHECK(NEAR(c.stages[1].w.alpha, 0.4) && NEAR(c.stages[1].w.beta, 0.3) && NEAR(c.stages[1].w.gamma, 0.2) &&
        NEAR(c.stages[1].w.delta, 0.1));
  CHECK(NEAR(c.fallback_drop, 0.15) && c.fallback_rounds == 3);
  int i;
  CHECK(drk_search_config_stage(&c, 0, &i) == &c.stages[0] && i == 0);
  CHECK(drk_search_config_stage(&c, 49, &i) == &c.stages[0]);
  CHECK(drk_search_config_stage(&c, 50, &i) == &c.stages[1] && i == 1);
  CHECK(drk_search_config_stage(&c, 100000, &i) == &c.stages[1]);
  /* write -> parse is the same configuration */
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  drk_search_config_write(&c, f);
  fclose(f);
  drk_search_config_t d;
  drk_search_config_default(&d);
  d.batch = 99;
  d.stages[0].epochs = 1;
  char err[600];
  CHECK(drk_search_config_parse(buf, "written.cfg", &d, err, sizeof err), "%s", err);
  CHECK(!memcmp(&c, &d, sizeof c), "the written configuration parses back differently:\n%s", buf);
  free(buf);
}

static void test_config_file(void) {
  const char *text = "# a three-stage schedule\n"
                     "tune.batch = 4\n"
                     "ppo.action = categorical   # one value per knob\n"
                     "fallback.drop = 0.2\n"
                     "\n"
                     "[explore]\n"
                     "epochs = 5\n"
                     "lr = 1e-3\n"
                     "weights = [1, 0, 0, 0]\n"
                     "[balance]\n"
                     "epochs = 10\n"
                     "lr = 5e-4\n"
                     "alpha = 0.5\n"
                     "delta = 0.5\n"
                     "[ exploit ]\n"
                     "epochs = 1\n"
                     "lr = 1e-5\n"
                     "weights = 0.7 0.1 0.1 0.1\n";
  drk_search_config_t c;
  drk_search_config_default(&c);
  char err[600];
  CHECK(drk_search_config_parse(text, "three.cfg", &c, err, sizeof err), "%s", err);
  CHECK(c.n_stages == 3 && c.batch == 4 && !strcmp(c.ppo.action, "categorical") && NEAR(c.fallback_drop, 0.2));
  CHECK(!strcmp(c.stages[2].name, "exploit") && NEAR(c.stages[2].w.alpha, 0.7));
  CHECK(NEAR(c.stages[1].w.alpha, 0.5) && c.stages[1].w.beta == 0 && NEAR(c.stages[1].w.delta, 0.5));
  int i;
  drk_search_config_stage(&c, 5, &i);
  CHECK(i == 1);
  drk_search_config_stage(&c, 15, &i);
  CHECK(i == 2);
  /* a file on disk */
  char path[] = "/tmp/drk_search_cfg_XXXXXX";
  int fd = mkstemp(path);
  FILE *f = fdopen(fd, "w");
  fputs("reward.floor = -1\n[only]\nepochs = 3\nlr = 0.01\nweights = 0.25,0.25,0.25,0.25\n", f);
  fclose(f);
  drk_search_config_default(&c);
  CHECK(drk_search_config_load(path, &c, err, sizeof err), "%s", err);
  CHECK(c.n_stages == 1 && c.floor == -1 && c.stages[0].epochs == 3);
  remove(path);
  CHECK(!drk_search_config_load("/nonexistent/x.cfg", &c, err, sizeof err));
  CHECK_CONTAINS(err, "/nonexistent/x.cfg: error: cannot open");
}

/* Each bad file: the error names the file and the line. */
static void test_config_errors(void) {
  static const struct {
    const char *text, *expect;
  } cases[] = {
      {"tune.batch = 0\n", "bad.cfg:1: error: tune.batch: 0 is outside 1..4096"},
      {"\n\nppo.clip = lots\n", "bad.cfg:3: error: ppo.clip: 'lots' is not a number"},
      {"ppo.bogus = 1\n", "bad.cfg:1: error: unknown setting 'ppo.bogus'"},
      {"epochs = 5\n", "bad.cfg:1: error: 'epochs' belongs in a stage section"},
      {"[w]\nepochs = 5\nlr = 1e-4\nweights = 0.2, 0.1, 0.1\n", "bad.cfg:4: error: weights: 3 numbers"},
      {"[w]\nepochs = 5\nlr = 1e-4\nweights = 0.2, -0.1, 0.1, 1\n", "bad.cfg:4: error: weights: -0.1 is negative"},
      {"[w]\nepochs = 5\nlr = 1e-4\nweights = 0, 0, 0, 0\n", "bad.cfg:4: error: weights: all zero"},
      {"[w]\nepochs = 5\nweights = 1,0,0,0\n[v]\n", "bad.cfg:1: error: stage [w] has no 'lr'"},
      {"[w]\nlr = 1\nweights = 1,0,0,0\n", "bad.cfg:1: error: stage [w] has no 'epochs'"},
      {"[w]\nepochs=1\nlr=1\nweights=1,0,0,0\n[w]\n", "bad.cfg:5: error: stage [w] defined twice"},
      {"[w]\nepochs=1\nepochs=2\n", "bad.cfg:3: error: 'epochs' set twice in stage [w]"},
      {"[w]\nepochs=1\nlr=1\nweights=1,0,0,0\ntune.batch = 3\n", "bad.cfg:5: error: setting 'tune.batch' must come before"},
      {"[w]\nepochs=1\nlr=1\nweights=1,0,0,0\nalpha=1\n", "bad.cfg:5: error: stage [w]: give either weights"},
      {"[w\n", "bad.cfg:1: error: section header '[w' has no ']'"},
      {"just words\n", "bad.cfg:1: error: expected 'key = value' or '[stage]'"},
      {"ppo.action = jump\n", "bad.cfg:1: error: ppo.action: 'jump' is neither step nor categorical"},
      {"[w]\nepochs = 5\nlr = 1\nweights = 1,0,0,0\nspeed = 3\n", "bad.cfg:5: error: unknown key 'speed' in stage [w]"},
      {"[a b]\n", "bad.cfg:1: error: stage name 'a b'"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    drk_search_config_t c, before;
    drk_search_config_default(&c);
    before = c;
    char err[600] = "";
    CHECK(!drk_search_config_parse(cases[i].text, "bad.cfg", &c, err, sizeof err), "case %zu parsed", i);
    CHECK(strstr(err, cases[i].expect) != NULL, "case %zu: expected '%s', got '%s'", i, cases[i].expect, err);
    CHECK(!memcmp(&c, &before, sizeof c), "case %zu: a failed parse changed the configuration", i);
  }
}

static void test_fallback(void) {
  drk_search_fallback_t f;
  drk_search_fallback_init(&f, 0.15, 3);
  /* three drops of more than 15% in a row: the third triggers */
  CHECK(!drk_search_fallback_round(&f, 1.0));
  CHECK(!drk_search_fallback_round(&f, 0.80));
  CHECK(!drk_search_fallback_round(&f, 0.84));
  CHECK(drk_search_fallback_round(&f, 0.70) && f.triggered == 1);
  /* the streak starts over */
  CHECK(!drk_search_fallback_round(&f, 0.7));
  CHECK(!drk_search_fallback_round(&f, 0.7));
  CHECK(drk_search_fallback_round(&f, 0.7) && f.triggered == 2);
  /* drops of 10% never trigger; a recovery breaks the streak */
  drk_search_fallback_init(&f, 0.15, 3);
  double seq[] = {1.0, 0.9, 0.9, 0.9, 0.9, 0.7, 0.7, 0.95, 0.7, 0.7};
  for (size_t i = 0; i < sizeof seq / sizeof seq[0]; i++) CHECK(!drk_search_fallback_round(&f, seq[i]), "round %zu", i);
  CHECK(f.triggered == 0 && NEAR(f.reference, 0.95));
  /* exactly 15% is not more than 15% */
  drk_search_fallback_init(&f, 0.15, 3);
  drk_search_fallback_round(&f, 1.0);
  for (int i = 0; i < 5; i++) CHECK(!drk_search_fallback_round(&f, 0.85));
}

int main(void) {
  test_reward();
  test_config_defaults();
  test_config_file();
  test_config_errors();
  test_fallback();
  return check_status("search.reward");
}
