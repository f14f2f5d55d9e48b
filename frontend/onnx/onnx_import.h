/* ONNX importer: ONNX model files -> graph IR (ir/graph.h).
 *
 * Accepts IR versions 3-14 and the ai.onnx opsets 1-25; every node is rewritten into its
 * opset-21 form (docs/onnx-import.md lists the ops and the rewrites). Nodes of other domains,
 * ops drkc does not know, GRAPH attributes (If/Loop/Scan), string and complex tensors are
 * rejected with an error that names the node (name and index), the op type, the domain and
 * the opset:
 *   model.onnx: node 'lstm_1' (#4): error: unsupported op 'LSTM' (domain 'ai.onnx', opset 17)
 * Every error a user can cause (including a truncated or corrupt file) is reported through
 * `d`; all error messages about valid-but-unsupported models begin with "unsupported".
 *
 * The result holds: graph inputs (initializers excluded), constants for initializers and
 * Constant nodes, nodes carrying loc {file, node_name, node_index}, graph outputs. Values get
 * dtype and shape from the model's type information (inputs, outputs, value_info) where
 * given; node outputs without such information get a dtype where it follows trivially from
 * the op (Cast, comparisons, same-as-input ops) and unknown rank (shape inference is a later
 * pass). A dim with dim_param becomes a symbolic dim of that name; a dim with neither value
 * nor param gets a fresh symbolic name ("unk__N").
 *
 * Ownership: the returned graph belongs to the caller (drk_graph_destroy). Weights are not
 * copied: constants point into the unpacked model (kept alive as a graph blob) or into
 * mmaps of external-data files (also graph blobs); all are released with the graph. Strings
 * passed in are not retained. */
#ifndef DRK_ONNX_IMPORT_H
#define DRK_ONNX_IMPORT_H

#include <stddef.h>

#include "ir/graph.h"

/* Imports the model at `path`. External data files are looked up relative to the model's
 * directory (absolute paths and paths with "..", that escape it, are errors). Returns NULL
 * after reporting at least one error through d. */
drk_graph_t *drk_onnx_import(const char *path, drk_diag_t *d);
/* drk_onnx_import knowing the sizes the caller will bind symbolic dims to (bind: NAME=SIZE,...,
 * as drk_graph_bind_dims reads it; the graph keeps its symbols): what must be unrolled at import
 * (LSTM/GRU/RNN over a symbolic sequence length) takes those sizes. */
drk_graph_t *drk_onnx_import_bound(const char *path, const char *bind, drk_diag_t *d);
/* The model's graph inputs only (dtype and shape as declared; no nodes, no outputs): what the
 * sizes of given input files bind, before the model is imported with them. */
drk_graph_t *drk_onnx_import_inputs(const char *path, drk_diag_t *d);

/* Imports a serialized ModelProto from memory (the bytes are only read during the call).
 * `name` is used in messages and as the graph's source (NULL: "<buffer>"). `base_dir` is
 * the directory for external data (NULL: tensors with external data are an error). */
drk_graph_t *drk_onnx_import_buffer(const void *data, size_t size, const char *name,
                                    const char *base_dir, drk_diag_t *d);

#endif
