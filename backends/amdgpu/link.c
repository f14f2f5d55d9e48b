/* Relocatable object -> code object (.hsaco) through the ld.lld program (LLVM-C has no lld
 * API), and resource usage read back from the code object's metadata.
 *
 * Runs `ld.lld -shared --no-undefined -o <tmp>.hsaco <tmp>.o` as a subprocess
 * (backends/common/subprocess.c). ld.lld is looked for in $DRK_LD_LLD,
 * /usr/lib/llvm-22/bin and $PATH (ld.lld-22, ld.lld). The usage reader walks the ELF section headers to the NT_AMDGPU_METADATA note
 * ("AMDGPU", type 32) and decodes just enough msgpack to find one kernel's map; every read
 * is bounds-checked, so a truncated or hostile file yields false, never a crash. */
#include "backends/amdgpu/amdgpu.h"
#include "backends/common/subprocess.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *drk_amdgpu_lld_find(drk_diag_t *d) {
  char buf[4096], looked[2048] = "";
  const char *env = getenv("DRK_LD_LLD");
  if (env && *env) {
    if (drk_subprocess_is_exec(env)) return drk_subprocess_strdup(env);
    snprintf(looked + strlen(looked), sizeof looked - strlen(looked), "$DRK_LD_LLD=%.900s, ", env);
  }
  static const char fixed[] = "/usr/lib/llvm-22/bin/ld.lld";
  if (drk_subprocess_is_exec(fixed)) return drk_subprocess_strdup(fixed);
  snprintf(looked + strlen(looked), sizeof looked - strlen(looked), "%s, ", fixed);
  static const char *const names[] = {"ld.lld-22", "ld.lld"};
  const char *path = getenv("PATH");
  for (size_t k = 0; path && k < DRK_ARRAY_LEN(names); k++) {
    for (const char *p = path; *p;) {
      const char *e = strchr(p, ':');
      size_t n = e ? (size_t)(e - p) : strlen(p);
      if (n > 0 && n < sizeof buf - 16) {
        snprintf(buf, sizeof buf, "%.*s/%s", (int)n, p, names[k]);
        if (drk_subprocess_is_exec(buf)) return drk_subprocess_strdup(buf);
      }
      p += n;
      if (*p == ':') p++;
    }
  }
  snprintf(looked + strlen(looked), sizeof looked - strlen(looked), "ld.lld-22 and ld.lld on $PATH");
  drk_diag_error(d, drk_loc_none,
                 "ld.lld not found (looked in %s); install lld-22 (apt install lld-22) or set "
                 "DRK_LD_LLD", looked);
  return NULL;
}

bool drk_amdgpu_link(const void *obj, size_t obj_size, void **out_hsaco, size_t *out_size,
                     char **out_log, drk_diag_t *d) {
  if (obj_size < 4 || memcmp(obj, "\177ELF", 4) != 0) {
    drk_diag_error(d, drk_loc_none, "internal error: object to link is not an ELF file");
    return false;
  }
  char *exe = drk_amdgpu_lld_find(d);
  if (!exe) return false;
  /* The object has no file-type suffix: lld goes by the ELF header, not the name. */
  const char *const opts[] = {"-shared", "--no-undefined", NULL};
  const drk_subprocess_tool_t tool = {exe, "ld.lld", "lld", ".hsaco", "code object", "", opts};
  bool ok = drk_subprocess_run_elf(&tool, obj, obj_size, out_hsaco, out_size, out_log, d);
  free(exe);
  return ok;
}

/* ---- metadata note (msgpack) ---- */
typedef struct {
  const uint8_t *p, *end;
  bool bad;
} drk_mp_t;

static uint64_t drk_mp_be(drk_mp_t *m, unsigned n) {
  if (m->bad || (size_t)(m->end - m->p) < n) {
    m->bad = true;
    return 0;
  }
  uint64_t v = 0;
  for (unsigned i = 0; i < n; i++) v = v << 8 | m->p[i];
  m->p += n;
  return v;
}

static void drk_mp_advance(drk_mp_t *m, uint64_t n) {
  if (m->bad || (uint64_t)(m->end - m->p) < n) {
    m->bad = true;
    return;
  }
  m->p += n;
}

typedef enum { DRK_MP_INT, DRK_MP_STR, DRK_MP_ARRAY, DRK_MP_MAP, DRK_MP_OTHER } drk_mp_kind_t;

/* Reads one value's header: ints give their value, strings point at their bytes (advanced
 * over), arrays/maps give their element count (elements follow), the rest is skipped. */
static drk_mp_kind_t drk_mp_next(drk_mp_t *m, int64_t *ival, const char **s, uint64_t *n) {
  uint8_t c = (uint8_t)drk_mp_be(m, 1);
  if (m->bad) return DRK_MP_OTHER;
  uint64_t len = 0;
  if (c <= 0x7f) { *ival = c; return DRK_MP_INT; }
  if (c >= 0xe0) { *ival = (int8_t)c; return DRK_MP_INT; }
  if ((c & 0xf0) == 0x80) { *n = c & 0x0f; return DRK_MP_MAP; }
  if ((c & 0xf0) == 0x90) { *n = c & 0x0f; return DRK_MP_ARRAY; }
  if ((c & 0xe0) == 0xa0) { len = c & 0x1f; goto str; }
  switch (c) {
  case 0xcc: case 0xcd: case 0xce: case 0xcf:
    *ival = (int64_t)drk_mp_be(m, 1u << (c - 0xcc));
    return DRK_MP_INT;
  case 0xd0: *ival = (int8_t)drk_mp_be(m, 1); return DRK_MP_INT;
  case 0xd1: *ival = (int16_t)drk_mp_be(m, 2); return DRK_MP_INT;
  case 0xd2: *ival = (int32_t)drk_mp_be(m, 4); return DRK_MP_INT;
  case 0xd3: *ival = (int64_t)drk_mp_be(m, 8); return DRK_MP_INT;
  case 0xd9: len = drk_mp_be(m, 1); goto str;
  case 0xda: len = drk_mp_be(m, 2); goto str;
  case 0xdb: len = drk_mp_be(m, 4); goto str;
  case 0xdc: *n = drk_mp_be(m, 2); return DRK_MP_ARRAY;
  case 0xdd: *n = drk_mp_be(m, 4); return DRK_MP_ARRAY;
  case 0xde: *n = drk_mp_be(m, 2); return DRK_MP_MAP;
  case 0xdf: *n = drk_mp_be(m, 4); return DRK_MP_MAP;
  case 0xc4: drk_mp_advance(m, drk_mp_be(m, 1)); return DRK_MP_OTHER;
  case 0xc5: drk_mp_advance(m, drk_mp_be(m, 2)); return DRK_MP_OTHER;
  case 0xc6: drk_mp_advance(m, drk_mp_be(m, 4)); return DRK_MP_OTHER;
  case 0xc7: drk_mp_advance(m, drk_mp_be(m, 1) + 1); return DRK_MP_OTHER;
  case 0xc8: drk_mp_advance(m, drk_mp_be(m, 2) + 1); return DRK_MP_OTHER;
  case 0xc9: drk_mp_advance(m, drk_mp_be(m, 4) + 1); return DRK_MP_OTHER;
  case 0xca: drk_mp_advance(m, 4); return DRK_MP_OTHER;
  case 0xcb: drk_mp_advance(m, 8); return DRK_MP_OTHER;
  case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8:
    drk_mp_advance(m, 1 + (1u << (c - 0xd4)));
    return DRK_MP_OTHER;
  case 0xc0: case 0xc2: case 0xc3: return DRK_MP_OTHER;
  default: m->bad = true; return DRK_MP_OTHER; /* 0xc1 is never used */
  }
str:
  if (m->bad || (uint64_t)(m->end - m->p) < len) {
    m->bad = true;
    return DRK_MP_OTHER;
  }
  *s = (const char *)m->p;
  *n = len;
  m->p += len;
  return DRK_MP_STR;
}

static void drk_mp_skip(drk_mp_t *m, int depth) {
  int64_t iv;
  const char *s;
  uint64_t n = 0;
  if (depth > 32) {
    m->bad = true;
    return;
  }
  drk_mp_kind_t k = drk_mp_next(m, &iv, &s, &n);
  if (k == DRK_MP_ARRAY || k == DRK_MP_MAP) {
    uint64_t items = k == DRK_MP_MAP ? n * 2 : n;
    for (uint64_t i = 0; i < items && !m->bad; i++) drk_mp_skip(m, depth + 1);
  }
}

static bool drk_mp_streq(const char *s, uint64_t n, const char *lit) {
  return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

/* Reads one kernel map (its header already consumed, n pairs); fills *u and says whether
 * the kernel is `name`. */
static bool drk_mp_kernel(drk_mp_t *m, uint64_t n, const char *name, drk_amdgpu_usage_t *u) {
  static const struct { const char *key; size_t off; } fields[] = {
      {".sgpr_count", offsetof(drk_amdgpu_usage_t, sgpr_count)},
      {".vgpr_count", offsetof(drk_amdgpu_usage_t, vgpr_count)},
      {".agpr_count", offsetof(drk_amdgpu_usage_t, agpr_count)},
      {".sgpr_spill_count", offsetof(drk_amdgpu_usage_t, sgpr_spill_count)},
      {".vgpr_spill_count", offsetof(drk_amdgpu_usage_t, vgpr_spill_count)},
      {".group_segment_fixed_size", offsetof(drk_amdgpu_usage_t, group_segment)},
      {".private_segment_fixed_size", offsetof(drk_amdgpu_usage_t, private_segment)},
      {".wavefront_size", offsetof(drk_amdgpu_usage_t, wavefront_size)},
      {".max_flat_workgroup_size", offsetof(drk_amdgpu_usage_t, max_flat_workgroup_size)},
      {".kernarg_segment_size", offsetof(drk_amdgpu_usage_t, kernarg_segment_size)},
  };
  bool match = name == NULL;
  for (uint64_t i = 0; i < n && !m->bad; i++) {
    int64_t iv = 0;
    const char *k = NULL;
    uint64_t kn = 0;
    if (drk_mp_next(m, &iv, &k, &kn) != DRK_MP_STR) {
      m->bad = true;
      break;
    }
    const uint8_t *save = m->p;
    const char *s = NULL;
    uint64_t sn = 0;
    drk_mp_kind_t vk = drk_mp_next(m, &iv, &s, &sn);
    if (vk == DRK_MP_ARRAY || vk == DRK_MP_MAP) {
      m->p = save;
      drk_mp_skip(m, 1);
      continue;
    }
    if (vk == DRK_MP_STR && drk_mp_streq(k, kn, ".name") && name) match = drk_mp_streq(s, sn, name);
    if (vk != DRK_MP_INT) continue;
    for (size_t f = 0; f < DRK_ARRAY_LEN(fields); f++)
      if (drk_mp_streq(k, kn, fields[f].key)) *(int *)((char *)u + fields[f].off) = (int)iv;
  }
  return match && !m->bad;
}

static bool drk_amdgpu_usage_from_note(const uint8_t *p, size_t n, const char *name,
                                       drk_amdgpu_usage_t *out) {
  drk_mp_t m = {p, p + n, false};
  int64_t iv;
  const char *s;
  uint64_t cnt = 0;
  if (drk_mp_next(&m, &iv, &s, &cnt) != DRK_MP_MAP) return false;
  for (uint64_t i = 0; i < cnt && !m.bad; i++) {
    const char *k = NULL;
    uint64_t kn = 0;
    if (drk_mp_next(&m, &iv, &k, &kn) != DRK_MP_STR) return false;
    if (!drk_mp_streq(k, kn, "amdhsa.kernels")) {
      drk_mp_skip(&m, 1);
      continue;
    }
    uint64_t nk = 0;
    if (drk_mp_next(&m, &iv, &s, &nk) != DRK_MP_ARRAY) return false;
    for (uint64_t j = 0; j < nk && !m.bad; j++) {
      uint64_t np = 0;
      if (drk_mp_next(&m, &iv, &s, &np) != DRK_MP_MAP) return false;
      drk_amdgpu_usage_t u = {0};
      if (drk_mp_kernel(&m, np, name, &u)) {
        *out = u;
        return true;
      }
    }
    return false;
  }
  return false;
}

static uint64_t drk_le(const uint8_t *p, unsigned n) {
  uint64_t v = 0;
  for (unsigned i = n; i-- > 0;) v = v << 8 | p[i];
  return v;
}

bool drk_amdgpu_usage_read(const void *hsaco, size_t size, const char *name,
                           drk_amdgpu_usage_t *out) {
  const uint8_t *b = hsaco;
  /* ELF64, little-endian, machine EM_AMDGPU (224). */
  if (!b || size < 64 || memcmp(b, "\177ELF", 4) != 0 || b[4] != 2 || b[5] != 1) return false;
  if (drk_le(b + 18, 2) != 224) return false;
  uint64_t shoff = drk_le(b + 0x28, 8), shentsize = drk_le(b + 0x3a, 2), shnum = drk_le(b + 0x3c, 2);
  if (shentsize < 64 || shoff > size || shnum > (size - shoff) / shentsize) return false;
  for (uint64_t i = 0; i < shnum; i++) {
    const uint8_t *sh = b + shoff + i * shentsize;
    if (drk_le(sh + 4, 4) != 7 /* SHT_NOTE */) continue;
    uint64_t off = drk_le(sh + 24, 8), len = drk_le(sh + 32, 8);
    if (off > size || len > size - off) return false;
    const uint8_t *p = b + off, *end = b + off + len;
    while (end - p >= 12) {
      uint64_t namesz = drk_le(p, 4), descsz = drk_le(p + 4, 4), type = drk_le(p + 8, 4);
      uint64_t npad = (namesz + 3) & ~3ull, dpad = (descsz + 3) & ~3ull;
      if (npad > (uint64_t)(end - p - 12) || dpad > (uint64_t)(end - p - 12) - npad) return false;
      const uint8_t *nm = p + 12, *desc = nm + npad;
      if (type == 32 && namesz == 7 && memcmp(nm, "AMDGPU", 7) == 0)
        return drk_amdgpu_usage_from_note(desc, descsz, name, out);
      p = desc + dpad;
    }
  }
  return false;
}
