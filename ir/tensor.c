#include "tensor.h"

#include <math.h>
#include <stdint.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <stdlib.h>
#include <string.h>

int64_t drk_tensor_numel(const drk_tensor_t *t) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++) n *= t->dims[i];
  return n;
}

bool drk_tensor_alloc(drk_tensor_t *t, drk_dtype_t dtype, int rank, const int64_t *dims) {
  memset(t, 0, sizeof *t);
  if (rank < 0 || rank > DRK_MAX_RANK) return false;
  int64_t n = 1;
  for (int i = 0; i < rank; i++) {
    if (!drk_numel_mul(&n, dims[i])) return false; /* negative or past DRK_MAX_NUMEL */
  }
  size_t nb = drk_dtype_nbytes(dtype, n);
  void *p = calloc(1, nb ? nb : 1);
  if (!p) return false;
  t->dtype = dtype;
  t->rank = rank;
  for (int i = 0; i < rank; i++) t->dims[i] = dims[i];
  t->data = p;
  t->nbytes = nb;
  t->owned = true;
  return true;
}

void drk_tensor_free(drk_tensor_t *t) {
  if (t->owned) free(t->data);
  memset(t, 0, sizeof *t);
}

bool drk_tensor_copy(drk_tensor_t *dst, const drk_tensor_t *src) {
  if (!drk_tensor_alloc(dst, src->dtype, src->rank, src->dims)) return false;
  if (src->nbytes) memcpy(dst->data, src->data, src->nbytes);
  return true;
}

bool drk_tensor_from_const(drk_tensor_t *t, const drk_value_t *v) {
  memset(t, 0, sizeof *t);
  if (!drk_shape_is_static(&v->shape) || v->shape.rank > DRK_MAX_RANK) return false;
  t->dtype = v->dtype;
  t->rank = v->shape.rank;
  for (int i = 0; i < t->rank; i++) t->dims[i] = v->shape.dims[i].size;
  /* an empty constant (an ONNX "dims: 0" tensor with empty raw_data, e.g. ConstantOfShape's
   * shape [] for a scalar) may have no data at all */
  static const uint64_t none;
  if (!v->data && drk_dtype_nbytes(t->dtype, drk_tensor_numel(t)) > 0) return false;
  t->data = v->data ? (void *)v->data : (void *)&none;
  t->nbytes = v->nbytes;
  t->owned = false;
  return drk_dtype_nbytes(t->dtype, drk_tensor_numel(t)) <= v->nbytes;
}

/* ---- scalar conversions ---- */
static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

uint16_t drk_f32_to_bf16(float f) {
  uint32_t u = f2u(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fff + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}
float drk_bf16_to_f32(uint16_t h) { return u2f((uint32_t)h << 16); }

uint32_t drk_tf32_round_bits(uint32_t u) {
  if ((u & 0x7f800000u) == 0x7f800000u) return u;
  return (u + 0x1000u) & 0xffffe000u; /* sign-magnitude: half an ulp away from zero, then cut */
}

uint16_t drk_f32_to_f16(float f) {
  uint32_t u = f2u(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to inf */
  if (a < 0x38800000u) { /* subnormal or zero in f16 */
    float v = u2f(a) * 16777216.0f; /* scale by 2^24: f16 subnormal unit */
    uint32_t m = (uint32_t)nearbyintf(v);
    return (uint16_t)(sign | m);
  }
  uint32_t e = ((a >> 23) - 112) << 10;
  uint32_t m = a & 0x7fffffu;
  uint32_t r = e | (m >> 13);
  uint32_t rem = m & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1))) r++;
  return (uint16_t)(sign | r);
}

static uint16_t f16_sat(float f, bool saturate) {
  uint16_t h = drk_f32_to_f16(f);
  if (saturate && (h & 0x7fff) == 0x7c00 && isfinite(f)) h = (uint16_t)((h & 0x8000) | 0x7bff);
  return h;
}

#if defined(__x86_64__)
/* 8 lanes at a time where every |x| < 65520 (ordered: no NaN), the range where the hardware's
 * round-to-nearest-even equals drk_f32_to_f16; other groups go through the scalar form. */
__attribute__((target("avx,f16c"))) static size_t f16_n_f16c(const float *src, uint16_t *dst, size_t n, bool saturate) {
  const __m256 lim = _mm256_set1_ps(65520.0f), absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 x = _mm256_loadu_ps(src + i);
    if (_mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(x, absmask), lim, _CMP_LT_OQ)) == 0xff) {
      _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    } else {
      for (size_t k = i; k < i + 8; k++) dst[k] = f16_sat(src[k], saturate);
    }
  }
  return i;
}
#endif

void drk_f32_to_f16_n(const void *src, uint16_t *dst, size_t n, bool saturate) {
  const unsigned char *s = src;
  size_t i = 0;
#if defined(__x86_64__)
  if (((uintptr_t)s & 3) == 0 && __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx"))
    i = f16_n_f16c((const float *)s, dst, n, saturate);
#endif
  for (; i < n; i++) {
    float f;
    memcpy(&f, s + 4 * i, 4);
    dst[i] = f16_sat(f, saturate);
  }
}

float drk_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e == 0) {
    float v = (float)m / 16777216.0f;
    return sign ? -v : v;
  }
  if (e == 31) return u2f(sign | 0x7f800000u | (m << 13));
  return u2f(sign | ((e + 112) << 23) | (m << 13));
}

/* Generic small-float encoder: ebits exponent bits, mbits mantissa bits, bias, max finite. */
static uint8_t encode_small(float f, int mbits, int bias, float maxv, uint8_t nan, uint8_t inf_or_max,
                            bool saturate, bool has_inf) {
  uint8_t sign = signbit(f) ? 0x80 : 0;
  if (isnan(f)) return nan;
  float a = fabsf(f);
  if (isinf(a)) {
    if (saturate) return (uint8_t)(sign | inf_or_max);
    return has_inf ? (uint8_t)(sign | (inf_or_max + 1)) : nan;
  }
  /* Round to nearest even on the target grid. */
  int e;
  frexpf(a, &e); /* a = m * 2^e, m in [0.5,1) */
  int exp = e - 1; /* a = 1.x * 2^exp */
  int minexp = 1 - bias;
  if (exp < minexp) exp = minexp;
  float quantum = ldexpf(1.0f, exp - mbits);
  float q = nearbyintf(a / quantum) * quantum;
  if (q > maxv) {
    if (saturate) return (uint8_t)(sign | inf_or_max);
    return has_inf ? (uint8_t)(sign | (inf_or_max + 1)) : nan;
  }
  if (q == 0) return sign;
  frexpf(q, &e);
  exp = e - 1;
  uint32_t bits;
  if (exp < minexp) { /* subnormal */
    bits = (uint32_t)(q / ldexpf(1.0f, minexp - mbits));
  } else {
    uint32_t mant = (uint32_t)((q / ldexpf(1.0f, exp) - 1.0f) * (float)(1 << mbits) + 0.5f);
    bits = ((uint32_t)(exp + bias) << mbits) | mant;
  }
  return (uint8_t)(sign | bits);
}

uint8_t drk_f32_to_f8e4m3(float f, bool saturate) {
  /* e4m3fn: no inf, NaN = 0x7f, max 448 (0x7e). */
  return encode_small(f, 3, 7, 448.0f, (uint8_t)(signbit(f) ? 0xff : 0x7f), 0x7e, saturate, false);
}

float drk_f8e4m3_to_f32(uint8_t b) {
  int s = b >> 7, e = (b >> 3) & 0xf, m = b & 7;
  float v;
  if (e == 15 && m == 7) return s ? -NAN : NAN;
  if (e == 0) v = ldexpf((float)m, -9);
  else v = ldexpf(1.0f + (float)m / 8.0f, e - 7);
  return s ? -v : v;
}

uint8_t drk_f32_to_f8e5m2(float f, bool saturate) {
  /* e5m2: inf 0x7c, NaN 0x7e/0x7f, max 57344 (0x7b). */
  if (isinf(f) && !saturate) return signbit(f) ? 0xfc : 0x7c;
  return encode_small(f, 2, 15, 57344.0f, 0x7f, 0x7b, saturate, true);
}

float drk_f8e5m2_to_f32(uint8_t b) {
  int s = b >> 7, e = (b >> 2) & 0x1f, m = b & 3;
  float v;
  if (e == 31) v = m ? NAN : INFINITY;
  else if (e == 0) v = ldexpf((float)m, -16);
  else v = ldexpf(1.0f + (float)m / 4.0f, e - 15);
  return s ? -v : v;
}

int64_t drk_f64_to_i64_sat(double v) {
  if (isnan(v)) return 0;
  if (v >= 9.2e18) return INT64_MAX;
  if (v <= -9.2e18) return INT64_MIN;
  return (int64_t)v;
}

/* ---- element access ---- */
static int nibble(const uint8_t *p, int64_t i) { return (p[i / 2] >> ((i & 1) * 4)) & 0xf; }

double drk_tensor_get_f64(const drk_tensor_t *t, int64_t i) {
  const void *d = t->data;
  switch (t->dtype) {
    case DRK_DT_F64: return ((const double *)d)[i];
    case DRK_DT_F32: return ((const float *)d)[i];
    case DRK_DT_F16: return drk_f16_to_f32(((const uint16_t *)d)[i]);
    case DRK_DT_BF16: return drk_bf16_to_f32(((const uint16_t *)d)[i]);
    case DRK_DT_F8E4M3: return drk_f8e4m3_to_f32(((const uint8_t *)d)[i]);
    case DRK_DT_F8E5M2: return drk_f8e5m2_to_f32(((const uint8_t *)d)[i]);
    default: return (double)drk_tensor_get_i64(t, i);
  }
}

int64_t drk_tensor_get_i64(const drk_tensor_t *t, int64_t i) {
  const void *d = t->data;
  switch (t->dtype) {
    case DRK_DT_I64: return ((const int64_t *)d)[i];
    case DRK_DT_I32: return ((const int32_t *)d)[i];
    case DRK_DT_I16: return ((const int16_t *)d)[i];
    case DRK_DT_I8: return ((const int8_t *)d)[i];
    case DRK_DT_U8: return ((const uint8_t *)d)[i];
    case DRK_DT_BOOL: return ((const uint8_t *)d)[i] != 0;
    case DRK_DT_U4: return nibble(d, i);
    case DRK_DT_I4: { int v = nibble(d, i); return v >= 8 ? v - 16 : v; }
    default: return drk_f64_to_i64_sat(drk_tensor_get_f64(t, i));
  }
}

static void set_nibble(uint8_t *p, int64_t i, int v) {
  int sh = (int)(i & 1) * 4;
  p[i / 2] = (uint8_t)((p[i / 2] & ~(0xf << sh)) | ((v & 0xf) << sh));
}

void drk_tensor_set_f64(drk_tensor_t *t, int64_t i, double v) {
  void *d = t->data;
  switch (t->dtype) {
    case DRK_DT_F64: ((double *)d)[i] = v; return;
    case DRK_DT_F32: ((float *)d)[i] = (float)v; return;
    case DRK_DT_F16: ((uint16_t *)d)[i] = drk_f32_to_f16((float)v); return;
    case DRK_DT_BF16: ((uint16_t *)d)[i] = drk_f32_to_bf16((float)v); return;
    case DRK_DT_F8E4M3: ((uint8_t *)d)[i] = drk_f32_to_f8e4m3((float)v, true); return;
    case DRK_DT_F8E5M2: ((uint8_t *)d)[i] = drk_f32_to_f8e5m2((float)v, true); return;
    case DRK_DT_BOOL: ((uint8_t *)d)[i] = v != 0; return;
    default: drk_tensor_set_i64(t, i, drk_f64_to_i64_sat(v));
  }
}

void drk_tensor_set_i64(drk_tensor_t *t, int64_t i, int64_t v) {
  void *d = t->data;
  switch (t->dtype) {
    case DRK_DT_I64: ((int64_t *)d)[i] = v; return;
    case DRK_DT_I32: ((int32_t *)d)[i] = (int32_t)v; return;
    case DRK_DT_I16: ((int16_t *)d)[i] = (int16_t)v; return;
    case DRK_DT_I8: ((int8_t *)d)[i] = (int8_t)v; return;
    case DRK_DT_U8: ((uint8_t *)d)[i] = (uint8_t)v; return;
    case DRK_DT_BOOL: ((uint8_t *)d)[i] = v != 0; return;
    case DRK_DT_U4: case DRK_DT_I4: set_nibble(d, i, (int)v); return;
    default: drk_tensor_set_f64(t, i, (double)v); return;
  }
}

double drk_tensor_rel_error(const drk_tensor_t *a, const drk_tensor_t *b) {
  if (a->rank != b->rank) return INFINITY;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return INFINITY;
  int64_t n = drk_tensor_numel(b);
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; i++) {
    double x = drk_tensor_get_f64(a, i), y = drk_tensor_get_f64(b, i);
    if (isnan(y)) {
      if (!isnan(x)) return NAN;
      continue;
    }
    if (isnan(x)) return NAN;
    if (isinf(y) || isinf(x)) {
      if (x != y) return INFINITY;
      continue;
    }
    num += (x - y) * (x - y);
    den += y * y;
  }
  if (den == 0) return num == 0 ? 0 : sqrt(num);
  return sqrt(num / den);
}
