/* libFuzzer target for the graph IR text form: any input must parse or fail with a located
 * error, never crash or leak; what parses must print and re-parse to the same text, and the
 * verifier must run on it without crashing. */
#include <stdlib.h>
#include <string.h>

#include "graph.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  drk_diag_t d;
  drk_diag_init(&d, NULL);
  drk_graph_t *g = drk_graph_parse((const char *)data, size, "fuzz", &d);
  if (!g) {
    if (d.n_errors != 1 || strncmp(d.first, "fuzz", 4) != 0) abort();
    return 0;
  }
  drk_graph_verify(g, &d);
  size_t n1;
  char *p1 = drk_graph_print_string(g, SIZE_MAX, &n1);
  drk_graph_destroy(g);
  if (!p1) return 0;
  drk_diag_init(&d, NULL);
  drk_graph_t *g2 = drk_graph_parse(p1, n1, "printed", &d);
  if (!g2) abort(); /* what parsed once must re-parse after printing */
  char *p2 = drk_graph_print_string(g2, SIZE_MAX, NULL);
  if (!p2 || strcmp(p1, p2) != 0) abort();
  free(p2);
  free(p1);
  drk_graph_destroy(g2);
  return 0;
}
