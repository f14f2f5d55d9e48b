/* Without a CUDA driver every device entry point fails cleanly with DRK_STATUS_NO_DRIVER,
 * naming libcuda.so.1 and the dlerror() text, and drkrun exits 1 with that message.
 * Passes on machines with and without libcuda (a missing library is then simulated).
 * usage: test_nodriver WORKDIR DRKRUN */
#include "tests/runtime/test_util.h"

#include <sys/wait.h>

#include "drk/drkrt.h"

/* Counts allocations so the test can check nothing leaks on the error path. */
static long live;
static void *count_alloc(void *u, size_t n, size_t a) { (void)u; void *p = aligned_alloc(a < 16 ? 16 : a, (n + 255) & ~(size_t)255); if (p) live++; return p; }
static void count_free(void *u, void *p, size_t n) { (void)u, (void)n; if (p) live--; free(p); }

int main(int argc, char **argv) {
  if (argc < 3) { fprintf(stderr, "usage: test_nodriver WORKDIR DRKRUN\n"); return 2; }
  drk_allocator_t al = {count_alloc, count_free, NULL};
  drk_runtime_t *rt = NULL;
  drk_runtime_options_t o = {&al, 0, NULL};
  drk_status_t st = drk_runtime_create(&o, &rt);
  const char *simulated = NULL;
  if (!st || drk_status_code(st) != DRK_STATUS_NO_DRIVER) {
    printf("note: this machine has a CUDA driver (%s); simulating a missing one\n", st ? drk_status_message(st) : "runtime created");
    drk_status_destroy(st);
    drk_runtime_destroy(rt);
    rt = NULL;
    simulated = "/nonexistent/drk-test/libcuda.so.1";
    o.driver_library = simulated;
    st = drk_runtime_create(&o, &rt);
  }
  CHECK(rt == NULL);
  CHECK(drk_status_code(st) == DRK_STATUS_NO_DRIVER);
  printf("status: %s: %s\n", drk_status_code_name(drk_status_code(st)), drk_status_message(st));
  CHECK_CONTAINS(drk_status_message(st), "no CUDA driver");
  CHECK_CONTAINS(drk_status_message(st), "libcuda.so.1");
  CHECK_CONTAINS(drk_status_message(st), "dlopen");
  drk_status_destroy(st);
  CHECK(live == 0);
  /* session calls need a runtime: misuse is an argument error, not a crash */
  drk_session_t *s = NULL;
  st = drk_session_create(NULL, NULL, &s);
  CHECK(drk_status_code(st) == DRK_STATUS_INVALID_ARGUMENT);
  drk_status_destroy(st);
  st = drk_session_run(NULL);
  CHECK(drk_status_code(st) == DRK_STATUS_INVALID_ARGUMENT);
  drk_status_destroy(st);
  CHECK(drk_status_code(NULL) == DRK_STATUS_OK && !strcmp(drk_status_message(NULL), ""));

  /* drkrun: exit 1 with the runtime's message */
  test_module_t t;
  test_module_init(&t, 0, 0);
  char path[4096], cmd[8192], err[256];
  snprintf(path, sizeof path, "%s/nodriver.drkm", argv[1]);
  CHECK(drk_modfile_write_file(&t.m, path, err, sizeof err) == DRK_MODFILE_OK);
  snprintf(cmd, sizeof cmd, "%s%s%s'%s' '%s' > '%s/drkrun.txt' 2>&1", simulated ? "DRK_CUDA_DRIVER='" : "", simulated ? simulated : "", simulated ? "' " : "", argv[2], path, argv[1]);
  int rc = system(cmd);
  CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 1);
  snprintf(path, sizeof path, "%s/drkrun.txt", argv[1]);
  FILE *f = fopen(path, "r");
  char out[4096] = "";
  if (f) { size_t n = fread(out, 1, sizeof out - 1, f); out[n] = 0; fclose(f); }
  printf("drkrun said:\n%s", out);
  CHECK_CONTAINS(out, "drkrun: error: starting the runtime: no CUDA driver: dlopen(");
  CHECK_CONTAINS(out, "libcuda.so.1");
  test_module_fini(&t);
  if (!failures) printf("test_nodriver: ok\n");
  return check_status("test_nodriver");
}
