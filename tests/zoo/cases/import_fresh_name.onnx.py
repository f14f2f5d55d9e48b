#!/usr/bin/env python3
# Helper values that the importer makes for an old form (Clip's min/max attributes before opset
# 11 become constant inputs, named "<output>_min__N") must not take a name a later node of the
# model defines: drkc checked only the values imported so far and then refused the model with
# "value 'y_min__0' is defined twice". Every node output name is now reserved up front.
# RUN:
# CHECK-DATA: 1e-6
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
f = TensorProto.FLOAT
nodes = [helper.make_node("Clip", ["x"], ["y"], name="clip", min=-0.5, max=0.5),
         helper.make_node("Neg", ["y"], ["y_min__0"], name="named_like_a_helper"),
         helper.make_node("Add", ["y_min__0", "x"], ["z"], name="add")]
g = helper.make_graph(nodes, "fresh", [helper.make_tensor_value_info("x", f, [2, 3])], [helper.make_tensor_value_info("z", f, [2, 3])])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 6)], ir_version=3)
onnx.save(m, os.path.join(out, "import_fresh_name.onnx"))
x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
d = os.path.join(out, "test_data_set_0")
os.makedirs(d, exist_ok=True)
open(os.path.join(d, "input_0.pb"), "wb").write(numpy_helper.from_array(x, "x").SerializeToString())
open(os.path.join(d, "output_0.pb"), "wb").write(numpy_helper.from_array(x - np.clip(x, -0.5, 0.5), "z").SerializeToString())
