/* LLVM module -> gfx942 relocatable object (or assembly text), in memory.
 *
 * Requires a module built for DRK_AMDGPU_TRIPLE (drk_amdgpu_module_create). Verifies it,
 * runs LLVM's default<On> pipeline on a clone (the caller's module is never modified) with
 * the AMDGPU target machine (which adds address-space inference, kernel-argument lowering,
 * LDS lowering and the other AMDGPU passes), then emits through
 * LLVMTargetMachineEmitToMemoryBuffer. The object is relocatable: link.c turns it into a
 * loadable code object. */
#include "backends/amdgpu/amdgpu.h"

#include <stdlib.h>
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Transforms/PassBuilder.h>

static bool drk_amdgpu_emit(LLVMModuleRef m, const char *arch, const drk_amdgpu_opts_t *opts,
                            LLVMCodeGenFileType kind, char **out, size_t *out_len,
                            drk_diag_t *d) {
  drk_amdgpu_opts_t o = {.opt_level = 3};
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
  LLVMTargetMachineRef tm = drk_amdgpu_target_machine_create(arch, o.opt_level, d);
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
  if (LLVMTargetMachineEmitToMemoryBuffer(tm, m, kind, &msg, &buf)) {
    drk_diag_error(d, drk_loc_none, "LLVM could not emit %s for %s: %s",
                   kind == LLVMObjectFile ? "an object" : "assembly", arch, msg ? msg : "?");
    LLVMDisposeMessage(msg);
    goto done;
  }
  size_t n = LLVMGetBufferSize(buf);
  char *p = malloc(n + 1);
  if (!p) drk_fatal_internal(__FILE__, __LINE__, "out of memory");
  memcpy(p, LLVMGetBufferStart(buf), n);
  p[n] = 0;
  *out_len = kind == LLVMAssemblyFile ? strlen(p) : n;
  *out = p;
  ok = true;
done:
  if (buf) LLVMDisposeMemoryBuffer(buf);
  LLVMDisposeModule(m);
  LLVMDisposeTargetMachine(tm);
  return ok;
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
