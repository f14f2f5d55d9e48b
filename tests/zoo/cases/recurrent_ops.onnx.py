#!/usr/bin/env python3
# Recurrent layers as torch.onnx.export writes them (nn.LSTM / nn.GRU / nn.RNN; both exporters
# emit the ONNX ops) and a few elementwise ops drkc imports as decompositions: a 2-layer LSTM
# with biases and initial states, the second bidirectional reading the first's Y squeezed; a GRU with
# linear_before_reset=1 (torch's form), bidirectional, no initial state; a GRU with
# linear_before_reset=0, reverse; a ReLU RNN; Celu, ReduceL1 (axes as an attribute, opset 17),
# Tan, Sinh, Cosh. drkc unrolls the recurrences over the 6 steps (onnx_opset.c dc_rnn); the
# expected outputs come from ONNX Runtime.
# CHECK-DATA: 1e-5
# RUN:
# RUN: --target=sm_90a --precision=fp16 --fusion-aggressiveness=3
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
B, T, I, H = 3, 6, 5, 4
f = TensorProto.FLOAT
vi = helper.make_tensor_value_info
rng = np.random.default_rng(11)


def init(name, *shape, scale=0.5):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


inits = [init("w1", 1, 4 * H, I), init("r1", 1, 4 * H, H), init("b1", 1, 8 * H), init("h1", 1, B, H), init("c1", 1, B, H),
         init("w2", 2, 4 * H, H), init("r2", 2, 4 * H, H), init("b2", 2, 8 * H),
         init("wg", 2, 3 * H, I), init("rg", 2, 3 * H, H), init("bg", 2, 6 * H),
         init("wg0", 1, 3 * H, I), init("rg0", 1, 3 * H, H), init("bg0", 1, 6 * H), init("hg0", 1, B, H),
         init("wr", 1, H, I), init("rr", 1, H, H), init("br", 1, 2 * H)]
inputs = [vi("x", f, [B, T, I])]
nodes = [
    # x batch_first, transposed as the exporters do; layer 2 reads layer 1's Y [T, 1, B, H] squeezed
    helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0, 2], name="xt"),
    helper.make_node("LSTM", ["xt", "w1", "r1", "b1", "", "h1", "c1"], ["y1", "y1h", "y1c"], hidden_size=H, name="lstm1"),
    helper.make_node("Squeeze", ["y1", "ax1"], ["y1s"], name="sq"),
    helper.make_node("LSTM", ["y1s", "w2", "r2", "b2"], ["y2", "y2h", "y2c"], hidden_size=H, direction="bidirectional",
                     name="lstm2"),
    helper.make_node("GRU", ["xt", "wg", "rg", "bg"], ["yg", "ygh"], hidden_size=H, direction="bidirectional",
                     linear_before_reset=1, name="gru_lbr"),
    helper.make_node("GRU", ["xt", "wg0", "rg0", "bg0", "", "hg0"], ["yg0"], hidden_size=H, direction="reverse",
                     name="gru"),
    helper.make_node("RNN", ["xt", "wr", "rr", "br"], ["yr", "yrh"], hidden_size=H, activations=["Relu"], name="rnn"),
    helper.make_node("Celu", ["x"], ["celu"], alpha=0.7, name="celu"),
    helper.make_node("ReduceL1", ["x"], ["l1"], axes=[2], keepdims=1, name="l1"),
    helper.make_node("Tan", ["celu"], ["tan"], name="tan"),
    helper.make_node("Sinh", ["x"], ["sinh"], name="sinh"),
    helper.make_node("Cosh", ["x"], ["cosh"], name="cosh"),
]
inits.append(numpy_helper.from_array(np.array([1], dtype=np.int64), "ax1"))
outputs = [vi("y2", f, [T, 2, B, H]), vi("y2h", f, [2, B, H]), vi("y2c", f, [2, B, H]), vi("y1h", f, [1, B, H]),
           vi("yg", f, [T, 2, B, H]), vi("ygh", f, [2, B, H]), vi("yg0", f, [T, 1, B, H]), vi("yr", f, [T, 1, B, H]),
           vi("yrh", f, [1, B, H]), vi("celu", f, [B, T, I]), vi("l1", f, [B, T, 1]), vi("tan", f, [B, T, I]),
           vi("sinh", f, [B, T, I]), vi("cosh", f, [B, T, I])]
g = helper.make_graph(nodes, "recurrent", inputs, outputs, inits)
model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
onnx.checker.check_model(model)
onnx.save(model, os.path.join(out, "recurrent_ops.onnx"))
feeds = {"x": rng.standard_normal((B, T, I)).astype(np.float32)}
import onnxruntime as ort  # noqa: E402  (the oracle)

from case_data import write_test_data  # noqa: E402  (beside this script)

res = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
write_test_data(out, ["x"], feeds, res)
