/* PTX -> cubin through the ptxas program (the CUDA toolkit has no library for it that we
 * may link). Runs `ptxas -arch=<arch> -O3 -v --split-compile=0 -o <tmp>.cubin <tmp>.ptx` as a subprocess
 * (backends/common/subprocess.c), or takes the cubin from the kernel cache (keyed on the PTX,
 * the arch, `ptxas --version` and the options). Also parses the -v resource report.
 *
 * ptxas is looked for in $DRK_PTXAS, $CUDA_HOME/bin, /usr/local/cuda/bin and $PATH; for sm_87 a
 * CUDA 12.x one (drk_nvptx_ptxas_find_for). */
#define _GNU_SOURCE /* memmem */
#include "backends/nvptx/nvptx.h"
#include "backends/common/subprocess.h"

#include <errno.h>
#include <glob.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

char *drk_nvptx_ptxas_find(drk_diag_t *d) {
  char buf[4096], looked[2048] = "";
  const char *env = getenv("DRK_PTXAS");
  if (env && *env) {
    if (drk_subprocess_is_exec(env)) return drk_subprocess_strdup(env);
    snprintf(looked + strlen(looked), sizeof looked - strlen(looked), "$DRK_PTXAS=%.900s, ", env);
  }
  const char *cuda = getenv("CUDA_HOME");
  if (cuda && *cuda) {
    snprintf(buf, sizeof buf, "%s/bin/ptxas", cuda);
    if (drk_subprocess_is_exec(buf)) return drk_subprocess_strdup(buf);
    snprintf(looked + strlen(looked), sizeof looked - strlen(looked), "%.900s, ", buf);
  }
  if (drk_subprocess_is_exec("/usr/local/cuda/bin/ptxas")) return drk_subprocess_strdup("/usr/local/cuda/bin/ptxas");
  snprintf(looked + strlen(looked), sizeof looked - strlen(looked), "/usr/local/cuda/bin/ptxas, ");
  const char *path = getenv("PATH");
  if (path) {
    for (const char *p = path; *p;) {
      const char *e = strchr(p, ':');
      size_t n = e ? (size_t)(e - p) : strlen(p);
      if (n > 0 && n < sizeof buf - 8) {
        snprintf(buf, sizeof buf, "%.*s/ptxas", (int)n, p);
        if (drk_subprocess_is_exec(buf)) return drk_subprocess_strdup(buf);
      }
      p += n;
      if (*p == ':') p++;
    }
  }
  snprintf(looked + strlen(looked), sizeof looked - strlen(looked), "$PATH");
  drk_diag_error(d, drk_loc_none,
                 "ptxas not found (looked in %s); install the CUDA toolkit or set CUDA_HOME",
                 looked);
  return NULL;
}

/* The options of a run for arch_opt ("-arch=sm_90a"): --split-compile=0 makes ptxas optimize
 * on every CPU (the full LLaMA decoder's 84 kernels on 2 busy cores: 13.7 -> 10.2 s, 8.4 s
 * with 4 threads; same -v report, one block per kernel). A ptxas that fails with it (an
 * older one does not know the option) runs again without it (plain), and that run's errors
 * are the ones reported. */
#define PTXAS_SPLIT(arch_opt) {arch_opt, "-O3", "-v", "--split-compile=0", NULL}
#define PTXAS_PLAIN(arch_opt) {arch_opt, "-O3", "-v", NULL}

static bool ptxas_run(const char *exe, const char *ptx, const char *arch, void **out_cubin, size_t *out_size,
                      char **out_log, drk_diag_t *d) {
  char arch_opt[64], for_arch[80];
  snprintf(arch_opt, sizeof arch_opt, "-arch=%s", arch);
  snprintf(for_arch, sizeof for_arch, " for %s", arch);
  const char *const split[] = PTXAS_SPLIT(arch_opt), *const plain[] = PTXAS_PLAIN(arch_opt);
  drk_subprocess_tool_t tool = {exe, "ptxas", "ptxas", ".cubin", "cubin", for_arch, split};
  drk_diag_t quiet;
  drk_diag_init(&quiet, NULL);
  bool ok = drk_subprocess_run_elf(&tool, ptx, strlen(ptx), out_cubin, out_size, out_log, &quiet);
  if (!ok) {
    tool.opts = plain;
    ok = drk_subprocess_run_elf(&tool, ptx, strlen(ptx), out_cubin, out_size, out_log, d);
  }
  return ok;
}

bool drk_nvptx_ptxas(const char *ptx, const char *arch, void **out_cubin, size_t *out_size,
                     char **out_log, drk_diag_t *d) {
  if (!drk_nvptx_arch_find(arch, d)) return false;
  char *exe = drk_nvptx_ptxas_find_for(arch, NULL, d);
  if (!exe) return false;
  bool ok = ptxas_run(exe, ptx, arch, out_cubin, out_size, out_log, d);
  free(exe);
  return ok;
}

/* ---- the version, once per process and path ---- */
typedef struct ver_entry {
  struct ver_entry *next;
  char *exe, *version;
} ver_entry_t;

static pthread_mutex_t ver_mu = PTHREAD_MUTEX_INITIALIZER;
static ver_entry_t *ver_list; /* never freed: versions are borrowed for the process's life */

/* stdout+stderr of `exe --version` (malloc'ed), or NULL when it does not run or fails. */
static char *run_version(const char *exe) {
  int fds[2];
  if (pipe(fds) != 0) return NULL;
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]), close(fds[1]);
    return NULL;
  }
  if (pid == 0) {
    dup2(fds[1], 1), dup2(fds[1], 2);
    close(fds[0]), close(fds[1]);
    char *const argv[] = {(char *)exe, "--version", NULL};
    execv(exe, argv);
    _exit(127);
  }
  close(fds[1]);
  size_t n = 0, cap = 1024;
  char *b = malloc(cap);
  if (!b) drk_fatal_internal(__FILE__, __LINE__, "out of memory");
  for (;;) {
    if (cap - n < 2 && !(b = realloc(b, cap *= 2))) drk_fatal_internal(__FILE__, __LINE__, "out of memory");
    ssize_t r = read(fds[0], b + n, cap - n - 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    n += (size_t)r;
  }
  close(fds[0]);
  b[n] = 0;
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || n == 0) {
    free(b);
    return NULL;
  }
  while (n && (b[n - 1] == '\n' || b[n - 1] == ' ')) b[--n] = 0;
  return b;
}

const char *drk_nvptx_ptxas_version(const char *exe, drk_diag_t *d) {
  pthread_mutex_lock(&ver_mu);
  ver_entry_t *e = ver_list;
  while (e && strcmp(e->exe, exe) != 0) e = e->next;
  if (!e) {
    char *v = run_version(exe);
    if (v) {
      e = malloc(sizeof *e);
      if (!e) drk_fatal_internal(__FILE__, __LINE__, "out of memory");
      e->exe = drk_subprocess_strdup(exe), e->version = v, e->next = ver_list;
      ver_list = e;
    }
  }
  pthread_mutex_unlock(&ver_mu);
  if (!e) {
    drk_diag_error(d, drk_loc_none, "ptxas (%s) --version failed", exe);
    return NULL;
  }
  return e->version;
}

bool drk_nvptx_ptxas_cached(const char *ptx, size_t ptx_len, const char *arch, drk_kcache_t *c, void **out_cubin,
                            size_t *out_size, drk_diag_t *d) {
  if (!drk_nvptx_arch_find(arch, d)) return false;
  char *exe = drk_nvptx_ptxas_find_for(arch, NULL, d);
  if (!exe) return false;
  uint8_t key[32];
  bool keyed = false;
  if (c) {
    /* Without a version the cubin could come from another ptxas: no cache then. */
    drk_diag_t q;
    drk_diag_init(&q, NULL);
    const char *ver = drk_nvptx_ptxas_version(exe, &q);
    if (ver) {
      char arch_opt[64];
      snprintf(arch_opt, sizeof arch_opt, "-arch=%s", arch);
      const char *const opts[] = PTXAS_SPLIT(arch_opt);
      drk_kcache_key_t k;
      drk_kcache_key_init(&k, DRK_KCACHE_CUBIN);
      drk_kcache_key_add_str(&k, "ptxas", ver);
      for (int i = 0; opts[i]; i++) drk_kcache_key_add_str(&k, "option", opts[i]);
      drk_kcache_key_add(&k, "ptx", ptx, ptx_len);
      drk_kcache_key_finish(&k, key);
      keyed = true;
      if (drk_kcache_get(c, DRK_KCACHE_CUBIN, key, out_cubin, out_size)) {
        free(exe);
        return true;
      }
    }
  }
  void *cub = NULL;
  size_t cn = 0;
  bool ok = ptxas_run(exe, ptx, arch, &cub, &cn, NULL, d);
  free(exe);
  if (!ok) return false;
  if (keyed) drk_kcache_put(c, DRK_KCACHE_CUBIN, key, cub, cn);
  *out_cubin = cub;
  *out_size = cn;
  return true;
}

/* "12.9" from `ptxas --version` ("Cuda compilation tools, release 12.9, V12.9.86"), in buf. */
static bool release_of(const char *version, char *buf, size_t n) {
  const char *r = version ? strstr(version, "release ") : NULL;
  if (!r) return false;
  r += 8;
  size_t k = 0;
  while (k + 1 < n && ((r[k] >= '0' && r[k] <= '9') || r[k] == '.')) buf[k] = r[k], k++;
  buf[k] = 0;
  return k > 0;
}

/* The releases of the ptxas programs looked at, for "ptxas_find_for" (a few per process). */
static pthread_mutex_t rel_mu = PTHREAD_MUTEX_INITIALIZER;
static struct { char exe[512], release[16]; } rel_cache[16];
static int n_rel;

static const char *release_cached(const char *exe) {
  pthread_mutex_lock(&rel_mu);
  for (int i = 0; i < n_rel; i++)
    if (strcmp(rel_cache[i].exe, exe) == 0) {
      pthread_mutex_unlock(&rel_mu);
      return rel_cache[i].release;
    }
  pthread_mutex_unlock(&rel_mu);
  drk_diag_t q;
  drk_diag_init(&q, NULL);
  char rel[16];
  if (!release_of(drk_nvptx_ptxas_version(exe, &q), rel, sizeof rel)) snprintf(rel, sizeof rel, "unknown");
  pthread_mutex_lock(&rel_mu);
  const char *out = NULL;
  for (int i = 0; i < n_rel && !out; i++)
    if (strcmp(rel_cache[i].exe, exe) == 0) out = rel_cache[i].release;
  if (!out && n_rel < (int)DRK_ARRAY_LEN(rel_cache) && strlen(exe) < sizeof rel_cache[0].exe) {
    snprintf(rel_cache[n_rel].exe, sizeof rel_cache[n_rel].exe, "%s", exe);
    snprintf(rel_cache[n_rel].release, sizeof rel_cache[n_rel].release, "%s", rel);
    out = rel_cache[n_rel++].release;
  }
  pthread_mutex_unlock(&rel_mu);
  return out ? out : "unknown";
}

/* Where a CUDA 12.x ptxas may be (drk_nvptx_ptxas_find_for), in order; returns the count. */
static int candidates_cuda12(char cands[16][512]) {
  int n = 0;
  const char *e;
  /* $DRK_PTXAS_CUDA12, when set, is the only one: an explicit choice is never passed over */
  if ((e = getenv("DRK_PTXAS_CUDA12")) && *e) {
    snprintf(cands[n++], 512, "%s", e);
    return n;
  }
#ifdef DRK_PTXAS_CUDA12_DEFAULT
  snprintf(cands[n++], 512, "%s", DRK_PTXAS_CUDA12_DEFAULT);
#endif
  if ((e = getenv("DRK_PTXAS")) && *e) snprintf(cands[n++], 512, "%s", e);
  if ((e = getenv("CUDA_HOME")) && *e) snprintf(cands[n++], 512, "%s/bin/ptxas", e);
  glob_t gl;
  if (glob("/usr/local/cuda-12*/bin/ptxas", 0, NULL, &gl) == 0) {
    for (size_t i = gl.gl_pathc; i-- > 0 && n < 12;) snprintf(cands[n++], 512, "%s", gl.gl_pathv[i]);
    globfree(&gl);
  }
  snprintf(cands[n++], 512, "/usr/local/cuda/bin/ptxas");
  drk_diag_t q;
  drk_diag_init(&q, NULL);
  char *on_path = drk_nvptx_ptxas_find(&q);
  if (on_path) snprintf(cands[n++], 512, "%s", on_path);
  free(on_path);
  return n;
}

char *drk_nvptx_ptxas_find_for(const char *arch, const char **out_release, drk_diag_t *d) {
  const drk_nvptx_arch_t *a = drk_nvptx_arch_find(arch, d);
  if (!a) return NULL;
  if (!a->ptxas_major) {
    char *exe = drk_nvptx_ptxas_find(d);
    if (exe && out_release) *out_release = release_cached(exe);
    return exe;
  }
  /* candidates, in order; the first of the right major release wins */
  char cands[16][512];
  int n = candidates_cuda12(cands);
  char tried[2048] = "";
  for (int i = 0; i < n; i++) {
    bool dup = false;
    for (int j = 0; j < i; j++) dup |= strcmp(cands[i], cands[j]) == 0;
    if (dup) continue;
    size_t len = strlen(tried);
    if (!drk_subprocess_is_exec(cands[i])) {
      snprintf(tried + len, sizeof tried - len, "%s%.400s (missing)", len ? ", " : "", cands[i]);
      continue;
    }
    const char *rel = release_cached(cands[i]);
    if (atoi(rel) == a->ptxas_major) {
      if (out_release) *out_release = rel;
      return drk_subprocess_strdup(cands[i]);
    }
    snprintf(tried + len, sizeof tried - len, "%s%.400s (CUDA %s)", len ? ", " : "", cands[i], rel);
  }
  drk_diag_error(d, drk_loc_none,
                 "%s needs a CUDA %d.x ptxas (Jetson Orin: JetPack 6 ships CUDA 12.6 and CUDA 13 does not cover "
                 "Orin), found none: tried %s; install one with `pip install nvidia-cuda-nvcc-cu12` (tools/setup.sh "
                 "does) and set DRK_PTXAS_CUDA12=.../nvidia/cuda_nvcc/bin/ptxas, or reconfigure drkc to find it",
                 arch, a->ptxas_major, tried);
  return NULL;
}

/* Reads the integer before `unit` in a line like "ptxas info : Used 40 registers, ...". */
static int drk_usage_num(const char *line, const char *end, const char *unit) {
  size_t ul = strlen(unit);
  for (const char *p = line; p + ul <= end; p++) {
    if (strncmp(p, unit, ul) != 0) continue;
    const char *q = p;
    while (q > line && q[-1] == ' ') q--;
    const char *s = q;
    while (s > line && s[-1] >= '0' && s[-1] <= '9') s--;
    if (s < q) return atoi(s);
  }
  return 0;
}

bool drk_nvptx_usage_parse(const char *log, const char *name, drk_nvptx_usage_t *out) {
  if (!log) return false;
  /* -v prints "Compiling entry function 'k' for 'sm_90a'" followed by its info lines. */
  const char *p = log;
  for (;;) {
    p = strstr(p, "Compiling entry function '");
    if (!p) return false;
    p += strlen("Compiling entry function '");
    const char *q = strchr(p, '\'');
    if (!q) return false;
    if (!name || (strlen(name) == (size_t)(q - p) && strncmp(p, name, (size_t)(q - p)) == 0)) break;
  }
  drk_nvptx_usage_t u = {0};
  bool any = false;
  const char *next = strstr(p, "Compiling entry function '");
  for (const char *l = p; l && *l && (!next || l < next);) {
    const char *e = strchr(l, '\n');
    if (!e) e = l + strlen(l);
    if (memmem(l, (size_t)(e - l), "bytes stack frame", 17)) {
      u.stack = drk_usage_num(l, e, "bytes stack frame");
      u.spill_stores = drk_usage_num(l, e, "bytes spill stores");
      u.spill_loads = drk_usage_num(l, e, "bytes spill loads");
    }
    if (memmem(l, (size_t)(e - l), "registers", 9)) {
      u.registers = drk_usage_num(l, e, "registers");
      u.smem = drk_usage_num(l, e, "bytes smem");
      any = true;
    }
    l = *e ? e + 1 : e;
  }
  if (any) *out = u;
  return any;
}
