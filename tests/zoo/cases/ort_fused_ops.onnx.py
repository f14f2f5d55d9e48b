#!/usr/bin/env python3
# ONNX Runtime's fused ops as its transformer optimizer writes them (Optimum/Olive "O2"-style
# models): com.microsoft SkipLayerNormalization (with bias and the residual sum output #3,
# which the next one takes), SkipSimplifiedLayerNormalization, FastGelu with a bias, BiasGelu,
# Gelu, QuickGelu, BiasAdd, FusedMatMul (transB, alpha) and ai.onnx-domain
# SimplifiedLayerNormalization (ORT registers it there). drkc imports them as the primitive ops
# they fuse (onnx_opset.c); the expected outputs come from ONNX Runtime itself (BiasAdd, which
# its CPU provider lacks, as two Adds there).
# CHECK-DATA: 1e-5
# CHECK-CPU:
# RUN:
# RUN: --target=sm_90a --precision=fp16 --fusion-aggressiveness=3
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
B, S, H = 2, 5, 16
f = TensorProto.FLOAT
vi = helper.make_tensor_value_info
rng = np.random.default_rng(3)


def init(name, *shape):
    return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)


inits = [init("gamma", H), init("beta", H), init("bias", H), init("g2", H), init("w", 24, H), init("w2", H, H),
         init("fb", H)]
inputs = [vi("x", f, [B, S, H]), vi("skip", f, [B, S, H])]
ms = "com.microsoft"
nodes = [
    helper.make_node("SkipLayerNormalization", ["x", "skip", "gamma", "beta", "bias"], ["ln1", "", "", "sum1"],
                     domain=ms, epsilon=1e-5, name="skip_ln"),
    helper.make_node("FastGelu", ["ln1", "fb"], ["fg"], domain=ms, name="fast_gelu"),
    helper.make_node("FusedMatMul", ["fg", "w"], ["fm"], domain=ms, transB=1, alpha=0.5, name="fused_mm"),
    helper.make_node("BiasGelu", ["ln1", "bias"], ["bg"], domain=ms, name="bias_gelu"),
    helper.make_node("Gelu", ["bg"], ["g"], domain=ms, name="gelu"),
    helper.make_node("QuickGelu", ["g"], ["qg"], domain=ms, alpha=1.5, name="quick_gelu"),
    helper.make_node("BiasAdd", ["qg", "bias", "sum1"], ["ba"], domain=ms, name="bias_add"),
    helper.make_node("SkipSimplifiedLayerNormalization", ["ba", "sum1", "g2"], ["rms1", "", "", "sum2"], domain=ms,
                     epsilon=1e-6, name="skip_rms"),
    helper.make_node("SimplifiedLayerNormalization", ["sum2", "g2"], ["rms2"], axis=-1, epsilon=1e-6,
                     name="simplified_ln"),
    helper.make_node("MatMul", ["rms2", "w2"], ["y"], name="proj"),
]
outputs = [vi("fm", f, [B, S, 24]), vi("rms1", f, [B, S, H]), vi("y", f, [B, S, H]), vi("sum2", f, [B, S, H])]
g = helper.make_graph(nodes, "ort_fused", inputs, outputs, inits)
model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ms, 1)], ir_version=8)
onnx.save(model, os.path.join(out, "ort_fused_ops.onnx"))
feeds = {x.name: rng.standard_normal([d.dim_value for d in x.type.tensor_type.shape.dim]).astype(np.float32)
         for x in inputs}
import onnxruntime as ort  # noqa: E402  (the oracle: these ops are ONNX Runtime's)

from case_data import write_test_data  # noqa: E402  (beside this script)

so = ort.SessionOptions()
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
on_cpu = [n if n.op_type != "BiasAdd" else helper.make_node("Add", ["qg", "bias"], ["qgb"]) for n in nodes]
on_cpu.insert(7, helper.make_node("Add", ["qgb", "sum1"], ["ba"]))
oracle = helper.make_model(helper.make_graph(on_cpu, "ort_fused_cpu", inputs, outputs, inits),
                           opset_imports=model.opset_import, ir_version=8)
res = ort.InferenceSession(oracle.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)
write_test_data(out, [x.name for x in inputs], feeds, res)
