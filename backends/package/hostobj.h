/* Host-side deployment outputs (docs/deploy.md): a module file embedded in an ELF relocatable
 * object for the application's CPU (x86-64 or AArch64 Linux), the same object as a static
 * archive, and the C header that gives the model a typed API over libdrkrt.
 *
 * The object holds one section, .rodata.drkm (read-only data, aligned to 4096 bytes: every
 * section of a module is aligned to at most 4096 within the file, so in memory each lands at
 * its own alignment, as drk_module_load_memory wants), with two global symbols:
 *   <name>_drkm       the module bytes (size = the module's size)
 *   <name>_drkm_size  a uint64_t holding that size (after the bytes, 8-aligned)
 * and no relocations, no code: an application links it with libdrkrt and nothing else. A copy
 * of the module's NVIDIA fat binary sits in .nv_fatbin (align 8), where cuobjdump and the
 * other CUDA tools look, so the object's GPU code can be listed and disassembled. The
 * object is written here, byte by byte (ELF64, little-endian; no timestamps), so the same
 * module gives the same object (deterministic builds).
 *
 * Requires only libc. Results are malloc'ed; the caller frees them with free(). */
#ifndef DRK_HOSTOBJ_H
#define DRK_HOSTOBJ_H

#include <stdbool.h>
#include <stddef.h>

#include "ir/support.h"

typedef enum drk_host_arch {
  DRK_HOST_X86_64,  /* x86_64-linux-gnu */
  DRK_HOST_AARCH64, /* aarch64-linux-gnu (Jetson Orin) */
} drk_host_arch_t;

/* Parses a host triple ("x86_64-linux-gnu", "aarch64-linux-gnu"; also "x86_64",
 * "aarch64", "x86_64-unknown-linux-gnu", "aarch64-unknown-linux-gnu"). False: unknown. */
bool drk_host_parse(const char *triple, drk_host_arch_t *out);

/* True when name is a C identifier that can prefix the symbols and the API. */
bool drk_host_name_ok(const char *name);
/* The API name for an output path: its base name without extension, with every character
 * that is not [A-Za-z0-9_] replaced by '_' and a leading digit prefixed by '_' (malloc'ed). */
char *drk_host_name_from_path(const char *path);

/* The ELF relocatable object embedding module[0..size) under symbols of name. */
bool drk_host_object(const void *module, size_t size, const char *name, drk_host_arch_t arch, void **out_data,
                     size_t *out_size, drk_diag_t *d);

/* A static archive (ar, GNU format, with a symbol index; all dates 0) holding one member,
 * member_name (a base name, at most 15 characters), which is the object made by
 * drk_host_object for name. */
bool drk_host_archive(const void *object, size_t size, const char *member_name, const char *name, void **out_data,
                      size_t *out_size, drk_diag_t *d);

/* The C header for the module (parsed again from its bytes, so the header always describes
 * the object): shapes and dtypes as constants, and <name>_create / _run / _destroy as static
 * inline functions over libdrkrt, documented inside. A NUL-terminated text. */
bool drk_host_header(const void *module, size_t size, const char *name, char **out_text, drk_diag_t *d);

#endif
