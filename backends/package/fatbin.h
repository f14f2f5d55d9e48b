/* NVIDIA fat binaries, written and read without the CUDA toolkit.
 *
 * A fat binary is what cuModuleLoadData takes when one file must serve several GPUs: a
 * 16-byte container header (magic 0xBA55ED50, version 1, header size, size of the rest) and
 * a sequence of entries, each a 64-byte header (80 bytes for PTX) followed by the payload
 * padded to 8 bytes. The entry layout was read from `fatbinary` 13.0 output and is checked
 * against it by tests/runtime/test_fatbin; docs/module-format.md describes it field by
 * field. drkc writes payloads uncompressed (fatbinary compresses PTX with zstd by default;
 * the reader reports compressed entries but does not inflate them).
 *
 * Requires only libc. No function here allocates except drk_fatbin_build, whose result the
 * caller releases with free(). */
#ifndef DRK_FATBIN_H
#define DRK_FATBIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DRK_FATBIN_MAGIC 0xBA55ED50u

typedef enum drk_fatbin_kind {
  DRK_FATBIN_PTX = 1, /* PTX text (payload NUL-terminated) */
  DRK_FATBIN_ELF = 2, /* cubin (ELF) for one sm */
} drk_fatbin_kind_t;

/* One image: an sm_90a cubin is {ELF, 90, true}; sm_87 PTX is {PTX, 87, false}. */
typedef struct drk_fatbin_image {
  drk_fatbin_kind_t kind;
  unsigned sm;        /* major*10 + minor, e.g. 87, 90, 100 */
  bool arch_specific; /* the "a" suffix: runs only on exactly this sm */
  bool compressed;    /* reader only: payload compressed by fatbinary, cannot be used here */
  const void *data;   /* builder: the image bytes; reader: points into the parsed buffer */
  size_t size;        /* bytes (for PTX: text length without the NUL) */
} drk_fatbin_image_t;

/* Parses "sm_90a" / "sm_87" / "compute_90" into sm and the arch-specific flag.
 * Returns false (outputs untouched) when the text is not of that form. */
bool drk_fatbin_parse_arch(const char *text, unsigned *out_sm, bool *out_arch_specific);
/* Writes "sm_90a" etc. into buf (always NUL-terminated). */
void drk_fatbin_format_arch(unsigned sm, bool arch_specific, char *buf, size_t n);

/* Builds a fat binary from n images, in order. On success *out_data (malloc'ed; caller
 * frees with free()) and *out_size are set and 0 is returned. On error (bad image: PTX
 * without a .target line, ELF without the ELF magic, arch out of range, out of memory)
 * returns -1 and writes a message into err. */
int drk_fatbin_build(const drk_fatbin_image_t *images, size_t n, void **out_data,
                     size_t *out_size, char *err, size_t err_size);

/* Lists the entries of a fat binary without copying: out[i].data points into data. At most
 * max entries are written; *out_n receives the total count. Returns 0, or -1 with a message
 * in err when the bytes are not a well-formed fat binary (never reads outside data). */
int drk_fatbin_parse(const void *data, size_t size, drk_fatbin_image_t *out, size_t max,
                     size_t *out_n, char *err, size_t err_size);

#endif
