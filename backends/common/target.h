/* LLVM target machines, empty modules and module -> code emission shared by the GPU
 * backends (backends/nvptx/target.c and emit.c, backends/amdgpu/target.c and emit.c keep
 * their arch tables, target initialisation and public entry points). */
#ifndef DRK_BACKENDS_COMMON_TARGET_H
#define DRK_BACKENDS_COMMON_TARGET_H

#include "ir/support.h"

#include <stdbool.h>
#include <stddef.h>

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

/* A target machine for triple with cpu `arch` and `features`; codegen level from opt_level
 * (<= 0 none, 1 less, 2 default, 3+ aggressive). The target must be initialised;
 * target_desc names it in errors ("NVPTX"). NULL + error. Caller disposes it. */
LLVMTargetMachineRef drk_gpu_target_machine_create(const char *triple, const char *target_desc,
                                                   const char *arch, const char *features,
                                                   int opt_level, LLVMRelocMode reloc,
                                                   drk_diag_t *d);

/* An empty module with triple and tm's data layout. Takes tm (disposes it); caller disposes
 * the module. */
LLVMModuleRef drk_gpu_module_create(LLVMContextRef ctx, const char *name, const char *triple,
                                    LLVMTargetMachineRef tm);

/* The target machine of a backend for arch (its drk_*_target_machine_create). */
typedef LLVMTargetMachineRef (*drk_gpu_tm_create_fn)(const char *arch, int opt_level, drk_diag_t *d);

/* Verifies m (unless no_verify), runs LLVM's default<O{opt_level}> pipeline on a clone (m is
 * left as it is) and emits `kind` for arch. *out is malloc'ed and NUL-terminated (free() it);
 * *out_len is the text length for assembly, the size for objects. `what` names the output
 * in errors ("PTX"). false + error; out_* untouched. */
bool drk_gpu_emit(LLVMModuleRef m, const char *arch, int opt_level, bool no_verify,
                  drk_gpu_tm_create_fn tm_create, LLVMCodeGenFileType kind, const char *what,
                  char **out, size_t *out_len, drk_diag_t *d);

#endif
