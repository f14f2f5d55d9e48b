/* The .drkm writer and reader (see module.h for the contract, docs/module-format.md for the
 * bytes). All multi-byte fields are little-endian and read through byte helpers, so the
 * reader has no alignment or endianness assumptions and no undefined behaviour on any
 * input; every offset is checked against the buffer before it is used. */
#include "backends/package/module.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Fuzz builds (DRK_MODFILE_FUZZING) skip checksum comparisons so the fuzzer can reach the
 * parsing behind them; everything else is checked as usual. */
#ifdef DRK_MODFILE_FUZZING
#define CRC_MISMATCH(stored, computed) 0
#else
#define CRC_MISMATCH(stored, computed) ((stored) != (computed))
#endif

#ifndef DRK_VERSION_STRING
#define DRK_VERSION_STRING "0.1.0"
#endif

enum {
  SEC_STRINGS = 1,
  SEC_PROVENANCE = 2,
  SEC_PLAN = 3,
  SEC_KERNELS = 4,
  SEC_PARAMS = 5,
  SEC_TENSORS = 6,
  SEC_TMAS = 7,
  SEC_WEIGHT_TABLE = 8,
  SEC_WEIGHTS = 9,
  SEC_IMAGE_TABLE = 10,
  SEC_IMAGE_DATA = 11,
  SEC_PRECISION = 12, /* optional: at most once */
  SEC_EXTERNAL_WEIGHTS = 13, /* optional: at most once; the weights are in a side file */
  SEC_PRECISION_AUTO = 14, /* optional: at most once; --accuracy-budget's choice */
  SEC_BUCKETS = 15, /* format version 2 only, exactly once there: shape buckets */
  SEC_FALLBACK = 16, /* optional: at most once; a nested module for devices this one cannot run on */
  SEC_KIND_COUNT = 17,
};
static const char *const sec_names[SEC_KIND_COUNT] = {
    "?", "STRINGS", "PROVENANCE", "PLAN", "KERNELS", "PARAMS", "TENSORS", "TMAS",
    "WEIGHT_TABLE", "WEIGHTS", "IMAGE_TABLE", "IMAGE_DATA", "PRECISION", "EXTERNAL_WEIGHTS", "PRECISION_AUTO", "BUCKETS", "FALLBACK"};

#define HEADER_SIZE 64u
#define SECTION_ENTRY_SIZE 32u
#define MAX_SECTIONS 65536u
#define PROV_SIZE 16u
#define PLAN_SIZE 16u
#define KERNEL_REC 56u
#define PARAM_REC 32u
#define TENSOR_REC 96u
#define TMA_REC 144u
#define WEIGHT_REC 24u
#define IMAGE_REC 16u
#define PREC_HEADER 16u
#define PREC_KERNEL_REC 16u
#define PREC_NODE_REC 24u
#define AUTO_HEADER 24u
#define AUTO_GROUP_REC 16u
#define AUTO_OUTPUT_REC 16u
#define EXTW_SIZE 48u
#define EXTW_VERSION 1u
/* FALLBACK: u32 version, u32 flags, u64 nested module size, zeros to 256 bytes (the nested
 * module starts 256-aligned, as a file does), then the nested module */
#define FALLBACK_HEADER 256u
#define FALLBACK_SHARES_WEIGHTS 1u
#define BUCKETS_VERSION 2u /* 2: dims may name a length input; 1 (still read): none do */
#define BUCKETS_HEADER 16u
#define DYN_DIM_REC 24u
#define BUCKET_REC 88u
#define DYN_AXIS_REC 12u

static void set_err(char *err, size_t n, const char *fmt, ...) {
  if (!err || !n) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, n, fmt, ap);
  va_end(ap);
}

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8); }
static void put32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static void put64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t get32(const uint8_t *p) { return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24); }
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) | ((uint64_t)get32(p + 4) << 32); }

/* ---- checksums ---- */
static const uint32_t crc_table[256] = {
#include "crctab.inc"
};

/* Byte by byte below 4 KB; above, 8 bytes per step (slicing-by-8: t[k][b] is the CRC of byte
 * b followed by k zero bytes, built per call from crc_table, 2048 entries, no shared state),
 * for the weights section of big models (the full LLaMA decoder's 733 MB module is checked
 * when drkc writes it and when a runtime loads it). */
uint32_t drk_modfile_crc32(uint32_t crc, const void *data, size_t n) {
  const uint8_t *p = data;
  crc = ~crc;
  if (n >= 4096) {
    uint32_t t[8][256];
    memcpy(t[0], crc_table, sizeof crc_table);
    for (int k = 1; k < 8; k++)
      for (int b = 0; b < 256; b++) t[k][b] = (t[k - 1][b] >> 8) ^ crc_table[t[k - 1][b] & 0xff];
    for (; n >= 8; p += 8, n -= 8) {
      uint32_t lo = get32(p) ^ crc, hi = get32(p + 4);
      crc = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^ t[4][lo >> 24] ^ t[3][hi & 0xff] ^
            t[2][(hi >> 8) & 0xff] ^ t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
    }
  }
  for (size_t i = 0; i < n; i++) crc = crc_table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))
static const uint32_t sha_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static void sha_block(uint32_t h[8], const uint8_t *b) {
  uint32_t w[64];
  for (int i = 0; i < 16; i++) w[i] = ((uint32_t)b[4 * i] << 24) | ((uint32_t)b[4 * i + 1] << 16) | ((uint32_t)b[4 * i + 2] << 8) | b[4 * i + 3];
  for (int i = 16; i < 64; i++) {
    uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = h[0], bb = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
  for (int i = 0; i < 64; i++) {
    uint32_t t1 = hh + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + sha_k[i] + w[i];
    uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & bb) ^ (a & c) ^ (bb & c));
    hh = g, g = f, f = e, e = d + t1, d = c, c = bb, bb = a, a = t1 + t2;
  }
  h[0] += a, h[1] += bb, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define SHA_NI 1
/* The x86 SHA extensions (sha256rnds2/msg1/msg2), where the CPU has them: the full LLaMA
 * decoder's 1.45 GB model hash takes a fraction of the portable code's CPU time. State is
 * held as ABEF/CDGH; group g of four rounds uses message words w[4g .. 4g+3] (M[g % 4]),
 * each group from 4 on computed from the four before it. */
__attribute__((target("sha,sse4.1,ssse3"))) static void sha_blocks_ni(uint32_t h[8], const uint8_t *p, size_t nb) {
  const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
  __m128i t = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)h), 0xB1);   /* CDAB */
  __m128i s1 = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)(h + 4)), 0x1B); /* EFGH */
  __m128i s0 = _mm_alignr_epi8(t, s1, 8);                                   /* ABEF */
  s1 = _mm_blend_epi16(s1, t, 0xF0);                                        /* CDGH */
  for (; nb; nb--, p += 64) {
    __m128i a0 = s0, c0 = s1, m[4];
    for (int g = 0; g < 16; g++) {
      if (g < 4)
        m[g] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * g)), bswap);
      else
        m[g % 4] = _mm_sha256msg2_epu32(_mm_add_epi32(_mm_sha256msg1_epu32(m[g % 4], m[(g + 1) % 4]),
                                                      _mm_alignr_epi8(m[(g + 3) % 4], m[(g + 2) % 4], 4)),
                                        m[(g + 3) % 4]);
      __m128i k = _mm_add_epi32(m[g % 4], _mm_loadu_si128((const __m128i *)(sha_k + 4 * g)));
      s1 = _mm_sha256rnds2_epu32(s1, s0, k);
      s0 = _mm_sha256rnds2_epu32(s0, s1, _mm_shuffle_epi32(k, 0x0E));
    }
    s0 = _mm_add_epi32(s0, a0), s1 = _mm_add_epi32(s1, c0);
  }
  t = _mm_shuffle_epi32(s0, 0x1B);                                         /* FEBA */
  s1 = _mm_shuffle_epi32(s1, 0xB1);                                        /* DCHG */
  _mm_storeu_si128((__m128i *)h, _mm_blend_epi16(t, s1, 0xF0));            /* DCBA */
  _mm_storeu_si128((__m128i *)(h + 4), _mm_alignr_epi8(s1, t, 8));         /* HGFE */
}

static bool sha_ni_present(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 19)) || !(c & (1u << 9))) return false; /* SSE4.1, SSSE3 */
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 29));                        /* SHA */
}
#endif

/* full 64-byte blocks of p: the SHA extensions or the portable rounds */
static void sha_blocks(uint32_t h[8], const uint8_t *p, size_t nb, bool portable) {
#ifdef SHA_NI
  if (!portable && sha_ni_present()) {
    sha_blocks_ni(h, p, nb);
    return;
  }
#endif
  (void)portable;
  for (; nb; nb--, p += 64) sha_block(h, p);
}

void drk_modfile_sha256(const void *data, size_t n, uint8_t out[32]) { drk_modfile_sha256_impl(data, n, out, false); }

void drk_modfile_sha256_impl(const void *data, size_t n, uint8_t out[32], bool portable) {
  uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  const uint8_t *p = data;
  size_t i = n / 64 * 64;
  sha_blocks(h, p, n / 64, portable);
  uint8_t tail[128] = {0};
  size_t r = n - i;
  if (r) memcpy(tail, p + i, r);
  tail[r] = 0x80;
  size_t tl = r + 1 + 8 <= 64 ? 64 : 128;
  uint64_t bits = (uint64_t)n * 8;
  for (int k = 0; k < 8; k++) tail[tl - 1 - k] = (uint8_t)(bits >> (8 * k));
  sha_blocks(h, tail, tl / 64, portable);
  for (int k = 0; k < 8; k++) out[4 * k] = (uint8_t)(h[k] >> 24), out[4 * k + 1] = (uint8_t)(h[k] >> 16), out[4 * k + 2] = (uint8_t)(h[k] >> 8), out[4 * k + 3] = (uint8_t)h[k];
}

void drk_modfile_sha256_string(const void *data, size_t n, char buf[72]) {
  uint8_t d[32];
  drk_modfile_sha256(data, n, d);
  memcpy(buf, "sha256:", 7);
  for (int i = 0; i < 32; i++) snprintf(buf + 7 + 2 * i, 3, "%02x", d[i]);
}

/* ---- validation (shared by writer and reader) ---- */
static int in_range(uint64_t off, uint64_t size, uint64_t limit) { return off <= limit && size <= limit - off; }

#define AFAIL(...) do { set_err(err, n, __VA_ARGS__); return DRK_MODFILE_ERR_INVALID; } while (0)
/* The PRECISION_AUTO arrays: a budget in (0, 1), precision codes a choice can have, errors
 * that are numbers >= 0. */
static drk_modfile_result_t validate_auto(const drk_modfile_t *m, char *err, size_t n) {
  if (m->auto_version != DRK_MODFILE_AUTO_VERSION) {
    if (m->auto_groups || m->n_auto_groups || m->auto_outputs || m->n_auto_outputs) AFAIL("precision auto records without a PRECISION_AUTO section version %u", DRK_MODFILE_AUTO_VERSION);
    return DRK_MODFILE_OK;
  }
  if (!(m->auto_budget > 0 && m->auto_budget < 1)) AFAIL("PRECISION_AUTO section: budget %g is not in (0, 1)", m->auto_budget);
  if ((m->n_auto_groups && !m->auto_groups) || (m->n_auto_outputs && !m->auto_outputs)) AFAIL("PRECISION_AUTO section: records missing");
  for (uint32_t i = 0; i < m->n_auto_groups; i++) {
    uint8_t c = m->auto_groups[i].choice;
    if (c != DRK_MODFILE_PREC_F32 && c != DRK_MODFILE_PREC_TF32 && c != DRK_MODFILE_PREC_F16 && c != DRK_MODFILE_PREC_BF16 && c != DRK_MODFILE_PREC_F8E4M3)
      AFAIL("PRECISION_AUTO section: group %u ('%s'): precision code %u is not a choice", i, m->auto_groups[i].name ? m->auto_groups[i].name : "", c);
  }
  for (uint32_t i = 0; i < m->n_auto_outputs; i++)
    if (!(m->auto_outputs[i].error >= 0)) AFAIL("PRECISION_AUTO section: output %u ('%s'): error %g", i, m->auto_outputs[i].name ? m->auto_outputs[i].name : "", m->auto_outputs[i].error);
  return DRK_MODFILE_OK;
}
#undef AFAIL

/* The PRECISION arrays: codes and masks in range, every node's kernel range inside the
 * kernel table, every kernel's anchor node a node whose range holds the kernel. */
static drk_modfile_result_t validate_precision(const drk_modfile_t *m, char *err, size_t n) {
#define FAIL(...) do { set_err(err, n, __VA_ARGS__); return DRK_MODFILE_ERR_INVALID; } while (0)

  if (m->precision_version != DRK_MODFILE_PRECISION_VERSION) {
    if (m->kernel_precision || m->node_precision || m->n_node_precision) FAIL("precision records without a PRECISION section version %u", DRK_MODFILE_PRECISION_VERSION);
    return DRK_MODFILE_OK;
  }
  if (m->n_kernels && !m->kernel_precision) FAIL("PRECISION section: kernel_precision is NULL for %u kernels", m->n_kernels);
  if (m->n_node_precision && !m->node_precision) FAIL("PRECISION section: node_precision is NULL for %u nodes", m->n_node_precision);
  for (uint32_t i = 0; i < m->n_node_precision; i++) {
    const drk_modfile_node_prec_t *q = &m->node_precision[i];
    const char *nm = q->name ? q->name : "";
    if (q->compute >= DRK_MODFILE_PREC_COUNT || q->from >= DRK_MODFILE_PREC_COUNT) FAIL("precision of node %u ('%s'): precision code %u/%u out of range", i, nm, q->compute, q->from);
    if ((q->kernel == DRK_MODFILE_NO_KERNEL) != (q->n_kernels == 0)) FAIL("precision of node %u ('%s'): kernel %u with %u kernels", i, nm, q->kernel, q->n_kernels);
    if (q->n_kernels && (q->kernel >= m->n_kernels || q->n_kernels > m->n_kernels - q->kernel)) FAIL("precision of node %u ('%s'): kernels [%u, +%u) outside the %u-kernel table", i, nm, q->kernel, q->n_kernels, m->n_kernels);
  }
  for (uint32_t i = 0; m->kernel_precision && i < m->n_kernels; i++) {
    const drk_modfile_kernel_prec_t *k = &m->kernel_precision[i];
    const char *kn = m->kernels[i].name ? m->kernels[i].name : "";
    if (k->group >= DRK_MODFILE_GROUP_COUNT) FAIL("precision of kernel %u ('%s'): group kind %u out of range", i, kn, k->group);
    if ((k->dot | k->acc | k->math | k->io) & ~DRK_MODFILE_PREC_MASK_ALL) FAIL("precision of kernel %u ('%s'): a precision mask has bits outside the codes 1..%d", i, kn, DRK_MODFILE_PREC_COUNT - 1);
    if (k->dot && !k->acc) FAIL("precision of kernel %u ('%s'): matrix products without an accumulator precision", i, kn);
    if (k->anchor >= m->n_node_precision) FAIL("precision of kernel %u ('%s'): node %u of %u", i, kn, k->anchor, m->n_node_precision);
    const drk_modfile_node_prec_t *a = &m->node_precision[k->anchor];
    if (!a->n_kernels || i < a->kernel || i - a->kernel >= a->n_kernels) FAIL("precision of kernel %u ('%s'): its node %u ('%s') does not run it", i, kn, k->anchor, a->name ? a->name : "");
  }
  return DRK_MODFILE_OK;
#undef FAIL
}

/* The BUCKETS records: dims, a partition of the kernels, every bucket's tensors alike but for
 * the dynamic axes, which hold the bucket's sizes; every buffer inside its bucket's arena. */
static drk_modfile_result_t validate_buckets(const drk_modfile_t *m, char *err, size_t n) {
#define FAIL(...) do { set_err(err, n, __VA_ARGS__); return DRK_MODFILE_ERR_INVALID; } while (0)
  if (!m->n_buckets) {
    if (m->n_dyn_dims || m->n_dyn_axes) FAIL("dynamic dims or axes without buckets");
    return DRK_MODFILE_OK;
  }
  if (m->precision_version) FAIL("a module with buckets has no PRECISION section");
  if (m->n_buckets > DRK_MODFILE_MAX_BUCKETS) FAIL("%u buckets (at most %d)", m->n_buckets, DRK_MODFILE_MAX_BUCKETS);
  if (!m->n_dyn_dims || m->n_dyn_dims > DRK_MODFILE_MAX_DYN_DIMS) FAIL("%u dynamic dims (1..%d)", m->n_dyn_dims, DRK_MODFILE_MAX_DYN_DIMS);
  for (uint32_t d = 0; d < m->n_dyn_dims; d++) {
    const drk_modfile_dyn_dim_t *x = &m->dyn_dims[d];
    if (!x->name || !*x->name) FAIL("dynamic dim %u has no name", d);
    if (x->lo < 1 || x->hi < x->lo) FAIL("dynamic dim %u ('%s'): range %lld..%lld", d, x->name, (long long)x->lo, (long long)x->hi);
  }
  if (m->n_inputs % m->n_buckets || m->n_outputs % m->n_buckets) FAIL("%u inputs and %u outputs for %u buckets", m->n_inputs, m->n_outputs, m->n_buckets);
  uint32_t ni = m->n_inputs / m->n_buckets, no = m->n_outputs / m->n_buckets, next = 0;
  for (uint32_t b = 0; b < m->n_buckets; b++) {
    const drk_modfile_bucket_t *B = &m->buckets[b];
    if (B->first_kernel != next || B->n_kernels > m->n_kernels - next) FAIL("bucket %u: kernels [%u, +%u) do not follow bucket %u's in the %u-kernel table", b, B->first_kernel, B->n_kernels, b ? b - 1 : 0, m->n_kernels);
    next += B->n_kernels;
    if (B->arena_size > m->arena_size) FAIL("bucket %u: arena of %llu bytes, the module's is %llu", b, (unsigned long long)B->arena_size, (unsigned long long)m->arena_size);
    for (uint32_t d = 0; d < DRK_MODFILE_MAX_DYN_DIMS; d++) {
      int64_t s = B->size[d];
      if (d >= m->n_dyn_dims ? s != 0 : (s < m->dyn_dims[d].lo || s > m->dyn_dims[d].hi)) FAIL("bucket %u: size %lld of dim %u is outside its range", b, (long long)s, d);
    }
    for (uint32_t c = 0; c < b; c++)
      if (!memcmp(m->buckets[c].size, B->size, sizeof B->size)) FAIL("buckets %u and %u have the same sizes", c, b);
    for (uint32_t k = B->first_kernel; k < B->first_kernel + B->n_kernels; k++)
      for (uint32_t p = 0; p < m->kernels[k].n_params; p++) {
        const drk_modfile_param_t *pa = &m->kernels[k].params[p];
        if (pa->kind == DRK_MODFILE_PARAM_BUFFER && !in_range(pa->offset, pa->size, B->arena_size)) FAIL("bucket %u kernel %u ('%s') param %u: buffer outside the bucket's %llu-byte arena", b, k, m->kernels[k].name, p, (unsigned long long)B->arena_size);
      }
    for (uint32_t t = 0; t < ni + no; t++) {
      const drk_modfile_tensor_t *x = t < ni ? &m->inputs[b * ni + t] : &m->outputs[b * no + t - ni];
      const drk_modfile_tensor_t *x0 = t < ni ? &m->inputs[t] : &m->outputs[t - ni];
      if (!in_range(x->offset, x->size, B->arena_size)) FAIL("bucket %u tensor %u ('%s'): outside the bucket's arena", b, t, x->name ? x->name : "");
      if (strcmp(x->name ? x->name : "", x0->name ? x0->name : "") || x->dtype != x0->dtype || x->rank != x0->rank) FAIL("bucket %u tensor %u ('%s'): name, dtype or rank differs from bucket 0's", b, t, x->name ? x->name : "");
      for (uint32_t a = 0; a < x->rank; a++) {
        int64_t want = x0->dims[a];
        for (uint32_t j = 0; j < m->n_dyn_axes; j++)
          if (m->dyn_axes[j].tensor == t && m->dyn_axes[j].axis == a) want = B->size[m->dyn_axes[j].dim];
        if (x->dims[a] != want) FAIL("bucket %u tensor %u ('%s') axis %u: size %lld, expected %lld", b, t, x->name ? x->name : "", a, (long long)x->dims[a], (long long)want);
      }
    }
  }
  if (next != m->n_kernels) FAIL("the buckets run %u of the %u kernels", next, m->n_kernels);
  for (uint32_t j = 0; j < m->n_dyn_axes; j++) {
    const drk_modfile_dyn_axis_t *A = &m->dyn_axes[j];
    if (A->tensor >= ni + no || A->dim >= m->n_dyn_dims) FAIL("dynamic axis %u: tensor %u or dim %u out of range", j, A->tensor, A->dim);
    const drk_modfile_tensor_t *x0 = A->tensor < ni ? &m->inputs[A->tensor] : &m->outputs[A->tensor - ni];
    if (A->axis >= x0->rank) FAIL("dynamic axis %u: axis %u of a rank-%u tensor", j, A->axis, x0->rank);
    for (uint32_t k = 0; k < j; k++)
      if (m->dyn_axes[k].tensor == A->tensor && m->dyn_axes[k].axis == A->axis) FAIL("dynamic axis %u repeats axis %u of tensor %u", j, A->axis, A->tensor);
  }
  uint32_t n_len = 0;
  for (uint32_t d = 0; d < m->n_dyn_dims; d++) {
    uint32_t li = m->dyn_dims[d].length_input;
    if (!li) continue;
    n_len++;
    const drk_modfile_tensor_t *t = li <= ni ? &m->inputs[li - 1] : NULL;
    if (!t || t->dtype != 7 /* ONNX INT64 */ || t->size != 8) FAIL("dynamic dim %u ('%s'): length input %u is not an int64 scalar input", d, m->dyn_dims[d].name, li);
    for (uint32_t e = 0; e < d; e++)
      if (m->dyn_dims[e].length_input == li) FAIL("dynamic dims %u and %u share length input %u", e, d, li);
    for (uint32_t j = 0; j < m->n_dyn_axes; j++)
      if (m->dyn_axes[j].tensor == li - 1) FAIL("length input %u of dim %u has a dynamic axis", li, d);
  }
  for (uint32_t d = 0; d < m->n_dyn_dims; d++) /* the length inputs are the last ones */
    if (m->dyn_dims[d].length_input && m->dyn_dims[d].length_input <= ni - n_len) FAIL("dynamic dim %u: length input %u is not among the last %u inputs", d, m->dyn_dims[d].length_input, n_len);
  for (uint32_t d = 0; d < m->n_dyn_dims; d++) {
    bool in_input = false;
    for (uint32_t j = 0; j < m->n_dyn_axes; j++) in_input |= m->dyn_axes[j].dim == d && m->dyn_axes[j].tensor < ni;
    if (!in_input) FAIL("dynamic dim %u ('%s') is no input's axis", d, m->dyn_dims[d].name);
  }
  return DRK_MODFILE_OK;
#undef FAIL
}

/* Bits per element of the ONNX dtype codes a module's tensors may have; 0 for any other code. */
static unsigned onnx_dtype_bits(int32_t code) {
  switch (code) {
  case 1: case 6: case 12: return 32;                 /* float, int32, uint32 */
  case 2: case 3: case 9: case 17: case 18: case 19: case 20: return 8; /* u8, i8, bool, the f8s */
  case 4: case 5: case 10: case 16: return 16;        /* u16, i16, float16, bfloat16 */
  case 7: case 11: case 13: return 64;                /* int64, double, uint64 */
  case 21: case 22: return 4;                         /* uint4, int4 */
  default: return 0;
  }
}

drk_modfile_result_t drk_modfile_validate(const drk_modfile_t *m, char *err, size_t n) {
#define FAIL(...) do { set_err(err, n, __VA_ARGS__); return DRK_MODFILE_ERR_INVALID; } while (0)
  if (m->weights_offset % DRK_MODFILE_WEIGHT_ALIGN) FAIL("weights arena offset %llu is not a multiple of %u", (unsigned long long)m->weights_offset, DRK_MODFILE_WEIGHT_ALIGN);
  if (!in_range(m->weights_offset, m->weights_size, m->arena_size)) FAIL("weights (%llu bytes at arena offset %llu) do not fit the %llu-byte arena", (unsigned long long)m->weights_size, (unsigned long long)m->weights_offset, (unsigned long long)m->arena_size);
  bool entry_data = false;
  for (uint32_t i = 0; i < m->n_weight_entries; i++) {
    const drk_modfile_weight_t *w = &m->weight_entries[i];
    if (w->data && w->data_size > w->size)
      FAIL("weight %u ('%s'): %llu bytes of data for a %llu-byte range", i, w->name ? w->name : "", (unsigned long long)w->data_size, (unsigned long long)w->size);
    entry_data = entry_data || w->data;
    if (w->offset % DRK_MODFILE_WEIGHT_ALIGN || !in_range(w->offset, w->size, m->weights_size))
      FAIL("weight %u ('%s'): range [%llu, +%llu) is unaligned or outside the %llu-byte blob", i, w->name ? w->name : "", (unsigned long long)w->offset, (unsigned long long)w->size, (unsigned long long)m->weights_size);
  }
  if (m->weights_file && (!m->weights_file[0] || strchr(m->weights_file, '/')))
    FAIL("weights file name '%s' is empty or has a '/' (a base name, found next to the module)", m->weights_file);
  if (m->weights_size && !m->weights && !entry_data && !m->weights_file) FAIL("weights_size is %llu but weights is NULL", (unsigned long long)m->weights_size);
  for (uint32_t i = 0; i < m->n_images; i++) {
    const drk_modfile_image_t *im = &m->images[i];
    if (im->kind < DRK_MODFILE_IMAGE_FATBIN || im->kind > DRK_MODFILE_IMAGE_OFFLOAD_BUNDLE) FAIL("image %u: unknown kind %d", i, (int)im->kind);
    if (!im->size || !im->data) FAIL("image %u is empty", i);
  }
  for (uint32_t i = 0; i < m->n_kernels; i++) {
    const drk_modfile_kernel_t *k = &m->kernels[i];
    const char *kn = k->name ? k->name : "";
    if (!*kn) FAIL("kernel %u has no name", i);
    int has_image = 0;
    for (uint32_t j = 0; j < m->n_images; j++) has_image |= m->images[j].slot == k->slot;
    if (!has_image) FAIL("kernel %u ('%s'): no image has code slot %u", i, kn, k->slot);
    int clustered = k->cluster[0] || k->cluster[1] || k->cluster[2];
    for (int d = 0; d < 3; d++) {
      if (!k->grid[d] || !k->block[d]) FAIL("kernel %u ('%s'): grid and block dimensions must be >= 1", i, kn);
      if (clustered && (!k->cluster[d] || k->grid[d] % k->cluster[d])) FAIL("kernel %u ('%s'): cluster %ux%ux%u does not divide grid %ux%ux%u", i, kn, k->cluster[0], k->cluster[1], k->cluster[2], k->grid[0], k->grid[1], k->grid[2]);
    }
    if (k->n_params && !k->params) FAIL("kernel %u ('%s'): params is NULL", i, kn);
    for (uint32_t p = 0; p < k->n_params; p++) {
      const drk_modfile_param_t *pa = &k->params[p];
      switch (pa->kind) {
      case DRK_MODFILE_PARAM_BUFFER:
        if (!in_range(pa->offset, pa->size, m->arena_size)) FAIL("kernel %u ('%s') param %u: buffer [%llu, +%llu) outside the %llu-byte arena", i, kn, p, (unsigned long long)pa->offset, (unsigned long long)pa->size, (unsigned long long)m->arena_size);
        break;
      case DRK_MODFILE_PARAM_SCALAR:
        if (pa->scalar_size != 1 && pa->scalar_size != 2 && pa->scalar_size != 4 && pa->scalar_size != 8) FAIL("kernel %u ('%s') param %u: scalar size %u is not 1, 2, 4 or 8", i, kn, p, pa->scalar_size);
        break;
      case DRK_MODFILE_PARAM_TMA:
        if (pa->tma >= m->n_tmas) FAIL("kernel %u ('%s') param %u: TMA descriptor %u of %u", i, kn, p, pa->tma, m->n_tmas);
        break;
      default:
        FAIL("kernel %u ('%s') param %u: unknown kind %d", i, kn, p, (int)pa->kind);
      }
    }
  }
  for (int io = 0; io < 2; io++) {
    const drk_modfile_tensor_t *ts = io ? m->outputs : m->inputs;
    uint32_t nt = io ? m->n_outputs : m->n_inputs;
    for (uint32_t i = 0; i < nt; i++) {
      const drk_modfile_tensor_t *t = &ts[i];
      const char *what = io ? "output" : "input";
      if (t->rank > DRK_MODFILE_MAX_RANK) FAIL("%s %u: rank %u > %d", what, i, t->rank, DRK_MODFILE_MAX_RANK);
      const char *tn = t->name ? t->name : "";
      unsigned bits = onnx_dtype_bits(t->dtype);
      if (!bits) FAIL("%s %u ('%s'): dtype %d is not an ONNX dtype a module holds", what, i, tn, t->dtype);
      /* the size is what the runtime copies: it must be the dims' elements exactly, or a
       * caller's buffer of the declared shape is over- or under-read */
      uint64_t elems = 1;
      for (uint32_t d = 0; d < t->rank; d++) {
        if (t->dims[d] < 0) FAIL("%s %u ('%s'): negative dimension", what, i, tn);
        if (__builtin_mul_overflow(elems, (uint64_t)t->dims[d], &elems) || elems > ((uint64_t)1 << 56))
          FAIL("%s %u ('%s'): dims with more than 2^56 elements", what, i, tn);
      }
      if ((elems * bits + 7) / 8 != t->size)
        FAIL("%s %u ('%s'): %llu bytes for %llu elements of dtype %d (%llu bytes)", what, i, tn, (unsigned long long)t->size,
             (unsigned long long)elems, t->dtype, (unsigned long long)((elems * bits + 7) / 8));
      if (t->offset % DRK_MODFILE_TENSOR_ALIGN)
        FAIL("%s %u ('%s'): arena offset %llu is not a multiple of %u", what, i, tn, (unsigned long long)t->offset,
             DRK_MODFILE_TENSOR_ALIGN);
      if (!in_range(t->offset, t->size, m->arena_size)) FAIL("%s %u ('%s'): [%llu, +%llu) outside the %llu-byte arena", what, i, t->name ? t->name : "", (unsigned long long)t->offset, (unsigned long long)t->size, (unsigned long long)m->arena_size);
    }
  }
  for (uint32_t i = 0; i < m->n_tmas; i++) {
    const drk_modfile_tma_t *t = &m->tmas[i];
    if (t->rank < 1 || t->rank > DRK_MODFILE_TMA_MAX_RANK) FAIL("TMA descriptor %u: rank %u not in 1..5", i, t->rank);
    if (t->offset % 16 || t->offset >= m->arena_size) FAIL("TMA descriptor %u: arena offset %llu unaligned or outside the arena", i, (unsigned long long)t->offset);
  }
  drk_modfile_result_t br = validate_buckets(m, err, n);
  if (br) return br;
  drk_modfile_result_t vr = validate_precision(m, err, n);
  return vr ? vr : validate_auto(m, err, n);
#undef FAIL
}

/* ---- precision names and table ---- */
const char *drk_modfile_prec_name(uint32_t code) {
  static const char *const names[DRK_MODFILE_PREC_COUNT] = {"-", "f64", "f32", "tf32", "f16", "bf16", "f8e4m3", "f8e5m2", "int"};
  return code < DRK_MODFILE_PREC_COUNT ? names[code] : "?";
}

const char *drk_modfile_group_name(uint32_t group) {
  static const char *const names[DRK_MODFILE_GROUP_COUNT] = {"single", "flat", "rows", "attention", "mm"};
  return group < DRK_MODFILE_GROUP_COUNT ? names[group] : "?";
}

void drk_modfile_prec_mask_format(uint32_t mask, char *buf, size_t n) {
  if (!n) return;
  size_t l = 0;
  buf[0] = 0;
  for (uint32_t c = 1; c < DRK_MODFILE_PREC_COUNT; c++)
    if (mask & (1u << c)) {
      int w = snprintf(buf + l, n - l, "%s%s", l ? "," : "", drk_modfile_prec_name(c));
      if (w < 0 || (size_t)w >= n - l) return;
      l += (size_t)w;
    }
  if (!l) snprintf(buf, n, "-");
}

/* A name the model chose, control characters as \xNN (a value named "\x1b[2J" must not
 * clear the terminal of whoever lists the module). */
static void put_escaped(FILE *out, const char *s) {
  for (; s && *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch < 0x20 || ch == 0x7f) fprintf(out, "\\x%02x", ch);
    else fputc(ch, out);
  }
}

static void print_node(FILE *out, const drk_modfile_node_prec_t *q) {
  fputc('%', out);
  put_escaped(out, q->name);
  if (q->from) fprintf(out, " (%s %s->%s)", q->op, drk_modfile_prec_name(q->from), drk_modfile_prec_name(q->compute));
  else fprintf(out, " (%s %s)", q->op, drk_modfile_prec_name(q->compute));
}

void drk_modfile_print_precision(const drk_modfile_t *m, FILE *out, const char *indent) {
  if (!indent) indent = "";
  if (!m->precision_version) {
    fprintf(out, "%sprecision: not recorded (module written without a PRECISION section)\n", indent);
    return;
  }
  if (m->precision_version != DRK_MODFILE_PRECISION_VERSION) {
    fprintf(out, "%sprecision: PRECISION section version %u, this reader knows version %u (skipped)\n", indent,
            m->precision_version, DRK_MODFILE_PRECISION_VERSION);
    return;
  }
  /* the mix as `drkc --report` counts it (live nodes by compute dtype, Casts by their result),
   * except that the integer dtypes, which the report names one by one, are one code: "int" */
  uint32_t mix[DRK_MODFILE_PREC_COUNT] = {0};
  for (uint32_t i = 0; i < m->n_node_precision; i++) mix[m->node_precision[i].compute]++;
  fprintf(out, "%sprecision: %u graph nodes, %u kernels; precision mix (float nodes by compute dtype):", indent,
          m->n_node_precision, m->n_kernels);
  for (uint32_t c = 1; c < DRK_MODFILE_PREC_COUNT; c++)
    if (mix[c]) fprintf(out, " %u %s", mix[c], drk_modfile_prec_name(c));
  fprintf(out, "\n%s  %-5s %-30s %-9s %-9s %-9s %-14s %-9s %s\n", indent, "#", "kernel", "dot", "acc", "math", "io", "group", "nodes");
  char dot[64], acc[64], math[64], io[64];
  for (uint32_t i = 0; i < m->n_kernels; i++) {
    const drk_modfile_kernel_prec_t *k = &m->kernel_precision[i];
    drk_modfile_prec_mask_format(k->dot, dot, sizeof dot);
    drk_modfile_prec_mask_format(k->acc, acc, sizeof acc);
    drk_modfile_prec_mask_format(k->math, math, sizeof math);
    drk_modfile_prec_mask_format(k->io, io, sizeof io);
    fprintf(out, "%s  %-5u %-30s %-9s %-9s %-9s %-14s %-9s ", indent, i, m->kernels[i].name, dot, acc, math, io, /* drkc's names */
            drk_modfile_group_name(k->group));
    /* the anchor first, then the group's other nodes in graph order */
    print_node(out, &m->node_precision[k->anchor]);
    for (uint32_t j = 0; j < m->n_node_precision; j++) {
      const drk_modfile_node_prec_t *q = &m->node_precision[j];
      if (j == k->anchor || !q->n_kernels || i < q->kernel || i - q->kernel >= q->n_kernels) continue;
      fputs(", ", out);
      print_node(out, q);
    }
    fputc('\n', out);
  }
  int first = 1;
  for (uint32_t j = 0; j < m->n_node_precision; j++) {
    if (m->node_precision[j].n_kernels) continue;
    fputs(first ? "" : ", ", out);
    if (first) fprintf(out, "%s  no kernel: ", indent);
    print_node(out, &m->node_precision[j]);
    first = 0;
  }
  if (!first) fputc('\n', out);
}

void drk_modfile_print_auto(const drk_modfile_t *m, FILE *out, const char *indent) {
  if (!indent) indent = "";
  if (!m->auto_version) return;
  if (m->auto_version != DRK_MODFILE_AUTO_VERSION) {
    fprintf(out, "%sprecision auto: PRECISION_AUTO section version %u, this reader knows version %u (skipped)\n", indent,
            m->auto_version, DRK_MODFILE_AUTO_VERSION);
    return;
  }
  fprintf(out, "%sprecision auto: budget %.0e, %u op groups\n", indent, m->auto_budget, m->n_auto_groups);
  for (uint32_t i = 0; i < m->n_auto_groups; i++) {
    const drk_modfile_auto_group_t *g = &m->auto_groups[i];
    fprintf(out, "%s  group ", indent);
    put_escaped(out, g->name);
    fprintf(out, " (%s, %u node%s) %s\n", g->op, g->n_nodes, g->n_nodes == 1 ? "" : "s", drk_modfile_prec_name(g->choice));
  }
  for (uint32_t i = 0; i < m->n_auto_outputs; i++) {
    const drk_modfile_auto_output_t *o = &m->auto_outputs[i];
    fprintf(out, "%s  output '", indent);
    put_escaped(out, o->name);
    fprintf(out, "': %s error %.2e %s %.0e\n", o->absolute ? "absolute" : "rel", o->error,
            o->error <= m->auto_budget ? "<=" : "> ", m->auto_budget);
  }
}

/* ---- writer ---- */
typedef struct buf {
  uint8_t *p;
  size_t n, cap;
  int oom;
} buf_t;

static uint8_t *buf_extend(buf_t *b, size_t k) {
  if (b->oom) return NULL;
  if (b->n + k > b->cap) {
    size_t nc = b->cap ? b->cap * 2 : 256;
    while (nc < b->n + k) nc *= 2;
    uint8_t *np = realloc(b->p, nc);
    if (!np) { b->oom = 1; return NULL; }
    b->p = np, b->cap = nc;
  }
  uint8_t *r = b->p + b->n;
  memset(r, 0, k);
  b->n += k;
  return r;
}

static uint32_t add_str(buf_t *s, const char *str) {
  if (!str || !*str) return 0;
  size_t l = strlen(str) + 1;
  uint32_t off = (uint32_t)s->n;
  uint8_t *p = buf_extend(s, l);
  if (p) memcpy(p, str, l);
  return off;
}

/* The PRECISION section's bytes (docs/module-format.md): header, kernel records, node records. */
static void write_precision(buf_t *b, buf_t *str, const drk_modfile_t *m) {
  uint8_t *p = buf_extend(b, PREC_HEADER);
  if (p) put32(p, m->precision_version), put32(p + 4, m->n_kernels), put32(p + 8, m->n_node_precision);
  for (uint32_t i = 0; i < m->n_kernels && (p = buf_extend(b, PREC_KERNEL_REC)); i++) {
    const drk_modfile_kernel_prec_t *k = &m->kernel_precision[i];
    put32(p, k->anchor), put32(p + 4, k->group);
    put16(p + 8, k->dot), put16(p + 10, k->acc), put16(p + 12, k->math), put16(p + 14, k->io);
  }
  for (uint32_t i = 0; i < m->n_node_precision && (p = buf_extend(b, PREC_NODE_REC)); i++) {
    const drk_modfile_node_prec_t *q = &m->node_precision[i];
    put32(p, add_str(str, q->name)), put32(p + 4, add_str(str, q->onnx)), put32(p + 8, add_str(str, q->op));
    put32(p + 12, q->kernel), put32(p + 16, q->n_kernels);
    p[20] = q->compute, p[21] = q->from;
  }
}

static void put_f64(uint8_t *p, double v) {
  uint64_t u;
  memcpy(&u, &v, 8);
  put64(p, u);
}

/* The PRECISION_AUTO section's bytes: header (version, counts, budget), group records, output
 * records (docs/module-format.md). */
static void write_auto(buf_t *b, buf_t *str, const drk_modfile_t *m) {
  uint8_t *p = buf_extend(b, AUTO_HEADER);
  if (p) put32(p, m->auto_version), put32(p + 4, m->n_auto_groups), put32(p + 8, m->n_auto_outputs), put_f64(p + 16, m->auto_budget);
  for (uint32_t i = 0; i < m->n_auto_groups && (p = buf_extend(b, AUTO_GROUP_REC)); i++) {
    const drk_modfile_auto_group_t *g = &m->auto_groups[i];
    put32(p, add_str(str, g->name)), put32(p + 4, add_str(str, g->op)), put32(p + 8, g->n_nodes);
    p[12] = g->choice;
  }
  for (uint32_t i = 0; i < m->n_auto_outputs && (p = buf_extend(b, AUTO_OUTPUT_REC)); i++) {
    const drk_modfile_auto_output_t *o = &m->auto_outputs[i];
    put32(p, add_str(str, o->name)), put32(p + 4, o->absolute ? 1u : 0u), put_f64(p + 8, o->error);
  }
}

/* The BUCKETS section's bytes: header, dims, buckets, dynamic axes. */
static void write_buckets(buf_t *b, buf_t *str, const drk_modfile_t *m) {
  uint8_t *p = buf_extend(b, BUCKETS_HEADER);
  uint32_t version = 1; /* readers of version 1 load what has no length input */
  for (uint32_t i = 0; i < m->n_dyn_dims; i++)
    if (m->dyn_dims[i].length_input) version = BUCKETS_VERSION;
  if (p) put32(p, version), put32(p + 4, m->n_dyn_dims), put32(p + 8, m->n_buckets), put32(p + 12, m->n_dyn_axes);
  for (uint32_t i = 0; i < m->n_dyn_dims && (p = buf_extend(b, DYN_DIM_REC)); i++)
    put32(p, add_str(str, m->dyn_dims[i].name)), put32(p + 4, m->dyn_dims[i].length_input),
        put64(p + 8, (uint64_t)m->dyn_dims[i].lo), put64(p + 16, (uint64_t)m->dyn_dims[i].hi);
  for (uint32_t i = 0; i < m->n_buckets && (p = buf_extend(b, BUCKET_REC)); i++) {
    const drk_modfile_bucket_t *B = &m->buckets[i];
    for (int d = 0; d < DRK_MODFILE_MAX_DYN_DIMS; d++) put64(p + 8 * d, (uint64_t)B->size[d]);
    put64(p + 64, B->arena_size), put32(p + 72, B->first_kernel), put32(p + 76, B->n_kernels);
  }
  for (uint32_t i = 0; i < m->n_dyn_axes && (p = buf_extend(b, DYN_AXIS_REC)); i++)
    put32(p, m->dyn_axes[i].tensor), put32(p + 4, m->dyn_axes[i].axis), put32(p + 8, m->dyn_axes[i].dim);
}

typedef struct wsec {
  uint32_t kind, align;
  const void *data;
  uint64_t size, offset;
} wsec_t;

drk_modfile_result_t drk_modfile_write(const drk_modfile_t *m, void **out_data, size_t *out_size,
                                       char *err, size_t err_size) {
  drk_modfile_result_t r = drk_modfile_validate(m, err, err_size);
  if (r) return r;
  if (m->precision_version && m->precision_version != DRK_MODFILE_PRECISION_VERSION) {
    set_err(err, err_size, "this writer writes PRECISION section version %u, not %u", DRK_MODFILE_PRECISION_VERSION, m->precision_version);
    return DRK_MODFILE_ERR_INVALID;
  }
  if (m->auto_version && m->auto_version != DRK_MODFILE_AUTO_VERSION) {
    set_err(err, err_size, "this writer writes PRECISION_AUTO section version %u, not %u", DRK_MODFILE_AUTO_VERSION, m->auto_version);
    return DRK_MODFILE_ERR_INVALID;
  }
  if (m->fallback && (!m->fallback_size || m->n_buckets)) {
    set_err(err, err_size, m->n_buckets ? "a module with shape buckets cannot have a fallback" : "the fallback module is empty");
    return DRK_MODFILE_ERR_INVALID;
  }
  buf_t str = {0}, prov = {0}, plan = {0}, kern = {0}, par = {0}, ten = {0}, tma = {0}, wt = {0}, img = {0}, prec = {0},
        extw = {0}, autob = {0}, bk = {0}, fb = {0};
  wsec_t *secs = NULL;
  uint8_t *out = NULL;
  r = DRK_MODFILE_ERR_NOMEM;
  buf_extend(&str, 1); /* offset 0 is the empty string */

  uint8_t *p = buf_extend(&prov, PROV_SIZE);
  if (p) {
    put32(p, add_str(&str, m->prov.drkc_version));
    put32(p + 4, add_str(&str, m->prov.command_line));
    put32(p + 8, add_str(&str, m->prov.model_hash));
    put32(p + 12, add_str(&str, m->prov.targets));
  }
  if ((p = buf_extend(&plan, PLAN_SIZE))) put64(p, m->arena_size), put64(p + 8, m->weights_offset);
  uint32_t first_param = 0;
  for (uint32_t i = 0; i < m->n_kernels; i++) {
    const drk_modfile_kernel_t *k = &m->kernels[i];
    if (!(p = buf_extend(&kern, KERNEL_REC))) break;
    put32(p, add_str(&str, k->name));
    put32(p + 4, k->slot);
    for (int d = 0; d < 3; d++) put32(p + 8 + 4 * d, k->grid[d]), put32(p + 20 + 4 * d, k->block[d]), put32(p + 32 + 4 * d, k->cluster[d]);
    put32(p + 44, k->dyn_smem);
    put32(p + 48, first_param);
    put32(p + 52, k->n_params);
    first_param += k->n_params;
    for (uint32_t j = 0; j < k->n_params; j++) {
      const drk_modfile_param_t *pa = &k->params[j];
      uint8_t *q = buf_extend(&par, PARAM_REC);
      if (!q) break;
      put32(q, (uint32_t)pa->kind);
      put32(q + 4, pa->kind == DRK_MODFILE_PARAM_TMA ? pa->tma : pa->kind == DRK_MODFILE_PARAM_SCALAR ? pa->scalar_size : 0);
      if (pa->kind == DRK_MODFILE_PARAM_BUFFER) put64(q + 8, pa->offset), put64(q + 16, pa->size);
      if (pa->kind == DRK_MODFILE_PARAM_SCALAR) memcpy(q + 24, pa->scalar, pa->scalar_size);
    }
  }
  for (int io = 0; io < 2; io++) {
    const drk_modfile_tensor_t *ts = io ? m->outputs : m->inputs;
    uint32_t nt = io ? m->n_outputs : m->n_inputs;
    for (uint32_t i = 0; i < nt; i++) {
      if (!(p = buf_extend(&ten, TENSOR_REC))) break;
      put32(p, add_str(&str, ts[i].name));
      put32(p + 4, (uint32_t)io);
      put32(p + 8, (uint32_t)ts[i].dtype);
      put32(p + 12, ts[i].rank);
      for (uint32_t d = 0; d < ts[i].rank; d++) put64(p + 16 + 8 * d, (uint64_t)ts[i].dims[d]);
      put64(p + 80, ts[i].offset);
      put64(p + 88, ts[i].size);
    }
  }
  for (uint32_t i = 0; i < m->n_tmas; i++) {
    const drk_modfile_tma_t *t = &m->tmas[i];
    if (!(p = buf_extend(&tma, TMA_REC))) break;
    put32(p, t->data_type), put32(p + 4, t->rank), put32(p + 8, t->interleave), put32(p + 12, t->swizzle);
    put32(p + 16, t->l2_promotion), put32(p + 20, t->oob_fill), put64(p + 24, t->offset);
    for (int d = 0; d < 5; d++) put64(p + 32 + 8 * d, t->dims[d]), put32(p + 104 + 4 * d, t->box[d]), put32(p + 124 + 4 * d, t->elem_strides[d]);
    for (int d = 0; d < 4; d++) put64(p + 72 + 8 * d, t->strides[d]);
  }
  for (uint32_t i = 0; i < m->n_weight_entries; i++) {
    if (!(p = buf_extend(&wt, WEIGHT_REC))) break;
    put32(p, add_str(&str, m->weight_entries[i].name));
    put64(p + 8, m->weight_entries[i].offset);
    put64(p + 16, m->weight_entries[i].size);
  }
  int has_prec = m->precision_version != 0;
  if (has_prec) write_precision(&prec, &str, m);
  int has_auto = m->auto_version != 0;
  if (has_auto) write_auto(&autob, &str, m);
  /* --weights=external: an empty WEIGHTS section, and the blob's file, size and hash */
  int has_extw = m->weights_file != NULL;
  if (has_extw && (p = buf_extend(&extw, EXTW_SIZE))) {
    put32(p, EXTW_VERSION);
    put32(p + 4, add_str(&str, m->weights_file));
    put64(p + 8, m->weights_size);
    memcpy(p + 16, m->weights_sha256, 32);
  }
  int has_bk = m->n_buckets != 0;
  if (has_bk) write_buckets(&bk, &str, m);
  int has_fb = m->fallback != NULL;
  if (has_fb && (p = buf_extend(&fb, FALLBACK_HEADER + m->fallback_size))) {
    put32(p, DRK_MODFILE_FALLBACK_VERSION);
    put32(p + 4, m->fallback_shares_weights ? FALLBACK_SHARES_WEIGHTS : 0);
    put64(p + 8, m->fallback_size);
    memset(p + 16, 0, FALLBACK_HEADER - 16);
    memcpy(p + FALLBACK_HEADER, m->fallback, (size_t)m->fallback_size);
  }
  uint32_t nsec = 10 + m->n_images + (uint32_t)has_prec + (uint32_t)has_extw + (uint32_t)has_auto + (uint32_t)has_bk + (uint32_t)has_fb;
  for (uint32_t i = 0; i < m->n_images; i++) {
    if (!(p = buf_extend(&img, IMAGE_REC))) break;
    put32(p, (uint32_t)m->images[i].kind);
    put32(p + 4, m->images[i].slot);
    put32(p + 8, add_str(&str, m->images[i].targets));
    put32(p + 12, 10 + i); /* section index of its IMAGE_DATA */
  }
  if (str.oom || prov.oom || plan.oom || kern.oom || par.oom || ten.oom || tma.oom || wt.oom || img.oom || prec.oom || extw.oom || autob.oom ||
      bk.oom || fb.oom)
    goto fail;
  if (!(secs = calloc(nsec, sizeof *secs))) goto fail;
  wsec_t fixed[10] = {{SEC_STRINGS, 8, str.p, str.n, 0},        {SEC_PROVENANCE, 8, prov.p, prov.n, 0},
                      {SEC_PLAN, 8, plan.p, plan.n, 0},         {SEC_KERNELS, 8, kern.p, kern.n, 0},
                      {SEC_PARAMS, 8, par.p, par.n, 0},         {SEC_TENSORS, 8, ten.p, ten.n, 0},
                      {SEC_TMAS, 8, tma.p, tma.n, 0},           {SEC_WEIGHT_TABLE, 8, wt.p, wt.n, 0},
                      {SEC_IMAGE_TABLE, 8, img.p, img.n, 0},
                      {SEC_WEIGHTS, DRK_MODFILE_WEIGHT_ALIGN, has_extw ? NULL : m->weights, has_extw ? 0 : m->weights_size, 0}};
  memcpy(secs, fixed, sizeof fixed);
  for (uint32_t i = 0; i < m->n_images; i++) secs[10 + i] = (wsec_t){SEC_IMAGE_DATA, 256, m->images[i].data, m->images[i].size, 0};
  if (has_prec) secs[10 + m->n_images] = (wsec_t){SEC_PRECISION, 8, prec.p, prec.n, 0}; /* last: old readers skip it */
  if (has_extw) secs[10 + m->n_images + has_prec] = (wsec_t){SEC_EXTERNAL_WEIGHTS, 8, extw.p, extw.n, 0};
  if (has_auto) secs[10 + m->n_images + has_prec + has_extw] = (wsec_t){SEC_PRECISION_AUTO, 8, autob.p, autob.n, 0};
  if (has_bk) secs[10 + m->n_images + has_prec + has_extw + has_auto] = (wsec_t){SEC_BUCKETS, 8, bk.p, bk.n, 0};
  if (has_fb) secs[nsec - 1] = (wsec_t){SEC_FALLBACK, 256, fb.p, fb.n, 0};
  uint64_t off = HEADER_SIZE;
  for (uint32_t i = 0; i < nsec; i++) {
    off = (off + secs[i].align - 1) & ~(uint64_t)(secs[i].align - 1);
    secs[i].offset = off;
    off += secs[i].size;
  }
  uint64_t table = (off + 7) & ~(uint64_t)7;
  uint64_t total = table + (uint64_t)nsec * SECTION_ENTRY_SIZE;
  if (total > SIZE_MAX || !(out = calloc(1, (size_t)total))) goto fail;
  memcpy(out, DRK_MODFILE_MAGIC, 8);
  put32(out + 8, has_bk ? DRK_MODFILE_FORMAT_VERSION_DYNAMIC : DRK_MODFILE_FORMAT_VERSION);
  put32(out + 12, HEADER_SIZE);
  put64(out + 16, total);
  put64(out + 24, table);
  put32(out + 32, nsec);
  put32(out + 36, SECTION_ENTRY_SIZE);
  snprintf((char *)out + 40, 16, "drkc %s", DRK_VERSION_STRING);
  for (uint32_t i = 0; i < nsec; i++) {
    if (secs[i].size && secs[i].data) memcpy(out + secs[i].offset, secs[i].data, (size_t)secs[i].size);
    if (secs[i].kind == SEC_WEIGHTS && !m->weights && !has_extw) /* the blob from its entries (module.h) */
      for (uint32_t j = 0; j < m->n_weight_entries; j++) {
        const drk_modfile_weight_t *w = &m->weight_entries[j];
        if (w->data && w->data_size) memcpy(out + secs[i].offset + w->offset, w->data, (size_t)w->data_size);
      }
    uint8_t *e = out + table + (uint64_t)i * SECTION_ENTRY_SIZE;
    put32(e, secs[i].kind);
    put32(e + 4, secs[i].align);
    put64(e + 8, secs[i].offset);
    put64(e + 16, secs[i].size);
    put32(e + 24, drk_modfile_crc32(0, out + secs[i].offset, (size_t)secs[i].size));
  }
  put32(out + 56, drk_modfile_crc32(0, out + table, (size_t)nsec * SECTION_ENTRY_SIZE));
  put32(out + 60, drk_modfile_crc32(0, out, 60));
  *out_data = out;
  *out_size = (size_t)total;
  out = NULL;
  r = DRK_MODFILE_OK;
fail:
  if (r == DRK_MODFILE_ERR_NOMEM) set_err(err, err_size, "out of memory writing the module");
  free(out);
  free(secs);
  free(str.p), free(prov.p), free(plan.p), free(kern.p), free(par.p), free(ten.p), free(tma.p), free(wt.p), free(img.p), free(prec.p), free(extw.p), free(autob.p);
  free(bk.p), free(fb.p);
  return r;
}

drk_modfile_result_t drk_modfile_write_file(const drk_modfile_t *m, const char *path, char *err,
                                            size_t err_size) {
  void *data;
  size_t size;
  drk_modfile_result_t r = drk_modfile_write(m, &data, &size, err, err_size);
  if (r) return r;
  FILE *f = fopen(path, "wb");
  int ok = f && fwrite(data, 1, size, f) == size;
  if (f && fclose(f)) ok = 0;
  free(data);
  if (!ok) {
    set_err(err, err_size, "%s: cannot write the module file", path);
    return DRK_MODFILE_ERR_IO;
  }
  return DRK_MODFILE_OK;
}

/* ---- reader ---- */
static void *def_alloc(void *u, size_t n, size_t a) { (void)u, (void)a; return malloc(n); }
static void def_free(void *u, void *p, size_t n) { (void)u, (void)n; free(p); }
static const drk_allocator_t default_alloc = {def_alloc, def_free, NULL};

typedef struct rsec {
  uint32_t kind;
  const uint8_t *p;
  uint64_t size;
} rsec_t;

/* The reader's block: the drk_modfile_t, then its arrays; its size is remembered for free. */
typedef struct rblock {
  size_t size;
  drk_modfile_t m;
} rblock_t;

static size_t align16(size_t n) { return (n + 15) & ~(size_t)15; }

/* What the reader has learned of the file so far; each phase below checks one layer of it
 * and reports into err (n bytes) with the first problem it finds. */
typedef struct rctx {
  const uint8_t *d;
  size_t size;
  char *err;
  size_t n;
  uint32_t version, nsec;
  uint64_t table;                 /* offset of the section table */
  rsec_t one[SEC_KIND_COUNT];     /* the section of each known kind (IMAGE_DATA aside) */
  int seen[SEC_KIND_COUNT];
  uint32_t n_image_data;
  const rsec_t *S, *P, *A;        /* STRINGS; PRECISION, or NULL; PRECISION_AUTO, or NULL */
  uint32_t prec_version, auto_version;
  size_t nag, nao;                /* PRECISION_AUTO groups and outputs */
  size_t nk, np, nt, ntma, nw, ni, npk, npn; /* record counts */
  size_t nin, nout;               /* tensors by direction */
  size_t nbd, nbb, nba;           /* BUCKETS: dims, buckets, axes */
  uint32_t buckets_version;
} rctx_t;

#define BAD(...) do { set_err(r->err, r->n, __VA_ARGS__); return DRK_MODFILE_ERR_FORMAT; } while (0)
#define STR(ref, dst) do { uint32_t r_ = (ref); if (r_ >= r->S->size) BAD("string reference %u outside the %llu-byte string table", r_, (unsigned long long)r->S->size); (dst) = (const char *)r->S->p + r_; } while (0)

/* The header: magic, format version, checksum, file size, where the section table lies. */
static drk_modfile_result_t read_header(rctx_t *r) {
  const uint8_t *d = r->d;
  size_t size = r->size;
  if (!d || size < 12) BAD("file is truncated: %zu bytes, the module header alone is %u", size, HEADER_SIZE);
  if (memcmp(d, DRK_MODFILE_MAGIC, 8) != 0) BAD("not a drkc module (bad magic)");
  uint32_t version = get32(d + 8);
  if (version != DRK_MODFILE_FORMAT_VERSION && version != DRK_MODFILE_FORMAT_VERSION_DYNAMIC) {
    /* Report the writer's name from the header when it is readable text, so the user knows
     * which drkc to pair with; this field sits at the same place in every format version. */
    char writer[17] = "an unknown drkc";
    if (size >= 56) {
      int ok = 1;
      size_t l = 0;
      while (l < 16 && d[40 + l]) ok &= d[40 + l] >= 0x20 && d[40 + l] < 0x7f, l++;
      if (ok && l && l < 16) memcpy(writer, d + 40, l + 1);
    }
    set_err(r->err, r->n, "module format version %u (written by %s), but this drkc %s reads format versions %u and %u "
            "(with shape buckets); recompile the model with this drkc or use the runtime of the drkc that wrote it",
            version, writer, DRK_VERSION_STRING, DRK_MODFILE_FORMAT_VERSION, DRK_MODFILE_FORMAT_VERSION_DYNAMIC);
    return DRK_MODFILE_ERR_VERSION;
  }
  if (size < HEADER_SIZE) BAD("file is truncated: %zu bytes, the module header alone is %u", size, HEADER_SIZE);
  if (CRC_MISMATCH(get32(d + 60), drk_modfile_crc32(0, d, 60))) BAD("module header checksum mismatch (file corrupted)");
  uint64_t file_size = get64(d + 16), table = get64(d + 24);
  uint32_t nsec = get32(d + 32);
  if (get32(d + 12) != HEADER_SIZE || get32(d + 36) != SECTION_ENTRY_SIZE) BAD("module header has unexpected header/entry sizes");
  if (file_size > size) BAD("file is truncated: %zu bytes, the header says %llu", size, (unsigned long long)file_size);
  if (file_size < size) BAD("file has %zu bytes, the header says %llu (trailing data)", size, (unsigned long long)file_size);
  if (nsec > MAX_SECTIONS || table < HEADER_SIZE || !in_range(table, (uint64_t)nsec * SECTION_ENTRY_SIZE, size)) BAD("section table (%u entries at %llu) lies outside the file", nsec, (unsigned long long)table);
  if (table + (uint64_t)nsec * SECTION_ENTRY_SIZE != size) BAD("section table does not end the file");
  if (CRC_MISMATCH(get32(d + 56), drk_modfile_crc32(0, d + table, (size_t)nsec * SECTION_ENTRY_SIZE))) BAD("section table checksum mismatch (file corrupted)");
  r->version = version;
  r->table = table;
  r->nsec = nsec;
  return DRK_MODFILE_OK;
}

/* The section table: alignment, bounds, file order, zero padding and checksum of every
 * section; at most one of each known kind, and every required one present. */
static drk_modfile_result_t read_sections(rctx_t *r) {
  const uint8_t *d = r->d;
  uint64_t table = r->table, prev_end = HEADER_SIZE;
  for (uint32_t i = 0; i < r->nsec; i++) {
    const uint8_t *e = d + table + (size_t)i * SECTION_ENTRY_SIZE;
    uint32_t kind = get32(e), align = get32(e + 4);
    uint64_t off = get64(e + 8), sz = get64(e + 16);
    const char *kn = kind < SEC_KIND_COUNT ? sec_names[kind] : "unknown";
    if (!align || align > 4096 || (align & (align - 1)) || off % align) BAD("section %u (%s): bad alignment %u for offset %llu", i, kn, align, (unsigned long long)off);
    if (off < HEADER_SIZE || !in_range(off, sz, table)) BAD("section %u (%s): [%llu, +%llu) lies outside the file's data area", i, kn, (unsigned long long)off, (unsigned long long)sz);
    /* Sections come in file order and the gaps are zero padding, so every byte of a valid
     * module is covered by a check and any corruption is caught. */
    if (off < prev_end) BAD("section %u (%s) at %llu overlaps or precedes the previous one", i, kn, (unsigned long long)off);
    for (uint64_t b = prev_end; b < off; b++)
      if (d[b]) BAD("non-zero padding byte at offset %llu (file corrupted)", (unsigned long long)b);
    prev_end = off + sz;
    if (get32(e + 28)) BAD("section %u (%s): reserved field is not zero", i, kn);
    uint32_t crc = drk_modfile_crc32(0, d + off, (size_t)sz);
    if (CRC_MISMATCH(get32(e + 24), crc)) BAD("section %u (%s): checksum mismatch, stored 0x%08x, computed 0x%08x (file corrupted)", i, kn, get32(e + 24), crc);
    if (kind == SEC_IMAGE_DATA) { r->n_image_data++; continue; }
    if (kind == 0 || kind >= SEC_KIND_COUNT) continue; /* unknown: not needed by this reader */
    if (r->seen[kind]++) BAD("section %s appears twice", kn);
    r->one[kind] = (rsec_t){kind, d + off, sz};
  }
  for (uint64_t b = prev_end; b < table; b++)
    if (d[b]) BAD("non-zero padding byte at offset %llu (file corrupted)", (unsigned long long)b);
  for (int k = SEC_STRINGS; k <= SEC_IMAGE_TABLE; k++)
    if (!r->seen[k]) BAD("section %s is missing", sec_names[k]);
  return DRK_MODFILE_OK;
}

/* Section sizes: the string table's ends, the fixed-size sections, whole records in the
 * tables (their counts), and the PRECISION header. */
static drk_modfile_result_t read_counts(rctx_t *r) {
  const rsec_t *one = r->one;
  const rsec_t *S = r->S = &one[SEC_STRINGS];
  if (!S->size || S->p[S->size - 1] || S->p[0]) BAD("STRINGS section is not a NUL-terminated string table");
  if (one[SEC_PROVENANCE].size != PROV_SIZE) BAD("PROVENANCE section has %llu bytes, expected %u", (unsigned long long)one[SEC_PROVENANCE].size, PROV_SIZE);
  if (one[SEC_PLAN].size != PLAN_SIZE) BAD("PLAN section has %llu bytes, expected %u", (unsigned long long)one[SEC_PLAN].size, PLAN_SIZE);
  static const struct { int kind; uint32_t rec; } recs[] = {{SEC_KERNELS, KERNEL_REC}, {SEC_PARAMS, PARAM_REC}, {SEC_TENSORS, TENSOR_REC}, {SEC_TMAS, TMA_REC}, {SEC_WEIGHT_TABLE, WEIGHT_REC}, {SEC_IMAGE_TABLE, IMAGE_REC}};
  for (size_t i = 0; i < sizeof recs / sizeof recs[0]; i++)
    if (one[recs[i].kind].size % recs[i].rec) BAD("%s section size %llu is not a multiple of its %u-byte record", sec_names[recs[i].kind], (unsigned long long)one[recs[i].kind].size, recs[i].rec);
  r->nk = (size_t)(one[SEC_KERNELS].size / KERNEL_REC), r->np = (size_t)(one[SEC_PARAMS].size / PARAM_REC);
  r->nt = (size_t)(one[SEC_TENSORS].size / TENSOR_REC), r->ntma = (size_t)(one[SEC_TMAS].size / TMA_REC);
  r->nw = (size_t)(one[SEC_WEIGHT_TABLE].size / WEIGHT_REC), r->ni = (size_t)(one[SEC_IMAGE_TABLE].size / IMAGE_REC);
  if (r->ni != r->n_image_data) BAD("IMAGE_TABLE lists %zu images but the file has %u IMAGE_DATA sections", r->ni, r->n_image_data);
  /* PRECISION (optional): a version this reader does not know is skipped like an unknown
   * section, since running needs none of it; the known one must be exactly its records. */
  const rsec_t *P = r->P = r->seen[SEC_PRECISION] ? &one[SEC_PRECISION] : NULL;
  if (P) {
    if (P->size < 4) BAD("PRECISION section has %llu bytes, too few for its version", (unsigned long long)P->size);
    r->prec_version = get32(P->p);
    if (!r->prec_version) BAD("PRECISION section has version 0");
  }
  /* EXTERNAL_WEIGHTS (optional): unlike PRECISION it cannot be skipped (the weights would be
   * missing), so an unknown version is an error; with it, WEIGHTS must be empty. */
  const rsec_t *X = r->seen[SEC_EXTERNAL_WEIGHTS] ? &one[SEC_EXTERNAL_WEIGHTS] : NULL;
  if (X) {
    if (X->size < 4) BAD("EXTERNAL_WEIGHTS section has %llu bytes, too few for its version", (unsigned long long)X->size);
    if (get32(X->p) != EXTW_VERSION) BAD("EXTERNAL_WEIGHTS section version %u, this reader knows %u: use the runtime of the drkc that wrote the module", get32(X->p), EXTW_VERSION);
    if (X->size != EXTW_SIZE) BAD("EXTERNAL_WEIGHTS section has %llu bytes, expected %u", (unsigned long long)X->size, EXTW_SIZE);
    if (one[SEC_WEIGHTS].size) BAD("the module has both a WEIGHTS blob (%llu bytes) and an EXTERNAL_WEIGHTS section", (unsigned long long)one[SEC_WEIGHTS].size);
  }
  /* PRECISION_AUTO (optional): skipped like PRECISION when its version is unknown */
  const rsec_t *A = r->A = r->seen[SEC_PRECISION_AUTO] ? &one[SEC_PRECISION_AUTO] : NULL;
  if (A) {
    if (A->size < 4) BAD("PRECISION_AUTO section has %llu bytes, too few for its version", (unsigned long long)A->size);
    r->auto_version = get32(A->p);
    if (!r->auto_version) BAD("PRECISION_AUTO section has version 0");
  }
  if (r->auto_version == DRK_MODFILE_AUTO_VERSION) {
    if (A->size < AUTO_HEADER) BAD("PRECISION_AUTO section is truncated: %llu bytes, its header alone is %u", (unsigned long long)A->size, AUTO_HEADER);
    uint32_t cg = get32(A->p + 4), co = get32(A->p + 8);
    if (get32(A->p + 12)) BAD("PRECISION_AUTO section: reserved header field is not zero");
    uint64_t want = AUTO_HEADER + (uint64_t)cg * AUTO_GROUP_REC + (uint64_t)co * AUTO_OUTPUT_REC;
    if (A->size != want) BAD("PRECISION_AUTO section has %llu bytes, but %u group and %u output records take %llu (truncated or corrupted)", (unsigned long long)A->size, cg, co, (unsigned long long)want);
    r->nag = cg, r->nao = co;
  }
  /* BUCKETS: in format version 2 only, and there always */
  const rsec_t *K = r->seen[SEC_BUCKETS] ? &one[SEC_BUCKETS] : NULL;
  if ((K != NULL) != (r->version == DRK_MODFILE_FORMAT_VERSION_DYNAMIC)) BAD("format version %u %s a BUCKETS section", r->version, K ? "with" : "without");
  if (K) {
    if (K->size < BUCKETS_HEADER) BAD("BUCKETS section is truncated: %llu bytes", (unsigned long long)K->size);
    if (get32(K->p) < 1 || get32(K->p) > BUCKETS_VERSION) BAD("BUCKETS section version %u, this reader knows 1..%u", get32(K->p), BUCKETS_VERSION);
    r->buckets_version = get32(K->p);
    r->nbd = get32(K->p + 4), r->nbb = get32(K->p + 8), r->nba = get32(K->p + 12);
    if (!r->nbd || r->nbd > DRK_MODFILE_MAX_DYN_DIMS || !r->nbb || r->nbb > DRK_MODFILE_MAX_BUCKETS || r->nba > (uint64_t)r->nt * DRK_MODFILE_MAX_RANK) BAD("BUCKETS section: %zu dims, %zu buckets, %zu axes", r->nbd, r->nbb, r->nba);
    uint64_t want = BUCKETS_HEADER + (uint64_t)r->nbd * DYN_DIM_REC + (uint64_t)r->nbb * BUCKET_REC + (uint64_t)r->nba * DYN_AXIS_REC;
    if (K->size != want) BAD("BUCKETS section has %llu bytes, its counts take %llu", (unsigned long long)K->size, (unsigned long long)want);
  }
  if (r->prec_version == DRK_MODFILE_PRECISION_VERSION) {
    if (P->size < PREC_HEADER) BAD("PRECISION section is truncated: %llu bytes, its header alone is %u", (unsigned long long)P->size, PREC_HEADER);
    uint32_t ck = get32(P->p + 4), cn = get32(P->p + 8);
    if (get32(P->p + 12)) BAD("PRECISION section: reserved header field is not zero");
    if (ck != r->nk) BAD("PRECISION section describes %u kernels, the KERNELS section has %zu", ck, r->nk);
    uint64_t want = PREC_HEADER + (uint64_t)ck * PREC_KERNEL_REC + (uint64_t)cn * PREC_NODE_REC;
    if (P->size != want) BAD("PRECISION section has %llu bytes, but %u kernel and %u node records take %llu (truncated or corrupted)", (unsigned long long)P->size, ck, cn, (unsigned long long)want);
    r->npk = ck, r->npn = cn;
  }
  return DRK_MODFILE_OK;
}

/* ---- reader: records into the block's arrays ---- */
static drk_modfile_result_t read_provenance(const rctx_t *r, drk_modfile_t *m) {
  const uint8_t *p = r->one[SEC_PROVENANCE].p;
  STR(get32(p), m->prov.drkc_version);
  STR(get32(p + 4), m->prov.command_line);
  STR(get32(p + 8), m->prov.model_hash);
  STR(get32(p + 12), m->prov.targets);
  m->arena_size = get64(r->one[SEC_PLAN].p);
  m->weights_offset = get64(r->one[SEC_PLAN].p + 8);
  m->weights = r->one[SEC_WEIGHTS].p;
  m->weights_size = r->one[SEC_WEIGHTS].size;
  if (r->seen[SEC_EXTERNAL_WEIGHTS]) { /* checked in read_counts */
    const uint8_t *x = r->one[SEC_EXTERNAL_WEIGHTS].p;
    STR(get32(x + 4), m->weights_file);
    m->weights = NULL;
    m->weights_size = get64(x + 8);
    memcpy(m->weights_sha256, x + 16, 32);
  }
  return DRK_MODFILE_OK;
}

static drk_modfile_result_t read_params(const rctx_t *r, drk_modfile_param_t *ps) {
  for (size_t i = 0; i < r->np; i++) {
    const uint8_t *p = r->one[SEC_PARAMS].p + i * PARAM_REC;
    drk_modfile_param_t *pa = &ps[i];
    pa->kind = (drk_modfile_param_kind_t)get32(p);
    if (pa->kind == DRK_MODFILE_PARAM_TMA) pa->tma = get32(p + 4);
    if (pa->kind == DRK_MODFILE_PARAM_SCALAR) pa->scalar_size = get32(p + 4), memcpy(pa->scalar, p + 24, 8);
    if (pa->kind == DRK_MODFILE_PARAM_BUFFER) pa->offset = get64(p + 8), pa->size = get64(p + 16);
    if (pa->kind == DRK_MODFILE_PARAM_SCALAR && pa->scalar_size > 8) BAD("parameter %zu: scalar size %u", i, pa->scalar_size);
  }
  return DRK_MODFILE_OK;
}

static drk_modfile_result_t read_kernels(const rctx_t *r, drk_modfile_kernel_t *ks, drk_modfile_param_t *ps) {
  uint64_t next_param = 0;
  for (size_t i = 0; i < r->nk; i++) {
    const uint8_t *p = r->one[SEC_KERNELS].p + i * KERNEL_REC;
    drk_modfile_kernel_t *k = &ks[i];
    STR(get32(p), k->name);
    k->slot = get32(p + 4);
    for (int dd = 0; dd < 3; dd++) k->grid[dd] = get32(p + 8 + 4 * dd), k->block[dd] = get32(p + 20 + 4 * dd), k->cluster[dd] = get32(p + 32 + 4 * dd);
    k->dyn_smem = get32(p + 44);
    uint64_t fp = get32(p + 48), kp = get32(p + 52);
    if (fp + kp > r->np) BAD("kernel %zu ('%s'): parameters [%llu, +%llu) outside the %zu-entry table", i, k->name, (unsigned long long)fp, (unsigned long long)kp, r->np);
    /* the writer lays the kernels' parameters out in kernel order: a count cut short (the
     * kernel would run reading garbage for its missing parameters) leaves records no kernel owns */
    if (fp != next_param) BAD("kernel %zu ('%s'): parameters start at %llu, expected %llu (every record belongs to one kernel, in order)", i, k->name, (unsigned long long)fp, (unsigned long long)next_param);
    next_param = fp + kp;
    k->params = ps + fp;
    k->n_params = (uint32_t)kp;
  }
  if (next_param != r->np) BAD("PARAMS has %zu records, the kernels use %llu", r->np, (unsigned long long)next_param);
  return DRK_MODFILE_OK;
}

/* Inputs first, then outputs, each in file order. */
static drk_modfile_result_t read_tensors(rctx_t *r, drk_modfile_tensor_t *ts) {
  for (size_t i = 0; i < r->nt; i++) {
    uint32_t io = get32(r->one[SEC_TENSORS].p + i * TENSOR_REC + 4);
    if (io > 1) BAD("tensor %zu: direction %u is neither input (0) nor output (1)", i, io);
    if (io) r->nout++; else r->nin++;
  }
  size_t ii = 0, oi = r->nin;
  for (size_t i = 0; i < r->nt; i++) {
    const uint8_t *p = r->one[SEC_TENSORS].p + i * TENSOR_REC;
    drk_modfile_tensor_t *t = &ts[get32(p + 4) ? oi++ : ii++];
    STR(get32(p), t->name);
    t->dtype = (int32_t)get32(p + 8);
    t->rank = get32(p + 12);
    if (t->rank > DRK_MODFILE_MAX_RANK) BAD("tensor %zu ('%s'): rank %u > %d", i, t->name, t->rank, DRK_MODFILE_MAX_RANK);
    for (uint32_t dd = 0; dd < t->rank; dd++) t->dims[dd] = (int64_t)get64(p + 16 + 8 * dd);
    t->offset = get64(p + 80);
    t->size = get64(p + 88);
  }
  return DRK_MODFILE_OK;
}

static void read_tmas(const rctx_t *r, drk_modfile_tma_t *tm) {
  for (size_t i = 0; i < r->ntma; i++) {
    const uint8_t *p = r->one[SEC_TMAS].p + i * TMA_REC;
    drk_modfile_tma_t *t = &tm[i];
    t->data_type = get32(p), t->rank = get32(p + 4), t->interleave = get32(p + 8), t->swizzle = get32(p + 12);
    t->l2_promotion = get32(p + 16), t->oob_fill = get32(p + 20), t->offset = get64(p + 24);
    for (int dd = 0; dd < 5; dd++) t->dims[dd] = get64(p + 32 + 8 * dd), t->box[dd] = get32(p + 104 + 4 * dd), t->elem_strides[dd] = get32(p + 124 + 4 * dd);
    for (int dd = 0; dd < 4; dd++) t->strides[dd] = get64(p + 72 + 8 * dd);
  }
}

static drk_modfile_result_t read_weights(const rctx_t *r, drk_modfile_weight_t *ws) {
  for (size_t i = 0; i < r->nw; i++) {
    const uint8_t *p = r->one[SEC_WEIGHT_TABLE].p + i * WEIGHT_REC;
    STR(get32(p), ws[i].name);
    ws[i].offset = get64(p + 8);
    ws[i].size = get64(p + 16);
  }
  return DRK_MODFILE_OK;
}

static drk_modfile_result_t read_images(const rctx_t *r, drk_modfile_image_t *is) {
  for (size_t i = 0; i < r->ni; i++) {
    const uint8_t *p = r->one[SEC_IMAGE_TABLE].p + i * IMAGE_REC;
    drk_modfile_image_t *im = &is[i];
    im->kind = (drk_modfile_image_kind_t)get32(p);
    im->slot = get32(p + 4);
    STR(get32(p + 8), im->targets);
    uint32_t si = get32(p + 12);
    if (si >= r->nsec) BAD("image %zu: data section %u of %u", i, si, r->nsec);
    const uint8_t *e = r->d + r->table + (size_t)si * SECTION_ENTRY_SIZE;
    if (get32(e) != SEC_IMAGE_DATA) BAD("image %zu: section %u is not IMAGE_DATA", i, si);
    im->data = r->d + get64(e + 8);
    im->size = get64(e + 16);
  }
  return DRK_MODFILE_OK;
}

static drk_modfile_result_t read_precision(const rctx_t *r, drk_modfile_kernel_prec_t *kp, drk_modfile_node_prec_t *np_) {
  for (size_t i = 0; i < r->npk; i++) {
    const uint8_t *p = r->P->p + PREC_HEADER + i * PREC_KERNEL_REC;
    kp[i] = (drk_modfile_kernel_prec_t){get32(p), get32(p + 4), get16(p + 8), get16(p + 10), get16(p + 12), get16(p + 14)};
  }
  for (size_t i = 0; i < r->npn; i++) {
    const uint8_t *p = r->P->p + PREC_HEADER + r->npk * PREC_KERNEL_REC + i * PREC_NODE_REC;
    drk_modfile_node_prec_t *q = &np_[i];
    STR(get32(p), q->name);
    STR(get32(p + 4), q->onnx);
    STR(get32(p + 8), q->op);
    q->kernel = get32(p + 12), q->n_kernels = get32(p + 16), q->compute = p[20], q->from = p[21];
    if (p[22] || p[23]) BAD("PRECISION section: node record %zu ('%s'): reserved bytes are not zero", i, q->name);
  }
  return DRK_MODFILE_OK;
}
static double get_f64(const uint8_t *p) {
  uint64_t u = get64(p);
  double v;
  memcpy(&v, &u, 8);
  return v;
}

static drk_modfile_result_t read_auto(const rctx_t *r, drk_modfile_t *m, drk_modfile_auto_group_t *ag, drk_modfile_auto_output_t *ao) {
  m->auto_budget = get_f64(r->A->p + 16);
  for (size_t i = 0; i < r->nag; i++) {
    const uint8_t *p = r->A->p + AUTO_HEADER + i * AUTO_GROUP_REC;
    STR(get32(p), ag[i].name);
    STR(get32(p + 4), ag[i].op);
    ag[i].n_nodes = get32(p + 8), ag[i].choice = p[12];
    if (p[13] || p[14] || p[15]) BAD("PRECISION_AUTO section: group record %zu: reserved bytes are not zero", i);
  }
  for (size_t i = 0; i < r->nao; i++) {
    const uint8_t *p = r->A->p + AUTO_HEADER + r->nag * AUTO_GROUP_REC + i * AUTO_OUTPUT_REC;
    STR(get32(p), ao[i].name);
    uint32_t flags = get32(p + 4);
    if (flags > 1) BAD("PRECISION_AUTO section: output record %zu: flags %u", i, flags);
    ao[i].absolute = flags == 1, ao[i].error = get_f64(p + 8);
  }
  m->auto_groups = ag, m->n_auto_groups = (uint32_t)r->nag;
  m->auto_outputs = ao, m->n_auto_outputs = (uint32_t)r->nao;
  return DRK_MODFILE_OK;
}

static drk_modfile_result_t read_buckets(const rctx_t *r, drk_modfile_dyn_dim_t *dd, drk_modfile_bucket_t *bb, drk_modfile_dyn_axis_t *aa) {
  const uint8_t *p = r->one[SEC_BUCKETS].p + BUCKETS_HEADER;
  for (size_t i = 0; i < r->nbd; i++, p += DYN_DIM_REC) {
    STR(get32(p), dd[i].name);
    dd[i].length_input = get32(p + 4);
    if (r->buckets_version < 2 && dd[i].length_input) BAD("BUCKETS section version 1: dim %zu: reserved field is not zero", i);
    dd[i].lo = (int64_t)get64(p + 8), dd[i].hi = (int64_t)get64(p + 16);
  }
  for (size_t i = 0; i < r->nbb; i++, p += BUCKET_REC) {
    for (int d = 0; d < DRK_MODFILE_MAX_DYN_DIMS; d++) bb[i].size[d] = (int64_t)get64(p + 8 * d);
    bb[i].arena_size = get64(p + 64), bb[i].first_kernel = get32(p + 72), bb[i].n_kernels = get32(p + 76);
    if (get64(p + 80)) BAD("BUCKETS section: bucket %zu: reserved field is not zero", i);
  }
  for (size_t i = 0; i < r->nba; i++, p += DYN_AXIS_REC) aa[i] = (drk_modfile_dyn_axis_t){get32(p), get32(p + 4), get32(p + 8)};
  return DRK_MODFILE_OK;
}

static drk_modfile_result_t read_module(const void *data, size_t size, const drk_allocator_t *alloc,
                                        drk_modfile_t **out_m, char *err, size_t n, int depth);

/* FALLBACK (optional): the nested module, parsed and validated as a file is; when it shares
 * the weights, this module's are filled in and it is validated again against them. */
static drk_modfile_result_t read_fallback(rctx_t *r, drk_modfile_t *m, const drk_allocator_t *alloc, int depth) {
  const rsec_t *F = &r->one[SEC_FALLBACK];
  if (F->size < 4) BAD("FALLBACK section has %llu bytes, too few for its version", (unsigned long long)F->size);
  if (get32(F->p) != DRK_MODFILE_FALLBACK_VERSION) return DRK_MODFILE_OK; /* a later version: skipped */
  if (depth) BAD("the fallback module has a FALLBACK section of its own");
  if (m->n_buckets) BAD("a module with shape buckets has a FALLBACK section");
  if (F->size < FALLBACK_HEADER) BAD("FALLBACK section has %llu bytes, its header alone is %u", (unsigned long long)F->size, FALLBACK_HEADER);
  uint32_t flags = get32(F->p + 4);
  uint64_t fsz = get64(F->p + 8);
  if (flags & ~FALLBACK_SHARES_WEIGHTS) BAD("FALLBACK section: unknown flags 0x%x", flags);
  if (fsz != F->size - FALLBACK_HEADER) BAD("FALLBACK section: a %llu-byte module in %llu bytes", (unsigned long long)fsz, (unsigned long long)(F->size - FALLBACK_HEADER));
  for (uint32_t b = 16; b < FALLBACK_HEADER; b++)
    if (F->p[b]) BAD("FALLBACK section: reserved header byte %u is not zero", b);
  char ferr[700] = "";
  drk_modfile_t *f = NULL;
  drk_modfile_result_t res = read_module(F->p + FALLBACK_HEADER, (size_t)fsz, alloc, &f, ferr, sizeof ferr, depth + 1);
  if (res == DRK_MODFILE_ERR_NOMEM) {
    set_err(r->err, r->n, "fallback module: %s", ferr);
    return res;
  }
  if (res) BAD("fallback module: %s", ferr);
  /* the module's inputs and outputs are both plans' (their arena offsets aside) */
  bool same = f->n_inputs == m->n_inputs && f->n_outputs == m->n_outputs;
  for (uint32_t i = 0; same && i < m->n_inputs + m->n_outputs; i++) {
    const drk_modfile_tensor_t *a = i < m->n_inputs ? &m->inputs[i] : &m->outputs[i - m->n_inputs];
    const drk_modfile_tensor_t *b = i < m->n_inputs ? &f->inputs[i] : &f->outputs[i - m->n_inputs];
    same = !strcmp(a->name, b->name) && a->dtype == b->dtype && a->rank == b->rank && a->size == b->size &&
           !memcmp(a->dims, b->dims, a->rank * sizeof a->dims[0]);
  }
  if (!same) {
    drk_modfile_free(alloc, f);
    BAD("fallback module: its inputs and outputs are not the module's");
  }
  if (flags & FALLBACK_SHARES_WEIGHTS) {
    if (f->weights_size || f->n_weight_entries || f->weights_file || f->weights_offset != m->weights_offset) {
      drk_modfile_free(alloc, f);
      BAD("fallback module: it shares the weights but has its own, or puts them at another arena offset");
    }
    f->weights = m->weights, f->weights_size = m->weights_size;
    f->weight_entries = m->weight_entries, f->n_weight_entries = m->n_weight_entries;
    f->weights_file = m->weights_file;
    memcpy(f->weights_sha256, m->weights_sha256, 32);
    char verr[400];
    if (drk_modfile_validate(f, verr, sizeof verr)) {
      drk_modfile_free(alloc, f);
      BAD("fallback module with its parent's weights: %s", verr);
    }
  }
  m->fallback = F->p + FALLBACK_HEADER, m->fallback_size = fsz;
  m->fallback_shares_weights = (flags & FALLBACK_SHARES_WEIGHTS) != 0;
  m->fallback_module = f;
  return DRK_MODFILE_OK;
}
#undef BAD
#undef STR

drk_modfile_result_t drk_modfile_read(const void *data, size_t size, const drk_allocator_t *alloc,
                                      drk_modfile_t **out_m, char *err, size_t n) {
  return read_module(data, size, alloc, out_m, err, n, 0);
}

static drk_modfile_result_t read_module(const void *data, size_t size, const drk_allocator_t *alloc,
                                        drk_modfile_t **out_m, char *err, size_t n, int depth) {
  if (!alloc) alloc = &default_alloc;
  rctx_t rc = {.d = data, .size = size, .err = err, .n = n}, *r = &rc;
  drk_modfile_result_t res;
  if ((res = read_header(r)) || (res = read_sections(r)) || (res = read_counts(r))) return res;

  /* One block holds the drk_modfile_t and all its arrays (drk_modfile_free frees it). */
  size_t nk = r->nk, np = r->np, nt = r->nt, ntma = r->ntma, nw = r->nw, ni = r->ni, npk = r->npk, npn = r->npn,
         nag = r->nag, nao = r->nao;
  size_t total = align16(sizeof(rblock_t)) + align16(nk * sizeof(drk_modfile_kernel_t)) + align16(np * sizeof(drk_modfile_param_t)) +
                 align16(nt * sizeof(drk_modfile_tensor_t)) + align16(ntma * sizeof(drk_modfile_tma_t)) +
                 align16(nw * sizeof(drk_modfile_weight_t)) + align16(ni * sizeof(drk_modfile_image_t)) +
                 align16(npk * sizeof(drk_modfile_kernel_prec_t)) + align16(npn * sizeof(drk_modfile_node_prec_t)) +
                 align16(nag * sizeof(drk_modfile_auto_group_t)) + align16(nao * sizeof(drk_modfile_auto_output_t)) +
                 align16(r->nbd * sizeof(drk_modfile_dyn_dim_t)) + align16(r->nbb * sizeof(drk_modfile_bucket_t)) +
                 align16(r->nba * sizeof(drk_modfile_dyn_axis_t));
  uint8_t *blk = alloc->alloc(alloc->user, total, 16);
  if (!blk) {
    set_err(err, n, "out of memory reading the module (%zu bytes)", total);
    return DRK_MODFILE_ERR_NOMEM;
  }
  memset(blk, 0, total);
  rblock_t *rb = (rblock_t *)blk;
  rb->size = total;
  drk_modfile_t *m = &rb->m;
  uint8_t *cur = blk + align16(sizeof(rblock_t));
  drk_modfile_kernel_t *ks = (void *)cur; cur += align16(nk * sizeof *ks);
  drk_modfile_param_t *ps = (void *)cur; cur += align16(np * sizeof *ps);
  drk_modfile_tensor_t *ts = (void *)cur; cur += align16(nt * sizeof *ts);
  drk_modfile_tma_t *tm = (void *)cur; cur += align16(ntma * sizeof *tm);
  drk_modfile_weight_t *ws = (void *)cur; cur += align16(nw * sizeof *ws);
  drk_modfile_image_t *is = (void *)cur; cur += align16(ni * sizeof *is);
  drk_modfile_kernel_prec_t *kp = (void *)cur; cur += align16(npk * sizeof *kp);
  drk_modfile_node_prec_t *np_ = (void *)cur; cur += align16(npn * sizeof *np_);
  drk_modfile_auto_group_t *ag = (void *)cur; cur += align16(nag * sizeof *ag);
  drk_modfile_auto_output_t *ao = (void *)cur; cur += align16(nao * sizeof *ao);
  drk_modfile_dyn_dim_t *dd = (void *)cur; cur += align16(r->nbd * sizeof *dd);
  drk_modfile_bucket_t *bb = (void *)cur; cur += align16(r->nbb * sizeof *bb);
  drk_modfile_dyn_axis_t *aa = (void *)cur;

  m->format_version = r->version;
  if ((res = read_provenance(r, m)) || (res = read_params(r, ps)) || (res = read_kernels(r, ks, ps)) ||
      (res = read_tensors(r, ts)))
    goto fail;
  read_tmas(r, tm);
  if ((res = read_weights(r, ws)) || (res = read_images(r, is))) goto fail;
  m->kernels = ks, m->n_kernels = (uint32_t)nk;
  m->inputs = ts, m->n_inputs = (uint32_t)r->nin;
  m->outputs = ts + r->nin, m->n_outputs = (uint32_t)r->nout;
  m->tmas = tm, m->n_tmas = (uint32_t)ntma;
  m->weight_entries = ws, m->n_weight_entries = (uint32_t)nw;
  m->images = is, m->n_images = (uint32_t)ni;
  m->precision_version = r->prec_version;
  if (r->prec_version == DRK_MODFILE_PRECISION_VERSION) {
    if ((res = read_precision(r, kp, np_))) goto fail;
    m->kernel_precision = kp, m->node_precision = np_, m->n_node_precision = (uint32_t)npn;
  }
  m->auto_version = r->auto_version;
  if (r->auto_version == DRK_MODFILE_AUTO_VERSION && (res = read_auto(r, m, ag, ao))) goto fail;
  if (r->seen[SEC_BUCKETS]) {
    if ((res = read_buckets(r, dd, bb, aa))) goto fail;
    m->dyn_dims = dd, m->n_dyn_dims = (uint32_t)r->nbd;
    m->buckets = bb, m->n_buckets = (uint32_t)r->nbb;
    m->dyn_axes = aa, m->n_dyn_axes = (uint32_t)r->nba;
  }
  char verr[400];
  if (drk_modfile_validate(m, verr, sizeof verr)) {
    set_err(err, n, "inconsistent module: %s", verr);
    res = DRK_MODFILE_ERR_FORMAT;
    goto fail;
  }
  if (r->seen[SEC_FALLBACK] && (res = read_fallback(r, m, alloc, depth))) goto fail;
  *out_m = m;
  return DRK_MODFILE_OK;
fail:
  alloc->free(alloc->user, blk, total);
  return res;
}

bool drk_modfile_weights_blob(const drk_modfile_t *m, void **out_data, size_t *out_size) {
  if (m->weights_size > SIZE_MAX) return false;
  uint8_t *b = malloc(m->weights_size ? (size_t)m->weights_size : 1);
  if (!b) return false;
  if (m->weights) memcpy(b, m->weights, (size_t)m->weights_size);
  else {
    memset(b, 0, (size_t)m->weights_size);
    for (uint32_t j = 0; j < m->n_weight_entries; j++) {
      const drk_modfile_weight_t *w = &m->weight_entries[j];
      if (w->data && w->data_size) memcpy(b + w->offset, w->data, (size_t)w->data_size);
    }
  }
  *out_data = b;
  *out_size = (size_t)m->weights_size;
  return true;
}

void drk_modfile_free(const drk_allocator_t *alloc, drk_modfile_t *m) {
  if (!m) return;
  if (!alloc) alloc = &default_alloc;
  drk_modfile_free(alloc, m->fallback_module);
  rblock_t *rb = (rblock_t *)((uint8_t *)m - offsetof(rblock_t, m));
  alloc->free(alloc->user, rb, rb->size);
}

uint32_t drk_modfile_user_inputs(const drk_modfile_t *m) {
  uint32_t n = m->n_buckets ? m->n_inputs / m->n_buckets : m->n_inputs;
  for (uint32_t d = 0; m->n_buckets && d < m->n_dyn_dims; d++) n -= m->dyn_dims[d].length_input != 0;
  return n;
}
