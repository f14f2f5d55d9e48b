/* NVPTX target: the supported architectures, LLVM target initialisation, target machines
 * and empty modules with the right triple and data layout.
 *
 * PTX ISA versions: LLVM's minimum for each SM, raised where a feature the backend uses
 * needs more (sm_89, sm_90: fp8 mma.m16n8k32 needs PTX 8.4 in LLVM; sm_90a: TMA g2s.cta
 * forms need PTX 8.6). A lower version keeps the PTX that
 * goes into fat binaries loadable by older drivers. */
#include "backends/nvptx/nvptx.h"
#include "backends/common/target.h"

#include <pthread.h>
#include <string.h>

#include <llvm-c/Target.h>

static const drk_nvptx_arch_t drk_nvptx_archs[] = {
    {"sm_80", 80, false, 70, "+ptx70", 0},
    {"sm_86", 86, false, 71, "+ptx71", 0},
    /* Jetson Orin: JetPack 6 is CUDA 12.6 and CUDA 13 does not cover Orin, so cubins come
     * from a CUDA 12.x ptxas (ptxas.c) and the PTX stays at ISA 7.4 (<= 8.5, what a 12.6
     * driver JIT-compiles). */
    {"sm_87", 87, false, 74, "+ptx74", 12},
    {"sm_89", 89, false, 84, "+ptx84", 0},
    {"sm_90", 90, false, 84, "+ptx84", 0},
    {"sm_90a", 90, true, 86, "+ptx86", 0},
};

const drk_nvptx_arch_t *drk_nvptx_arch_all(size_t *out_n) {
  *out_n = DRK_ARRAY_LEN(drk_nvptx_archs);
  return drk_nvptx_archs;
}

const drk_nvptx_arch_t *drk_nvptx_arch_find(const char *name, drk_diag_t *d) {
  for (size_t i = 0; name && i < DRK_ARRAY_LEN(drk_nvptx_archs); i++)
    if (strcmp(drk_nvptx_archs[i].name, name) == 0) return &drk_nvptx_archs[i];
  char list[256] = "";
  for (size_t i = 0; i < DRK_ARRAY_LEN(drk_nvptx_archs); i++) {
    if (i) strcat(list, ", ");
    strcat(list, drk_nvptx_archs[i].name);
  }
  drk_diag_error(d, drk_loc_none, "unknown NVIDIA architecture '%s' (supported: %s)",
                 name ? name : "(null)", list);
  return NULL;
}

static pthread_once_t drk_nvptx_once = PTHREAD_ONCE_INIT;

static void drk_nvptx_init_once(void) {
  LLVMInitializeNVPTXTargetInfo();
  LLVMInitializeNVPTXTarget();
  LLVMInitializeNVPTXTargetMC();
  LLVMInitializeNVPTXAsmPrinter();
}

void drk_nvptx_init(void) { pthread_once(&drk_nvptx_once, drk_nvptx_init_once); }

LLVMTargetMachineRef drk_nvptx_target_machine_create(const char *arch, int opt_level,
                                                     drk_diag_t *d) {
  const drk_nvptx_arch_t *a = drk_nvptx_arch_find(arch, d);
  if (!a) return NULL;
  drk_nvptx_init();
  return drk_gpu_target_machine_create(DRK_NVPTX_TRIPLE, "NVPTX", a->name, a->features, opt_level, LLVMRelocDefault, d);
}

LLVMModuleRef drk_nvptx_module_create(LLVMContextRef ctx, const char *name, drk_diag_t *d) {
  /* The data layout does not depend on the SM, so any arch's machine provides it. */
  LLVMTargetMachineRef tm = drk_nvptx_target_machine_create("sm_80", 0, d);
  if (!tm) return NULL;
  LLVMModuleRef m = drk_gpu_module_create(ctx, name, DRK_NVPTX_TRIPLE, tm);
  return m;
}
