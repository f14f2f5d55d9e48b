/* Schedules as data: the per-kernel schedule table (--schedules=FILE), its text form (what
 * --emit=schedules prints and drk_schedules_parse reads back) and workload keys.
 *
 * A kernel is named by the lowering (k<node>_<what>, unique in a module); its node index
 * says which node's lowering the line's knobs go to. The workload key identifies the
 * computation independently of the schedule, so a schedule tuned for one model's kernel can
 * be recognized in another model, and a line written for another computation is refused. */
#include "lower/lower_internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* ---- workload keys ---- */
typedef struct wl_hash {
  uint64_t a, b;
} wl_hash_t;

static void wl_add(wl_hash_t *h, const void *p, size_t n) {
  h->a = drk_hash_fnv1a(p, n, h->a);
  h->b = drk_hash_fnv1a(p, n, h->b ^ 0x9e3779b97f4a7c15ull);
}
static void wl_i64(wl_hash_t *h, int64_t v) { wl_add(h, &v, sizeof v); }
static void wl_str(wl_hash_t *h, const char *s) {
  wl_i64(h, s ? (int64_t)strlen(s) : -1);
  if (s) wl_add(h, s, strlen(s));
}

static void wl_value_type(wl_hash_t *h, const drk_value_t *v) {
  wl_i64(h, v->dtype);
  wl_i64(h, v->shape.rank);
  for (int i = 0; i < v->shape.rank; i++) wl_i64(h, v->shape.dims[i].size);
}

/* Constants up to this many bytes are part of the computation (epilogue scalars, masks,
 * shape-like operands); larger ones are weights, which only count by type. */
#define WL_CONST_BYTES 256

void drk_lower_workload_key(const drk_graph_t *g, const drk_fusion_t *f, int gi, const drk_lower_options_t *o,
                            char out[33]) {
  const drk_fusion_group_t *gr = &f->groups[gi];
  wl_hash_t h = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull};
  wl_i64(&h, o->target_sm);
  wl_i64(&h, o->arch_specific);
  wl_i64(&h, o->allow_tf32);
  wl_i64(&h, gr->kind);
  wl_i64(&h, gr->n_nodes);
  for (int m = 0; m < gr->n_nodes; m++) {
    const drk_node_t *n = g->nodes[gr->nodes[m]];
    wl_i64(&h, n->op);
    wl_i64(&h, gr->nodes[m] == gr->anchor);
    wl_i64(&h, gr->nodes[m] == gr->pair);
    for (int a = 0; a < n->n_attrs; a++) {
      const drk_attr_t *at = &n->attrs[a];
      wl_str(&h, at->name);
      wl_i64(&h, at->kind);
      wl_i64(&h, at->i);
      wl_add(&h, &at->f, sizeof at->f);
      wl_str(&h, at->s);
      wl_i64(&h, (int64_t)at->n);
      if (at->ints) wl_add(&h, at->ints, at->n * sizeof *at->ints);
      if (at->floats) wl_add(&h, at->floats, at->n * sizeof *at->floats);
      for (size_t k = 0; at->strings && k < at->n; k++) wl_str(&h, at->strings[k]);
      if (at->tensor) wl_value_type(&h, at->tensor);
    }
    /* operands: made inside the group (which member, which output) or outside (type, and
     * the bytes of small constants) */
    wl_i64(&h, n->n_inputs);
    for (int j = 0; j < n->n_inputs; j++) {
      const drk_value_t *v = n->inputs[j];
      if (!v) {
        wl_i64(&h, -1);
        continue;
      }
      int src = -1;
      if (v->kind == DRK_VALUE_NODE)
        for (int k = 0; k < m && src < 0; k++)
          if (g->nodes[gr->nodes[k]] == v->def) src = k;
      wl_i64(&h, src);
      if (src >= 0) {
        wl_i64(&h, v->def_index);
        continue;
      }
      wl_i64(&h, v->kind == DRK_VALUE_CONST);
      wl_value_type(&h, v);
      if (v->kind == DRK_VALUE_CONST && v->nbytes <= WL_CONST_BYTES) wl_add(&h, v->data, v->nbytes);
    }
    wl_i64(&h, n->n_outputs);
    for (int j = 0; j < n->n_outputs; j++) wl_value_type(&h, n->outputs[j]);
  }
  snprintf(out, 33, "%016llx%016llx", (unsigned long long)h.a, (unsigned long long)h.b);
}

/* ---- the text form ---- */
/* One line per node: its first kernel's name (the line's name), the knobs of all its kernels
 * (a split-K matmul's reduction kernel follows its matmul's schedule). */
void drk_lowered_print_schedules(const drk_lowered_t *l, FILE *out) {
  fprintf(out, "# drkc schedules: a line per kernel, NAME wl=WORKLOAD KIND KNOB=VALUE ..., each knob's domain\n"
               "# in the comment above; --schedules=FILE applies edited lines (any subset of a line's knobs)\n");
  for (size_t i = 0; i < l->n_launches; i++) {
    const drk_launch_t *la = &l->launches[i];
    bool seen = false;
    for (size_t j = 0; j < i && !seen; j++) seen = l->launches[j].node == la->node;
    if (seen) continue;
    uint32_t space = 0;
    for (size_t j = i; j < l->n_launches; j++)
      if (l->launches[j].node == la->node) space |= l->launches[j].knob_space;
    if (space) {
      fprintf(out, "#");
      for (int k = 0; k < DRK_KNOB_COUNT; k++) {
        if (!(space & (1u << k))) continue;
        const drk_knob_def_t *kd = drk_knob_def((drk_knob_id_t)k);
        if (kd->pow2) {
          fprintf(out, " %s {", kd->name);
          for (int v = kd->lo; v <= kd->hi; v *= 2) fprintf(out, "%s%d", v == kd->lo ? "" : ",", v);
          fprintf(out, "}");
        } else {
          fprintf(out, " %s %d..%d", kd->name, kd->lo, kd->hi);
        }
      }
      fprintf(out, "\n");
    }
    fprintf(out, "%s wl=%s %s", la->kernel->name, la->workload, la->sched.kind ? la->sched.kind : "plain");
    for (int k = 0; k < DRK_KNOB_COUNT; k++) {
      if (!(space & (1u << k))) continue;
      const drk_launch_t *by = la;
      for (size_t j = i; j < l->n_launches; j++)
        if (l->launches[j].node == la->node && (l->launches[j].knob_space & (1u << k))) {
          by = &l->launches[j];
          break;
        }
      fprintf(out, " %s=%d", drk_knob_def((drk_knob_id_t)k)->name, drk_schedule_knob_value(&by->sched, (drk_knob_id_t)k));
    }
    fprintf(out, "\n");
  }
}

void drk_schedules_free(drk_schedules_t *s) {
  if (!s) return;
  free(s->entries);
  free(s->text);
  memset(s, 0, sizeof *s);
}

static bool sched_err(drk_diag_t *d, const char *path, int line, int col, const char *fmt, const char *a, const char *b) {
  drk_loc_t loc = {.file = path, .line = line, .col = col, .node_index = -1};
  drk_diag_error(d, loc, fmt, a, b);
  return false;
}

/* One line (NUL-terminated, comment cut) into *e; false after an error. */
static bool parse_line(char *p, const char *path, int line, drk_sched_entry_t *e, drk_diag_t *d) {
  char *start = p;
  while (*p == ' ' || *p == '\t') p++;
  char *name = p;
  while (*p && *p != ' ' && *p != '\t') p++;
  if (*p) *p++ = 0;
  const char *q = name;
  if (*q++ != 'k' || !isdigit((unsigned char)*q))
    return sched_err(d, path, line, (int)(name - start) + 1, "'%s' is not a kernel name (k<node>_..., as --emit=schedules "
                     "prints them)%s", name, "");
  e->node = (size_t)strtoull(q, NULL, 10);
  e->name = name;
  e->loc = (drk_loc_t){.file = path, .line = line, .col = 1, .node_index = -1};
  for (;;) {
    while (*p == ' ' || *p == '\t') p++;
    if (!*p) return true;
    char *tok = p;
    while (*p && *p != ' ' && *p != '\t') p++;
    if (*p) *p++ = 0;
    int col = (int)(tok - start) + 1;
    if (strncmp(tok, "wl=", 3) == 0) {
      size_t n = strlen(tok + 3);
      if (n != 32 || strspn(tok + 3, "0123456789abcdef") != 32)
        return sched_err(d, path, line, col, "workload key '%s' is not 32 hex digits%s", tok + 3, "");
      memcpy(e->wl, tok + 3, 33);
      continue;
    }
    if (!strchr(tok, '=')) continue; /* the kernel kind: informative */
    char err[600];
    if (!drk_sched_knobs_parse(tok, &e->knobs, err, sizeof err))
      return sched_err(d, path, line, col, "kernel '%s': %s", name, err);
  }
}

bool drk_schedules_parse(const char *text, size_t len, const char *path, drk_schedules_t *out, drk_diag_t *d) {
  drk_schedules_t s = {0};
  s.text = malloc(len + 1);
  size_t cap = 16;
  s.entries = calloc(cap, sizeof *s.entries);
  if (!s.text || !s.entries) {
    drk_schedules_free(&s);
    drk_diag_error(d, drk_loc_none, "reading schedules: out of memory");
    return false;
  }
  memcpy(s.text, text, len);
  s.text[len] = 0;
  bool ok = true;
  int line = 0;
  for (char *p = s.text; p && *p;) {
    char *nl = strchr(p, '\n');
    if (nl) *nl = 0;
    line++;
    char *hash = strchr(p, '#');
    if (hash) *hash = 0;
    size_t lead = strspn(p, " \t\r");
    char *end = p + strlen(p);
    while (end > p && (end[-1] == '\r' || end[-1] == ' ' || end[-1] == '\t')) *--end = 0;
    if (p[lead]) {
      if (s.n == cap) {
        drk_sched_entry_t *ne = realloc(s.entries, 2 * cap * sizeof *ne);
        if (!ne) {
          ok = false;
          drk_diag_error(d, drk_loc_none, "reading schedules: out of memory");
          break;
        }
        memset(ne + cap, 0, cap * sizeof *ne);
        s.entries = ne, cap *= 2;
      }
      drk_sched_entry_t *e = &s.entries[s.n];
      if (parse_line(p, path, line, e, d)) {
        for (size_t k = 0; k < s.n; k++)
          if (strcmp(s.entries[k].name, e->name) == 0 || s.entries[k].node == e->node) {
            char prev[32];
            snprintf(prev, sizeof prev, "%d", s.entries[k].loc.line);
            ok = sched_err(d, path, line, 1, "a second schedule for the kernels of '%s' (line %s has one)", e->name, prev);
          }
        s.n++;
      } else {
        ok = false;
      }
    }
    p = nl ? nl + 1 : NULL;
  }
  if (!ok) {
    drk_schedules_free(&s);
    return false;
  }
  *out = s;
  return true;
}
