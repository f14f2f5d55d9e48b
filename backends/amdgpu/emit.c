/* LLVM module -> gfx942 relocatable object (or assembly text), in memory.
 *
 * Requires a module built for DRK_AMDGPU_TRIPLE (drk_amdgpu_module_create). Verifies it,
 * runs LLVM's default<On> pipeline on a clone with the AMDGPU target machine (which adds
 * address-space inference, kernel-argument lowering, LDS lowering and the other AMDGPU
 * passes), then emits (backends/common/emit.c). The object is relocatable: link.c turns it into a
 * loadable code object. */
#include "backends/amdgpu/amdgpu.h"
#include "backends/common/target.h"

static bool drk_amdgpu_emit(LLVMModuleRef m, const char *arch, const drk_amdgpu_opts_t *opts,
                            LLVMCodeGenFileType kind, char **out, size_t *out_len,
                            drk_diag_t *d) {
  drk_amdgpu_opts_t o = {.opt_level = 3};
  if (opts) o = *opts;
  return drk_gpu_emit(m, arch, o.opt_level, o.no_verify, drk_amdgpu_target_machine_create, kind,
                      kind == LLVMObjectFile ? "an object" : "assembly", out, out_len, d);
}

bool drk_amdgpu_compile_module_opts(LLVMModuleRef m, const char *arch,
                                    const drk_amdgpu_opts_t *opts, void **out_obj,
                                    size_t *out_size, drk_diag_t *d) {
  char *p = NULL;
  size_t n = 0;
  if (!drk_amdgpu_emit(m, arch, opts, LLVMObjectFile, &p, &n, d)) return false;
  *out_obj = p;
  *out_size = n;
  return true;
}

bool drk_amdgpu_compile_module(LLVMModuleRef m, const char *arch, void **out_obj,
                               size_t *out_size, drk_diag_t *d) {
  return drk_amdgpu_compile_module_opts(m, arch, NULL, out_obj, out_size, d);
}

bool drk_amdgpu_compile_module_asm(LLVMModuleRef m, const char *arch,
                                   const drk_amdgpu_opts_t *opts, char **out_asm,
                                   size_t *out_len, drk_diag_t *d) {
  return drk_amdgpu_emit(m, arch, opts, LLVMAssemblyFile, out_asm, out_len, d);
}
