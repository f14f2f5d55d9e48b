/* Tuned schedules for a compile (`drkc MODEL --db=FILE`): the lowering's lookup hook
 * (drk_lower_options_t.lookup, lower.h) over the kernel database (db.h).
 *
 * For every kernel without a --schedules line the lowering asks by workload key; the answer is
 * the best usable record of that workload: valid, stable (its re-measurement agreed), with a
 * positive time, from this drkc version, measured on a target whose arch is one the compile
 * targets (records are keyed by the full fingerprint of the GPU they ran on; a compile only
 * knows the arch, so among several GPUs of one arch the fastest stable record wins: the code is
 * legal on all of them). The workload key already holds the lowering's target (target_sm,
 * arch-specific form, tf32), so a record never crosses lowerings.
 *
 * A record from another drkc version or another arch is never used: the entry says what was
 * found (OTHER_VERSION, OTHER_TARGET, with that record) so the driver can print a note. A
 * record whose schedule text does not parse as knobs is not used either (FAILED, with why).
 *
 * Answers are kept per workload (a model's repeated layers share keys and are asked once);
 * the entries are what `--report` and `--require-tuned` read after lowering. The handle is not
 * shared between threads. */
#ifndef DRK_SEARCH_TUNED_H
#define DRK_SEARCH_TUNED_H

#include <stdbool.h>
#include <stddef.h>

#include "lower/lower.h"
#include "search/db.h"

typedef struct drk_search_tuned drk_search_tuned_t;

typedef struct drk_search_tuned_entry {
  char workload[40];
  drk_search_db_lookup_t status; /* FOUND (used), NONE, OTHER_VERSION, OTHER_TARGET, FAILED */
  drk_search_record_t record;    /* FOUND: the record used; OTHER_*: the best one seen (not used) */
  char target_arch[16];          /* the record's target's arch ("" for NONE) */
  char note[256];                /* why not used ("" for FOUND and NONE) */
} drk_search_tuned_entry_t;

/* Opens the database at path read-only for a compile for the arches in `archs` (comma
 * separated target names, e.g. "sm_90a"), as drkc version `version` (NULL: this drkc's). A
 * missing file or one that is not a drkc database is an error (false with err). */
bool drk_search_tuned_open(const char *path, const char *archs, const char *version, drk_search_tuned_t **out,
                           char *err, size_t n);
void drk_search_tuned_close(drk_search_tuned_t *t);
/* A note about the database as a whole (empty, or its stable records are all from another drkc
 * version or arch); "" when there is nothing to say. */
const char *drk_search_tuned_note(const drk_search_tuned_t *t);
/* The database's name for messages (a URL's password hidden; borrowed). */
const char *drk_search_tuned_db_name(const drk_search_tuned_t *t);
/* The lowering's hook: ctx is a drk_search_tuned_t. True with *out the record's knobs when a
 * usable record exists. A database error counts as no record (the entry is FAILED with it). */
bool drk_search_tuned_lookup(void *ctx, const char *workload, drk_sched_knobs_t *out);
/* The answer for workload (NULL: never asked). Borrowed until the next lookup. */
const drk_search_tuned_entry_t *drk_search_tuned_find(const drk_search_tuned_t *t, const char *workload);

#endif
