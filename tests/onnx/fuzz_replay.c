/* A main for a libFuzzer target in the regular build (no clang needed): runs the target on
 * each file given and on deterministic mutants of it (cut short at 16 points, 64 bytes
 * flipped one at a time), so CI runs the fuzzer's code paths on every commit.
 * usage: fuzz_replay FILE...; exit 0 unless a file cannot be read (crashes are crashes). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv) {
  size_t runs = 0;
  for (int a = 1; a < argc; a++) {
    FILE *f = fopen(argv[a], "rb");
    if (!f) {
      perror(argv[a]);
      return 1;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(n > 0 ? (size_t)n : 1), *mut = malloc(n > 0 ? (size_t)n : 1);
    if (!buf || !mut || n < 0 || fread(buf, 1, (size_t)n, f) != (size_t)n) {
      fprintf(stderr, "%s: cannot read\n", argv[a]);
      return 1;
    }
    fclose(f);
    size_t size = (size_t)n;
    LLVMFuzzerTestOneInput(buf, size), runs++;
    for (size_t k = 1; k <= 16 && size; k++) LLVMFuzzerTestOneInput(buf, size * k / 17), runs++;
    uint64_t s = 24 + (uint64_t)a;
    for (int k = 0; k < 64 && size; k++) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      memcpy(mut, buf, size);
      mut[(s >> 33) % size] ^= (uint8_t)(1u << ((s >> 20) & 7));
      LLVMFuzzerTestOneInput(mut, size), runs++;
    }
    free(buf);
    free(mut);
  }
  printf("fuzz_replay: %zu runs over %d files\n", runs, argc - 1);
  return 0;
}
