#!/usr/bin/env python3
# ONNX RotaryEmbedding (opset 23) imported as Slice/Mul/Sub/Add/Concat (the rotary chain the
# fusion already knows from LLaMA exports): 4-D X [B, H, S, D] with position_ids into a
# [max_pos, D/2] cache; 3-D X [B, S, H*D] with num_heads, interleaved pairs and a partial
# rotary_embedding_dim; 4-D with per-token caches [B, S, D/2] and no position_ids.
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
B, H, S, D, MAXP, R = 2, 3, 5, 8, 16, 4
f = TensorProto.FLOAT
vi = helper.make_tensor_value_info
inputs = [vi("x", f, [B, H, S, D]), vi("pos", TensorProto.INT64, [B, S]), vi("cos", f, [MAXP, D // 2]),
          vi("sin", f, [MAXP, D // 2]), vi("x3", f, [B, S, H * D]), vi("cos_r", f, [MAXP, R // 2]),
          vi("sin_r", f, [MAXP, R // 2]), vi("cos_t", f, [B, S, D // 2]), vi("sin_t", f, [B, S, D // 2])]
nodes = [
    helper.make_node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["y1"], name="rope_pos"),
    helper.make_node("RotaryEmbedding", ["x3", "cos_r", "sin_r", "pos"], ["y2"], name="rope_3d_interleaved_partial",
                     num_heads=H, interleaved=1, rotary_embedding_dim=R),
    helper.make_node("RotaryEmbedding", ["x", "cos_t", "sin_t"], ["y3"], name="rope_token_cache"),
]
outputs = [vi("y1", f, [B, H, S, D]), vi("y2", f, [B, S, H * D]), vi("y3", f, [B, H, S, D])]
model = helper.make_model(helper.make_graph(nodes, "rope23", inputs, outputs), opset_imports=[helper.make_opsetid("", 23)], ir_version=11)
onnx.checker.check_model(model)
onnx.save(model, os.path.join(out, "rotary_embedding_opset23.onnx"))
rng = np.random.default_rng(5)
feeds = {}
for x in inputs:
    shape = [d.dim_value for d in x.type.tensor_type.shape.dim]
    feeds[x.name] = rng.standard_normal(shape).astype(np.float32)
feeds["pos"] = rng.integers(0, MAXP, (B, S)).astype(np.int64)
res = ReferenceEvaluator(model).run(None, feeds)
write_test_data(out, [x.name for x in inputs], feeds, res)
