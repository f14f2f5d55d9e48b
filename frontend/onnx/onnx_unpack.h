/* Unpacking an ONNX ModelProto with its big weights copied on every core (onnx_unpack.c).
 *
 * Guarantees: the same message onnx__model_proto__unpack(NULL, size, data) gives (NULL where
 * it gives NULL), freed by onnx__model_proto__free_unpacked(m, NULL); the main graph's
 * initializers' raw_data of 64 KiB and more are copied by several threads instead of one. */
#ifndef DRK_ONNX_UNPACK_H
#define DRK_ONNX_UNPACK_H

#include <stddef.h>
#include <stdint.h>

#include "onnx/onnx.pb-c.h"

Onnx__ModelProto *drk_onnx_unpack_model(const uint8_t *data, size_t size);

#endif
