/* drkc --version: what a bug report needs to reproduce a compile: the drkc version and commit,
 * the LLVM it was built with, and the ptxas it would run (path and version), or where it
 * looked. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Core.h>

#include "backends/nvptx/nvptx.h"
#include "drk_git_hash.h"
#include "ir/support.h"
#include "tools/drkc.h"

void drkc_print_version(FILE *out) {
  unsigned maj = 0, min = 0, patch = 0;
  LLVMGetVersion(&maj, &min, &patch);
  fprintf(out, "drkc %s (git %s)\nLLVM %u.%u.%u\n", DRK_VERSION_STRING, DRK_GIT_HASH, maj, min, patch);
  drk_diag_t d;
  drk_diag_init(&d, NULL);
  char *exe = drk_nvptx_ptxas_find(&d);
  const char *ver = exe ? drk_nvptx_ptxas_version(exe, &d) : NULL;
  if (ver) {
    /* the line "Cuda compilation tools, release 13.0, V13.0.88" (else the last line) */
    const char *line = strstr(ver, "Cuda compilation tools"), *p;
    if (!line)
      for (line = ver, p = ver; *p; p++)
        if (*p == '\n' && p[1]) line = p + 1;
    int len = (int)(strchr(line, '\n') ? strchr(line, '\n') - line : (long)strlen(line));
    fprintf(out, "ptxas %s: %.*s\n", exe, len, line);
  } else {
    fprintf(out, "ptxas: %s\n", d.n_errors ? d.first : "not found");
  }
  free(exe);
}
