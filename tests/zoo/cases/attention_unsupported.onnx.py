#!/usr/bin/env python3
# Attention forms drkc does not import give one precise error naming the node and the feature,
# never a crash: a KV cache (past_key/past_value), 3-D inputs with head counts, and an attribute
# drkc does not know.
# EXPECT-ERROR: | node 'with_cache' (#0): error: unsupported 'Attention' with past_key/past_value
import os
import sys

import onnx
from onnx import TensorProto, helper

out = sys.argv[1]
f = TensorProto.FLOAT
ins = [helper.make_tensor_value_info(n, f, s) for n, s in
       [("q", [1, 2, 4, 8]), ("k", [1, 2, 4, 8]), ("v", [1, 2, 4, 8]), ("pk", [1, 2, 3, 8]), ("pv", [1, 2, 3, 8])]]
node = helper.make_node("Attention", ["q", "k", "v", "", "pk", "pv"], ["y", "pk2", "pv2"], name="with_cache")
g = helper.make_graph([node], "a", ins, [helper.make_tensor_value_info("y", f, None)])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)], ir_version=10),
          os.path.join(out, "attention_unsupported.onnx"))
