/* Parallel kernel code generation and the kernel cache (backends/common/kcache.c,
 * drk_nvptx_compile_tile_module_opts). No GPU needed.
 *
 *   test_codegen ptx ARCH FILE...   joins the .drkt FILEs into one tile module and checks that
 *                                   its PTX is byte-identical through the one-module path
 *                                   (drk_nvptx_lower_module + drk_nvptx_compile_module), 1 job,
 *                                   4 jobs, a cold and a warm cache (hits for every kernel);
 *                                   progress comes on the calling thread, 0..n. With ptxas
 *                                   (found as drk_nvptx_ptxas_find does), the cubin of a cold
 *                                   and a warm cache too.
 *   test_codegen cache              put/get round trip, kinds and keys apart, a truncated, a
 *                                   corrupted, an empty and a foreign entry miss (and are
 *                                   deleted), DRK_CACHE=0 and no_cache disable it, an
 *                                   unwritable directory is a silent miss, key texts
 *   test_codegen join               drk_nvptx_ptx_join: a table declared alike by two kernels
 *                                   comes once; two definitions of one name, two headers, a
 *                                   part it cannot read are internal errors naming the problem
 *   test_codegen concurrent         16 forked processes put and get the same keys at once
 *                                   (payloads of several sizes): no get returns other bytes
 *                                   than the put of that key
 *   test_codegen one ARCH FILE...   prints the one-module PTX of the joined FILEs (a tool)
 *   test_codegen time ARCH JOBS FILE...  compiles them uncached with JOBS workers and prints
 *                                   the stats (a tool; DRK_TIME_CUBIN=1: with ptxas)
 *   test_codegen errors ARCH        a kernel that does not lower: its error comes once, in
 *                                   kernel order, whatever the job count
 * Every cache lives in a fresh directory under $TMPDIR (never the user's). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backends/common/kcache.h"
#include "backends/nvptx/nvptx.h"
#include "ir/tile.h"

static int failures;
#define CHECK(c, ...)                                          \
  do {                                                         \
    if (!(c)) {                                                \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);     \
      fprintf(stderr, __VA_ARGS__);                            \
      fprintf(stderr, "\n");                                   \
      failures++;                                              \
    }                                                          \
  } while (0)

static char *tmp_dir(const char *tag) {
  const char *t = getenv("TMPDIR");
  char *p = malloc(4096);
  snprintf(p, 4096, "%s/drk-test-%s-XXXXXX", t && *t ? t : "/tmp", tag);
  if (!mkdtemp(p)) {
    perror("mkdtemp");
    exit(1);
  }
  return p;
}

static void rm_rf(const char *dir) {
  pid_t pid = fork();
  if (pid == 0) {
    execlp("rm", "rm", "-rf", dir, (char *)NULL);
    _exit(127);
  }
  int st;
  waitpid(pid, &st, 0);
}

/* ---- ptx: parallel == serial == one module, cache cold == warm ---- */
typedef struct prog {
  pthread_t main;
  int calls, last, total;
  bool off_thread, not_monotonic;
} prog_t;

static void on_progress(void *ctx, int done, int total) {
  prog_t *p = ctx;
  if (!pthread_equal(pthread_self(), p->main)) p->off_thread = true;
  if (done != (p->calls ? p->last + 1 : 0)) p->not_monotonic = true;
  p->calls++, p->last = done, p->total = total;
}

static drk_tile_module_t *load_joined(int n, char **files, drk_diag_t *d) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  for (int i = 0; i < n; i++) {
    size_t sz;
    char *t = drk_read_file(files[i], &sz, d);
    if (!t) return NULL;
    fwrite(t, 1, sz, f);
    fputc('\n', f);
    free(t);
  }
  fclose(f);
  drk_tile_module_t *m = drk_tile_parse(text, len, n == 1 ? files[0] : "joined.drkt", d);
  free(text);
  if (m && !drk_tile_verify(m, d)) {
    drk_tile_module_destroy(m);
    m = NULL;
  }
  return m;
}

static void first_difference(const char *what, const char *a, const char *b) {
  size_t i = 0, line = 1;
  while (a[i] && a[i] == b[i]) line += a[i++] == '\n';
  fprintf(stderr, "  %s: first difference at byte %zu (line %zu):\n  one module: %.80s\n  this:       %.80s\n", what, i,
          line, a + i, b + i);
}

static int run_ptx(const char *arch, int n, char **files) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  drk_tile_module_t *m = load_joined(n, files, &d);
  CHECK(m, "the files do not parse and verify");
  if (!m) return 1;
  size_t nk = m->n_kernels;
  /* the reference: one LLVM module of every kernel */
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef mod = NULL;
  char *ref = NULL;
  size_t ref_n = 0;
  bool ok = drk_nvptx_lower_module(ctx, m, arch, &mod, &d) && drk_nvptx_compile_module(mod, arch, &ref, &ref_n, &d);
  if (mod) LLVMDisposeModule(mod);
  LLVMContextDispose(ctx);
  CHECK(ok, "the one-module path fails");
  if (!ok) return 1;
  char *dir = tmp_dir("ptx");
  struct {
    const char *what;
    int jobs;
    bool cache;
    unsigned want_hits;
  } runs[] = {{"1 job, no cache", 1, false, 0}, {"4 jobs, no cache", 4, false, 0}, {"2 jobs, cold cache", 2, true, 0},
              {"4 jobs, warm cache", 4, true, (unsigned)nk}, {"1 job, warm cache", 1, true, (unsigned)nk}};
  for (size_t r = 0; r < DRK_ARRAY_LEN(runs); r++) {
    drk_codegen_stats_t st;
    memset(&st, 0, sizeof st);
    prog_t pg = {.main = pthread_self()};
    drk_codegen_opts_t o = {.jobs = runs[r].jobs, .no_cache = !runs[r].cache, .cache_dir = dir,
                            .progress = on_progress, .progress_ctx = &pg, .stats = &st};
    char *ptx = NULL;
    ok = drk_nvptx_compile_tile_module_opts(m, arch, &o, &ptx, NULL, NULL, &d);
    CHECK(ok, "%s: does not compile", runs[r].what);
    if (!ok) continue;
    CHECK(strlen(ptx) == ref_n && memcmp(ptx, ref, ref_n) == 0, "%s: PTX differs from the one-module PTX", runs[r].what);
    if (strcmp(ptx, ref)) first_difference(runs[r].what, ref, ptx);
    CHECK(pg.calls == (int)nk + 1 && pg.last == (int)nk && pg.total == (int)nk && !pg.off_thread && !pg.not_monotonic,
          "%s: progress: %d calls, last %d of %d%s%s", runs[r].what, pg.calls, pg.last, pg.total,
          pg.off_thread ? ", off the calling thread" : "", pg.not_monotonic ? ", not 0, 1, 2, ..." : "");
    CHECK(st.kernels == (int)nk && st.jobs == (runs[r].jobs < (int)nk ? runs[r].jobs : (int)nk), "%s: stats %d kernels %d jobs",
          runs[r].what, st.kernels, st.jobs);
    CHECK(st.cache_enabled == runs[r].cache, "%s: cache_enabled %d", runs[r].what, st.cache_enabled);
    if (runs[r].cache)
      CHECK(st.hits[DRK_KCACHE_PTX] == runs[r].want_hits && st.hits[DRK_KCACHE_PTX] + st.misses[DRK_KCACHE_PTX] == nk &&
                st.stores[DRK_KCACHE_PTX] == nk - runs[r].want_hits,
            "%s: %u hits, %u misses, %u stored (want %u hits of %zu)", runs[r].what, st.hits[DRK_KCACHE_PTX],
            st.misses[DRK_KCACHE_PTX], st.stores[DRK_KCACHE_PTX], runs[r].want_hits, nk);
    free(ptx);
  }
  printf("%s: %zu kernels, %zu bytes of PTX: one module == 1 job == 4 jobs == cold == warm cache\n", arch, nk, ref_n);
  /* the cubin, when there is a ptxas */
  drk_diag_t q;
  drk_diag_init(&q, NULL);
  char *exe = drk_nvptx_ptxas_find(&q);
  if (exe) {
    void *cub[2] = {NULL, NULL};
    size_t cn[2] = {0, 0};
    for (int r = 0; r < 2; r++) {
      drk_codegen_stats_t st;
      memset(&st, 0, sizeof st);
      drk_codegen_opts_t o = {.jobs = 2, .cache_dir = dir, .stats = &st};
      char *ptx = NULL;
      ok = drk_nvptx_compile_tile_module_opts(m, arch, &o, &ptx, &cub[r], &cn[r], &d);
      CHECK(ok, "cubin run %d fails", r);
      CHECK(st.hits[DRK_KCACHE_CUBIN] == (unsigned)r && st.stores[DRK_KCACHE_CUBIN] == (unsigned)!r,
            "cubin run %d: %u hits %u stored", r, st.hits[DRK_KCACHE_CUBIN], st.stores[DRK_KCACHE_CUBIN]);
      if (r == 1) drk_codegen_stats_print(&st, stdout);
      free(ptx);
    }
    CHECK(cub[0] && cub[1] && cn[0] == cn[1] && memcmp(cub[0], cub[1], cn[0]) == 0, "cached cubin differs");
    void *fresh = NULL;
    size_t fn = 0;
    CHECK(drk_nvptx_ptxas(ref, arch, &fresh, &fn, NULL, &d), "ptxas of the one-module PTX fails");
    CHECK(fresh && fn == cn[0] && memcmp(fresh, cub[0], fn) == 0, "the cubin differs from ptxas of the one-module PTX");
    printf("%s: cubin of %zu bytes, ptxas == cold == warm cache (%s)\n", arch, cn[0], drk_nvptx_ptxas_version(exe, &q));
    free(fresh), free(cub[0]), free(cub[1]), free(exe);
  } else {
    printf("no ptxas: cubin checks skipped\n");
  }
  rm_rf(dir);
  free(dir);
  free(ref);
  drk_tile_module_destroy(m);
  return failures ? 1 : 0;
}

/* ---- errors: reported once, in kernel order ---- */
static int run_errors(const char *arch) {
  /* @bad2 and @bad4 do not lower for sm_80 (a cluster needs sm_90); the others do */
  char text[8192] = "#e1 = blocked{spt = [4], tpw = [32], wpc = [4], order = [0]}\n";
  for (int k = 0; k < 6; k++) {
    bool bad = k == 2 || k == 4;
    snprintf(text + strlen(text), sizeof text - strlen(text),
             "kernel @%s%d(%%x: ptr<f32> {align = 16}) grid(2, 1, 1) block(128)%s smem(0) {\n"
             "  %%r = make_range {start = 0, end = 512} : tile<512xi32, #e1>\n"
             "  %%xs = splat %%x : tile<512xptr<f32>, #e1>\n"
             "  %%xp = addptr %%xs, %%r : tile<512xptr<f32>, #e1>\n"
             "  %%v = load %%xp : tile<512xf32, #e1>\n"
             "  %%e = exp %%v : tile<512xf32, #e1>\n"
             "  store %%xp, %%e\n"
             "  return\n"
             "}\n",
             bad ? "bad" : "good", k, bad ? " cluster(2, 1, 1)" : "");
  }
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  drk_tile_module_t *m = drk_tile_parse(text, strlen(text), "errors.drkt", &d);
  CHECK(m && drk_tile_verify(m, &d), "the error module does not parse");
  if (!m) return 1;
  char *want = NULL;
  for (int jobs = 1; jobs <= 4; jobs *= 2) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    drk_diag_t e;
    drk_diag_init(&e, f);
    drk_codegen_opts_t o = {.jobs = jobs, .no_cache = true};
    char *ptx = NULL;
    bool ok = drk_nvptx_compile_tile_module_opts(m, arch, &o, &ptx, NULL, NULL, &e);
    fclose(f);
    CHECK(!ok && e.n_errors == 2, "%d jobs: ok %d, %d errors (want 2)", jobs, ok, e.n_errors);
    const char *b2 = strstr(buf, "bad2"), *b4 = strstr(buf, "bad4");
    CHECK(b2 && b4 && b2 < b4 && strstr(e.first, "bad2"), "%d jobs: not in kernel order:\n%s", jobs, buf);
    if (!want) want = strdup(buf);
    else CHECK(!strcmp(want, buf), "%d jobs: other messages than 1 job:\n%s", jobs, buf);
    free(buf);
  }
  printf("errors: %s", want ? want : "");
  free(want);
  drk_tile_module_destroy(m);
  return failures ? 1 : 0;
}

/* ---- join: what it refuses ---- */
/* A part as LLVM prints a module of one kernel. */
static char *part(const char *target, const char *decl, const char *name) {
  char *b = malloc(4096);
  snprintf(b, 4096,
           "//\n// Generated by LLVM NVPTX Back-End\n//\n\n.version 8.6\n.target %s\n.address_size 64\n\n"
           "\t// .globl\t%s\n%s\n.visible .entry %s()\n{\n$L__BB0_1:\n\tbra $L__BB0_1;\n}\n",
           target, name, decl, name);
  return b;
}

static int run_join(void) {
  struct {
    const char *what, *t0, *d0, *t1, *d1, *want; /* want: NULL joins; else a word of the error */
  } cases[] = {
      {"the same table twice", "sm_90a", ".global .align 4 .b8 tab[4] = {1, 2, 3, 4};\n", "sm_90a",
       ".global .align 4 .b8 tab[4] = {1, 2, 3, 4};\n", NULL},
      {"two definitions of one name", "sm_90a", ".global .align 4 .b8 tab[4] = {1, 2, 3, 4};\n", "sm_90a",
       ".global .align 4 .b8 tab[4] = {1, 2, 3, 5};\n", "'tab'"},
      {"two headers", "sm_90a", "", "sm_80", "", "header"},
      {"a declaration without its ';'", "sm_90a", ".global .align 4 .b8 tab[4]\n", "sm_90a", "", "laid out"},
  };
  for (size_t c = 0; c < DRK_ARRAY_LEN(cases); c++) {
    char *p[2] = {part(cases[c].t0, cases[c].d0, "k0"), part(cases[c].t1, cases[c].d1, "k1")};
    drk_diag_t d;
    drk_diag_init(&d, NULL);
    char *out = NULL;
    size_t n = 0;
    bool ok = drk_nvptx_ptx_join((const char *const *)p, 2, NULL, 0, &out, &n, &d);
    if (!cases[c].want) {
      int tabs = 0;
      for (const char *q = ok ? out : ""; (q = strstr(q, "tab[4]")) != NULL; q++) tabs++;
      CHECK(ok && n == strlen(out) && strstr(out, "$L__BB0_1") && strstr(out, "$L__BB1_1") && tabs == 1, "%s: %s",
            cases[c].what, ok ? out : d.first);
    } else {
      CHECK(!ok && strstr(d.first, "internal error") && strstr(d.first, cases[c].want), "%s: %s", cases[c].what,
            ok ? "joined" : d.first);
    }
    free(out), free(p[0]), free(p[1]);
  }
  printf("join: %zu cases\n", DRK_ARRAY_LEN(cases));
  return failures ? 1 : 0;
}

/* ---- cache ---- */
static void key_of(const char *s, uint8_t key[32]) {
  drk_kcache_key_t k;
  drk_kcache_key_init(&k, DRK_KCACHE_PTX);
  drk_kcache_key_add_str(&k, "s", s);
  drk_kcache_key_finish(&k, key);
}

static bool get_is(drk_kcache_t *c, drk_kcache_kind_t kind, const uint8_t key[32], const char *want) {
  void *p = NULL;
  size_t n = 0;
  if (!drk_kcache_get(c, kind, key, &p, &n)) return want == NULL;
  bool ok = want && n == strlen(want) && !memcmp(p, want, n) && ((char *)p)[n] == 0;
  free(p);
  return ok;
}

static void write_file(const char *path, const void *p, size_t n) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    if (write(fd, p, n) != (ssize_t)n) perror("write");
    close(fd);
  }
}

static int run_cache(void) {
  char *dir = tmp_dir("cache");
  char sub[4200];
  snprintf(sub, sizeof sub, "%s/a/b", dir); /* created on the first put */
  drk_codegen_opts_t o = {.cache_dir = sub};
  drk_kcache_t *c = drk_kcache_open(&o);
  CHECK(c && !strcmp(drk_kcache_dir(c), sub), "open");
  uint8_t k1[32], k2[32], k3[32];
  key_of("one", k1), key_of("two", k2), key_of("three", k3);
  CHECK(memcmp(k1, k2, 32), "different texts, same key");
  CHECK(get_is(c, DRK_KCACHE_PTX, k1, NULL), "a miss in an empty cache");
  CHECK(drk_kcache_put(c, DRK_KCACHE_PTX, k1, "payload one", 11), "put");
  CHECK(drk_kcache_put(c, DRK_KCACHE_PTX, k2, "", 0), "put of an empty payload");
  CHECK(get_is(c, DRK_KCACHE_PTX, k1, "payload one"), "round trip");
  CHECK(get_is(c, DRK_KCACHE_PTX, k2, ""), "round trip of an empty payload");
  CHECK(get_is(c, DRK_KCACHE_CUBIN, k1, NULL), "kinds are apart");
  CHECK(drk_kcache_put(c, DRK_KCACHE_PTX, k1, "payload 1bis", 12) && get_is(c, DRK_KCACHE_PTX, k1, "payload 1bis"),
        "a put replaces");
  /* a large payload */
  size_t big = 5u << 20;
  char *bp = malloc(big + 1);
  for (size_t i = 0; i < big; i++) bp[i] = (char)('a' + (i * 7919) % 26);
  bp[big] = 0;
  CHECK(drk_kcache_put(c, DRK_KCACHE_CUBIN, k3, bp, big) && get_is(c, DRK_KCACHE_CUBIN, k3, bp), "5 MB round trip");

  /* damaged entries: each a miss, then gone, then a put works again */
  char path[4400];
  drk_kcache_entry_path(c, DRK_KCACHE_PTX, k1, path, sizeof path);
  struct stat st;
  CHECK(stat(path, &st) == 0 && st.st_size == 64 + 12, "entry %s: header + payload", path);
  char *good = malloc((size_t)st.st_size);
  int fd = open(path, O_RDONLY);
  CHECK(read(fd, good, (size_t)st.st_size) == st.st_size, "read entry");
  close(fd);
  struct {
    const char *what;
    size_t len;
    int flip; /* byte to flip, -1 none */
  } bad[] = {{"truncated payload", (size_t)st.st_size - 1, -1}, {"truncated header", 40, -1}, {"empty", 0, -1},
             {"payload byte flipped", (size_t)st.st_size, 70}, {"length flipped", (size_t)st.st_size, 48},
             {"magic flipped", (size_t)st.st_size, 0}, {"key flipped", (size_t)st.st_size, 20},
             {"payload CRC flipped", (size_t)st.st_size, 57}, {"one byte longer", (size_t)st.st_size + 1, -1}};
  for (size_t i = 0; i < DRK_ARRAY_LEN(bad); i++) {
    char buf[256] = {0};
    memcpy(buf, good, bad[i].len < (size_t)st.st_size ? bad[i].len : (size_t)st.st_size);
    if (bad[i].flip >= 0) buf[bad[i].flip] ^= 0x20;
    write_file(path, buf, bad[i].len);
    drk_codegen_stats_t s0;
    memset(&s0, 0, sizeof s0);
    CHECK(get_is(c, DRK_KCACHE_PTX, k1, NULL), "%s: not a miss", bad[i].what);
    CHECK(stat(path, &st) != 0 && errno == ENOENT, "%s: not deleted", bad[i].what);
    CHECK(drk_kcache_put(c, DRK_KCACHE_PTX, k1, "payload 1bis", 12) && get_is(c, DRK_KCACHE_PTX, k1, "payload 1bis"),
          "%s: no put after it", bad[i].what);
    stat(path, &st);
  }
  /* an entry of k1 copied under k2's name: the key in its header says it is not k2's */
  char path2[4400];
  drk_kcache_entry_path(c, DRK_KCACHE_PTX, k2, path2, sizeof path2);
  write_file(path2, good, 64 + 12);
  CHECK(get_is(c, DRK_KCACHE_PTX, k2, NULL), "an entry under another key's name is a miss");
  drk_codegen_stats_t s;
  memset(&s, 0, sizeof s);
  drk_kcache_stats_add(c, &s);
  CHECK(s.bad_entries == DRK_ARRAY_LEN(bad) + 1, "%u bad entries counted", s.bad_entries);
  CHECK(s.cache_enabled && !strcmp(s.cache_dir, sub), "stats name the cache");
  drk_codegen_stats_print(&s, stdout);
  drk_kcache_close(c);

  /* disabled */
  o.no_cache = true;
  CHECK(!drk_kcache_open(&o), "no_cache still opens");
  o.no_cache = false;
  setenv("DRK_CACHE", "0", 1);
  CHECK(!drk_kcache_open(&o), "DRK_CACHE=0 still opens");
  setenv("DRK_CACHE", "off", 1);
  CHECK(!drk_kcache_open(&o), "DRK_CACHE=off still opens");
  unsetenv("DRK_CACHE");
  CHECK(get_is(NULL, DRK_KCACHE_PTX, k1, NULL) && !drk_kcache_put(NULL, DRK_KCACHE_PTX, k1, "x", 1),
        "a NULL cache misses and stores nothing");
  /* the default location: $DRK_CACHE_DIR, $XDG_CACHE_HOME/drkc, $HOME/.cache/drkc */
  drk_codegen_opts_t def = {0};
  setenv("DRK_CACHE_DIR", sub, 1);
  c = drk_kcache_open(&def);
  CHECK(c && !strcmp(drk_kcache_dir(c), sub), "DRK_CACHE_DIR");
  drk_kcache_close(c);
  unsetenv("DRK_CACHE_DIR");
  setenv("XDG_CACHE_HOME", "/x/y", 1);
  c = drk_kcache_open(&def);
  CHECK(c && !strcmp(drk_kcache_dir(c), "/x/y/drkc"), "XDG_CACHE_HOME");
  drk_kcache_close(c);
  setenv("XDG_CACHE_HOME", "relative", 1);
  setenv("HOME", "/h", 1);
  c = drk_kcache_open(&def);
  CHECK(c && !strcmp(drk_kcache_dir(c), "/h/.cache/drkc"), "HOME (a relative XDG_CACHE_HOME is ignored)");
  drk_kcache_close(c);

  /* unwritable: a regular file where the directory should be, and (not as root) a
   * read-only directory: silent misses, failed puts counted */
  char file[4200];
  snprintf(file, sizeof file, "%s/file", dir);
  write_file(file, "x", 1);
  const char *unusable[] = {file, NULL};
  char ro[4200];
  snprintf(ro, sizeof ro, "%s/ro", dir);
  mkdir(ro, 0555);
  if (geteuid() != 0) unusable[1] = ro;
  for (int i = 0; i < 2 && unusable[i]; i++) {
    drk_codegen_opts_t u = {.cache_dir = unusable[i]};
    c = drk_kcache_open(&u);
    CHECK(c, "open of %s", unusable[i]);
    CHECK(get_is(c, DRK_KCACHE_PTX, k1, NULL), "%s: not a miss", unusable[i]);
    CHECK(!drk_kcache_put(c, DRK_KCACHE_PTX, k1, "x", 1), "%s: put succeeds", unusable[i]);
    memset(&s, 0, sizeof s);
    drk_kcache_stats_add(c, &s);
    CHECK(s.store_failures == 1 && s.misses[DRK_KCACHE_PTX] == 1, "%s: stats", unusable[i]);
    drk_kcache_close(c);
  }
  /* and a compile through it still works, uncached */
  {
    const char *t = "#u1 = blocked{spt = [4], tpw = [32], wpc = [4], order = [0]}\n"
                    "kernel @u(%x: ptr<f32> {align = 16}) grid(1, 1, 1) block(128) smem(0) {\n"
                    "  %r = make_range {start = 0, end = 512} : tile<512xi32, #u1>\n"
                    "  %xs = splat %x : tile<512xptr<f32>, #u1>\n"
                    "  %xp = addptr %xs, %r : tile<512xptr<f32>, #u1>\n"
                    "  %v = load %xp : tile<512xf32, #u1>\n"
                    "  %w = add %v, %v : tile<512xf32, #u1>\n"
                    "  store %xp, %w\n"
                    "  return\n"
                    "}\n";
    drk_diag_t d;
    drk_diag_init(&d, stderr);
    drk_tile_module_t *m = drk_tile_parse(t, strlen(t), "u.drkt", &d);
    drk_codegen_stats_t us;
    memset(&us, 0, sizeof us);
    drk_codegen_opts_t u = {.jobs = 1, .cache_dir = file, .stats = &us};
    char *ptx = NULL;
    CHECK(m && drk_nvptx_compile_tile_module_opts(m, "sm_80", &u, &ptx, NULL, NULL, &d) && d.n_errors == 0,
          "a compile with an unusable cache directory fails");
    CHECK(us.store_failures == 1, "its store failure is not counted");
    free(ptx);
    drk_tile_module_destroy(m);
  }
  /* keys: fields are length-prefixed, so moving a boundary changes the key */
  {
    drk_kcache_key_t a, b;
    uint8_t ka[32], kb[32];
    drk_kcache_key_init(&a, DRK_KCACHE_PTX);
    drk_kcache_key_add_str(&a, "x", "ab");
    drk_kcache_key_add_str(&a, "y", "c");
    drk_kcache_key_init(&b, DRK_KCACHE_PTX);
    drk_kcache_key_add_str(&b, "x", "a");
    drk_kcache_key_add_str(&b, "y", "bc");
    drk_kcache_key_finish(&a, ka), drk_kcache_key_finish(&b, kb);
    CHECK(memcmp(ka, kb, 32), "keys of different field lists collide");
    drk_kcache_key_init(&b, DRK_KCACHE_CUBIN);
    drk_kcache_key_add_str(&b, "x", "ab");
    drk_kcache_key_add_str(&b, "y", "c");
    drk_kcache_key_finish(&b, kb);
    CHECK(memcmp(ka, kb, 32), "keys of different kinds collide");
    const char *id = drk_kcache_compiler_id();
    CHECK(strstr(id, DRK_VERSION_STRING) && (strstr(id, "build-id:") || strstr(id, "file:")), "compiler id '%s'", id);
    printf("compiler id: %s\n", id);
  }
  free(bp);
  free(good);
  chmod(ro, 0755);
  rm_rf(dir);
  free(dir);
  return failures ? 1 : 0;
}

/* ---- concurrent processes ---- */
#define N_PROC 16
#define N_KEYS 8
#define N_ROUNDS 200

/* The payload of key i: its size varies (4 KB .. 1 MB) and every byte depends on i. */
static char *payload(int i, size_t *n) {
  *n = (size_t)4096 << (i % 9);
  char *p = malloc(*n);
  for (size_t b = 0; b < *n; b++) p[b] = (char)(i * 31 + b * 7 + (b >> 12));
  return p;
}

static int run_concurrent(void) {
  char *dir = tmp_dir("conc");
  pid_t pids[N_PROC];
  for (int p = 0; p < N_PROC; p++) {
    pids[p] = fork();
    if (pids[p] == 0) {
      drk_codegen_opts_t o = {.cache_dir = dir};
      drk_kcache_t *c = drk_kcache_open(&o);
      int bad = 0, hits = 0;
      char want[N_KEYS][16];
      uint8_t keys[N_KEYS][32];
      for (int i = 0; i < N_KEYS; i++) {
        snprintf(want[i], sizeof want[i], "key %d", i);
        key_of(want[i], keys[i]);
      }
      for (int r = 0; r < N_ROUNDS; r++) {
        int i = (r * 5 + p) % N_KEYS;
        size_t n, gn;
        char *pl = payload(i, &n);
        void *got = NULL;
        if (drk_kcache_get(c, DRK_KCACHE_CUBIN, keys[i], &got, &gn)) {
          hits++;
          if (gn != n || memcmp(got, pl, n)) bad++;
          free(got);
        }
        if (r % 3 == p % 3) drk_kcache_put(c, DRK_KCACHE_CUBIN, keys[i], pl, n);
        free(pl);
      }
      drk_codegen_stats_t s;
      memset(&s, 0, sizeof s);
      drk_kcache_stats_add(c, &s);
      drk_kcache_close(c);
      /* a torn read would show as wrong bytes (bad) or as a deleted bad entry */
      _exit(bad ? 1 : s.bad_entries ? 2 : hits == 0 ? 3 : 0);
    }
  }
  int fails = 0;
  for (int p = 0; p < N_PROC; p++) {
    int st = 0;
    waitpid(pids[p], &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st)) {
      fprintf(stderr, "FAIL: process %d: %s %d\n", p, WIFEXITED(st) ? "exit" : "signal",
              WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
      fails++;
    }
  }
  CHECK(fails == 0, "%d of %d processes read a torn or foreign entry (exit 1: wrong bytes, 2: bad entry, 3: no hit)",
        fails, N_PROC);
  /* no temporary file is left behind */
  char cmd[4400];
  snprintf(cmd, sizeof cmd, "ls %s/cubin | grep -c tmp", dir);
  FILE *f = popen(cmd, "r");
  int tmps = -1;
  if (f) {
    if (fscanf(f, "%d", &tmps) != 1) tmps = -1;
    pclose(f);
  }
  CHECK(tmps == 0, "%d temporary files left", tmps);
  printf("%d processes x %d rounds on %d keys: no torn entry\n", N_PROC, N_ROUNDS, N_KEYS);
  rm_rf(dir);
  free(dir);
  return failures ? 1 : 0;
}

/* one ARCH FILE...: prints the one-module PTX (for looking at a difference) */
static int run_one(const char *arch, int n, char **files) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  drk_tile_module_t *m = load_joined(n, files, &d);
  if (!m) return 1;
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef mod = NULL;
  char *ptx = NULL;
  size_t len = 0;
  bool ok = drk_nvptx_lower_module(ctx, m, arch, &mod, &d) && drk_nvptx_compile_module(mod, arch, &ptx, &len, &d);
  if (ok) fwrite(ptx, 1, len, stdout);
  free(ptx);
  if (mod) LLVMDisposeModule(mod);
  LLVMContextDispose(ctx);
  drk_tile_module_destroy(m);
  return ok ? 0 : 1;
}

/* time ARCH JOBS FILE...: PTX (and with ptxas the cubin) without the cache; prints the stats */
static int run_time(const char *arch, int jobs, int n, char **files) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  drk_tile_module_t *m = load_joined(n, files, &d);
  if (!m) return 1;
  drk_codegen_stats_t st;
  memset(&st, 0, sizeof st);
  drk_codegen_opts_t o = {.jobs = jobs, .no_cache = true, .stats = &st};
  char *ptx = NULL;
  void *cub = NULL;
  size_t cn = 0;
  bool ok = drk_nvptx_compile_tile_module_opts(m, arch, &o, &ptx, getenv("DRK_TIME_CUBIN") ? &cub : NULL, &cn, &d);
  if (ok) drk_codegen_stats_print(&st, stdout);
  free(ptx), free(cub);
  drk_tile_module_destroy(m);
  return ok ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc >= 5 && !strcmp(argv[1], "time")) return run_time(argv[2], atoi(argv[3]), argc - 4, argv + 4);
  if (argc >= 4 && !strcmp(argv[1], "one")) return run_one(argv[2], argc - 3, argv + 3);
  if (argc >= 4 && !strcmp(argv[1], "ptx")) return run_ptx(argv[2], argc - 3, argv + 3);
  if (argc == 2 && !strcmp(argv[1], "cache")) return run_cache();
  if (argc == 2 && !strcmp(argv[1], "join")) return run_join();
  if (argc == 2 && !strcmp(argv[1], "concurrent")) return run_concurrent();
  if (argc == 3 && !strcmp(argv[1], "errors")) return run_errors(argv[2]);
  fprintf(stderr, "usage: test_codegen ptx ARCH FILE... | cache | join | concurrent | errors ARCH | one ARCH FILE... | time ARCH JOBS FILE...\n");
  return 2;
}
