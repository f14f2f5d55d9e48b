/* Running an external tool as a subprocess (see subprocess.h). The input goes through a
 * temporary file rather than a pipe: neither ptxas nor ld.lld reads "-" usefully. */
#include "backends/common/subprocess.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

bool drk_subprocess_is_exec(const char *p) {
  struct stat st;
  return p && *p && stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

char *drk_subprocess_strdup(const char *s) {
  char *r = strdup(s);
  if (!r) drk_fatal_internal(__FILE__, __LINE__, "out of memory");
  return r;
}

/* Reads the whole of fd into malloc'ed memory (NUL-terminated). */
static char *read_fd(int fd, size_t *out_n) {
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

bool drk_subprocess_run_elf(const drk_subprocess_tool_t *tool, const void *in, size_t in_size,
                            void **out_data, size_t *out_size, char **out_log, drk_diag_t *d) {
  const char *exe = tool->exe;
  const char *tmp = getenv("TMPDIR");
  if (!tmp || !*tmp) tmp = "/tmp";
  char in_path[4096], out_path[4200];
  snprintf(in_path, sizeof in_path, "%s/drkc-%s-XXXXXX", tmp, tool->tmp_tag);
  int fd = mkstemp(in_path);
  if (fd < 0) {
    drk_diag_error(d, drk_loc_none, "cannot create a temporary file in %s: %s", tmp, strerror(errno));
    return false;
  }
  snprintf(out_path, sizeof out_path, "%s%s", in_path, tool->out_suffix);
  bool ok = false;
  char *log = NULL;
  size_t log_n = 0;
  if (!drk_write_all(fd, in, in_size)) {
    drk_diag_error(d, drk_loc_none, "cannot write %s: %s", in_path, strerror(errno));
    close(fd);
    goto done;
  }
  close(fd);
  /* argv before fork: the child only execs */
  size_t n_opts = 0;
  while (tool->opts && tool->opts[n_opts]) n_opts++;
  char **argv = malloc(sizeof(char *) * (n_opts + 5));
  if (!argv) drk_fatal_internal(__FILE__, __LINE__, "out of memory");
  size_t ac = 0;
  argv[ac++] = (char *)exe;
  for (size_t i = 0; i < n_opts; i++) argv[ac++] = (char *)tool->opts[i];
  argv[ac++] = "-o", argv[ac++] = out_path, argv[ac++] = in_path, argv[ac] = NULL;
  int pipefd[2];
  if (pipe(pipefd) != 0) {
    drk_diag_error(d, drk_loc_none, "pipe failed: %s", strerror(errno));
    free(argv);
    goto done;
  }
  pid_t pid = fork();
  if (pid < 0) {
    drk_diag_error(d, drk_loc_none, "cannot start %s: %s", exe, strerror(errno));
    close(pipefd[0]);
    close(pipefd[1]);
    free(argv);
    goto done;
  }
  if (pid == 0) {
    dup2(pipefd[1], 1);
    dup2(pipefd[1], 2);
    close(pipefd[0]);
    close(pipefd[1]);
    execv(exe, argv);
    dprintf(2, "cannot execute %s: %s\n", exe, strerror(errno));
    _exit(127);
  }
  free(argv);
  close(pipefd[1]);
  log = read_fd(pipefd[0], &log_n);
  close(pipefd[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    /* Keep the diagnostic readable: the first part of the log says what went wrong. */
    drk_diag_error(d, drk_loc_none, "%s (%s) failed%s (%s %d): %.900s", tool->name, exe, tool->context,
                   WIFEXITED(status) ? "exit status" : "signal",
                   WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), log);
    goto done;
  }
  {
    int cfd = open(out_path, O_RDONLY);
    if (cfd < 0) {
      drk_diag_error(d, drk_loc_none, "%s produced no %s (%s): %s", tool->name, tool->out_kind, out_path,
                     strerror(errno));
      goto done;
    }
    size_t n = 0;
    char *data = read_fd(cfd, &n);
    close(cfd);
    if (n < 4 || memcmp(data, "\177ELF", 4) != 0) {
      drk_diag_error(d, drk_loc_none, "%s output %s is not an ELF file", tool->name, out_path);
      free(data);
      goto done;
    }
    *out_data = data;
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
  return ok;
}
