/* Tile IR -> NVPTX lowering tests.
 *
 *   test_nvptx_lower ptx DIR          every positive .drkt of DIR plus the built-in op kernels below:
 *                               lower + PTX for sm_80, sm_87, sm_90a; prints what lowers
 *   test_nvptx_lower ptxas DIR PTXAS  the same, then ptxas each PTX (77 without ptxas)
 *   test_nvptx_lower gpu DIR          runs vec_add, softmax, gemm_sm80 and op kernels on the GPU
 *                               (CUDA driver via dlopen) against the CPU (77 without a GPU)
 * Expected to lower on every arch: vec_add, softmax, gemm_sm80 and all built-in kernels;
 * gemm_sm90_ws is counted (it needs TMA/wgmma lowering) but not required. */
#include <dirent.h>
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/nvptx/nvptx.h"
#include "ir/tensor.h"
#include "ir/tile.h"
#include "tests/common/check.h"

/* Built-in kernels covering ops/dtypes/layouts the example files do not. */
static const char *const builtin_src =
    "#b1 = blocked{spt = [4], tpw = [32], wpc = [4], order = [0]}\n"
    "#b2 = blocked{spt = [1, 4], tpw = [4, 8], wpc = [2, 2], order = [1, 0]}\n"
    "#b2r = slice{parent = #b2, dim = 1}\n"
    "#b2c = slice{parent = #b2, dim = 0}\n"
    "#b2t = blocked{spt = [2, 1], tpw = [8, 4], wpc = [1, 4], order = [0, 1]}\n"
    "#b2tr = slice{parent = #b2t, dim = 1}\n"
    "#b2tc = slice{parent = #b2t, dim = 0}\n"
    "#fa = dot_op{parent = #b2, op_idx = 0, k_width = 1}\n"
    "#fb = dot_op{parent = #b2, op_idx = 1, k_width = 1}\n"
    "#sh = shared{swizzle = 0, order = [1, 0]}\n"
    /* unary math on f32, in place: y[i] = f(x[i]) for op selected by the kernel name */
    "kernel @ew_f32(%x: ptr<f32> {align = 16}, %y: ptr<f32> {align = 16}, %n: i32) grid(cdiv(%n, 512), 1, 1) block(128) smem(0) {\n"
    "  %pid = program_id {axis = 0} : i32\n"
    "  %c = constant {value = 512} : i32\n"
    "  %b = mul %pid, %c : i32\n"
    "  %r = make_range {start = 0, end = 512} : tile<512xi32, #b1>\n"
    "  %bs = splat %b : tile<512xi32, #b1>\n"
    "  %o = add %bs, %r : tile<512xi32, #b1>\n"
    "  %ns = splat %n : tile<512xi32, #b1>\n"
    "  %m = cmp %o, %ns {pred = lt} : tile<512xbool, #b1>\n"
    "  %xs = splat %x : tile<512xptr<f32>, #b1>\n"
    "  %xp = addptr %xs, %o : tile<512xptr<f32>, #b1>\n"
    "  %v = load %xp, %m : tile<512xf32, #b1>\n"
    "  %e = exp %v : tile<512xf32, #b1>\n"
    "  %t = tanh %v : tile<512xf32, #b1>\n"
    "  %f = erf %v : tile<512xf32, #b1>\n"
    "  %a = abs %v : tile<512xf32, #b1>\n"
    "  %one = constant {value = 1.0} : tile<512xf32, #b1>\n"
    "  %a1 = add %a, %one : tile<512xf32, #b1>\n"
    "  %l = log %a1 : tile<512xf32, #b1>\n"
    "  %s = sqrt %a1 : tile<512xf32, #b1>\n"
    "  %rs = rsqrt %a1 : tile<512xf32, #b1>\n"
    "  %e2 = exp2 %v : tile<512xf32, #b1>\n"
    "  %s1 = add %e, %t : tile<512xf32, #b1>\n"
    "  %s2 = add %s1, %f : tile<512xf32, #b1>\n"
    "  %s3 = add %s2, %l : tile<512xf32, #b1>\n"
    "  %s4 = add %s3, %s : tile<512xf32, #b1>\n"
    "  %s5 = add %s4, %rs : tile<512xf32, #b1>\n"
    "  %s6 = add %s5, %e2 : tile<512xf32, #b1>\n"
    "  %ys = splat %y : tile<512xptr<f32>, #b1>\n"
    "  %yp = addptr %ys, %o : tile<512xptr<f32>, #b1>\n"
    "  store %yp, %s6, %m\n"
    "  return\n"
    "}\n"
    /* integer and narrow-float arithmetic, compares, selects, casts */
    "kernel @ew_types(%x: ptr<i32> {align = 16}, %h: ptr<f16> {align = 16}, %bh: ptr<bf16>, %q: ptr<f8e4m3>, %q5: ptr<f8e5m2>, %u: ptr<u8>, %l: ptr<i64>, %d: ptr<f64>, %s16: ptr<i16>, %bo: ptr<bool>) grid(1, 1, 1) block(128) smem(0) {\n"
    "  %r = make_range {start = 0, end = 512} : tile<512xi32, #b1>\n"
    "  %xs = splat %x : tile<512xptr<i32>, #b1>\n"
    "  %xp = addptr %xs, %r : tile<512xptr<i32>, #b1>\n"
    "  %v = load %xp : tile<512xi32, #b1>\n"
    "  %c3 = constant {value = 3} : tile<512xi32, #b1>\n"
    "  %dv = div %v, %c3 : tile<512xi32, #b1>\n"
    "  %rm = rem %v, %c3 : tile<512xi32, #b1>\n"
    "  %mx = max %dv, %rm : tile<512xi32, #b1>\n"
    "  %mn = min %dv, %rm : tile<512xi32, #b1>\n"
    "  %an = and %mx, %mn : tile<512xi32, #b1>\n"
    "  %ng = neg %an : tile<512xi32, #b1>\n"
    "  %ab = abs %ng : tile<512xi32, #b1>\n"
    "  %ge = cmp %ab, %c3 {pred = ge} : tile<512xbool, #b1>\n"
    "  %sel = select %ge, %ab, %v : tile<512xi32, #b1>\n"
    "  %hf = cast %sel : tile<512xf16, #b1>\n"
    "  %hs = splat %h : tile<512xptr<f16>, #b1>\n"
    "  %hp = addptr %hs, %r : tile<512xptr<f16>, #b1>\n"
    "  %h0 = load %hp : tile<512xf16, #b1>\n"
    "  %h1 = mul %h0, %hf : tile<512xf16, #b1>\n"
    "  %h2 = div %h1, %hf : tile<512xf16, #b1>\n"
    "  store %hp, %h2\n"
    "  %bf = cast %h2 : tile<512xbf16, #b1>\n"
    "  %bfe = exp %bf : tile<512xbf16, #b1>\n"
    "  %bs = splat %bh : tile<512xptr<bf16>, #b1>\n"
    "  %bp = addptr %bs, %r : tile<512xptr<bf16>, #b1>\n"
    "  store %bp, %bfe\n"
    "  %f = cast %h2 : tile<512xf32, #b1>\n"
    "  %q8 = cast %f {rounding = rn} : tile<512xf8e4m3, #b1>\n"
    "  %qs = splat %q : tile<512xptr<f8e4m3>, #b1>\n"
    "  %qp = addptr %qs, %r : tile<512xptr<f8e4m3>, #b1>\n"
    "  store %qp, %q8\n"
    "  %q5v = cast %q8 : tile<512xf8e5m2, #b1>\n"
    "  %q5s = splat %q5 : tile<512xptr<f8e5m2>, #b1>\n"
    "  %q5p = addptr %q5s, %r : tile<512xptr<f8e5m2>, #b1>\n"
    "  store %q5p, %q5v\n"
    "  %uv = cast %f : tile<512xu8, #b1>\n"
    "  %u2 = add %uv, %uv : tile<512xu8, #b1>\n"
    "  %us = splat %u : tile<512xptr<u8>, #b1>\n"
    "  %up = addptr %us, %r : tile<512xptr<u8>, #b1>\n"
    "  store %up, %u2\n"
    "  %lv = cast %u2 : tile<512xi64, #b1>\n"
    "  %ls = splat %l : tile<512xptr<i64>, #b1>\n"
    "  %lp = addptr %ls, %r : tile<512xptr<i64>, #b1>\n"
    "  %lo = load %lp : tile<512xi64, #b1>\n"
    "  %l2 = mul %lv, %lo : tile<512xi64, #b1>\n"
    "  store %lp, %l2\n"
    "  %dvv = cast %l2 : tile<512xf64, #b1>\n"
    "  %dd = sqrt %dvv : tile<512xf64, #b1>\n"
    "  %de = exp %dd : tile<512xf64, #b1>\n"
    "  %ds = splat %d : tile<512xptr<f64>, #b1>\n"
    "  %dp = addptr %ds, %r : tile<512xptr<f64>, #b1>\n"
    "  store %dp, %de\n"
    "  %nan = cmp %de, %de {pred = ne} : tile<512xbool, #b1>\n"
    "  %bos = splat %bo : tile<512xptr<bool>, #b1>\n"
    "  %bop = addptr %bos, %r : tile<512xptr<bool>, #b1>\n"
    "  %bl = load %bop : tile<512xbool, #b1>\n"
    "  %bor = or %bl, %nan : tile<512xbool, #b1>\n"
    "  store %bop, %bor\n"
    "  %sv = cast %dd : tile<512xi16, #b1>\n"
    "  %s16s = splat %s16 : tile<512xptr<i16>, #b1>\n"
    "  %s16p = addptr %s16s, %r : tile<512xptr<i16>, #b1>\n"
    "  store %s16p, %sv\n"
    "  return\n"
    "}\n"
    /* column sums of a 64x64 f32 matrix (cross-warp reduction), row max in i32,
     * scalar sum, a loop with carried tiles, if/else, convert_layout, fma dot */
    "kernel @red2d(%x: ptr<f32> {align = 16}, %cs: ptr<f32>, %rm: ptr<i32>, %tot: ptr<f32>, %mm: ptr<f32> {align = 16}, %n: i32) grid(1, 1, 1) block(128) smem(0) {\n"
    "  %ri = make_range {start = 0, end = 64} : tile<64xi32, #b2r>\n"
    "  %c64 = constant {value = 64} : tile<64xi32, #b2r>\n"
    "  %ro = mul %ri, %c64 : tile<64xi32, #b2r>\n"
    "  %ro2 = expand_dims %ro {axis = 1} : tile<64x1xi32, #b2>\n"
    "  %rob = broadcast %ro2 : tile<64x64xi32, #b2>\n"
    "  %ci = make_range {start = 0, end = 64} : tile<64xi32, #b2c>\n"
    "  %ci2 = expand_dims %ci {axis = 0} : tile<1x64xi32, #b2>\n"
    "  %cib = broadcast %ci2 : tile<64x64xi32, #b2>\n"
    "  %off = add %rob, %cib : tile<64x64xi32, #b2>\n"
    "  %xs = splat %x : tile<64x64xptr<f32>, #b2>\n"
    "  %xp = addptr %xs, %off : tile<64x64xptr<f32>, #b2>\n"
    "  %v = load %xp : tile<64x64xf32, #b2>\n"
    "  %c0 = constant {value = 0} : i32\n"
    "  %c1 = constant {value = 1} : i32\n"
    "  %z = constant {value = 0.0} : tile<64x64xf32, #b2>\n"
    "  %acc = for %c0, %n, %c1, %z : tile<64x64xf32, #b2> (%i: i32, %a: tile<64x64xf32, #b2>) {\n"
    "    %a2 = add %a, %v : tile<64x64xf32, #b2>\n"
    "    yield %a2\n"
    "  }\n"
    "  %col = reduce %acc {axis = 0, combiner = sum} : tile<64xf32, #b2c>\n"
    "  %css = splat %cs : tile<64xptr<f32>, #b2c>\n"
    "  %csp = addptr %css, %ci : tile<64xptr<f32>, #b2c>\n"
    "  store %csp, %col\n"
    "  %vi = cast %v : tile<64x64xi32, #b2>\n"
    "  %row = reduce %vi {axis = 1, combiner = max} : tile<64xi32, #b2r>\n"
    "  %rms = splat %rm : tile<64xptr<i32>, #b2r>\n"
    "  %rmp = addptr %rms, %ri : tile<64xptr<i32>, #b2r>\n"
    "  store %rmp, %row\n"
    "  %t = reduce %col {axis = 0, combiner = sum} : f32\n"
    "  %pos = cmp %n, %c0 {pred = gt} : bool\n"
    "  %t2 = if %pos : f32 {\n"
    "    yield %t\n"
    "  } {\n"
    "    %zz = constant {value = 0.0} : f32\n"
    "    yield %zz\n"
    "  }\n"
    "  store %tot, %t2\n"
    "  %vt = convert_layout %v : tile<64x64xf32, #b2t>\n"
    "  %mn = reduce %vt {axis = 1, combiner = min} : tile<64xf32, #b2tr>\n"
    "  %mnc = convert_layout %mn : tile<64xf32, #b2r>\n"
    "  %mnp = addptr %css, %ci : tile<64xptr<f32>, #b2c>\n"
    "  %fa = convert_layout %v : tile<64x64xf32, #fa>\n"
    "  %fb = convert_layout %v : tile<64x64xf32, #fb>\n"
    "  %d = dot %fa, %fb, %z {kind = fma} : tile<64x64xf32, #b2>\n"
    "  %mms = splat %mm : tile<64x64xptr<f32>, #b2>\n"
    "  %mmp = addptr %mms, %off : tile<64x64xptr<f32>, #b2>\n"
    "  %mnc2 = expand_dims %mnc {axis = 1} : tile<64x1xf32, #b2>\n"
    "  %mncb = broadcast %mnc2 : tile<64x64xf32, #b2>\n"
    "  %d2 = add %d, %mncb : tile<64x64xf32, #b2>\n"
    "  store %mmp, %d2\n"
    "  return\n"
    "}\n";

static const char *const archs[] = {"sm_80", "sm_87", "sm_90a"};

typedef struct {
  const char *name;
  char *text;
  size_t len;
} src_t;

static int load_sources(const char *dir, src_t *out, int max) {
  int n = 0;
  out[n++] = (src_t){"builtin", (char *)builtin_src, strlen(builtin_src)};
  DIR *dd = dir ? opendir(dir) : NULL;
  if (!dd) return n;
  struct dirent *e;
  char *names[64];
  int nn = 0;
  while ((e = readdir(dd)) && nn < 64) {
    size_t l = strlen(e->d_name);
    if (l > 5 && strcmp(e->d_name + l - 5, ".drkt") == 0) names[nn++] = strdup(e->d_name);
  }
  closedir(dd);
  for (int i = 0; i < nn; i++)
    for (int j = i + 1; j < nn; j++)
      if (strcmp(names[i], names[j]) > 0) {
        char *t = names[i];
        names[i] = names[j], names[j] = t;
      }
  for (int i = 0; i < nn; i++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    drk_diag_t d;
    drk_diag_init(&d, stderr);
    size_t len;
    char *t = n < max ? drk_read_file(path, &len, &d) : NULL;
    if (t) out[n++] = (src_t){names[i], t, len};
    else free(names[i]); /* unreadable, or no room left */
  }
  return n;
}

static bool required(const char *kname) {
  return strcmp(kname, "gemm_sm90_ws") != 0;
}

/* mode 0: ptx; 1: ptxas */
static int run_compile(const char *dir, int mode) {
  src_t srcs[64];
  int ns = load_sources(dir, srcs, 64);
  int total = 0, lowered = 0;
  for (int s = 0; s < ns; s++) {
    drk_diag_t d;
    drk_diag_init(&d, stderr);
    drk_tile_module_t *m = drk_tile_parse(srcs[s].text, srcs[s].len, srcs[s].name, &d);
    CHECK(m && drk_tile_verify(m, &d), "%s does not parse/verify", srcs[s].name);
    if (!m) continue;
    for (size_t k = 0; k < m->n_kernels; k++) {
      drk_tile_module_t *one = m; /* lower kernel by kernel to count them */
      for (int a = 0; a < 3; a++) {
        LLVMContextRef ctx = LLVMContextCreate();
        LLVMModuleRef mod = drk_nvptx_module_create(ctx, "t", &d);
        drk_nvptx_cg_t cg = {ctx, mod, LLVMCreateBuilderInContext(ctx), drk_nvptx_arch_find(archs[a], &d)};
        drk_diag_t dk;
        drk_diag_init(&dk, required(m->kernels[k]->name) ? stderr : NULL);
        bool ok = drk_nvptx_lower_kernel(&cg, one, m->kernels[k], &dk);
        LLVMDisposeBuilder(cg.b);
        char *ptx = NULL;
        size_t n = 0;
        if (ok) {
          extern bool nv_link_libdevice(LLVMModuleRef mod, drk_diag_t *d);
          ok = nv_link_libdevice(mod, &dk) && drk_nvptx_compile_module(mod, archs[a], &ptx, &n, &dk);
        }
        if (ok && getenv("DRK_NVPTX_DUMP")) {
          char p[1024];
          snprintf(p, sizeof p, "%s/%s.%s.ptx", getenv("DRK_NVPTX_DUMP"), m->kernels[k]->name, archs[a]);
          FILE *f = fopen(p, "w");
          if (f) fputs(ptx, f), fclose(f);
        }
        if (ok && mode == 1) {
          void *cub = NULL;
          size_t cn = 0;
          char *log = NULL;
          ok = drk_nvptx_ptxas(ptx, archs[a], &cub, &cn, &log, &dk);
          if (ok) {
            drk_nvptx_usage_t u = {0};
            drk_nvptx_usage_parse(log, m->kernels[k]->name, &u);
            printf("  %-14s %-7s regs %3d spill %d smem %d\n", m->kernels[k]->name, archs[a], u.registers,
                   u.spill_stores, u.smem);
          }
          free(cub);
          free(log);
        }
        if (ok) {
          const char *kn = m->kernels[k]->name;
          CHECK(strstr(ptx, ".entry"), "%s: no .entry", kn);
          /* vec_add's %n has no div attribute: its mask varies per element, loads stay scalar */
          if (strcmp(kn, "softmax") == 0) {
            CHECK(strstr(ptx, "shfl.sync.bfly"), "softmax: no shuffles");
            CHECK(strstr(ptx, "ld.global.v4.b32") || strstr(ptx, "ld.global.nc.v4.b32"), "softmax: loads not vectorized");
          }
          if (strcmp(kn, "gemm_sm80") == 0) {
            CHECK(strstr(ptx, "mma.sync.aligned.m16n8k16"), "gemm_sm80: no mma.sync");
            CHECK(strstr(ptx, "cp.async.cg.shared.global"), "gemm_sm80: no 16-byte cp.async");
            /* sA is K-contiguous (plain), sB N-contiguous (transposed) */
            CHECK(strstr(ptx, "ldmatrix.sync.aligned.m8n8.x4.shared.b16"), "gemm_sm80: A not read with ldmatrix");
            CHECK(strstr(ptx, "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"), "gemm_sm80: B not read with ldmatrix.trans");
          }
          if (strcmp(kn, "red2d") == 0) CHECK(strstr(ptx, "bar.sync"), "red2d: no barrier");
        }
        total++;
        lowered += ok;
        printf("%-8s %-14s %-7s %s\n", srcs[s].name, m->kernels[k]->name, archs[a], ok ? "lowered" : "NOT lowered");
        if (!ok) CHECK(!required(m->kernels[k]->name), "%s for %s must lower", m->kernels[k]->name, archs[a]);
        free(ptx);
        LLVMDisposeModule(mod);
        LLVMContextDispose(ctx);
      }
    }
    drk_tile_module_destroy(m);
  }
  printf("lowered %d of %d kernel x arch\n", lowered, total);
  for (int s = 1; s < ns; s++) {
    free(srcs[s].text);
    free((char *)srcs[s].name);
  }
  return failures ? 1 : 0;
}

/* ---- gpu ---- */
typedef int (*cu_fn)();
static void *cu_lib;
static cu_fn cu(const char *n) {
  cu_fn f = (cu_fn)dlsym(cu_lib, n);
  if (!f) {
    fprintf(stderr, "missing %s\n", n);
    exit(1);
  }
  return f;
}
#define CU_OK(x)                                                    \
  do {                                                              \
    int _r = (x);                                                   \
    if (_r) {                                                       \
      fprintf(stderr, "%s:%d: CUDA error %d: %s\n", __FILE__, __LINE__, _r, #x); \
      exit(1);                                                      \
    }                                                               \
  } while (0)
typedef unsigned long long dptr_t;

static uint64_t rng = 88172645463325252ull;
static float frand(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2 - 1;
}

static double rel_l2(const double *ref, const float *got, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    if (got[i] != got[i]) return INFINITY;
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return sqrt(num / (den ? den : 1));
}

static void *module_for(const char *dir, const char *file, const char *arch) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  size_t len;
  char *t = path[0] == '@' ? strdup(builtin_src) : drk_read_file(path, &len, &d);
  if (!t) return NULL;
  drk_tile_module_t *m = drk_tile_parse(t, strlen(t), file, &d);
  free(t);
  if (!m || !drk_tile_verify(m, &d)) return NULL;
  char *ptx = NULL;
  void *cub = NULL;
  size_t cn;
  bool ok = drk_nvptx_compile_tile_module(m, arch, &ptx, getenv("DRK_PTXAS") ? &cub : NULL, &cn, &d);
  drk_tile_module_destroy(m);
  if (!ok) return NULL;
  if (cub) {
    free(ptx);
    return cub;
  }
  return ptx;
}

static int run_gpu(const char *dir) {
  cu_lib = dlopen("libcuda.so.1", RTLD_NOW);
  int ndev = 0;
  if (!cu_lib || cu("cuInit")(0) != 0 || cu("cuDeviceGetCount")(&ndev) != 0 || ndev == 0) {
    printf("no CUDA GPU: skipped\n");
    return 77;
  }
  int dev, major, minor;
  void *ctx;
  cu("cuDeviceGet")(&dev, 0);
  cu("cuDeviceGetAttribute")(&major, 75, dev);
  cu("cuDeviceGetAttribute")(&minor, 76, dev);
  CU_OK(cu("cuDevicePrimaryCtxRetain")(&ctx, dev));
  CU_OK(cu("cuCtxSetCurrent")(ctx));
  char arch[16];
  snprintf(arch, sizeof arch, "sm_%d%d%s", major, minor, major == 9 ? "a" : "");
  if (major >= 10) snprintf(arch, sizeof arch, "sm_90");
  printf("device sm_%d%d, compiling for %s\n", major, minor, arch);
  void *mod;
  void *fn;

  /* vec_add */
  {
    int n = 100000 + 37;
    float *x = malloc(n * 4), *y = malloc(n * 4), *o = malloc(n * 4);
    double *ref = malloc(n * 8);
    for (int i = 0; i < n; i++) x[i] = frand(), y[i] = frand(), ref[i] = (double)x[i] + y[i];
    void *img = module_for(dir, "vec_add.drkt", arch);
    CHECK(img, "vec_add does not compile");
    if (img) {
      CU_OK(cu("cuModuleLoadData")(&mod, img));
      CU_OK(cu("cuModuleGetFunction")(&fn, mod, "vec_add"));
      dptr_t dx, dy, dout;
      CU_OK(cu("cuMemAlloc_v2")(&dx, (size_t)n * 4));
      CU_OK(cu("cuMemAlloc_v2")(&dy, (size_t)n * 4));
      CU_OK(cu("cuMemAlloc_v2")(&dout, (size_t)n * 4 + 64));
      CU_OK(cu("cuMemcpyHtoD_v2")(dx, x, (size_t)n * 4));
      CU_OK(cu("cuMemcpyHtoD_v2")(dy, y, (size_t)n * 4));
      CU_OK(cu("cuMemsetD8_v2")(dout, 0xff, (size_t)n * 4 + 64));
      void *args[] = {&dx, &dy, &dout, &n};
      CU_OK(cu("cuLaunchKernel")(fn, (n + 1023) / 1024, 1, 1, 128, 1, 1, 0, NULL, args, NULL));
      CU_OK(cu("cuCtxSynchronize")());
      float *o2 = malloc((size_t)n * 4 + 64);
      CU_OK(cu("cuMemcpyDtoH_v2")(o2, dout, (size_t)n * 4 + 64));
      double e = rel_l2(ref, o2, n);
      uint32_t tail;
      memcpy(&tail, o2 + n, 4);
      CHECK(e <= 1e-7 && tail == 0xffffffffu, "vec_add: rel err %g, tail %08x", e, tail);
      printf("vec_add: rel err %g\n", e);
      free(o2);
      cu("cuMemFree_v2")(dx), cu("cuMemFree_v2")(dy), cu("cuMemFree_v2")(dout);
      cu("cuModuleUnload")(mod);
      free(img);
    }
    free(x), free(y), free(o), free(ref);
  }
  /* softmax: M x N f16, N <= 1024 */
  {
    int M = 37, N = 1000, stride = 1008;
    uint16_t *x = malloc((size_t)M * stride * 2), *y = malloc((size_t)M * stride * 2);
    double *ref = malloc((size_t)M * N * 8);
    float *got = malloc((size_t)M * N * 4);
    for (int i = 0; i < M * stride; i++) x[i] = drk_f32_to_f16(3 * frand());
    for (int r = 0; r < M; r++) {
      double mx = -INFINITY, s = 0;
      for (int c = 0; c < N; c++) mx = fmax(mx, drk_f16_to_f32(x[r * stride + c]));
      for (int c = 0; c < N; c++) s += exp(drk_f16_to_f32(x[r * stride + c]) - mx);
      for (int c = 0; c < N; c++) ref[r * N + c] = exp(drk_f16_to_f32(x[r * stride + c]) - mx) / s;
    }
    void *img = module_for(dir, "softmax.drkt", arch);
    CHECK(img, "softmax does not compile");
    if (img) {
      CU_OK(cu("cuModuleLoadData")(&mod, img));
      CU_OK(cu("cuModuleGetFunction")(&fn, mod, "softmax"));
      dptr_t dx, dy;
      size_t bytes = (size_t)M * stride * 2;
      CU_OK(cu("cuMemAlloc_v2")(&dx, bytes));
      CU_OK(cu("cuMemAlloc_v2")(&dy, bytes));
      CU_OK(cu("cuMemcpyHtoD_v2")(dx, x, bytes));
      CU_OK(cu("cuMemsetD8_v2")(dy, 0xff, bytes));
      void *args[] = {&dx, &dy, &M, &N, &stride};
      CU_OK(cu("cuLaunchKernel")(fn, (M + 3) / 4, 1, 1, 128, 1, 1, 0, NULL, args, NULL));
      CU_OK(cu("cuCtxSynchronize")());
      CU_OK(cu("cuMemcpyDtoH_v2")(y, dy, bytes));
      bool pad_ok = true;
      for (int r = 0; r < M; r++) {
        for (int c = 0; c < N; c++) got[r * N + c] = drk_f16_to_f32(y[r * stride + c]);
        for (int c = N; c < stride; c++) pad_ok &= y[r * stride + c] == 0xffff;
      }
      double e = rel_l2(ref, got, (size_t)M * N);
      CHECK(e <= 1e-2 && pad_ok, "softmax: rel err %g, padding %s", e, pad_ok ? "intact" : "written");
      printf("softmax: rel err %g\n", e);
      cu("cuMemFree_v2")(dx), cu("cuMemFree_v2")(dy);
      cu("cuModuleUnload")(mod);
      free(img);
    }
    free(x), free(y), free(ref), free(got);
  }
  /* gemm_sm80: 256 x 384 x 96 */
  {
    int M = 256, N = 384, K = 96;
    uint16_t *a = malloc((size_t)M * K * 2), *b = malloc((size_t)K * N * 2), *c = malloc((size_t)M * N * 2);
    double *ref = malloc((size_t)M * N * 8);
    float *got = malloc((size_t)M * N * 4);
    for (int i = 0; i < M * K; i++) a[i] = drk_f32_to_f16(frand());
    for (int i = 0; i < K * N; i++) b[i] = drk_f32_to_f16(frand());
    for (int i = 0; i < M; i++)
      for (int j = 0; j < N; j++) {
        double s = 0;
        for (int k = 0; k < K; k++) s += (double)drk_f16_to_f32(a[i * K + k]) * drk_f16_to_f32(b[k * N + j]);
        ref[i * N + j] = s;
      }
    void *img = module_for(dir, "gemm_sm80.drkt", arch);
    CHECK(img, "gemm_sm80 does not compile");
    if (img) {
      CU_OK(cu("cuModuleLoadData")(&mod, img));
      CU_OK(cu("cuModuleGetFunction")(&fn, mod, "gemm_sm80"));
      CU_OK(cu("cuFuncSetAttribute")(fn, 8, 49152)); /* MAX_DYNAMIC_SHARED_SIZE_BYTES */
      dptr_t da, db, dc;
      CU_OK(cu("cuMemAlloc_v2")(&da, (size_t)M * K * 2));
      CU_OK(cu("cuMemAlloc_v2")(&db, (size_t)K * N * 2));
      CU_OK(cu("cuMemAlloc_v2")(&dc, (size_t)M * N * 2));
      CU_OK(cu("cuMemcpyHtoD_v2")(da, a, (size_t)M * K * 2));
      CU_OK(cu("cuMemcpyHtoD_v2")(db, b, (size_t)K * N * 2));
      CU_OK(cu("cuMemsetD8_v2")(dc, 0xff, (size_t)M * N * 2));
      void *args[] = {&da, &db, &dc, &M, &N, &K};
      CU_OK(cu("cuLaunchKernel")(fn, M / 128, N / 128, 1, 128, 1, 1, 49152, NULL, args, NULL));
      CU_OK(cu("cuCtxSynchronize")());
      CU_OK(cu("cuMemcpyDtoH_v2")(c, dc, (size_t)M * N * 2));
      for (int i = 0; i < M * N; i++) got[i] = drk_f16_to_f32(c[i]);
      double e = rel_l2(ref, got, (size_t)M * N);
      CHECK(e <= 1e-2, "gemm_sm80: rel err %g", e);
      printf("gemm_sm80: rel err %g\n", e);
      cu("cuMemFree_v2")(da), cu("cuMemFree_v2")(db), cu("cuMemFree_v2")(dc);
      cu("cuModuleUnload")(mod);
      free(img);
    }
    free(a), free(b), free(c), free(ref), free(got);
  }
  /* builtin ew_f32 (math accuracy) and red2d (reductions, loop, if, convert_layout, fma dot) */
  {
    void *img = module_for(dir, "@builtin", arch);
    CHECK(img, "builtin kernels do not compile");
    if (img) {
      CU_OK(cu("cuModuleLoadData")(&mod, img));
      int n = 5000;
      float *x = malloc(n * 4), *y = malloc(n * 4);
      double *ref = malloc(n * 8);
      for (int i = 0; i < n; i++) {
        double v = 4 * frand();
        x[i] = (float)v;
        v = x[i];
        double a1 = fabs(v) + 1;
        ref[i] = exp(v) + tanh(v) + erf(v) + log(a1) + sqrt(a1) + 1 / sqrt(a1) + exp2(v);
      }
      CU_OK(cu("cuModuleGetFunction")(&fn, mod, "ew_f32"));
      dptr_t dx, dy;
      CU_OK(cu("cuMemAlloc_v2")(&dx, (size_t)n * 4));
      CU_OK(cu("cuMemAlloc_v2")(&dy, (size_t)n * 4));
      CU_OK(cu("cuMemcpyHtoD_v2")(dx, x, (size_t)n * 4));
      void *args[] = {&dx, &dy, &n};
      CU_OK(cu("cuLaunchKernel")(fn, (n + 511) / 512, 1, 1, 128, 1, 1, 0, NULL, args, NULL));
      CU_OK(cu("cuCtxSynchronize")());
      CU_OK(cu("cuMemcpyDtoH_v2")(y, dy, (size_t)n * 4));
      double e = rel_l2(ref, y, n);
      CHECK(e <= 1e-6, "ew_f32 math: rel err %g", e);
      printf("ew_f32 (exp tanh erf log sqrt rsqrt exp2): rel err %g\n", e);
      free(x), free(y), free(ref);
      cu("cuMemFree_v2")(dx), cu("cuMemFree_v2")(dy);

      /* red2d */
      int nit = 3;
      float *X = malloc(64 * 64 * 4), *cs = malloc(64 * 4), *tot = malloc(4), *mm = malloc(64 * 64 * 4);
      int32_t *rm = malloc(64 * 4);
      for (int i = 0; i < 64 * 64; i++) X[i] = 8 * frand();
      CU_OK(cu("cuModuleGetFunction")(&fn, mod, "red2d"));
      dptr_t dX, dcs, drm, dtot, dmm;
      CU_OK(cu("cuMemAlloc_v2")(&dX, 64 * 64 * 4));
      CU_OK(cu("cuMemAlloc_v2")(&dcs, 64 * 4));
      CU_OK(cu("cuMemAlloc_v2")(&drm, 64 * 4));
      CU_OK(cu("cuMemAlloc_v2")(&dtot, 4));
      CU_OK(cu("cuMemAlloc_v2")(&dmm, 64 * 64 * 4));
      CU_OK(cu("cuMemcpyHtoD_v2")(dX, X, 64 * 64 * 4));
      void *rargs[] = {&dX, &dcs, &drm, &dtot, &dmm, &nit};
      CU_OK(cu("cuLaunchKernel")(fn, 1, 1, 1, 128, 1, 1, 0, NULL, rargs, NULL));
      CU_OK(cu("cuCtxSynchronize")());
      CU_OK(cu("cuMemcpyDtoH_v2")(cs, dcs, 64 * 4));
      CU_OK(cu("cuMemcpyDtoH_v2")(rm, drm, 64 * 4));
      CU_OK(cu("cuMemcpyDtoH_v2")(tot, dtot, 4));
      CU_OK(cu("cuMemcpyDtoH_v2")(mm, dmm, 64 * 64 * 4));
      double rcs[64], rt = 0, e1, e2;
      int bad_rm = 0;
      for (int j = 0; j < 64; j++) {
        rcs[j] = 0;
        for (int i = 0; i < 64; i++) rcs[j] += nit * (double)X[i * 64 + j];
        rt += rcs[j];
      }
      for (int i = 0; i < 64; i++) {
        int mx = INT32_MIN;
        for (int j = 0; j < 64; j++) mx = (int)X[i * 64 + j] > mx ? (int)X[i * 64 + j] : mx;
        bad_rm += rm[i] != mx;
      }
      e1 = rel_l2(rcs, cs, 64);
      e2 = fabs(*tot - rt) / fabs(rt);
      double *rmm = malloc(64 * 64 * 8);
      for (int i = 0; i < 64; i++) {
        double mn = INFINITY;
        for (int j = 0; j < 64; j++) mn = fmin(mn, X[i * 64 + j]);
        for (int j = 0; j < 64; j++) {
          double s = 0;
          for (int k = 0; k < 64; k++) s += (double)X[i * 64 + k] * X[k * 64 + j];
          rmm[i * 64 + j] = s + mn;
        }
      }
      double e3 = rel_l2(rmm, mm, 64 * 64);
      CHECK(e1 <= 1e-5 && e2 <= 1e-4 && bad_rm == 0 && e3 <= 1e-5,
            "red2d: colsum err %g, total err %g, %d bad row maxima, dot+min err %g", e1, e2, bad_rm, e3);
      printf("red2d: colsum %g total %g rowmax-bad %d dot %g\n", e1, e2, bad_rm, e3);
      free(X), free(cs), free(tot), free(mm), free(rm), free(rmm);
      cu("cuModuleUnload")(mod);
      free(img);
    }
  }
  return failures ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: test_nvptx_lower ptx|ptxas|gpu TILE_DIR [PTXAS]\n");
    return 2;
  }
  if (strcmp(argv[1], "ptx") == 0) return run_compile(argv[2], 0);
  if (strcmp(argv[1], "ptxas") == 0) {
    if (argc < 4 || !argv[3][0] || strstr(argv[3], "NOTFOUND")) {
      printf("ptxas not found: skipped\n");
      return 77;
    }
    setenv("DRK_PTXAS", argv[3], 1);
    return run_compile(argv[2], 1);
  }
  if (strcmp(argv[1], "gpu") == 0) return run_gpu(argv[2]);
  return 2;
}
