/* What the drkc program's commands share (tools/drkc.c): option matching and the compile
 * options every command that compiles takes. */
#ifndef DRKC_H
#define DRKC_H

#include "pipeline/pipeline.h"

/* "drkc: error: <fmt with arg>" and the --help hint on stderr; returns 2 (usage error). */
int drkc_usage_error(const char *fmt, const char *arg);
/* Matches "--name=value", "--name value", "-name=value" against names (NULL-ended) at argv[*i]
 * (advancing *i over a separate value); returns the value ("" when missing), or NULL when
 * argv[*i] is none of the names. */
const char *drkc_opt_value(int argc, char **argv, int *i, const char *const *names);
/* One of the compile options at argv[*i] into c (--bind, --precision, --matmul-precision,
 * --accuracy-budget, --calibration, --layout, --fusion-aggressiveness, --max-graph-depth,
 * --schedule, --schedules (the path in *schedules_path), --jobs, --no-cache, --time-stages): 1 taken, 0 not one of them, -1 a bad
 * value (reported). */
int drkc_parse_compile_option(int argc, char **argv, int *i, drk_compile_options_t *c, const char **schedules_path);
/* After the options: --accuracy-budget needs --precision=auto and --matmul-precision=highest,
 * --calibration needs a budget. 0, or 2 after reporting the usage error. */
int drkc_check_budget_options(const drk_compile_options_t *c);
/* --version (tools/version.c): drkc's version and commit, LLVM's version, the ptxas it runs. */
void drkc_print_version(FILE *out);

#endif
