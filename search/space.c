/* Search spaces of kernels and their points (search/space.h). */
#include "search/space.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ir/support.h"

static int domain_values(const drk_knob_def_t *kd, int *out) {
  int n = 0;
  if (kd->pow2) {
    for (long v = kd->lo; v <= kd->hi; v *= 2) {
      if (n == DRK_SEARCH_MAX_VALUES) return -1;
      out[n++] = (int)v;
    }
  } else {
    for (long v = kd->lo; v <= kd->hi; v++) {
      if (n == DRK_SEARCH_MAX_VALUES) return -1;
      out[n++] = (int)v;
    }
  }
  return n;
}

static int value_index(const drk_search_space_t *s, int d, int v) {
  for (int i = 0; i < s->n_values[d]; i++)
    if (s->values[d][i] == v) return i;
  return -1;
}

bool drk_search_space_init(drk_search_space_t *s, uint32_t mask, const drk_sched_knobs_t *heuristic, char *err,
                           size_t n) {
  drk_search_space_t t;
  memset(&t, 0, sizeof t);
  if (mask >> DRK_KNOB_COUNT) {
    snprintf(err, n, "knob mask 0x%x names knobs beyond the %d known ones", mask, DRK_KNOB_COUNT);
    return false;
  }
  if (!mask) {
    snprintf(err, n, "the kernel has no knobs: nothing to search");
    return false;
  }
  t.mask = mask;
  for (int k = 0; k < DRK_KNOB_COUNT; k++) {
    if (!(mask & (1u << k))) continue;
    const drk_knob_def_t *kd = drk_knob_def((drk_knob_id_t)k);
    int d = t.n_dims++;
    t.dims[d] = (drk_knob_id_t)k;
    t.n_values[d] = domain_values(kd, t.values[d]);
    if (t.n_values[d] < 1) {
      snprintf(err, n, "%s: domain %d..%d has more than %d values", kd->name, kd->lo, kd->hi, DRK_SEARCH_MAX_VALUES);
      return false;
    }
    int v = heuristic->v[k];
    if (!(heuristic->set & (1u << k)) || value_index(&t, d, v) < 0) {
      if (!(heuristic->set & (1u << k)))
        snprintf(err, n, "%s: the heuristic's value is missing", kd->name);
      else
        snprintf(err, n, "%s: the heuristic's value %d is not in the domain (%s%d..%d)", kd->name, v,
                 kd->pow2 ? "powers of two in " : "", kd->lo, kd->hi);
      return false;
    }
    drk_knob_set(&t.heuristic, (drk_knob_id_t)k, v);
  }
  *s = t;
  return true;
}

bool drk_search_space_parse_line(const char *line, drk_search_space_t *s, char *err, size_t n) {
  char name[128] = "", wl[40] = "", kind[32] = "";
  drk_sched_knobs_t h;
  memset(&h, 0, sizeof h);
  const char *p = line;
  for (int item = 0;; item++) {
    while (*p == ' ' || *p == '\t') p++;
    if (!*p || *p == '\n' || *p == '#') break;
    const char *tok = p;
    while (*p && *p != ' ' && *p != '\t' && *p != '\n') p++;
    size_t len = (size_t)(p - tok);
    if (item == 0) {
      if (len >= sizeof name) {
        snprintf(err, n, "kernel name '%.*s...' longer than %zu characters", 40, tok, sizeof name - 1);
        return false;
      }
      memcpy(name, tok, len);
      name[len] = 0;
      continue;
    }
    if (len > 3 && strncmp(tok, "wl=", 3) == 0) {
      if (len - 3 != 32 || strspn(tok + 3, "0123456789abcdef") < 32) {
        snprintf(err, n, "workload key '%.*s' is not 32 hex digits", (int)(len - 3), tok + 3);
        return false;
      }
      memcpy(wl, tok + 3, 32);
      wl[32] = 0;
      continue;
    }
    if (!memchr(tok, '=', len)) {
      if (len >= sizeof kind) {
        snprintf(err, n, "kernel kind '%.*s' too long", (int)len, tok);
        return false;
      }
      memcpy(kind, tok, len);
      kind[len] = 0;
      continue;
    }
    char item_text[256], e[600];
    if (len >= sizeof item_text) {
      snprintf(err, n, "item '%.40s...' too long", tok);
      return false;
    }
    memcpy(item_text, tok, len);
    item_text[len] = 0;
    if (!drk_sched_knobs_parse(item_text, &h, e, sizeof e)) {
      snprintf(err, n, "%s", e);
      return false;
    }
  }
  if (!name[0]) {
    snprintf(err, n, "empty line: expected NAME wl=KEY KIND knob=value ...");
    return false;
  }
  if (!h.set) {
    snprintf(err, n, "kernel '%s' lists no knobs: nothing to search", name);
    return false;
  }
  if (!drk_search_space_init(s, h.set, &h, err, n)) return false;
  snprintf(s->kernel, sizeof s->kernel, "%s", name);
  snprintf(s->workload, sizeof s->workload, "%s", wl);
  snprintf(s->kind, sizeof s->kind, "%s", kind);
  return true;
}

uint64_t drk_search_space_size(const drk_search_space_t *s) {
  uint64_t n = 1;
  for (int d = 0; d < s->n_dims; d++) n *= (uint64_t)s->n_values[d];
  return n;
}

int drk_search_space_dim(const drk_search_space_t *s, drk_knob_id_t id) {
  for (int d = 0; d < s->n_dims; d++)
    if (s->dims[d] == id) return d;
  return -1;
}

void drk_search_point_from_indices(const drk_search_space_t *s, const int *idx, drk_sched_knobs_t *out) {
  memset(out, 0, sizeof *out);
  for (int d = 0; d < s->n_dims; d++) {
    DRK_ASSERT(idx[d] >= 0 && idx[d] < s->n_values[d]);
    drk_knob_set(out, s->dims[d], s->values[d][idx[d]]);
  }
}

bool drk_search_point_indices(const drk_search_space_t *s, const drk_sched_knobs_t *p, int *out_idx) {
  if (p->set != s->mask) return false;
  int idx[DRK_KNOB_COUNT];
  for (int d = 0; d < s->n_dims; d++) {
    idx[d] = value_index(s, d, p->v[s->dims[d]]);
    if (idx[d] < 0) return false;
  }
  memcpy(out_idx, idx, sizeof(int) * (size_t)s->n_dims);
  return true;
}

void drk_search_point_from_ordinal(const drk_search_space_t *s, uint64_t ordinal, drk_sched_knobs_t *out) {
  int idx[DRK_KNOB_COUNT];
  for (int d = s->n_dims - 1; d >= 0; d--) {
    idx[d] = (int)(ordinal % (uint64_t)s->n_values[d]);
    ordinal /= (uint64_t)s->n_values[d];
  }
  drk_search_point_from_indices(s, idx, out);
}

uint64_t drk_search_point_ordinal(const drk_search_space_t *s, const drk_sched_knobs_t *p) {
  int idx[DRK_KNOB_COUNT];
  if (!drk_search_point_indices(s, p, idx)) return UINT64_MAX;
  uint64_t o = 0;
  for (int d = 0; d < s->n_dims; d++) o = o * (uint64_t)s->n_values[d] + (uint64_t)idx[d];
  return o;
}

bool drk_search_point_valid(const drk_search_space_t *s, const drk_sched_knobs_t *p, char *why, size_t n) {
  int idx[DRK_KNOB_COUNT];
  if (!drk_search_point_indices(s, p, idx)) {
    snprintf(why, n, "not a point of the space");
    return false;
  }
  if (s->prune) {
    if (n) why[0] = 0;
    if (!s->prune(s->prune_ctx, p, why, n)) {
      if (n && !why[0]) snprintf(why, n, "pruned");
      return false;
    }
  }
  return true;
}

bool drk_search_point_maybe_valid(const drk_search_space_t *s, const drk_sched_knobs_t *p) {
  char why[8];
  if (!s->prune_known) return drk_search_point_valid(s, p, why, sizeof why);
  int idx[DRK_KNOB_COUNT];
  return drk_search_point_indices(s, p, idx) && s->prune_known(s->prune_ctx, p) != 0;
}

void drk_search_point_format(const drk_search_space_t *s, const drk_sched_knobs_t *p, char *buf, size_t n) {
  drk_sched_knobs_t q;
  memset(&q, 0, sizeof q);
  for (int d = 0; d < s->n_dims; d++)
    if (p->set & (1u << s->dims[d])) drk_knob_set(&q, s->dims[d], p->v[s->dims[d]]);
  drk_sched_knobs_format(&q, buf, n);
}

bool drk_search_point_parse(const drk_search_space_t *s, const char *text, drk_sched_knobs_t *out, char *err,
                            size_t n) {
  char buf[1024];
  size_t len = strlen(text);
  while (len && isspace((unsigned char)text[len - 1])) len--;
  const char *t = text;
  while (*t == ' ' || *t == '\t') t++, len--;
  if (len >= sizeof buf) {
    snprintf(err, n, "schedule text longer than %zu characters", sizeof buf - 1);
    return false;
  }
  /* spaces between items become the commas drk_sched_knobs_parse reads */
  size_t w = 0;
  for (size_t i = 0; i < len; i++) {
    char c = t[i];
    if (c == ' ' || c == '\t') {
      if (w && buf[w - 1] != ',') buf[w++] = ',';
    } else if (c == ',') {
      if (w && buf[w - 1] != ',') buf[w++] = ',';
    } else {
      buf[w++] = c;
    }
  }
  if (w && buf[w - 1] == ',') w--;
  buf[w] = 0;
  drk_sched_knobs_t k;
  memset(&k, 0, sizeof k);
  char e[600];
  if (!drk_sched_knobs_parse(buf, &k, e, sizeof e)) {
    snprintf(err, n, "%s", e);
    return false;
  }
  for (int i = 0; i < DRK_KNOB_COUNT; i++) {
    uint32_t b = 1u << i;
    if ((k.set & b) && !(s->mask & b)) {
      snprintf(err, n, "%s is not a knob of this kernel", drk_knob_def((drk_knob_id_t)i)->name);
      return false;
    }
    if (!(k.set & b) && (s->mask & b)) {
      snprintf(err, n, "%s is missing (a point sets every knob of the kernel)", drk_knob_def((drk_knob_id_t)i)->name);
      return false;
    }
  }
  *out = k;
  return true;
}

uint64_t drk_search_point_hash(const drk_sched_knobs_t *p) {
  uint64_t h = drk_hash_fnv1a(&p->set, sizeof p->set, 0xcbf29ce484222325ull);
  for (int i = 0; i < DRK_KNOB_COUNT; i++)
    if (p->set & (1u << i)) {
      int32_t v = p->v[i];
      h = drk_hash_fnv1a(&v, sizeof v, h);
    }
  /* final avalanche: FNV's low bits are weak for table indexing */
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

bool drk_search_point_equal(const drk_sched_knobs_t *a, const drk_sched_knobs_t *b) {
  if (a->set != b->set) return false;
  for (int i = 0; i < DRK_KNOB_COUNT; i++)
    if ((a->set & (1u << i)) && a->v[i] != b->v[i]) return false;
  return true;
}

void drk_search_point_features(const drk_search_space_t *s, const drk_sched_knobs_t *p, float *out) {
  for (int d = 0; d < s->n_dims; d++) {
    int i = value_index(s, d, p->v[s->dims[d]]);
    out[d] = s->n_values[d] > 1 && i >= 0 ? (float)i / (float)(s->n_values[d] - 1) : 0.0f;
  }
}

/* ---- random numbers ---- */
void drk_search_rng_seed(drk_search_rng_t *r, uint64_t seed) {
  for (int i = 0; i < 4; i++) r->s[i] = drk_splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t drk_search_rng_next(drk_search_rng_t *r) {
  uint64_t *s = r->s;
  uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return out;
}

uint32_t drk_search_rng_below(drk_search_rng_t *r, uint32_t n) {
  DRK_ASSERT(n > 0);
  uint64_t lim = UINT64_MAX - UINT64_MAX % n;
  for (;;) {
    uint64_t x = drk_search_rng_next(r);
    if (x < lim) return (uint32_t)(x % n);
  }
}

double drk_search_rng_uniform(drk_search_rng_t *r) { return (double)(drk_search_rng_next(r) >> 11) * 0x1.0p-53; }

double drk_search_rng_normal(drk_search_rng_t *r) {
  double u = drk_search_rng_uniform(r), v = drk_search_rng_uniform(r);
  return sqrt(-2.0 * log(1.0 - u)) * cos(2.0 * 3.14159265358979323846 * v);
}

void drk_search_point_random(const drk_search_space_t *s, drk_search_rng_t *r, drk_sched_knobs_t *out) {
  int idx[DRK_KNOB_COUNT];
  for (int d = 0; d < s->n_dims; d++) idx[d] = (int)drk_search_rng_below(r, (uint32_t)s->n_values[d]);
  drk_search_point_from_indices(s, idx, out);
}
