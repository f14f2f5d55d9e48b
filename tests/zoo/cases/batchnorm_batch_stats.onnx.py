#!/usr/bin/env python3
# BatchNormalization with training_mode=1 (opset 15), as the TorchScript exporter writes timm's
# NFNet weight standardization (F.batch_norm(w.reshape(1, C_out, -1), None, None, training=True)
# on a constant weight, momentum 0, the running-statistics outputs present but unused) feeding
# a Conv; beside it one on a runtime input whose running mean/var outputs are graph outputs.
# Expected outputs from onnx.reference.
# CHECK-DATA: 1e-5
# CHECK-CPU:
# RUN:
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from case_data import write_test_data  # noqa: E402  (beside this script)

out = sys.argv[1]
rng = np.random.default_rng(5)
f = TensorProto.FLOAT
vi = helper.make_tensor_value_info
w = rng.standard_normal((6, 3, 3, 3)).astype(np.float32)
inits = [numpy_helper.from_array(w.reshape(1, 6, 27), "w3"), numpy_helper.from_array(np.ones(6, np.float32), "one6"),
         numpy_helper.from_array(np.zeros(6, np.float32), "zero6"),
         numpy_helper.from_array(np.array([6, 3, 3, 3], np.int64), "wshape"),
         numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "s4"),
         numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b4"),
         numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "m4"),
         numpy_helper.from_array(rng.uniform(0.5, 2, 4).astype(np.float32), "v4")]
nodes = [
    helper.make_node("BatchNormalization", ["w3", "one6", "zero6", "zero6", "one6"], ["ws", "rm_unused", "rv_unused"],
                     epsilon=1e-5, momentum=0.0, training_mode=1, name="weight_standardization"),
    helper.make_node("Reshape", ["ws", "wshape"], ["wk"]),
    helper.make_node("Conv", ["x", "wk"], ["y"], pads=[1, 1, 1, 1], name="conv"),
    helper.make_node("BatchNormalization", ["z", "s4", "b4", "m4", "v4"], ["zn", "rm", "rv"], epsilon=1e-3,
                     momentum=0.8, training_mode=1, name="batch_stats"),
]
inputs = [vi("x", f, [2, 3, 7, 7]), vi("z", f, [3, 4, 5])]
outputs = [vi("y", f, [2, 6, 7, 7]), vi("zn", f, [3, 4, 5]), vi("rm", f, [4]), vi("rv", f, [4])]
model = helper.make_model(helper.make_graph(nodes, "bn_batch_stats", inputs, outputs, inits),
                          opset_imports=[helper.make_opsetid("", 15)], ir_version=8)
onnx.checker.check_model(model)
onnx.save(model, os.path.join(out, "batchnorm_batch_stats.onnx"))
feeds = {"x": rng.standard_normal((2, 3, 7, 7)).astype(np.float32), "z": rng.standard_normal((3, 4, 5)).astype(np.float32)}
res = ReferenceEvaluator(model).run(None, feeds)
write_test_data(out, [x.name for x in inputs], feeds, res)
