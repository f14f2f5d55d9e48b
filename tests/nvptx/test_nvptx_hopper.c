/* Hopper (sm_90a) lowering tests: TMA, mbarriers, fences, setmaxnreg, dot kind=wgmma.
 *
 *   test_nvptx_hopper ptx FILE.drkt...         lower every kernel for sm_90a, check the PTX has
 *                                              the Hopper instructions; the same ops are a
 *                                              located error for sm_80 and sm_90
 *   test_nvptx_hopper ptxas PTXAS FILE.drkt... the same, then ptxas: no spills, no wgmma
 *                                              serialization warning (77 without ptxas)
 * DRK_NVPTX_DUMP=dir writes the PTX and the ptxas log there. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/nvptx/nvptx.h"
#include "ir/tile.h"
#include "tests/common/check.h"

static void dump(const char *name, const char *ext, const char *text) {
  const char *dir = getenv("DRK_NVPTX_DUMP");
  if (!dir || !text) return;
  char p[1024];
  snprintf(p, sizeof p, "%s/%s.%s", dir, name, ext);
  FILE *f = fopen(p, "w");
  if (f) fputs(text, f), fclose(f);
}

static void check_file(const char *path, const char *ptxas) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  size_t len;
  char *text = drk_read_file(path, &len, &d);
  CHECK(text, "%s: cannot read", path);
  if (!text) return;
  drk_tile_module_t *m = drk_tile_parse(text, len, path, &d);
  CHECK(m && drk_tile_verify(m, &d), "%s does not parse/verify", path);
  free(text);
  if (!m) return;
  for (size_t k = 0; k < m->n_kernels; k++) {
    const char *kn = m->kernels[k]->name;
    /* older archs: a located error, not an abort */
    static const char *const old[] = {"sm_80", "sm_90"};
    for (int a = 0; a < 2; a++) {
      LLVMContextRef ctx = LLVMContextCreate();
      LLVMModuleRef mod = drk_nvptx_module_create(ctx, "t", &d);
      drk_nvptx_cg_t cg = {ctx, mod, LLVMCreateBuilderInContext(ctx), drk_nvptx_arch_find(old[a], &d)};
      char *buf = NULL;
      size_t bl = 0;
      FILE *ef = open_memstream(&buf, &bl);
      drk_diag_t de;
      drk_diag_init(&de, ef);
      bool ok = drk_nvptx_lower_kernel(&cg, m, m->kernels[k], &de);
      fclose(ef);
      CHECK(!ok && buf && strstr(buf, "needs sm_90"), "%s: lowering for %s should fail with 'needs sm_90...', got: %s", kn,
            old[a], buf ? buf : "");
      free(buf);
      LLVMDisposeBuilder(cg.b);
      LLVMDisposeModule(mod);
      LLVMContextDispose(ctx);
    }
    LLVMContextRef ctx = LLVMContextCreate();
    LLVMModuleRef mod = drk_nvptx_module_create(ctx, "t", &d);
    drk_nvptx_cg_t cg = {ctx, mod, LLVMCreateBuilderInContext(ctx), drk_nvptx_arch_find("sm_90a", &d)};
    bool ok = drk_nvptx_lower_kernel(&cg, m, m->kernels[k], &d);
    LLVMDisposeBuilder(cg.b);
    CHECK(ok, "%s: does not lower for sm_90a", kn);
    char *ptx = NULL;
    size_t n = 0;
    if (ok) {
      char *ll = LLVMPrintModuleToString(mod);
      dump(kn, "ll", ll);
      LLVMDisposeMessage(ll);
      ok = drk_nvptx_compile_module(mod, "sm_90a", &ptx, &n, &d);
      CHECK(ok, "%s: no PTX", kn);
    }
    if (ok) {
      dump(kn, "ptx", ptx);
      CHECK(strstr(ptx, "wgmma.mma_async.sync.aligned.m64n"), "%s: no wgmma.mma_async", kn);
      CHECK(strstr(ptx, "wgmma.fence.sync.aligned"), "%s: no wgmma.fence", kn);
      CHECK(strstr(ptx, "wgmma.commit_group.sync.aligned"), "%s: no wgmma.commit_group", kn);
      CHECK(strstr(ptx, "wgmma.wait_group.sync.aligned"), "%s: no wgmma.wait_group", kn);
      CHECK(strstr(ptx, "cp.async.bulk.tensor.2d"), "%s: no TMA load", kn);
      CHECK(strstr(ptx, "mbarrier.init"), "%s: no mbarrier.init", kn);
      CHECK(strstr(ptx, "mbarrier.try_wait.parity"), "%s: no mbarrier.try_wait", kn);
      CHECK(strstr(ptx, "expect_tx"), "%s: no expect_tx", kn);
      CHECK(strstr(ptx, "setmaxnreg.inc.sync.aligned.u32"), "%s: no setmaxnreg.inc", kn);
      CHECK(strstr(ptx, "setmaxnreg.dec.sync.aligned.u32"), "%s: no setmaxnreg.dec", kn);
      CHECK(!strstr(ptx, ".local"), "%s: a local depot (tensor map copied or spills)", kn);
    }
    if (ok && ptxas) {
      void *cub = NULL;
      size_t cn = 0;
      char *log = NULL;
      bool aok = drk_nvptx_ptxas(ptx, "sm_90a", &cub, &cn, &log, &d);
      CHECK(aok, "%s: ptxas failed", kn);
      if (aok) {
        dump(kn, "ptxas.log", log);
        drk_nvptx_usage_t u = {0};
        drk_nvptx_usage_parse(log, kn, &u);
        printf("  %-24s sm_90a regs %3d spill %d/%d smem %d\n", kn, u.registers, u.spill_stores, u.spill_loads, u.smem);
        CHECK(u.spill_stores == 0 && u.spill_loads == 0, "%s: spills", kn);
        CHECK(!strstr(log, "serialized"), "%s: ptxas serialized the wgmma pipeline:\n%s", kn, log);
      }
      free(cub);
      free(log);
    }
    free(ptx);
    LLVMDisposeModule(mod);
    LLVMContextDispose(ctx);
  }
  drk_tile_module_destroy(m);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s ptx FILE... | ptxas PTXAS FILE...\n", argv[0]);
    return 2;
  }
  const char *ptxas = NULL;
  int first = 2;
  if (strcmp(argv[1], "ptxas") == 0) {
    if (argc < 4 || !argv[2][0] || strstr(argv[2], "NOTFOUND")) {
      printf("skipped: no ptxas\n");
      return 77;
    }
    setenv("DRK_PTXAS", argv[2], 1);
    ptxas = argv[2];
    first = 3;
  }
  for (int i = first; i < argc; i++) check_file(argv[i], ptxas);
  if (failures) fprintf(stderr, "%d failure(s)\n", failures);
  else printf("ok\n");
  return failures ? 1 : 0;
}
