/* LLVM module -> PTX text or an AMDGPU object, in memory (see target.h, drk_gpu_emit).
 *
 * The pipeline runs on a clone so one module can be compiled for several archs; the
 * target machine adds the target's own passes (NVVMReflect, address-space inference,
 * kernel-argument and LDS lowering, ...). No text IR is parsed on this path. */
#include "backends/common/target.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Transforms/PassBuilder.h>

bool drk_gpu_emit(LLVMModuleRef m, const char *arch, int opt_level, bool no_verify,
                  drk_gpu_tm_create_fn tm_create, LLVMCodeGenFileType kind, const char *what,
                  char **out, size_t *out_len, drk_diag_t *d) {
  if (opt_level < 0 || opt_level > 3) {
    drk_diag_error(d, drk_loc_none, "optimisation level %d out of range 0..3", opt_level);
    return false;
  }
  char *msg = NULL;
  if (!no_verify && LLVMVerifyModule(m, LLVMReturnStatusAction, &msg)) {
    drk_diag_error(d, drk_loc_none, "internal error: invalid LLVM module for %s: %s", arch,
                   msg ? msg : "?");
    LLVMDisposeMessage(msg);
    return false;
  }
  LLVMDisposeMessage(msg);
  LLVMTargetMachineRef tm = tm_create(arch, opt_level, d);
  if (!tm) return false;
  bool ok = false;
  LLVMMemoryBufferRef buf = NULL;
  m = LLVMCloneModule(m);
  if (opt_level > 0) {
    char pipeline[32];
    snprintf(pipeline, sizeof pipeline, "default<O%d>", opt_level);
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
    drk_diag_error(d, drk_loc_none, "LLVM could not emit %s for %s: %s", what, arch, msg ? msg : "?");
    LLVMDisposeMessage(msg);
    goto done;
  }
  size_t n = LLVMGetBufferSize(buf);
  char *p = malloc(n + 1);
  if (!p) drk_fatal_internal(__FILE__, __LINE__, "out of memory");
  memcpy(p, LLVMGetBufferStart(buf), n);
  p[n] = 0;
  /* Assembly buffers may carry their own NUL; report the text length. */
  *out_len = kind == LLVMAssemblyFile ? strlen(p) : n;
  *out = p;
  ok = true;
done:
  if (buf) LLVMDisposeMemoryBuffer(buf);
  LLVMDisposeModule(m);
  LLVMDisposeTargetMachine(tm);
  return ok;
}
