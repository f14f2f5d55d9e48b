/* Tuned schedules for a compile (search/tuned.h). */
#include "search/tuned.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/support.h"

typedef struct target_arch {
  char key[17];
  char arch[16];
  bool known;
} target_arch_t;

struct drk_search_tuned {
  drk_search_db_t *db;
  char archs[256]; /* ",sm_90a,sm_80," */
  char version[32];
  char note[512];
  drk_search_tuned_entry_t *e;
  size_t n, cap;
  target_arch_t *tg;
  size_t n_tg, cap_tg;
};

static bool arch_ok(const drk_search_tuned_t *t, const char *arch) {
  char needle[32];
  snprintf(needle, sizeof needle, ",%s,", arch);
  return arch[0] && strstr(t->archs, needle) != NULL;
}

/* The arch of a target key, read once per key. */
static const char *arch_of(drk_search_tuned_t *t, const char *key) {
  for (size_t i = 0; i < t->n_tg; i++)
    if (!strcmp(t->tg[i].key, key)) return t->tg[i].arch;
  if (t->n_tg == t->cap_tg) {
    size_t cap = t->cap_tg ? 2 * t->cap_tg : 8;
    target_arch_t *g = realloc(t->tg, cap * sizeof *g);
    if (!g) return "";
    t->tg = g, t->cap_tg = cap;
  }
  target_arch_t *a = &t->tg[t->n_tg++];
  memset(a, 0, sizeof *a);
  snprintf(a->key, sizeof a->key, "%s", key);
  drk_search_target_t fp;
  if (drk_search_db_target(t->db, key, &fp)) {
    snprintf(a->arch, sizeof a->arch, "%s", fp.arch);
    a->known = true;
  }
  return a->arch;
}

typedef struct summary {
  drk_search_tuned_t *t;
  long all, version, arch, usable;
  char other_version[32], other_arch[16];
} summary_t;

static bool summarize(void *ctx, const drk_search_record_t *r) {
  summary_t *s = ctx;
  if (!(r->time_us > 0)) return true;
  s->all++;
  bool v = !strcmp(r->drkc_version, s->t->version);
  const char *arch = arch_of(s->t, r->target);
  bool a = arch_ok(s->t, arch);
  s->version += v;
  s->arch += a;
  s->usable += v && a;
  if (!v && !s->other_version[0]) snprintf(s->other_version, sizeof s->other_version, "%s", r->drkc_version);
  if (!a && !s->other_arch[0]) snprintf(s->other_arch, sizeof s->other_arch, "%s", arch[0] ? arch : "unknown");
  return true;
}

bool drk_search_tuned_open(const char *path, const char *archs, const char *version, drk_search_tuned_t **out,
                           char *err, size_t n) {
  if (!drk_search_db_is_url(path)) {
    FILE *f = fopen(path, "rb");
    if (!f) {
      snprintf(err, n, "%s: no such database (drkc tune --db=%s makes one)", path, path);
      return false;
    }
    fclose(f);
  }
  drk_search_tuned_t *t = calloc(1, sizeof *t);
  if (!t) {
    snprintf(err, n, "out of memory");
    return false;
  }
  if (!drk_search_db_open(path, true, &t->db, err, n)) {
    free(t);
    return false;
  }
  snprintf(t->version, sizeof t->version, "%s", version ? version : DRK_VERSION_STRING);
  snprintf(t->archs, sizeof t->archs, ",%s,", archs ? archs : "");
  summary_t s = {.t = t};
  drk_search_query_t q = {.valid_only = true, .stable_only = true};
  if (!drk_search_db_query(t->db, &q, summarize, &s, err, n)) {
    drk_search_tuned_close(t);
    return false;
  }
  const char *name = drk_search_db_path(t->db);
  int n_archs = (int)(strlen(t->archs) > 2 ? strlen(t->archs) - 2 : 0);
  if (!s.all)
    snprintf(t->note, sizeof t->note, "%s has no stable tuned records: every kernel keeps the heuristic's schedule",
             name);
  else if (!s.usable && !s.version)
    snprintf(t->note, sizeof t->note,
             "%s: its %ld stable records are from another drkc version (%s; this is drkc %s): not used (re-tune "
             "with this drkc)",
             name, s.all, s.other_version, t->version);
  else if (!s.usable && !s.arch)
    snprintf(t->note, sizeof t->note,
             "%s: its %ld stable records are for another target (%s; compiling for %.*s): not used", name, s.all,
             s.other_arch, n_archs, t->archs + 1);
  else if (!s.usable)
    snprintf(t->note, sizeof t->note,
             "%s: none of its %ld stable records is from drkc %s for %.*s: not used", name, s.all, t->version,
             n_archs, t->archs + 1);
  *out = t;
  return true;
}

void drk_search_tuned_close(drk_search_tuned_t *t) {
  if (!t) return;
  drk_search_db_close(t->db);
  free(t->e);
  free(t->tg);
  free(t);
}

const char *drk_search_tuned_note(const drk_search_tuned_t *t) { return t->note; }
const char *drk_search_tuned_db_name(const drk_search_tuned_t *t) { return drk_search_db_path(t->db); }

const drk_search_tuned_entry_t *drk_search_tuned_find(const drk_search_tuned_t *t, const char *workload) {
  for (size_t i = 0; i < t->n; i++)
    if (!strcmp(t->e[i].workload, workload)) return &t->e[i];
  return NULL;
}

typedef struct pick {
  drk_search_tuned_t *t;
  drk_search_tuned_entry_t *e;
  bool have_version, have_target;
  drk_search_record_t other_version, other_target;
  char other_target_arch[16];
} pick_t;

/* records in best order: the first of this version and arch is the answer */
static bool pick_one(void *ctx, const drk_search_record_t *r) {
  pick_t *p = ctx;
  if (!(r->time_us > 0)) return true;
  const char *arch = arch_of(p->t, r->target);
  bool v = !strcmp(r->drkc_version, p->t->version), a = arch_ok(p->t, arch);
  if (v && a) {
    p->e->status = DRK_SEARCH_DB_FOUND;
    p->e->record = *r;
    snprintf(p->e->target_arch, sizeof p->e->target_arch, "%s", arch);
    return false;
  }
  if (a && !p->have_version) p->other_version = *r, p->have_version = true;
  if (!a && !p->have_target) {
    p->other_target = *r, p->have_target = true;
    snprintf(p->other_target_arch, sizeof p->other_target_arch, "%s", arch[0] ? arch : "unknown");
  }
  return true;
}

bool drk_search_tuned_lookup(void *ctx, const char *workload, drk_sched_knobs_t *out) {
  drk_search_tuned_t *t = ctx;
  const drk_search_tuned_entry_t *seen = drk_search_tuned_find(t, workload);
  drk_search_tuned_entry_t *e;
  if (seen) {
    e = (drk_search_tuned_entry_t *)seen;
  } else {
    if (t->n == t->cap) {
      size_t cap = t->cap ? 2 * t->cap : 16;
      drk_search_tuned_entry_t *g = realloc(t->e, cap * sizeof *g);
      if (!g) return false;
      t->e = g, t->cap = cap;
    }
    e = &t->e[t->n++];
    memset(e, 0, sizeof *e);
    snprintf(e->workload, sizeof e->workload, "%s", workload);
    e->status = DRK_SEARCH_DB_NONE;
    pick_t p = {.t = t, .e = e};
    drk_search_query_t q = {.workload = workload, .valid_only = true, .stable_only = true, .best_first = true};
    char err[1200];
    if (!drk_search_db_query(t->db, &q, pick_one, &p, err, sizeof err)) {
      e->status = DRK_SEARCH_DB_FAILED;
      snprintf(e->note, sizeof e->note, "%.250s", err);
    } else if (e->status != DRK_SEARCH_DB_FOUND && p.have_version) {
      e->status = DRK_SEARCH_DB_OTHER_VERSION;
      e->record = p.other_version;
      snprintf(e->note, sizeof e->note, "record %lld is from drkc %s (this is %s): not used",
               (long long)p.other_version.id, p.other_version.drkc_version, t->version);
    } else if (e->status != DRK_SEARCH_DB_FOUND && p.have_target) {
      e->status = DRK_SEARCH_DB_OTHER_TARGET;
      e->record = p.other_target;
      snprintf(e->target_arch, sizeof e->target_arch, "%s", p.other_target_arch);
      snprintf(e->note, sizeof e->note, "record %lld is for target %s (%s): not used", (long long)p.other_target.id,
               p.other_target.target, p.other_target_arch);
    }
  }
  if (e->status != DRK_SEARCH_DB_FOUND) return false;
  /* the canonical point text separates knobs by spaces; the knob parser reads commas */
  char text[sizeof e->record.schedule], why[256];
  snprintf(text, sizeof text, "%s", e->record.schedule);
  for (char *c = text; *c; c++)
    if (*c == ' ') *c = ',';
  drk_sched_knobs_t k = {0};
  if (!drk_sched_knobs_parse(text, &k, why, sizeof why)) {
    e->status = DRK_SEARCH_DB_FAILED;
    snprintf(e->note, sizeof e->note, "record %lld's schedule '%.100s' does not parse: %.100s", (long long)e->record.id,
             e->record.schedule, why);
    return false;
  }
  *out = k;
  return true;
}
