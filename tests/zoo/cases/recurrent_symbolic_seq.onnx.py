#!/usr/bin/env python3
# An LSTM over a symbolic sequence, as the TorchScript exporter writes nn.LSTM(batch_first=True)
# with dynamic_axes {0: batch, 1: seq}: drkc unrolls the recurrence at import, so the length
# must be known: from --bind (which the import reads), or for `drkc run` from its input files (read
# before the model: drk_pipeline_import_hint); with neither, the error names the node and says so.
# CHECK-DATA: 1e-5 --bind=batch=2,seq=5
# CHECK-DATA: 1e-5
# RUN: --bind=batch=2,seq=5
# EXPECT-ERROR: | unsupported 'LSTM' over a sequence whose length is not known at import
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
I, H = 3, 4
rng = np.random.default_rng(5)
inits = [numpy_helper.from_array((rng.standard_normal(s) * 0.5).astype(np.float32), n)
         for n, s in (("w", (1, 4 * H, I)), ("r", (1, 4 * H, H)), ("b", (1, 8 * H)))]
nodes = [helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0, 2], name="batch_first"),
         helper.make_node("LSTM", ["xt", "w", "r", "b"], ["y", "yh"], hidden_size=H, name="lstm")]
g = helper.make_graph(nodes, "lstm_seq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", I])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["seq", 1, "batch", H]),
                       helper.make_tensor_value_info("yh", TensorProto.FLOAT, [1, "batch", H])], inits)
model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
onnx.save(model, os.path.join(out, "recurrent_symbolic_seq.onnx"))
feeds = {"x": rng.standard_normal((2, 5, I)).astype(np.float32)}
import onnxruntime as ort  # noqa: E402  (the oracle)

from case_data import write_test_data  # noqa: E402  (beside this script)

write_test_data(out, ["x"], feeds, ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds))
