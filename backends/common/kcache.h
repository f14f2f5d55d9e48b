/* Kernel code generation options and the content-addressed code cache (see docs/backend-nvptx.md,
 * "Parallel code generation and the cache").
 *
 * Options and statistics of parallel, cached kernel code generation (drk_codegen_opts_t,
 * drk_codegen_stats_t) are shared by the GPU backends and by backends/package, which passes
 * them down from the driver. The cache stores generated code under the SHA-256 of a
 * canonical text (drk_kcache_key_*) that names everything the code depends on; backends
 * build that text, this file only stores and finds bytes.
 *
 * Location: opts->cache_dir, else $DRK_CACHE_DIR, else $XDG_CACHE_HOME/drkc, else
 * $HOME/.cache/drkc. Disabled by opts->no_cache and by DRK_CACHE=0 (also off/no/false).
 *
 * Guarantees: a get returns exactly the bytes one put stored for that kind and key, or a miss.
 * Entries are written to a temporary file in their directory and renamed into place, so
 * concurrent compiles and a process killed mid-write never leave a torn entry under an
 * entry's name; each entry carries a header (magic, format version, kind, key, payload
 * length, CRC-32 of the payload and of the header), and a reader that finds a bad, short
 * or foreign entry treats it as a miss and deletes it. No fsync: after a power loss an entry
 * may be empty or garbage, which the checksum turns into a miss. An unusable cache directory
 * (unwritable, not a directory) is never an error: gets miss, puts are counted as failed
 * and the compile goes on uncached. Nothing is ever evicted (the directory only grows; delete
 * it to clear it). drk_kcache_t is safe to use from several threads at once. */
#ifndef DRK_BACKENDS_COMMON_KCACHE_H
#define DRK_BACKENDS_COMMON_KCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* What an entry holds; each kind has its own subdirectory and statistics. */
typedef enum drk_kcache_kind {
  DRK_KCACHE_PTX,   /* the PTX of one tile kernel for one arch */
  DRK_KCACHE_CUBIN, /* ptxas's ELF for the assembled PTX of a whole module */
  DRK_KCACHE_KIND_COUNT
} drk_kcache_kind_t;

/* "ptx", "cubin" (also the subdirectory names). */
const char *drk_kcache_kind_name(drk_kcache_kind_t kind);

/* ---- options and statistics of kernel code generation ---- */
typedef struct drk_codegen_stats {
  int jobs;                 /* worker threads of the last compile (1: on the calling thread) */
  int kernels;              /* kernels compiled, summed over calls */
  bool cache_enabled;       /* the last compile had a usable cache (directory, not disabled) */
  char cache_dir[512];      /* its directory ("" when none) */
  unsigned hits[DRK_KCACHE_KIND_COUNT], misses[DRK_KCACHE_KIND_COUNT];
  unsigned stores[DRK_KCACHE_KIND_COUNT];    /* entries written */
  unsigned store_failures;  /* puts that could not write (unwritable directory, full disk) */
  unsigned bad_entries;     /* entries found corrupt or short and deleted (counted as misses too) */
  unsigned whole_modules;   /* compiles whose kernels' PTX did not join, compiled as one module */
  char whole_reason[300];   /* the last one's reason (the join's internal error) */
  double lower_s;           /* wall seconds: tile IR -> PTX for all kernels (threads included) */
  double assemble_s;        /* wall seconds: ptxas (or the cubin cache) */
} drk_codegen_stats_t;

typedef struct drk_codegen_opts {
  /* Worker threads for tile IR -> LLVM IR -> PTX, one kernel per task. <= 0: $DRK_JOBS when
   * set (a positive integer), else the online CPU count. 1: every kernel on the calling
   * thread, no thread is started. The output does not depend on it. */
  int jobs;
  bool no_cache;          /* --no-cache: neither read nor write the cache */
  const char *cache_dir;  /* NULL: the default location (above) */
  /* Called on the calling thread, once with done = 0 and then after each kernel finishes
   * (done = 1..total, in completion order); may be NULL. Not called for the ptxas step. */
  void (*progress)(void *ctx, int done, int total);
  void *progress_ctx;
  /* out, may be NULL: counts are ADDED to (zero the struct once for several compiles, e.g.
   * one per target); jobs, cache_enabled and cache_dir are those of the last compile. */
  drk_codegen_stats_t *stats;
} drk_codegen_opts_t;

/* The number of workers opts asks for (see drk_codegen_opts_t.jobs; opts may be NULL),
 * capped at n_tasks (and at least 1). */
int drk_codegen_jobs(const drk_codegen_opts_t *opts, int n_tasks);
/* One line per kind for -v: "codegen: 75 kernels, 2 jobs; cache /x: ptx 70 hits 5 misses, ...". */
void drk_codegen_stats_print(const drk_codegen_stats_t *s, FILE *out);

/* Runs task(ctx, i) for i = 0..n-1 on `jobs` threads (each index exactly once, in any
 * order); with progress, calls it on the calling thread as described above. jobs <= 1, or a
 * thread that cannot be started, runs the rest on the calling thread. Returns after every
 * task has finished. task must be safe to run concurrently with itself for different i. */
void drk_codegen_parallel(int n, int jobs, void (*task)(void *ctx, int i), void *ctx,
                          void (*progress)(void *pctx, int done, int total), void *progress_ctx);

/* ---- keys ---- */
/* A canonical text under construction: fields appended as "name=<length>:value\n", so no
 * two different field lists give the same text. */
typedef struct drk_kcache_key {
  char *text;
  size_t len, cap;
} drk_kcache_key_t;

void drk_kcache_key_init(drk_kcache_key_t *k, drk_kcache_kind_t kind);
void drk_kcache_key_add(drk_kcache_key_t *k, const char *name, const void *value, size_t n);
void drk_kcache_key_add_str(drk_kcache_key_t *k, const char *name, const char *value);
/* SHA-256 of the text; frees it. */
void drk_kcache_key_finish(drk_kcache_key_t *k, uint8_t out_key[32]);

/* The identity of the running compiler for keys whose value depends on its code: the
 * version string and the build id of the executable or library holding this file (or, when
 * it has none, its size and modification time). Computed once; never NULL. */
const char *drk_kcache_compiler_id(void);

/* ---- the cache ---- */
typedef struct drk_kcache drk_kcache_t;

/* Opens the cache for opts (which may be NULL: the defaults). Returns NULL when it is
 * disabled or there is no location ($HOME unset); the directory is created on the first
 * put. Callers treat NULL as "every get misses, every put is a no-op": all functions below
 * accept it. Caller closes it. */
drk_kcache_t *drk_kcache_open(const drk_codegen_opts_t *opts);
void drk_kcache_close(drk_kcache_t *c);
/* The directory (borrowed; "" for NULL). */
const char *drk_kcache_dir(const drk_kcache_t *c);

/* On a hit, *out_data (malloc'ed, NUL-terminated beyond *out_size; free() it) receives the
 * payload and true is returned; otherwise false and out_* are untouched. */
bool drk_kcache_get(drk_kcache_t *c, drk_kcache_kind_t kind, const uint8_t key[32], void **out_data,
                    size_t *out_size);
/* Stores data under (kind, key), replacing any entry. false when it could not be written
 * (the cache then goes on as before; nothing is reported). */
bool drk_kcache_put(drk_kcache_t *c, drk_kcache_kind_t kind, const uint8_t key[32], const void *data,
                    size_t size);
/* The path an entry of (kind, key) has (for tests; buf of n bytes). false: no cache. */
bool drk_kcache_entry_path(const drk_kcache_t *c, drk_kcache_kind_t kind, const uint8_t key[32], char *buf,
                           size_t n);
/* Adds this cache's counts (hits, misses, stores, failures, bad entries) to s and sets its
 * cache_enabled and cache_dir. */
void drk_kcache_stats_add(drk_kcache_t *c, drk_codegen_stats_t *s);

#endif
