/* Targets (the GPU a measurement ran on, as a fingerprint) and the features of workloads and
 * targets that the learned parts of the search read (the RL agent's state, the cost model's
 * context, the nearest-workload warm start).
 *
 * A target fingerprint is canonical text, one `key=value` per item separated by ';' in a
 * fixed order: arch, sms, sm_mhz, mem_mhz, bw_gbs, l2_bytes, driver, cuda, name (the name
 * last: it may hold spaces). Its key is 16 hex digits of a hash of that text: records of two
 * GPUs that differ in any item (another driver, another clock cap) have different targets,
 * and a lookup by target never returns another target's record silently (db.h).
 *
 * A workload description is the text the tuner's caller writes for a kernel's computation:
 * its kind, then `key=value` items, e.g. "mm_ws M=128 N=2304 K=768 dtype=f16 epilogue=gelu".
 * Features read M, N, K (and rows/cols/elems for other kinds) and dtype; unknown items are
 * kept in the description and ignored here. */
#ifndef DRK_SEARCH_FEATURES_H
#define DRK_SEARCH_FEATURES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct drk_search_target {
  char arch[16];     /* "sm_90a", "gfx942" */
  int sms;           /* SM (CU) count */
  int sm_mhz;        /* max SM clock */
  int mem_mhz;       /* max memory clock */
  double bw_gbs;     /* peak memory bandwidth, GB/s */
  int64_t l2_bytes;  /* L2 size */
  char driver[32];   /* "560.35.03" */
  char cuda[32];     /* "12.6" */
  char name[96];     /* "NVIDIA H200" */
} drk_search_target_t;

/* The canonical fingerprint text of t into buf (size n). */
void drk_search_target_format(const drk_search_target_t *t, char *buf, size_t n);
/* Parses fingerprint text (items in any order; missing items stay zero/empty). False with a
 * message for an unknown item or a bad number. */
bool drk_search_target_parse(const char *text, drk_search_target_t *out, char *err, size_t n);
/* The target's key: 16 hex digits of the hash of its canonical fingerprint. */
void drk_search_target_key(const drk_search_target_t *t, char out[17]);

/* Context features: workload (log2 of M, N, K or sizes scaled to 0..1, dtype one-hot: f32,
 * 16-bit, 8-bit) then target (SMs, log2 L2, bandwidth, SM clock, arch generation, scaled to
 * about 0..1). */
#define DRK_SEARCH_WORKLOAD_FEATURES 7
#define DRK_SEARCH_TARGET_FEATURES 5
#define DRK_SEARCH_CONTEXT_FEATURES (DRK_SEARCH_WORKLOAD_FEATURES + DRK_SEARCH_TARGET_FEATURES)

/* Features of a workload description (NULL or "": zeros). */
void drk_search_workload_features(const char *description, float out[DRK_SEARCH_WORKLOAD_FEATURES]);
/* Features of a target (NULL: zeros). */
void drk_search_target_features(const drk_search_target_t *t, float out[DRK_SEARCH_TARGET_FEATURES]);
/* Both, workload first. */
void drk_search_context_features(const char *description, const drk_search_target_t *t,
                                 float out[DRK_SEARCH_CONTEXT_FEATURES]);
/* The kernel kind of a description (its first word) into buf; "" when none. */
void drk_search_description_kind(const char *description, char *buf, size_t n);

#endif
