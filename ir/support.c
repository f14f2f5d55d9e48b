#include "support.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const drk_loc_t drk_loc_none = {NULL, 0, 0, NULL, -1};

void drk_fatal_internal(const char *file, int line, const char *what) {
  fprintf(stderr, "drkc: internal error at %s:%d: %s\n", file, line, what);
  abort();
}

typedef struct drk_chunk {
  struct drk_chunk *next;
  size_t used, size;
  _Alignas(16) unsigned char data[];
} drk_chunk_t;

struct drk_arena {
  drk_chunk_t *head;
};

drk_arena_t *drk_arena_create(void) {
  drk_arena_t *a = calloc(1, sizeof *a);
  if (!a) drk_fatal_internal(__FILE__, __LINE__, "out of memory");
  return a;
}

void drk_arena_destroy(drk_arena_t *a) {
  if (!a) return;
  for (drk_chunk_t *c = a->head, *n; c; c = n) {
    n = c->next;
    free(c);
  }
  free(a);
}

void *drk_arena_alloc(drk_arena_t *a, size_t size) {
  size = (size + 15) & ~(size_t)15;
  drk_chunk_t *c = a->head;
  if (!c || c->size - c->used < size) {
    size_t csize = size > 60000 ? size : 65536 - sizeof(drk_chunk_t);
    c = malloc(sizeof(drk_chunk_t) + csize);
    if (!c) drk_fatal_internal(__FILE__, __LINE__, "out of memory");
    c->used = 0;
    c->size = csize;
    /* Big blocks go behind the head so the head's free space stays usable. */
    if (a->head && size > 60000) {
      c->next = a->head->next;
      a->head->next = c;
    } else {
      c->next = a->head;
      a->head = c;
    }
  }
  void *p = c->data + c->used;
  c->used += size;
  memset(p, 0, size);
  return p;
}

void *drk_arena_memdup(drk_arena_t *a, const void *p, size_t n) {
  void *q = drk_arena_alloc(a, n ? n : 1);
  if (n) memcpy(q, p, n);
  return q;
}

char *drk_arena_strndup(drk_arena_t *a, const char *s, size_t n) {
  char *q = drk_arena_alloc(a, n + 1);
  memcpy(q, s, n);
  q[n] = 0;
  return q;
}

char *drk_arena_strdup(drk_arena_t *a, const char *s) {
  return s ? drk_arena_strndup(a, s, strlen(s)) : NULL;
}

char *drk_arena_printf(drk_arena_t *a, const char *fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *s = drk_arena_alloc(a, (size_t)n + 1);
  vsnprintf(s, (size_t)n + 1, fmt, ap2);
  va_end(ap2);
  return s;
}

void *drk_arena_grow(drk_arena_t *a, void *arr, size_t elem, size_t *cap, size_t need) {
  if (need <= *cap) return arr;
  size_t ncap = *cap ? *cap * 2 : 8;
  while (ncap < need) ncap *= 2;
  void *n = drk_arena_alloc(a, ncap * elem);
  if (arr && *cap) memcpy(n, arr, *cap * elem);
  *cap = ncap;
  return n;
}

void drk_diag_init(drk_diag_t *d, FILE *out) {
  memset(d, 0, sizeof *d);
  d->out = out;
}

void drk_loc_format(drk_loc_t loc, char *buf, size_t n) {
  if (loc.node_index >= 0 || loc.node_name) {
    snprintf(buf, n, "%s: node '%s' (#%d)", loc.file ? loc.file : "<model>",
             loc.node_name ? loc.node_name : "", loc.node_index);
  } else if (loc.line > 0) {
    snprintf(buf, n, "%s:%d:%d", loc.file ? loc.file : "<input>", loc.line, loc.col);
  } else {
    snprintf(buf, n, "%s", loc.file ? loc.file : "drkc");
  }
}

size_t drk_escape(const char *s, char *buf, size_t n) {
  static const char hex[] = "0123456789abcdef";
  size_t k = 0;
  if (!n) return 0;
  for (; s && *s && k + 1 < n; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch >= 0x20 && ch != 0x7f) {
      buf[k++] = (char)ch;
      continue;
    }
    if (k + 5 > n) break;
    buf[k++] = '\\';
    buf[k++] = 'x';
    buf[k++] = hex[ch >> 4];
    buf[k++] = hex[ch & 15];
  }
  buf[k] = 0;
  return k;
}

void drk_diag_verror(drk_diag_t *d, drk_loc_t loc, const char *kind, const char *fmt, va_list ap) {
  char where[384], msg[600], raw[600];
  /* names come from the model: a node named "\x1b[2J" must not clear the user's terminal */
  drk_loc_format(loc, raw, sizeof where);
  drk_escape(raw, where, sizeof where);
  vsnprintf(raw, sizeof raw, fmt, ap);
  drk_escape(raw, msg, sizeof msg);
  int is_error = strcmp(kind, "error") == 0;
  if (is_error) {
    if (d->n_errors == 0) snprintf(d->first, sizeof d->first, "%s: %s: %s", where, kind, msg);
    d->n_errors++;
  } else {
    d->n_warnings++;
  }
  if (d->out) fprintf(d->out, "%s: %s: %s\n", where, kind, msg);
}

void drk_diag_error(drk_diag_t *d, drk_loc_t loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  drk_diag_verror(d, loc, "error", fmt, ap);
  va_end(ap);
}

void drk_diag_warning(drk_diag_t *d, drk_loc_t loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  drk_diag_verror(d, loc, "warning", fmt, ap);
  va_end(ap);
}

char *drk_read_file(const char *path, size_t *out_size, drk_diag_t *d) {
  drk_loc_t loc = drk_loc_none;
  loc.file = path;
  FILE *f = fopen(path, "rb");
  if (!f) {
    drk_diag_error(d, loc, "cannot open: %s", strerror(errno));
    return NULL;
  }
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  for (;;) {
    if (!buf) break;
    size_t r = fread(buf + n, 1, cap - n - 1, f);
    n += r;
    if (r == 0) break;
    if (cap - n - 1 == 0) {
      char *nb = realloc(buf, cap * 2);
      if (!nb) { free(buf); buf = NULL; break; }
      buf = nb;
      cap *= 2;
    }
  }
  int err = ferror(f);
  fclose(f);
  if (!buf || err) {
    free(buf);
    drk_diag_error(d, loc, "cannot read file");
    return NULL;
  }
  buf[n] = 0;
  if (out_size) *out_size = n;
  return buf;
}

uint64_t drk_hash_fnv1a(const void *p, size_t n, uint64_t seed) {
  const unsigned char *b = p;
  uint64_t h = seed ? seed : 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) {
    h ^= b[i];
    h *= 1099511628211ull;
  }
  return h;
}

bool drk_write_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n) {
    ssize_t w = write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w, n -= (size_t)w;
  }
  return true;
}

uint64_t drk_splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
