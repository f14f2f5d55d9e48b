#include "targets.h"

#include <stdio.h>
#include <string.h>

static const drk_target_info_t table[] = {
#define DRK_TARGET(E, name, vendor, num, fp8, archspec) \
  {#name, DRK_VENDOR_##vendor, num, fp8, archspec},
#include "targets.def"
#undef DRK_TARGET
};

const drk_target_info_t *drk_target_info(drk_target_t t) {
  DRK_ASSERT(t < DRK_TARGET_COUNT);
  return &table[t];
}

bool drk_target_from_name(const char *s, drk_target_t *out_t) {
  char buf[32];
  size_t n = strlen(s);
  if (n == 0 || n >= sizeof buf - 4) return false;
  /* nvcc spellings: compute_90 and bare 90/90a mean sm_90/sm_90a. */
  if (strncmp(s, "compute_", 8) == 0) snprintf(buf, sizeof buf, "sm_%s", s + 8);
  else if (s[0] >= '0' && s[0] <= '9') snprintf(buf, sizeof buf, "sm_%s", s);
  else snprintf(buf, sizeof buf, "%s", s);
  for (int i = 0; i < DRK_TARGET_COUNT; i++)
    if (strcmp(table[i].name, buf) == 0) {
      *out_t = (drk_target_t)i;
      return true;
    }
  return false;
}

unsigned drk_target_resolve(unsigned set, bool portable) {
  if (portable || !(set & (1u << DRK_TARGET_SM90))) return set;
  return (set & ~(1u << DRK_TARGET_SM90)) | (1u << DRK_TARGET_SM90A);
}

unsigned drk_target_fallback(unsigned set, bool portable) {
  if (portable || !(set & (1u << DRK_TARGET_SM90))) return 0;
  for (int i = 0; i < DRK_TARGET_COUNT; i++)
    if ((set & (1u << i)) && table[i].vendor == DRK_VENDOR_NV && table[i].number < 90) return 0;
  return 1u << DRK_TARGET_SM90;
}

const char *drk_target_known_list(void) {
  static char buf[256];
  if (!buf[0])
    for (int i = 0; i < DRK_TARGET_COUNT; i++) {
      if (i) strcat(buf, " ");
      strcat(buf, table[i].name);
    }
  return buf;
}

bool drk_target_parse_list(const char *list, unsigned *out_set, drk_diag_t *d) {
  unsigned set = 0;
  const char *p = list;
  for (;;) {
    const char *e = strchr(p, ',');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    char name[64];
    if (n == 0 || n >= sizeof name) {
      drk_diag_error(d, drk_loc_none, "empty or overlong target in list '%s'", list);
      return false;
    }
    memcpy(name, p, n);
    name[n] = 0;
    drk_target_t t;
    if (!drk_target_from_name(name, &t)) {
      drk_diag_error(d, drk_loc_none, "unknown target '%s' (known targets: %s)", name, drk_target_known_list());
      return false;
    }
    set |= 1u << t;
    if (!e) break;
    p = e + 1;
  }
  *out_set = set;
  return true;
}
