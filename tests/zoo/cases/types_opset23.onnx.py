#!/usr/bin/env python3
# Opset 23 widened the data-movement ops, Cast and (De)QuantizeLinear to int4/uint4 and the
# float8 types: int4 and f8e4m3 / f8e5m2 values through Reshape, Transpose, Pad, Flatten,
# Unsqueeze/Squeeze, Identity, DequantizeLinear and Cast run on the CPU exactly as
# onnx.reference. (The GPU lowering has no sub-byte dtypes yet and says so, naming the node:
# "node 'transpose_i4' (#1): error: Transpose on i4 is not lowered for GPU yet".)
# CHECK-DATA: 1e-6
import os
import sys

import ml_dtypes
import numpy as np
import onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh
from onnx.reference import ReferenceEvaluator

from case_data import write_test_data  # noqa: E402  (beside this script)

out = sys.argv[1]
vi = h.make_tensor_value_info
c = lambda name, a: nh.from_array(np.array(a, np.int64), name)
nodes = [
    h.make_node("Reshape", ["x4", "shape"], ["r4"], name="reshape_i4"),
    h.make_node("Transpose", ["r4"], ["t4"], perm=[1, 0], name="transpose_i4"),
    h.make_node("Pad", ["t4", "pads"], ["p4"], name="pad_i4"),
    h.make_node("DequantizeLinear", ["p4", "scale", "zp"], ["y4"], name="dq_i4"),
    h.make_node("Flatten", ["x8"], ["f8"], axis=2, name="flatten_f8"),
    h.make_node("Unsqueeze", ["f8", "ax"], ["u8"], name="unsqueeze_f8"),
    h.make_node("Squeeze", ["u8", "ax"], ["s8"], name="squeeze_f8"),
    h.make_node("Identity", ["s8"], ["i8"], name="identity_f8"),
    h.make_node("Cast", ["i8"], ["y8"], to=T.FLOAT, name="cast_f8"),
    h.make_node("Cast", ["x5"], ["y5"], to=T.FLOAT16, name="cast_f8e5m2"),
]
inits = [c("shape", [6, 4]), c("pads", [0, 1, 0, 1]), nh.from_array(np.array(0.25, np.float32), "scale"),
         nh.from_array(np.array(-2, ml_dtypes.int4), "zp"), c("ax", [0])]
ins = [vi("x4", T.INT4, [2, 3, 4]), vi("x8", T.FLOAT8E4M3FN, [2, 3, 4]), vi("x5", T.FLOAT8E5M2, [5])]
outs = [vi("y4", T.FLOAT, [4, 8]), vi("y8", T.FLOAT, [6, 4]), vi("y5", T.FLOAT16, [5])]
model = h.make_model(h.make_graph(nodes, "types23", ins, outs, inits), opset_imports=[h.make_opsetid("", 23)], ir_version=11)
onnx.checker.check_model(model)
onnx.save(model, os.path.join(out, "types_opset23.onnx"))
rng = np.random.default_rng(3)
feeds = {"x4": rng.integers(-8, 8, (2, 3, 4)).astype(ml_dtypes.int4),
         "x8": rng.standard_normal((2, 3, 4)).astype(ml_dtypes.float8_e4m3fn),
         "x5": np.array([0.5, -3, 100, 1e-3, -0.0], np.float32).astype(ml_dtypes.float8_e5m2)}
res = ReferenceEvaluator(model).run(None, feeds)
write_test_data(out, [x.name for x in ins], feeds, res)
