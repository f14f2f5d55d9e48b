/* See build_amd.h. Each stage is one call into backends/amdgpu or backends/package/bundle;
 * this file only sequences them and owns the intermediate buffers. */
#include "backends/package/build_amd.h"

#include <stdlib.h>
#include <string.h>

#include "backends/amdgpu/amdgpu.h"
#include "backends/package/bundle.h"

static const drk_amdgpu_arch_t *arch_of(const char *arch, drk_diag_t *d) {
  return drk_amdgpu_arch_find(arch ? arch : "gfx942", d);
}

bool drk_build_amd(const drk_tile_module_t *m, const char *arch, void **out_hsaco, size_t *out_hsaco_size,
                   void **out_bundle, size_t *out_bundle_size, drk_diag_t *d) {
  const drk_amdgpu_arch_t *a = arch_of(arch, d);
  if (!a) return false;
  bool ok = false;
  void *obj = NULL, *hsaco = NULL, *bundle = NULL;
  size_t on = 0, hn = 0, bn = 0;
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef mod = drk_amdgpu_lower_module(m, ctx, a->name, d);
  if (!mod) goto done;
  if (!drk_amdgpu_compile_module(mod, a->name, &obj, &on, d)) goto done;
  if (!drk_amdgpu_link(obj, on, &hsaco, &hn, NULL, d)) goto done;
  if (out_bundle) {
    drk_bundle_entry_t es[2] = {{DRK_BUNDLE_HOST_X86_64, 0, NULL, 0}, {a->bundle_id, 0, hsaco, hn}};
    char err[256];
    if (drk_bundle_build(es, 2, DRK_BUNDLE_ALIGN_HIP, &bundle, &bn, err, sizeof err) != 0) {
      drk_diag_error(d, drk_loc_none, "amdgpu: cannot build the offload bundle: %s", err);
      goto done;
    }
  }
  *out_hsaco = hsaco;
  if (out_hsaco_size) *out_hsaco_size = hn;
  hsaco = NULL;
  if (out_bundle) {
    *out_bundle = bundle;
    if (out_bundle_size) *out_bundle_size = bn;
    bundle = NULL;
  }
  ok = true;
done:
  free(obj);
  free(hsaco);
  free(bundle);
  if (mod) LLVMDisposeModule(mod);
  LLVMContextDispose(ctx);
  return ok;
}

bool drk_build_amd_llvm(const drk_tile_module_t *m, const char *arch, char **out_text, drk_diag_t *d) {
  const drk_amdgpu_arch_t *a = arch_of(arch, d);
  if (!a) return false;
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef mod = drk_amdgpu_lower_module(m, ctx, a->name, d);
  bool ok = false;
  if (mod) {
    char *s = LLVMPrintModuleToString(mod);
    size_t n = strlen(s) + 1;
    char *t = malloc(n);
    if (t) {
      memcpy(t, s, n);
      *out_text = t;
      ok = true;
    } else {
      drk_diag_error(d, drk_loc_none, "amdgpu: out of memory");
    }
    LLVMDisposeMessage(s);
    LLVMDisposeModule(mod);
  }
  LLVMContextDispose(ctx);
  return ok;
}

bool drk_build_amd_report(const drk_tile_module_t *m, const void *hsaco, size_t size, FILE *out) {
  bool ok = true;
  for (size_t i = 0; i < m->n_kernels; i++) {
    const drk_tile_kernel_t *k = m->kernels[i];
    drk_amdgpu_usage_t u;
    if (!drk_amdgpu_usage_read(hsaco, size, k->name, &u)) {
      fprintf(out, "%s: not in the code object\n", k->name);
      ok = false;
      continue;
    }
    fprintf(out, "%s: vgpr %d agpr %d sgpr %d spills %d/%d lds %d scratch %d wave %d wg %d\n", k->name,
            u.vgpr_count, u.agpr_count, u.sgpr_count, u.sgpr_spill_count, u.vgpr_spill_count, u.group_segment,
            u.private_segment, u.wavefront_size, u.max_flat_workgroup_size);
  }
  return ok;
}
