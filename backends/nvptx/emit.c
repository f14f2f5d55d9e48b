/* LLVM module -> PTX text, in memory.
 *
 * Requires a module built for DRK_NVPTX_TRIPLE (drk_nvptx_module_create). Verifies it,
 * runs LLVM's default<On> pipeline on a clone with the NVPTX target machine (which adds
 * NVVMReflect, address-space inference and the other NVPTX passes), then emits PTX
 * (backends/common/emit.c). */
#include "backends/nvptx/nvptx.h"
#include "backends/common/target.h"

bool drk_nvptx_compile_module_opts(LLVMModuleRef m, const char *arch, const drk_nvptx_opts_t *opts,
                                   char **out_ptx, size_t *out_len, drk_diag_t *d) {
  drk_nvptx_opts_t o = {.opt_level = 3};
  if (opts) o = *opts;
  return drk_gpu_emit(m, arch, o.opt_level, o.no_verify, drk_nvptx_target_machine_create, LLVMAssemblyFile,
                      "PTX", out_ptx, out_len, d);
}

bool drk_nvptx_compile_module(LLVMModuleRef m, const char *arch, char **out_ptx,
                              size_t *out_len, drk_diag_t *d) {
  return drk_nvptx_compile_module_opts(m, arch, NULL, out_ptx, out_len, d);
}
