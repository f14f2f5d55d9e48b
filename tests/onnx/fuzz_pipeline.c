/* libFuzzer target (DRK_FUZZ=ON): the front half of the compiler on arbitrary ONNX bytes:
 * import, verify, shape inference and the graph passes (canonicalize, fold-batchnorm,
 * conv-to-matmul, merge-matmul, precision, layout), fusion, lowering to tile IR and memory
 * planning, through the pipeline's own stage table, for sm_90a; no codegen (LLVM and ptxas
 * are slow and fuzzed apart). Symbolic input dims are bound to 2 so the lowering runs.
 * Any input must end in a plan or in reported errors: a stage that fails without an error
 * traps, and ASan/UBSan catch the rest. Corpus: tests/onnx/fuzz_corpus (gen_fuzz_corpus.py). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/targets.h"
#include "frontend/onnx/onnx_import.h"
#include "pipeline/pipeline.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* "a=2,b=2" for the symbolic dims of g's inputs (each once). */
static void bind_spec(const drk_graph_t *g, char *spec, size_t cap) {
  size_t n = 0;
  spec[0] = 0;
  for (size_t i = 0; i < g->n_inputs; i++)
    for (int k = 0; k < g->inputs[i]->shape.rank; k++) {
      const char *s = g->inputs[i]->shape.dims[k].sym;
      if (!s || strchr(s, ',') || strchr(s, '=') || strlen(s) > 64) continue;
      char item[80];
      snprintf(item, sizeof item, "%s=", s);
      if (strstr(spec, item) || n + strlen(item) + 4 >= cap) continue;
      n += (size_t)snprintf(spec + n, cap - n, "%s%s2", n ? "," : "", item);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  drk_diag_t d;
  drk_diag_init(&d, NULL);
  drk_graph_t *g = drk_onnx_import_buffer(data, size, "fuzz.onnx", NULL, &d);
  if (!g) {
    if (d.n_errors == 0) __builtin_trap(); /* a failure must say why */
    return 0;
  }
  char spec[1024];
  bind_spec(g, spec, sizeof spec);
  if (spec[0] && !drk_graph_bind_dims(g, spec, &d)) {
    if (d.n_errors == 0) __builtin_trap();
    drk_graph_destroy(g);
    return 0;
  }
  drk_compile_options_t o;
  memset(&o, 0, sizeof o);
  drk_diag_t quiet;
  drk_diag_init(&quiet, NULL);
  drk_target_parse_list("sm_90a", &o.targets, &quiet);
  o.jobs = 1;
  o.no_cache = true;
  drk_pipeline_t *p = drk_pipeline_create(&o, NULL, g, "tile", &d); /* takes g */
  bool planned = p && drk_pipeline_run_to(p, "plan-memory");
  if (!planned && d.n_errors == 0) __builtin_trap();
  if (getenv("DRK_FUZZ_VERBOSE")) /* how far an input got (checking a corpus's reach) */
    fprintf(stderr, "%s\n", planned ? "planned" : d.first);
  drk_pipeline_destroy(p);
  return 0;
}
