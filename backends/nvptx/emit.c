/* LLVM module -> PTX text, in memory; and one module's PTX joined from its kernels' PTX.
 *
 * Requires a module built for DRK_NVPTX_TRIPLE (drk_nvptx_module_create). Verifies it,
 * runs LLVM's default<On> pipeline on a clone with the NVPTX target machine (which adds
 * NVVMReflect, address-space inference and the other NVPTX passes), then emits PTX
 * (backends/common/emit.c). drk_nvptx_ptx_join works on the text alone: it relies on how
 * LLVM 22's NVPTX printer lays a module out (described below), checks what it relies on
 * and reports an internal error where a part does not look like that, never guessing;
 * tests/kcache compares its output with the one-module PTX. */
#include "backends/nvptx/nvptx.h"
#include "backends/common/target.h"

bool drk_nvptx_compile_module_opts(LLVMModuleRef m, const char *arch, const drk_nvptx_opts_t *opts,
                                   char **out_ptx, size_t *out_len, drk_diag_t *d) {
  drk_nvptx_opts_t o = {.opt_level = 3};
  if (opts) o = *opts;
  return drk_gpu_emit(m, arch, o.opt_level, o.no_verify, drk_nvptx_target_machine_create, LLVMAssemblyFile,
                      "PTX", out_ptx, out_len, d);
}

bool drk_nvptx_compile_module(LLVMModuleRef m, const char *arch, char **out_ptx,
                              size_t *out_len, drk_diag_t *d) {
  return drk_nvptx_compile_module_opts(m, arch, NULL, out_ptx, out_len, d);
}

/* ---- one module's PTX from the PTX of its kernels ----
 * What LLVM's NVPTX printer writes for a module: a header (comment, .version, .target,
 * .address_size); after the first function's "\t// .globl\tname" line, once, the module-scope
 * declarations (function declarations, then the variables in module order, a comment for
 * each one demoted into its only function) and a blank line; then the functions in module
 * order, each kernel after its .globl line. Function i of a module names its blocks
 * $L__BB<i>_<n> (also $L__func_begin<i>, __local_depot<i>); calls are numbered over the
 * module ("{ // callseq <n>, 0"). In the module of every kernel,
 * the kernels come first and libdevice's noinline helpers (.func, linked in after them)
 * last; the kernels' own variables (drk_dsmem, static shared memory) precede libdevice's.
 * A part, one kernel's module, numbers its kernel 0 and its helpers from 1. */
#include <stdlib.h>
#include <string.h>

typedef struct ptx_item {
  const char *text; /* one declaration or definition, its lines with their newlines */
  size_t n;
  char name[256];   /* "" when it could not be parsed: then identical text is the identity */
  int group;        /* 0 function declarations, 1 the kernels' own variables, 2 libdevice's, 3 helpers */
  size_t rank;      /* the order in the group: lib_order's index, else order of first appearance */
  size_t part;      /* which kernel's PTX has it (first) */
  size_t fn;        /* group 3: its function number in that part */
  size_t cs, n_cs;  /* group 3: its call sequences' numbers in that part, cs .. cs + n_cs - 1 */
} ptx_item_t;

typedef struct ptx_buf {
  char *p;
  size_t n, cap;
} ptx_buf_t;

static void buf_put(ptx_buf_t *b, const char *s, size_t n) {
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 1 << 16;
    while (cap < b->n + n + 1) cap *= 2;
    b->p = realloc(b->p, cap);
    if (!b->p) drk_fatal_internal(__FILE__, __LINE__, "out of memory");
    b->cap = cap;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = 0;
}

static bool ident_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '$' ||
         c == '.' || c == '%';
}

static const char *find_str(const char *s, const char *e, const char *pat) {
  size_t n = strlen(pat);
  for (const char *p = s; p + n <= e; p++)
    if (*p == *pat && !memcmp(p, pat, n)) return p;
  return NULL;
}

/* `.func` at the start of a word in s..e, or NULL. */
static const char *find_func(const char *s, const char *e) {
  for (const char *q = s; q + 5 <= e; q++)
    if (!strncmp(q, ".func", 5) && (q == s || q[-1] == ' ' || q[-1] == '\t' || q[-1] == '\n') &&
        (q + 5 == e || !ident_char(q[5])))
      return q;
  return NULL;
}

/* The name a declaration or function declares: after `.func` and its optional return
 * parameter group, or before the first '[', '=' or ';' of a variable. Comments: none. */
static void item_name(ptx_item_t *it, const char *fn) {
  const char *s = it->text, *e = s + it->n, *b, *q;
  it->name[0] = 0;
  if (s[0] == '/' && s[1] == '/') return;
  if (fn) {
    q = fn + 5;
    while (q < e && (*q == ' ' || *q == '\t' || *q == '\n')) q++;
    if (q < e && *q == '(') {
      for (int depth = 0; q < e; q++) {
        if (*q == '(') depth++;
        else if (*q == ')' && --depth == 0) break;
      }
      q++;
    }
    while (q < e && (*q == ' ' || *q == '\t' || *q == '\n')) q++;
    b = q;
    while (q < e && ident_char(*q)) q++;
  } else {
    const char *p = s;
    while (p < e && *p != '[' && *p != '=' && *p != ';') p++;
    q = p;
    while (q > s && (q[-1] == ' ' || q[-1] == '\t')) q--;
    b = q;
    while (b > s && ident_char(b[-1])) b--;
  }
  size_t n = (size_t)(q - b);
  if (n && n < sizeof it->name) {
    memcpy(it->name, b, n);
    it->name[n] = 0;
  }
}

static int item_cmp(const void *a, const void *b) {
  const ptx_item_t *x = a, *y = b;
  if (x->group != y->group) return x->group - y->group;
  return x->rank < y->rank ? -1 : x->rank > y->rank;
}

/* The call sequences of a function from number `first` on: how many ("{ // callseq <n>, 0"
 * counts the calls a target machine lowers, over all the functions of a module in order). */
static size_t callseq_count(const char *s, size_t n, size_t first) {
  size_t end = first;
  for (const char *p = s, *e = s + n; (p = find_str(p, e, "// callseq ")) != NULL;) {
    p += 11;
    char *q;
    unsigned long long v = strtoull(p, &q, 10);
    if (q != p && v + 1 > end) end = (size_t)v + 1;
  }
  return end - first;
}

/* Appends s with function number `from` of its labels replaced by `to`, and its call
 * sequence numbers moved from starting at cs_from to starting at cs_to. */
static void put_renumbered(ptx_buf_t *b, const char *s, size_t n, size_t from, size_t to, size_t cs_from,
                           size_t cs_to) {
  if (from == to && cs_from == cs_to) {
    buf_put(b, s, n);
    return;
  }
  char fs[24], ts[24];
  int fl = snprintf(fs, sizeof fs, "%zu", from), tl = snprintf(ts, sizeof ts, "%zu", to);
  const char *e = s + n, *done = s;
  for (const char *p = s; p < e; p++) {
    const char *d = NULL;
    if (*p == '$' && e - p > 4 && !strncmp(p, "$L__", 4)) {
      const char *q = p + 4;
      while (q < e && ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || *q == '_')) q++;
      /* $L__tmp<n> counts temporaries over the module, not functions */
      if (!(q - p == 7 && !strncmp(p + 4, "tmp", 3))) d = q;
    } else if (*p == '_' && e - p > 13 && !strncmp(p, "__local_depot", 13) && (p == s || !ident_char(p[-1]))) {
      d = p + 13;
    } else if (*p == '/' && e - p > 11 && !strncmp(p, "// callseq ", 11) && cs_from != cs_to) {
      const char *q = p + 11;
      char *qe;
      unsigned long long v = strtoull(q, &qe, 10);
      if (qe != q && v >= cs_from) {
        char num[24];
        int nl = snprintf(num, sizeof num, "%zu", (size_t)v - cs_from + cs_to);
        buf_put(b, done, (size_t)(q - done));
        buf_put(b, num, (size_t)nl);
        done = qe;
        p = qe - 1;
      }
      continue;
    }
    if (d && from != to && e - d >= fl && !memcmp(d, fs, (size_t)fl) && (d + fl == e || !(d[fl] >= '0' && d[fl] <= '9'))) {
      buf_put(b, done, (size_t)(d - done));
      buf_put(b, ts, (size_t)tl);
      done = d + fl;
      p = d + fl - 1;
    }
  }
  buf_put(b, done, (size_t)(e - done));
}

static size_t lib_rank(const char *name, const char *const *lib, size_t n_lib) {
  for (size_t k = 0; name[0] && k < n_lib; k++)
    if (!strcmp(lib[k], name)) return k;
  return (size_t)-1;
}

typedef struct ptx_join {
  ptx_item_t *items;
  size_t n_items, cap_items, seq;
  drk_diag_t *d;
} ptx_join_t;

/* Adds an item unless one of its name (or text) is there; false + error when that one
 * differs. Group 3 items compare with their labels numbered as the first one's. */
static bool join_add(ptx_join_t *j, ptx_item_t it) {
  for (size_t k = 0; k < j->n_items; k++) {
    ptx_item_t *o = &j->items[k];
    if (o->group == 3 ? it.group != 3 : it.group == 3) continue;
    bool same_text = o->n == it.n && !memcmp(o->text, it.text, it.n);
    if (!(it.name[0] ? strcmp(o->name, it.name) == 0 : same_text)) continue;
    if (!same_text && it.group == 3) {
      ptx_buf_t a = {0};
      put_renumbered(&a, it.text, it.n, it.fn, o->fn, it.cs, o->cs);
      same_text = a.n == o->n && !memcmp(a.p, o->text, a.n);
      free(a.p);
    }
    if (!same_text) {
      drk_diag_error(j->d, drk_loc_none, "nvptx: internal error: kernels #%zu and #%zu %s '%s' differently in their PTX",
                     o->part, it.part, it.group == 3 ? "define" : "declare", it.name);
      return false;
    }
    return true;
  }
  if (j->n_items == j->cap_items) {
    j->cap_items = j->cap_items ? 2 * j->cap_items : 16;
    j->items = realloc(j->items, j->cap_items * sizeof *j->items);
    if (!j->items) drk_fatal_internal(__FILE__, __LINE__, "out of memory");
  }
  j->items[j->n_items++] = it;
  return true;
}

/* The start of the next function after p (a line starting `.func`, `.visible .func`,
 * `.weak .func`, `.visible .entry` or `.entry`), or e. */
static const char *next_function(const char *p, const char *e) {
  static const char *const starts[] = {"\n.func ", "\n.visible .func ", "\n.weak .func ", "\n.visible .entry ", "\n.entry "};
  const char *best = e;
  for (size_t k = 0; k < DRK_ARRAY_LEN(starts); k++) {
    const char *f = find_str(p, best, starts[k]);
    if (f && f + 1 < best) best = f + 1;
  }
  return best;
}

bool drk_nvptx_ptx_join(const char *const *ptx, size_t n, const char *const *lib_order, size_t n_lib,
                        char **out_ptx, size_t *out_len, drk_diag_t *d) {
  static const char globl[] = "\t// .globl\t";
  ptx_buf_t out = {0}, decls = {0};
  ptx_join_t j = {.d = d};
  const char *hdr0 = NULL;
  size_t hdr0_n = 0;
  const char **gl = calloc(n ? n : 1, sizeof *gl), **body = calloc(n ? n : 1, sizeof *body);
  size_t *gl_n = calloc(n ? n : 1, sizeof *gl_n), *body_n = calloc(n ? n : 1, sizeof *body_n);
  size_t *body_cs = calloc(n ? n : 1, sizeof *body_cs);
  if (!gl || !body || !gl_n || !body_n || !body_cs) drk_fatal_internal(__FILE__, __LINE__, "out of memory");
  bool ok = false;
  for (size_t i = 0; i < n; i++) {
    const char *s = ptx[i], *e = s + strlen(s);
    const char *g = find_str(s, e, globl);
    if (!g || (g != s && g[-1] != '\n') || find_str(g + 1, e, globl)) {
      drk_diag_error(d, drk_loc_none, "nvptx: internal error: the PTX of kernel #%zu does not hold one entry", i);
      goto done;
    }
    if (!hdr0) hdr0 = s, hdr0_n = (size_t)(g - s);
    if ((size_t)(g - s) != hdr0_n || memcmp(s, hdr0, hdr0_n)) {
      drk_diag_error(d, drk_loc_none, "nvptx: internal error: the PTX of kernel #%zu has another header", i);
      goto done;
    }
    const char *ge = memchr(g, '\n', (size_t)(e - g));
    if (!ge) goto bad_layout;
    gl[i] = g, gl_n[i] = (size_t)(ge + 1 - g);
    /* the declarations, then a blank line, then the kernel */
    const char *ds = ge + 1, *be = find_str(ge, e, "\n.visible .entry ");
    if (!be || (be > ds && be[-1] != '\n')) goto bad_layout;
    for (const char *p = ds; p < be;) {
      const char *st = p;
      for (;;) {
        const char *nl = memchr(p, '\n', (size_t)(be + 1 - p));
        if (!nl) goto bad_layout;
        p = nl + 1;
        if ((nl > st && nl[-1] == ';') || (st[0] == '/' && st[1] == '/')) break;
        if (p >= be) goto bad_layout;
      }
      ptx_item_t it = {.text = st, .n = (size_t)(p - st), .part = i, .rank = j.seq++};
      const char *fn = find_func(st, p);
      item_name(&it, fn);
      it.group = fn ? 0 : 1;
      size_t r = lib_rank(it.name, lib_order, n_lib);
      if (r != (size_t)-1) it.rank = r, it.group = fn ? 0 : 2;
      else if (fn) it.rank += n_lib; /* after libdevice's, in order of appearance */
      if (!join_add(&j, it)) goto done;
    }
    /* the kernel, then the helpers the part defines after it (functions 1, 2, ...) */
    const char *ks = be + 1, *ke = next_function(ks + 1, e);
    body[i] = ks, body_n[i] = (size_t)(ke - ks);
    body_cs[i] = callseq_count(ks, body_n[i], 0);
    for (size_t fnum = 1, cs = body_cs[i]; ke < e; fnum++) {
      const char *hs = ke;
      ke = next_function(hs + 1, e);
      const char *fn = find_func(hs, ke);
      if (!fn || find_str(hs, ke, ".entry ")) {
        drk_diag_error(d, drk_loc_none, "nvptx: internal error: the PTX of kernel #%zu has a second entry", i);
        goto done;
      }
      ptx_item_t it = {.text = hs, .n = (size_t)(ke - hs), .part = i, .group = 3, .fn = fnum, .rank = j.seq++, .cs = cs};
      it.n_cs = callseq_count(hs, it.n, cs);
      cs += it.n_cs;
      item_name(&it, fn);
      size_t r = lib_rank(it.name, lib_order, n_lib);
      it.rank = r != (size_t)-1 ? r : it.rank + n_lib;
      if (!join_add(&j, it)) goto done;
    }
  }
  if (j.n_items > 1) qsort(j.items, j.n_items, sizeof *j.items, item_cmp);
  for (size_t k = 0; k < j.n_items; k++)
    if (j.items[k].group < 3) buf_put(&decls, j.items[k].text, j.items[k].n);
  buf_put(&out, hdr0 ? hdr0 : "", hdr0_n);
  size_t cs = 0;
  for (size_t i = 0; i < n; i++) {
    buf_put(&out, gl[i], gl_n[i]);
    if (i == 0) {
      if (decls.n) buf_put(&out, decls.p, decls.n);
      buf_put(&out, "\n", 1);
    }
    put_renumbered(&out, body[i], body_n[i], 0, i, 0, cs);
    cs += body_cs[i];
  }
  for (size_t k = 0, f = n; k < j.n_items; k++)
    if (j.items[k].group == 3) {
      ptx_item_t *it = &j.items[k];
      put_renumbered(&out, it->text, it->n, it->fn, f++, it->cs, cs);
      cs += it->n_cs;
    }
  *out_ptx = out.p;
  *out_len = out.n;
  out.p = NULL;
  ok = true;
  goto done;
bad_layout:
  drk_diag_error(d, drk_loc_none, "nvptx: internal error: the PTX of a kernel is not laid out as expected");
done:
  free(out.p);
  free(decls.p);
  free(j.items);
  free(gl), free(gl_n), free(body), free(body_n), free(body_cs);
  return ok;
}
