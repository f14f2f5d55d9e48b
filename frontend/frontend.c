/* Model loading by file kind (see frontend.h). */
#include "frontend/frontend.h"

#include <stdlib.h>
#include <string.h>

#include "frontend/onnx/onnx_import.h"

drk_graph_t *drk_frontend_load(const char *path, drk_diag_t *d) { return drk_frontend_load_bound(path, NULL, d); }

drk_graph_t *drk_frontend_load_bound(const char *path, const char *bind, drk_diag_t *d) {
  size_t n = strlen(path);
  if (n > 5 && strcmp(path + n - 5, ".drkg") == 0) {
    size_t len;
    char *text = drk_read_file(path, &len, d);
    if (!text) return NULL;
    drk_graph_t *g = drk_graph_parse(text, len, path, d);
    free(text);
    return g;
  }
  return drk_onnx_import_bound(path, bind, d);
}
