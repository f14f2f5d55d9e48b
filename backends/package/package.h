/* From a canonical graph to a module file: the back half of the drkc pipeline.
 *
 * Requires a graph after drk_pass_pipeline_canonicalize with static shapes. Runs, as a plain
 * list of calls: lower to tile IR (lower/lower.h), plan memory
 * (passes/plan_memory.h), generate code for every requested NVIDIA target (tile IR -> LLVM
 * -> PTX -> ptxas -> cubin) and for gfx942 (tile IR -> LLVM AMDGPU -> code object -> offload
 * bundle), pack a fat binary (a cubin per target plus PTX of the newest portable one for
 * forward compatibility), and describe everything as a module (backends/package/module.h)
 * whose one plan serves every image.
 * Each stage can stop the pipeline early for --emit (tile, llvm, ptx, cubin, fatbin).
 *
 * Errors are reported through d (located at the node or tile op that caused them); the
 * function then returns false and writes nothing to its out parameters. */
#ifndef DRK_BUILD_H
#define DRK_BUILD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "ir/graph.h"
#include "lower/lower.h"

typedef enum drk_build_stop {
  DRK_BUILD_TILE,   /* print the lowered tile module */
  DRK_BUILD_LLVM,   /* LLVM IR for the first NVIDIA target (or gfx942 if it is the only one) */
  DRK_BUILD_PTX,    /* PTX text of the first NVIDIA target */
  DRK_BUILD_CUBIN,  /* cubin of the first NVIDIA target */
  DRK_BUILD_FATBIN, /* fat binary of all NVIDIA targets */
  DRK_BUILD_HSACO,  /* gfx942 code object */
  DRK_BUILD_BUNDLE, /* clang offload bundle holding the gfx942 code object */
  DRK_BUILD_MODULE, /* module file */
  DRK_BUILD_SCHEDULES, /* every kernel's workload key, knob space and schedule (text) */
} drk_build_stop_t;

typedef struct drk_build_options {
  unsigned targets;         /* bit set over drk_target_t (backends/targets.h) */
  drk_build_stop_t stop;
  bool allow_tf32;          /* --matmul-precision=high */
  const char *command_line; /* provenance */
  /* provenance: the model file's hash ("sha256:<hex>", drk_modfile_sha256_string), asked for
   * once the module is packed (drkc joins a thread that hashed the file while the build
   * ran); NULL function or result: "sha256:unknown" */
  const char *(*model_hash)(void *ctx);
  void *model_hash_ctx;
  bool verbose;             /* per-kernel register/spill report on stderr */
  FILE *report;             /* --report: kernels, planned memory, precision mix (NULL: none) */
  /* fusion (lower/fuse.h): as in drk_lower_options_t; !fusion_set: the defaults */
  bool fusion_set;
  int fusion_level;         /* --fusion-aggressiveness=0..3 */
  int max_group_depth;      /* --max-graph-depth=N; < 1: default */
  drk_sched_knobs_t knobs;  /* --schedule: knobs pinned for every kernel (none: heuristic) */
  const drk_schedules_t *schedules; /* --schedules=FILE: per-kernel schedules (NULL: none) */
} drk_build_options_t;
#define DRK_BUILD_FUSION_OPTIONS 1

/* Runs the pipeline on g up to o->stop. On success *out_data (malloc'ed; free()) and
 * *out_size hold the result: text for TILE/LLVM/PTX, bytes otherwise. */
bool drk_build(const drk_graph_t *g, const drk_build_options_t *o, void **out_data, size_t *out_size,
               drk_diag_t *d);

#endif
