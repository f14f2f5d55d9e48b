/* The attribute table of the graph IR ops (graph_attrs.def) and the checks it drives.
 *
 * One definition of what every op accepts, shared by everything that makes or reads graphs:
 * the verifier checks every node against it (so the interpreter, `drkc run` and the compile
 * path refuse the same nodes, as ONNX Runtime does), the ONNX importer refuses an attribute
 * the model's opset does not have yet, the .drkg parser reads a number as the kind the table
 * gives (text writes 1.0 as 1). */
#ifndef DRK_IR_GRAPH_ATTRS_H
#define DRK_IR_GRAPH_ATTRS_H

#include "graph.h"

typedef enum drk_attr_rule {
  DRK_AR_ANY,
  DRK_AR_POS,      /* every element > 0 */
  DRK_AR_NONNEG,   /* every element >= 0 */
  DRK_AR_BOOL,     /* 0 or 1 */
  DRK_AR_SPATIAL,  /* one value > 0 per spatial dim of input 0 */
  DRK_AR_SPATIAL0, /* one value >= 0 per spatial dim of input 0 */
  DRK_AR_PADS,     /* begin and end values >= 0 per spatial dim */
  DRK_AR_KSHAPE,   /* SPATIAL, and equal to W's (input 1) spatial dims */
  DRK_AR_DTYPE,    /* an ONNX dtype code drkc knows */
  DRK_AR_ENUM      /* one of spec->allowed ("a|b|c") */
} drk_attr_rule_t;

/* The `since` of an attribute only drkc's passes write (pad-matmul-n's result_n): no model
 * may carry it (the importer says so). tools/gen_graph_attrs.py INTERNAL_OPSET. */
#define DRK_ATTR_INTERNAL 1000

typedef struct drk_attr_spec {
  drk_op_t op;
  const char *name;
  drk_attr_kind_t kind;
  drk_attr_rule_t rule;
  const char *allowed; /* DRK_AR_ENUM: "a|b|c"; else NULL */
  int since;           /* ai.onnx opset that introduced the attribute; DRK_ATTR_INTERNAL: drkc's own */
  bool required;
} drk_attr_spec_t;

/* The row of op's attribute `name` (the channels-last ops use their ONNX op's rows); NULL when
 * op takes no such attribute. Borrowed, static. */
const drk_attr_spec_t *drk_attr_spec_find(drk_op_t op, const char *name);

/* Checks n's attributes against the table: unknown names (with the names op takes), kinds,
 * required ones present, values against the rule (counts against input 0's rank and
 * kernel_shape against W's dims where those are known). Each problem is one error at loc.
 * Returns whether there was none. */
bool drk_node_check_attrs(const drk_node_t *n, drk_loc_t loc, drk_diag_t *d);

#endif
