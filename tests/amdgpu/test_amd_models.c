/* Whole models -> gfx942: the ONNX model is imported, its symbolic dims bound, canonicalized
 * and lowered to tile IR as drkc does (target_sm 80: no Hopper-only ops), then every kernel
 * goes through the AMDGPU backend into one code object and an offload bundle
 * (drk_build_amd). Writes OUTDIR/NAME.hsaco, NAME.hipfb, NAME.kernels (one line per kernel:
 * name, schedule kind, graph op) and NAME.report (resources per kernel); check_models.sh
 * inspects them with LLVM's tools.
 * usage: test_amd_models MODEL.onnx DIMS|- OUTDIR NAME [tf32|fp8]
 * tf32: lower f32 matmuls as mma_sync dots (drkc --matmul-precision=high), which this
 * backend runs as full-f32 MFMA (v_mfma_f32_16x16x4_f32). fp8: the precision pass with
 * --precision=fp8 first (e4m3 MatMul/Gemm/Conv: fp8 MFMA). Exit 77 without ld.lld. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/amdgpu/amdgpu.h"
#include "backends/package/build_amd.h"
#include "frontend/onnx/onnx_import.h"
#include "lower/lower.h"
#include "passes/passes.h"
#include "passes/precision.h"

static bool write_file(const char *dir, const char *name, const char *ext, const void *p, size_t n) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.%s", dir, name, ext);
  FILE *f = fopen(path, "wb");
  bool ok = f && fwrite(p, 1, n, f) == n;
  if (f && fclose(f) != 0) ok = false;
  if (!ok) fprintf(stderr, "cannot write %s\n", path);
  return ok;
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: test_amd_models MODEL.onnx DIMS|- OUTDIR NAME [tf32|fp8]\n");
    return 2;
  }
  const char *model = argv[1], *dims = argv[2], *dir = argv[3], *name = argv[4];
  bool tf32 = argc > 5 && strcmp(argv[5], "tf32") == 0, fp8 = argc > 5 && strcmp(argv[5], "fp8") == 0;
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  char *lld = drk_amdgpu_lld_find(&d);
  if (!lld) {
    fprintf(stderr, "SKIP: no ld.lld\n");
    return 77;
  }
  free(lld);
  drk_graph_t *g = drk_onnx_import(model, &d);
  if (!g) return 1;
  if (strcmp(dims, "-") != 0 && !drk_graph_bind_dims(g, dims, &d)) return 1;
  if (!drk_pass_pipeline_canonicalize(g, &d)) return 1;
  drk_precision_options_t po = {.precision = DRK_PREC_FP8, .target_sm = 90, .target_has_fp8 = true, .target_name = "gfx942"};
  if (fp8 && !drk_pass_apply_precision(g, &po, &d)) return 1;
  drk_lower_options_t lo = {.target_sm = 80, .allow_tf32 = tf32};
  drk_lowered_t low;
  if (!drk_lower_graph(g, &lo, &low, &d)) return 1;
  int rc = 1;
  void *h = NULL, *b = NULL;
  size_t hn = 0, bn = 0;
  if (drk_build_amd(low.module, "gfx942", &h, &hn, &b, &bn, &d)) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.kernels", dir, name);
    FILE *f = fopen(path, "w");
    for (size_t i = 0; f && i < low.n_launches; i++) {
      const drk_launch_t *l = &low.launches[i];
      fprintf(f, "%s %s %s %s\n", l->kernel->name, l->sched.kind ? l->sched.kind : "-",
              l->node ? drk_op_name(l->node->op) : "-", l->sched.mma ? l->sched.mma : "-");
    }
    snprintf(path, sizeof path, "%s/%s.report", dir, name);
    FILE *r = fopen(path, "w");
    bool rep = r && drk_build_amd_report(low.module, h, hn, r);
    if (r) fclose(r);
    if (f && fclose(f) == 0 && rep && write_file(dir, name, "hsaco", h, hn) && write_file(dir, name, "hipfb", b, bn)) {
      printf("%s: %zu kernels, code object %zu bytes, bundle %zu bytes\n", name, low.module->n_kernels, hn, bn);
      rc = 0;
    }
  }
  free(h);
  free(b);
  drk_lowered_destroy(&low);
  drk_graph_destroy(g);
  return rc;
}
