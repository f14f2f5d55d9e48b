#!/usr/bin/env python3
# An empty constant as the TorchScript exporter writes it (a Constant whose tensor has dims [0]
# and empty raw_data: the shape [] that transformers' mask code gives ConstantOfShape for a
# scalar) is imported without a data pointer; the interpreter refused it ("constant ... has no
# static shape or too little data"), so `drkc run` failed on DistilBERT with a dynamic batch
# and constant folding left the ConstantOfShape alone.
# RUN:
# CHECK-CPU:
# CHECK-DATA: 1e-6
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
empty = TensorProto(data_type=TensorProto.INT64, dims=[0], raw_data=b"")
one = numpy_helper.from_array(np.array([1.0], np.float32))
nodes = [helper.make_node("Constant", [], ["shape"], name="empty_shape", value=empty),
         helper.make_node("ConstantOfShape", ["shape"], ["one"], name="scalar", value=one),
         helper.make_node("Add", ["x", "one"], ["y"], name="add")]
f = TensorProto.FLOAT
g = helper.make_graph(nodes, "empty", [helper.make_tensor_value_info("x", f, [2, 3])], [helper.make_tensor_value_info("y", f, [2, 3])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), os.path.join(out, "empty_constant.onnx"))
x = np.arange(6, dtype=np.float32).reshape(2, 3)
d = os.path.join(out, "test_data_set_0")
os.makedirs(d, exist_ok=True)
open(os.path.join(d, "input_0.pb"), "wb").write(numpy_helper.from_array(x, "x").SerializeToString())
open(os.path.join(d, "output_0.pb"), "wb").write(numpy_helper.from_array(x + 1, "y").SerializeToString())
