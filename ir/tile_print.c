/* Tile IR printer: the canonical text form (.drkt) that tile_parse.y reads back.
 *
 * Requires: a module whose values and layouts have names (the builder and parser give
 * them). Guarantees: output depends only on the IR, never on how it was written, so
 * print(parse(print(m))) == print(m) byte for byte; floats are printed so that strtod
 * reads back the same double. Works on unverified IR too (for dumps while debugging). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tile.h"

static void print_float(double f, FILE *out) {
  if (isnan(f)) {
    fputs("nan", out);
    return;
  }
  if (isinf(f)) {
    fputs(f < 0 ? "-inf" : "inf", out);
    return;
  }
  char buf[64];
  snprintf(buf, sizeof buf, "%.17g", f);
  /* Shortest form that reads back exactly, so hand-written 0.5 stays 0.5. */
  for (int p = 1; p < 17; p++) {
    char t[64];
    snprintf(t, sizeof t, "%.*g", p, f);
    if (strtod(t, NULL) == f) {
      memcpy(buf, t, sizeof t);
      break;
    }
  }
  fputs(buf, out);
  if (!strpbrk(buf, ".e")) fputs(".0", out); /* keep it a float literal */
}

static void print_attr_value(const drk_tile_attr_t *a, FILE *out) {
  switch (a->kind) {
  case DRK_TA_INT: fprintf(out, "%lld", (long long)a->i); break;
  case DRK_TA_FLOAT: print_float(a->f, out); break;
  case DRK_TA_IDENT: fputs(a->s, out); break;
  case DRK_TA_INTS:
    fputc('[', out);
    for (size_t i = 0; i < a->n; i++) fprintf(out, "%s%lld", i ? ", " : "", (long long)a->ints[i]);
    fputc(']', out);
    break;
  case DRK_TA_LAYOUT: fprintf(out, "#%s", a->layout ? a->layout->name : "?"); break;
  }
}

static void print_attrs(const drk_tile_attr_t *attrs, int n, FILE *out) {
  if (n <= 0) return;
  fputs(" {", out);
  for (int i = 0; i < n; i++) {
    fprintf(out, "%s%s = ", i ? ", " : "", attrs[i].name);
    print_attr_value(&attrs[i], out);
  }
  fputc('}', out);
}

static void print_type(const drk_tile_type_t *t, FILE *out) {
  char buf[256];
  drk_tile_type_format(t, buf, sizeof buf);
  fputs(buf, out);
}

static void print_int_list(const char *key, const int *v, int n, FILE *out) {
  fprintf(out, "%s = [", key);
  for (int i = 0; i < n; i++) fprintf(out, "%s%d", i ? ", " : "", v[i]);
  fputc(']', out);
}

void drk_tile_layout_print(const drk_tile_layout_t *l, FILE *out) {
  fprintf(out, "#%s = %s{", l->name, drk_tile_layout_kind_name(l->kind));
  switch (l->kind) {
  case DRK_TL_BLOCKED:
    print_int_list("spt", l->spt, l->rank, out);
    print_int_list(", tpw", l->tpw, l->rank, out);
    print_int_list(", wpc", l->wpc, l->rank, out);
    print_int_list(", order", l->order, l->rank, out);
    break;
  case DRK_TL_SLICE: fprintf(out, "parent = #%s, dim = %d", l->parent->name, l->dim); break;
  case DRK_TL_MMA_SYNC:
  case DRK_TL_WGMMA:
  case DRK_TL_MFMA:
    print_int_list("wpc", l->wpc, 2, out);
    print_int_list(", instr", l->instr, 2, out);
    break;
  case DRK_TL_DOT_OP:
    fprintf(out, "parent = #%s, op_idx = %d, k_width = %d", l->parent->name, l->op_idx, l->k_width);
    break;
  case DRK_TL_SHARED:
    fprintf(out, "swizzle = %d, ", l->swizzle);
    print_int_list("order", l->order, l->rank, out);
    break;
  case DRK_TL_COUNT: break;
  }
  fputs("}\n", out);
}

static void indent(int depth, FILE *out) {
  for (int i = 0; i < depth; i++) fputs("  ", out);
}

static void print_region_body(const drk_tile_region_t *r, int depth, FILE *out);

static void print_op(const drk_tile_op_t *op, int depth, FILE *out) {
  indent(depth, out);
  for (int i = 0; i < op->n_results; i++) fprintf(out, "%s%%%s", i ? ", " : "", op->results[i]->name);
  if (op->n_results) fputs(" = ", out);
  fputs(drk_tile_op_name(op->code), out);
  for (int i = 0; i < op->n_operands; i++) fprintf(out, "%s%%%s", i ? ", " : " ", op->operands[i]->name);
  print_attrs(op->attrs, op->n_attrs, out);
  for (int i = 0; i < op->n_results; i++) {
    fputs(i ? ", " : " : ", out);
    print_type(&op->results[i]->type, out);
  }
  for (int ri = 0; ri < op->n_regions; ri++) {
    const drk_tile_region_t *r = op->regions[ri];
    fputc(' ', out);
    if (r->n_args) {
      fputc('(', out);
      for (int i = 0; i < r->n_args; i++) {
        fprintf(out, "%s%%%s: ", i ? ", " : "", r->args[i]->name);
        print_type(&r->args[i]->type, out);
      }
      fputs(") ", out);
    }
    fputs("{\n", out);
    print_region_body(r, depth + 1, out);
    indent(depth, out);
    fputc('}', out);
  }
  fputc('\n', out);
}

static void print_region_body(const drk_tile_region_t *r, int depth, FILE *out) {
  for (size_t i = 0; i < r->n_ops; i++) print_op(r->ops[i], depth, out);
}

static void print_grid_dim(const drk_tile_grid_dim_t *g, FILE *out) {
  if (!g->param) fprintf(out, "%lld", (long long)g->c);
  else if (g->c == 1) fprintf(out, "%%%s", g->param->name);
  else fprintf(out, "cdiv(%%%s, %lld)", g->param->name, (long long)g->c);
}

void drk_tile_kernel_print(const drk_tile_module_t *m, const drk_tile_kernel_t *k, FILE *out) {
  (void)m;
  fprintf(out, "kernel @%s(", k->name);
  for (int i = 0; i < k->n_params; i++) {
    fprintf(out, "%s%%%s: ", i ? ", " : "", k->params[i]->name);
    print_type(&k->params[i]->type, out);
    print_attrs(k->param_attrs[i], k->param_n_attrs[i], out);
  }
  fputs(") grid(", out);
  for (int i = 0; i < 3; i++) {
    if (i) fputs(", ", out);
    print_grid_dim(&k->grid[i], out);
  }
  fprintf(out, ") block(%lld)", (long long)k->block);
  if (k->cluster[0] != 1 || k->cluster[1] != 1 || k->cluster[2] != 1)
    fprintf(out, " cluster(%lld, %lld, %lld)", (long long)k->cluster[0], (long long)k->cluster[1],
            (long long)k->cluster[2]);
  fprintf(out, " smem(%lld) {\n", (long long)k->smem);
  print_region_body(k->body, 1, out);
  fputs("}\n", out);
}

void drk_tile_print(const drk_tile_module_t *m, FILE *out) {
  for (size_t i = 0; i < m->n_layouts; i++) drk_tile_layout_print(m->layouts[i], out);
  for (size_t i = 0; i < m->n_kernels; i++) {
    if (i || m->n_layouts) fputc('\n', out);
    drk_tile_kernel_print(m, m->kernels[i], out);
  }
}
