/* PTX -> cubin through the ptxas program (the CUDA toolkit has no library for it that we
 * may link). Runs `ptxas -arch=<arch> -O3 -v -o <tmp>.cubin <tmp>.ptx` as a subprocess
 * (fork/exec, no shell), captures its combined stdout/stderr, reads the cubin back and
 * removes the temporary files. Also parses the -v resource report.
 *
 * ptxas is looked for in $DRK_PTXAS, $CUDA_HOME/bin, /usr/local/cuda/bin and $PATH. */
#define _GNU_SOURCE /* memmem */
#include "backends/nvptx/nvptx.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static bool drk_is_exec(const char *p) {
  struct stat st;
  return p && *p && stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

static char *drk_strdup_or_die(const char *s) {
  char *r = strdup(s);
  if (!r) drk_fatal_internal(__FILE__, __LINE__, "out of memory");
  return r;
}

char *drk_nvptx_ptxas_find(drk_diag_t *d) {
  char buf[4096], looked[2048] = "";
  const char *env = getenv("DRK_PTXAS");
  if (env && *env) {
    if (drk_is_exec(env)) return drk_strdup_or_die(env);
    snprintf(looked + strlen(looked), sizeof looked - strlen(looked), "$DRK_PTXAS=%.900s, ", env);
  }
  const char *cuda = getenv("CUDA_HOME");
  if (cuda && *cuda) {
    snprintf(buf, sizeof buf, "%s/bin/ptxas", cuda);
    if (drk_is_exec(buf)) return drk_strdup_or_die(buf);
    snprintf(looked + strlen(looked), sizeof looked - strlen(looked), "%.900s, ", buf);
  }
  if (drk_is_exec("/usr/local/cuda/bin/ptxas")) return drk_strdup_or_die("/usr/local/cuda/bin/ptxas");
  snprintf(looked + strlen(looked), sizeof looked - strlen(looked), "/usr/local/cuda/bin/ptxas, ");
  const char *path = getenv("PATH");
  if (path) {
    for (const char *p = path; *p;) {
      const char *e = strchr(p, ':');
      size_t n = e ? (size_t)(e - p) : strlen(p);
      if (n > 0 && n < sizeof buf - 8) {
        snprintf(buf, sizeof buf, "%.*s/ptxas", (int)n, p);
        if (drk_is_exec(buf)) return drk_strdup_or_die(buf);
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

static bool drk_write_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n) {
    ssize_t w = write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w;
    n -= (size_t)w;
  }
  return true;
}

/* Reads the whole of fd into malloc'ed memory (NUL-terminated). */
static char *drk_read_fd(int fd, size_t *out_n) {
  size_t cap = 4096, n = 0;
  char *b = malloc(cap);
  if (!b) drk_fatal_internal(__FILE__, __LINE__, "out of memory");
  for (;;) {
    if (cap - n < 2) {
      cap *= 2;
      b = realloc(b, cap);
      if (!b) drk_fatal_internal(__FILE__, __LINE__, "out of memory");
    }
    ssize_t r = read(fd, b + n, cap - n - 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    n += (size_t)r;
  }
  b[n] = 0;
  *out_n = n;
  return b;
}

bool drk_nvptx_ptxas(const char *ptx, const char *arch, void **out_cubin, size_t *out_size,
                     char **out_log, drk_diag_t *d) {
  if (!drk_nvptx_arch_find(arch, d)) return false;
  char *exe = drk_nvptx_ptxas_find(d);
  if (!exe) return false;
  const char *tmp = getenv("TMPDIR");
  if (!tmp || !*tmp) tmp = "/tmp";
  char in_path[4096], out_path[4200];
  snprintf(in_path, sizeof in_path, "%s/drkc-ptxas-XXXXXX", tmp);
  int fd = mkstemp(in_path);
  if (fd < 0) {
    drk_diag_error(d, drk_loc_none, "cannot create a temporary file in %s: %s", tmp, strerror(errno));
    free(exe);
    return false;
  }
  snprintf(out_path, sizeof out_path, "%s.cubin", in_path);
  bool ok = false;
  char *log = NULL;
  size_t log_n = 0;
  if (!drk_write_all(fd, ptx, strlen(ptx))) {
    drk_diag_error(d, drk_loc_none, "cannot write %s: %s", in_path, strerror(errno));
    close(fd);
    goto done;
  }
  close(fd);
  char arch_opt[64];
  snprintf(arch_opt, sizeof arch_opt, "-arch=%s", arch);
  int pipefd[2];
  if (pipe(pipefd) != 0) {
    drk_diag_error(d, drk_loc_none, "pipe failed: %s", strerror(errno));
    goto done;
  }
  pid_t pid = fork();
  if (pid < 0) {
    drk_diag_error(d, drk_loc_none, "cannot start %s: %s", exe, strerror(errno));
    close(pipefd[0]);
    close(pipefd[1]);
    goto done;
  }
  if (pid == 0) {
    dup2(pipefd[1], 1);
    dup2(pipefd[1], 2);
    close(pipefd[0]);
    close(pipefd[1]);
    /* ptxas reads "-" as nothing useful: the PTX goes through the temporary file. */
    char *argv[] = {exe, arch_opt, "-O3", "-v", "-o", out_path, in_path, NULL};
    execv(exe, argv);
    dprintf(2, "cannot execute %s: %s\n", exe, strerror(errno));
    _exit(127);
  }
  close(pipefd[1]);
  log = drk_read_fd(pipefd[0], &log_n);
  close(pipefd[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    /* Keep the diagnostic readable: the first part of the log says what went wrong. */
    drk_diag_error(d, drk_loc_none, "ptxas (%s) failed for %s (%s %d): %.900s", exe, arch,
                   WIFEXITED(status) ? "exit status" : "signal",
                   WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), log);
    goto done;
  }
  {
    int cfd = open(out_path, O_RDONLY);
    if (cfd < 0) {
      drk_diag_error(d, drk_loc_none, "ptxas produced no cubin (%s): %s", out_path, strerror(errno));
      goto done;
    }
    size_t n = 0;
    char *cubin = drk_read_fd(cfd, &n);
    close(cfd);
    if (n < 4 || memcmp(cubin, "\177ELF", 4) != 0) {
      drk_diag_error(d, drk_loc_none, "ptxas output %s is not an ELF file", out_path);
      free(cubin);
      goto done;
    }
    *out_cubin = cubin;
    *out_size = n;
    if (out_log) {
      *out_log = log;
      log = NULL;
    }
    ok = true;
  }
done:
  unlink(in_path);
  unlink(out_path);
  free(log);
  free(exe);
  return ok;
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
