/* The little JSON the search writes and reads back: JSON-lines records of the database
 * export and the tune's event log. Private to search/.
 *
 * Writing: strings escaped per RFC 8259, numbers with 17 significant digits (non-finite
 * numbers as null). Reading: one flat object per line, whose values are strings, numbers,
 * true/false/null or arrays of numbers; nothing deeper (export writes nothing deeper). */
#ifndef DRK_SEARCH_JSON_H
#define DRK_SEARCH_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* "text" with escapes. */
void drk_json_str(FILE *out, const char *s);
/* A number, or null when not finite. */
void drk_json_num(FILE *out, double x);
/* A number, or null when x < 0 (the search's "unknown"). */
void drk_json_num_known(FILE *out, double x);

typedef enum { DRK_JSON_NULL, DRK_JSON_BOOL, DRK_JSON_NUM, DRK_JSON_STR, DRK_JSON_ARRAY } drk_json_kind_t;

#define DRK_JSON_MAX_FIELDS 64
#define DRK_JSON_MAX_ARRAY 8

typedef struct drk_json_field {
  char key[40];
  drk_json_kind_t kind;
  bool b;
  double num;
  char *str; /* DRK_JSON_STR: malloc'ed, NUL-terminated (drk_json_object_free) */
  int n_array;
  double array[DRK_JSON_MAX_ARRAY];
} drk_json_field_t;

typedef struct drk_json_object {
  int n;
  drk_json_field_t f[DRK_JSON_MAX_FIELDS];
} drk_json_object_t;

/* Parses one line (NUL-terminated) into *o. False with a message (and the column) in err. */
bool drk_json_parse_object(const char *text, drk_json_object_t *o, char *err, size_t n);
void drk_json_object_free(drk_json_object_t *o);
/* The field named key, or NULL. */
const drk_json_field_t *drk_json_get(const drk_json_object_t *o, const char *key);

#endif
