/* Checks for the C tests, shared by all of them.
 *
 * CHECK(cond) or CHECK(cond, fmt, ...) reports "file:line: check failed: cond[: message]" on
 * stderr when cond is false, counts the failure, and lets the test go on (so one run lists
 * every failure). A test may count failures of its own (failures++) after printing why.
 * main ends with `return check_status("name");`: 1 after any failure (saying how many),
 * else 0; a test that cannot run here (no ptxas, no GPU) returns 77 itself, before that.
 * Header-only, with a static counter: include it once in each test program's file. */
#ifndef DRK_TEST_CHECK_H
#define DRK_TEST_CHECK_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Failed checks so far. */
static int failures;

/* fmt starts with ": " (the CHECK macro prepends it); ": " alone means no message. */
__attribute__((format(printf, 4, 5))) static inline void check_report(const char *file, int line, const char *expr,
                                                                       const char *fmt, ...) {
  fprintf(stderr, "%s:%d: check failed: %s", file, line, expr);
  if (strcmp(fmt, ": ") != 0) {
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
  }
  fputc('\n', stderr);
  failures++;
}

#define CHECK(c, ...)                                                  \
  do {                                                                 \
    if (!(c)) check_report(__FILE__, __LINE__, #c, ": " __VA_ARGS__); \
  } while (0)

/* hay (a string) contains needle. */
#define CHECK_CONTAINS(hay, needle)                                                                      \
  do {                                                                                                   \
    const char *hay_ = (hay), *needle_ = (needle);                                                       \
    if (!strstr(hay_, needle_)) check_report(__FILE__, __LINE__, #hay, ": '%s' not found in: %s", needle_, hay_); \
  } while (0)

/* The exit status for main: 1 after any failed check, else 0. */
static inline int check_status(const char *name) {
  if (failures) fprintf(stderr, "%s: %d check(s) failed\n", name, failures);
  return failures ? 1 : 0;
}

#endif
