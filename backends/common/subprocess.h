/* Running an external tool (ptxas, ld.lld) as a subprocess, for the GPU backends.
 *
 * fork/exec, no shell; the tool's stdout and stderr are captured together. Errors are
 * reported to the diag with the tool's name and the start of its log. */
#ifndef DRK_BACKENDS_COMMON_SUBPROCESS_H
#define DRK_BACKENDS_COMMON_SUBPROCESS_H

#include "ir/support.h"

#include <stdbool.h>
#include <stddef.h>

/* Whether path names an executable regular file. */
bool drk_subprocess_is_exec(const char *path);
/* strdup that stops the process on out-of-memory; the caller frees. */
char *drk_subprocess_strdup(const char *s);

/* One run of a tool that turns an input file into an ELF output file. */
typedef struct drk_subprocess_tool {
  const char *exe;         /* path of the program */
  const char *name;        /* for messages: "ptxas", "ld.lld" */
  const char *tmp_tag;     /* temporary input: $TMPDIR/drkc-<tmp_tag>-XXXXXX */
  const char *out_suffix;  /* output: the input's name + this (".cubin") */
  const char *out_kind;    /* for messages: "<name> produced no <out_kind>" */
  const char *context;     /* for messages, after "<name> (<exe>) failed": " for sm_90", "" */
  const char *const *opts; /* NULL-terminated options; argv is exe, opts..., -o OUT, IN */
} drk_subprocess_tool_t;

/* Writes in[0..in_size) to a temporary file, runs the tool, and returns the output file's
 * contents in *out_data (malloc'ed, NUL-terminated beyond *out_size; the caller frees) and,
 * when out_log is not NULL, the tool's output in *out_log (malloc'ed; the caller frees).
 * Both temporary files are removed. false + error when the tool cannot run, exits non-zero
 * or its output is not an ELF file; out_* are then untouched. */
bool drk_subprocess_run_elf(const drk_subprocess_tool_t *tool, const void *in, size_t in_size,
                            void **out_data, size_t *out_size, char **out_log, drk_diag_t *d);

#endif
