/* GPU test of fusion: every whole model at every fusion level, built into a module by
 * the pipeline's back half (drk_pipeline_build, pipeline/pipeline.h), run by libdrkrt and
 * compared with the interpreter.
 *
 *   test_fuse_gpu MODELS_DIR NAME...   (MODELS_DIR/NAME/model.onnx; bert/gpt bound to
 *                                       batch=2,seq=64)
 *
 * Exits 77 when no CUDA driver or device is present. Inputs are random (fixed seed, never all
 * zeros); outputs are poisoned (NaN) before each run, so an element a kernel fails to write
 * fails the comparison. Tolerance: rel L2 <= 1e-4 for f32, 1e-2 for f16/bf16. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/pipeline.h"
#include "backends/targets.h"
#include "drk/drkrt.h"
#include "frontend/onnx/onnx_import.h"
#include "ir/interp.h"
#include "lower/lower.h"
#include "passes/passes.h"

static uint64_t rng_next(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static double tolerance(drk_dtype_t t) {
  if (t == DRK_DT_F16 || t == DRK_DT_BF16) return 1e-2;
  if (t == DRK_DT_F32) return 1e-4;
  if (t == DRK_DT_F64) return 1e-5;
  return 0;
}

static bool st_ok(drk_status_t st, const char *what) {
  if (!st) return true;
  fprintf(stderr, "FAIL: %s: %s\n", what, drk_status_message(st));
  drk_status_destroy(st);
  return false;
}

/* One model at one level; returns false on a mismatch or error. */
static bool run_level(drk_runtime_t *rt, unsigned targets, const drk_graph_t *g, const drk_tensor_t *in,
                      const drk_tensor_t *ref, int level, const char *name) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  drk_compile_options_t co = {.targets = targets, .command_line = "test_fuse_gpu", .fusion_set = true,
                              .fusion_level = level};
  void *bytes = NULL;
  size_t size = 0;
  drk_module_t *m = NULL;
  drk_session_t *s = NULL;
  bool ok = drk_pipeline_build((drk_graph_t *)g, &co, "module", &bytes, &size, &d) && st_ok(drk_module_load_memory(NULL, bytes, size, &m), "load") &&
            st_ok(drk_session_create(rt, m, &s), "session");
  size_t no = g->n_outputs;
  drk_tensor_t *out = calloc(no + 1, sizeof *out);
  for (size_t i = 0; ok && i < g->n_inputs; i++)
    ok = st_ok(drk_session_bind_input(s, i, in[i].data, in[i].nbytes, DRK_MEMORY_HOST), "bind input");
  for (size_t i = 0; ok && i < no; i++) {
    const drk_value_t *v = g->outputs[i];
    int64_t dims[DRK_MAX_RANK];
    for (int k = 0; k < v->shape.rank; k++) dims[k] = v->shape.dims[k].size;
    ok = drk_tensor_alloc(&out[i], v->dtype, v->shape.rank, dims);
    for (int64_t j = 0; ok && j < drk_tensor_numel(&out[i]); j++)
      if (drk_dtype_is_float(v->dtype)) drk_tensor_set_f64(&out[i], j, NAN);
    ok = ok && st_ok(drk_session_bind_output(s, i, out[i].data, out[i].nbytes, DRK_MEMORY_HOST), "bind output");
  }
  ok = ok && st_ok(drk_session_run(s), "run");
  size_t nk = m ? drk_module_num_kernels(m) : 0;
  for (size_t i = 0; ok && i < no; i++) {
    double e = drk_tensor_rel_error(&out[i], &ref[i]), tol = tolerance(g->outputs[i]->dtype);
    bool pass = e <= tol;
    printf("%s level %d: %zu kernels, output %zu '%s': rel error %.3g (tolerance %.0e) %s\n", name, level, nk, i,
           g->outputs[i]->name, e, tol, pass ? "PASS" : "FAIL");
    ok = pass;
  }
  if (!ok) printf("%s level %d: FAIL\n", name, level);
  for (size_t i = 0; i < no; i++) drk_tensor_free(&out[i]);
  free(out);
  drk_session_destroy(s);
  drk_module_destroy(m);
  free(bytes);
  return ok;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: test_fuse_gpu MODELS_DIR NAME...\n");
    return 2;
  }
  drk_runtime_options_t rto = {0};
  drk_runtime_t *rt = NULL;
  drk_status_t st = drk_runtime_create(&rto, &rt);
  if (st) {
    drk_status_code_t code = drk_status_code(st);
    printf("SKIP: no GPU (%s: %s)\n", drk_status_code_name(code), drk_status_message(st));
    drk_status_destroy(st);
    return 77;
  }
  unsigned sm = drk_runtime_device_sm(rt);
  char arch[16];
  snprintf(arch, sizeof arch, sm == 90 ? "sm_90a" : "sm_%u", sm);
  unsigned targets;
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  if (!drk_target_parse_list(arch, &targets, &d)) {
    printf("SKIP: device %s (%s) is not a drkc target\n", drk_runtime_device_name(rt), arch);
    drk_runtime_destroy(rt);
    return 77;
  }
  int failed = 0;
  for (int a = 2; a < argc; a++) {
    const char *name = argv[a];
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/model.onnx", argv[1], name);
    drk_graph_t *g = drk_onnx_import(path, &d);
    bool ok = g != NULL;
    if (ok && (strcmp(name, "bert_layer") == 0 || strcmp(name, "gpt_layer") == 0))
      ok = drk_graph_bind_dims(g, "batch=2,seq=64", &d);
    ok = ok && drk_pass_pipeline_canonicalize(g, &d);
    if (!ok) {
      printf("%s: FAIL (import)\n", name);
      failed++;
      if (g) drk_graph_destroy(g);
      continue;
    }
    size_t ni = g->n_inputs, no = g->n_outputs;
    drk_tensor_t *in = calloc(ni + 1, sizeof *in), *ref = calloc(no + 1, sizeof *ref);
    uint64_t s = 0x2545F4914F6CDD1Dull;
    for (size_t i = 0; i < ni; i++) {
      const drk_value_t *v = g->inputs[i];
      int64_t dims[DRK_MAX_RANK];
      for (int k = 0; k < v->shape.rank; k++) dims[k] = v->shape.dims[k].size;
      drk_tensor_alloc(&in[i], v->dtype, v->shape.rank, dims);
      for (int64_t j = 0; j < drk_tensor_numel(&in[i]); j++) {
        uint64_t x = rng_next(&s);
        if (drk_dtype_is_float(v->dtype)) drk_tensor_set_f64(&in[i], j, ((double)(x >> 11) / 9007199254740992.0) * 2 - 1);
        else drk_tensor_set_i64(&in[i], j, (int64_t)(x >> 63));
      }
    }
    if (!drk_interp_run(g, in, ref, &d)) {
      printf("%s: FAIL (interpreter)\n", name);
      failed++;
    } else {
      for (int level = 0; level <= 3; level++) failed += !run_level(rt, targets, g, in, ref, level, name);
      for (size_t i = 0; i < no; i++) drk_tensor_free(&ref[i]);
    }
    for (size_t i = 0; i < ni; i++) drk_tensor_free(&in[i]);
    free(in);
    free(ref);
    drk_graph_destroy(g);
  }
  drk_runtime_destroy(rt);
  printf("%s\n", failed ? "FAIL" : "PASS");
  return failed ? 1 : 0;
}
