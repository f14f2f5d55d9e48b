#!/usr/bin/env python3
"""Whole-model oracle data for drkc: builds small models the way PyTorch exports them.

Writes, for each model, DIR/<name>/model.onnx and DIR/<name>/test_data_set_0/{input,output}_N.pb
(ONNX TensorProto files, laid out like ONNX's own backend test data). The expected outputs come
from ONNX Runtime on the CPU with every graph optimization disabled, so the reference is the
graph as written, not ORT's rewrite of it. Weights and inputs are random (never zeros) from
fixed seeds: the files are the same on every run with the same numpy.

Models are opset 17, IR version 8, so that Debian's libonnx (1.12) and drkc's importer read
them. Usage: gen_models.py OUTDIR [--only NAME ...] [--list]
"""

import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8
F32 = TensorProto.FLOAT
I64 = TensorProto.INT64


class Builder:
    """Accumulates nodes and initializers; names every node so diagnostics can point at it."""

    def __init__(self, name, seed):
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes = []
        self.inits = []
        self.inputs = []
        self.outputs = []
        self._count = {}

    def _fresh(self, base):
        n = self._count.get(base, 0)
        self._count[base] = n + 1
        return f"{base}_{n}"

    def input(self, name, elem, shape):
        self.inputs.append(helper.make_tensor_value_info(name, elem, shape))
        return name

    def output(self, name, elem, shape):
        self.outputs.append(helper.make_tensor_value_info(name, elem, shape))

    def const(self, arr, base="const"):
        name = self._fresh(base)
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def i64(self, values, base="shape"):
        return self.const(np.array(values, dtype=np.int64), base)

    def f32(self, value, base="c"):
        return self.const(np.array(value, dtype=np.float32), base)

    def weight(self, shape, scale=None, base="w"):
        # Kaiming-like scale keeps activations O(1) through a few layers, so the relative
        # error stays meaningful (no blow-up, no vanishing).
        if scale is None:
            fan_in = int(np.prod(shape[:-1])) if len(shape) > 1 else int(shape[0])
            scale = 1.0 / np.sqrt(max(fan_in, 1))
        return self.const((self.rng.standard_normal(shape) * scale).astype(np.float32), base)

    def bias(self, n, base="b"):
        return self.const((self.rng.standard_normal(n) * 0.1).astype(np.float32), base)

    def op(self, op_type, inputs, n_out=1, name=None, out=None, **attrs):
        node_name = name or self._fresh(op_type)
        if out is None:
            outs = [f"{node_name}_out{i}" if n_out > 1 else f"{node_name}_out" for i in range(n_out)]
        else:
            outs = [out] if isinstance(out, str) else list(out)
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=node_name, **attrs))
        return outs[0] if len(outs) == 1 else outs

    def model(self):
        graph = helper.make_graph(self.nodes, self.name, self.inputs, self.outputs, self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="drkc-tests-gen_models")
        m.ir_version = IR_VERSION
        return m

    # ---- patterns as torch.onnx (opset 17) emits them ----

    def dim(self, x, axis):
        """Shape -> Gather(axis) -> Unsqueeze: a 1-element i64 tensor holding x.shape[axis]."""
        shape = self.op("Shape", [x])
        g = self.op("Gather", [shape, self.i64(axis, "idx")], axis=0)
        return self.op("Unsqueeze", [g, self.i64([0], "axes")])

    def linear(self, x, k, n, base="fc"):
        y = self.op("MatMul", [x, self.weight([k, n], base=f"{base}_w")])
        return self.op("Add", [y, self.bias(n, base=f"{base}_b")])

    def layer_norm(self, x, n, eps, out=None):
        gamma = self.const((1.0 + 0.1 * self.rng.standard_normal(n)).astype(np.float32), "ln_g")
        beta = self.bias(n, "ln_b")
        return self.op("LayerNormalization", [x, gamma, beta], out=out, axis=-1, epsilon=eps)

    def split_heads(self, x, heads, head_dim):
        """[B,S,H] -> [B,heads,S,head_dim] via view(B,S,heads,hd).permute(0,2,1,3)."""
        b, s = self.dim(x, 0), self.dim(x, 1)
        shp = self.op("Concat", [b, s, self.i64([heads]), self.i64([head_dim])], axis=0)
        r = self.op("Reshape", [x, shp])
        return self.op("Transpose", [r], perm=[0, 2, 1, 3])

    def merge_heads(self, x, hidden):
        """[B,heads,S,hd] -> [B,S,H] via permute(0,2,1,3).reshape(B,S,H)."""
        t = self.op("Transpose", [x], perm=[0, 2, 1, 3])
        b, s = self.dim(t, 0), self.dim(t, 1)
        shp = self.op("Concat", [b, s, self.i64([hidden])], axis=0)
        return self.op("Reshape", [t, shp])

    def batch_norm(self, x, c):
        scale = self.const((1.0 + 0.1 * self.rng.standard_normal(c)).astype(np.float32), "bn_s")
        b = self.bias(c, "bn_b")
        mean = self.const((0.1 * self.rng.standard_normal(c)).astype(np.float32), "bn_m")
        var = self.const(self.rng.uniform(0.5, 1.5, c).astype(np.float32), "bn_v")
        return self.op("BatchNormalization", [x, scale, b, mean, var], epsilon=1e-5,
                       momentum=0.9)

    def conv(self, x, cin, cout, k, stride=1, pad=0, bias=True):
        w = self.weight([cout, cin, k, k], scale=1.0 / np.sqrt(cin * k * k), base="conv_w")
        ins = [x, w] + ([self.bias(cout, "conv_b")] if bias else [])
        return self.op("Conv", ins, kernel_shape=[k, k], strides=[stride, stride],
                       pads=[pad] * 4, dilations=[1, 1], group=1)


# ---------------------------------------------------------------------------------------------
# Models. Each returns (model, {input name: array}).


def build_mlp():
    b = Builder("mlp", seed=101)
    batch, dims = 8, [128, 256, 256, 64]
    x = b.input("x", F32, [batch, dims[0]])
    h = x
    for i in range(3):
        h = b.op("Relu", [b.linear(h, dims[i], dims[i + 1], base=f"fc{i}")],
                 out="y" if i == 2 else None)
    b.output("y", F32, [batch, dims[-1]])
    feeds = {"x": b.rng.standard_normal((batch, dims[0])).astype(np.float32)}
    return b.model(), feeds


def attention_scores(b, q, k, head_dim):
    """Q.K^T / sqrt(hd): K gets permute(0,2,1,3) then transpose(-1,-2), as HF code writes it."""
    kt = b.op("Transpose", [k], perm=[0, 1, 3, 2])
    s = b.op("MatMul", [q, kt])
    return b.op("Div", [s, b.f32(np.sqrt(head_dim), "sqrt_d")])


def build_bert_layer():
    b = Builder("bert_layer", seed=202)
    B, S, H, heads, ffn = 2, 64, 256, 4, 1024
    hd = H // heads
    x = b.input("hidden_states", F32, ["batch", "seq", H])
    mask = b.input("attention_mask", I64, ["batch", "seq"])

    # Extended mask: (1 - mask[:, None, None, :]) * -10000, as BertModel exports it.
    m = b.op("Unsqueeze", [mask, b.i64([1], "axes")])
    m = b.op("Unsqueeze", [m, b.i64([2], "axes")])
    m = b.op("Cast", [m], to=F32)
    m = b.op("Sub", [b.f32(1.0, "one"), m])
    ext = b.op("Mul", [m, b.f32(-10000.0, "neg")])

    q = b.split_heads(b.linear(x, H, H, "q"), heads, hd)
    k = b.split_heads(b.linear(x, H, H, "k"), heads, hd)
    v = b.split_heads(b.linear(x, H, H, "v"), heads, hd)
    s = b.op("Add", [attention_scores(b, q, k, hd), ext])
    p = b.op("Softmax", [s], axis=-1)
    ctx = b.merge_heads(b.op("MatMul", [p, v]), H)
    attn = b.linear(ctx, H, H, "attn_out")
    h1 = b.layer_norm(b.op("Add", [attn, x]), H, 1e-12)

    # Gelu as torch exports nn.functional.gelu (exact) at opset 17.
    f = b.linear(h1, H, ffn, "ffn_in")
    e = b.op("Erf", [b.op("Div", [f, b.f32(1.4142135381698608, "sqrt2")])])
    e = b.op("Add", [e, b.f32(1.0, "one")])
    g = b.op("Mul", [b.op("Mul", [f, e]), b.f32(0.5, "half")])
    f2 = b.linear(g, ffn, H, "ffn_out")
    b.layer_norm(b.op("Add", [f2, h1]), H, 1e-12, out="last_hidden_state")
    b.output("last_hidden_state", F32, ["batch", "seq", H])

    am = np.ones((B, S), dtype=np.int64)
    am[1, S - 13:] = 0  # second sequence is padded: masked keys must not leak
    feeds = {"hidden_states": b.rng.standard_normal((B, S, H)).astype(np.float32),
             "attention_mask": am}
    return b.model(), feeds


def build_gpt_layer():
    b = Builder("gpt_layer", seed=303)
    B, S, H, heads, ffn, max_pos = 2, 64, 256, 4, 1024, 128
    hd = H // heads
    x = b.input("hidden_states", F32, ["batch", "seq", H])

    ln1 = b.layer_norm(x, H, 1e-5)
    qkv = b.linear(ln1, H, 3 * H, "c_attn")
    q, k, v = b.op("Split", [qkv, b.i64([H, H, H], "split")], n_out=3, axis=2)
    q, k, v = (b.split_heads(t, heads, hd) for t in (q, k, v))
    s = attention_scores(b, q, k, hd)

    # GPT-2's registered `bias` buffer: a tril bool mask sliced to [:, :, :seq, :seq].
    tril = np.tril(np.ones((max_pos, max_pos), dtype=bool)).reshape(1, 1, max_pos, max_pos)
    seq = b.dim(s, 2)
    causal = b.op("Slice", [b.const(tril, "causal_bias"), b.i64([0, 0], "starts"),
                            b.op("Concat", [seq, seq], axis=0), b.i64([2, 3], "axes")])
    s = b.op("Where", [causal, s, b.f32(np.finfo(np.float32).min, "mask_value")])
    p = b.op("Softmax", [s], axis=-1)
    ctx = b.merge_heads(b.op("MatMul", [p, v]), H)
    h1 = b.op("Add", [b.linear(ctx, H, H, "c_proj"), x])

    # gelu_new: 0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*x^3))), op order as exported.
    ln2 = b.layer_norm(h1, H, 1e-5)
    f = b.linear(ln2, H, ffn, "c_fc")
    cube = b.op("Mul", [b.op("Pow", [f, b.f32(3.0, "three")]), b.f32(0.044715, "c")])
    t = b.op("Tanh", [b.op("Mul", [b.op("Add", [f, cube]), b.f32(0.7978845608028654, "c")])])
    g = b.op("Mul", [b.op("Mul", [b.f32(0.5, "half"), f]), b.op("Add", [b.f32(1.0, "one"), t])])
    f2 = b.linear(g, ffn, H, "mlp_proj")
    b.op("Add", [f2, h1], out="out_hidden_states")
    b.output("out_hidden_states", F32, ["batch", "seq", H])

    feeds = {"hidden_states": b.rng.standard_normal((B, S, H)).astype(np.float32)}
    return b.model(), feeds


def build_resnet_block():
    b = Builder("resnet_block", seed=404)
    C, mid, HW, classes = 64, 32, 56, 10
    x = b.input("x", F32, [1, C, HW, HW])
    h = b.op("Relu", [b.batch_norm(b.conv(x, C, mid, 1, bias=False), mid)])
    h = b.op("Relu", [b.batch_norm(b.conv(h, mid, mid, 3, pad=1, bias=False), mid)])
    h = b.batch_norm(b.conv(h, mid, C, 1, bias=False), C)
    h = b.op("Relu", [b.op("Add", [h, x])])
    h = b.op("MaxPool", [h], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    h = b.op("Flatten", [b.op("GlobalAveragePool", [h])], axis=1)
    w = b.weight([classes, C], scale=1.0 / np.sqrt(C), base="fc_w")  # torch Linear: [out, in]
    b.op("Gemm", [h, w, b.bias(classes, "fc_b")], out="logits", alpha=1.0, beta=1.0, transB=1)
    b.output("logits", F32, [1, classes])
    feeds = {"x": b.rng.standard_normal((1, C, HW, HW)).astype(np.float32)}
    return b.model(), feeds


def build_vit_patch():
    b = Builder("vit_patch", seed=505)
    D, P, img = 192, 16, 224
    n_tok = (img // P) ** 2
    x = b.input("pixel_values", F32, [1, 3, img, img])
    e = b.conv(x, 3, D, P, stride=P)  # [1, D, 14, 14]
    e = b.op("Reshape", [e, b.i64([0, D, -1])])  # flatten(2): 0 copies the batch dim
    e = b.op("Transpose", [e], perm=[0, 2, 1])  # [1, 196, D]
    # cls_token.expand(batch, -1, -1)
    cls_shape = b.op("Concat", [b.dim(x, 0), b.i64([1]), b.i64([D])], axis=0)
    cls = b.op("Expand", [b.const((0.02 * b.rng.standard_normal((1, 1, D))).astype(np.float32), "cls"),
                          cls_shape])
    t = b.op("Concat", [cls, e], axis=1)
    pos = b.const((0.02 * b.rng.standard_normal((1, n_tok + 1, D))).astype(np.float32), "pos_embed")
    t = b.op("Add", [t, pos])
    g = b.const((1.0 + 0.1 * b.rng.standard_normal(D)).astype(np.float32), "ln_g")
    b.op("LayerNormalization", [t, g, b.bias(D, "ln_b")], out="embeddings", axis=-1, epsilon=1e-6)
    b.output("embeddings", F32, [1, n_tok + 1, D])
    feeds = {"pixel_values": b.rng.standard_normal((1, 3, img, img)).astype(np.float32)}
    return b.model(), feeds


def build_unet_block():
    b = Builder("unet_block", seed=606)
    C, G, HW, Cs, Cout = 64, 32, 16, 32, 32
    x = b.input("x", F32, [1, C, HW, HW])
    skip = b.input("skip", F32, [1, Cs, 2 * HW, 2 * HW])

    # GroupNorm as torch exports it at opset 17 (GroupNormalization is opset 18):
    # reshape to [N, G, -1], InstanceNorm with unit scale, reshape back, per-channel affine.
    r = b.op("Reshape", [x, b.i64([0, G, -1])])
    r = b.op("InstanceNormalization", [r, b.const(np.ones(G, np.float32), "in_s"),
                                       b.const(np.zeros(G, np.float32), "in_b")], epsilon=1e-5)
    r = b.op("Reshape", [r, b.op("Shape", [x])])
    gamma = b.const((1.0 + 0.1 * b.rng.standard_normal((C, 1, 1))).astype(np.float32), "gn_g")
    beta = b.const((0.1 * b.rng.standard_normal((C, 1, 1))).astype(np.float32), "gn_b")
    h = b.op("Add", [b.op("Mul", [r, gamma]), beta])
    h = b.op("Mul", [h, b.op("Sigmoid", [h])])  # SiLU
    h = b.conv(h, C, C, 3, pad=1)
    # F.interpolate(scale_factor=2, mode="nearest"): Resize with empty roi and sizes.
    h = b.op("Resize", [h, "", b.const(np.array([1, 1, 2, 2], np.float32), "scales")],
             mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    h = b.op("Concat", [h, skip], axis=1)
    w = b.weight([Cout, C + Cs, 3, 3], scale=1.0 / np.sqrt((C + Cs) * 9), base="conv_w")
    b.op("Conv", [h, w, b.bias(Cout, "conv_b")], out="y", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    b.output("y", F32, [1, Cout, 2 * HW, 2 * HW])
    feeds = {"x": b.rng.standard_normal((1, C, HW, HW)).astype(np.float32),
             "skip": b.rng.standard_normal((1, Cs, 2 * HW, 2 * HW)).astype(np.float32)}
    return b.model(), feeds


MODELS = {
    "mlp": build_mlp,
    "bert_layer": build_bert_layer,
    "gpt_layer": build_gpt_layer,
    "resnet_block": build_resnet_block,
    "vit_patch": build_vit_patch,
    "unet_block": build_unet_block,
}


def reference_outputs(model, feeds):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1  # deterministic reductions
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return names, sess.run(names, feeds)


def write_model(outdir, name):
    model, feeds = MODELS[name]()
    onnx.checker.check_model(model, full_check=True)  # full_check also runs shape inference
    mdir = os.path.join(outdir, name)
    ddir = os.path.join(mdir, "test_data_set_0")
    os.makedirs(ddir, exist_ok=True)
    onnx.save(model, os.path.join(mdir, "model.onnx"))
    for i, vi in enumerate(model.graph.input):
        t = numpy_helper.from_array(feeds[vi.name], vi.name)
        with open(os.path.join(ddir, f"input_{i}.pb"), "wb") as f:
            f.write(t.SerializeToString())
    names, outs = reference_outputs(model, feeds)
    assert names == [o.name for o in model.graph.output]
    for i, (n, arr) in enumerate(zip(names, outs)):
        if not np.all(np.isfinite(arr)):
            raise RuntimeError(f"{name}: reference output {n} is not finite")
        with open(os.path.join(ddir, f"output_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(arr, n).SerializeToString())
    print(f"{name}: {len(model.graph.node)} nodes, outputs "
          + ", ".join(f"{n}{list(a.shape)} rms={np.sqrt(np.mean(a.astype(np.float64) ** 2)):.3g}"
                      for n, a in zip(names, outs)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir", nargs="?")
    ap.add_argument("--only", nargs="*", choices=sorted(MODELS), help="models to write")
    ap.add_argument("--list", action="store_true", help="print the model names and exit")
    args = ap.parse_args()
    if args.list:
        print("\n".join(MODELS))
        return 0
    if not args.outdir:
        ap.error("OUTDIR is required")
    for name in args.only or MODELS:
        write_model(args.outdir, name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
