/* Packaging: the last stage of the pipeline (pipeline/pipeline.h).
 *
 * drk_package_fatbin packs a cubin per NVIDIA target plus PTX of the newest portable one (for
 * forward compatibility) into one fat binary; drk_package_module describes the launches, the
 * arena plan, the weights and the code images (a fat binary, a gfx942 offload bundle) as a
 * module file (backends/package/module.h, docs/module-format.md) whose one plan serves every
 * image.
 *
 * Errors are reported through d; the functions then return false and write nothing to their
 * out parameters. */
#ifndef DRK_PACKAGE_H
#define DRK_PACKAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "backends/package/module.h"
#include "backends/targets.h"
#include "ir/graph.h"
#include "lower/lower.h"
#include "passes/plan_memory.h"

/* One NVIDIA target's code (codegen's result). */
typedef struct drk_nv_code {
  const drk_target_info_t *t;
  char *ptx;
  void *cubin;
  size_t cubin_size;
} drk_nv_code_t;

/* The fat binary of code[0..n) (malloc'ed; free()) and its image list in image_targets (cap
 * bytes): "sm_87,sm_90a,compute_87". */
bool drk_package_fatbin(const drk_nv_code_t *code, size_t n, void **out_fb, size_t *out_fb_size, char *image_targets,
                        size_t cap, drk_diag_t *d);

typedef struct drk_package_options {
  unsigned targets;         /* bit set over drk_target_t: the module's target list */
  const char *command_line; /* provenance */
  const char *model_hash;   /* provenance: "sha256:<hex>"; NULL: "sha256:unknown" */
  const char *weights_file; /* --weights=external: the side file's base name; NULL: embedded */
  /* --accuracy-budget's choice (passes/precision_auto.h), recorded as the PRECISION_AUTO
   * section; NULL: none */
  const struct drk_precision_auto *precision_auto;
  /* a module of the same graph built for other targets (bytes, borrowed), stored as the
   * FALLBACK section: without its weights when they are this module's, byte for byte; NULL:
   * none */
  const void *fallback;
  size_t fallback_size;
} drk_package_options_t;

/* The module file of g lowered into l with memory plan plan and code images[0..n_images)
 * (malloc'ed; free()). With o->weights_file the weights blob is not in the module but in
 * *out_weights (malloc'ed; free()), which the caller writes to that file; out_weights may be
 * NULL otherwise. */
bool drk_package_module(const drk_graph_t *g, const drk_lowered_t *l, const drk_mem_plan_t *plan,
                        const drk_package_options_t *o, const drk_modfile_image_t *images, uint32_t n_images,
                        void **out_data, size_t *out_size, void **out_weights, size_t *out_weights_size,
                        drk_diag_t *d);

/* --report: kernels, planned memory and the precision mix. */
void drk_package_report(FILE *out, const drk_graph_t *g, const drk_lowered_t *l, const drk_mem_plan_t *plan);
/* --report: how many kernels multiply f32 matrices on CUDA cores, naming the flags that put
 * them on tensor cores (nothing when none does). */
void drk_package_report_cuda_cores(FILE *out, const drk_graph_t *g, const drk_lowered_t *l);

#endif
