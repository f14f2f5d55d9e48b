/* Clang offload bundles, written and read without clang-offload-bundler.
 *
 * An offload bundle is what HIP's runtime (hipModuleLoadData, __hipRegisterFatBinary) takes
 * when one file must serve several GPUs: the 24-byte magic "__CLANG_OFFLOAD_BUNDLE__", a
 * little-endian u64 entry count, then per entry u64 offset, u64 size, u64 triple length and
 * the triple bytes (no NUL), and finally the payloads at their offsets. Target IDs read like
 * "hipv4-amdgcn-amd-amdhsa--gfx942" (kind-triple-arch; "hipv4" = code object v4 or later)
 * and "host-x86_64-unknown-linux-gnu-" for the (usually empty) host entry. Payload offsets
 * are aligned: clang's HIP driver uses 4096 (-bundle-align=4096), the bundler's default is 1.
 * With the same entries and alignment drk_bundle_build writes exactly the bytes that
 * clang-offload-bundler-22 -type=o writes (checked by tests/amdgpu).
 * Compressed bundles ("CCOB" magic, clang --offload-compress) are recognised and refused.
 *
 * Requires only libc. No function here allocates except drk_bundle_build, whose result the
 * caller releases with free(). */
#ifndef DRK_BUNDLE_H
#define DRK_BUNDLE_H

#include <stdbool.h>
#include <stddef.h>

#define DRK_BUNDLE_MAGIC "__CLANG_OFFLOAD_BUNDLE__"
#define DRK_BUNDLE_MAGIC_LEN 24
/* The host entry as clang-offload-bundler-22 spells it (empty environment -> trailing '-'). */
#define DRK_BUNDLE_HOST_X86_64 "host-x86_64-unknown-linux-gnu-"
#define DRK_BUNDLE_ALIGN_HIP 4096

typedef struct drk_bundle_entry {
  const char *triple; /* target ID; builder: NUL-terminated; reader: points into the bundle, NOT NUL-terminated */
  size_t triple_len;  /* reader: length of triple; builder: ignored (strlen is used) */
  const void *data;   /* builder: the payload; reader: points into the parsed buffer */
  size_t size;
} drk_bundle_entry_t;

/* Builds a bundle of n entries, in order, each payload at an offset aligned to `align`
 * (a power of two; 0 or 1 = packed). On success *out_data (malloc'ed; free()) and *out_size
 * are set and 0 is returned; on error (empty or over-long triple, bad alignment, out of
 * memory) returns -1 with a message in err. */
int drk_bundle_build(const drk_bundle_entry_t *entries, size_t n, size_t align, void **out_data,
                     size_t *out_size, char *err, size_t err_size);

/* Lists the entries of a bundle without copying: out[i] points into data. At most max
 * entries are written; *out_n receives the total count. Returns 0, or -1 with a message in
 * err when the bytes are not a well-formed uncompressed bundle (never reads outside data). */
int drk_bundle_parse(const void *data, size_t size, drk_bundle_entry_t *out, size_t max,
                     size_t *out_n, char *err, size_t err_size);

/* True when the bytes start with the bundle magic (uncompressed) -- cheap format sniffing. */
bool drk_bundle_is_bundle(const void *data, size_t size);

/* Finds the entry whose target ID is `triple` (exact match). Returns 0 and fills *out, 1 when
 * the bundle has no such entry (err lists the ones it has), -1 for a malformed bundle. */
int drk_bundle_find(const void *data, size_t size, const char *triple, drk_bundle_entry_t *out,
                    char *err, size_t err_size);

#endif
