/* Graph IR printer: the textual form (.drkg) described in docs/graph-ir.md.
 *
 * Requires a graph built by the builder or the parser (it may be invalid: the printer never
 * reads past what the structures hold). Guarantees that the output re-parses into a graph
 * that prints identically (print(parse(print(g))) == print(g)) as long as value names are
 * unique and every input is printed before its use; constants print as exact hex bytes,
 * floats with the shortest %.Ng that reads back to the same double. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"

/* Words the lexer reserves: a symbolic dim or attribute name spelled like one is quoted. */
static const char *const reserved[] = {"graph", "const", "return", "loc", "onnx",
                                       "tensor", "inf", "nan", "_"};

static bool is_ident(const char *s) {
  if (!s || !*s || !((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_')) return false;
  for (const char *p = s; *p; p++)
    if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_'))
      return false;
  for (size_t i = 0; i < DRK_ARRAY_LEN(reserved); i++)
    if (strcmp(s, reserved[i]) == 0) return false;
  return true;
}

/* Value and graph names after % / @: letters, digits, _ . $ (anything else is quoted). */
static bool is_bare_name(const char *s) {
  if (!s || !*s) return false;
  for (const char *p = s; *p; p++)
    if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' ||
          *p == '.' || *p == '$'))
      return false;
  return true;
}

static void print_quoted(FILE *out, const char *s) {
  fputc('"', out);
  for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
    switch (*p) {
      case '"': fputs("\\\"", out); break;
      case '\\': fputs("\\\\", out); break;
      case '\n': fputs("\\n", out); break;
      case '\t': fputs("\\t", out); break;
      case '\r': fputs("\\r", out); break;
      default:
        if (*p < 0x20 || *p == 0x7f) fprintf(out, "\\x%02x", *p);
        else fputc(*p, out);
    }
  }
  fputc('"', out);
}

static void print_name(FILE *out, char sigil, const char *name) {
  fputc(sigil, out);
  if (is_bare_name(name)) fputs(name, out);
  else print_quoted(out, name);
}

static void print_ident_or_quoted(FILE *out, const char *s) {
  if (is_ident(s)) fputs(s, out);
  else print_quoted(out, s);
}

/* Shortest decimal that reads back to the same double; always lexes as a float literal. */
static void print_double(FILE *out, double v) {
  if (isnan(v)) {
    fputs(signbit(v) ? "-nan" : "nan", out);
    return;
  }
  if (isinf(v)) {
    fputs(v < 0 ? "-inf" : "inf", out);
    return;
  }
  char buf[40];
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (strtod(buf, NULL) == v) break;
  }
  if (!strpbrk(buf, ".e")) strcat(buf, ".0");
  fputs(buf, out);
}

static void print_type(FILE *out, drk_dtype_t dt, const drk_shape_t *s) {
  fputs(dt < DRK_DT_COUNT ? drk_dtype_name(dt) : "?", out);
  if (s->rank < 0) {
    fputs("[*]", out);
    return;
  }
  fputc('[', out);
  for (int i = 0; i < s->rank; i++) {
    if (i) fputs(", ", out);
    if (s->dims[i].sym) print_ident_or_quoted(out, s->dims[i].sym);
    else fprintf(out, "%lld", (long long)s->dims[i].size);
  }
  fputc(']', out);
}

static void print_data(FILE *out, const drk_value_t *v, size_t max_bytes) {
  if (v->nbytes > max_bytes || (v->nbytes && !v->data)) {
    fprintf(out, "elided(%zu bytes)", v->nbytes);
    return;
  }
  static const char hexd[] = "0123456789abcdef";
  const unsigned char *p = v->data;
  fputs("hex\"", out);
  for (size_t i = 0; i < v->nbytes; i++) {
    fputc(hexd[p[i] >> 4], out);
    fputc(hexd[p[i] & 15], out);
  }
  fputc('"', out);
}

static void print_attr(FILE *out, const drk_attr_t *a, size_t max_bytes) {
  print_ident_or_quoted(out, a->name);
  fputs(" = ", out);
  switch (a->kind) {
    case DRK_ATTR_INT: fprintf(out, "%lld", (long long)a->i); break;
    case DRK_ATTR_FLOAT: print_double(out, a->f); break;
    case DRK_ATTR_STRING: print_quoted(out, a->s); break;
    case DRK_ATTR_INTS:
      if (!a->n) fputs("ints[]", out);
      else {
        fputc('[', out);
        for (size_t i = 0; i < a->n; i++) fprintf(out, "%s%lld", i ? ", " : "", (long long)a->ints[i]);
        fputc(']', out);
      }
      break;
    case DRK_ATTR_FLOATS:
      if (!a->n) fputs("floats[]", out);
      else {
        fputc('[', out);
        for (size_t i = 0; i < a->n; i++) {
          if (i) fputs(", ", out);
          print_double(out, a->floats[i]);
        }
        fputc(']', out);
      }
      break;
    case DRK_ATTR_STRINGS:
      if (!a->n) fputs("strings[]", out);
      else {
        fputc('[', out);
        for (size_t i = 0; i < a->n; i++) {
          if (i) fputs(", ", out);
          print_quoted(out, a->strings[i]);
        }
        fputc(']', out);
      }
      break;
    case DRK_ATTR_TENSOR:
      if (!a->tensor) {
        fputs("tensor<?>", out);
        break;
      }
      fputs("tensor<", out);
      print_type(out, a->tensor->dtype, &a->tensor->shape);
      fputs("> ", out);
      print_data(out, a->tensor, max_bytes);
      break;
  }
}

static void print_value_list(FILE *out, drk_value_t *const *vs, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (i) fputs(", ", out);
    if (vs[i]) print_name(out, '%', vs[i]->name);
    else fputc('_', out);
  }
}

static void print_def(FILE *out, const drk_value_t *v) {
  print_name(out, '%', v->name);
  fputs(": ", out);
  print_type(out, v->dtype, &v->shape);
}

void drk_graph_print_ex(const drk_graph_t *g, FILE *out, size_t max_const_bytes) {
  fputs("graph ", out);
  print_name(out, '@', g->name);
  fputc('(', out);
  for (size_t i = 0; i < g->n_inputs; i++) {
    if (i) fputs(", ", out);
    print_def(out, g->inputs[i]);
  }
  fputs(") -> (", out);
  print_value_list(out, g->outputs, g->n_outputs);
  fputs(") {\n", out);
  for (size_t i = 0; i < g->n_consts; i++) {
    fputs("  ", out);
    print_def(out, g->consts[i]);
    fputs(" = const ", out);
    print_data(out, g->consts[i], max_const_bytes);
    fputc('\n', out);
  }
  for (size_t k = 0; k < g->n_nodes; k++) {
    const drk_node_t *n = g->nodes[k];
    if (n->dead) continue;
    fputs("  ", out);
    for (int i = 0; i < n->n_outputs; i++) {
      if (i) fputs(", ", out);
      print_def(out, n->outputs[i]);
    }
    fprintf(out, " = %s(", n->op < DRK_OP_COUNT ? drk_op_name(n->op) : "?");
    print_value_list(out, n->inputs, (size_t)n->n_inputs);
    fputc(')', out);
    if (n->n_attrs) {
      fputs(" {", out);
      for (int i = 0; i < n->n_attrs; i++) {
        if (i) fputs(", ", out);
        print_attr(out, &n->attrs[i], max_const_bytes);
      }
      fputc('}', out);
    }
    if (n->loc.node_name || n->loc.node_index >= 0) {
      fputs(" loc(onnx", out);
      if (n->loc.node_name) {
        fputc(' ', out);
        print_quoted(out, n->loc.node_name);
      }
      if (n->loc.node_index >= 0) fprintf(out, " #%d", n->loc.node_index);
      fputc(')', out);
    }
    fputc('\n', out);
  }
  fputs("  return", out);
  if (g->n_outputs) fputc(' ', out);
  print_value_list(out, g->outputs, g->n_outputs);
  fputs("\n}\n", out);
}

void drk_graph_print(const drk_graph_t *g, FILE *out) { drk_graph_print_ex(g, out, SIZE_MAX); }

char *drk_graph_print_string(const drk_graph_t *g, size_t max_const_bytes, size_t *out_len) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) return NULL;
  drk_graph_print_ex(g, f, max_const_bytes);
  if (fclose(f) != 0) {
    free(buf);
    return NULL;
  }
  if (out_len) *out_len = len;
  return buf;
}
