/* Test runner for self-contained tile IR files (.drkt).
 *
 * `tile_runner FILE`: a file with `# EXPECT-ERROR: LINE:COL: error: TEXT` lines is a
 * negative test: parsing, then verifying, must fail, and the first error reported must be
 * exactly `FILE:LINE:COL: error: TEXT` (the first EXPECT-ERROR line). Any other file is a
 * positive test: it must parse and verify, and print -> parse -> print must be a fixed
 * point, byte for byte (the reparsed module must verify too).
 * `tile_runner --builder`: builds a kernel with the builder API, then checks that it
 * verifies and round-trips the same way.
 * Exit status 0 on success, 1 on failure (with a message on stderr). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tile.h"

static char *print_to_string(const drk_tile_module_t *m) {
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  if (!f) return NULL;
  drk_tile_print(m, f);
  fclose(f);
  return buf;
}

/* Verifies m, then checks print(parse(print(m))) == print(m). */
static int round_trip(drk_tile_module_t *m, const char *what) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  if (!drk_tile_verify(m, &d)) {
    fprintf(stderr, "FAIL %s: does not verify\n", what);
    return 1;
  }
  char *p1 = print_to_string(m);
  drk_tile_module_t *m2 = drk_tile_parse(p1, strlen(p1), "<printed>", &d);
  if (!m2) {
    fprintf(stderr, "FAIL %s: printed form does not parse:\n%s", what, p1);
    free(p1);
    return 1;
  }
  int rc = 0;
  if (!drk_tile_verify(m2, &d)) {
    fprintf(stderr, "FAIL %s: printed form does not verify\n", what);
    rc = 1;
  }
  char *p2 = print_to_string(m2);
  if (strcmp(p1, p2) != 0) {
    fprintf(stderr, "FAIL %s: print is not a fixed point\n--- first\n%s--- second\n%s", what, p1, p2);
    rc = 1;
  }
  free(p1);
  free(p2);
  drk_tile_module_destroy(m2);
  return rc;
}

static int run_file(const char *path) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  size_t len;
  char *text = drk_read_file(path, &len, &d);
  if (!text) return 1;
  char expect[600] = "";
  const char *e = strstr(text, "# EXPECT-ERROR: ");
  if (e) {
    e += strlen("# EXPECT-ERROR: ");
    size_t n = strcspn(e, "\n");
    if (n >= sizeof expect) n = sizeof expect - 1;
    memcpy(expect, e, n);
    expect[n] = 0;
  }
  drk_tile_module_t *m = drk_tile_parse(text, len, path, &d);
  int rc = 0;
  if (expect[0]) {
    if (m) drk_tile_verify(m, &d);
    char want[1100];
    snprintf(want, sizeof want, "%s:%s", path, expect);
    if (d.n_errors == 0) {
      fprintf(stderr, "FAIL %s: expected error '%s', got none\n", path, want);
      rc = 1;
    } else if (strcmp(d.first, want) != 0) {
      fprintf(stderr, "FAIL %s: expected error\n  %s\ngot\n  %s\n", path, want, d.first);
      rc = 1;
    }
  } else if (!m) {
    fprintf(stderr, "FAIL %s: does not parse\n", path);
    rc = 1;
  } else {
    rc = round_trip(m, path);
  }
  drk_tile_module_destroy(m);
  free(text);
  if (rc == 0) printf("ok %s\n", path);
  return rc;
}

/* The graph->tile lowering's view: a masked elementwise kernel and a loop, built by API. */
static int run_builder(void) {
  drk_tile_module_t *m = drk_tile_module_create("<builder>");
  const int spt[] = {4}, tpw[] = {32}, wpc[] = {4}, order[] = {0};
  const drk_tile_layout_t *blk = drk_tile_layout_blocked(m, 1, spt, tpw, wpc, order);
  DRK_ASSERT(drk_tile_layout_blocked(m, 1, spt, tpw, wpc, order) == blk); /* interned */
  drk_tile_kernel_t *k = drk_tile_kernel_create(m, "scale", drk_loc_none);
  drk_tile_value_t *x = drk_tile_kernel_add_param(m, k, "x", drk_tile_type_ptr(DRK_DT_F32), drk_loc_none);
  drk_tile_value_t *y = drk_tile_kernel_add_param(m, k, "y", drk_tile_type_ptr(DRK_DT_F32), drk_loc_none);
  drk_tile_value_t *n = drk_tile_kernel_add_param(m, k, "n", drk_tile_type_scalar(DRK_DT_I32), drk_loc_none);
  drk_tile_param_add_attr(m, k, 0, "align", DRK_TA_INT)->i = 16;
  k->grid[0].param = n;
  k->grid[0].c = 512;
  k->block = 128;

  drk_tile_builder_t b;
  drk_tile_builder_init(&b, m, k);
  const int64_t dims[] = {512};
  drk_tile_type_t i32 = drk_tile_type_scalar(DRK_DT_I32);
  drk_tile_type_t ti = drk_tile_type_tile(DRK_DT_I32, 1, dims, blk);
  drk_tile_type_t tf = drk_tile_type_tile(DRK_DT_F32, 1, dims, blk);
  drk_tile_type_t tb = drk_tile_type_tile(DRK_DT_BOOL, 1, dims, blk);
  drk_tile_type_t tp = drk_tile_type_ptr_tile(DRK_DT_F32, 1, dims, blk);

  drk_tile_op_t *pid_op = drk_tile_build(&b, DRK_TOP_PROGRAM_ID, 0, NULL, 1, &i32);
  drk_tile_op_set_int(m, pid_op, "axis", 0);
  drk_tile_value_t *c512 = drk_tile_build_const_int(&b, 512, i32);
  drk_tile_value_t *base = drk_tile_build1(&b, DRK_TOP_MUL, 2, (drk_tile_value_t *[]){pid_op->results[0], c512}, i32);
  drk_tile_op_t *r = drk_tile_build(&b, DRK_TOP_MAKE_RANGE, 0, NULL, 1, &ti);
  drk_tile_op_set_int(m, r, "start", 0);
  drk_tile_op_set_int(m, r, "end", 512);
  drk_tile_value_t *bs = drk_tile_build1(&b, DRK_TOP_SPLAT, 1, &base, ti);
  drk_tile_value_t *offs = drk_tile_build1(&b, DRK_TOP_ADD, 2, (drk_tile_value_t *[]){bs, r->results[0]}, ti);
  drk_tile_value_t *ns = drk_tile_build1(&b, DRK_TOP_SPLAT, 1, &n, ti);
  drk_tile_op_t *cmp = drk_tile_build(&b, DRK_TOP_CMP, 2, (drk_tile_value_t *[]){offs, ns}, 1, &tb);
  drk_tile_op_set_ident(m, cmp, "pred", "lt");
  drk_tile_value_t *xs = drk_tile_build1(&b, DRK_TOP_SPLAT, 1, &x, tp);
  drk_tile_value_t *xp = drk_tile_build1(&b, DRK_TOP_ADDPTR, 2, (drk_tile_value_t *[]){xs, offs}, tp);
  drk_tile_value_t *zero = drk_tile_build_const_float(&b, 0.0, tf);
  drk_tile_value_t *v =
      drk_tile_build1(&b, DRK_TOP_LOAD, 3, (drk_tile_value_t *[]){xp, cmp->results[0], zero}, tf);
  /* acc = v; for i in 0..3: acc = acc * 0.5 */
  drk_tile_value_t *c0 = drk_tile_build_const_int(&b, 0, i32);
  drk_tile_value_t *c3 = drk_tile_build_const_int(&b, 3, i32);
  drk_tile_value_t *c1 = drk_tile_build_const_int(&b, 1, i32);
  drk_tile_op_t *loop = drk_tile_build_for_begin(&b, c0, c3, c1, 1, &v);
  drk_tile_value_t *acc = loop->regions[0]->args[1];
  drk_tile_value_t *half = drk_tile_build_const_float(&b, 0.5, tf);
  drk_tile_value_t *acc2 = drk_tile_build1(&b, DRK_TOP_MUL, 2, (drk_tile_value_t *[]){acc, half}, tf);
  drk_tile_build_for_end(&b, 1, &acc2);
  drk_tile_value_t *ys = drk_tile_build1(&b, DRK_TOP_SPLAT, 1, &y, tp);
  drk_tile_value_t *yp = drk_tile_build1(&b, DRK_TOP_ADDPTR, 2, (drk_tile_value_t *[]){ys, offs}, tp);
  drk_tile_build(&b, DRK_TOP_STORE, 3, (drk_tile_value_t *[]){yp, loop->results[0], cmp->results[0]}, 0, NULL);
  drk_tile_build(&b, DRK_TOP_RETURN, 0, NULL, 0, NULL);
  DRK_ASSERT(b.depth == 1);

  int rc = round_trip(m, "builder");
  if (rc == 0) {
    /* The verifier must catch what the builder lets through: a use outside its loop. */
    drk_tile_builder_t b2 = b;
    drk_tile_op_t *ret = k->body->ops[k->body->n_ops - 1];
    k->body->n_ops--;
    drk_tile_build1(&b2, DRK_TOP_NEG, 1, &acc2, tf);
    drk_tile_region_append(m, k->body, ret);
    drk_diag_t d;
    drk_diag_init(&d, NULL);
    if (drk_tile_verify(m, &d) || !strstr(d.first, "outside its region")) {
      fprintf(stderr, "FAIL builder: use of a loop-body value after the loop was not caught (%s)\n", d.first);
      rc = 1;
    }
  }
  drk_tile_module_destroy(m);
  if (rc == 0) printf("ok builder\n");
  return rc;
}

/* ---- --canonical: drk_tile_kernel_canonical is equal exactly for kernels equal up to names ---- */

/* A row-sum kernel over a 2-D blocked layout and its slice; NAME, the value prefix V, the
 * constant C and where an unused layout is defined vary. */
static char *canon_source(const char *name, const char *v, int c, bool other_last, const char *lname) {
  char blk[160], sl[160], *src = NULL;
  snprintf(blk, sizeof blk, "#%s = blocked{spt = [1, 4], tpw = [4, 8], wpc = [4, 1], order = [1, 0]}\n", lname);
  snprintf(sl, sizeof sl, "#%s_s = slice{parent = #%s, dim = 1}\n", lname, lname);
  size_t n = 0;
  FILE *f = open_memstream(&src, &n);
  if (!f) return NULL;
  const char *other = "#other = blocked{spt = [4], tpw = [32], wpc = [4], order = [0]}\n";
  fprintf(f, "%s%s%s%s", other_last ? "" : other, blk, sl, other_last ? other : "");
  fprintf(f,
          "kernel @%s(%%%sx: ptr<f32> {align = 16}, %%%sy: ptr<f32> {align = 16}) grid(4, 1, 1) block(128) smem(0) {\n"
          "  %%%sr = make_range {start = 0, end = 16} : tile<16xi32, #%s_s>\n"
          "  %%%sc = constant {value = %d} : tile<16xi32, #%s_s>\n"
          "  %%%so = mul %%%sr, %%%sc : tile<16xi32, #%s_s>\n"
          "  %%%sp = splat %%%sy : tile<16xptr<f32>, #%s_s>\n"
          "  %%%sq = addptr %%%sp, %%%so : tile<16xptr<f32>, #%s_s>\n"
          "  %%%sz = constant {value = 1.0} : tile<16xf32, #%s_s>\n"
          "  store %%%sq, %%%sz\n"
          "  return\n}\n",
          name, v, v, v, lname, v, c, lname, v, v, v, lname, v, v, lname, v, v, v, lname, v, lname, v, v);
  fclose(f);
  return src;
}

static char *canon_of(const char *name, const char *v, int c, bool other_last, const char *lname, size_t *len) {
  char *src = canon_source(name, v, c, other_last, lname);
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  drk_tile_module_t *m = src ? drk_tile_parse(src, strlen(src), "<canon>", &d) : NULL;
  char *t = NULL;
  if (m && drk_tile_verify(m, &d)) t = drk_tile_kernel_canonical(m, m->kernels[0], len);
  else fprintf(stderr, "FAIL --canonical: the test kernel does not parse or verify:\n%s", src ? src : "");
  if (m) drk_tile_module_destroy(m);
  free(src);
  return t;
}

static int run_canonical(void) {
  size_t n[5];
  char *a = canon_of("k1", "a", 3, false, "rows", &n[0]);
  char *b = canon_of("other_name", "t", 3, true, "L7", &n[1]); /* names and layout order differ */
  char *c = canon_of("k1", "a", 4, false, "rows", &n[2]);      /* one constant differs */
  int rc = 0;
  if (!a || !b || !c) rc = 1;
  else if (n[0] != n[1] || memcmp(a, b, n[0])) {
    fprintf(stderr, "FAIL --canonical: kernels equal up to names differ:\n--- a\n%s--- b\n%s", a, b);
    rc = 1;
  } else if (n[0] == n[2] && !memcmp(a, c, n[0])) {
    fprintf(stderr, "FAIL --canonical: kernels with different constants are equal:\n%s", a);
    rc = 1;
  } else if (strstr(a, "other") || strstr(a, "rows") || strstr(a, "k1")) {
    fprintf(stderr, "FAIL --canonical: a name or an unused layout is left in:\n%s", a);
    rc = 1;
  }
  if (!rc) printf("canonical: equal up to names, different constants differ\n%s", a);
  free(a), free(b), free(c);
  return rc;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: tile_runner FILE.drkt | --builder | --canonical\n");
    return 2;
  }
  if (strcmp(argv[1], "--builder") == 0) return run_builder();
  if (strcmp(argv[1], "--canonical") == 0) return run_canonical();
  return run_file(argv[1]);
}
