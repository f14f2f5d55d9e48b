/* Shared by the search tests that use a database: the scratch directory (set by main), paths
 * in it, a database file removed with its WAL files, a database opened or the test exits. */
#ifndef DRK_TESTS_SEARCH_DB_TEST_UTIL_H
#define DRK_TESTS_SEARCH_DB_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>

#include "search/db.h"

static char dir[4096];

static const char *path_in(const char *name) {
  static char buf[8][4200];
  static int k;
  char *b = buf[k++ % 8];
  snprintf(b, sizeof buf[0], "%s/%s", dir, name);
  return b;
}

static void fresh(const char *path) {
  char b[4300];
  remove(path);
  snprintf(b, sizeof b, "%s-wal", path);
  remove(b);
  snprintf(b, sizeof b, "%s-shm", path);
  remove(b);
}

static drk_search_db_t *open_db(const char *path) {
  drk_search_db_t *db = NULL;
  char err[1200];
  if (!drk_search_db_open(path, false, &db, err, sizeof err)) {
    fprintf(stderr, "open %s: %s\n", path, err);
    exit(1);
  }
  return db;
}

#endif
