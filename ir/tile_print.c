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

static void print_kernel(const drk_tile_kernel_t *k, const char *name, FILE *out);

void drk_tile_kernel_print(const drk_tile_module_t *m, const drk_tile_kernel_t *k, FILE *out) {
  (void)m;
  print_kernel(k, k->name, out);
}

static void print_kernel(const drk_tile_kernel_t *k, const char *name, FILE *out) {
  fprintf(out, "kernel @%s(", name);
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

/* ---- canonical text ---- */

static bool id_char(char c) {
  return c == '_' || c == '.' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* Names seen so far in one text, by sigil: name -> its order of first appearance. */
typedef struct names {
  const char **key; /* borrowed from the text; key_len bytes */
  size_t *key_len, *index;
  size_t cap, n[2];
} names_t;


/* The index of name (s, n) under sigil (0: '%', 1: '#'), a new one at its first appearance;
 * SIZE_MAX when out of memory. */
static size_t names_get(names_t *t, int sigil, const char *s, size_t n) {
  if (2 * (t->n[0] + t->n[1] + 1) > t->cap) {
    names_t g = {.cap = t->cap ? 2 * t->cap : 256, .n = {t->n[0], t->n[1]}};
    g.key = calloc(g.cap, sizeof *g.key), g.key_len = calloc(g.cap, sizeof *g.key_len);
    g.index = calloc(g.cap, sizeof *g.index);
    if (!g.key || !g.key_len || !g.index) {
      free(g.key), free(g.key_len), free(g.index);
      return SIZE_MAX;
    }
    for (size_t i = 0; i < t->cap; i++)
      if (t->key[i]) {
        size_t j = (size_t)drk_hash_fnv1a(t->key[i], t->key_len[i], 0) & (g.cap - 1);
        while (g.key[j]) j = (j + 1) & (g.cap - 1);
        g.key[j] = t->key[i], g.key_len[j] = t->key_len[i], g.index[j] = t->index[i];
      }
    free(t->key), free(t->key_len), free(t->index);
    *t = g;
  }
  /* the sigil is part of the key: the byte before the name */
  const char *key = s - 1;
  size_t j = (size_t)drk_hash_fnv1a(key, n + 1, 0) & (t->cap - 1);
  for (; t->key[j]; j = (j + 1) & (t->cap - 1))
    if (t->key_len[j] == n + 1 && !memcmp(t->key[j], key, n + 1)) return t->index[j];
  t->key[j] = key, t->key_len[j] = n + 1, t->index[j] = t->n[sigil]++;
  return t->index[j];
}

char *drk_tile_kernel_canonical(const drk_tile_module_t *m, const drk_tile_kernel_t *k, size_t *out_len) {
  char *text = NULL, *canon = NULL;
  size_t len = 0, clen = 0;
  const drk_tile_layout_t **used = NULL;
  size_t n_used = 0;
  names_t names = {0};
  FILE *f = open_memstream(&text, &len);
  if (!f) return NULL;
  print_kernel(k, "k", f);
  if (fflush(f) != 0 || !(used = calloc(m->n_layouts + 1, sizeof *used))) goto fail;
  /* the layouts it names, in order of first appearance, then their parents */
  size_t kernel_len = len;
  for (size_t i = 0; i < kernel_len; i++) {
    if (text[i] != '#' || i + 1 >= kernel_len || !id_char(text[i + 1])) continue;
    size_t e = i + 1;
    while (e < kernel_len && id_char(text[e])) e++;
    for (size_t j = 0; j < m->n_layouts; j++) {
      const drk_tile_layout_t *l = m->layouts[j];
      if (strlen(l->name) != e - i - 1 || memcmp(l->name, text + i + 1, e - i - 1)) continue;
      bool seen = false;
      for (size_t u = 0; u < n_used && !seen; u++) seen = used[u] == l;
      if (!seen) used[n_used++] = l;
      break;
    }
    i = e - 1;
  }
  for (size_t u = 0; u < n_used; u++) {
    const drk_tile_layout_t *p = used[u]->parent;
    bool seen = !p;
    for (size_t v = 0; v < n_used && !seen; v++) seen = used[v] == p;
    if (!seen) used[n_used++] = p;
  }
  for (size_t u = 0; u < n_used; u++) drk_tile_layout_print(used[u], f);
  if (fclose(f) != 0) {
    f = NULL;
    goto fail;
  }
  f = NULL;
  /* every %name and #name becomes its sigil and its order of first appearance */
  FILE *c = open_memstream(&canon, &clen);
  if (!c) goto fail;
  for (size_t i = 0; i < len; i++) {
    int sigil = text[i] == '%' ? 0 : text[i] == '#' ? 1 : -1;
    if (sigil < 0 || i + 1 >= len || !id_char(text[i + 1])) {
      fputc(text[i], c);
      continue;
    }
    size_t e = i + 1;
    while (e < len && id_char(text[e])) e++;
    size_t ix = names_get(&names, sigil, text + i + 1, e - i - 1);
    if (ix == SIZE_MAX) {
      fclose(c);
      goto fail;
    }
    fprintf(c, "%c%zu", text[i], ix);
    i = e - 1;
  }
  if (fclose(c) != 0) goto fail;
  free(text), free(used), free(names.key), free(names.key_len), free(names.index);
  *out_len = clen;
  return canon;
fail:
  if (f) fclose(f);
  free(text), free(canon), free(used), free(names.key), free(names.key_len), free(names.index);
  return NULL;
}
