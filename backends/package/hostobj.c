/* The host object and static archive that embed a module (hostobj.h, docs/deploy.md).
 *
 * Written by hand rather than through LLVM's object emission: the object is one data
 * section and a symbol table, which is a few dozen bytes of headers, and writing them here
 * keeps every byte under our control (4096-byte section alignment, no timestamps, no
 * producer strings that change with the LLVM build). */
#include "backends/package/hostobj.h"

#include "backends/package/module.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool drk_host_parse(const char *t, drk_host_arch_t *out) {
  static const struct {
    const char *name;
    drk_host_arch_t arch;
  } names[] = {{"x86_64-linux-gnu", DRK_HOST_X86_64}, {"x86_64-unknown-linux-gnu", DRK_HOST_X86_64},
               {"x86_64-pc-linux-gnu", DRK_HOST_X86_64}, {"x86_64", DRK_HOST_X86_64},
               {"aarch64-linux-gnu", DRK_HOST_AARCH64}, {"aarch64-unknown-linux-gnu", DRK_HOST_AARCH64},
               {"aarch64", DRK_HOST_AARCH64}};
  for (size_t i = 0; i < DRK_ARRAY_LEN(names); i++)
    if (strcmp(t, names[i].name) == 0) {
      *out = names[i].arch;
      return true;
    }
  return false;
}

bool drk_host_name_ok(const char *name) {
  if (!name[0] || isdigit((unsigned char)name[0]) || strlen(name) > 200) return false;
  for (const char *c = name; *c; c++)
    if (!isalnum((unsigned char)*c) && *c != '_') return false;
  return true;
}

char *drk_host_name_from_path(const char *path) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  const char *dot = strchr(base, '.');
  size_t n = dot && dot != base ? (size_t)(dot - base) : strlen(base);
  if (n > 200) n = 200;
  char *s = malloc(n + 3);
  if (!s) return NULL;
  size_t k = 0;
  if (n == 0 || isdigit((unsigned char)base[0])) s[k++] = '_';
  for (size_t i = 0; i < n; i++) s[k++] = isalnum((unsigned char)base[i]) ? base[i] : '_';
  s[k] = 0;
  return s;
}

/* ---- little-endian writers into a zeroed buffer ---- */
static void w16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8); }
static void w32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void w64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

enum { EHDR = 64, SHDR = 64, SYM = 24, DATA_ALIGN = 4096 };

static void section(uint8_t *sh, uint32_t name, uint32_t type, uint64_t flags, uint64_t off, uint64_t size,
                    uint32_t link, uint32_t info, uint64_t align, uint64_t entsize) {
  w32(sh + 0, name);
  w32(sh + 4, type);
  w64(sh + 8, flags);
  w64(sh + 16, 0); /* address: none in a relocatable object */
  w64(sh + 24, off);
  w64(sh + 32, size);
  w32(sh + 40, link);
  w32(sh + 44, info);
  w64(sh + 48, align);
  w64(sh + 56, entsize);
}

static void symbol(uint8_t *s, uint32_t name, uint8_t info, uint16_t shndx, uint64_t value, uint64_t size) {
  w32(s + 0, name);
  s[4] = info;
  s[5] = 0; /* STV_DEFAULT */
  w16(s + 6, shndx);
  w64(s + 8, value);
  w64(s + 16, size);
}

/* The module's NVIDIA fat binary, if it has one (borrowed from module). */
static const void *module_fatbin(const void *module, size_t size, size_t *out_size) {
  drk_modfile_t *m = NULL;
  const void *fb = NULL;
  if (drk_modfile_read(module, size, NULL, &m, NULL, 0) != DRK_MODFILE_OK) return NULL;
  for (uint32_t i = 0; i < m->n_images && !fb; i++)
    if (m->images[i].kind == DRK_MODFILE_IMAGE_FATBIN) fb = m->images[i].data, *out_size = (size_t)m->images[i].size;
  drk_modfile_free(NULL, m);
  return fb;
}

bool drk_host_object(const void *module, size_t size, const char *name, drk_host_arch_t arch, void **out_data,
                     size_t *out_size, drk_diag_t *d) {
  if (!drk_host_name_ok(name)) {
    drk_diag_error(d, drk_loc_none, "'%s' cannot name the model's C API (a C identifier: letters, digits, '_', "
                                    "not starting with a digit); give one with --name=NAME", name);
    return false;
  }
  /* A copy of the fat binary in .nv_fatbin, where NVIDIA's tools look (cuobjdump --list-elf
   * --list-ptx, -sass): the object's GPU code can be inspected like nvcc's. The runtime uses
   * the module's own copy; nothing registers this one (no .nvFatBinSegment wrapper). */
  size_t fb_size = 0;
  const void *fb = module_fatbin(module, size, &fb_size);
  enum { SEC_NULL, SEC_DATA };
  const uint16_t sec_fatbin = fb ? 2 : 0, sec_symtab = fb ? 3 : 2, sec_strtab = (uint16_t)(sec_symtab + 1),
                 sec_shstrtab = (uint16_t)(sec_symtab + 2), sec_note = (uint16_t)(sec_symtab + 3),
                 n_sec = (uint16_t)(sec_note + 1);
  /* String tables: symbol names, then section names. */
  size_t nlen = strlen(name);
  char strtab[512];
  size_t sym_mod = 1, sym_size = sym_mod + nlen + sizeof "_drkm";
  size_t strtab_size = sym_size + nlen + sizeof "_drkm_size";
  strtab[0] = 0;
  snprintf(strtab + sym_mod, sizeof strtab - sym_mod, "%s_drkm", name);
  snprintf(strtab + sym_size, sizeof strtab - sym_size, "%s_drkm_size", name);
  static const char shstr[] = "\0.rodata.drkm\0.symtab\0.strtab\0.shstrtab\0.note.GNU-stack\0.nv_fatbin";
  const uint32_t n_data = 1, n_symtab = 14, n_strtab = 22, n_shstrtab = 30, n_note = 40, n_fatbin = 56;

  size_t data_size = align_up(size, 8) + 8; /* the bytes, then the u64 size */
  size_t off_data = DATA_ALIGN;
  size_t off_fb = align_up(off_data + data_size, 8);
  size_t off_sym = align_up(off_fb + (fb ? fb_size : 0), 8), n_syms = 4;
  size_t off_str = off_sym + n_syms * SYM;
  size_t off_shstr = off_str + strtab_size;
  size_t off_sh = align_up(off_shstr + sizeof shstr, 8);
  size_t total = off_sh + (size_t)n_sec * SHDR;
  uint8_t *b = calloc(1, total);
  if (!b) {
    drk_diag_error(d, drk_loc_none, "out of memory making the host object (%zu bytes)", total);
    return false;
  }
  /* ELF header */
  memcpy(b, "\177ELF", 4);
  b[4] = 2; /* ELFCLASS64 */
  b[5] = 1; /* ELFDATA2LSB */
  b[6] = 1; /* EV_CURRENT */
  b[7] = 0; /* ELFOSABI_SYSV */
  w16(b + 16, 1); /* ET_REL */
  w16(b + 18, arch == DRK_HOST_AARCH64 ? 183 : 62); /* EM_AARCH64, EM_X86_64 */
  w32(b + 20, 1);
  w64(b + 40, off_sh);
  w16(b + 52, EHDR);
  w16(b + 58, SHDR);
  w16(b + 60, n_sec);
  w16(b + 62, sec_shstrtab);
  /* data */
  memcpy(b + off_data, module, size);
  w64(b + off_data + align_up(size, 8), (uint64_t)size);
  if (fb) memcpy(b + off_fb, fb, fb_size);
  /* symbols: null, the section, then the two globals (sh_info: the first global) */
  uint8_t *sy = b + off_sym;
  symbol(sy + 1 * SYM, 0, 3 /* LOCAL SECTION */, SEC_DATA, 0, 0);
  symbol(sy + 2 * SYM, (uint32_t)sym_mod, 0x11 /* GLOBAL OBJECT */, SEC_DATA, 0, size);
  symbol(sy + 3 * SYM, (uint32_t)sym_size, 0x11, SEC_DATA, align_up(size, 8), 8);
  memcpy(b + off_str, strtab, strtab_size);
  memcpy(b + off_shstr, shstr, sizeof shstr);
  /* section headers */
  uint8_t *sh = b + off_sh;
  section(sh + SEC_DATA * SHDR, n_data, 1 /* PROGBITS */, 2 /* ALLOC */, off_data, data_size, 0, 0, DATA_ALIGN, 0);
  if (fb) section(sh + sec_fatbin * SHDR, n_fatbin, 1, 2, off_fb, fb_size, 0, 0, 8, 0);
  section(sh + sec_symtab * SHDR, n_symtab, 2 /* SYMTAB */, 0, off_sym, n_syms * SYM, sec_strtab, 2, 8, SYM);
  section(sh + sec_strtab * SHDR, n_strtab, 3 /* STRTAB */, 0, off_str, strtab_size, 0, 0, 1, 0);
  section(sh + sec_shstrtab * SHDR, n_shstrtab, 3, 0, off_shstr, sizeof shstr, 0, 0, 1, 0);
  /* an empty .note.GNU-stack: the object needs no executable stack (linkers warn otherwise) */
  section(sh + sec_note * SHDR, n_note, 1, 0, off_sh, 0, 0, 0, 1, 0);
  *out_data = b;
  *out_size = total;
  return true;
}

/* One ar member header (60 bytes): fields are space-padded ASCII. */
static void ar_header(uint8_t *h, const char *name, size_t size) {
  char buf[61];
  snprintf(buf, sizeof buf, "%-16s%-12s%-6s%-6s%-8s%-10zu`\n", name, "0", "0", "0", "644", size);
  memcpy(h, buf, 60);
}

static void w32be(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (24 - 8 * i));
}

bool drk_host_archive(const void *object, size_t size, const char *member_name, const char *name, void **out_data,
                      size_t *out_size, drk_diag_t *d) {
  char member[17];
  if (strlen(member_name) > 15 || strchr(member_name, '/')) {
    drk_diag_error(d, drk_loc_none, "archive member name '%s' is longer than 15 characters", member_name);
    return false;
  }
  snprintf(member, sizeof member, "%s/", member_name); /* GNU: names end with '/' */
  /* The symbol index ("/" member): count, member offsets (big-endian), names. Linkers need
   * it to pull the member in for an undefined <name>_drkm. */
  char syms[2][256];
  snprintf(syms[0], sizeof syms[0], "%s_drkm", name);
  snprintf(syms[1], sizeof syms[1], "%s_drkm_size", name);
  size_t index_size = 4 + 2 * 4 + strlen(syms[0]) + 1 + strlen(syms[1]) + 1;
  size_t index_padded = align_up(index_size, 2);
  size_t off_member = 8 + 60 + index_padded;
  size_t total = off_member + 60 + align_up(size, 2);
  uint8_t *b = calloc(1, total);
  if (!b) {
    drk_diag_error(d, drk_loc_none, "out of memory making the archive (%zu bytes)", total);
    return false;
  }
  memcpy(b, "!<arch>\n", 8);
  ar_header(b + 8, "/", index_size);
  uint8_t *ix = b + 68;
  w32be(ix, 2);
  w32be(ix + 4, (uint32_t)off_member);
  w32be(ix + 8, (uint32_t)off_member);
  size_t k = 12;
  for (int i = 0; i < 2; i++) {
    memcpy(ix + k, syms[i], strlen(syms[i]) + 1);
    k += strlen(syms[i]) + 1;
  }
  if (index_padded > index_size) ix[index_size] = '\n';
  ar_header(b + off_member, member, size);
  memcpy(b + off_member + 60, object, size);
  if (size % 2) b[off_member + 60 + size] = '\n';
  *out_data = b;
  *out_size = total;
  return true;
}
