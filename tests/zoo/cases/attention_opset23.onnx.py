#!/usr/bin/env python3
# The dynamo exporter writes torch's scaled_dot_product_attention as ONNX Attention from opset 23
# on (and RMSNorm as RMSNormalization): drkc read opsets up to 21 only ("unsupported opset 23").
# Attention is imported as the primitive ops its definition spells out. Three nodes: grouped-query
# heads (4 query, 2 key/value) with a boolean padding mask and the default scale; a causal one
# with a float mask and softcap; a plain one with an explicit scale. Expected outputs from
# onnx.reference.
# CHECK-DATA: 1e-5
# CHECK-CPU:
# RUN:
# RUN: --target=sm_90a --precision=fp16 --fusion-aggressiveness=3
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from case_data import write_test_data  # noqa: E402  (beside this script)

out = sys.argv[1]
B, S, D = 2, 8, 16
f = TensorProto.FLOAT
inputs = [helper.make_tensor_value_info("q", f, [B, 4, S, D]), helper.make_tensor_value_info("k", f, [B, 2, S, D]),
          helper.make_tensor_value_info("v", f, [B, 2, S, D]), helper.make_tensor_value_info("m", TensorProto.BOOL, [B, 1, 1, S]),
          helper.make_tensor_value_info("fm", f, [1, 1, S, S])]
rng = np.random.default_rng(7)
nodes = [
    helper.make_node("Attention", ["q", "k", "v", "m"], ["y_gqa"], name="gqa_bool_mask"),
    helper.make_node("Slice", ["q", "s0", "s2", "ax1"], ["q2"], name="q_heads"),
    helper.make_node("Attention", ["q2", "k", "v", "fm"], ["y_causal"], name="causal_softcap", is_causal=1, softcap=2.5),
    helper.make_node("Attention", ["q2", "k", "v"], ["y_plain"], name="plain", scale=0.3),
]
inits = [numpy_helper.from_array(np.array([0], np.int64), "s0"), numpy_helper.from_array(np.array([2], np.int64), "s2"),
         numpy_helper.from_array(np.array([1], np.int64), "ax1")]
outputs = [helper.make_tensor_value_info("y_gqa", f, [B, 4, S, D]), helper.make_tensor_value_info("y_causal", f, [B, 2, S, D]),
           helper.make_tensor_value_info("y_plain", f, [B, 2, S, D])]
g = helper.make_graph(nodes, "attention23", inputs, outputs, inits,
                      value_info=[helper.make_tensor_value_info("q2", f, [B, 2, S, D])])
model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)], ir_version=10)
onnx.checker.check_model(model)
path = os.path.join(out, "attention_opset23.onnx")
onnx.save(model, path)
feeds = {"q": rng.standard_normal((B, 4, S, D), np.float32), "k": rng.standard_normal((B, 2, S, D), np.float32),
         "v": rng.standard_normal((B, 2, S, D), np.float32), "m": np.ones((B, 1, 1, S), bool),
         "fm": (rng.standard_normal((1, 1, S, S)) * 0.5).astype(np.float32)}
feeds["m"][1, ..., S - 3:] = False  # the second sequence is padded
res = ReferenceEvaluator(model).run(None, feeds)
write_test_data(out, ["q", "k", "v", "m", "fm"], feeds, res, np.float32)
