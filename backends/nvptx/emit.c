/* LLVM module -> PTX text, in memory.
 *
 * Requires a module built for DRK_NVPTX_TRIPLE (drk_nvptx_module_create). Verifies it,
 * runs LLVM's default<On> pipeline on a clone (so one module can be compiled for several
 * archs; the caller's module is never modified) with the NVPTX target machine (which adds NVVMReflect,
 * address-space inference and the other NVPTX passes), then emits PTX through
 * LLVMTargetMachineEmitToMemoryBuffer. No text IR is parsed on this path. */
#include "backends/nvptx/nvptx.h"

#include <stdlib.h>
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Transforms/PassBuilder.h>

bool drk_nvptx_compile_module_opts(LLVMModuleRef m, const char *arch, const drk_nvptx_opts_t *opts,
                                   char **out_ptx, size_t *out_len, drk_diag_t *d) {
  drk_nvptx_opts_t o = {.opt_level = 3};
  if (opts) o = *opts;
  if (o.opt_level < 0 || o.opt_level > 3) {
    drk_diag_error(d, drk_loc_none, "optimisation level %d out of range 0..3", o.opt_level);
    return false;
  }
  char *msg = NULL;
  if (!o.no_verify && LLVMVerifyModule(m, LLVMReturnStatusAction, &msg)) {
    drk_diag_error(d, drk_loc_none, "internal error: invalid LLVM module for %s: %s", arch,
                   msg ? msg : "?");
    LLVMDisposeMessage(msg);
    return false;
  }
  LLVMDisposeMessage(msg);
  LLVMTargetMachineRef tm = drk_nvptx_target_machine_create(arch, o.opt_level, d);
  if (!tm) return false;
  bool ok = false;
  LLVMMemoryBufferRef buf = NULL;
  m = LLVMCloneModule(m);
  if (o.opt_level > 0) {
    char pipeline[32];
    snprintf(pipeline, sizeof pipeline, "default<O%d>", o.opt_level);
    LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
    LLVMErrorRef e = LLVMRunPasses(m, pipeline, tm, po);
    LLVMDisposePassBuilderOptions(po);
    if (e) {
      char *em = LLVMGetErrorMessage(e);
      drk_diag_error(d, drk_loc_none, "LLVM optimisation failed for %s: %s", arch, em);
      LLVMDisposeErrorMessage(em);
      goto done;
    }
  }
  msg = NULL;
  if (LLVMTargetMachineEmitToMemoryBuffer(tm, m, LLVMAssemblyFile, &msg, &buf)) {
    drk_diag_error(d, drk_loc_none, "LLVM could not emit PTX for %s: %s", arch, msg ? msg : "?");
    LLVMDisposeMessage(msg);
    goto done;
  }
  size_t n = LLVMGetBufferSize(buf);
  char *ptx = malloc(n + 1);
  if (!ptx) drk_fatal_internal(__FILE__, __LINE__, "out of memory");
  memcpy(ptx, LLVMGetBufferStart(buf), n);
  ptx[n] = 0;
  /* The buffer may carry its own NUL; report the text length. */
  *out_len = strlen(ptx);
  *out_ptx = ptx;
  ok = true;
done:
  if (buf) LLVMDisposeMemoryBuffer(buf);
  LLVMDisposeModule(m);
  LLVMDisposeTargetMachine(tm);
  return ok;
}

bool drk_nvptx_compile_module(LLVMModuleRef m, const char *arch, char **out_ptx,
                              size_t *out_len, drk_diag_t *d) {
  return drk_nvptx_compile_module_opts(m, arch, NULL, out_ptx, out_len, d);
}
