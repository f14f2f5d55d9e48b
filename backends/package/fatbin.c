/* NVIDIA fat binary writer and reader (see fatbin.h for the contract).
 *
 * Entry header, little-endian, offsets in bytes (read from fatbinary 13.0 output):
 *   0 u16 kind (1 PTX, 2 ELF)   2 u16 0x0101        4 u32 header size (64; PTX 80)
 *   8 u64 payload size (padded to 8)               16 u32 compressed size (0 = plain)
 *  20 u32 PTX: address size 64, ELF: 0             24 u16 minor  26 u16 major (PTX ISA
 *     version for PTX; for ELF "code version" 1.<ELF ABI version>)
 *  28 u32 sm (90)   32 u32 name offset  36 u32 name size   40 u64 flags
 *  48 u64 0         56 u64 uncompressed size (0 = plain)
 *  PTX only: 64 u32 72 (options offset), 68 u32 0, 72 u64 0 (empty options)
 * Flags: 0x1 64-bit, 0x10 Linux host, 0x8000 zstd-compressed, 0x2000 LZ4-compressed,
 * 0x100000 arch-specific ("a") target. */
#include "backends/package/fatbin.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FB_FLAG_64BIT 0x1u
#define FB_FLAG_LINUX 0x10u
#define FB_FLAG_LZ4 0x2000u
#define FB_FLAG_ZSTD 0x8000u
#define FB_FLAG_ARCH_SPECIFIC 0x100000u

static void fb_err(char *err, size_t n, const char *fmt, ...) {
  if (!err || !n) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, n, fmt, ap);
  va_end(ap);
}

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void put32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static void put64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t get32(const uint8_t *p) { return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24); }
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) | ((uint64_t)get32(p + 4) << 32); }

bool drk_fatbin_parse_arch(const char *text, unsigned *out_sm, bool *out_arch_specific) {
  const char *p;
  if (!text) return false;
  if (strncmp(text, "sm_", 3) == 0) p = text + 3;
  else if (strncmp(text, "compute_", 8) == 0) p = text + 8;
  else return false;
  unsigned v = 0;
  int digits = 0;
  while (*p >= '0' && *p <= '9' && digits < 4) v = v * 10 + (unsigned)(*p++ - '0'), digits++;
  if (digits < 2 || v < 10) return false;
  bool a = false;
  if (*p == 'a') a = true, p++;
  if (*p) return false;
  *out_sm = v;
  *out_arch_specific = a;
  return true;
}

void drk_fatbin_format_arch(unsigned sm, bool arch_specific, char *buf, size_t n) {
  snprintf(buf, n, "sm_%u%s", sm, arch_specific ? "a" : "");
}

/* Finds "<directive> A.B" in PTX text (directives precede the first function, so a plain
 * scan of the text is enough). */
static bool ptx_find_version(const char *ptx, size_t size, unsigned *major, unsigned *minor) {
  const char *key = ".version";
  size_t kl = strlen(key);
  for (size_t i = 0; i + kl < size; i++) {
    if (memcmp(ptx + i, key, kl) != 0) continue;
    size_t j = i + kl;
    while (j < size && (ptx[j] == ' ' || ptx[j] == '\t')) j++;
    unsigned ma = 0, mi = 0;
    int d1 = 0, d2 = 0;
    while (j < size && ptx[j] >= '0' && ptx[j] <= '9' && d1 < 3) ma = ma * 10 + (unsigned)(ptx[j++] - '0'), d1++;
    if (j >= size || ptx[j] != '.') return false;
    j++;
    while (j < size && ptx[j] >= '0' && ptx[j] <= '9' && d2 < 3) mi = mi * 10 + (unsigned)(ptx[j++] - '0'), d2++;
    if (!d1 || !d2) return false;
    *major = ma;
    *minor = mi;
    return true;
  }
  return false;
}

int drk_fatbin_build(const drk_fatbin_image_t *images, size_t n, void **out_data,
                     size_t *out_size, char *err, size_t err_size) {
  size_t total = 16;
  for (size_t i = 0; i < n; i++) {
    const drk_fatbin_image_t *im = &images[i];
    char arch[32];
    drk_fatbin_format_arch(im->sm, im->arch_specific, arch, sizeof arch);
    if (im->sm < 10 || im->sm > 9999) {
      fb_err(err, err_size, "fat binary image %zu: bad sm %u", i, im->sm);
      return -1;
    }
    if (!im->data || !im->size) {
      fb_err(err, err_size, "fat binary image %zu (%s): empty", i, arch);
      return -1;
    }
    size_t payload;
    if (im->kind == DRK_FATBIN_ELF) {
      if (im->size < 16 || memcmp(im->data, "\x7f" "ELF", 4) != 0) {
        fb_err(err, err_size, "fat binary image %zu (%s): cubin does not start with the ELF magic", i, arch);
        return -1;
      }
      payload = (im->size + 7) & ~(size_t)7;
      total += 64 + payload;
    } else if (im->kind == DRK_FATBIN_PTX) {
      unsigned ma, mi;
      if (!ptx_find_version(im->data, im->size, &ma, &mi)) {
        fb_err(err, err_size, "fat binary image %zu (%s): PTX has no '.version X.Y' directive", i, arch);
        return -1;
      }
      payload = (im->size + 1 + 7) & ~(size_t)7;
      total += 80 + payload;
    } else {
      fb_err(err, err_size, "fat binary image %zu: unknown kind %d", i, (int)im->kind);
      return -1;
    }
  }
  uint8_t *buf = calloc(1, total);
  if (!buf) {
    fb_err(err, err_size, "out of memory building a %zu-byte fat binary", total);
    return -1;
  }
  put32(buf, DRK_FATBIN_MAGIC);
  put16(buf + 4, 1);
  put16(buf + 6, 16);
  put64(buf + 8, total - 16);
  size_t off = 16;
  for (size_t i = 0; i < n; i++) {
    const drk_fatbin_image_t *im = &images[i];
    uint8_t *h = buf + off;
    uint32_t hs = im->kind == DRK_FATBIN_PTX ? 80 : 64;
    size_t payload = im->kind == DRK_FATBIN_PTX ? (im->size + 1 + 7) & ~(size_t)7 : (im->size + 7) & ~(size_t)7;
    unsigned ma = 1, mi = 0;
    if (im->kind == DRK_FATBIN_PTX) {
      ptx_find_version(im->data, im->size, &ma, &mi);
      put32(h + 20, 64);
      put32(h + 64, 72);
    } else {
      /* fatbinary reports the cubin's ELF ABI version (e_ident[8]) as code version 1.N. */
      mi = ((const uint8_t *)im->data)[8];
    }
    put16(h, (uint16_t)im->kind);
    put16(h + 2, 0x0101);
    put32(h + 4, hs);
    put64(h + 8, payload);
    put16(h + 24, (uint16_t)mi);
    put16(h + 26, (uint16_t)ma);
    put32(h + 28, im->sm);
    put64(h + 40, FB_FLAG_64BIT | FB_FLAG_LINUX | (im->arch_specific ? FB_FLAG_ARCH_SPECIFIC : 0));
    memcpy(h + hs, im->data, im->size); /* PTX NUL and padding come from calloc */
    off += hs + payload;
  }
  *out_data = buf;
  *out_size = total;
  return 0;
}

int drk_fatbin_parse(const void *data, size_t size, drk_fatbin_image_t *out, size_t max,
                     size_t *out_n, char *err, size_t err_size) {
  const uint8_t *d = data;
  if (!d || size < 16 || get32(d) != DRK_FATBIN_MAGIC) {
    fb_err(err, err_size, "not a fat binary (no 0xBA55ED50 magic)");
    return -1;
  }
  uint16_t hs = get16(d + 6);
  uint64_t body = get64(d + 8);
  if (hs < 16 || hs > size || body > size - hs) {
    fb_err(err, err_size, "fat binary header claims %llu bytes after a %u-byte header, have %zu",
           (unsigned long long)body, hs, size);
    return -1;
  }
  size_t off = hs, end = hs + (size_t)body, count = 0;
  while (off < end) {
    if (end - off < 64) {
      fb_err(err, err_size, "fat binary entry %zu at offset %zu is truncated", count, off);
      return -1;
    }
    const uint8_t *h = d + off;
    uint16_t kind = get16(h);
    uint32_t ehs = get32(h + 4);
    uint64_t psize = get64(h + 8);
    if (ehs < 64 || ehs > end - off || psize > end - off - ehs) {
      fb_err(err, err_size, "fat binary entry %zu at offset %zu has sizes outside the file", count, off);
      return -1;
    }
    if (kind != DRK_FATBIN_PTX && kind != DRK_FATBIN_ELF) {
      fb_err(err, err_size, "fat binary entry %zu has unknown kind %u", count, kind);
      return -1;
    }
    if (count < max) {
      uint64_t flags = get64(h + 40);
      drk_fatbin_image_t *im = &out[count];
      im->kind = (drk_fatbin_kind_t)kind;
      im->sm = get32(h + 28);
      im->arch_specific = (flags & FB_FLAG_ARCH_SPECIFIC) != 0;
      im->compressed = (flags & (FB_FLAG_LZ4 | FB_FLAG_ZSTD)) != 0 || get32(h + 16) != 0;
      im->data = h + ehs;
      size_t sz = (size_t)psize;
      if (kind == DRK_FATBIN_PTX && !im->compressed) {
        const void *nul = memchr(h + ehs, 0, sz);
        if (!nul) {
          fb_err(err, err_size, "fat binary entry %zu: PTX text is not NUL-terminated", count);
          return -1;
        }
        sz = (size_t)((const uint8_t *)nul - (h + ehs));
      }
      im->size = sz;
    }
    count++;
    off += ehs + (size_t)psize;
  }
  *out_n = count;
  return 0;
}
