/* The content-addressed kernel code cache, the job count and the worker pool of parallel
 * code generation (see kcache.h for the contract).
 *
 * Requires POSIX (threads, rename, mkstemp) and, for the compiler id, the ELF dynamic
 * loader's dl_iterate_phdr. Keys are SHA-256 (drk_modfile_sha256) and entry checksums CRC-32
 * (drk_modfile_crc32), the hashes the module format already has; nothing here hashes on its
 * own. The cache holds no lock across file operations: the file system's rename is what
 * makes concurrent writers and readers safe, in one process or many. */
#define _GNU_SOURCE /* dl_iterate_phdr */
#include "backends/common/kcache.h"
#include "backends/package/module.h"
#include "ir/support.h"

#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

static const char *const kind_names[DRK_KCACHE_KIND_COUNT] = {"ptx", "cubin"};

const char *drk_kcache_kind_name(drk_kcache_kind_t kind) {
  DRK_ASSERT(kind >= 0 && kind < DRK_KCACHE_KIND_COUNT);
  return kind_names[kind];
}

/* ---- jobs and the worker pool ---- */
int drk_codegen_jobs(const drk_codegen_opts_t *opts, int n_tasks) {
  long j = opts && opts->jobs > 0 ? opts->jobs : 0;
  const char *env = getenv("DRK_JOBS");
  if (!j && env && *env) {
    char *end;
    long v = strtol(env, &end, 10);
    if (*end == 0 && v > 0) j = v;
  }
  if (!j) j = sysconf(_SC_NPROCESSORS_ONLN);
  if (j > n_tasks) j = n_tasks;
  if (j > 256) j = 256;
  return j < 1 ? 1 : (int)j;
}

typedef struct pool {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int n, next, done;
  void (*task)(void *, int);
  void *ctx;
} pool_t;

static void *pool_worker(void *arg) {
  pool_t *p = arg;
  for (;;) {
    pthread_mutex_lock(&p->mu);
    int i = p->next < p->n ? p->next++ : -1;
    pthread_mutex_unlock(&p->mu);
    if (i < 0) return NULL;
    p->task(p->ctx, i);
    pthread_mutex_lock(&p->mu);
    p->done++;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
  }
}

void drk_codegen_parallel(int n, int jobs, void (*task)(void *ctx, int i), void *ctx,
                          void (*progress)(void *pctx, int done, int total), void *progress_ctx) {
  if (progress) progress(progress_ctx, 0, n);
  if (jobs > n) jobs = n;
  if (jobs <= 1) {
    for (int i = 0; i < n; i++) {
      task(ctx, i);
      if (progress) progress(progress_ctx, i + 1, n);
    }
    return;
  }
  pool_t p = {.n = n, .task = task, .ctx = ctx};
  pthread_mutex_init(&p.mu, NULL);
  pthread_cond_init(&p.cv, NULL);
  pthread_t *th = malloc(sizeof *th * (size_t)jobs);
  if (!th) drk_fatal_internal(__FILE__, __LINE__, "out of memory");
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  /* LLVM's codegen recurses deeply on big functions; sanitizer builds need more still. */
  pthread_attr_setstacksize(&attr, (size_t)32 << 20);
  int started = 0;
  for (int t = 0; t < jobs; t++)
    if (pthread_create(&th[started], &attr, pool_worker, &p) == 0) started++;
  pthread_attr_destroy(&attr);
  if (!started) {
    /* no thread at all (resource limits): the calling thread does the work */
    for (int i = 0; i < n; i++) {
      task(ctx, i);
      if (progress) progress(progress_ctx, i + 1, n);
    }
  } else {
    int shown = 0;
    pthread_mutex_lock(&p.mu);
    while (shown < n) {
      while (p.done == shown) pthread_cond_wait(&p.cv, &p.mu);
      int now = p.done;
      pthread_mutex_unlock(&p.mu);
      /* one call per finished kernel, outside the lock so a slow callback stalls no worker */
      for (; shown < now; shown++)
        if (progress) progress(progress_ctx, shown + 1, n);
      pthread_mutex_lock(&p.mu);
    }
    pthread_mutex_unlock(&p.mu);
    for (int t = 0; t < started; t++) pthread_join(th[t], NULL);
  }
  free(th);
  pthread_cond_destroy(&p.cv);
  pthread_mutex_destroy(&p.mu);
}

void drk_codegen_stats_print(const drk_codegen_stats_t *s, FILE *out) {
  fprintf(out, "codegen: %d kernels, %d jobs, %.2f s to PTX, %.2f s ptxas\n", s->kernels, s->jobs, s->lower_s,
          s->assemble_s);
  if (s->whole_modules)
    fprintf(out, "codegen: %u module(s) compiled whole, the kernels' PTX did not join: %s\n", s->whole_modules,
            s->whole_reason);
  if (!s->cache_enabled) {
    fprintf(out, "codegen: cache off\n");
    return;
  }
  fprintf(out, "codegen: cache %s:", s->cache_dir);
  for (int k = 0; k < DRK_KCACHE_KIND_COUNT; k++)
    fprintf(out, "%s %s %u hits %u misses %u stored", k ? "," : "", kind_names[k], s->hits[k], s->misses[k],
            s->stores[k]);
  if (s->store_failures) fprintf(out, "; %u not stored (directory not writable?)", s->store_failures);
  if (s->bad_entries) fprintf(out, "; %u bad entries deleted", s->bad_entries);
  fputc('\n', out);
}

/* ---- keys ---- */
static void key_append(drk_kcache_key_t *k, const void *p, size_t n) {
  if (k->len + n + 1 > k->cap) {
    size_t cap = k->cap ? k->cap : 4096;
    while (cap < k->len + n + 1) cap *= 2;
    char *t = realloc(k->text, cap);
    if (!t) drk_fatal_internal(__FILE__, __LINE__, "out of memory");
    k->text = t, k->cap = cap;
  }
  memcpy(k->text + k->len, p, n);
  k->len += n;
}

void drk_kcache_key_init(drk_kcache_key_t *k, drk_kcache_kind_t kind) {
  memset(k, 0, sizeof *k);
  drk_kcache_key_add_str(k, "drkc-kcache", drk_kcache_kind_name(kind));
}

void drk_kcache_key_add(drk_kcache_key_t *k, const char *name, const void *value, size_t n) {
  char len[32];
  int l = snprintf(len, sizeof len, "=%zu:", n);
  key_append(k, name, strlen(name));
  key_append(k, len, (size_t)l);
  key_append(k, value, n);
  key_append(k, "\n", 1);
}

void drk_kcache_key_add_str(drk_kcache_key_t *k, const char *name, const char *value) {
  drk_kcache_key_add(k, name, value ? value : "", value ? strlen(value) : 0);
}

void drk_kcache_key_finish(drk_kcache_key_t *k, uint8_t out_key[32]) {
  drk_modfile_sha256(k->text ? k->text : "", k->len, out_key);
  free(k->text);
  memset(k, 0, sizeof *k);
}

/* ---- the compiler id ---- */
typedef struct id_search {
  uintptr_t addr; /* an address inside this file's object */
  char id[240];
} id_search_t;

static int id_phdr(struct dl_phdr_info *info, size_t size, void *arg) {
  id_search_t *s = arg;
  bool mine = false;
  for (int i = 0; i < info->dlpi_phnum && !mine; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
    mine = ph->p_type == PT_LOAD && s->addr >= lo && s->addr < lo + ph->p_memsz;
  }
  if (!mine) return 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_NOTE) continue;
    const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr), *e = p + ph->p_memsz;
    while (p + 12 <= e) {
      uint32_t nsz, dsz, type;
      memcpy(&nsz, p, 4), memcpy(&dsz, p + 4, 4), memcpy(&type, p + 8, 4);
      const unsigned char *name = p + 12, *desc = name + ((nsz + 3) & ~3u);
      if (desc + dsz > e) break;
      if (type == 3 /* NT_GNU_BUILD_ID */ && nsz == 4 && memcmp(name, "GNU", 4) == 0 && dsz && dsz <= 64) {
        char *o = s->id + strlen(s->id);
        memcpy(o, "build-id:", 9), o += 9;
        for (uint32_t b = 0; b < dsz; b++) o += sprintf(o, "%02x", desc[b]);
        return 1;
      }
      p = desc + ((dsz + 3) & ~3u);
    }
  }
  /* no build id: the object file's size and time stand in for its contents */
  const char *path = info->dlpi_name && *info->dlpi_name ? info->dlpi_name : "/proc/self/exe";
  struct stat st;
  if (stat(path, &st) == 0)
    snprintf(s->id + strlen(s->id), sizeof s->id - strlen(s->id), "file:%lld.%lld", (long long)st.st_size,
             (long long)st.st_mtime);
  return 1;
}

static pthread_once_t id_once = PTHREAD_ONCE_INIT;
static char compiler_id[240];

static void compiler_id_init(void) {
  id_search_t s = {.addr = (uintptr_t)&compiler_id_init};
  snprintf(s.id, sizeof s.id, "drkc %s ", DRK_VERSION_STRING);
  dl_iterate_phdr(id_phdr, &s);
  snprintf(compiler_id, sizeof compiler_id, "%s", s.id);
}

const char *drk_kcache_compiler_id(void) {
  pthread_once(&id_once, compiler_id_init);
  return compiler_id;
}

/* ---- the cache ---- */
#define KC_MAGIC "DRKKC\r\n\x1a" /* 8 bytes */
#define KC_FORMAT 1u
#define KC_HEADER 64
/* A sanity bound on entries: a longer length field is a corrupt header. */
#define KC_MAX_PAYLOAD ((uint64_t)1 << 32)

struct drk_kcache {
  char dir[512];
  pthread_mutex_t mu; /* the counters */
  unsigned hits[DRK_KCACHE_KIND_COUNT], misses[DRK_KCACHE_KIND_COUNT], stores[DRK_KCACHE_KIND_COUNT];
  unsigned store_failures, bad_entries;
};

static bool env_off(const char *v) {
  return v && (!strcmp(v, "0") || !strcasecmp(v, "off") || !strcasecmp(v, "no") || !strcasecmp(v, "false"));
}

drk_kcache_t *drk_kcache_open(const drk_codegen_opts_t *opts) {
  if ((opts && opts->no_cache) || env_off(getenv("DRK_CACHE"))) return NULL;
  char dir[512];
  const char *e;
  int n = -1;
  if (opts && opts->cache_dir && *opts->cache_dir) n = snprintf(dir, sizeof dir, "%s", opts->cache_dir);
  else if ((e = getenv("DRK_CACHE_DIR")) && *e) n = snprintf(dir, sizeof dir, "%s", e);
  /* the XDG spec: a relative $XDG_CACHE_HOME is invalid and ignored */
  else if ((e = getenv("XDG_CACHE_HOME")) && *e == '/') n = snprintf(dir, sizeof dir, "%s/drkc", e);
  else if ((e = getenv("HOME")) && *e) n = snprintf(dir, sizeof dir, "%s/.cache/drkc", e);
  if (n <= 0 || (size_t)n >= sizeof dir - 100) return NULL; /* no location, or too long for entry names */
  drk_kcache_t *c = calloc(1, sizeof *c);
  if (!c) drk_fatal_internal(__FILE__, __LINE__, "out of memory");
  memcpy(c->dir, dir, (size_t)n + 1);
  pthread_mutex_init(&c->mu, NULL);
  return c;
}

void drk_kcache_close(drk_kcache_t *c) {
  if (!c) return;
  pthread_mutex_destroy(&c->mu);
  free(c);
}

const char *drk_kcache_dir(const drk_kcache_t *c) { return c ? c->dir : ""; }

bool drk_kcache_entry_path(const drk_kcache_t *c, drk_kcache_kind_t kind, const uint8_t key[32], char *buf,
                           size_t n) {
  if (!c) return false;
  int o = snprintf(buf, n, "%s/%s/", c->dir, drk_kcache_kind_name(kind));
  for (int i = 0; i < 32 && o > 0 && (size_t)o + 3 <= n; i++) o += snprintf(buf + o, n - (size_t)o, "%02x", key[i]);
  return o > 0 && (size_t)o < n;
}

void drk_kcache_stats_add(drk_kcache_t *c, drk_codegen_stats_t *s) {
  s->cache_enabled = c != NULL;
  snprintf(s->cache_dir, sizeof s->cache_dir, "%s", drk_kcache_dir(c));
  if (!c) return;
  pthread_mutex_lock(&c->mu);
  for (int k = 0; k < DRK_KCACHE_KIND_COUNT; k++)
    s->hits[k] += c->hits[k], s->misses[k] += c->misses[k], s->stores[k] += c->stores[k];
  s->store_failures += c->store_failures;
  s->bad_entries += c->bad_entries;
  pthread_mutex_unlock(&c->mu);
}

static void count(drk_kcache_t *c, unsigned *field) {
  pthread_mutex_lock(&c->mu);
  (*field)++;
  pthread_mutex_unlock(&c->mu);
}

static void put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32; }

static void header_make(uint8_t h[KC_HEADER], drk_kcache_kind_t kind, const uint8_t key[32], const void *data,
                        size_t size) {
  memcpy(h, KC_MAGIC, 8);
  put32(h + 8, KC_FORMAT);
  put32(h + 12, (uint32_t)kind);
  memcpy(h + 16, key, 32);
  put64(h + 48, size);
  put32(h + 56, drk_modfile_crc32(0, data, size));
  put32(h + 60, drk_modfile_crc32(0, h, 60));
}

static bool read_full(int fd, void *buf, size_t n) {
  char *p = buf;
  while (n) {
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r, n -= (size_t)r;
  }
  return true;
}

bool drk_kcache_get(drk_kcache_t *c, drk_kcache_kind_t kind, const uint8_t key[32], void **out_data,
                    size_t *out_size) {
  char path[700];
  if (!c || !drk_kcache_entry_path(c, kind, key, path, sizeof path)) return false;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    count(c, &c->misses[kind]);
    return false;
  }
  struct stat st;
  uint8_t h[KC_HEADER], want[KC_HEADER];
  char *data = NULL;
  bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= KC_HEADER && read_full(fd, h, KC_HEADER) &&
            memcmp(h, KC_MAGIC, 8) == 0 && get32(h + 8) == KC_FORMAT && get32(h + 12) == (uint32_t)kind &&
            memcmp(h + 16, key, 32) == 0 && get32(h + 60) == drk_modfile_crc32(0, h, 60) &&
            get64(h + 48) <= KC_MAX_PAYLOAD && (uint64_t)st.st_size == KC_HEADER + get64(h + 48);
  size_t size = ok ? (size_t)get64(h + 48) : 0;
  if (ok) {
    data = malloc(size + 1);
    if (!data) drk_fatal_internal(__FILE__, __LINE__, "out of memory");
    ok = read_full(fd, data, size);
    if (ok) {
      header_make(want, kind, key, data, size);
      ok = memcmp(want, h, KC_HEADER) == 0;
    }
  }
  close(fd);
  if (!ok) {
    /* A bad entry would miss forever: remove it so the next put replaces it. A put racing
     * with this may lose its fresh entry to the unlink; that is one more miss, no harm. */
    free(data);
    unlink(path);
    pthread_mutex_lock(&c->mu);
    c->bad_entries++, c->misses[kind]++;
    pthread_mutex_unlock(&c->mu);
    return false;
  }
  data[size] = 0;
  *out_data = data;
  *out_size = size;
  count(c, &c->hits[kind]);
  return true;
}

/* mkdir -p of dir; existing directories are fine. */
static bool mkdirs(char *dir) {
  struct stat st;
  if (stat(dir, &st) == 0) return S_ISDIR(st.st_mode);
  for (char *p = dir + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    int r = mkdir(dir, 0777);
    *p = '/';
    if (r != 0 && errno != EEXIST) return false;
  }
  return (mkdir(dir, 0777) == 0 || errno == EEXIST) && stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
}

bool drk_kcache_put(drk_kcache_t *c, drk_kcache_kind_t kind, const uint8_t key[32], const void *data,
                    size_t size) {
  char path[700], tmp[760];
  if (!c || !drk_kcache_entry_path(c, kind, key, path, sizeof path)) return false;
  char *slash = strrchr(path, '/');
  *slash = 0;
  bool ok = mkdirs(path);
  *slash = '/';
  int fd = -1;
  if (ok) {
    snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path);
    fd = mkstemp(tmp);
    ok = fd >= 0;
  }
  if (ok) {
    uint8_t h[KC_HEADER];
    header_make(h, kind, key, data, size);
    ok = drk_write_all(fd, h, KC_HEADER) && drk_write_all(fd, data, size);
    ok &= close(fd) == 0;
    /* rename is atomic: readers see the old entry or the whole new one, never a part */
    ok = ok && rename(tmp, path) == 0;
    if (!ok) unlink(tmp);
  }
  count(c, ok ? &c->stores[kind] : &c->store_failures);
  return ok;
}
