/* AMDGPU target: the supported architectures, LLVM target initialisation, target machines
 * and empty modules with the right triple, data layout and code object version.
 *
 * gfx942 is MI300A/MI300X: wave64, 64 KiB LDS per workgroup, 304 CUs in 8 XCDs (MI300X).
 * Code object v5 is requested through the module flag amdhsa_code_object_version = 500
 * because LLVM 22 defaults to v6, which ROCm 5.x (Debian's HIP runtime) cannot load. */
#include "backends/amdgpu/amdgpu.h"
#include "backends/common/target.h"

#include <pthread.h>
#include <string.h>

#include <llvm-c/Target.h>

static const drk_amdgpu_arch_t drk_amdgpu_archs[] = {
    {"gfx942", 942, 64, 65536, 304, 8, true, "+wavefrontsize64",
     "hipv4-amdgcn-amd-amdhsa--gfx942"},
};

const drk_amdgpu_arch_t *drk_amdgpu_arch_all(size_t *out_n) {
  *out_n = DRK_ARRAY_LEN(drk_amdgpu_archs);
  return drk_amdgpu_archs;
}

const drk_amdgpu_arch_t *drk_amdgpu_arch_find(const char *name, drk_diag_t *d) {
  for (size_t i = 0; name && i < DRK_ARRAY_LEN(drk_amdgpu_archs); i++)
    if (strcmp(drk_amdgpu_archs[i].name, name) == 0) return &drk_amdgpu_archs[i];
  char list[256] = "";
  for (size_t i = 0; i < DRK_ARRAY_LEN(drk_amdgpu_archs); i++) {
    if (i) strcat(list, ", ");
    strcat(list, drk_amdgpu_archs[i].name);
  }
  drk_diag_error(d, drk_loc_none, "unknown AMD GPU architecture '%s' (supported: %s)",
                 name ? name : "(null)", list);
  return NULL;
}

static pthread_once_t drk_amdgpu_once = PTHREAD_ONCE_INIT;

static void drk_amdgpu_init_once(void) {
  LLVMInitializeAMDGPUTargetInfo();
  LLVMInitializeAMDGPUTarget();
  LLVMInitializeAMDGPUTargetMC();
  LLVMInitializeAMDGPUAsmPrinter();
}

void drk_amdgpu_init(void) { pthread_once(&drk_amdgpu_once, drk_amdgpu_init_once); }

LLVMTargetMachineRef drk_amdgpu_target_machine_create(const char *arch, int opt_level,
                                                      drk_diag_t *d) {
  const drk_amdgpu_arch_t *a = drk_amdgpu_arch_find(arch, d);
  if (!a) return NULL;
  drk_amdgpu_init();
  /* PIC: code objects are shared objects that the loader relocates. */
  return drk_gpu_target_machine_create(DRK_AMDGPU_TRIPLE, "AMDGPU", a->name, a->features, opt_level, LLVMRelocPIC, d);
}

LLVMModuleRef drk_amdgpu_module_create(LLVMContextRef ctx, const char *name, drk_diag_t *d) {
  /* The data layout is the same for every gfx9 arch, so any arch's machine provides it. */
  LLVMTargetMachineRef tm = drk_amdgpu_target_machine_create("gfx942", 0, d);
  if (!tm) return NULL;
  LLVMModuleRef m = drk_gpu_module_create(ctx, name, DRK_AMDGPU_TRIPLE, tm);
  static const char key[] = "amdhsa_code_object_version";
  LLVMValueRef v = LLVMConstInt(LLVMInt32TypeInContext(ctx), DRK_AMDGPU_CODE_OBJECT_VERSION, 0);
  LLVMAddModuleFlag(m, LLVMModuleFlagBehaviorError, key, sizeof key - 1, LLVMValueAsMetadata(v));
  return m;
}
