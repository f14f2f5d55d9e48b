#!/usr/bin/env python3
"""Writes model.onnx next to this script: a 784-256-10 MLP (MNIST-sized) with random weights.

The model is the bundled example for the README's demo. Opset 17 and IR version 8 so that
Debian's libonnx (1.12) reads it; a fixed seed makes the file byte-identical on every run
with the same numpy. Batch is fixed at 1, so `drkc run model.onnx --seed N` needs no shapes.
Requires numpy and the onnx Python package. Usage: gen.py [OUT.onnx]
"""

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build():
    rng = np.random.default_rng(2024)
    dims = [784, 256, 10]
    inits, nodes = [], []
    h = "input"
    for i in range(2):
        w = (rng.standard_normal((dims[i], dims[i + 1])) / np.sqrt(dims[i])).astype(np.float32)
        b = (0.1 * rng.standard_normal(dims[i + 1])).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"fc{i}.weight"), numpy_helper.from_array(b, f"fc{i}.bias")]
        nodes.append(helper.make_node("MatMul", [h, f"fc{i}.weight"], [f"fc{i}.mm"], name=f"fc{i}/MatMul"))
        out = "logits" if i == 1 else f"fc{i}.out"
        nodes.append(helper.make_node("Add", [f"fc{i}.mm", f"fc{i}.bias"], [out], name=f"fc{i}/Add"))
        if i == 0:
            nodes.append(helper.make_node("Relu", [out], ["relu0"], name="relu0"))
            h = "relu0"
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 784])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="drkc-examples-mlp")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


if __name__ == "__main__":
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "model.onnx")
    onnx.save(build(), path)
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")
