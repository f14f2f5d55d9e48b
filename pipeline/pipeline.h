/* The compile pipeline: one table of named stages, from a model file to a module.
 *
 *   import  verify  canonicalize  verify-canonical  fold-batchnorm  conv-to-matmul
 *   merge-matmul  precision  verify-precision  layout  verify-layout      (graph IR)
 *   fuse  lower  plan-memory                                              (tile IR + plan)
 *   codegen                                           (per target: LLVM -> PTX -> cubin, gfx942)
 *   package                                           (fat binary, offload bundle, module)
 *
 * Every stage says what it requires and guarantees (drk_stage_t.about, docs/architecture.md).
 * What the driver offers is read from the table: --dump-after=STAGE (the stage's dump),
 * --emit=KIND (the stage an output is taken after, drk_emit_kind_t), -v (each stage as it runs)
 * and --time-stages (each stage's wall time). One options struct, drk_compile_options_t,
 * reaches every stage.
 *
 * Usage:
 *   drk_pipeline_t *p = drk_pipeline_create(&opts, "model.onnx", NULL, &diag);
 *   if (drk_pipeline_run_to(p, "package")) drk_pipeline_output(p, "module", &data, &size);
 *   drk_pipeline_destroy(p);
 * A caller may stop in between (drkc run takes the interpreter's reference after
 * verify-canonical, then runs the rest) and reach the graph with drk_pipeline_graph().
 *
 * Errors are reported through the diag given at creation (located at the node, the tile op or
 * the file line that caused them); a stage that fails leaves the pipeline failed. */
#ifndef DRK_PIPELINE_H
#define DRK_PIPELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "ir/graph.h"
#include "lower/lower.h"
#include "passes/passes.h"
#include "passes/precision.h"

typedef struct drk_compile_options {
  /* what to compile for */
  unsigned targets;              /* bit set over drk_target_t (backends/targets.h) */
  drk_precision_t precision;     /* --precision */
  drk_matmul_precision_t matmul; /* --matmul-precision */
  /* --accuracy-budget=E with --precision=auto (0: none): per op group precisions measured on
   * calibration inputs (passes/precision_auto.h); --calibration=DIR: DIR/input_N.pb (or .npy)
   * as drkc run's --input-dir reads them (NULL: drawn as drkc run draws with --seed 0) */
  double accuracy_budget;
  const char *calibration;
  drk_layout_t layout;           /* --layout */
  int quantize_group;            /* --quantize=int4-weight --group-size=G: G (0: no quantization) */
  bool fusion_set;               /* --fusion-aggressiveness / --max-graph-depth given */
  int fusion_level, max_depth;
  drk_sched_knobs_t knobs;           /* --schedule: knobs pinned for every kernel */
  const drk_schedules_t *schedules;  /* --schedules=FILE (NULL: none); borrowed */
  /* --db=FILE: tuned schedules from the kernel database (search/tuned.h). The driver opens the
   * database and sets lookup (lower.h's hook, asked for every kernel without a --schedules
   * line); the pipeline only passes lookup to the lowering. require_tuned (--require-tuned):
   * the driver fails, listing them, when a kernel with knobs has no usable record. */
  const char *db;
  bool require_tuned;
  bool (*lookup)(void *ctx, const char *workload, drk_sched_knobs_t *out);
  void *lookup_ctx;
  /* import */
  const char *bind;              /* --bind=NAME=SIZE,... */
  const char *shapes_from;       /* --shapes-from=DIR: bind dims to DIR/input_N.{pb,npy} */
  const char *import_hint;       /* NAME=SIZE,... the import may read (a recurrence's length) when
                                  * there is no bind: the sizes of the inputs the caller has
                                  * (drk_pipeline_import_hint); the pipeline binds nothing from it */
  const char *dynamic;           /* --dynamic=NAME=LO..HI,...: one module, shape buckets (dynamic.h) */
  const char *buckets;           /* --buckets=NAME:S1,S2,...;...: the buckets (NULL: powers of two) */
  /* a --dynamic bucket (dynamic.c): NAME=SIZE,... of the dynamic dims, bound in canonicalize
   * after drk_pass_pad_mask masked the symbolic graph (their length inputs last) */
  const char *pad_bind;
  const char *const *freeze;     /* --freeze-input=NAME=FILE entries */
  int n_freeze;
  /* codegen */
  int jobs;                      /* kernels compiled at once (0: one per CPU) */
  bool no_cache;                 /* --no-cache: no compiled-kernel cache */
  /* what to say */
  const char *dump_after;        /* stage name, or "all" */
  FILE *report;                  /* --report (NULL: none) */
  int verbose;                   /* -v: each stage; per-kernel register reports */
  bool time_stages;              /* --time-stages: a table of stage times on stderr at the end */
  bool progress;                 /* a progress line on stderr (the driver: a TTY and not -q) */
  /* package */
  /* a fallback plan (module.h's FALLBACK; drk_target_fallback): the model compiled again for
   * these targets, for devices the main plan has no code for (drkc --target=sm_90: sm_90 with
   * compute_90 PTX beside sm_90a); 0: none */
  unsigned fallback_targets;
  const char *weights_file;      /* --weights=external: the side file's base name (the blob is the
                                  * output "weights"); NULL: the weights are in the module */
  /* provenance */
  const char *command_line;
  /* the model file's hash ("sha256:<hex>"), asked for once the module is packed (drkc hashes
   * the file on a thread while the pipeline runs); NULL function or result: "sha256:unknown" */
  const char *(*model_hash)(void *ctx);
  void *model_hash_ctx;
} drk_compile_options_t;

typedef struct drk_pipeline drk_pipeline_t;

typedef struct drk_stage {
  const char *name;
  const char *about;   /* requires / guarantees, one sentence */
  bool (*run)(drk_pipeline_t *p);
  void (*dump)(const drk_pipeline_t *p, FILE *out); /* --dump-after; NULL: nothing to print */
} drk_stage_t;

/* The stages in order (*out_n of them). */
const drk_stage_t *drk_pipeline_stages(size_t *out_n);
/* Index of the stage named name, or -1. */
int drk_pipeline_stage_index(const char *name);

typedef struct drk_emit_kind {
  const char *kind;  /* --emit=KIND */
  const char *after; /* the stage it is taken after */
  bool text;         /* text (stdout by default) or bytes (a file by default) */
  const char *ext;   /* default file extension */
  const char *about;
} drk_emit_kind_t;

const drk_emit_kind_t *drk_emit_kinds(size_t *out_n);
const drk_emit_kind_t *drk_emit_kind_find(const char *kind);

/* A pipeline over the model at path (.onnx, .drkg), or over graph g (taken: destroyed with the
 * pipeline; its stages start after import). emit: the output wanted (NULL: module): codegen
 * then makes only what it needs (the first NVIDIA target's PTX for --emit=ptx). o and d must
 * outlive the pipeline. */
drk_pipeline_t *drk_pipeline_create(const drk_compile_options_t *o, const char *path, drk_graph_t *g,
                                    const char *emit, drk_diag_t *d);
void drk_pipeline_destroy(drk_pipeline_t *p);

/* Runs the stages from the next one up to and including `stage`. False after a stage failed
 * (now or before). */
bool drk_pipeline_run_to(drk_pipeline_t *p, const char *stage);
/* The graph (borrowed; NULL before import or after a failure). The caller may bind its dims
 * between stages (drkc run binds them from its inputs after import). */
drk_graph_t *drk_pipeline_graph(drk_pipeline_t *p);
/* Output `kind` (drk_emit_kind_t) once its stage ran: malloc'ed (free()). "weights": the
 * weights blob of a module packed with o->weights_file (--weights=external). */
bool drk_pipeline_output(drk_pipeline_t *p, const char *kind, void **out_data, size_t *out_size);
/* --time-stages: the wall time of every stage run so far, as a table. */
void drk_pipeline_print_times(const drk_pipeline_t *p, FILE *out);
/* Binds the graph's symbolic input dims to the shapes of inputs (g->n_inputs tensors). */
struct drk_tensor;
/* The sizes input files give the model's symbolic input dims, as NAME=SIZE,... for
 * drk_compile_options_t.import_hint: the graph inputs of an ONNX model (read without its nodes)
 * matched with `NAME=FILE` entries of named[0..n_named) or DIR/input_N.{pb,npy} (dir may be
 * NULL). malloc'd; NULL when nothing is symbolic or no file says. Unreadable files are skipped
 * (the run reports them). */
char *drk_pipeline_import_hint(const char *model, const char *dir, const char *const *named, int n_named);
bool drk_pipeline_bind_from_inputs(drk_graph_t *g, const struct drk_tensor *inputs, drk_diag_t *d);
/* The lowering's result (kernels, launches with their schedules, knob spaces and workload
 * keys), borrowed; NULL before lower. */
const drk_lowered_t *drk_pipeline_lowered(const drk_pipeline_t *p);
/* --accuracy-budget: the choice the precision stage made and measured (borrowed); NULL
 * before that stage or without a budget. */
struct drk_precision_auto;
const struct drk_precision_auto *drk_pipeline_precision_auto(const drk_pipeline_t *p);
/* With pad_bind (a --dynamic bucket), after canonicalize: the length inputs drk_pass_pad_mask
 * added (graph inputs, int64 scalars the runtime fills with a dim's actual size) and the
 * bucket's size of each, at most max; returns how many. drkc tune fixes them at the size. */
int drk_pipeline_length_inputs(const drk_pipeline_t *p, const drk_value_t **values, int64_t *sizes, int max);
/* How many kernels the lowering made (0 before lower). */
size_t drk_pipeline_kernel_count(const drk_pipeline_t *p);

/* Leaves out of codegen the kernels for which drop(ctx, module, kernel) is true (their code is
 * in another image: drkc --dynamic shares kernels between buckets). Call after plan-memory and
 * before codegen; the launches keep naming the kernels, so the package's records still do (the
 * caller points them at the image that has the code). At least one kernel stays. Returns how
 * many were left out. */
struct drk_tile_module;
struct drk_tile_kernel;
size_t drk_pipeline_drop_kernels(drk_pipeline_t *p,
                                 bool (*drop)(void *ctx, const struct drk_tile_module *m, struct drk_tile_kernel *k),
                                 void *ctx);
/* The package stage's module size, bytes (0 before package). */
size_t drk_pipeline_module_size(const drk_pipeline_t *p);

/* The back half on graph g, which has been through the graph stages (or at least
 * canonicalize): fuse, lower, plan-memory, codegen and package, as far as `emit` needs. g is
 * borrowed. For tests and tools that build their graphs themselves. */
bool drk_pipeline_build(drk_graph_t *g, const drk_compile_options_t *o, const char *emit, void **out_data,
                        size_t *out_size, drk_diag_t *d);

#endif
