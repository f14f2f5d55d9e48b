#!/usr/bin/env python3
# RMSNormalization (opset 23) and Swish (opset 24), as the dynamo exporter writes torch's RMSNorm
# and SiLU-like activations at those opsets: imported as their defining primitive ops. Three
# RMSNormalizations: the last axis; axis 1 of a rank-3 input (two normalized axes); an f16 input
# normalized in f32 (stash_type 1) and cast back. Swish with alpha 1.5. Expected outputs from
# onnx.reference (f16 output: tolerance of f16).
# CHECK-DATA: 1e-3
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
f, h = TensorProto.FLOAT, TensorProto.FLOAT16
rng = np.random.default_rng(3)
inputs = [helper.make_tensor_value_info("x", f, [2, 6, 32]), helper.make_tensor_value_info("xh", h, [2, 6, 32])]
inits = [numpy_helper.from_array((1 + 0.1 * rng.standard_normal(32)).astype(np.float32), "w"),
         numpy_helper.from_array((1 + 0.1 * rng.standard_normal((6, 32))).astype(np.float32), "w2"),
         numpy_helper.from_array((1 + 0.1 * rng.standard_normal(32)).astype(np.float16), "wh")]
nodes = [helper.make_node("RMSNormalization", ["x", "w"], ["r1"], name="rms_last", epsilon=1e-6),
         helper.make_node("RMSNormalization", ["x", "w2"], ["r2"], name="rms_axis1", axis=1),
         helper.make_node("RMSNormalization", ["xh", "wh"], ["r3"], name="rms_f16", stash_type=1),
         helper.make_node("Swish", ["r1"], ["s1"], name="swish", alpha=1.5)]
outputs = [helper.make_tensor_value_info("s1", f, [2, 6, 32]), helper.make_tensor_value_info("r2", f, [2, 6, 32]),
           helper.make_tensor_value_info("r3", h, [2, 6, 32])]
model = helper.make_model(helper.make_graph(nodes, "rms24", inputs, outputs, inits),
                          opset_imports=[helper.make_opsetid("", 24)], ir_version=10)
onnx.checker.check_model(model)
onnx.save(model, os.path.join(out, "rmsnorm_swish_opset24.onnx"))
feeds = {"x": rng.standard_normal((2, 6, 32)).astype(np.float32) * 3, "xh": rng.standard_normal((2, 6, 32)).astype(np.float16)}
res = ReferenceEvaluator(model).run(None, feeds)
write_test_data(out, ["x", "xh"], feeds, res)
