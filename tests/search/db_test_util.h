/* Shared by the search tests that use a database: the scratch directory (set by main), paths
 * in it, a database file removed with its WAL files, a database opened or the test exits.
 *
 * PostgreSQL mode (pg_sock set by main from --pg=SOCKET_DIR, a server of
 * tests/search/pg_server.sh): path_in("x.db") (a name ending in .db; other names stay files
 * in dir) names database PREFIX_x_db on that server
 * (PREFIX: pg_prefix, the test's name, so that tests running at once keep apart) and fresh()
 * drops and creates it empty. */
#ifndef DRK_TESTS_SEARCH_DB_TEST_UTIL_H
#define DRK_TESTS_SEARCH_DB_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef DRK_HAVE_POSTGRES
#include <libpq-fe.h>
#endif

#include "search/db.h"

static char dir[4096];
__attribute__((unused)) static char pg_sock[1024], pg_prefix[64];

static const char *path_in(const char *name) {
  static char buf[8][4200];
  static int k;
  char *b = buf[k++ % 8];
  size_t len = strlen(name);
  if (pg_sock[0] && len > 3 && !strcmp(name + len - 3, ".db")) {
    char db[128];
    int w = snprintf(db, sizeof db, "%s_", pg_prefix);
    for (const char *p = name; *p && w + 1 < (int)sizeof db; p++)
      db[w++] = (char)((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ? *p : '_');
    db[w] = 0;
    snprintf(b, sizeof buf[0], "postgresql://drkc@/%s?host=%s", db, pg_sock);
    return b;
  }
  snprintf(b, sizeof buf[0], "%s/%s", dir, name);
  return b;
}

#ifdef DRK_HAVE_POSTGRES
/* Runs sql (no results) on database db of the test server; exits the test when it fails. */
__attribute__((unused)) static void pg_admin(const char *db, const char *sql) {
  char url[1400];
  snprintf(url, sizeof url, "postgresql://drkc@/%s?host=%s", db, pg_sock);
  PGconn *c = PQconnectdb(url);
  PGresult *q = PQstatus(c) == CONNECTION_OK ? PQexec(c, "SET client_min_messages = warning") : NULL;
  PQclear(q);
  PGresult *r = PQstatus(c) == CONNECTION_OK ? PQexec(c, sql) : NULL;
  if (!r || PQresultStatus(r) != PGRES_COMMAND_OK) {
    fprintf(stderr, "%s: %s: %s\n", url, sql, r ? PQresultErrorMessage(r) : PQerrorMessage(c));
    exit(1);
  }
  PQclear(r);
  PQfinish(c);
}

/* The same for a query whose rows do not matter. */
__attribute__((unused)) static void pg_admin_query(const char *db, const char *sql) {
  char url[1400];
  snprintf(url, sizeof url, "postgresql://drkc@/%s?host=%s", db, pg_sock);
  PGconn *c = PQconnectdb(url);
  PGresult *r = PQstatus(c) == CONNECTION_OK ? PQexec(c, sql) : NULL;
  if (!r || PQresultStatus(r) != PGRES_TUPLES_OK) {
    fprintf(stderr, "%s: %s: %s\n", url, sql, r ? PQresultErrorMessage(r) : PQerrorMessage(c));
    exit(1);
  }
  PQclear(r);
  PQfinish(c);
}

/* The database name of a test URL (between "@/" and "?"). */
__attribute__((unused)) static const char *pg_dbname(const char *url) {
  static char name[128];
  const char *s = strstr(url, "@/");
  s = s ? s + 2 : url;
  size_t len = strcspn(s, "?");
  snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name ? len : sizeof name - 1), s);
  return name;
}
#endif

static void fresh(const char *path) {
  if (drk_search_db_is_url(path)) {
#ifdef DRK_HAVE_POSTGRES
    char sql[400];
    snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS \"%s\" WITH (FORCE)", pg_dbname(path));
    pg_admin("postgres", sql);
    snprintf(sql, sizeof sql, "CREATE DATABASE \"%s\"", pg_dbname(path));
    pg_admin("postgres", sql);
#endif
    return;
  }
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
