/* libFuzzer target for the tile IR text form (built only with DRK_FUZZ=ON).
 *
 * Any input: parse must return a module or NULL with an error, never crash or leak. A
 * module that parses must print, and its printed form must parse again and print the same
 * bytes (the round-trip contract); the verifier must run on it without crashing. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tile.h"

static char *print_to_string(const drk_tile_module_t *m, size_t *n) {
  char *buf = NULL;
  FILE *f = open_memstream(&buf, n);
  if (!f) abort();
  drk_tile_print(m, f);
  fclose(f);
  return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  drk_diag_t d;
  drk_diag_init(&d, NULL);
  drk_tile_module_t *m = drk_tile_parse((const char *)data, size, "fuzz.drkt", &d);
  if (!m) {
    if (d.n_errors == 0) abort(); /* a failed parse must say why */
    return 0;
  }
  drk_tile_verify(m, &d);
  size_t n1, n2;
  char *p1 = print_to_string(m, &n1);
  drk_diag_t d2;
  drk_diag_init(&d2, NULL);
  drk_tile_module_t *m2 = drk_tile_parse(p1, n1, "printed.drkt", &d2);
  if (!m2) {
    fprintf(stderr, "printed form does not parse: %s\n%s", d2.first, p1);
    abort();
  }
  char *p2 = print_to_string(m2, &n2);
  if (n1 != n2 || memcmp(p1, p2, n1) != 0) {
    fprintf(stderr, "print is not a fixed point:\n--- first\n%s--- second\n%s", p1, p2);
    abort();
  }
  free(p1);
  free(p2);
  drk_tile_module_destroy(m2);
  drk_tile_module_destroy(m);
  return 0;
}
