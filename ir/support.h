/* Compiler-wide support: arenas, source locations, diagnostics, assertions.
 *
 * Ownership: everything allocated from an arena lives until drk_arena_destroy(). The
 * compiler allocates from arenas (one per graph or tile module, scratch per function);
 * nothing from an arena is freed on its own. */
#ifndef DRK_SUPPORT_H
#define DRK_SUPPORT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define DRK_VERSION_STRING "0.1.0"

#if defined(__GNUC__)
#define DRK_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define DRK_NORETURN __attribute__((noreturn))
#else
#define DRK_PRINTF(f, a)
#define DRK_NORETURN
#endif

/* Internal bugs only: user-caused errors go through diagnostics or statuses. */
DRK_NORETURN void drk_fatal_internal(const char *file, int line, const char *what);
#define DRK_ASSERT(c) ((c) ? (void)0 : drk_fatal_internal(__FILE__, __LINE__, #c))
#define drk_unreachable() drk_fatal_internal(__FILE__, __LINE__, "unreachable")
#define DRK_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* ---- arenas ---- */
typedef struct drk_arena drk_arena_t;
drk_arena_t *drk_arena_create(void);
void drk_arena_destroy(drk_arena_t *a);
/* Zeroed memory aligned to 16 bytes; aborts on out-of-memory (an internal limit). */
void *drk_arena_alloc(drk_arena_t *a, size_t size);
char *drk_arena_strdup(drk_arena_t *a, const char *s);
char *drk_arena_strndup(drk_arena_t *a, const char *s, size_t n);
void *drk_arena_memdup(drk_arena_t *a, const void *p, size_t n);
char *drk_arena_printf(drk_arena_t *a, const char *fmt, ...) DRK_PRINTF(2, 3);
/* Grows an arena array of elem-size items from *cap to at least need; returns the new
 * array (old contents copied). The old array is left in the arena. */
void *drk_arena_grow(drk_arena_t *a, void *arr, size_t elem, size_t *cap, size_t need);

/* Appends to an arena-backed vector: DRK_VEC_PUSH(arena, items, n, cap, value). */
#define DRK_VEC_PUSH(A, ARR, N, CAP, V)                                                  \
  do {                                                                                 \
    if ((N) + 1 > (CAP)) (ARR) = drk_arena_grow((A), (ARR), sizeof(*(ARR)), &(CAP), (N) + 1); \
    (ARR)[(N)++] = (V);                                                                \
  } while (0)

/* ---- source locations ---- */
/* Where a node came from: a text file position, or an ONNX node (name and index). */
typedef struct drk_loc {
  const char *file; /* text file or model path; may be NULL */
  int line, col;    /* 1-based; 0 when not from text */
  const char *node_name; /* ONNX node name, or NULL */
  int node_index;        /* ONNX node index, -1 when not from ONNX */
} drk_loc_t;

extern const drk_loc_t drk_loc_none;

/* ---- diagnostics ---- */
/* Collects user-facing errors. Messages read `file:line:col: error: text` (or
 * `model.onnx: node 'name' (#index): error: text`) and go to `out` (may be NULL to only
 * count and keep the first). */
typedef struct drk_diag {
  FILE *out;
  int n_errors;
  int n_warnings;
  char first[1100]; /* the first error, formatted */
} drk_diag_t;

void drk_diag_init(drk_diag_t *d, FILE *out);
void drk_diag_error(drk_diag_t *d, drk_loc_t loc, const char *fmt, ...) DRK_PRINTF(3, 4);
void drk_diag_warning(drk_diag_t *d, drk_loc_t loc, const char *fmt, ...) DRK_PRINTF(3, 4);
void drk_diag_verror(drk_diag_t *d, drk_loc_t loc, const char *kind, const char *fmt, va_list ap);
/* Writes the location prefix ("file:line:col" etc.) into buf. */
/* Copies s into buf (n bytes, NUL-terminated, cut to fit) with control characters written
 * as \xNN, for printing names a model chose. Returns the length written. */
size_t drk_escape(const char *s, char *buf, size_t n);
void drk_loc_format(drk_loc_t loc, char *buf, size_t n);

/* ---- files ---- */
/* Reads a whole file into malloc'ed memory (NUL-terminated; caller frees). Returns NULL and
 * reports through d on failure. */
char *drk_read_file(const char *path, size_t *out_size, drk_diag_t *d);
/* write(2) of all n bytes of p to fd, retrying short writes and EINTR; false on an error
 * (errno set). */
bool drk_write_all(int fd, const void *p, size_t n);

/* ---- hashing ---- */
uint64_t drk_hash_fnv1a(const void *p, size_t n, uint64_t seed);
/* The next value of the splitmix64 sequence of state *s (test inputs, seeds of searches). */
uint64_t drk_splitmix64(uint64_t *s);

/* The CPU worker pool (interp_par.c: the reference interpreter's, also used for the big
 * weight copies and conversions of the front half). drk_ipar_for calls fn(ctx, i0, i1, tid) on
 * disjoint ranges covering [0, n), at most grain indices each (the last may be shorter), from
 * up to drk_interp_threads() threads (DRK_INTERP_THREADS, drk_interp_set_threads; all CPUs by
 * default); tid in [0, drk_interp_threads()) names the calling thread (for per-thread scratch;
 * one tid never runs two ranges at once). Returns when all ranges are done. Nested or
 * concurrent calls run serially on the calling thread (tid 0); safe across fork(). Each index
 * must compute its outputs alone, in an order that does not depend on the ranges: results are
 * then the same for every thread count. */
typedef void (*drk_ipar_fn)(void *ctx, int64_t i0, int64_t i1, int tid);
void drk_ipar_for(int64_t n, int64_t grain, drk_ipar_fn fn, void *ctx);

#endif
