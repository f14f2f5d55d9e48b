/* Attribute checks of graph IR nodes from the table in graph_attrs.def (graph_attrs.h).
 *
 * The interpreter and the lowering read attributes with defaults (drk_node_attr_int ...), so
 * a misspelled name, a float where ints are meant or a zero stride would silently run as the
 * default or as garbage; ONNX Runtime refuses such nodes at load time. These checks run in the
 * verifier, which every path (drkc run, the compile pipeline, the tests' interpreter runs after
 * import) passes through, so there is one answer for a node. */
#include "graph_attrs.h"

#include <stdio.h>
#include <string.h>

static const drk_attr_spec_t specs[] = {
#define DRK_ATTR(OP, NAME, KIND, RULE, ALLOWED, SINCE, REQ) \
  {DRK_OP_##OP, #NAME, DRK_ATTR_##KIND, DRK_AR_##RULE, ALLOWED, SINCE, REQ},
#include "graph_attrs.def"
#undef DRK_ATTR
};

/* ConvNHWC and the NHWC pools carry their ONNX op's attributes (layout_nhwc.c copies them). */
static drk_op_t table_op(drk_op_t op) {
  switch (op) {
    case DRK_OP_CONV_NHWC: return DRK_OP_CONV;
    case DRK_OP_MAX_POOL_NHWC: return DRK_OP_MAX_POOL;
    case DRK_OP_AVERAGE_POOL_NHWC: return DRK_OP_AVERAGE_POOL;
    default: return op;
  }
}

const drk_attr_spec_t *drk_attr_spec_find(drk_op_t op, const char *name) {
  op = table_op(op);
  for (size_t i = 0; i < DRK_ARRAY_LEN(specs); i++)
    if (specs[i].op == op && strcmp(specs[i].name, name) == 0) return &specs[i];
  return NULL;
}

static const char *kind_name(drk_attr_kind_t k) {
  static const char *const names[] = {"int", "float", "string", "ints", "floats", "strings", "tensor"};
  return (unsigned)k < DRK_ARRAY_LEN(names) ? names[k] : "?";
}

/* "a, b, c" for the message about an unknown attribute. */
static void op_attr_names(drk_op_t op, char *buf, size_t cap) {
  size_t n = 0;
  buf[0] = 0;
  op = table_op(op);
  for (size_t i = 0; i < DRK_ARRAY_LEN(specs) && n + 1 < cap; i++)
    if (specs[i].op == op && specs[i].since != DRK_ATTR_INTERNAL) /* drkc's own: no model may set it */
      n += (size_t)snprintf(buf + n, cap - n, "%s%s", n ? ", " : "", specs[i].name);
  if (!buf[0]) snprintf(buf, cap, "none");
}

static bool in_enum(const char *allowed, const char *s) {
  size_t len = strlen(s);
  for (const char *p = allowed; *p;) {
    const char *e = strchr(p, '|');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n == len && memcmp(p, s, n) == 0) return true;
    if (!e) break;
    p = e + 1;
  }
  return false;
}

typedef struct {
  const drk_node_t *n;
  drk_loc_t loc;
  drk_diag_t *d;
  bool ok;
} actx_t;

static void DRK_PRINTF(3, 4) bad(actx_t *c, const drk_attr_t *a, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  drk_diag_error(c->d, c->loc, "%s: attribute '%s' %s", drk_op_name(c->n->op), a->name, msg);
  c->ok = false;
}

/* Spatial dims of the node's data input, -1 when its rank is not known yet. */
static int spatial_rank(const drk_node_t *n) {
  const drk_value_t *x = n->n_inputs > 0 ? n->inputs[0] : NULL;
  return x && x->shape.rank >= 2 ? x->shape.rank - 2 : -1;
}

static void check_ints(actx_t *c, const drk_attr_t *a, const drk_attr_spec_t *s) {
  const int64_t *v = s->kind == DRK_ATTR_INT ? &a->i : a->ints;
  size_t n = s->kind == DRK_ATTR_INT ? 1 : a->n;
  int64_t lo = s->rule == DRK_AR_POS || s->rule == DRK_AR_SPATIAL || s->rule == DRK_AR_KSHAPE ? 1 : 0;
  int sr = spatial_rank(c->n);
  if (s->rule == DRK_AR_SPATIAL || s->rule == DRK_AR_SPATIAL0 || s->rule == DRK_AR_KSHAPE || s->rule == DRK_AR_PADS) {
    size_t want = (size_t)sr * (s->rule == DRK_AR_PADS ? 2 : 1);
    if (sr >= 0 && n != want) {
      bad(c, a, "has %zu values; input '%s' has %d spatial dims, so it needs %zu", n, c->n->inputs[0]->name, sr, want);
      return;
    }
  }
  if (s->rule == DRK_AR_ANY || s->rule == DRK_AR_DTYPE) {
    drk_dtype_t t;
    if (s->rule == DRK_AR_DTYPE && !drk_dtype_from_onnx((int)a->i, &t))
      bad(c, a, "= %lld is not an ONNX dtype drkc knows", (long long)a->i);
    return;
  }
  for (size_t i = 0; i < n; i++) {
    if (s->rule == DRK_AR_BOOL ? v[i] != 0 && v[i] != 1 : v[i] < lo) {
      const char *want = s->rule == DRK_AR_BOOL ? "0 or 1" : lo ? "positive" : "non-negative";
      if (s->kind == DRK_ATTR_INT) bad(c, a, "= %lld must be %s", (long long)v[i], want);
      else bad(c, a, "value %zu = %lld must be %s", i, (long long)v[i], want);
      return;
    }
  }
  if (s->rule == DRK_AR_KSHAPE && c->n->n_inputs > 1 && c->n->inputs[1]) {
    /* W is [OC, C/group, k...] (ConvTranspose: [C, OC/group, k...]); ConvNHWC's is
     * [OC, k..., C/group] */
    const drk_shape_t *w = &c->n->inputs[1]->shape;
    int off = c->n->op == DRK_OP_CONV_NHWC ? 1 : 2;
    if (w->rank != (int)n + 2) return;
    for (size_t i = 0; i < n; i++) {
      const drk_dim_t *d = &w->dims[off + (int)i];
      if (!d->sym && d->size != v[i]) {
        bad(c, a, "value %zu = %lld disagrees with W '%s' (kernel dim %lld)", i, (long long)v[i],
            c->n->inputs[1]->name, (long long)d->size);
        return;
      }
    }
  }
}

bool drk_node_check_attrs(const drk_node_t *n, drk_loc_t loc, drk_diag_t *d) {
  actx_t c = {n, loc, d, true};
  for (int i = 0; i < n->n_attrs; i++) {
    const drk_attr_t *a = &n->attrs[i];
    const drk_attr_spec_t *s = drk_attr_spec_find(n->op, a->name);
    if (!s) {
      char names[400];
      op_attr_names(n->op, names, sizeof names);
      bad(&c, a, "is not an attribute of %s (it takes: %s)", drk_op_name(n->op), names);
      continue;
    }
    if (a->kind != s->kind) {
      bad(&c, a, "must be %s, not %s", kind_name(s->kind), kind_name(a->kind));
      continue;
    }
    if (s->kind == DRK_ATTR_INT || s->kind == DRK_ATTR_INTS) check_ints(&c, a, s);
    else if (s->rule == DRK_AR_ENUM && s->kind == DRK_ATTR_STRING && !in_enum(s->allowed, a->s ? a->s : ""))
      bad(&c, a, "= '%s' is not one of %s", a->s ? a->s : "", s->allowed);
  }
  drk_op_t op = table_op(n->op);
  for (size_t i = 0; i < DRK_ARRAY_LEN(specs); i++)
    if (specs[i].op == op && specs[i].required && !drk_node_attr(n, specs[i].name)) {
      drk_diag_error(d, loc, "%s: required attribute '%s' is missing", drk_op_name(n->op), specs[i].name);
      c.ok = false;
    }
  return c.ok;
}
