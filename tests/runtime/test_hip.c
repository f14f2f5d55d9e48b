/* The HIP driver without an AMD GPU: the runtime's error paths (library missing, library
 * that is not HIP, HIP without a device; with DRK_DRIVER_AUTO, one status naming both
 * libcuda and libamdhip64) and, through a fake libamdhip64 built next to this test
 * (tests/runtime/fake_hip.c), the session paths: code object choice by target ID from bare
 * code objects and offload bundles, DRK_STATUS_NO_IMAGE naming the archs present and the
 * device's, NVIDIA-only features refused, launch dimensions, graph capture and replay, the
 * no-graph fallback, profiling, failure cleanup, a module's fallback plan taken where its main
 * plan has no code (DRK_VARIANT), and no leaks (host or "device").
 * usage: test_hip FAKE_HIP_LIBRARY FAKE_HIP_NOGRAPH_LIBRARY */
#include "tests/runtime/test_util.h"

#include <dlfcn.h>

#include "backends/package/bundle.h"
#include "drk/drkrt.h"

static long live;
static void *count_alloc(void *u, size_t n, size_t a) { (void)u; void *p = aligned_alloc(a < 16 ? 16 : a, (n + 255) & ~(size_t)255); if (p) live++; return p; }
static void count_free(void *u, void *p, size_t n) { (void)u, (void)n; if (p) live--; free(p); }
static drk_allocator_t al = {count_alloc, count_free, NULL};

static const char *fake_lib, *fake_nograph_lib;
static const char *const no_cuda = "/nonexistent/drk-test/libcuda.so.1";

typedef void (*stats_fn)(int *, int *, long *, unsigned *, unsigned *, unsigned *, const char **);
typedef struct stats {
  int launches, graph_launches;
  long live;
  unsigned grid[3], block[3], smem;
  const char *image;
} stats_t;

static stats_t stats(const char *lib) {
  stats_t s;
  memset(&s, 0, sizeof s);
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL); /* the same handle the runtime holds */
  stats_fn f = NULL;
  if (h) *(void **)&f = dlsym(h, "fake_hip_stats");
  if (f) f(&s.launches, &s.graph_launches, &s.live, s.grid, s.block, &s.smem, &s.image);
  else fprintf(stderr, "fake_hip_stats not found in %s\n", lib), failures++;
  if (h) dlclose(h);
  return s;
}

static drk_status_t create(drk_driver_kind_t kind, const char *hip_lib, int device, drk_runtime_t **rt) {
  drk_runtime_options_t o = {&al, device, no_cuda};
  return drk_runtime_create_driver(&o, kind, hip_lib, rt);
}

/* Expects failure with `code` and every needle in the message. */
static void expect(drk_status_t st, drk_status_code_t code, const char *n1, const char *n2, const char *n3) {
  printf("  %s: %s\n", drk_status_code_name(drk_status_code(st)), drk_status_message(st));
  CHECK(drk_status_code(st) == code);
  const char *m = drk_status_message(st);
  if (n1) CHECK_CONTAINS(m, n1);
  if (n2) CHECK_CONTAINS(m, n2);
  if (n3) CHECK_CONTAINS(m, n3);
  drk_status_destroy(st);
}

static void runtime_errors(void) {
  drk_runtime_t *rt = NULL;
  printf("HIP library missing:\n");
  expect(create(DRK_DRIVER_HIP, "/nonexistent/drk-test/libamdhip64.so", 0, &rt), DRK_STATUS_NO_DRIVER,
         "no HIP driver: dlopen(\"/nonexistent/drk-test/libamdhip64.so\") failed: ", "No such file", NULL);
  printf("$DRK_HIP_DRIVER names the library:\n");
  setenv("DRK_HIP_DRIVER", "/nonexistent/drk-test/env/libamdhip64.so.6", 1);
  expect(create(DRK_DRIVER_HIP, NULL, 0, &rt), DRK_STATUS_NO_DRIVER, "dlopen(\"/nonexistent/drk-test/env/libamdhip64.so.6\")", NULL, NULL);
  printf("neither driver (auto):\n");
  drk_status_t st = create(DRK_DRIVER_AUTO, NULL, 0, &rt);
  CHECK(!strncmp(drk_status_message(st), "no CUDA driver: dlopen(", 23));
  expect(st, DRK_STATUS_NO_DRIVER, "libcuda.so.1", "; no HIP driver: dlopen(", "libamdhip64.so.6");
  unsetenv("DRK_HIP_DRIVER");
  printf("a library that is not HIP:\n");
  expect(create(DRK_DRIVER_HIP, "libm.so.6", 0, &rt), DRK_STATUS_NO_DRIVER, "libm.so.6 lacks hipInit", NULL, NULL);
  printf("HIP without a GPU (hipInit fails as the real runtime does):\n");
  unsetenv("DRK_FAKE_HIP_DEVICE");
  expect(create(DRK_DRIVER_HIP, fake_lib, 0, &rt), DRK_STATUS_NO_DEVICE, "no AMD GPU: hipInit reports hipErrorInvalidDevice", fake_lib, "/dev/kfd");
  printf("... the same, auto (CUDA missing too):\n");
  expect(create(DRK_DRIVER_AUTO, fake_lib, 0, &rt), DRK_STATUS_NO_DEVICE, "no CUDA driver: dlopen(", "; no AMD GPU: hipInit", NULL);
  printf("HIP with no devices:\n");
  setenv("DRK_FAKE_HIP_DEVICE", "none", 1);
  expect(create(DRK_DRIVER_HIP, fake_lib, 0, &rt), DRK_STATUS_NO_DEVICE, "HIP device 0 requested, 0 present", NULL, NULL);
  printf("device index out of range:\n");
  setenv("DRK_FAKE_HIP_DEVICE", "gfx942:sramecc+:xnack-", 1);
  expect(create(DRK_DRIVER_HIP, fake_lib, 3, &rt), DRK_STATUS_NO_DEVICE, "HIP device 3 requested, 1 present", NULL, NULL);
  expect(create((drk_driver_kind_t)7, NULL, 0, &rt), DRK_STATUS_INVALID_ARGUMENT, "unknown driver kind 7", NULL, NULL);
  CHECK(live == 0);
  CHECK(stats(fake_lib).live == 0);
}

/* Fake code objects: the fake runtime runs the kernels they name. */
static const char co_generic[] = "\x7f" "ELF generic gfx942 code object: vadd vscale";
static const char co_specific[] = "\x7f" "ELF gfx942:sramecc+ code object: vadd vscale";
static const char co_xnack_on[] = "\x7f" "ELF gfx942:xnack+ code object: vadd vscale";
static const char co_gfx90a[] = "\x7f" "ELF gfx90a code object: vadd vscale";

/* Writes t's description (with the given images) and loads it as a module. */
static drk_module_t *module_with(test_module_t *t, const drk_modfile_image_t *imgs, uint32_t n, void **bytes) {
  t->m.images = imgs, t->m.n_images = n;
  size_t nb = 0;
  char err[256];
  drk_module_t *m = NULL;
  if (drk_modfile_write(&t->m, bytes, &nb, err, sizeof err)) { fprintf(stderr, "write: %s\n", err); exit(1); }
  drk_status_t st = drk_module_load_memory(&al, *bytes, nb, &m);
  if (st) { fprintf(stderr, "load: %s\n", drk_status_message(st)); exit(1); }
  return m;
}

/* Expects session creation on rt to fail as described. */
static void expect_session(drk_runtime_t *rt, test_module_t *t, const drk_modfile_image_t *imgs, uint32_t n, drk_status_code_t code,
                           const char *n1, const char *n2, const char *n3) {
  void *bytes = NULL;
  drk_module_t *m = module_with(t, imgs, n, &bytes);
  drk_session_t *s = NULL;
  expect(drk_session_create(rt, m, &s), code, n1, n2, n3);
  CHECK(s == NULL);
  drk_module_destroy(m);
  free(bytes);
}

static int check_out(const float *in, const float *w, const float *out, const char *what) {
  int bad = 0;
  for (unsigned i = 0; i < TEST_N; i++)
    if (out[i] != (in[i] + w[i]) * TEST_SCALE && bad++ < 5) fprintf(stderr, "%s: out[%u] = %g, want %g\n", what, i, out[i], (in[i] + w[i]) * TEST_SCALE);
  return bad == 0;
}

/* Creates a session from the given images and runs it twice (graph), then profiled. */
static void run_module(drk_runtime_t *rt, const char *lib, test_module_t *t, const drk_modfile_image_t *imgs, uint32_t n, int graphs,
                       const char *want_image) {
  void *bytes = NULL;
  drk_module_t *m = module_with(t, imgs, n, &bytes);
  drk_session_t *s = NULL;
  drk_status_t st = drk_session_create(rt, m, &s);
  if (st) fprintf(stderr, "session: %s\n", drk_status_message(st)), failures++, drk_status_destroy(st);
  if (s) {
    stats_t before = stats(lib);
    CHECK(!strcmp(before.image, want_image));
    if (strcmp(before.image, want_image)) fprintf(stderr, "  loaded '%s', want '%s'\n", before.image, want_image);
    float in[TEST_N], out[TEST_N], out2[TEST_N];
    for (unsigned i = 0; i < TEST_N; i++) in[i] = (float)i * 0.25f - 3, out[i] = out2[i] = -1;
    CHECK(!drk_session_bind_input(s, 0, in, sizeof in, DRK_MEMORY_HOST));
    CHECK(!drk_session_bind_output(s, 0, out, sizeof out, DRK_MEMORY_HOST));
    CHECK(!drk_session_run(s));
    CHECK(check_out(in, t->weights, out, "host-bound run"));
    for (unsigned i = 0; i < TEST_N; i++) in[i] = (float)i;
    /* the fake's device memory is host memory, so a host buffer stands in for a hipMalloc one */
    CHECK(!drk_session_bind_input(s, 0, in, sizeof in, DRK_MEMORY_DEVICE));
    CHECK(!drk_session_bind_output(s, 0, out2, sizeof out2, DRK_MEMORY_DEVICE));
    CHECK(!drk_session_run(s));
    CHECK(check_out(in, t->weights, out2, "device-bound run"));
    stats_t after = stats(lib);
    CHECK(after.launches - before.launches == 4);
    CHECK(after.graph_launches - before.graph_launches == (graphs ? 2 : 0));
    CHECK(after.grid[0] == (TEST_N + 127) / 128 && after.grid[1] == 1 && after.grid[2] == 1);
    CHECK(after.block[0] == 128 && after.block[1] == 1 && after.block[2] == 1);
    CHECK(after.smem == t->k[1].dyn_smem);
    float ms[2] = {0}, total = 0;
    drk_status_t early = drk_session_kernel_times(s, ms, 2);
    CHECK(drk_status_code(early) == DRK_STATUS_INVALID_ARGUMENT); /* no profiled run yet */
    drk_status_destroy(early);
    CHECK(!drk_session_set_profiling(s, 1));
    CHECK(!drk_session_run(s));
    CHECK(!drk_session_kernel_times(s, ms, 2));
    CHECK(!drk_session_last_run_ms(s, &total));
    printf("  profiled: %.2f + %.2f ms of %.2f ms\n", ms[0], ms[1], total);
    CHECK(ms[0] == 0.25f && ms[1] == 0.25f && total > ms[0] + ms[1]);
    CHECK(stats(lib).graph_launches == after.graph_launches); /* profiled runs launch one by one */
    /* unbound tensors stay in the arena: the output buffer is not written, the input kept */
    CHECK(!drk_session_set_profiling(s, 0));
    CHECK(!drk_session_bind_input(s, 0, NULL, 0, DRK_MEMORY_HOST));
    CHECK(!drk_session_bind_output(s, 0, NULL, 0, DRK_MEMORY_HOST));
    for (unsigned i = 0; i < TEST_N; i++) out2[i] = -7;
    CHECK(!drk_session_run(s));
    CHECK(out2[0] == -7 && out2[TEST_N - 1] == -7);
    CHECK(!drk_session_bind_output(s, 0, out2, sizeof out2, DRK_MEMORY_HOST));
    CHECK(!drk_session_run(s));
    CHECK(check_out(in, t->weights, out2, "run after unbinding the input"));
    drk_status_t bad = drk_session_bind_input(s, 0, NULL, 4, DRK_MEMORY_HOST);
    CHECK(drk_status_code(bad) == DRK_STATUS_INVALID_ARGUMENT);
    drk_status_destroy(bad);
  }
  drk_session_destroy(s);
  drk_module_destroy(m);
  free(bytes);
}

static void *bundle(const drk_bundle_entry_t *e, size_t n, size_t *size) {
  void *b = NULL;
  char err[256];
  if (drk_bundle_build(e, n, DRK_BUNDLE_ALIGN_HIP, &b, size, err, sizeof err)) { fprintf(stderr, "bundle: %s\n", err); exit(1); }
  return b;
}

static void sessions(const char *lib, int graphs) {
  setenv("DRK_FAKE_HIP_DEVICE", "gfx942:sramecc+:xnack-", 1);
  drk_runtime_t *rt = NULL;
  drk_status_t st = create(DRK_DRIVER_AUTO, lib, 0, &rt); /* CUDA is missing: auto picks HIP */
  if (st) { fprintf(stderr, "runtime: %s\n", drk_status_message(st)); drk_status_destroy(st); failures++; return; }
  printf("runtime: %s driver, %s\n", drk_runtime_driver_name(rt), drk_runtime_device_name(rt));
  CHECK(!strcmp(drk_runtime_driver_name(rt), "HIP"));
  CHECK(!strcmp(drk_runtime_device_arch(rt), "gfx942:sramecc+:xnack-"));
  CHECK(drk_runtime_device_sm(rt) == 0);
  CHECK(!strcmp(drk_runtime_device_name(rt), "Fake AMD GPU (gfx942:sramecc+:xnack-, 192.0 GiB, HIP 6.2)"));

  test_module_t t;
  test_module_init(&t, 0, 0);
  drk_modfile_image_t fat = t.img; /* NVIDIA PTX fat binary, slot 0 */
  size_t b1n = 0, b2n = 0;
  drk_bundle_entry_t e1[] = {{DRK_BUNDLE_HOST_X86_64, 0, NULL, 0},
                             {"hipv4-amdgcn-amd-amdhsa--gfx90a", 0, co_gfx90a, sizeof co_gfx90a},
                             {"hipv4-amdgcn-amd-amdhsa--gfx942:xnack+", 0, co_xnack_on, sizeof co_xnack_on},
                             {"hipv4-amdgcn-amd-amdhsa--gfx942", 0, co_generic, sizeof co_generic}};
  void *b1 = bundle(e1, 4, &b1n);
  void *b2 = bundle(e1, 3, &b2n); /* nothing for gfx942:xnack- */

  printf("NVIDIA code only:\n");
  expect_session(rt, &t, &fat, 1, DRK_STATUS_NO_IMAGE, "no code for the device in slot 0: module has NVIDIA code for compute_80",
                 "device is gfx942:sramecc+:xnack-", "recompile with --target=gfx942");
  printf("AMD code for other targets:\n");
  drk_modfile_image_t other[] = {{DRK_MODFILE_IMAGE_HSACO, 0, "gfx90a", co_gfx90a, sizeof co_gfx90a}, {DRK_MODFILE_IMAGE_OFFLOAD_BUNDLE, 0, "gfx90a,gfx942:xnack+", b2, b2n}};
  expect_session(rt, &t, other, 2, DRK_STATUS_NO_IMAGE, "module has gfx90a code object, gfx90a (offload bundle), gfx942:xnack+ (offload bundle)",
                 "device is gfx942:sramecc+:xnack-", NULL);
  printf("corrupt offload bundle:\n");
  drk_modfile_image_t corrupt = {DRK_MODFILE_IMAGE_OFFLOAD_BUNDLE, 0, "gfx942", b1, 40};
  expect_session(rt, &t, &corrupt, 1, DRK_STATUS_BAD_MODULE, "image 0 (offload bundle)", NULL, NULL);

  printf("fat binary + bundle (gfx942 entry after gfx90a and gfx942:xnack+):\n");
  drk_modfile_image_t both[] = {fat, {DRK_MODFILE_IMAGE_OFFLOAD_BUNDLE, 0, "gfx90a,gfx942:xnack+,gfx942", b1, b1n}};
  run_module(rt, lib, &t, both, 2, graphs, co_generic + 4);
  printf("most specific code object wins (gfx942:sramecc+ over the bundle's gfx942):\n");
  drk_modfile_image_t spec[] = {both[1], {DRK_MODFILE_IMAGE_HSACO, 0, "gfx942:sramecc+", co_specific, sizeof co_specific}};
  run_module(rt, lib, &t, spec, 2, graphs, co_specific + 4);
  printf("bare code object:\n");
  drk_modfile_image_t bare = {DRK_MODFILE_IMAGE_HSACO, 0, "gfx942", co_generic, sizeof co_generic};
  run_module(rt, lib, &t, &bare, 1, graphs, co_generic + 4);

  printf("a fallback plan (module.h's FALLBACK) where the main plan has no code for the device:\n");
  {
    drk_modfile_t fm = t.m; /* the fallback: the same kernels, AMD code, the parent's weights */
    fm.images = &bare, fm.n_images = 1, fm.prov.targets = "gfx942";
    fm.weights = NULL, fm.weights_size = 0, fm.weight_entries = NULL, fm.n_weight_entries = 0;
    void *fb = NULL, *mb = NULL;
    size_t nfb = 0;
    char err[256];
    CHECK(drk_modfile_write(&fm, &fb, &nfb, err, sizeof err) == DRK_MODFILE_OK);
    t.m.fallback = fb, t.m.fallback_size = nfb, t.m.fallback_shares_weights = true;
    drk_module_t *m = module_with(&t, &fat, 1, &mb);
    drk_session_t *s = NULL;
    drk_status_t fst = drk_session_create(rt, m, &s);
    if (fst) fprintf(stderr, "fallback session: %s\n", drk_status_message(fst)), failures++, drk_status_destroy(fst);
    if (s) {
      CHECK(!strcmp(drk_session_targets(s), "gfx942") && strcmp(drk_module_targets(m), "gfx942") != 0);
      CHECK(drk_session_num_kernels(s) == 2 && !strcmp(drk_session_kernel_name(s, 1), "vscale"));
      float in[TEST_N], out[TEST_N];
      for (unsigned i = 0; i < TEST_N; i++) in[i] = (float)i * 0.5f - 1, out[i] = -1;
      CHECK(!drk_session_bind_input(s, 0, in, sizeof in, DRK_MEMORY_HOST));
      CHECK(!drk_session_bind_output(s, 0, out, sizeof out, DRK_MEMORY_HOST));
      CHECK(!drk_session_run(s));
      CHECK(check_out(in, t.weights, out, "the fallback plan's run"));
    }
    drk_session_destroy(s);
    s = NULL;
    setenv("DRK_VARIANT", "main", 1);
    expect(drk_session_create(rt, m, &s), DRK_STATUS_NO_IMAGE, "no code for the device in slot 0", NULL, NULL);
    setenv("DRK_VARIANT", "other", 1);
    expect(drk_session_create(rt, m, &s), DRK_STATUS_INVALID_ARGUMENT, "DRK_VARIANT=other: expected main or fallback", NULL, NULL);
    unsetenv("DRK_VARIANT");
    drk_module_destroy(m);
    free(mb), free(fb);
    /* neither plan has code for the device: one status naming both */
    fm.images = &fat;
    CHECK(drk_modfile_write(&fm, &fb, &nfb, err, sizeof err) == DRK_MODFILE_OK);
    t.m.fallback = fb, t.m.fallback_size = nfb;
    expect_session(rt, &t, &fat, 1, DRK_STATUS_NO_IMAGE, "no code for the device in slot 0", "its fallback plan (targets gfx942)", NULL);
    free(fb);
    t.m.fallback = NULL, t.m.fallback_size = 0, t.m.fallback_shares_weights = false;
  }

  printf("kernel missing from the code object:\n");
  t.k[1].name = "vmissing";
  expect_session(rt, &t, &bare, 1, DRK_STATUS_DRIVER, "kernel 1 ('vmissing')", "hipModuleGetFunction: hipErrorNotFound (named symbol not found)", NULL);
  t.k[1].name = "vscale";
  printf("TMA descriptor:\n");
  t.p[1][0] = (drk_modfile_param_t){DRK_MODFILE_PARAM_TMA, 0, 0, 0, {0}, 0};
  t.m.tmas = &t.tma, t.m.n_tmas = 1;
  expect_session(rt, &t, &bare, 1, DRK_STATUS_NO_IMAGE, "kernel 1 ('vscale') takes a TMA descriptor", "recompile for gfx942:sramecc+:xnack-", NULL);
  t.p[1][0] = t.p[0][2];
  t.m.tmas = NULL, t.m.n_tmas = 0;
  printf("cluster launch:\n");
  test_module_fini(&t);
  test_module_init(&t, 2, 0);
  expect_session(rt, &t, &bare, 1, DRK_STATUS_NO_IMAGE, "kernel 0 ('vadd') needs a thread-block cluster launch", NULL, NULL);
  test_module_fini(&t);
  test_module_init(&t, 0, 0);
  printf("arena allocation fails:\n");
  /* each session has a stream of its own (sessions may run from several threads) */
  setenv("DRK_FAKE_HIP_FAIL", "hipStreamCreateWithFlags", 1);
  expect_session(rt, &t, &bare, 1, DRK_STATUS_OUT_OF_MEMORY, "session on Fake AMD GPU", "hipStreamCreateWithFlags: hipErrorOutOfMemory", NULL);
  setenv("DRK_FAKE_HIP_FAIL", "hipMalloc", 1);
  expect_session(rt, &t, &bare, 1, DRK_STATUS_OUT_OF_MEMORY, "session on Fake AMD GPU", "hipMalloc (arena): hipErrorOutOfMemory", "the module plans one");
  printf("graph instantiation fails (%s):\n", graphs ? "graphs" : "no graphs: not reached");
  setenv("DRK_FAKE_HIP_FAIL", "hipGraphInstantiateWithFlags", 1);
  if (graphs) expect_session(rt, &t, &bare, 1, DRK_STATUS_OUT_OF_MEMORY, "hipGraphInstantiateWithFlags", NULL, NULL);
  else run_module(rt, lib, &t, &bare, 1, graphs, co_generic + 4);
  unsetenv("DRK_FAKE_HIP_FAIL");
  drk_runtime_destroy(rt);

  printf("old hipDeviceProp_t layout (R0600 entry fails):\n");
  setenv("DRK_FAKE_HIP_PROPS", "r0000", 1);
  rt = NULL;
  if ((st = create(DRK_DRIVER_HIP, lib, 0, &rt))) fprintf(stderr, "runtime: %s\n", drk_status_message(st)), drk_status_destroy(st), failures++;
  CHECK(rt && !strcmp(drk_runtime_device_arch(rt), "gfx942:sramecc+:xnack-"));
  drk_runtime_destroy(rt);
  unsetenv("DRK_FAKE_HIP_PROPS");

  free(b1);
  free(b2);
  test_module_fini(&t);
  CHECK(live == 0);
  stats_t end = stats(lib);
  CHECK(end.live == 0);
  if (end.live) fprintf(stderr, "fake HIP objects left: %ld\n", end.live);
}

/* The HIP runtime installed on this machine, if any: it must have every entry point the
 * driver needs; without an AMD GPU it reports no device. */
static void installed_runtime(void) {
  printf("the installed HIP runtime (libamdhip64.so, .so.6, .so.5), if any:\n");
  unsetenv("DRK_HIP_DRIVER");
  drk_runtime_t *rt = NULL;
  drk_status_t st = create(DRK_DRIVER_HIP, NULL, 0, &rt);
  if (!st) {
    printf("  an AMD GPU: %s\n", drk_runtime_device_name(rt));
    CHECK(!strncmp(drk_runtime_device_arch(rt), "gfx", 3));
    drk_runtime_destroy(rt);
    return;
  }
  printf("  %s: %s\n", drk_status_code_name(drk_status_code(st)), drk_status_message(st));
  CHECK(drk_status_code(st) == DRK_STATUS_NO_DRIVER || drk_status_code(st) == DRK_STATUS_NO_DEVICE);
  CHECK(!strstr(drk_status_message(st), " lacks "));
  drk_status_destroy(st);
  CHECK(live == 0);
}

int main(int argc, char **argv) {
  if (argc < 3) { fprintf(stderr, "usage: test_hip FAKE_HIP_LIBRARY FAKE_HIP_NOGRAPH_LIBRARY\n"); return 2; }
  fake_lib = argv[1], fake_nograph_lib = argv[2];
  unsetenv("DRK_FAKE_HIP_FAIL");
  unsetenv("DRK_FAKE_HIP_PROPS");
  runtime_errors();
  installed_runtime();
  printf("== HIP runtime with stream capture\n");
  sessions(fake_lib, 1);
  printf("== HIP runtime without stream capture\n");
  sessions(fake_nograph_lib, 0);
  if (!failures) printf("test_hip: ok\n");
  return check_status("test_hip");
}
