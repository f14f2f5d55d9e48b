#!/usr/bin/env python3
# Mod, which the TorchScript exporter writes in the shape arithmetic of dynamic-batch ViT and
# Swin exports (sizes modulo the patch or window size), was an unsupported op; it is imported as
# primitive ops (integers: the truncating Div's remainder moved into the divisor's sign unless
# fmod=1; floats with fmod=1: a - trunc(a / b) * b). Mixed signs against onnx.reference, and a
# Shape-derived Mod that folding removes.
# CHECK-DATA: 1e-6
# RUN:
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from case_data import write_test_data  # noqa: E402  (beside this script)

out = sys.argv[1]
I, F = TensorProto.INT64, TensorProto.FLOAT
ins = [helper.make_tensor_value_info("a", I, [12]), helper.make_tensor_value_info("b", I, [12]),
       helper.make_tensor_value_info("x", F, [12]), helper.make_tensor_value_info("y", F, [12]),
       helper.make_tensor_value_info("img", F, [1, 3, 14, 14])]
nodes = [helper.make_node("Mod", ["a", "b"], ["m0"], name="int_mod"),
         helper.make_node("Mod", ["a", "b"], ["m1"], name="int_fmod", fmod=1),
         helper.make_node("Mod", ["x", "y"], ["m2"], name="float_fmod", fmod=1),
         helper.make_node("Shape", ["img"], ["s"], name="shape"),
         helper.make_node("Mod", ["s", "patch"], ["rest"], name="size_mod_patch")]
inits = [numpy_helper.from_array(np.array([1, 1, 4, 4], np.int64), "patch")]
outs = [helper.make_tensor_value_info(n, t, None) for n, t in [("m0", I), ("m1", I), ("m2", F), ("rest", I)]]
model = helper.make_model(helper.make_graph(nodes, "mod", ins, outs, inits), opset_imports=[helper.make_opsetid("", 13)],
                          ir_version=8)
onnx.save(model, os.path.join(out, "mod_shape_arith.onnx"))
feeds = {"a": np.array([7, -7, 7, -7, 0, 5, -5, 12, -12, 3, -1, 1], np.int64),
         "b": np.array([3, 3, -3, -3, 4, 5, 5, 5, -5, -7, 7, -7], np.int64),
         "x": np.array([7.5, -7.5, 7.5, -7.5, 0.0, 5.25, -5.25, 1e3, -1e3, 3.0, -0.5, 0.5], np.float32),
         "y": np.array([2.0, 2.0, -2.0, -2.0, 3.0, 5.0, 5.0, 7.0, -7.0, -7.0, 7.0, -7.0], np.float32),
         "img": np.zeros((1, 3, 14, 14), np.float32)}
res = ReferenceEvaluator(model).run(None, feeds)
write_test_data(out, ["a", "b", "x", "y", "img"], feeds, res)
