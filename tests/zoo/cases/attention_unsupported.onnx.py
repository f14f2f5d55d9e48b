#!/usr/bin/env python3
# Attention forms drkc does not import give one precise error naming the node and the feature,
# never a crash: a causal mask over sequence lengths that are symbolic at import (the mask is a
# constant [S, L] built at import). KV caches and 3-D inputs are imported since
# (attention_kv_cache_3d.onnx.py).
# EXPECT-ERROR: | node 'causal_symbolic' (#0): error: unsupported 'Attention' with is_causal=1 whose sequence lengths (Q, K, past_key) are not known at import
import os
import sys

import onnx
from onnx import TensorProto, helper

out = sys.argv[1]
f = TensorProto.FLOAT
ins = [helper.make_tensor_value_info(n, f, s) for n, s in
       [("q", [1, 2, "seq", 8]), ("k", [1, 2, "seq", 8]), ("v", [1, 2, "seq", 8]), ("pk", [1, 2, 3, 8]), ("pv", [1, 2, 3, 8])]]
node = helper.make_node("Attention", ["q", "k", "v", "", "pk", "pv"], ["y", "pk2", "pv2"], name="causal_symbolic", is_causal=1)
g = helper.make_graph([node], "a", ins, [helper.make_tensor_value_info("y", f, None)])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)], ir_version=11),
          os.path.join(out, "attention_unsupported.onnx"))
