/* Clang offload bundle writer and reader (format in bundle.h). The reader checks every
 * offset and length against the buffer before using it: bundles come from files a user
 * passes in. Integers are little-endian in the file whatever the host is. */
#include "backends/package/bundle.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Triples longer than this are not target IDs; the cap also bounds the header size. */
#define DRK_BUNDLE_MAX_TRIPLE 4096

static void drk_put64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t drk_get64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

int drk_bundle_build(const drk_bundle_entry_t *entries, size_t n, size_t align, void **out_data,
                     size_t *out_size, char *err, size_t err_size) {
  if (align == 0) align = 1;
  if (align & (align - 1)) {
    snprintf(err, err_size, "bundle alignment %zu is not a power of two", align);
    return -1;
  }
  if (n == 0) {
    snprintf(err, err_size, "an offload bundle needs at least one entry");
    return -1;
  }
  size_t hdr = DRK_BUNDLE_MAGIC_LEN + 8;
  for (size_t i = 0; i < n; i++) {
    size_t tl = entries[i].triple ? strlen(entries[i].triple) : 0;
    if (tl == 0 || tl > DRK_BUNDLE_MAX_TRIPLE) {
      snprintf(err, err_size, "bundle entry %zu: target ID is empty or longer than %d bytes", i,
               DRK_BUNDLE_MAX_TRIPLE);
      return -1;
    }
    if (entries[i].size && !entries[i].data) {
      snprintf(err, err_size, "bundle entry %zu (%s): no data", i, entries[i].triple);
      return -1;
    }
    hdr += 24 + tl;
  }
  size_t pos = hdr;
  for (size_t i = 0; i < n; i++) {
    pos = (pos + align - 1) & ~(align - 1);
    if (entries[i].size > SIZE_MAX / 2 - pos) {
      snprintf(err, err_size, "bundle too large");
      return -1;
    }
    pos += entries[i].size;
  }
  unsigned char *b = calloc(1, pos ? pos : 1);
  if (!b) {
    snprintf(err, err_size, "out of memory (%zu bytes)", pos);
    return -1;
  }
  memcpy(b, DRK_BUNDLE_MAGIC, DRK_BUNDLE_MAGIC_LEN);
  drk_put64(b + DRK_BUNDLE_MAGIC_LEN, n);
  unsigned char *h = b + DRK_BUNDLE_MAGIC_LEN + 8;
  size_t off = hdr;
  for (size_t i = 0; i < n; i++) {
    size_t tl = strlen(entries[i].triple);
    off = (off + align - 1) & ~(align - 1);
    drk_put64(h, off);
    drk_put64(h + 8, entries[i].size);
    drk_put64(h + 16, tl);
    memcpy(h + 24, entries[i].triple, tl);
    h += 24 + tl;
    if (entries[i].size) memcpy(b + off, entries[i].data, entries[i].size);
    off += entries[i].size;
  }
  *out_data = b;
  *out_size = pos;
  return 0;
}

bool drk_bundle_is_bundle(const void *data, size_t size) {
  return data && size >= DRK_BUNDLE_MAGIC_LEN && memcmp(data, DRK_BUNDLE_MAGIC, DRK_BUNDLE_MAGIC_LEN) == 0;
}

int drk_bundle_parse(const void *data, size_t size, drk_bundle_entry_t *out, size_t max,
                     size_t *out_n, char *err, size_t err_size) {
  const unsigned char *b = data;
  if (b && size >= 4 && memcmp(b, "CCOB", 4) == 0) {
    snprintf(err, err_size, "compressed offload bundle (CCOB) is not supported; "
                            "rebuild without --offload-compress");
    return -1;
  }
  if (!drk_bundle_is_bundle(data, size) || size < DRK_BUNDLE_MAGIC_LEN + 8) {
    snprintf(err, err_size, "not a clang offload bundle (no %s magic)", DRK_BUNDLE_MAGIC);
    return -1;
  }
  uint64_t n = drk_get64(b + DRK_BUNDLE_MAGIC_LEN);
  size_t pos = DRK_BUNDLE_MAGIC_LEN + 8;
  /* Each entry header takes at least 24 bytes: a cheap bound before looping. */
  if (n == 0 || n > (size - pos) / 24) {
    snprintf(err, err_size, "offload bundle: bad entry count %llu", (unsigned long long)n);
    return -1;
  }
  for (uint64_t i = 0; i < n; i++) {
    if (size - pos < 24) {
      snprintf(err, err_size, "offload bundle: entry %llu header truncated", (unsigned long long)i);
      return -1;
    }
    uint64_t off = drk_get64(b + pos), sz = drk_get64(b + pos + 8), tl = drk_get64(b + pos + 16);
    pos += 24;
    if (tl == 0 || tl > DRK_BUNDLE_MAX_TRIPLE || tl > size - pos) {
      snprintf(err, err_size, "offload bundle: entry %llu has a bad target ID length %llu",
               (unsigned long long)i, (unsigned long long)tl);
      return -1;
    }
    const char *triple = (const char *)b + pos;
    pos += tl;
    if (off > size || sz > size - off) {
      snprintf(err, err_size, "offload bundle: entry %llu (%.*s) lies outside the file "
                              "(offset %llu, size %llu, file %zu bytes)",
               (unsigned long long)i, (int)tl, triple, (unsigned long long)off,
               (unsigned long long)sz, size);
      return -1;
    }
    if (i < max) out[i] = (drk_bundle_entry_t){triple, (size_t)tl, b + off, (size_t)sz};
  }
  *out_n = (size_t)n;
  return 0;
}

int drk_bundle_find(const void *data, size_t size, const char *triple, drk_bundle_entry_t *out,
                    char *err, size_t err_size) {
  size_t n = 0;
  if (drk_bundle_parse(data, size, NULL, 0, &n, err, err_size) != 0) return -1;
  drk_bundle_entry_t *es = malloc(n * sizeof *es);
  if (!es) {
    snprintf(err, err_size, "out of memory");
    return -1;
  }
  drk_bundle_parse(data, size, es, n, &n, err, err_size);
  size_t tl = strlen(triple);
  for (size_t i = 0; i < n; i++)
    if (es[i].triple_len == tl && memcmp(es[i].triple, triple, tl) == 0) {
      *out = es[i];
      free(es);
      return 0;
    }
  int w = snprintf(err, err_size, "offload bundle has no entry for %s (it has:", triple);
  for (size_t i = 0; i < n && w >= 0 && (size_t)w < err_size; i++)
    w += snprintf(err + w, err_size - (size_t)w, " %.*s", (int)es[i].triple_len, es[i].triple);
  if (w >= 0 && (size_t)w < err_size) snprintf(err + w, err_size - (size_t)w, ")");
  free(es);
  return 1;
}
