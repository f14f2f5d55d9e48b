/* Host tensors: the interpreter's values, model inputs/outputs read from and written to
 * files, and the oracle side of every GPU check.
 *
 * Ownership: drk_tensor_alloc()/drk_tensor_copy() give the caller a tensor whose data is
 * malloc'ed; drk_tensor_free() releases it. A tensor may also borrow data (owned == false),
 * e.g. a graph constant; drk_tensor_free() then leaves the data alone. */
#ifndef DRK_TENSOR_H
#define DRK_TENSOR_H

#include "graph.h"

#define DRK_MAX_RANK 8

typedef struct drk_tensor {
  drk_dtype_t dtype;
  int rank;
  int64_t dims[DRK_MAX_RANK];
  void *data; /* row-major, packed as dtype (i4/u4: two per byte, low nibble first) */
  size_t nbytes;
  bool owned;
} drk_tensor_t;

int64_t drk_tensor_numel(const drk_tensor_t *t);
/* Allocates zeroed storage; returns false (and leaves *t empty) when rank is out of range or
 * the size overflows or memory runs out. */
bool drk_tensor_alloc(drk_tensor_t *t, drk_dtype_t dtype, int rank, const int64_t *dims);
void drk_tensor_free(drk_tensor_t *t);
bool drk_tensor_copy(drk_tensor_t *dst, const drk_tensor_t *src);
/* A borrowed view of a graph constant (static shape required). */
bool drk_tensor_from_const(drk_tensor_t *t, const drk_value_t *v);

/* Element access through f64 / i64 (conversions as ONNX Cast does; floats to ints truncate). */
double drk_tensor_get_f64(const drk_tensor_t *t, int64_t i);
int64_t drk_tensor_get_i64(const drk_tensor_t *t, int64_t i);
void drk_tensor_set_f64(drk_tensor_t *t, int64_t i, double v);
void drk_tensor_set_i64(drk_tensor_t *t, int64_t i, int64_t v);

/* Scalar conversions (round to nearest even; f8: saturating to max finite for e4m3fn as
 * ONNX's default `saturate=1`, NaN preserved). */
uint16_t drk_f32_to_f16(float f);
/* dst[i] = drk_f32_to_f16(src[i]) for n floats (src unaligned is fine), with F16C where the
 * CPU has it; saturate: finite values beyond f16's range give +-65504 instead of infinity.
 * The same bits as the scalar form, whatever the CPU. */
void drk_f32_to_f16_n(const void *src, uint16_t *dst, size_t n, bool saturate);
float drk_f16_to_f32(uint16_t h);
uint16_t drk_f32_to_bf16(float f);
/* The bits of f32 u rounded to tf32 (10 mantissa bits) as cvt.rna.tf32.f32 does: to nearest,
 * ties away from zero; infinities and NaN unchanged. */
uint32_t drk_tf32_round_bits(uint32_t u);
float drk_bf16_to_f32(uint16_t h);
uint8_t drk_f32_to_f8e4m3(float f, bool saturate);
float drk_f8e4m3_to_f32(uint8_t b);
uint8_t drk_f32_to_f8e5m2(float f, bool saturate);
float drk_f8e5m2_to_f32(uint8_t b);

/* f64 -> i64 as the compiler and interpreter convert: truncation toward zero, saturating at
 * the i64 range, NaN -> 0 (a plain C cast is undefined behaviour there). */
int64_t drk_f64_to_i64_sat(double v);

/* ‖a − b‖₂ / ‖b‖₂ over all elements (b is the reference); returns INFINITY on shape or
 * element-count mismatch and NaN if any element of a is NaN where b is not. */
double drk_tensor_rel_error(const drk_tensor_t *a, const drk_tensor_t *b);

#endif
