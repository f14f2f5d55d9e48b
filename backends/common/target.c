/* Target machines and empty modules for the GPU backends (see target.h). */
#include "backends/common/target.h"

LLVMTargetMachineRef drk_gpu_target_machine_create(const char *triple, const char *target_desc,
                                                   const char *arch, const char *features,
                                                   int opt_level, LLVMRelocMode reloc,
                                                   drk_diag_t *d) {
  LLVMTargetRef t = NULL;
  char *err = NULL;
  if (LLVMGetTargetFromTriple(triple, &t, &err)) {
    drk_diag_error(d, drk_loc_none, "LLVM has no %s target: %s", target_desc, err ? err : "?");
    LLVMDisposeMessage(err);
    return NULL;
  }
  LLVMCodeGenOptLevel lvl = opt_level <= 0   ? LLVMCodeGenLevelNone
                            : opt_level == 1 ? LLVMCodeGenLevelLess
                            : opt_level == 2 ? LLVMCodeGenLevelDefault
                                             : LLVMCodeGenLevelAggressive;
  LLVMTargetMachineRef tm =
      LLVMCreateTargetMachine(t, triple, arch, features, lvl, reloc, LLVMCodeModelDefault);
  if (!tm) drk_diag_error(d, drk_loc_none, "LLVM could not create a target machine for %s", arch);
  return tm;
}

LLVMModuleRef drk_gpu_module_create(LLVMContextRef ctx, const char *name, const char *triple,
                                    LLVMTargetMachineRef tm) {
  LLVMModuleRef m = LLVMModuleCreateWithNameInContext(name, ctx);
  LLVMSetTarget(m, triple);
  LLVMTargetDataRef dl = LLVMCreateTargetDataLayout(tm);
  LLVMSetModuleDataLayout(m, dl);
  LLVMDisposeTargetData(dl);
  LLVMDisposeTargetMachine(tm);
  return m;
}
