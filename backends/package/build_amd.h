/* The AMD half of the build pipeline: a lowered tile module -> one gfx942 code object
 * (.hsaco, every kernel of the module in it) and a HIP offload bundle around it.
 *
 * Requires a module that passed drk_tile_verify() (drk_lower_graph's output; lower it with
 * target_sm 80 so that no Hopper-only op appears), the AMDGPU target of LLVM 22 and the
 * ld.lld program (backends/amdgpu/amdgpu.h says where it is looked for). Runs, as a plain
 * list of calls: tile IR -> LLVM IR (drk_amdgpu_lower_module), -O3 + codegen to a
 * relocatable object (drk_amdgpu_compile_module), ld.lld -shared (drk_amdgpu_link), and
 * drk_bundle_build with an empty host entry and the code object at a 4096-byte boundary
 * (what clang's HIP driver writes; hipModuleLoadData takes it, as it takes the bare hsaco).
 *
 * Launch contract of the kernels (what a HIP runtime must do): workgroup = kernel->block
 * threads in x, grid = the launch's grid in workgroups, kernel arguments in parameter order
 * with natural alignment (pointers 8 bytes), and NO dynamic LDS: each kernel's shared memory
 * (kernel->smem) is static in the code object (its .group_segment_fixed_size).
 *
 * Errors (an op/layout/dtype the AMDGPU lowering does not handle, located at the tile op;
 * ld.lld missing or failing) go to d; the function then returns false and writes no out
 * parameter. Buffers returned are malloc'ed: free() them. */
#ifndef DRK_BUILD_AMD_H
#define DRK_BUILD_AMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "ir/support.h"
#include "ir/tile.h"

/* arch: "gfx942" (NULL means gfx942). out_bundle/out_bundle_size may be NULL when only the
 * code object is wanted. */
bool drk_build_amd(const drk_tile_module_t *m, const char *arch, void **out_hsaco, size_t *out_hsaco_size,
                   void **out_bundle, size_t *out_bundle_size, drk_diag_t *d);

/* LLVM IR text of the lowered module (for --emit=llvm on an AMD target); *out_text is
 * malloc'ed and NUL-terminated. */
bool drk_build_amd_llvm(const drk_tile_module_t *m, const char *arch, char **out_text, drk_diag_t *d);

/* One line per kernel of m with its resources read back from the code object (VGPRs,
 * AGPRs, SGPRs, spills, LDS, scratch), as drkc --verbose prints them. Returns false when a
 * kernel is missing from the code object. */
bool drk_build_amd_report(const drk_tile_module_t *m, const void *hsaco, size_t size, FILE *out);

#endif
