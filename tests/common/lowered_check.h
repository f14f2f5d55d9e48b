/* Test helper shared by the lowering and fusion tests: a lowered graph's tile module must
 * verify, print -> parse -> print must be a fixed point, and every launch must pass as many
 * arguments as its kernel has parameters. Prints what failed (prefixed by `what`). */
#ifndef DRK_TEST_LOWERED_CHECK_H
#define DRK_TEST_LOWERED_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/tile.h"
#include "lower/lower.h"

static char *drk_test_tile_text(const drk_tile_module_t *m, size_t *len) {
  char *buf = NULL;
  FILE *f = open_memstream(&buf, len);
  drk_tile_print(m, f);
  fclose(f);
  return buf;
}

static bool drk_test_check_lowered(const drk_lowered_t *l, const char *what) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  if (!drk_tile_verify(l->module, &d)) {
    fprintf(stderr, "FAIL %s: tile module does not verify\n", what);
    return false;
  }
  size_t n1, n2 = 0;
  char *t1 = drk_test_tile_text(l->module, &n1);
  drk_tile_module_t *m2 = drk_tile_parse(t1, n1, what, &d);
  bool ok = m2 && drk_tile_verify(m2, &d);
  char *t2 = m2 ? drk_test_tile_text(m2, &n2) : NULL;
  if (!ok || n1 != n2 || memcmp(t1, t2, n1) != 0) {
    fprintf(stderr, "FAIL %s: print -> parse -> print is not a fixed point (parsed %d, verified %d)\n", what,
            m2 != NULL, ok);
    ok = false;
  }
  for (size_t i = 0; ok && i < l->n_launches; i++)
    if (l->launches[i].n_args != l->launches[i].kernel->n_params) {
      fprintf(stderr, "FAIL %s: launch %zu has %d args for %d params\n", what, i, l->launches[i].n_args,
              l->launches[i].kernel->n_params);
      ok = false;
    }
  free(t1);
  free(t2);
  if (m2) drk_tile_module_destroy(m2);
  return ok;
}

#endif
