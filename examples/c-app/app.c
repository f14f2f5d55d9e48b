/* A deployment app: the model is linked in (model.o + model.h from `drkc -c`), nothing is read
 * at run time but the input. It loads one input tensor (raw little-endian float32, exactly
 * MODEL_INPUT_0_BYTES bytes; without a file, a fixed pseudo-random input), runs the model on
 * the GPU and prints the top 5 of its output (class scores or logits); OUT_FILE receives the
 * raw output bytes.
 *
 *   drkc model.onnx --target=sm_90 -c -o model.o      (writes model.o and model.h)
 *   cc -I<prefix>/include app.c model.o -L<prefix>/lib -ldrkrt -ldl -o app
 *   ./app [INPUT.bin [OUT_FILE]]
 *
 * Exit status: 0 ran, 3 no GPU (no driver or no device: the status says which), 1 any other
 * error, 2 usage. The model must have one float32 input and one float32 output (an image
 * classifier, an MLP); other models use the same API with their own parameters. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

#if MODEL_NUM_INPUTS != 1 || MODEL_NUM_OUTPUTS != 1 || MODEL_INPUT_0_DTYPE != 1 || MODEL_OUTPUT_0_DTYPE != 1
#error "this example is for a model with one float32 input and one float32 output"
#endif

static int fail(drk_status_t st, const char *what) {
  drk_status_code_t c = drk_status_code(st);
  int no_gpu = c == DRK_STATUS_NO_DRIVER || c == DRK_STATUS_NO_DEVICE;
  fprintf(stderr, "app: %s: %s: %s\n", no_gpu ? "no GPU" : "error", what, drk_status_message(st));
  drk_status_destroy(st);
  return no_gpu ? 3 : 1;
}

static void print_dims(const char *what, const int64_t *dims, int rank) {
  printf("%s [", what);
  for (int i = 0; i < rank; i++) printf("%s%lld", i ? ", " : "", (long long)dims[i]);
  printf("]");
}

int main(int argc, char **argv) {
  if (argc > 3 || (argc > 1 && argv[1][0] == '-')) {
    fprintf(stderr, "usage: %s [INPUT.bin [OUT_FILE]] (raw float32, %d bytes)\n", argv[0], (int)MODEL_INPUT_0_BYTES);
    return 2;
  }
  static float x[MODEL_INPUT_0_NUMEL], y[MODEL_OUTPUT_0_NUMEL];
  if (argc > 1) {
    FILE *f = fopen(argv[1], "rb");
    size_t n = f ? fread(x, 1, sizeof x, f) : 0;
    int extra = f ? fgetc(f) : EOF;
    if (f) fclose(f);
    if (!f || n != sizeof x || extra != EOF) {
      fprintf(stderr, "app: %s: expected exactly %zu bytes of float32 (input '%s')\n", argv[1], sizeof x,
              MODEL_INPUT_0_NAME);
      return 2;
    }
  } else {
    unsigned s = 12345; /* a fixed input, so runs compare */
    for (size_t i = 0; i < MODEL_INPUT_0_NUMEL; i++) s = s * 1103515245u + 12345u, x[i] = (float)((s >> 9) % 2000) / 1000.0f - 1.0f;
  }

  /* What is linked in, read without a GPU. */
  drk_module_t *mod;
  drk_status_t st = model_module(NULL, &mod);
  if (st) return fail(st, "reading the embedded module");
  printf("model: %s\n", drk_module_provenance(mod));
  drk_module_destroy(mod);
  const int64_t in_dims[] = MODEL_INPUT_0_DIMS, out_dims[] = MODEL_OUTPUT_0_DIMS;
  print_dims("input '" MODEL_INPUT_0_NAME "' float32", in_dims, MODEL_INPUT_0_RANK);
  print_dims(", output '" MODEL_OUTPUT_0_NAME "' float32", out_dims, MODEL_OUTPUT_0_RANK);
  printf("\n");
  fflush(stdout);

  model_t *m;
  if ((st = model_create(&m, NULL))) return fail(st, "starting the model");
  st = model_run(m, x, y);
  model_destroy(m);
  if (st) return fail(st, "running the model");

  if (argc > 2) {
    FILE *f = fopen(argv[2], "wb");
    if (!f || fwrite(y, 1, sizeof y, f) != sizeof y || fclose(f) != 0) {
      fprintf(stderr, "app: cannot write %s\n", argv[2]);
      return 1;
    }
  }
  /* top 5 of the output, by value */
  int top[5], k = MODEL_OUTPUT_0_NUMEL < 5 ? (int)MODEL_OUTPUT_0_NUMEL : 5;
  for (int t = 0; t < k; t++) {
    int best = -1;
    for (int i = 0; i < (int)MODEL_OUTPUT_0_NUMEL; i++) {
      int taken = 0;
      for (int u = 0; u < t; u++) taken |= top[u] == i;
      if (!taken && (best < 0 || y[i] > y[best])) best = i;
    }
    top[t] = best;
    printf("top %d: class %d score %.6g\n", t + 1, best, y[best]);
  }
  return 0;
}
