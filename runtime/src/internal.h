/* libdrkrt internals shared by runtime/src and runtime/drivers: status construction, the
 * allocator helpers, and the host-side module object. Not installed; not a public API. */
#ifndef DRK_RT_INTERNAL_H
#define DRK_RT_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>

#include "backends/package/module.h"
#include "drk/drkrt.h"

#if defined(__GNUC__)
#define DRK_RT_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define DRK_RT_PRINTF(f, a)
#endif

/* NULL selects the malloc-based default. */
const drk_allocator_t *drk_rt_allocator(const drk_allocator_t *a);
void *drk_rt_alloc(const drk_allocator_t *a, size_t size, size_t align); /* zeroed */
void drk_rt_free(const drk_allocator_t *a, void *p, size_t size);

/* New status (never NULL: falls back to a static per-code status when allocation fails). */
drk_status_t drk_rt_status(const drk_allocator_t *a, drk_status_code_t code, const char *fmt, ...)
    DRK_RT_PRINTF(3, 4);
/* Prefixes "context: " to st's message; returns st (or its replacement). NULL stays NULL. */
drk_status_t drk_rt_status_wrap(drk_status_t st, const char *fmt, ...) DRK_RT_PRINTF(2, 3);
/* A failed driver call, converted where it enters (the driver maps its error to `code` and
 * names it): "call: name (text); hint: hint"; text NULL: no parenthesis; hint NULL or "": none. */
drk_status_t drk_rt_driver_status(const drk_allocator_t *a, drk_status_code_t code, const char *call, const char *name, const char *text,
                                  const char *hint);

struct drk_module {
  drk_allocator_t alloc;
  drk_modfile_t *mf;
  void *owned;       /* file bytes when loaded from a file, else NULL */
  size_t owned_size;
  void *weights_owned; /* drk_module_load_weights's copy of the side file, else NULL */
  size_t weights_owned_size;
  char provenance[768];
  /* The module's FALLBACK plan (module.h) as a module of its own: owns only this struct (its
   * mf is mf->fallback_module, freed with mf); NULL when there is none. */
  struct drk_module *fallback;
};

#endif
