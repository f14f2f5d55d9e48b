#!/usr/bin/env python3
"""Models with symbolic dims for drkc --dynamic's tests (tests/dynamic/CMakeLists.txt).

Writes OUTDIR/<name>/model.onnx for:
  encoder   a BERT layer (tests/models/gen_models.py's bert_layer): inputs [batch, seq, 256] and
            an attention mask [batch, seq]; batch pads exactly; seq with the padded keys masked
  cnn       conv + batch norm + relu, a 3x3 conv, max pool, global average pool, flatten and a
            Gemm classifier over [batch, 8, 16, 16]: batch pads exactly
  pool      mean over the tokens of [batch, seq, 16]: padding seq is exact with the mean masked
            (drk_pass_pad_mask: the sum of the real tokens over the length input)
  maxpool   max over the tokens: exact with the padded tokens masked with -inf
  prodpool  product over the tokens: padding seq is NOT exact (the test shows that padded results
            differ, so the refusal is needed)
  attn      two self-attention layers without a mask over [batch, seq, 64]: padding seq is exact
            only with the padded keys masked (drk_pass_pad_mask)
  meanpool  a per-token block, then sentence-transformers' mean pooling over [batch, seq, 32] with
            a mask input [batch, seq]: sum(h * mask) / clamp(sum(mask)); both pad exactly (the sums
            add the zero-filled mask's zeros)
  tokens    a per-token block over [batch, seq, 64]: LayerNorm, MatMul, Gelu (erf), MatMul,
            residual Add: batch and seq both pad exactly (nothing mixes tokens)
Weights are random from fixed seeds. Usage: gen_dynamic_models.py OUTDIR
"""

import os
import sys

import numpy as np
import onnx

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
import gen_models as gm  # noqa: E402


def build_cnn():
    b = gm.Builder("dyn_cnn", seed=707)
    C, mid, HW, classes = 8, 16, 16, 10
    x = b.input("x", gm.F32, ["batch", C, HW, HW])
    h = b.op("Relu", [b.batch_norm(b.conv(x, C, mid, 1, bias=False), mid)])
    h = b.op("Relu", [b.conv(h, mid, mid, 3, pad=1)])
    h = b.op("MaxPool", [h], kernel_shape=[2, 2], strides=[2, 2])
    h = b.op("Flatten", [b.op("GlobalAveragePool", [h])], axis=1)
    w = b.weight([classes, mid], scale=1.0 / np.sqrt(mid), base="fc_w")
    b.op("Gemm", [h, w, b.bias(classes, "fc_b")], out="logits", alpha=1.0, beta=1.0, transB=1)
    b.output("logits", gm.F32, ["batch", classes])
    return b.model()


def build_tokens():
    b = gm.Builder("dyn_tokens", seed=808)
    H, F = 64, 128
    x = b.input("x", gm.F32, ["batch", "seq", H])
    h = b.layer_norm(x, H, 1e-5)
    f = b.linear(h, H, F, "fc1")
    e = b.op("Erf", [b.op("Div", [f, b.f32(1.4142135381698608, "sqrt2")])])
    g = b.op("Mul", [b.op("Mul", [f, b.op("Add", [e, b.f32(1.0, "one")])]), b.f32(0.5, "half")])
    b.op("Add", [b.linear(g, F, H, "fc2"), x], out="y")
    b.output("y", gm.F32, ["batch", "seq", H])
    return b.model()


def build_attn():
    b = gm.Builder("dyn_attn", seed=1010)
    H, heads = 64, 4
    hd = H // heads
    x = b.input("x", gm.F32, ["batch", "seq", H])
    h = b.layer_norm(x, H, 1e-5)
    q = b.split_heads(b.linear(h, H, H, "q"), heads, hd)
    k = b.split_heads(b.linear(h, H, H, "k"), heads, hd)
    v = b.split_heads(b.linear(h, H, H, "v"), heads, hd)
    s = b.op("Div", [b.op("MatMul", [q, b.op("Transpose", [k], perm=[0, 1, 3, 2])]), b.f32(float(np.sqrt(hd)), "sqrt_d")])
    ctx = b.merge_heads(b.op("MatMul", [b.op("Softmax", [s], axis=-1), v]), H)
    h1 = b.op("Add", [b.linear(ctx, H, H, "o"), x])
    # the second layer's keys are the first's outputs: the padded rows are not zero there
    q2 = b.split_heads(b.linear(h1, H, H, "q2"), heads, hd)
    k2 = b.split_heads(b.linear(h1, H, H, "k2"), heads, hd)
    v2 = b.split_heads(b.linear(h1, H, H, "v2"), heads, hd)
    s2 = b.op("MatMul", [q2, b.op("Transpose", [k2], perm=[0, 1, 3, 2])])
    ctx2 = b.merge_heads(b.op("MatMul", [b.op("Softmax", [s2], axis=-1), v2]), H)
    b.op("Add", [ctx2, h1], out="y")
    b.output("y", gm.F32, ["batch", "seq", H])
    return b.model()


def build_pool(op="ReduceMean"):
    b = gm.Builder("dyn_pool", seed=909)
    x = b.input("x", gm.F32, ["batch", "seq", 16])
    b.op(op, [x], out="y", axes=[1], keepdims=0)
    b.output("y", gm.F32, ["batch", 16])
    return b.model()


def build_meanpool():
    b = gm.Builder("dyn_meanpool", seed=1111)
    H = 32
    x = b.input("x", gm.F32, ["batch", "seq", H])
    mask = b.input("mask", gm.I64, ["batch", "seq"])
    h = b.op("Relu", [b.linear(b.layer_norm(x, H, 1e-5), H, H, "fc")])
    # sentence-transformers' mean pooling, as torch.onnx.export writes it
    m = b.op("Cast", [b.op("Expand", [b.op("Unsqueeze", [mask, b.i64([-1], "ax")]), b.op("Shape", [h])])], to=1)
    s = b.op("ReduceSum", [b.op("Mul", [h, m]), b.i64([1], "one")], keepdims=0)
    n = b.op("Clip", [b.op("ReduceSum", [m, b.i64([1], "one")], keepdims=0), b.f32(1e-9, "eps")])
    b.op("Div", [s, n], out="y")
    b.output("y", gm.F32, ["batch", H])
    return b.model()


def main():
    out = sys.argv[1]
    models = {"encoder": gm.build_bert_layer()[0], "cnn": build_cnn(), "tokens": build_tokens(), "pool": build_pool(), "maxpool": build_pool("ReduceMax"), "prodpool": build_pool("ReduceProd"),
              "attn": build_attn(), "meanpool": build_meanpool()}
    for name, model in models.items():
        onnx.checker.check_model(model, full_check=True)
        os.makedirs(os.path.join(out, name), exist_ok=True)
        onnx.save(model, os.path.join(out, name, "model.onnx"))
        print(f"{name}: {len(model.graph.node)} nodes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
