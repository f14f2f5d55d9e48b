/* Tensor files: ONNX TensorProto (.pb, as in ONNX test data test_data_set_N/input_M.pb) and
 * NumPy .npy (format versions 1-3, little-endian, C order).
 *
 * Ownership: a tensor read by these functions owns its data (malloc'ed, owned == true);
 * release it with drk_tensor_free(). On failure *out is untouched and an error naming the
 * file was reported through d. Writers never keep the tensor.
 *
 * dtypes: .pb supports every drk dtype (raw_data or typed fields on read; raw_data on write).
 * .npy supports f64 f32 f16 i64 i32 i16 i8 u8 bool ('<f8' '<f4' '<f2' '<i8' '<i4' '<i2' '|i1'
 * '|u1' '|b1'); bf16, f8 and 4-bit types have no .npy form and are an error. Ranks above
 * DRK_MAX_RANK are an error. */
#ifndef DRK_TENSOR_IO_H
#define DRK_TENSOR_IO_H

#include "ir/tensor.h"

/* Reads a TensorProto file. out_name (may be NULL) receives the tensor's name, malloc'ed
 * (caller frees; "" when the file has none). */
bool drk_tensor_read_pb(const char *path, drk_tensor_t *out, char **out_name, drk_diag_t *d);
/* The same for a tensor the caller expects to be of dtype `expect`: ONNX 1.12's test data
 * (libonnx-testdata) stores bfloat16 tensors as UINT16 bit patterns; such a file is read as
 * bf16 when `expect` is DRK_DT_BF16 (drkc has no u16 type, so nothing else is lost). */
bool drk_tensor_read_pb_expect(const char *path, drk_dtype_t expect, drk_tensor_t *out, drk_diag_t *d);
/* The same, from memory; `name` is used in messages. */
bool drk_tensor_read_pb_buffer(const void *data, size_t size, const char *name, drk_tensor_t *out,
                               char **out_name, drk_diag_t *d);
/* Writes t as a TensorProto with raw_data; tensor_name may be NULL. */
bool drk_tensor_write_pb(const char *path, const drk_tensor_t *t, const char *tensor_name,
                         drk_diag_t *d);

bool drk_tensor_read_npy(const char *path, drk_tensor_t *out, drk_diag_t *d);
/* The same, from memory (size bytes, only read during the call); `name` is used in messages. */
bool drk_tensor_read_npy_buffer(const void *data, size_t size, const char *name, drk_tensor_t *out, drk_diag_t *d);
bool drk_tensor_write_npy(const char *path, const drk_tensor_t *t, drk_diag_t *d);

#endif
