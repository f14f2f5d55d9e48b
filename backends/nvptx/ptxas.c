/* PTX -> cubin through the ptxas program (the CUDA toolkit has no library for it that we
 * may link). Runs `ptxas -arch=<arch> -O3 -v --split-compile=0 -o <tmp>.cubin <tmp>.ptx` as a subprocess
 * (backends/common/subprocess.c). Also parses the -v resource report.
 *
 * ptxas is looked for in $DRK_PTXAS, $CUDA_HOME/bin, /usr/local/cuda/bin and $PATH. */
#define _GNU_SOURCE /* memmem */
#include "backends/nvptx/nvptx.h"
#include "backends/common/subprocess.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

bool drk_nvptx_ptxas(const char *ptx, const char *arch, void **out_cubin, size_t *out_size,
                     char **out_log, drk_diag_t *d) {
  if (!drk_nvptx_arch_find(arch, d)) return false;
  char *exe = drk_nvptx_ptxas_find(d);
  if (!exe) return false;
  char arch_opt[64], for_arch[80];
  snprintf(arch_opt, sizeof arch_opt, "-arch=%s", arch);
  snprintf(for_arch, sizeof for_arch, " for %s", arch);
  /* --split-compile=0: ptxas optimizes on every CPU (the full LLaMA decoder's 84 kernels on
   * 2 busy cores: 13.7 -> 10.2 s, 8.4 s with 4 threads; same -v report, one block per
   * kernel). A ptxas that fails with it (an older one does not know the option) runs again
   * without it, and that run's errors are the ones reported. */
  const char *const split[] = {arch_opt, "-O3", "-v", "--split-compile=0", NULL}, *const plain[] = {arch_opt, "-O3", "-v", NULL};
  drk_subprocess_tool_t tool = {exe, "ptxas", "ptxas", ".cubin", "cubin", for_arch, split};
  drk_diag_t quiet;
  drk_diag_init(&quiet, NULL);
  bool ok = drk_subprocess_run_elf(&tool, ptx, strlen(ptx), out_cubin, out_size, out_log, &quiet);
  if (!ok) {
    tool.opts = plain;
    ok = drk_subprocess_run_elf(&tool, ptx, strlen(ptx), out_cubin, out_size, out_log, d);
  }
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
