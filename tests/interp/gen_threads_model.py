#!/usr/bin/env python3
"""Writes a .drkg that takes every threaded path of the reference interpreter: Conv with one
(image, group) per task (batch 8, groups 1 and 4) and with the GEMM split over the pool
(batch 1), MatMul with a shared B (batches folded into one GEMM), batched MatMul (one batch a
task), Gemm with transB, Softmax, LayerNormalization, BatchNormalization, Transpose, elementwise
ops with broadcasting, ReduceSum and ReduceLogSumExp. Deterministic weights (no numpy needed). Usage: gen_threads_model.py OUT"""
import sys


def vals(n, seed):
    x, out = seed, []
    for _ in range(n):
        x = (x * 1103515245 + 12345) % (1 << 31)
        out.append("%.6f" % ((x / float(1 << 31) - 0.5) * 0.5))
    return "[" + ", ".join(out) + "]"


g = f"""graph @threads(%x: f32[8, 16, 20, 20], %x1: f32[1, 16, 40, 40], %a: f32[64, 300]) -> (%o1, %o2, %o3, %o4, %o5, %o6) {{
  %w1: f32[32, 16, 3, 3] = const {vals(32 * 16 * 9, 1)}
  %b1: f32[32] = const {vals(32, 2)}
  %c1: f32[8, 32, 20, 20] = Conv(%x, %w1, %b1) {{pads = [1, 1, 1, 1]}}
  %r1: f32[8, 32, 20, 20] = Relu(%c1)
  %w2: f32[32, 8, 3, 3] = const {vals(32 * 8 * 9, 3)}
  %c2: f32[8, 32, 20, 20] = Conv(%r1, %w2) {{pads = [1, 1, 1, 1], group = 4}}
  %sc: f32[32] = const {vals(32, 4)}
  %bb: f32[32] = const {vals(32, 5)}
  %mu: f32[32] = const {vals(32, 6)}
  %va: f32[32] = const [{", ".join(["1.5"] * 32)}]
  %bn: f32[8, 32, 20, 20] = BatchNormalization(%c2, %sc, %bb, %mu, %va) {{epsilon = 1e-5}}
  %sh: i64[3] = const [8, 32, 400]
  %rs: f32[8, 32, 400] = Reshape(%bn, %sh)
  %wm: f32[400, 64] = const {vals(400 * 64, 7)}
  %m1: f32[8, 32, 64] = MatMul(%rs, %wm)
  %tr: f32[8, 64, 32] = Transpose(%m1) {{perm = [0, 2, 1]}}
  %m2: f32[8, 32, 32] = MatMul(%m1, %tr)
  %o1: f32[8, 32, 32] = Softmax(%m2) {{axis = -1}}
  %ls: f32[64] = const {vals(64, 8)}
  %lb: f32[64] = const {vals(64, 9)}
  %o2: f32[8, 32, 64] = LayerNormalization(%m1, %ls, %lb) {{axis = -1, epsilon = 1e-5}}
  %c3: f32[1, 32, 40, 40] = Conv(%x1, %w1, %b1) {{pads = [1, 1, 1, 1]}}
  %o3: f32[1, 32, 40, 40] = Sigmoid(%c3)
  %wg: f32[200, 300] = const {vals(200 * 300, 10)}
  %bg: f32[200] = const {vals(200, 11)}
  %o4: f32[64, 200] = Gemm(%a, %wg, %bg) {{transB = 1}}
  %rax: i64[1] = const [1]
  %o5: f32[8, 1, 64] = ReduceSum(%m1, %rax)
  %o6: f32[8, 32, 1, 1] = ReduceLogSumExp(%bn) {{axes = [2, 3]}}
  return %o1, %o2, %o3, %o4, %o5, %o6
}}
"""
open(sys.argv[1], "w").write(g)
