/* Loading a model of any kind drkc reads: an ONNX model (.onnx, frontend/onnx) or a graph dump
 * in the textual graph IR (.drkg). The caller owns the returned graph (drk_graph_destroy);
 * errors are reported through d (file and location) and give NULL. */
#ifndef DRK_FRONTEND_H
#define DRK_FRONTEND_H

#include "ir/graph.h"

drk_graph_t *drk_frontend_load(const char *path, drk_diag_t *d);
/* drk_frontend_load with the sizes the caller will bind (drk_onnx_import_bound; NULL: none). */
drk_graph_t *drk_frontend_load_bound(const char *path, const char *bind, drk_diag_t *d);

#endif
