/* MatMulNBits (W4A16, ir/graph_ops.def): the shape rules every layer checks the same way, and
 * the two layouts of its 4-bit codes. Shared by the interpreter, shape inference, the quantize
 * pass (passes/quantize.c) and the GPU lowering (lower/lower_w4.c). */
#ifndef DRK_IR_W4_H
#define DRK_IR_W4_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "graph.h"

/* packing 1 (the GPU's): k tiles of DRK_W4_BK codes, DRK_W4_H 16-bit words per column and
 * tile; nibble t (bits 4t .. 4t+3) of word j holds k = t * DRK_W4_H + j of the tile. A kernel
 * reads a tile's words of BN columns as one [16, BN] i16 tile (32 contiguous bytes per column)
 * and takes 4 planes of [16, BN] codes out of it, each the B operand of a k16 mma. */
#define DRK_W4_BK 64
#define DRK_W4_H 16

typedef struct drk_w4_shape {
  int64_t K, N, G, groups; /* groups = K / G */
  int packing;             /* 0 or 1 */
  bool has_zp;
} drk_w4_shape_t;

/* Checks node n (a MatMulNBits with static shapes on its B, scales and zero points, and A's
 * last dim static) and fills *out. On failure writes a message (without the op name) into
 * msg and returns false. */
bool drk_w4_shape(const drk_node_t *n, drk_w4_shape_t *out, char *msg, size_t cap);

/* The code of element (k, n) of B's data (its packing, shape s). */
static inline unsigned drk_w4_code(const void *b, const drk_w4_shape_t *s, int64_t k, int64_t n) {
  if (s->packing == 0) {
    uint8_t byte = ((const uint8_t *)b)[n * (s->K / 2) + k / 2];
    return (k & 1) ? byte >> 4 : byte & 15u;
  }
  int64_t kt = k / DRK_W4_BK, kk = k % DRK_W4_BK;
  uint16_t w = ((const uint16_t *)b)[(kt * s->N + n) * DRK_W4_H + kk % DRK_W4_H];
  return (w >> (4 * (kk / DRK_W4_H))) & 15u;
}

/* Repacks packing-0 codes (u8 [N, K/2]) into packing 1 (i16 [K/64, N, 16], out: K*N/2 bytes).
 * Requires K % DRK_W4_BK == 0. */
void drk_w4_pack_gpu(const uint8_t *src, int64_t K, int64_t N, uint16_t *out);

#endif
