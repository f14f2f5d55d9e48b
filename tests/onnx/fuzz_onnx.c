/* libFuzzer target (DRK_FUZZ=ON): the ONNX importer and the TensorProto reader on arbitrary
 * bytes, and the .npy reader (drkc run --input NAME=FILE.npy). Any input must end in a graph
 * (a tensor) or in reported errors; ASan/UBSan catch crashes, leaks
 * and undefined behaviour. */
#include <stddef.h>
#include <stdint.h>

#include "frontend/onnx/onnx_import.h"
#include "frontend/onnx/tensor_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  drk_diag_t d;
  drk_diag_init(&d, NULL);
  drk_graph_t *g = drk_onnx_import_buffer(data, size, "fuzz.onnx", NULL, &d);
  if (!g && d.n_errors == 0) __builtin_trap(); /* a failure must say why */
  drk_graph_destroy(g);
  drk_tensor_t t;
  drk_diag_init(&d, NULL);
  if (drk_tensor_read_pb_buffer(data, size, "fuzz.pb", &t, NULL, &d)) drk_tensor_free(&t);
  drk_diag_init(&d, NULL); /* drkc run's other input reader */
  if (drk_tensor_read_npy_buffer(data, size, "fuzz.npy", &t, &d)) drk_tensor_free(&t);
  else if (d.n_errors == 0) __builtin_trap();
  return 0;
}
