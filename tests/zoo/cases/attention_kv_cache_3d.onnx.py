#!/usr/bin/env python3
# ONNX Attention forms beyond 4-D prefill (opset 24), each imported as primitive ops: 3-D Q/K/V
# with q_num_heads/kv_num_heads and grouped-query heads (6 / 2) over a KV cache (past_key /
# past_value -> present_key / present_value), causal with the past-length offset, a float
# mask shorter than the total length (padded with -inf) and qk_matmul_output in mode 0 (the
# scores); a 4-D decode step with nonpad_kv_seqlen (per-batch padding and causal offset) and
# the probabilities (mode 3); a softcapped one with a float mask in softmax_precision f32 with
# mode 2 (after softcap and mask; finite here, as the comparison needs).
# Expected outputs from onnx.reference.
# CHECK-DATA: 1e-5
# CHECK-CPU:
# RUN:
# RUN: --target=sm_90a --precision=fp16 --fusion-aggressiveness=3
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from case_data import write_test_data  # noqa: E402  (beside this script)

out = sys.argv[1]
B, S, P, D, HQ, HK = 2, 4, 3, 8, 6, 2
f = TensorProto.FLOAT
vi = helper.make_tensor_value_info
inputs = [vi("q", f, [B, S, HQ * D]), vi("k", f, [B, S, HK * D]), vi("v", f, [B, S, HK * D]),
          vi("pk", f, [B, HK, P, D]), vi("pv", f, [B, HK, P, D]), vi("m", f, [B, 1, S, S + P - 1]),
          vi("q4", f, [B, HQ, 1, D]), vi("k4", f, [B, HK, 7, D]), vi("v4", f, [B, HK, 7, D]),
          vi("n", TensorProto.INT64, [B]), vi("m2", f, [B, 1, 1, 7])]
nodes = [
    helper.make_node("Attention", ["q", "k", "v", "m", "pk", "pv"], ["y3", "present_k", "present_v", "qk3"],
                     name="gqa_3d_cache", q_num_heads=HQ, kv_num_heads=HK, is_causal=1, qk_matmul_output_mode=0),
    helper.make_node("Attention", ["q4", "k4", "v4", "", "", "", "n"], ["y4", "", "", "p4"], name="decode_nonpad",
                     is_causal=1, qk_matmul_output_mode=3),
    helper.make_node("Attention", ["q4", "k4", "v4", "m2"], ["y5", "", "", "qk5"], name="softcap_f32", softcap=3.0,
                     softmax_precision=1, qk_matmul_output_mode=2, scale=0.2),
]
outputs = [vi("y3", f, [B, S, HQ * D]), vi("present_k", f, [B, HK, S + P, D]), vi("present_v", f, [B, HK, S + P, D]),
           vi("qk3", f, [B, HQ, S, S + P]), vi("y4", f, [B, HQ, 1, D]), vi("p4", f, [B, HQ, 1, 7]),
           vi("y5", f, [B, HQ, 1, D]), vi("qk5", f, [B, HQ, 1, 7])]
g = helper.make_graph(nodes, "attention24", inputs, outputs)
model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 24)], ir_version=12)
onnx.checker.check_model(model)
onnx.save(model, os.path.join(out, "attention_kv_cache_3d.onnx"))
rng = np.random.default_rng(11)
feeds = {}
for x in inputs:
    shape = [d.dim_value for d in x.type.tensor_type.shape.dim]
    feeds[x.name] = rng.standard_normal(shape).astype(np.float32)
feeds["n"] = np.array([7, 4], np.int64)
feeds["m"][1, :, 0, :] = -np.inf  # one fully masked row: zeros
res = ReferenceEvaluator(model).run(None, feeds)
write_test_data(out, [x.name for x in inputs], feeds, res)
