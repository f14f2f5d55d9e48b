/* ONNX backend conformance: runs every case under the libonnx-testdata folders through the
 * ONNX importer and the reference interpreter and compares each output with the expected
 * one (exact for integers and bools; floats as numpy.testing.assert_allclose with
 * rtol=1e-3, atol=1e-7, NaNs equal).
 *
 * Usage: drk_conformance [--min-pass=PCT] [--skip=FILE]... [--only=GLOB] DATA_ROOT [SUITE...]
 * Prints `PASS|FAIL|SKIP <suite>/<case> [reason]` per case and a summary line; exits 0 iff
 * at least PCT percent (default 95) of the non-skipped cases pass. Each case runs in a
 * forked child with a time limit, so a crash or hang fails that case only. A case is
 * skipped only when a skip file lists it (fnmatch patterns, one `pattern reason` per line;
 * --skip may be given up to 8 times, the first matching line wins). */
#define _GNU_SOURCE
#include <dirent.h>
#include <fnmatch.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "frontend/onnx/onnx_import.h"
#include "frontend/onnx/tensor_io.h"
#include "ir/interp.h"

typedef struct skip {
  char *pattern, *reason;
} skip_t;

static skip_t *skips;
static size_t n_skips;

static void load_skips(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "cannot open skip file %s\n", path);
    exit(2);
  }
  char line[1024];
  while (fgets(line, sizeof line, f)) {
    char *p = line;
    while (*p == ' ' || *p == '\t') p++;
    if (*p == '#' || *p == '\n' || !*p) continue;
    p[strcspn(p, "\n")] = 0;
    char *sp = p + strcspn(p, " \t");
    char *reason = "";
    if (*sp) {
      *sp = 0;
      reason = sp + 1;
      while (*reason == ' ' || *reason == '\t') reason++;
    }
    if (!*reason) {
      fprintf(stderr, "%s: pattern '%s' has no reason\n", path, p);
      exit(2);
    }
    skips = realloc(skips, sizeof *skips * (n_skips + 1));
    skips[n_skips].pattern = strdup(p);
    skips[n_skips].reason = strdup(reason);
    n_skips++;
  }
  fclose(f);
}

static const char *skip_reason(const char *name) {
  for (size_t i = 0; i < n_skips; i++)
    if (fnmatch(skips[i].pattern, name, 0) == 0) return skips[i].reason;
  return NULL;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorted subdirectory names of dir (malloc'ed). */
static char **list_dir(const char *dir, const char *prefix, size_t *out_n) {
  DIR *d = opendir(dir);
  char **v = NULL;
  size_t n = 0;
  if (d) {
    struct dirent *e;
    while ((e = readdir(d))) {
      if (e->d_name[0] == '.') continue;
      if (prefix && strncmp(e->d_name, prefix, strlen(prefix))) continue;
      v = realloc(v, sizeof *v * (n + 1));
      v[n++] = strdup(e->d_name);
    }
    closedir(d);
  }
  if (n) qsort(v, n, sizeof *v, cmp_str);
  *out_n = n;
  return v;
}

static bool file_exists(const char *p) {
  struct stat st;
  return stat(p, &st) == 0;
}

/* Compares; writes a reason on mismatch. */
static bool compare(const drk_tensor_t *got, const drk_tensor_t *exp, char *why, size_t n) {
  if (got->dtype != exp->dtype) {
    snprintf(why, n, "dtype %s, expected %s", drk_dtype_name(got->dtype), drk_dtype_name(exp->dtype));
    return false;
  }
  bool shape_ok = got->rank == exp->rank;
  for (int i = 0; shape_ok && i < got->rank; i++) shape_ok = got->dims[i] == exp->dims[i];
  if (!shape_ok) {
    char a[200] = "", b[200] = "";
    for (int i = 0; i < got->rank; i++) snprintf(a + strlen(a), sizeof a - strlen(a), "%s%lld", i ? "x" : "", (long long)got->dims[i]);
    for (int i = 0; i < exp->rank; i++) snprintf(b + strlen(b), sizeof b - strlen(b), "%s%lld", i ? "x" : "", (long long)exp->dims[i]);
    snprintf(why, n, "shape [%s], expected [%s]", a, b);
    return false;
  }
  int64_t cnt = drk_tensor_numel(exp), bad = 0, first = -1;
  bool isf = drk_dtype_is_float(exp->dtype);
  for (int64_t i = 0; i < cnt; i++) {
    bool ok;
    if (isf) {
      double g = drk_tensor_get_f64(got, i), e = drk_tensor_get_f64(exp, i);
      if (isnan(e) || isnan(g)) ok = isnan(e) && isnan(g);
      else if (isinf(e) || isinf(g)) ok = g == e;
      else ok = fabs(g - e) <= 1e-7 + 1e-3 * fabs(e);
    } else {
      ok = drk_tensor_get_i64(got, i) == drk_tensor_get_i64(exp, i);
    }
    if (!ok) {
      if (first < 0) first = i;
      bad++;
    }
  }
  if (bad) {
    snprintf(why, n, "%lld of %lld elements differ; first at %lld: got %.9g, expected %.9g", (long long)bad,
             (long long)cnt, (long long)first, drk_tensor_get_f64(got, first), drk_tensor_get_f64(exp, first));
    return false;
  }
  return true;
}

/* Runs one case in this process; returns 0 on pass, writing a reason otherwise. */
static int run_case(const char *dir, char *why, size_t wn) {
  char path[4096];
  snprintf(path, sizeof path, "%s/model.onnx", dir);
  drk_diag_t d;
  drk_diag_init(&d, NULL);
  drk_graph_t *g = drk_onnx_import(path, &d);
  if (!g) {
    snprintf(why, wn, "import: %s", d.first);
    return 1;
  }
  size_t nsets;
  char **sets = list_dir(dir, "test_data_set_", &nsets);
  int rc = 0;
  if (!nsets) {
    snprintf(why, wn, "no test data sets");
    rc = 1;
  }
  for (size_t s = 0; s < nsets && rc == 0; s++) {
    drk_tensor_t *in = calloc(g->n_inputs + 1, sizeof *in);
    drk_tensor_t *out = calloc(g->n_outputs + 1, sizeof *out);
    size_t nin = 0;
    for (;; nin++) {
      snprintf(path, sizeof path, "%s/%s/input_%zu.pb", dir, sets[s], nin);
      if (!file_exists(path)) break;
      if (nin >= g->n_inputs) {
        snprintf(why, wn, "%s: more input files than graph inputs (%zu)", sets[s], g->n_inputs);
        rc = 1;
        break;
      }
      if (!drk_tensor_read_pb_expect(path, nin < g->n_inputs ? g->inputs[nin]->dtype : DRK_DT_COUNT, &in[nin], &d)) {
        snprintf(why, wn, "reading %s: %s", path, d.first);
        rc = 1;
        break;
      }
    }
    if (rc == 0 && nin != g->n_inputs) {
      snprintf(why, wn, "%s: %zu input files, graph has %zu inputs", sets[s], nin, g->n_inputs);
      rc = 1;
    }
    if (rc == 0) {
      if (!drk_interp_run(g, in, out, &d)) {
        snprintf(why, wn, "interp: %s", d.first);
        rc = 1;
      } else {
        for (size_t o = 0; o < g->n_outputs && rc == 0; o++) {
          drk_tensor_t exp;
          snprintf(path, sizeof path, "%s/%s/output_%zu.pb", dir, sets[s], o);
          if (!drk_tensor_read_pb_expect(path, g->outputs[o]->dtype, &exp, &d)) {
            snprintf(why, wn, "reading %s: %s", path, d.first);
            rc = 1;
            break;
          }
          char w[600];
          if (!compare(&out[o], &exp, w, sizeof w)) {
            snprintf(why, wn, "%s output %zu ('%s'): %s", sets[s], o, g->outputs[o]->name, w);
            rc = 1;
          }
          drk_tensor_free(&exp);
        }
        for (size_t o = 0; o < g->n_outputs; o++) drk_tensor_free(&out[o]);
      }
    }
    for (size_t i = 0; i < nin; i++) drk_tensor_free(&in[i]);
    free(in);
    free(out);
  }
  for (size_t s = 0; s < nsets; s++) free(sets[s]);
  free(sets);
  drk_graph_destroy(g);
  return rc;
}

/* Forks a child per case: a crash or a hang fails that case only. */
static int run_isolated(const char *dir, char *why, size_t wn, int timeout_s) {
  int fds[2];
  if (pipe(fds) != 0) return run_case(dir, why, wn);
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return run_case(dir, why, wn);
  }
  if (pid == 0) {
    close(fds[0]);
    alarm((unsigned)timeout_s);
    char w[2048] = "";
    int rc = run_case(dir, w, sizeof w);
    size_t len = strlen(w);
    if (write(fds[1], w, len) < 0) _exit(3);
    _exit(rc ? 1 : 0);
  }
  close(fds[1]);
  size_t got = 0;
  ssize_t r;
  while (got + 1 < wn && (r = read(fds[0], why + got, wn - 1 - got)) > 0) got += (size_t)r;
  why[got] = 0;
  close(fds[0]);
  int st;
  waitpid(pid, &st, 0);
  if (WIFSIGNALED(st)) {
    int sig = WTERMSIG(st);
    snprintf(why, wn, "%s", sig == SIGALRM ? "timed out" : strsignal(sig));
    return 1;
  }
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
  double min_pass = 95;
  const char *skip_files[8], *only = NULL, *root = NULL;
  int n_skip_files = 0;
  const char *suites[16];
  int nsuites = 0, timeout_s = 120;
  for (int i = 1; i < argc; i++) {
    if (!strncmp(argv[i], "--min-pass=", 11)) min_pass = atof(argv[i] + 11);
    else if (!strncmp(argv[i], "--skip=", 7) && n_skip_files < 8) skip_files[n_skip_files++] = argv[i] + 7;
    else if (!strncmp(argv[i], "--only=", 7)) only = argv[i] + 7;
    else if (!strncmp(argv[i], "--timeout=", 10)) timeout_s = atoi(argv[i] + 10);
    else if (!root) root = argv[i];
    else if (nsuites < 16) suites[nsuites++] = argv[i];
  }
  if (!root) {
    fprintf(stderr, "usage: %s [--min-pass=PCT] [--skip=FILE] [--only=GLOB] [--timeout=S] DATA_ROOT [SUITE...]\n", argv[0]);
    return 2;
  }
  if (!file_exists(root)) {
    printf("SKIP: test data folder %s not found (install libonnx-testdata)\n", root);
    return 77;
  }
  for (int i = 0; i < n_skip_files; i++) load_skips(skip_files[i]);
  if (!nsuites) {
    static const char *dflt[] = {"node", "pytorch-converted", "pytorch-operator", "simple"};
    for (int i = 0; i < 4; i++) suites[nsuites++] = dflt[i];
  }
  int pass = 0, fail = 0, skip = 0;
  char **failures = NULL;
  for (int s = 0; s < nsuites; s++) {
    char sdir[4096];
    snprintf(sdir, sizeof sdir, "%s/%s", root, suites[s]);
    size_t n;
    char **cases = list_dir(sdir, NULL, &n);
    for (size_t i = 0; i < n; i++) {
      char name[600], dir[4096 + 300], mpath[8192];
      snprintf(name, sizeof name, "%s/%s", suites[s], cases[i]);
      snprintf(dir, sizeof dir, "%s/%s", sdir, cases[i]);
      snprintf(mpath, sizeof mpath, "%s/model.onnx", dir);
      if (!file_exists(mpath) || (only && fnmatch(only, name, 0))) {
        free(cases[i]);
        continue;
      }
      const char *r = skip_reason(name);
      if (r) {
        printf("SKIP %s %s\n", name, r);
        skip++;
      } else {
        char why[2048];
        if (run_isolated(dir, why, sizeof why, timeout_s) == 0) {
          printf("PASS %s\n", name);
          pass++;
        } else {
          printf("FAIL %s %s\n", name, why);
          failures = realloc(failures, sizeof *failures * (size_t)(fail + 1));
          char *line = malloc(strlen(name) + strlen(why) + 2);
          sprintf(line, "%s %s", name, why);
          failures[fail++] = line;
        }
      }
      fflush(stdout);
      free(cases[i]);
    }
    free(cases);
  }
  if (fail) {
    printf("\nfailures:\n");
    for (int i = 0; i < fail; i++) {
      printf("  %s\n", failures[i]);
      free(failures[i]);
    }
  }
  free(failures);
  double rate = pass + fail ? 100.0 * pass / (pass + fail) : 100.0;
  printf("%d passed, %d failed, %d skipped (%.1f%% of run cases pass; %.1f%% required)\n", pass, fail, skip, rate,
         min_pass);
  for (size_t i = 0; i < n_skips; i++) {
    free(skips[i].pattern);
    free(skips[i].reason);
  }
  free(skips);
  return rate >= min_pass ? 0 : 1;
}
