/* Status objects and allocator helpers. A status remembers the allocator that made it so
 * that drk_status_destroy needs nothing else; when even a status cannot be allocated, a
 * static one per code is returned instead (destroy ignores it), so errors never get lost. */
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/src/internal.h"

struct drk_status {
  drk_status_code_t code;
  int is_static;
  drk_allocator_t alloc;
  size_t size;     /* bytes of this allocation */
  const char *msg; /* the text follows the struct, or a literal for static statuses */
};

static void *def_alloc(void *u, size_t n, size_t a) {
  (void)u;
  if (a < sizeof(void *)) a = sizeof(void *);
  void *p = NULL;
  n = (n + a - 1) & ~(a - 1);
  p = aligned_alloc(a, n ? n : a);
  return p;
}
static void def_free(void *u, void *p, size_t n) { (void)u, (void)n; free(p); }
static const drk_allocator_t default_alloc = {def_alloc, def_free, NULL};

const drk_allocator_t *drk_rt_allocator(const drk_allocator_t *a) { return a ? a : &default_alloc; }

void *drk_rt_alloc(const drk_allocator_t *a, size_t size, size_t align) {
  a = drk_rt_allocator(a);
  void *p = a->alloc(a->user, size ? size : 1, align ? align : 16);
  if (p) memset(p, 0, size);
  return p;
}

void drk_rt_free(const drk_allocator_t *a, void *p, size_t size) {
  if (!p) return;
  a = drk_rt_allocator(a);
  a->free(a->user, p, size ? size : 1);
}

#define STATIC_STATUS(c, m) {c, 1, {0}, 0, m}
static struct drk_status static_status[] = {
    STATIC_STATUS(DRK_STATUS_OK, "ok"),
    STATIC_STATUS(DRK_STATUS_INVALID_ARGUMENT, "invalid argument (out of memory for the details)"),
    STATIC_STATUS(DRK_STATUS_IO, "I/O error (out of memory for the details)"),
    STATIC_STATUS(DRK_STATUS_BAD_MODULE, "bad module (out of memory for the details)"),
    STATIC_STATUS(DRK_STATUS_VERSION_MISMATCH, "module format version mismatch (out of memory for the details)"),
    STATIC_STATUS(DRK_STATUS_NO_DRIVER, "no CUDA driver: libcuda.so.1 could not be loaded"),
    STATIC_STATUS(DRK_STATUS_NO_DEVICE, "no CUDA device (out of memory for the details)"),
    STATIC_STATUS(DRK_STATUS_NO_IMAGE, "no code for this device (out of memory for the details)"),
    STATIC_STATUS(DRK_STATUS_OUT_OF_MEMORY, "out of memory"),
    STATIC_STATUS(DRK_STATUS_DRIVER, "CUDA driver error (out of memory for the details)"),
};

static drk_status_t make(const drk_allocator_t *a, drk_status_code_t code, const char *msg1, const char *msg2) {
  a = drk_rt_allocator(a);
  size_t l1 = strlen(msg1), l2 = msg2 ? strlen(msg2) : 0;
  size_t size = sizeof(struct drk_status) + l1 + (msg2 ? 2 + l2 : 0) + 1;
  struct drk_status *s = a->alloc(a->user, size, alignof(struct drk_status));
  if (!s) {
    size_t i = (size_t)code < sizeof static_status / sizeof static_status[0] ? (size_t)code : DRK_STATUS_DRIVER;
    return &static_status[i];
  }
  s->code = code;
  s->is_static = 0;
  s->alloc = *a;
  s->size = size;
  char *text = (char *)(s + 1);
  memcpy(text, msg1, l1);
  if (msg2) memcpy(text + l1, ": ", 2), memcpy(text + l1 + 2, msg2, l2), l1 += 2 + l2;
  text[l1] = 0;
  s->msg = text;
  return s;
}

drk_status_t drk_rt_status(const drk_allocator_t *a, drk_status_code_t code, const char *fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return make(a, code, buf, NULL);
}

drk_status_t drk_rt_status_wrap(drk_status_t st, const char *fmt, ...) {
  if (!st || st->is_static) return st;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  drk_status_t n = make(&st->alloc, st->code, buf, st->msg);
  if (n->is_static) return st; /* keep the detailed message rather than the generic one */
  drk_status_destroy(st);
  return n;
}

drk_status_t drk_rt_driver_status(const drk_allocator_t *a, drk_status_code_t code, const char *call, const char *name, const char *text,
                                  const char *hint) {
  return drk_rt_status(a, code, "%s: %s%s%s%s%s%s", call, name, text ? " (" : "", text ? text : "", text ? ")" : "", hint && *hint ? "; hint: " : "",
                       hint ? hint : "");
}

drk_status_code_t drk_status_code(drk_status_t st) { return st ? st->code : DRK_STATUS_OK; }
const char *drk_status_message(drk_status_t st) {
  return st ? st->msg : "";
}

const char *drk_status_code_name(drk_status_code_t c) {
  switch (c) {
  case DRK_STATUS_OK: return "DRK_STATUS_OK";
  case DRK_STATUS_INVALID_ARGUMENT: return "DRK_STATUS_INVALID_ARGUMENT";
  case DRK_STATUS_IO: return "DRK_STATUS_IO";
  case DRK_STATUS_BAD_MODULE: return "DRK_STATUS_BAD_MODULE";
  case DRK_STATUS_VERSION_MISMATCH: return "DRK_STATUS_VERSION_MISMATCH";
  case DRK_STATUS_NO_DRIVER: return "DRK_STATUS_NO_DRIVER";
  case DRK_STATUS_NO_DEVICE: return "DRK_STATUS_NO_DEVICE";
  case DRK_STATUS_NO_IMAGE: return "DRK_STATUS_NO_IMAGE";
  case DRK_STATUS_OUT_OF_MEMORY: return "DRK_STATUS_OUT_OF_MEMORY";
  case DRK_STATUS_DRIVER: return "DRK_STATUS_DRIVER";
  }
  return "DRK_STATUS_UNKNOWN";
}

drk_status_t drk_status_create(const drk_allocator_t *alloc, drk_status_code_t code, const char *message) {
  if (code == DRK_STATUS_OK) code = DRK_STATUS_INVALID_ARGUMENT;
  return drk_rt_status(alloc, code, "%s", message ? message : "");
}

void drk_status_destroy(drk_status_t st) {
  if (!st || st->is_static) return;
  drk_allocator_t a = st->alloc;
  a.free(a.user, st, st->size);
}
