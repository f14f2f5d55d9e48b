/* drkc --dynamic: shape buckets in one module (dynamic.h).
 *
 * Requires: a model whose symbolic input dims are the --dynamic ones and those --bind binds.
 * Guarantees: a module (format version 2, docs/module-format.md) with one plan per bucket,
 * padding proven exact on the symbolic graph (passes/pad_exact.h), weights and identical
 * kernels stored once. Three steps: check (the symbolic graph), compile (the pipeline once per
 * bucket, kernels seen in an earlier bucket left out of codegen), merge (one arena layout:
 * the union of the buckets' weights first, each bucket's activations after it). */
#include "pipeline/dynamic.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/package/module.h"
#include "ir/tile.h"
#include "passes/pad_exact.h"

/* ---- the spec ---- */

static bool parse_i64(const char *s, const char *end, int64_t *out) {
  if (s == end) return false;
  int64_t v = 0;
  for (const char *p = s; p < end; p++) {
    if (*p < '0' || *p > '9' || v > (INT64_MAX - 9) / 10) return false;
    v = v * 10 + (*p - '0');
  }
  *out = v;
  return true;
}

static drk_dyn_dim_t *find_dim(drk_dyn_spec_t *s, const char *name, size_t len) {
  for (int i = 0; i < s->n_dims; i++)
    if (strlen(s->dims[i].name) == len && !strncmp(s->dims[i].name, name, len)) return &s->dims[i];
  return NULL;
}

/* Powers of two from the smallest >= lo, below hi, then hi. */
static void default_sizes(drk_dyn_dim_t *x) {
  int64_t p = 1;
  while (p < x->lo) p *= 2;
  x->n_sizes = 0;
  for (; p < x->hi && x->n_sizes < DRK_DYN_MAX_SIZES - 1; p *= 2) x->sizes[x->n_sizes++] = p;
  x->sizes[x->n_sizes++] = x->hi;
}

static bool parse_dynamic(const char *spec, drk_dyn_spec_t *out, drk_diag_t *d) {
  for (const char *p = spec; *p;) {
    const char *end = strchr(p, ',');
    if (!end) end = p + strlen(p);
    const char *eq = memchr(p, '=', (size_t)(end - p)), *dots = eq ? strstr(eq, "..") : NULL;
    drk_dyn_dim_t x = {0};
    if (!eq || eq == p || (size_t)(eq - p) >= sizeof x.name || !dots || dots > end || !parse_i64(eq + 1, dots, &x.lo) ||
        !parse_i64(dots + 2, end, &x.hi)) {
      drk_diag_error(d, drk_loc_none, "--dynamic: expected NAME=LO..HI (e.g. batch=1..64), got '%.*s'", (int)(end - p), p);
      return false;
    }
    memcpy(x.name, p, (size_t)(eq - p));
    if (x.lo < 1 || x.hi < x.lo) {
      drk_diag_error(d, drk_loc_none, "--dynamic: %s=%" PRId64 "..%" PRId64 ": need 1 <= LO <= HI", x.name, x.lo, x.hi);
      return false;
    }
    if (find_dim(out, x.name, strlen(x.name)) || out->n_dims == DRK_DYN_MAX_DIMS) {
      drk_diag_error(d, drk_loc_none, "--dynamic: '%s' given twice, or more than %d dims", x.name, DRK_DYN_MAX_DIMS);
      return false;
    }
    default_sizes(&x);
    out->dims[out->n_dims++] = x;
    p = *end ? end + 1 : end;
  }
  if (!out->n_dims) {
    drk_diag_error(d, drk_loc_none, "--dynamic: no dims given (e.g. --dynamic=batch=1..64)");
    return false;
  }
  return true;
}

static bool parse_buckets(const char *spec, drk_dyn_spec_t *s, drk_diag_t *d) {
  for (const char *p = spec; *p;) {
    const char *end = strchr(p, ';');
    if (!end) end = p + strlen(p);
    const char *colon = memchr(p, ':', (size_t)(end - p));
    drk_dyn_dim_t *x = colon ? find_dim(s, p, (size_t)(colon - p)) : NULL;
    if (!x) {
      drk_diag_error(d, drk_loc_none, "--buckets: expected NAME:S1,S2,... with NAME a --dynamic dim, got '%.*s'",
                     (int)(end - p), p);
      return false;
    }
    x->n_sizes = 0;
    for (const char *q = colon + 1; q < end;) {
      const char *c = memchr(q, ',', (size_t)(end - q));
      if (!c) c = end;
      int64_t v;
      if (!parse_i64(q, c, &v) || x->n_sizes == DRK_DYN_MAX_SIZES || v < x->lo || v > x->hi ||
          (x->n_sizes && v <= x->sizes[x->n_sizes - 1])) {
        drk_diag_error(d, drk_loc_none, "--buckets: %s: '%.*s' is not a size in %" PRId64 "..%" PRId64
                       " above the one before it (at most %d sizes)", x->name, (int)(c - q), q, x->lo, x->hi,
                       DRK_DYN_MAX_SIZES);
        return false;
      }
      x->sizes[x->n_sizes++] = v;
      q = c < end ? c + 1 : c;
    }
    if (!x->n_sizes || x->sizes[x->n_sizes - 1] != x->hi) {
      drk_diag_error(d, drk_loc_none, "--buckets: %s: the largest bucket must be the range's end %" PRId64
                     " (shapes up to it need a bucket)", x->name, x->hi);
      return false;
    }
    p = *end ? end + 1 : end;
  }
  return true;
}

bool drk_dyn_spec_parse(const char *dynamic, const char *buckets, drk_dyn_spec_t *out, drk_diag_t *d) {
  memset(out, 0, sizeof *out);
  if (!parse_dynamic(dynamic, out, d) || (buckets && !parse_buckets(buckets, out, d))) return false;
  size_t n = 1;
  for (int i = 0; i < out->n_dims; i++) n *= (size_t)out->dims[i].n_sizes;
  if (n > DRK_DYN_MAX_BUCKETS) {
    drk_diag_error(d, drk_loc_none, "--dynamic: %zu buckets (at most %d): list fewer sizes with --buckets", n,
                   DRK_DYN_MAX_BUCKETS);
    return false;
  }
  return true;
}

/* ---- step 1: the symbolic graph ---- */

/* The dims, where they appear in the inputs and outputs, and whether padding them is exact. */
static bool check_symbolic(const drk_compile_options_t *o, const char *path, const drk_dyn_spec_t *s,
                           drk_modfile_dyn_axis_t *axes, uint32_t *n_axes, uint32_t *len_input, drk_diag_t *d) {
  drk_compile_options_t o0 = *o;
  o0.report = NULL, o0.dump_after = NULL, o0.time_stages = false, o0.progress = false, o0.dynamic = NULL;
  drk_pipeline_t *p = drk_pipeline_create(&o0, path, NULL, "module", d);
  bool ok = p && drk_pipeline_run_to(p, "canonicalize");
  drk_graph_t *g = ok ? drk_pipeline_graph(p) : NULL;
  const char *names[DRK_DYN_MAX_DIMS];
  for (int i = 0; i < s->n_dims; i++) names[i] = s->dims[i].name;
  /* where an op normalizes over a padded axis, the buckets mask it (the runtime fills the
   * length inputs, which the masking appends to the inputs: each bucket has them alike) */
  drk_value_t *lens[DRK_DYN_MAX_DIMS];
  ok = ok && drk_pass_pad_mask(g, names, s->n_dims, lens, d);
  *n_axes = 0;
  for (int i = 0; ok && i < s->n_dims; i++) {
    bool found = false;
    for (size_t k = 0; k < g->n_inputs; k++)
      for (int a = 0; a < g->inputs[k]->shape.rank; a++) {
        const char *sym = g->inputs[k]->shape.dims[a].sym;
        found |= sym && !strcmp(sym, names[i]);
      }
    if (!found) {
      drk_diag_error(d, drk_loc_none, "--dynamic: no input of the model has a dim named '%s'", names[i]);
      ok = false;
    }
  }
  for (size_t k = 0; ok && k < g->n_inputs + g->n_outputs; k++) {
    const drk_value_t *v = k < g->n_inputs ? g->inputs[k] : g->outputs[k - g->n_inputs];
    for (int a = 0; ok && a < v->shape.rank; a++) {
      const char *sym = v->shape.dims[a].sym;
      int di = -1;
      for (int i = 0; sym && i < s->n_dims; i++)
        if (!strcmp(sym, names[i])) di = i;
      if (sym && di < 0 && k < g->n_inputs) {
        drk_diag_error(d, drk_loc_none, "input '%s' has symbolic dim '%s', which is neither in --dynamic nor bound: "
                       "give it with --bind=%s=N or --dynamic=%s=LO..HI", v->name, sym, sym, sym);
        ok = false;
      }
      if (di >= 0 && *n_axes < DRK_DYN_MAX_DIMS * DRK_MODFILE_MAX_RANK * 8)
        axes[(*n_axes)++] = (drk_modfile_dyn_axis_t){(uint32_t)k, (uint32_t)a, (uint32_t)di};
    }
  }
  ok = ok && drk_pass_check_padding_masked(g, names, s->n_dims, lens, d);
  for (int i = 0; ok && i < s->n_dims; i++) {
    len_input[i] = 0;
    for (size_t k = 0; lens[i] && k < g->n_inputs; k++)
      if (g->inputs[k] == lens[i]) len_input[i] = (uint32_t)k + 1;
  }
  drk_pipeline_destroy(p);
  return ok;
}

/* ---- step 2: the buckets ---- */

typedef struct seen_kernel {
  uint8_t digest[32];
  uint32_t slot;
  char *name;
} seen_kernel_t;

typedef struct dropped {
  const drk_tile_kernel_t *k;
  uint32_t slot;
  const char *name; /* borrowed from the seen table */
} dropped_t;

typedef struct share_ctx {
  seen_kernel_t *seen;
  size_t n_seen, cap_seen;
  uint32_t slot;     /* this bucket's image slot */
  dropped_t *drop;   /* this bucket's kernels left out */
  size_t n_drop, cap_drop;
  size_t n_new;
  bool oom;
} share_ctx_t;

/* SHA-256 of the kernel's canonical text (drk_tile_kernel_canonical: names left out, the
 * layouts it uses defined): kernels with one digest compile to the same code. */
static bool kernel_digest(const drk_tile_module_t *m, drk_tile_kernel_t *k, uint8_t out[32]) {
  size_t len;
  char *text = drk_tile_kernel_canonical(m, k, &len);
  if (!text) return false;
  drk_modfile_sha256(text, len, out);
  free(text);
  return true;
}

static bool share_kernel(void *ctx, const drk_tile_module_t *m, drk_tile_kernel_t *k) {
  share_ctx_t *c = ctx;
  uint8_t dg[32];
  if (c->oom || !kernel_digest(m, k, dg)) return c->oom = true, false;
  for (size_t i = 0; i < c->n_seen; i++) {
    if (memcmp(c->seen[i].digest, dg, 32) || c->seen[i].slot == c->slot) continue;
    if (c->n_drop == c->cap_drop) {
      size_t nc = c->cap_drop ? 2 * c->cap_drop : 64;
      dropped_t *nd = realloc(c->drop, nc * sizeof *nd);
      if (!nd) return c->oom = true, false;
      c->drop = nd, c->cap_drop = nc;
    }
    c->drop[c->n_drop++] = (dropped_t){k, c->seen[i].slot, c->seen[i].name};
    return true;
  }
  if (c->n_seen == c->cap_seen) {
    size_t nc = c->cap_seen ? 2 * c->cap_seen : 64;
    seen_kernel_t *ns = realloc(c->seen, nc * sizeof *ns);
    if (!ns) return c->oom = true, false;
    c->seen = ns, c->cap_seen = nc;
  }
  seen_kernel_t *e = &c->seen[c->n_seen];
  memcpy(e->digest, dg, 32);
  e->slot = c->slot;
  if (!(e->name = strdup(k->name))) return c->oom = true, false;
  c->n_seen++;
  c->n_new++;
  return false;
}

typedef struct bucket {
  int64_t size[DRK_DYN_MAX_DIMS];
  char label[256];
  void *bytes;        /* its module */
  size_t n_bytes;
  drk_modfile_t *m;   /* read from bytes */
  uint32_t *slot;     /* per launch record: the slot its code is in */
  const char **name;  /* per launch record: the kernel name there */
  size_t n_new, n_shared;
  uint64_t image_bytes;
} bucket_t;

static bool compile_bucket(const drk_compile_options_t *o, const char *path, const drk_dyn_spec_t *s, bucket_t *b,
                           share_ctx_t *sh, drk_diag_t *d) {
  b->label[0] = 0;
  for (int i = 0; i < s->n_dims; i++) {
    size_t l = strlen(b->label);
    snprintf(b->label + l, sizeof b->label - l, "%s%s=%" PRId64, i ? "," : "", s->dims[i].name, b->size[i]);
  }
  if (strlen(b->label) + 1 >= sizeof b->label) {
    drk_diag_error(d, drk_loc_none, "--dynamic: the bind list for bucket %s is too long", b->label);
    return false;
  }
  /* the dims are bound after the symbolic graph is masked (pipeline.c st_canonicalize) */
  drk_compile_options_t ob = *o;
  ob.pad_bind = b->label, ob.dynamic = NULL, ob.buckets = NULL, ob.time_stages = false;
  if (o->report) fprintf(o->report, "report: ---- bucket %s ----\n", b->label);
  drk_pipeline_t *p = drk_pipeline_create(&ob, path, NULL, "module", d);
  sh->n_drop = sh->n_new = 0;
  bool ok = p && drk_pipeline_run_to(p, "plan-memory");
  if (ok) drk_pipeline_drop_kernels(p, share_kernel, sh);
  if (sh->oom) {
    drk_diag_error(d, drk_loc_none, "out of memory comparing the kernels of bucket %s", b->label);
    ok = false;
  }
  ok = ok && drk_pipeline_run_to(p, "package") && drk_pipeline_output(p, "module", &b->bytes, &b->n_bytes);
  char err[512];
  if (ok && drk_modfile_read(b->bytes, b->n_bytes, NULL, &b->m, err, sizeof err)) {
    drk_diag_error(d, drk_loc_none, "bucket %s: reading back its module: %s", b->label, err);
    ok = false;
  }
  const drk_lowered_t *l = ok ? drk_pipeline_lowered(p) : NULL;
  if (ok && l->n_launches != b->m->n_kernels) {
    drk_diag_error(d, drk_loc_none, "bucket %s: %zu launches but %u kernel records", b->label, l->n_launches,
                   b->m->n_kernels);
    ok = false;
  }
  if (ok) {
    b->slot = calloc(b->m->n_kernels + 1, sizeof *b->slot);
    b->name = calloc(b->m->n_kernels + 1, sizeof *b->name);
    ok = b->slot && b->name;
  }
  for (uint32_t i = 0; ok && i < b->m->n_kernels; i++) {
    b->slot[i] = sh->slot, b->name[i] = b->m->kernels[i].name;
    for (size_t j = 0; j < sh->n_drop; j++)
      if (sh->drop[j].k == l->launches[i].kernel) b->slot[i] = sh->drop[j].slot, b->name[i] = sh->drop[j].name;
  }
  b->n_new = sh->n_new, b->n_shared = sh->n_drop;
  if (ok && o->lookup && o->report) { /* --db: the bucket's kernels with records (their keys hold its shapes) */
    size_t with = 0, tuned = 0;
    for (size_t i = 0; i < l->n_launches; i++) {
      drk_sched_knobs_t k;
      if (!l->launches[i].knob_space) continue;
      with++;
      tuned += o->lookup(o->lookup_ctx, l->launches[i].workload, &k);
    }
    fprintf(o->report, "report: bucket %s: %zu of %zu kernels with knobs tuned from --db\n", b->label, tuned, with);
  }
  for (uint32_t i = 0; ok && i < b->m->n_images; i++) b->image_bytes += b->m->images[i].size;
  drk_pipeline_destroy(p);
  return ok;
}

/* ---- step 3: one module ---- */

typedef struct wentry {
  uint8_t digest[32];
  uint64_t size, offset; /* in the merged blob */
  const void *data;
  const char *name;
} wentry_t;

typedef struct merge {
  wentry_t *w;
  size_t n_w;
  uint64_t blob; /* merged weights bytes, 256-aligned */
  uint64_t **wmap; /* per bucket, per weight entry: its merged offset */
} merge_t;

static uint64_t align256(uint64_t x) { return (x + 255) & ~(uint64_t)255; }

static bool merge_weights(bucket_t *bs, size_t nb, merge_t *mg, drk_diag_t *d) {
  size_t cap = 0;
  for (size_t b = 0; b < nb; b++) cap += bs[b].m->n_weight_entries;
  mg->w = calloc(cap + 1, sizeof *mg->w);
  mg->wmap = calloc(nb, sizeof *mg->wmap);
  if (!mg->w || !mg->wmap) goto oom;
  for (size_t b = 0; b < nb; b++) {
    const drk_modfile_t *m = bs[b].m;
    if (!m->weights && m->weights_size) {
      drk_diag_error(d, drk_loc_none, "not implemented: --dynamic with --weights=external");
      return false;
    }
    if (!(mg->wmap[b] = calloc(m->n_weight_entries + 1, sizeof **mg->wmap))) goto oom;
    for (uint32_t i = 0; i < m->n_weight_entries; i++) {
      const drk_modfile_weight_t *e = &m->weight_entries[i];
      const uint8_t *data = (const uint8_t *)m->weights + e->offset;
      uint8_t dg[32];
      drk_modfile_sha256(data, (size_t)e->size, dg);
      size_t j = 0;
      while (j < mg->n_w && (mg->w[j].size != e->size || memcmp(mg->w[j].digest, dg, 32))) j++;
      if (j == mg->n_w) {
        wentry_t *x = &mg->w[mg->n_w++];
        memcpy(x->digest, dg, 32);
        x->size = e->size, x->offset = mg->blob, x->data = data, x->name = e->name;
        mg->blob = align256(mg->blob + e->size);
      }
      mg->wmap[b][i] = mg->w[j].offset;
    }
  }
  return true;
oom:
  drk_diag_error(d, drk_loc_none, "out of memory merging the buckets' weights");
  return false;
}

/* Bucket b's arena offset off (a range of size bytes) in the merged arena: inside a weight,
 * that weight's merged place; past the weights, the same distance past the merged ones. */
static bool reloc(const bucket_t *B, const merge_t *mg, size_t b, uint64_t off, uint64_t size, uint64_t *out) {
  const drk_modfile_t *m = B->m;
  uint64_t act = align256(m->weights_size);
  if (off >= act) {
    *out = mg->blob + (off - act);
    return true;
  }
  for (uint32_t i = 0; i < m->n_weight_entries; i++) {
    const drk_modfile_weight_t *e = &m->weight_entries[i];
    if (off >= e->offset && off - e->offset <= e->size && size <= e->size - (off - e->offset)) {
      *out = mg->wmap[b][i] + (off - e->offset);
      return true;
    }
  }
  return false;
}

typedef struct merged {
  drk_modfile_t m;
  drk_modfile_kernel_t *ks;
  drk_modfile_param_t *ps;
  drk_modfile_tma_t *tmas;
  drk_modfile_tensor_t *ins, *outs;
  drk_modfile_weight_t *ws;
  drk_modfile_image_t *imgs;
  drk_modfile_bucket_t *bks;
  drk_modfile_dyn_dim_t dims[DRK_DYN_MAX_DIMS];
} merged_t;

static void merged_free(merged_t *x) {
  free(x->ks), free(x->ps), free(x->tmas), free(x->ins), free(x->outs), free(x->ws), free(x->imgs), free(x->bks);
}

static bool merge_modules(const drk_compile_options_t *o, const drk_dyn_spec_t *s, bucket_t *bs, size_t nb,
                          const merge_t *mg, const drk_modfile_dyn_axis_t *axes, uint32_t n_axes,
                          const uint32_t *len_input, merged_t *x, drk_diag_t *d) {
  size_t nk = 0, np = 0, nt = 0, ni = 0, no = 0, nimg = 0;
  for (size_t b = 0; b < nb; b++) {
    const drk_modfile_t *m = bs[b].m;
    nk += m->n_kernels, nt += m->n_tmas, ni += m->n_inputs, no += m->n_outputs, nimg += m->n_images;
    for (uint32_t k = 0; k < m->n_kernels; k++) np += m->kernels[k].n_params;
  }
  x->ks = calloc(nk + 1, sizeof *x->ks), x->ps = calloc(np + 1, sizeof *x->ps), x->tmas = calloc(nt + 1, sizeof *x->tmas);
  x->ins = calloc(ni + 1, sizeof *x->ins), x->outs = calloc(no + 1, sizeof *x->outs);
  x->ws = calloc(mg->n_w + 1, sizeof *x->ws), x->imgs = calloc(nimg + 1, sizeof *x->imgs), x->bks = calloc(nb, sizeof *x->bks);
  if (!x->ks || !x->ps || !x->tmas || !x->ins || !x->outs || !x->ws || !x->imgs || !x->bks) {
    drk_diag_error(d, drk_loc_none, "out of memory merging %zu buckets", nb);
    return false;
  }
  uint64_t arena = mg->blob ? mg->blob : 256;
  size_t ik = 0, ip = 0, it = 0, ii = 0, io = 0, iimg = 0;
  for (size_t b = 0; b < nb; b++) {
    const drk_modfile_t *m = bs[b].m;
    uint64_t act = align256(m->weights_size), barena = mg->blob + (m->arena_size > act ? m->arena_size - act : 0);
    if (barena < 256) barena = 256;
    x->bks[b] = (drk_modfile_bucket_t){.arena_size = barena, .first_kernel = (uint32_t)ik, .n_kernels = m->n_kernels};
    for (int i = 0; i < s->n_dims; i++) x->bks[b].size[i] = bs[b].size[i];
    if (barena > arena) arena = barena;
    size_t tma0 = it;
    for (uint32_t t = 0; t < m->n_tmas; t++, it++) {
      x->tmas[it] = m->tmas[t];
      if (!reloc(&bs[b], mg, b, m->tmas[t].offset, 0, &x->tmas[it].offset)) goto bad;
    }
    for (uint32_t k = 0; k < m->n_kernels; k++, ik++) {
      drk_modfile_kernel_t *K = &x->ks[ik];
      *K = m->kernels[k];
      K->name = bs[b].name[k];
      K->slot = bs[b].slot[k];
      K->params = &x->ps[ip];
      for (uint32_t j = 0; j < m->kernels[k].n_params; j++, ip++) {
        drk_modfile_param_t *P = &x->ps[ip];
        *P = m->kernels[k].params[j];
        if (P->kind == DRK_MODFILE_PARAM_BUFFER && !reloc(&bs[b], mg, b, P->offset, P->size, &P->offset)) goto bad;
        if (P->kind == DRK_MODFILE_PARAM_TMA) P->tma += (uint32_t)tma0;
      }
    }
    for (uint32_t t = 0; t < m->n_inputs; t++, ii++) {
      x->ins[ii] = m->inputs[t];
      if (!reloc(&bs[b], mg, b, m->inputs[t].offset, m->inputs[t].size, &x->ins[ii].offset)) goto bad;
    }
    for (uint32_t t = 0; t < m->n_outputs; t++, io++) {
      x->outs[io] = m->outputs[t];
      if (!reloc(&bs[b], mg, b, m->outputs[t].offset, m->outputs[t].size, &x->outs[io].offset)) goto bad;
    }
    for (uint32_t i = 0; i < m->n_images; i++) {
      x->imgs[iimg] = m->images[i];
      x->imgs[iimg++].slot = (uint32_t)b; /* every bucket keeps at least one kernel: one slot each */
    }
  }
  for (size_t i = 0; i < mg->n_w; i++)
    x->ws[i] = (drk_modfile_weight_t){mg->w[i].name, mg->w[i].offset, mg->w[i].size, mg->w[i].data, mg->w[i].size};
  for (int i = 0; i < s->n_dims; i++)
    x->dims[i] = (drk_modfile_dyn_dim_t){s->dims[i].name, s->dims[i].lo, s->dims[i].hi, len_input[i]};
  const drk_modfile_t *m0 = bs[0].m;
  x->m = (drk_modfile_t){
      .prov = {m0->prov.drkc_version, o->command_line ? o->command_line : "", m0->prov.model_hash, m0->prov.targets},
      .arena_size = arena, .weights_offset = 0, .weights = NULL, .weights_size = mg->blob,
      .weight_entries = x->ws, .n_weight_entries = (uint32_t)mg->n_w,
      .kernels = x->ks, .n_kernels = (uint32_t)nk, .inputs = x->ins, .n_inputs = (uint32_t)ni,
      .outputs = x->outs, .n_outputs = (uint32_t)no, .tmas = x->tmas, .n_tmas = (uint32_t)nt,
      .images = x->imgs, .n_images = (uint32_t)nimg, .n_dyn_dims = (uint32_t)s->n_dims, .dyn_dims = x->dims,
      .n_buckets = (uint32_t)nb, .buckets = x->bks, .n_dyn_axes = n_axes, .dyn_axes = axes};
  return true;
bad:
  drk_diag_error(d, drk_loc_none, "internal: bucket %s has an arena range inside its weights that is no weight's",
                 bs[0].label);
  return false;
}

static void report_buckets(FILE *r, const bucket_t *bs, size_t nb, const merge_t *mg, size_t total) {
  uint64_t exact = 0;
  fprintf(r, "report: dynamic module: %zu buckets, weights %.2f MB stored once\n", nb, (double)mg->blob / 1e6);
  fprintf(r, "report:   %-28s %8s %8s %8s %12s %12s %14s\n", "bucket", "kernels", "new", "shared", "image MB",
          "arena MB", "exact-shape MB");
  for (size_t b = 0; b < nb; b++) {
    const bucket_t *B = &bs[b];
    /* an exact-shape module of the bucket: its own weights and every kernel's code; the
     * shared kernels' code is in an earlier bucket's image, so this is a lower bound */
    uint64_t alone = B->m->weights_size + B->image_bytes;
    exact += alone;
    fprintf(r, "report:   %-28s %8u %8zu %8zu %12.3f %12.2f %14.2f%s\n", B->label, B->m->n_kernels, B->n_new,
            B->n_shared, (double)B->image_bytes / 1e6, (double)B->m->arena_size / 1e6, (double)alone / 1e6,
            B->n_shared ? " (at least)" : "");
  }
  fprintf(r, "report: dynamic module %.2f MB; the %zu exact-shape modules at least %.2f MB together (%.1fx)\n",
          (double)total / 1e6, nb, (double)exact / 1e6, total ? (double)exact / (double)total : 0.0);
}

bool drk_dynamic_build(const drk_compile_options_t *o, const char *path, void **out_data, size_t *out_size,
                       size_t *out_kernels, drk_diag_t *d) {
  drk_dyn_spec_t s;
  if (!drk_dyn_spec_parse(o->dynamic, o->buckets, &s, d)) return false;
  if (o->weights_file) {
    drk_diag_error(d, drk_loc_none, "not implemented: --dynamic with --weights=external");
    return false;
  }
  drk_modfile_dyn_axis_t axes[DRK_DYN_MAX_DIMS * DRK_MODFILE_MAX_RANK * 8];
  uint32_t n_axes = 0, len_input[DRK_DYN_MAX_DIMS] = {0};
  if (!check_symbolic(o, path, &s, axes, &n_axes, len_input, d)) return false;
  size_t nb = 1;
  for (int i = 0; i < s.n_dims; i++) nb *= (size_t)s.dims[i].n_sizes;
  bucket_t *bs = calloc(nb, sizeof *bs);
  share_ctx_t sh = {0};
  merge_t mg = {0};
  merged_t x = {0};
  bool ok = bs != NULL;
  for (size_t b = 0; ok && b < nb; b++) { /* the first dim varies slowest */
    size_t r = b;
    for (int i = s.n_dims - 1; i >= 0; i--) {
      bs[b].size[i] = s.dims[i].sizes[r % (size_t)s.dims[i].n_sizes];
      r /= (size_t)s.dims[i].n_sizes;
    }
    sh.slot = (uint32_t)b;
    ok = compile_bucket(o, path, &s, &bs[b], &sh, d);
  }
  ok = ok && merge_weights(bs, nb, &mg, d) && merge_modules(o, &s, bs, nb, &mg, axes, n_axes, len_input, &x, d);
  if (ok) {
    char err[512];
    if (drk_modfile_write(&x.m, out_data, out_size, err, sizeof err)) {
      drk_diag_error(d, drk_loc_none, "writing the dynamic module: %s", err);
      ok = false;
    } else {
      *out_kernels = x.m.n_kernels;
      if (o->report) report_buckets(o->report, bs, nb, &mg, *out_size);
    }
  }
  merged_free(&x);
  for (size_t b = 0; bs && b < nb; b++) {
    drk_modfile_free(NULL, bs[b].m);
    free(bs[b].bytes), free(bs[b].slot), free(bs[b].name);
    if (mg.wmap) free(mg.wmap[b]);
  }
  for (size_t i = 0; i < sh.n_seen; i++) free(sh.seen[i].name);
  free(sh.seen), free(sh.drop), free(mg.w), free(mg.wmap), free(bs);
  return ok;
}
