#!/usr/bin/env python3
"""Full-size models for drkc's benchmarks, built the way PyTorch exports them (opset 17, IR 8).

Writes, for each model, DIR/<name>/model.onnx (weights as initializers; external data in one
file DIR/<name>/model.onnx.data when the weights pass 1.8 GB, protobuf's 2 GB limit being near)
and DIR/<name>/test_data_set_0/input_N.pb and output_N.pb, the outputs from ONNX Runtime on the
CPU with graph optimizations disabled (on a 2-core machine: llama_decoder 35 s, the others under
3 s; --outputs=none skips them). Weights are random from fixed seeds, scaled like the models' own
initializations (N(0, 0.02) for transformer matrices, He-normal for convolutions, norms near 1,
benign BatchNorm statistics), so activations stay O(1) through every layer, also in fp16.

Every parameter initializer has a stable name (e.g. "encoder.layer.3.attention.self.query.weight")
and the model's metadata_props["drk_full_model"] holds {"name", "config"} as JSON: that is all
full_models_torch.py needs to build the PyTorch twin. Weight layout: MatMul weights are
[in, out] (as torch.onnx writes nn.Linear for 3-D inputs); Gemm and Conv weights keep torch's
[out, in, ...] layout.

--medium writes gpt2_small and llama_decoder with 2 layers at seq 512 and the full models'
head dims (64, 128): long enough causal sequences for every code path of the flash kernel, small
enough for the interpreter's --check. --small writes the same graphs at a small configuration (2 layers, short sequences) for
oracle tests on the CPU; the names and structure are identical.

Usage: gen_full_models.py OUTDIR [--only NAME ...] [--small | --medium] [--layers N] [--outputs all|none] [--list]
"""

import argparse
import json
import os
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_models import Builder, attention_scores  # noqa: E402  (opset 17, IR 8)

F32 = TensorProto.FLOAT
I64 = TensorProto.INT64
EXTERNAL_DATA_BYTES = int(1.8e9)
METADATA_KEY = "drk_full_model"
INT64_MAX = np.iinfo(np.int64).max

CONFIGS = {
    "resnet50": {
        "full": dict(blocks=[3, 4, 6, 3], width=64, classes=1000, image=224, batch=1),
        "small": dict(blocks=[1, 1, 1, 1], width=8, classes=10, image=64, batch=1),
    },
    "bert_base": {
        "full": dict(layers=12, hidden=768, heads=12, ffn=3072, seq=128, vocab=30522,
                     max_pos=512, type_vocab=2, pad=16, batch=1),
        "small": dict(layers=2, hidden=64, heads=4, ffn=256, seq=32, vocab=100, max_pos=64,
                      type_vocab=2, pad=5, batch=1, std=0.07),
    },
    "gpt2_small": {
        "full": dict(layers=12, hidden=768, heads=12, seq=1024, vocab=50257, max_pos=1024,
                     batch=1),
        "small": dict(layers=2, hidden=64, heads=4, seq=32, vocab=100, max_pos=64, batch=1,
                      std=0.07),
        "medium": dict(layers=2, hidden=256, heads=4, seq=512, vocab=1000, max_pos=512, batch=1,
                       std=0.05),
    },
    "vit_b16": {
        "full": dict(layers=12, hidden=768, heads=12, ffn=3072, image=224, patch=16,
                     classes=1000, batch=1),
        "small": dict(layers=2, hidden=64, heads=4, ffn=256, image=64, patch=16, classes=10,
                      batch=1, std=0.07),
    },
    "llama_decoder": {
        "full": dict(layers=8, hidden=2048, heads=16, kv_heads=4, ffn=5632, seq=2048,
                     max_pos=2048, eps=1e-5, rope_theta=10000.0, batch=1),
        "small": dict(layers=2, hidden=128, heads=4, kv_heads=2, ffn=256, seq=32, max_pos=64,
                      eps=1e-5, rope_theta=10000.0, batch=1, std=0.05),
        "medium": dict(layers=2, hidden=512, heads=4, kv_heads=2, ffn=1024, seq=512, max_pos=512,
                       eps=1e-5, rope_theta=10000.0, batch=1, std=0.03),
    },
}

class Net(Builder):
    """gen_models.Builder plus parameters with stable, torch-like names."""

    def __init__(self, name, seed, config):
        super().__init__(name, seed)
        self.config = config

    def param(self, name, arr):
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def randn(self, name, shape, std):
        return self.param(name, self.rng.standard_normal(shape, dtype=np.float32) * np.float32(std))

    def near_one(self, name, n, spread=0.05):
        # Not exactly 1: a twin that swapped two norm weights must not match by accident.
        return self.param(name, 1.0 + self.rng.standard_normal(n, dtype=np.float32) * np.float32(spread))

    def linear(self, x, k, n, name, bias=True):
        """nn.Linear on a 3-D input as torch.onnx writes it: MatMul([in, out]) + Add."""
        # config "std": the small configs use a larger one, so that their activations are as
        # large as the full models' (std * sqrt(hidden) alike) and a wrong twin shows.
        std = self.config.get("std", 0.02)
        y = self.op("MatMul", [x, self.randn(f"{name}.weight", [k, n], std)])
        if bias:
            y = self.op("Add", [y, self.randn(f"{name}.bias", [n], 0.02)])
        return y

    def layer_norm(self, x, n, name, eps, out=None):
        g = self.near_one(f"{name}.weight", n)
        b = self.randn(f"{name}.bias", [n], 0.02)
        return self.op("LayerNormalization", [x, g, b], out=out, axis=-1, epsilon=eps)

    def gelu_erf(self, x):
        e = self.op("Erf", [self.op("Div", [x, self.f32(1.4142135381698608, "sqrt2")])])
        e = self.op("Add", [e, self.f32(1.0, "one")])
        return self.op("Mul", [self.op("Mul", [x, e]), self.f32(0.5, "half")])

    def model(self):
        m = super().model()
        m.producer_name = "drkc-tests-gen_full_models"
        entry = m.metadata_props.add()
        entry.key = METADATA_KEY
        entry.value = json.dumps({"name": self.name, "config": self.config}, sort_keys=True)
        return m


# ---------------------------------------------------------------------------------------------
# Models. Each takes a config dict and returns (model, {input name: array}).


def build_resnet50(c):
    """torchvision resnet50 (v1.5: stride on the 3x3 conv), BatchNorm unfused, as exported."""
    b = Net("resnet50", 1001, c)
    B, img, w0 = c["batch"], c["image"], c["width"]
    x = b.input("x", F32, [B, 3, img, img])

    def conv(h, name, cin, cout, k, stride=1, pad=0):
        wt = b.randn(f"{name}.weight", [cout, cin, k, k], np.sqrt(2.0 / (cin * k * k)))
        return b.op("Conv", [h, wt], kernel_shape=[k, k], strides=[stride, stride],
                    pads=[pad] * 4, dilations=[1, 1], group=1)

    def bn(h, name, ch, gain=1.0):
        # The last BN of a residual branch gets a small gain (like zero_init_residual, but not
        # zero), so 16 residual additions grow the activations by ~4x, not ~2^8.
        s = b.param(f"{name}.weight", gain * (1.0 + 0.1 * b.rng.standard_normal(ch, dtype=np.float32)))
        bb = b.randn(f"{name}.bias", [ch], 0.1)
        m = b.randn(f"{name}.running_mean", [ch], 0.1)
        v = b.param(f"{name}.running_var", b.rng.uniform(0.5, 1.5, ch).astype(np.float32))
        return b.op("BatchNormalization", [h, s, bb, m, v], epsilon=1e-5, momentum=0.9)

    h = b.op("Relu", [bn(conv(x, "conv1", 3, w0, 7, 2, 3), "bn1", w0)])
    h = b.op("MaxPool", [h], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = w0
    for li, nblocks in enumerate(c["blocks"]):
        width = w0 * 2 ** li
        cout = width * 4
        for bi in range(nblocks):
            p = f"layer{li + 1}.{bi}"
            stride = 2 if (bi == 0 and li > 0) else 1
            t = b.op("Relu", [bn(conv(h, f"{p}.conv1", cin, width, 1), f"{p}.bn1", width)])
            t = b.op("Relu", [bn(conv(t, f"{p}.conv2", width, width, 3, stride, 1), f"{p}.bn2", width)])
            t = bn(conv(t, f"{p}.conv3", width, cout, 1), f"{p}.bn3", cout, gain=0.2)
            sc = h
            if bi == 0:
                sc = bn(conv(h, f"{p}.downsample.0", cin, cout, 1, stride), f"{p}.downsample.1", cout)
            h = b.op("Relu", [b.op("Add", [t, sc])])
            cin = cout
    h = b.op("Flatten", [b.op("GlobalAveragePool", [h])], axis=1)
    fw = b.randn("fc.weight", [c["classes"], cin], 1.0 / np.sqrt(cin))
    fb = b.randn("fc.bias", [c["classes"]], 0.02)
    b.op("Gemm", [h, fw, fb], out="logits", alpha=1.0, beta=1.0, transB=1)
    b.output("logits", F32, [B, c["classes"]])
    feeds = {"x": b.rng.standard_normal((B, 3, img, img), dtype=np.float32)}
    return b.model(), feeds


def build_bert_base(c):
    """HF BertModel (last_hidden_state): embeddings, 12 post-LN layers, Erf GELU."""
    b = Net("bert_base", 1002, c)
    B, S, H, nh = c["batch"], c["seq"], c["hidden"], c["heads"]
    hd = H // nh
    ids = b.input("input_ids", I64, [B, S])
    mask = b.input("attention_mask", I64, [B, S])
    tt = b.input("token_type_ids", I64, [B, S])

    # Extended mask: (1 - mask[:, None, None, :]) * -10000.
    m = b.op("Unsqueeze", [mask, b.i64([1], "axes")])
    m = b.op("Unsqueeze", [m, b.i64([2], "axes")])
    m = b.op("Sub", [b.f32(1.0, "one"), b.op("Cast", [m], to=F32)])
    ext = b.op("Mul", [m, b.f32(-10000.0, "neg")])

    we = b.op("Gather", [b.randn("embeddings.word_embeddings.weight", [c["vocab"], H], 0.02), ids], axis=0)
    te = b.op("Gather", [b.randn("embeddings.token_type_embeddings.weight", [c["type_vocab"], H], 0.02), tt], axis=0)
    # position_ids buffer [1, max_pos] sliced to [:, :seq].
    pos_buf = b.param("embeddings.position_ids", np.arange(c["max_pos"], dtype=np.int64).reshape(1, -1))
    pos = b.op("Slice", [pos_buf, b.i64([0], "starts"), b.dim(ids, 1), b.i64([1], "axes")])
    pe = b.op("Gather", [b.randn("embeddings.position_embeddings.weight", [c["max_pos"], H], 0.02), pos], axis=0)
    h = b.op("Add", [b.op("Add", [we, te]), pe])
    h = b.layer_norm(h, H, "embeddings.LayerNorm", 1e-12)

    for i in range(c["layers"]):
        p = f"encoder.layer.{i}"
        q = b.split_heads(b.linear(h, H, H, f"{p}.attention.self.query"), nh, hd)
        k = b.split_heads(b.linear(h, H, H, f"{p}.attention.self.key"), nh, hd)
        v = b.split_heads(b.linear(h, H, H, f"{p}.attention.self.value"), nh, hd)
        s = b.op("Add", [attention_scores(b, q, k, hd), ext])
        ctx = b.merge_heads(b.op("MatMul", [b.op("Softmax", [s], axis=-1), v]), H)
        a = b.linear(ctx, H, H, f"{p}.attention.output.dense")
        h = b.layer_norm(b.op("Add", [a, h]), H, f"{p}.attention.output.LayerNorm", 1e-12)
        f = b.gelu_erf(b.linear(h, H, c["ffn"], f"{p}.intermediate.dense"))
        f = b.linear(f, c["ffn"], H, f"{p}.output.dense")
        last = i == c["layers"] - 1
        h = b.layer_norm(b.op("Add", [f, h]), H, f"{p}.output.LayerNorm", 1e-12,
                         out="last_hidden_state" if last else None)
    b.output("last_hidden_state", F32, [B, S, H])

    am = np.ones((B, S), dtype=np.int64)
    am[:, S - c["pad"]:] = 0  # padded tail: masked keys must not leak
    ttv = np.zeros((B, S), dtype=np.int64)
    ttv[:, S // 2:] = 1
    feeds = {"input_ids": b.rng.integers(0, c["vocab"], (B, S), dtype=np.int64),
             "attention_mask": am, "token_type_ids": ttv}
    return b.model(), feeds


def build_gpt2_small(c):
    """HF GPT2Model (last_hidden_state): pre-LN, fused QKV + Split, tril + Where, tanh GELU."""
    b = Net("gpt2_small", 1003, c)
    B, S, H, nh, P = c["batch"], c["seq"], c["hidden"], c["heads"], c["max_pos"]
    hd = H // nh
    ids = b.input("input_ids", I64, [B, S])
    # position_ids = arange(0, seq).unsqueeze(0): Range on a scalar taken from Shape.
    seq = b.op("Gather", [b.op("Shape", [ids]), b.const(np.array(1, np.int64), "idx")], axis=0)
    pos = b.op("Range", [b.const(np.array(0, np.int64), "zero"), seq, b.const(np.array(1, np.int64), "one")])
    pos = b.op("Unsqueeze", [pos, b.i64([0], "axes")])
    we = b.op("Gather", [b.randn("wte.weight", [c["vocab"], H], 0.02), ids], axis=0)
    pe = b.op("Gather", [b.randn("wpe.weight", [P, H], 0.01), pos], axis=0)
    h = b.op("Add", [we, pe])

    tril = b.param("causal_bias", np.tril(np.ones((P, P), dtype=bool)).reshape(1, 1, P, P))
    mask_value = b.f32(np.finfo(np.float32).min, "mask_value")
    for i in range(c["layers"]):
        p = f"h.{i}"
        x = b.layer_norm(h, H, f"{p}.ln_1", 1e-5)
        qkv = b.linear(x, H, 3 * H, f"{p}.attn.c_attn")
        q, k, v = b.op("Split", [qkv, b.i64([H, H, H], "split")], n_out=3, axis=2)
        q, k, v = (b.split_heads(t, nh, hd) for t in (q, k, v))
        s = attention_scores(b, q, k, hd)
        sl = b.dim(s, 2)
        causal = b.op("Slice", [tril, b.i64([0, 0], "starts"), b.op("Concat", [sl, sl], axis=0),
                                b.i64([2, 3], "axes")])
        s = b.op("Where", [causal, s, mask_value])
        ctx = b.merge_heads(b.op("MatMul", [b.op("Softmax", [s], axis=-1), v]), H)
        h = b.op("Add", [b.linear(ctx, H, H, f"{p}.attn.c_proj"), h])
        x = b.layer_norm(h, H, f"{p}.ln_2", 1e-5)
        f = b.linear(x, H, 4 * H, f"{p}.mlp.c_fc")
        cube = b.op("Mul", [b.op("Pow", [f, b.f32(3.0, "three")]), b.f32(0.044715, "c")])
        t = b.op("Tanh", [b.op("Mul", [b.op("Add", [f, cube]), b.f32(0.7978845608028654, "c")])])
        g = b.op("Mul", [b.op("Mul", [b.f32(0.5, "half"), f]), b.op("Add", [b.f32(1.0, "one"), t])])
        h = b.op("Add", [b.linear(g, 4 * H, H, f"{p}.mlp.c_proj"), h])
    b.layer_norm(h, H, "ln_f", 1e-5, out="last_hidden_state")
    b.output("last_hidden_state", F32, [B, S, H])
    feeds = {"input_ids": b.rng.integers(0, c["vocab"], (B, S), dtype=np.int64)}
    return b.model(), feeds


def build_vit_b16(c):
    """HF ViTForImageClassification (logits): conv patches, class token, pre-LN layers."""
    b = Net("vit_b16", 1004, c)
    B, img, P, H, nh = c["batch"], c["image"], c["patch"], c["hidden"], c["heads"]
    hd, n_tok = H // nh, (c["image"] // c["patch"]) ** 2
    x = b.input("pixel_values", F32, [B, 3, img, img])
    wt = b.randn("embeddings.patch_embeddings.projection.weight", [H, 3, P, P], 1.0 / np.sqrt(3 * P * P))
    bias = b.randn("embeddings.patch_embeddings.projection.bias", [H], 0.02)
    e = b.op("Conv", [x, wt, bias], kernel_shape=[P, P], strides=[P, P], pads=[0, 0, 0, 0],
             dilations=[1, 1], group=1)
    e = b.op("Transpose", [b.op("Reshape", [e, b.i64([0, H, -1])])], perm=[0, 2, 1])  # flatten(2).transpose(1, 2)
    cls_shape = b.op("Concat", [b.dim(x, 0), b.i64([1]), b.i64([H])], axis=0)
    cls = b.op("Expand", [b.randn("embeddings.cls_token", [1, 1, H], 0.02), cls_shape])
    h = b.op("Concat", [cls, e], axis=1)
    h = b.op("Add", [h, b.randn("embeddings.position_embeddings", [1, n_tok + 1, H], 0.02)])

    for i in range(c["layers"]):
        p = f"encoder.layer.{i}"
        x1 = b.layer_norm(h, H, f"{p}.layernorm_before", 1e-12)
        q = b.split_heads(b.linear(x1, H, H, f"{p}.attention.attention.query"), nh, hd)
        k = b.split_heads(b.linear(x1, H, H, f"{p}.attention.attention.key"), nh, hd)
        v = b.split_heads(b.linear(x1, H, H, f"{p}.attention.attention.value"), nh, hd)
        pr = b.op("Softmax", [attention_scores(b, q, k, hd)], axis=-1)
        ctx = b.merge_heads(b.op("MatMul", [pr, v]), H)
        h = b.op("Add", [b.linear(ctx, H, H, f"{p}.attention.output.dense"), h])
        x2 = b.layer_norm(h, H, f"{p}.layernorm_after", 1e-12)
        f = b.gelu_erf(b.linear(x2, H, c["ffn"], f"{p}.intermediate.dense"))
        h = b.op("Add", [b.linear(f, c["ffn"], H, f"{p}.output.dense"), h])
    h = b.layer_norm(h, H, "layernorm", 1e-12)
    cls_out = b.op("Gather", [h, b.const(np.array(0, np.int64), "idx")], axis=1)  # [:, 0, :]
    cw = b.randn("classifier.weight", [c["classes"], H], 0.02)
    b.op("Gemm", [cls_out, cw, b.randn("classifier.bias", [c["classes"]], 0.02)], out="logits",
         alpha=1.0, beta=1.0, transB=1)
    b.output("logits", F32, [B, c["classes"]])
    feeds = {"pixel_values": b.rng.standard_normal((B, 3, img, img), dtype=np.float32)}
    return b.model(), feeds


def build_llama_decoder(c):
    """HF LlamaModel's decoder stack on hidden states: RMSNorm as primitives, RoPE, GQA, SwiGLU."""
    b = Net("llama_decoder", 1005, c)
    B, S, H, nh, nkv, P = c["batch"], c["seq"], c["hidden"], c["heads"], c["kv_heads"], c["max_pos"]
    hd, rep = H // nh, nh // nkv
    x = b.input("hidden_states", F32, [B, S, H])

    def rms_norm(t, name, out=None):
        var = b.op("ReduceMean", [b.op("Pow", [t, b.f32(2.0, "two")])], axes=[-1], keepdims=1)
        r = b.op("Div", [b.f32(1.0, "one"), b.op("Sqrt", [b.op("Add", [var, b.f32(c["eps"], "eps")])])])
        return b.op("Mul", [b.near_one(f"{name}.weight", H), b.op("Mul", [t, r])], out=out)

    inv_freq = 1.0 / (c["rope_theta"] ** (np.arange(0, hd, 2, dtype=np.float64) / hd))
    ang = np.outer(np.arange(P, dtype=np.float64), inv_freq)
    ang = np.concatenate([ang, ang], axis=-1)
    cos_t = b.param("rotary_emb.cos_cached", np.cos(ang).astype(np.float32))
    sin_t = b.param("rotary_emb.sin_cached", np.sin(ang).astype(np.float32))
    seq = b.dim(x, 1)
    zero, axes01 = b.i64([0], "starts"), b.i64([0, 1], "axes")
    cos = b.op("Unsqueeze", [b.op("Slice", [cos_t, zero, seq, b.i64([0], "axes")]), axes01])
    sin = b.op("Unsqueeze", [b.op("Slice", [sin_t, zero, seq, b.i64([0], "axes")]), axes01])
    tril = b.param("causal_mask", np.tril(np.ones((P, P), dtype=bool)).reshape(1, 1, P, P))
    causal = b.op("Slice", [tril, b.i64([0, 0], "starts"), b.op("Concat", [seq, seq], axis=0),
                            b.i64([2, 3], "axes")])
    mask_value = b.f32(np.finfo(np.float32).min, "mask_value")

    def rope(t):
        x1 = b.op("Slice", [t, b.i64([0], "starts"), b.i64([hd // 2], "ends"), b.i64([-1], "axes")])
        x2 = b.op("Slice", [t, b.i64([hd // 2], "starts"), b.i64([INT64_MAX], "ends"), b.i64([-1], "axes")])
        rot = b.op("Concat", [b.op("Neg", [x2]), x1], axis=-1)
        return b.op("Add", [b.op("Mul", [t, cos]), b.op("Mul", [rot, sin])])

    def repeat_kv(t):
        """t[:, :, None].expand(b, kv, rep, s, hd).reshape(b, kv * rep, s, hd)."""
        bs, ss = b.dim(t, 0), b.dim(t, 2)
        e = b.op("Expand", [b.op("Unsqueeze", [t, b.i64([2], "axes")]),
                            b.op("Concat", [bs, b.i64([nkv]), b.i64([rep]), ss, b.i64([hd])], axis=0)])
        return b.op("Reshape", [e, b.op("Concat", [bs, b.i64([nh]), ss, b.i64([hd])], axis=0)])

    h = x
    for i in range(c["layers"]):
        p = f"layers.{i}"
        t = rms_norm(h, f"{p}.input_layernorm")
        q = rope(b.split_heads(b.linear(t, H, H, f"{p}.self_attn.q_proj", bias=False), nh, hd))
        k = rope(b.split_heads(b.linear(t, H, nkv * hd, f"{p}.self_attn.k_proj", bias=False), nkv, hd))
        v = b.split_heads(b.linear(t, H, nkv * hd, f"{p}.self_attn.v_proj", bias=False), nkv, hd)
        k, v = repeat_kv(k), repeat_kv(v)
        s = b.op("MatMul", [q, b.op("Transpose", [k], perm=[0, 1, 3, 2])])
        s = b.op("Mul", [s, b.f32(1.0 / np.sqrt(hd), "scaling")])
        s = b.op("Where", [causal, s, mask_value])
        ctx = b.merge_heads(b.op("MatMul", [b.op("Softmax", [s], axis=-1), v]), H)
        h = b.op("Add", [h, b.linear(ctx, H, H, f"{p}.self_attn.o_proj", bias=False)])
        t = rms_norm(h, f"{p}.post_attention_layernorm")
        g = b.linear(t, H, c["ffn"], f"{p}.mlp.gate_proj", bias=False)
        g = b.op("Mul", [g, b.op("Sigmoid", [g])])  # SiLU
        u = b.linear(t, H, c["ffn"], f"{p}.mlp.up_proj", bias=False)
        d = b.linear(b.op("Mul", [g, u]), c["ffn"], H, f"{p}.mlp.down_proj", bias=False)
        h = b.op("Add", [h, d])
    rms_norm(h, "norm", out="last_hidden_state")
    b.output("last_hidden_state", F32, [B, S, H])
    feeds = {"hidden_states": b.rng.standard_normal((B, S, H), dtype=np.float32)}
    return b.model(), feeds


MODELS = {
    "resnet50": build_resnet50,
    "bert_base": build_bert_base,
    "gpt2_small": build_gpt2_small,
    "vit_b16": build_vit_b16,
    "llama_decoder": build_llama_decoder,
}


def build(name, size="full", layers=None):
    """(model, feeds) for one model at size 'full' or 'small' (layers: override the depth)."""
    c = dict(CONFIGS[name][size])
    if layers:
        c["layers"] = layers
    return MODELS[name](c)


def weight_bytes(model):
    return sum(len(t.raw_data) for t in model.graph.initializer)


def reference_outputs(model_or_path, feeds, threads=0):
    """ONNX Runtime on the CPU, every graph optimization off: the graph as written."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    if threads:
        so.intra_op_num_threads = threads
    src = model_or_path if isinstance(model_or_path, str) else model_or_path.SerializeToString()
    sess = ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return names, sess.run(names, feeds)


def rms(a):
    return float(np.sqrt(np.mean(a.astype(np.float64) ** 2)))


def write_model(outdir, name, size, outputs, layers=None):
    t0 = time.time()
    model, feeds = build(name, size, layers)
    mdir = os.path.join(outdir, name)
    ddir = os.path.join(mdir, "test_data_set_0")
    os.makedirs(ddir, exist_ok=True)
    for stale in os.listdir(ddir):
        if stale.endswith(".pb"):
            os.remove(os.path.join(ddir, stale))
    path = os.path.join(mdir, "model.onnx")
    nbytes = weight_bytes(model)
    n_nodes = len(model.graph.node)
    if nbytes > EXTERNAL_DATA_BYTES:
        data = os.path.join(mdir, "model.onnx.data")
        if os.path.exists(data):
            os.remove(data)  # onnx appends to an existing data file
        onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                        location="model.onnx.data", size_threshold=1024)
        onnx.checker.check_model(path, full_check=True)
    else:
        onnx.checker.check_model(model, full_check=True)  # full_check also runs shape inference
        onnx.save(model, path)
    del model
    for i, (n, arr) in enumerate(feeds.items()):
        with open(os.path.join(ddir, f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(arr, n).SerializeToString())
    msg = f"{name} ({size}): {n_nodes} nodes, {nbytes / 1e6:.1f} MB of weights"
    if outputs == "all":
        t1 = time.time()
        names, outs = reference_outputs(path, feeds)
        for i, (n, arr) in enumerate(zip(names, outs)):
            if not np.all(np.isfinite(arr)):
                raise RuntimeError(f"{name}: reference output {n} is not finite")
            with open(os.path.join(ddir, f"output_{i}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(arr, n).SerializeToString())
        msg += (f", ORT {time.time() - t1:.1f} s, outputs "
                + ", ".join(f"{n}{list(a.shape)} rms={rms(a):.3g} max={np.abs(a).max():.3g}"
                            for n, a in zip(names, outs)))
    else:
        msg += ", no expected outputs (--outputs=none)"
    print(msg + f" [{time.time() - t0:.1f} s]", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir", nargs="?")
    ap.add_argument("--only", nargs="*", choices=sorted(MODELS), help="models to write")
    ap.add_argument("--small", action="store_true", help="small configurations (2 layers, short)")
    ap.add_argument("--medium", action="store_true",
                    help="medium configurations (gpt2_small, llama_decoder: 2 layers, seq 512, the full "
                         "models' head dims) to check the GPU kernels on long causal sequences")
    ap.add_argument("--outputs", choices=["all", "none"], default="all",
                    help="expected outputs from ONNX Runtime (none: inputs only, faster)")
    ap.add_argument("--layers", type=int, help="override the number of layers (for profiling one layer)")
    ap.add_argument("--list", action="store_true", help="print the model names and exit")
    args = ap.parse_args()
    if args.list:
        print("\n".join(MODELS))
        return 0
    if not args.outdir:
        ap.error("OUTDIR is required")
    for name in args.only or MODELS:
        size = "small" if args.small else "medium" if args.medium else "full"
        if size not in CONFIGS[name]:
            ap.error(f"{name} has no {size} configuration")
        write_model(args.outdir, name, size, args.outputs, args.layers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
