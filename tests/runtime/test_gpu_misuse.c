/* On a GPU: the runtime under misuse (issue 24, row 7), each case a clear status or the
 * documented behaviour (docs/runtime.md "Threads and misuse"):
 *   1. a module with code for sm_87 only (a real cubin when ptxas is given) on another
 *      device: DRK_STATUS_NO_IMAGE naming sm_87 and the device's sm;
 *   2. an arena larger than the device's free memory: DRK_STATUS_OUT_OF_MEMORY naming the
 *      arena's size, and the runtime still makes and runs a session afterwards;
 *   3. two sessions of one module run from two threads at once, many times, with different
 *      inputs: every output right (each session has its own stream and arena);
 *   4. one session run from two threads at once: the second gets DRK_STATUS_INVALID_ARGUMENT
 *      ("in use by another thread"), never a torn run; outputs of the runs that went through
 *      are right;
 *   5. NULL handles: DRK_STATUS_INVALID_ARGUMENT. (A run after destroy is a use after free,
 *      like free(); docs/runtime.md says so: it cannot be detected safely.)
 * usage: test_gpu_misuse [PTXAS]. Exit 77 without a driver or device. */
#include "tests/runtime/test_util.h"

#include <math.h>
#include <pthread.h>
#include <unistd.h>

#include "drk/drkrt.h"

static int check_out(const float *in, const float *w, const float *out) {
  for (unsigned i = 0; i < TEST_N; i++) {
    float want = (in[i] + w[i]) * TEST_SCALE;
    if (!(fabsf(out[i] - want) <= 1e-5f * fabsf(want) + 1e-6f)) return 0;
  }
  return 1;
}

static drk_module_t *load(test_module_t *t, void **bytes) {
  size_t n = 0;
  char err[256];
  if (drk_modfile_write(&t->m, bytes, &n, err, sizeof err)) { fprintf(stderr, "write: %s\n", err); exit(1); }
  drk_module_t *m = NULL;
  drk_status_t st = drk_module_load_memory(NULL, *bytes, n, &m);
  if (st) { fprintf(stderr, "load: %s\n", drk_status_message(st)); exit(1); }
  return m;
}

/* Expects code and each non-NULL needle in the message. */
static void expect(drk_status_t st, drk_status_code_t code, const char *n1, const char *n2) {
  printf("  -> %s: %s\n", drk_status_code_name(drk_status_code(st)), st ? drk_status_message(st) : "(ok)");
  CHECK(drk_status_code(st) == code);
  if (n1) CHECK_CONTAINS(drk_status_message(st), n1);
  if (n2) CHECK_CONTAINS(drk_status_message(st), n2);
  drk_status_destroy(st);
}

/* A fat binary with one sm_87 cubin: ptxas's when given, else bytes no driver would take
 * (the runtime must refuse before loading anything). */
static void *sm87_fatbin(const char *ptxas, size_t *size) {
  char *ptx = test_ptx("sm_87", "7.4"), dir[] = "/tmp/drk-misuse-XXXXXX", cmd[1024], path[256];
  void *cubin = NULL;
  size_t cn = 0;
  if (ptxas && mkdtemp(dir)) {
    snprintf(path, sizeof path, "%s/k.ptx", dir);
    FILE *f = fopen(path, "w");
    if (f) fputs(ptx, f), fclose(f);
    snprintf(cmd, sizeof cmd, "'%s' -arch=sm_87 '%s/k.ptx' -o '%s/k.cubin'", ptxas, dir, dir);
    snprintf(path, sizeof path, "%s/k.cubin", dir);
    if (system(cmd) == 0 && (f = fopen(path, "rb"))) {
      cubin = malloc(1 << 20);
      cn = fread(cubin, 1, 1 << 20, f);
      fclose(f);
      printf("  (a real sm_87 cubin from %s, %zu bytes)\n", ptxas, cn);
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) {}
  }
  if (!cubin) cubin = strdup("\x7f" "ELF not really a cubin"), cn = strlen(cubin);
  drk_fatbin_image_t fi = {DRK_FATBIN_ELF, 87, false, false, cubin, cn};
  void *fb = NULL;
  char err[256];
  if (drk_fatbin_build(&fi, 1, &fb, size, err, sizeof err)) { fprintf(stderr, "fatbin: %s\n", err); exit(1); }
  free(cubin), free(ptx);
  return fb;
}

typedef struct worker {
  drk_session_t *s;
  const float *w;
  int id, runs, ok, refused;
  char msg[512];
  int run_only; /* only drk_session_run (the bindings are the caller's) */
} worker_t;

/* Runs its session `runs` times with inputs of its own, checking every output. A refusal
 * (another thread holds the session) is counted, not an error. */
static void *work(void *arg) {
  worker_t *k = arg;
  float in[TEST_N], out[TEST_N];
  for (int r = 0; r < k->runs; r++) {
    drk_status_t st = NULL;
    if (!k->run_only) {
      for (unsigned i = 0; i < TEST_N; i++) in[i] = (float)(k->id * 1000 + r) + 0.5f * (float)i, out[i] = NAN;
      st = drk_session_bind_input(k->s, 0, in, sizeof in, DRK_MEMORY_HOST);
      if (!st) st = drk_session_bind_output(k->s, 0, out, sizeof out, DRK_MEMORY_HOST);
    }
    if (!st) st = drk_session_run(k->s);
    if (st) {
      if (drk_status_code(st) == DRK_STATUS_INVALID_ARGUMENT && strstr(drk_status_message(st), "in use by another thread")) {
        k->refused++;
        snprintf(k->msg, sizeof k->msg, "%s", drk_status_message(st));
        drk_status_destroy(st);
        continue;
      }
      snprintf(k->msg, sizeof k->msg, "run %d: %s", r, drk_status_message(st));
      drk_status_destroy(st);
      return NULL;
    }
    if (!k->run_only && !check_out(in, k->w, out)) {
      snprintf(k->msg, sizeof k->msg, "run %d: wrong output", r);
      return NULL;
    }
    k->ok++;
  }
  return NULL;
}

static void run_threads(worker_t *k, int n) {
  pthread_t th[2];
  for (int i = 0; i < n; i++) pthread_create(&th[i], NULL, work, &k[i]);
  for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
}

int main(int argc, char **argv) {
  drk_runtime_t *rt = NULL;
  drk_runtime_options_t o = {NULL, 0, NULL};
  drk_status_t st = drk_runtime_create_driver(&o, DRK_DRIVER_CUDA, NULL, &rt);
  if (st && (drk_status_code(st) == DRK_STATUS_NO_DRIVER || drk_status_code(st) == DRK_STATUS_NO_DEVICE)) {
    printf("SKIP: no GPU: %s\n", drk_status_message(st));
    drk_status_destroy(st);
    return 77;
  }
  if (st) { fprintf(stderr, "runtime: %s\n", drk_status_message(st)); return 1; }
  unsigned sm = drk_runtime_device_sm(rt);
  printf("device: %s\n", drk_runtime_device_name(rt));
  char devarch[32];
  snprintf(devarch, sizeof devarch, "device is sm_%u", sm);

  printf("1. a module for sm_87 only:\n");
  test_module_t t;
  test_module_init(&t, 0, 0);
  size_t fbn = 0;
  void *fb = sm87_fatbin(argc > 1 ? argv[1] : NULL, &fbn), *bytes = NULL;
  drk_modfile_image_t img87 = {DRK_MODFILE_IMAGE_FATBIN, 0, "sm_87", fb, fbn};
  t.m.images = &img87;
  drk_module_t *m = load(&t, &bytes);
  drk_session_t *s = NULL;
  if (sm == 87) {
    printf("  (skipped: the device is sm_87)\n");
  } else {
    expect(drk_session_create(rt, m, &s), DRK_STATUS_NO_IMAGE, "sm_87", devarch);
    CHECK(s == NULL);
  }
  drk_module_destroy(m), free(bytes), free(fb);
  t.m.images = &t.img;

  printf("2. an arena larger than the device's memory (1 TiB):\n");
  uint64_t arena = t.m.arena_size;
  t.m.arena_size = 1ull << 40;
  m = load(&t, &bytes);
  expect(drk_session_create(rt, m, &s), DRK_STATUS_OUT_OF_MEMORY, "1099511627776-byte arena", "cuMemAlloc");
  CHECK(s == NULL);
  drk_module_destroy(m), free(bytes);
  t.m.arena_size = arena;

  printf("   ... the runtime still works:\n");
  m = load(&t, &bytes);
  drk_session_t *s2 = NULL;
  st = drk_session_create(rt, m, &s);
  if (!st) st = drk_session_create(rt, m, &s2);
  if (st) { fprintf(stderr, "session: %s\n", drk_status_message(st)); return 1; }
  worker_t one = {s, t.weights, 0, 3, 0, 0, "", 0};
  work(&one);
  printf("  -> %d/3 runs right %s\n", one.ok, one.msg);
  CHECK(one.ok == 3);

  printf("3. two sessions of one module, two threads at once, 500 runs each:\n");
  worker_t k[2] = {{s, t.weights, 1, 500, 0, 0, "", 0}, {s2, t.weights, 2, 500, 0, 0, "", 0}};
  run_threads(k, 2);
  for (int i = 0; i < 2; i++) {
    printf("  -> thread %d: %d/500 right, %d refused %s\n", i, k[i].ok, k[i].refused, k[i].msg);
    CHECK(k[i].ok == 500 && k[i].refused == 0);
  }

  printf("4. one session, two threads calling run at once, 500 runs each:\n");
  float in[TEST_N], out[TEST_N];
  for (unsigned i = 0; i < TEST_N; i++) in[i] = 0.25f * (float)i - 7.0f, out[i] = NAN;
  st = drk_session_bind_input(s, 0, in, sizeof in, DRK_MEMORY_HOST);
  if (!st) st = drk_session_bind_output(s, 0, out, sizeof out, DRK_MEMORY_HOST);
  if (st) { fprintf(stderr, "bind: %s\n", drk_status_message(st)); return 1; }
  worker_t c[2] = {{s, t.weights, 3, 500, 0, 0, "", 1}, {s, t.weights, 4, 500, 0, 0, "", 1}};
  run_threads(c, 2);
  CHECK(check_out(in, t.weights, out));
  int refused = c[0].refused + c[1].refused;
  for (int i = 0; i < 2; i++) printf("  -> thread %d: %d right, %d refused %s\n", i, c[i].ok, c[i].refused, c[i].msg);
  /* every call either went through (and was right) or was refused with the status */
  CHECK(c[0].ok + c[0].refused == 500 && c[1].ok + c[1].refused == 500);
  printf("  (%d calls refused: the threads overlapped %s)\n", refused, refused ? "and the overlap was caught" : "never this time");

  printf("5. NULL handles:\n");
  expect(drk_session_run(NULL), DRK_STATUS_INVALID_ARGUMENT, "session is NULL", NULL);
  expect(drk_session_bind_input(NULL, 0, NULL, 0, DRK_MEMORY_HOST), DRK_STATUS_INVALID_ARGUMENT, "session is NULL", NULL);
  expect(drk_session_create(NULL, m, &s2), DRK_STATUS_INVALID_ARGUMENT, "NULL argument", NULL);

  drk_session_destroy(s), drk_session_destroy(k[1].s);
  drk_module_destroy(m), free(bytes);
  test_module_fini(&t);
  drk_runtime_destroy(rt);
  if (!failures) printf("test_gpu_misuse: ok\n");
  return check_status("test_gpu_misuse");
}
