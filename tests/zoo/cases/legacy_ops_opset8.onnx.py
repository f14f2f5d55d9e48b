#!/usr/bin/env python3
# Ops of the ONNX model zoo's older models (opset 8, IR 4): ImageScaler (Tiny YOLOv2's input
# scaling), LRN (AlexNet, GoogLeNet, CaffeNet) and Upsample with its scales as an attribute
# (opsets 7-8). drkc imports them as primitive ops (onnx_opset.c); the expected output is
# ImageScaler in numpy, then ONNX Runtime on the rest.
# CHECK-DATA: 1e-5
# RUN:
# RUN: --target=sm_90a --precision=fp16
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
rng = np.random.default_rng(8)
vi = helper.make_tensor_value_info
bias = [0.5, -1.0, 0.25, 2.0]
nodes = [helper.make_node("ImageScaler", ["x"], ["s"], scale=0.75, bias=bias, name="scaler"),
         helper.make_node("LRN", ["s"], ["l"], size=3, alpha=2e-3, beta=0.75, bias=1.5, name="lrn"),
         helper.make_node("Upsample", ["l"], ["y"], mode="nearest", scales=[1.0, 1.0, 2.0, 2.0], name="up")]
g = helper.make_graph(nodes, "legacy", [vi("x", TensorProto.FLOAT, [2, 4, 3, 5])], [vi("y", TensorProto.FLOAT, [2, 4, 6, 10])])
model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 8)], ir_version=4)
onnx.save(model, os.path.join(out, "legacy_ops_opset8.onnx"))
x = rng.standard_normal((2, 4, 3, 5)).astype(np.float32)
s = x * np.float32(0.75) + np.array(bias, np.float32).reshape(4, 1, 1)
rest = helper.make_model(helper.make_graph(nodes[1:], "rest", [vi("s", TensorProto.FLOAT, [2, 4, 3, 5])], g.output),
                         opset_imports=[helper.make_opsetid("", 8)], ir_version=4)
import onnxruntime as ort  # noqa: E402  (the oracle)

from case_data import write_test_data  # noqa: E402  (beside this script)

res = ort.InferenceSession(rest.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"s": s})
write_test_data(out, ["x"], {"x": x}, res)
