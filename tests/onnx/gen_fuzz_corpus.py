#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_pipeline (tests/onnx/fuzz_corpus/*.onnx): small models of the
shapes real exporters write (torch.onnx.export's op patterns: Gemm/MatMul+Add, Conv+BN+Relu,
attention with Reshape/Transpose/Softmax, LayerNorm+Gelu, a dynamic batch, shape chains with
Shape/Gather/Concat, Resize, Pad/Slice/Split), weights tiny so each file is a few KB.
Deterministic: the same bytes every run. usage: gen_fuzz_corpus.py OUT_DIR"""
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
rng = np.random.default_rng(24)


def w(name, *shape):
    return nh.from_array(rng.standard_normal(shape).astype(np.float32) * 0.1, name)


def i64(name, vals):
    return nh.from_array(np.array(vals, np.int64), name)


def save(name, nodes, ins, outs, inits, opset=17):
    g = h.make_graph(nodes, name, ins, outs, inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)], ir_version=8, producer_name="pytorch")
    onnx.checker.check_model(m)
    (out / f"{name}.onnx").write_bytes(m.SerializeToString())


f32 = lambda n, s: h.make_tensor_value_info(n, T.FLOAT, s)
save("mlp", [h.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1), h.make_node("Relu", ["h"], ["r"]),
             h.make_node("MatMul", ["r", "w2"], ["m"]), h.make_node("Add", ["m", "b2"], ["y"])],
     [f32("x", ["batch", 16])], [f32("y", ["batch", 8])], [w("w1", 32, 16), w("b1", 32), w("w2", 32, 8), w("b2", 8)])
save("conv_bn", [h.make_node("Conv", ["x", "cw", "cb"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]),
                 h.make_node("BatchNormalization", ["c", "g", "b", "mu", "var"], ["n"], epsilon=1e-5),
                 h.make_node("Relu", ["n"], ["r"]),
                 h.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
                 h.make_node("GlobalAveragePool", ["p"], ["gp"]), h.make_node("Flatten", ["gp"], ["y"], axis=1)],
     [f32("x", [1, 3, 16, 16])], [f32("y", [1, 8])],
     [w("cw", 8, 3, 3, 3), w("cb", 8), w("g", 8), w("b", 8), w("mu", 8),
      nh.from_array(np.ones(8, np.float32), "var")])
save("attention",
     [h.make_node("MatMul", ["x", "wq"], ["q"]), h.make_node("MatMul", ["x", "wk"], ["k"]),
      h.make_node("MatMul", ["x", "wv"], ["v"]),
      h.make_node("Reshape", ["q", "hs"], ["q4"]), h.make_node("Transpose", ["q4"], ["qt"], perm=[0, 2, 1, 3]),
      h.make_node("Reshape", ["k", "hs"], ["k4"]), h.make_node("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]),
      h.make_node("Reshape", ["v", "hs"], ["v4"]), h.make_node("Transpose", ["v4"], ["vt"], perm=[0, 2, 1, 3]),
      h.make_node("MatMul", ["qt", "kt"], ["s"]), h.make_node("Mul", ["s", "scale"], ["ss"]),
      h.make_node("Softmax", ["ss"], ["p"], axis=-1), h.make_node("MatMul", ["p", "vt"], ["o"]),
      h.make_node("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]), h.make_node("Reshape", ["ot", "flat"], ["y"])],
     [f32("x", [1, 8, 16])], [f32("y", [1, 8, 16])],
     [w("wq", 16, 16), w("wk", 16, 16), w("wv", 16, 16), i64("hs", [1, 8, 2, 8]), i64("flat", [1, 8, 16]),
      nh.from_array(np.array(0.35, np.float32), "scale")])
save("layernorm_gelu", [h.make_node("LayerNormalization", ["x", "g", "b"], ["n"], axis=-1, epsilon=1e-5),
                        h.make_node("MatMul", ["n", "w"], ["m"]), h.make_node("Gelu", ["m"], ["y"], approximate="tanh")],
     [f32("x", [2, 4, 16])], [f32("y", [2, 4, 32])], [w("g", 16), w("b", 16), w("w", 16, 32)], opset=20)
save("shape_chain",
     [h.make_node("Shape", ["x"], ["s"]), h.make_node("Gather", ["s", "zero"], ["n0"], axis=0),
      h.make_node("Unsqueeze", ["n0", "ax0"], ["n1"]), h.make_node("Concat", ["n1", "tail"], ["ns"], axis=0),
      h.make_node("Reshape", ["x", "ns"], ["r"]), h.make_node("ReduceMean", ["r", "ax1"], ["y"], keepdims=0)],
     [f32("x", ["batch", 4, 6])], [f32("y", ["batch"])],
     [i64("zero", 0), i64("ax0", [0]), i64("tail", [24]), i64("ax1", [1])], opset=18)
save("resize_pad_slice",
     [h.make_node("Resize", ["x", "", "scales"], ["u"], mode="nearest"),
      h.make_node("Pad", ["u", "pads"], ["p"], mode="constant"),
      h.make_node("Slice", ["p", "st", "en", "axes"], ["sl"]),
      h.make_node("Split", ["sl", "sp"], ["a", "b"], axis=1), h.make_node("Add", ["a", "b"], ["y"])],
     [f32("x", [1, 4, 4, 4])], [f32("y", [1, 2, 8, 8])],
     [nh.from_array(np.array([1, 1, 2, 2], np.float32), "scales"), i64("pads", [0, 0, 1, 1, 0, 0, 1, 1]),
      i64("st", [1, 1]), i64("en", [9, 9]), i64("axes", [2, 3]), i64("sp", [2, 2])])
save("cast_where_reduce",
     [h.make_node("Greater", ["x", "zero"], ["m"]), h.make_node("Where", ["m", "x", "neg"], ["wv"]),
      h.make_node("Cast", ["wv"], ["c"], to=T.FLOAT16), h.make_node("Cast", ["c"], ["c32"], to=T.FLOAT),
      h.make_node("ReduceSum", ["c32", "ax"], ["y"], keepdims=1)],
     [f32("x", [3, 5])], [f32("y", [3, 1])],
     [nh.from_array(np.array(0, np.float32), "zero"), nh.from_array(np.array(-1, np.float32), "neg"), i64("ax", [1])])
