/* The target table (targets.def) and parsing of user target lists such as
 * "sm_87,sm_90a,gfx942" (nvcc spellings compute_90/sm_90 and the `90a` shorthand are accepted). */
#ifndef DRK_TARGETS_H
#define DRK_TARGETS_H

#include <stdbool.h>

#include "ir/support.h"

typedef enum drk_target {
#define DRK_TARGET(E, name, vendor, num, fp8, archspec) DRK_TARGET_##E,
#include "targets.def"
#undef DRK_TARGET
  DRK_TARGET_COUNT
} drk_target_t;

typedef enum drk_vendor { DRK_VENDOR_NV, DRK_VENDOR_AMD } drk_vendor_t;

typedef struct drk_target_info {
  const char *name;
  drk_vendor_t vendor;
  int number;      /* 90 for sm_90/sm_90a, 942 for gfx942 */
  bool has_fp8;
  bool arch_specific; /* sm_90a: code runs only on exactly that arch */
} drk_target_info_t;

const drk_target_info_t *drk_target_info(drk_target_t t);
/* Parses one target name; false if unknown. */
bool drk_target_from_name(const char *s, drk_target_t *out_t);
/* Parses a comma list into a bit set (bit t set for each target; duplicates fold). Reports an
 * unknown name through d with the list of known targets. */
bool drk_target_parse_list(const char *list, unsigned *out_set, drk_diag_t *d);
/* What a user's sm_90 means (docs/targets in drkc --help): Hopper at full speed. Without
 * portable, an sm_90 in set becomes sm_90a (wgmma, TMA, clusters: every compute-capability-9.0
 * device runs them); the fat binary then carries the sm_90a cubin and compute_90a PTX, which
 * a newer driver can JIT for a 9.0 device but no later GPU can run. With portable, sm_90 stays
 * the sm_80-class kernels with an sm_90 cubin and compute_90 PTX that later GPUs JIT. Other
 * targets pass through. Returns the resolved set. */
unsigned drk_target_resolve(unsigned set, bool portable);
/* The targets of the fallback plan that a module for the user's set carries (module.h's
 * FALLBACK): sm_90 (sm_80-class kernels, an sm_90 cubin, compute_90 PTX that later GPUs JIT)
 * when set has sm_90, not portable, and no older NVIDIA target (the plan is then the sm_90a
 * one, which runs on no later GPU); else 0. */
unsigned drk_target_fallback(unsigned set, bool portable);
/* "sm_80 sm_86 ..." for messages. */
const char *drk_target_known_list(void);

#endif
