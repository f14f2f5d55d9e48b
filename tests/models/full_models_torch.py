#!/usr/bin/env python3
"""PyTorch twins of the models that gen_full_models.py writes: the peers drkc is timed against.

A twin is an ordinary torch.nn.Module (nn.Linear, nn.LayerNorm, nn.Conv2d, nn.BatchNorm2d,
nn.Embedding, written the way the Hugging Face / torchvision models are) that computes the same
function as the ONNX graph, with the weights copied from the graph's initializers by name. What
model and configuration a file holds comes from its metadata_props["drk_full_model"], so the
ONNX file alone is enough. MatMul weights are stored [in, out] in the ONNX file and transposed
into nn.Linear's [out, in] here.

Attention comes in two forms: attn="sdpa" (F.scaled_dot_product_attention, what the HF models
run by default, and the fastest eager baseline) and attn="math" (matmul, mask, softmax, matmul,
op for op like the graph). Both compute the graph's function; in float16 the twin follows the
HF models' own choices (masks use the dtype's most negative value, RMSNorm in float32).

Requires torch, onnx, numpy. Self-test on the CPU (also run by tests/bench/peers.py --verify):
    full_models_torch.py --verify     compares each twin in f32 with ONNX Runtime, small configs
"""

import json
import math
import os
import sys

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper
from torch import nn

METADATA_KEY = "drk_full_model"


def model_info(model):
    """(name, config) stored by gen_full_models.py."""
    for p in model.metadata_props:
        if p.key == METADATA_KEY:
            d = json.loads(p.value)
            return d["name"], d["config"]
    raise ValueError("not a gen_full_models.py model: no metadata_props['%s']" % METADATA_KEY)


class Weights:
    """Initializers by name; every one must be used exactly once (a name typo must not pass)."""

    def __init__(self, model):
        self.arrays = {t.name: t for t in model.graph.initializer}
        self.used = set()

    def get(self, name, transpose=False):
        if name not in self.arrays:
            raise KeyError(f"initializer {name!r} missing from the ONNX model")
        self.used.add(name)
        a = numpy_helper.to_array(self.arrays[name])
        if transpose:
            a = a.T
        return torch.from_numpy(np.array(a, copy=True, order="C"))  # owned and writable

    def linear(self, mod, name, transpose=True):
        with torch.no_grad():
            mod.weight.copy_(self.get(f"{name}.weight", transpose))
            if getattr(mod, "bias", None) is not None:
                mod.bias.copy_(self.get(f"{name}.bias"))

    def norm(self, mod, name):
        self.linear(mod, name, transpose=False)

    def param(self, name):
        return nn.Parameter(self.get(name), requires_grad=False)

    def check_all_used(self):
        params = {n for n, t in self.arrays.items() if t.data_type == onnx.TensorProto.FLOAT
                  and "." in n}
        missing = sorted(params - self.used)
        if missing:
            raise AssertionError(f"initializers not used by the twin: {missing[:8]}")


def linear(k, n, bias=True):
    return nn.Linear(k, n, bias=bias)


def attention(q, k, v, attn, mask=None, causal=False, scale=None, gqa=1):
    """q [B,h,S,d], k/v [B,h/gqa,S,d]. mask: additive, broadcast to [B,h,S,S]."""
    hd = q.shape[-1]
    if attn == "sdpa":
        if gqa > 1:
            try:
                return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal,
                                                      scale=scale, enable_gqa=True)
            except TypeError:  # torch < 2.5: no enable_gqa
                k, v = repeat_kv(k, gqa), repeat_kv(v, gqa)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, scale=scale)
    if gqa > 1:
        k, v = repeat_kv(k, gqa), repeat_kv(v, gqa)
    s = q @ k.transpose(-1, -2)
    s = s * scale if scale is not None else s / math.sqrt(hd)
    if mask is not None:
        s = s + mask
    if causal:
        S = s.shape[-1]
        keep = torch.ones(S, S, dtype=torch.bool, device=s.device).tril()
        s = s.masked_fill(~keep, torch.finfo(s.dtype).min)
    return torch.softmax(s, dim=-1) @ v


def repeat_kv(t, rep):
    b, kv, s, d = t.shape
    return t[:, :, None].expand(b, kv, rep, s, d).reshape(b, kv * rep, s, d)


def heads(t, n):
    b, s, h = t.shape
    return t.view(b, s, n, h // n).permute(0, 2, 1, 3)


def merge(t):
    b, n, s, d = t.shape
    return t.permute(0, 2, 1, 3).reshape(b, s, n * d)


# ---- ResNet-50 ---------------------------------------------------------------------------


class Bottleneck(nn.Module):
    def __init__(self, w, p, cin, width, stride, down):
        super().__init__()
        cout = width * 4
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                        nn.BatchNorm2d(cout)) if down else None
        for i in (1, 2, 3):
            load_conv(w, getattr(self, f"conv{i}"), f"{p}.conv{i}")
            load_bn(w, getattr(self, f"bn{i}"), f"{p}.bn{i}")
        if down:
            load_conv(w, self.downsample[0], f"{p}.downsample.0")
            load_bn(w, self.downsample[1], f"{p}.downsample.1")

    def forward(self, x):
        t = F.relu(self.bn1(self.conv1(x)))
        t = F.relu(self.bn2(self.conv2(t)))
        t = self.bn3(self.conv3(t))
        sc = self.downsample(x) if self.downsample is not None else x
        return F.relu(t + sc)


def load_conv(w, mod, name):
    with torch.no_grad():
        mod.weight.copy_(w.get(f"{name}.weight"))


def load_bn(w, mod, name):
    with torch.no_grad():
        mod.weight.copy_(w.get(f"{name}.weight"))
        mod.bias.copy_(w.get(f"{name}.bias"))
        mod.running_mean.copy_(w.get(f"{name}.running_mean"))
        mod.running_var.copy_(w.get(f"{name}.running_var"))
    mod.eps = 1e-5


class ResNet50(nn.Module):
    def __init__(self, w, c, attn):
        super().__init__()
        w0 = c["width"]
        self.conv1 = nn.Conv2d(3, w0, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(w0)
        load_conv(w, self.conv1, "conv1")
        load_bn(w, self.bn1, "bn1")
        blocks, cin = [], w0
        for li, n in enumerate(c["blocks"]):
            width = w0 * 2 ** li
            for bi in range(n):
                blocks.append(Bottleneck(w, f"layer{li + 1}.{bi}", cin, width,
                                         2 if (bi == 0 and li > 0) else 1, bi == 0))
                cin = width * 4
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, c["classes"])
        w.linear(self.fc, "fc", transpose=False)  # Gemm transB=1: torch layout already

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 3, 2, 1)
        h = self.blocks(h)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(h, 1), 1))


# ---- BERT ----------------------------------------------------------------------------------


class BertLayer(nn.Module):
    def __init__(self, w, p, c, attn):
        super().__init__()
        H, f = c["hidden"], c["ffn"]
        self.nh, self.attn = c["heads"], attn
        self.query, self.key, self.value, self.dense = (linear(H, H) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(H, eps=1e-12), nn.LayerNorm(H, eps=1e-12)
        self.inter, self.out = linear(H, f), linear(f, H)
        for m, n in ((self.query, "attention.self.query"), (self.key, "attention.self.key"),
                     (self.value, "attention.self.value"), (self.dense, "attention.output.dense"),
                     (self.inter, "intermediate.dense"), (self.out, "output.dense")):
            w.linear(m, f"{p}.{n}")
        w.norm(self.ln1, f"{p}.attention.output.LayerNorm")
        w.norm(self.ln2, f"{p}.output.LayerNorm")

    def forward(self, h, ext):
        q, k, v = heads(self.query(h), self.nh), heads(self.key(h), self.nh), heads(self.value(h), self.nh)
        ctx = merge(attention(q, k, v, self.attn, mask=ext))
        h = self.ln1(self.dense(ctx) + h)
        return self.ln2(self.out(F.gelu(self.inter(h))) + h)


class Bert(nn.Module):
    def __init__(self, w, c, attn):
        super().__init__()
        H = c["hidden"]
        self.word = nn.Embedding(c["vocab"], H)
        self.pos = nn.Embedding(c["max_pos"], H)
        self.token_type = nn.Embedding(c["type_vocab"], H)
        self.ln = nn.LayerNorm(H, eps=1e-12)
        for m, n in ((self.word, "word_embeddings"), (self.pos, "position_embeddings"),
                     (self.token_type, "token_type_embeddings")):
            w.norm(m, f"embeddings.{n}")
        w.norm(self.ln, "embeddings.LayerNorm")
        self.register_buffer("position_ids", w.get("embeddings.position_ids"), persistent=False)
        self.layers = nn.ModuleList(BertLayer(w, f"encoder.layer.{i}", c, attn) for i in range(c["layers"]))

    def forward(self, input_ids, attention_mask, token_type_ids):
        S = input_ids.shape[1]
        dt = self.ln.weight.dtype
        ext = (1.0 - attention_mask[:, None, None, :].to(dt)) * -10000.0
        h = self.word(input_ids) + self.token_type(token_type_ids) + self.pos(self.position_ids[:, :S])
        h = self.ln(h)
        for layer in self.layers:
            h = layer(h, ext)
        return h


# ---- GPT-2 ---------------------------------------------------------------------------------


class GPT2Block(nn.Module):
    def __init__(self, w, p, c, attn):
        super().__init__()
        H = c["hidden"]
        self.nh, self.H, self.attn = c["heads"], H, attn
        self.ln_1, self.ln_2 = nn.LayerNorm(H, eps=1e-5), nn.LayerNorm(H, eps=1e-5)
        self.c_attn, self.c_proj = linear(H, 3 * H), linear(H, H)
        self.c_fc, self.mlp_proj = linear(H, 4 * H), linear(4 * H, H)
        w.norm(self.ln_1, f"{p}.ln_1")
        w.norm(self.ln_2, f"{p}.ln_2")
        w.linear(self.c_attn, f"{p}.attn.c_attn")
        w.linear(self.c_proj, f"{p}.attn.c_proj")
        w.linear(self.c_fc, f"{p}.mlp.c_fc")
        w.linear(self.mlp_proj, f"{p}.mlp.c_proj")

    def forward(self, h):
        q, k, v = self.c_attn(self.ln_1(h)).split(self.H, dim=2)
        ctx = merge(attention(heads(q, self.nh), heads(k, self.nh), heads(v, self.nh), self.attn, causal=True))
        h = self.c_proj(ctx) + h
        f = self.c_fc(self.ln_2(h))
        g = 0.5 * f * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (f + 0.044715 * torch.pow(f, 3.0))))
        return self.mlp_proj(g) + h


class GPT2(nn.Module):
    def __init__(self, w, c, attn):
        super().__init__()
        H = c["hidden"]
        self.wte, self.wpe = nn.Embedding(c["vocab"], H), nn.Embedding(c["max_pos"], H)
        w.norm(self.wte, "wte")
        w.norm(self.wpe, "wpe")
        w.get("causal_bias")  # the twin builds its causal mask itself
        self.h = nn.ModuleList(GPT2Block(w, f"h.{i}", c, attn) for i in range(c["layers"]))
        self.ln_f = nn.LayerNorm(H, eps=1e-5)
        w.norm(self.ln_f, "ln_f")

    def forward(self, input_ids):
        pos = torch.arange(input_ids.shape[1], device=input_ids.device)[None]
        h = self.wte(input_ids) + self.wpe(pos)
        for blk in self.h:
            h = blk(h)
        return self.ln_f(h)


# ---- ViT -----------------------------------------------------------------------------------


class ViTLayer(nn.Module):
    def __init__(self, w, p, c, attn):
        super().__init__()
        H, f = c["hidden"], c["ffn"]
        self.nh, self.attn = c["heads"], attn
        self.ln1, self.ln2 = nn.LayerNorm(H, eps=1e-12), nn.LayerNorm(H, eps=1e-12)
        self.query, self.key, self.value, self.dense = (linear(H, H) for _ in range(4))
        self.inter, self.out = linear(H, f), linear(f, H)
        w.norm(self.ln1, f"{p}.layernorm_before")
        w.norm(self.ln2, f"{p}.layernorm_after")
        for m, n in ((self.query, "attention.attention.query"), (self.key, "attention.attention.key"),
                     (self.value, "attention.attention.value"), (self.dense, "attention.output.dense"),
                     (self.inter, "intermediate.dense"), (self.out, "output.dense")):
            w.linear(m, f"{p}.{n}")

    def forward(self, h):
        x = self.ln1(h)
        q, k, v = heads(self.query(x), self.nh), heads(self.key(x), self.nh), heads(self.value(x), self.nh)
        h = self.dense(merge(attention(q, k, v, self.attn))) + h
        return self.out(F.gelu(self.inter(self.ln2(h)))) + h


class ViT(nn.Module):
    def __init__(self, w, c, attn):
        super().__init__()
        H, P = c["hidden"], c["patch"]
        self.proj = nn.Conv2d(3, H, P, P)
        w.linear(self.proj, "embeddings.patch_embeddings.projection", transpose=False)
        self.cls_token = w.param("embeddings.cls_token")
        self.pos = w.param("embeddings.position_embeddings")
        self.layers = nn.ModuleList(ViTLayer(w, f"encoder.layer.{i}", c, attn) for i in range(c["layers"]))
        self.ln = nn.LayerNorm(H, eps=1e-12)
        w.norm(self.ln, "layernorm")
        self.classifier = nn.Linear(H, c["classes"])
        w.linear(self.classifier, "classifier", transpose=False)

    def forward(self, pixel_values):
        e = self.proj(pixel_values).flatten(2).transpose(1, 2)
        h = torch.cat([self.cls_token.expand(e.shape[0], -1, -1), e], dim=1) + self.pos
        for layer in self.layers:
            h = layer(h)
        return self.classifier(self.ln(h)[:, 0, :])


# ---- LLaMA decoder -------------------------------------------------------------------------


class RMSNorm(nn.Module):
    def __init__(self, w, name, eps):
        super().__init__()
        self.weight, self.eps = w.param(f"{name}.weight"), eps

    def forward(self, x):
        dt = x.dtype
        x = x.float()  # as LlamaRMSNorm: the statistics in float32 whatever the model's dtype
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dt)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class LlamaLayer(nn.Module):
    def __init__(self, w, p, c, attn):
        super().__init__()
        H, f = c["hidden"], c["ffn"]
        self.nh, self.nkv, self.hd, self.attn = c["heads"], c["kv_heads"], H // c["heads"], attn
        self.input_layernorm = RMSNorm(w, f"{p}.input_layernorm", c["eps"])
        self.post_attention_layernorm = RMSNorm(w, f"{p}.post_attention_layernorm", c["eps"])
        kvd = self.nkv * self.hd
        self.q_proj, self.k_proj = linear(H, H, False), linear(H, kvd, False)
        self.v_proj, self.o_proj = linear(H, kvd, False), linear(H, H, False)
        self.gate_proj, self.up_proj, self.down_proj = linear(H, f, False), linear(H, f, False), linear(f, H, False)
        for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
            w.linear(getattr(self, n), f"{p}.self_attn.{n}")
        for n in ("gate_proj", "up_proj", "down_proj"):
            w.linear(getattr(self, n), f"{p}.mlp.{n}")

    def forward(self, h, cos, sin):
        x = self.input_layernorm(h)
        q, k, v = heads(self.q_proj(x), self.nh), heads(self.k_proj(x), self.nkv), heads(self.v_proj(x), self.nkv)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        ctx = attention(q, k, v, self.attn, causal=True, scale=1.0 / math.sqrt(self.hd), gqa=self.nh // self.nkv)
        h = h + self.o_proj(merge(ctx))
        x = self.post_attention_layernorm(h)
        return h + self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoder(nn.Module):
    def __init__(self, w, c, attn):
        super().__init__()
        self.register_buffer("cos_cached", w.get("rotary_emb.cos_cached"), persistent=False)
        self.register_buffer("sin_cached", w.get("rotary_emb.sin_cached"), persistent=False)
        w.get("causal_mask")  # the twin builds its causal mask itself
        self.layers = nn.ModuleList(LlamaLayer(w, f"layers.{i}", c, attn) for i in range(c["layers"]))
        self.norm = RMSNorm(w, "norm", c["eps"])

    def forward(self, hidden_states):
        S = hidden_states.shape[1]
        cos = self.cos_cached[:S][None, None].to(hidden_states.dtype)
        sin = self.sin_cached[:S][None, None].to(hidden_states.dtype)
        h = hidden_states
        for layer in self.layers:
            h = layer(h, cos, sin)
        return self.norm(h)


TWINS = {"resnet50": ResNet50, "bert_base": Bert, "gpt2_small": GPT2, "vit_b16": ViT,
         "llama_decoder": LlamaDecoder}


def build_twin(model, attn="sdpa"):
    """nn.Module (eval, f32, CPU) computing the ONNX model's function; model: ModelProto or path."""
    if attn not in ("sdpa", "math"):
        raise ValueError(f"attn: 'sdpa' or 'math', not {attn!r}")
    if isinstance(model, str):
        model = onnx.load(model)
    name, config = model_info(model)
    w = Weights(model)
    with torch.device("cpu"):
        m = TWINS[name](w, config, attn)
    w.check_all_used()
    for p in m.parameters():
        p.requires_grad_(False)
    return m.eval()


def input_names(model):
    inits = {t.name for t in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in inits]


# ---- self-test -----------------------------------------------------------------------------


def rel_err(out, ref):
    out, ref = np.asarray(out, np.float64), np.asarray(ref, np.float64)
    if not np.all(np.isfinite(out)):
        return float("inf")
    return float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30))


def verify(names=None, device="cpu", dtype=torch.float32, tol=1e-4, attns=("sdpa", "math"), log=print):
    """Builds the small configs, runs the twins and ONNX Runtime on the same inputs.
    Returns a list of (model, attn, rel_err, ok)."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    import gen_full_models as gen
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    results = []
    for name in names or gen.MODELS:
        model, feeds = gen.build(name, "small")
        _, (ref,) = gen.reference_outputs(model, feeds)
        for attn in attns:
            m = build_twin(model, attn).to(device=device, dtype=dtype)
            args = []
            for n in input_names(model):
                t = torch.from_numpy(feeds[n]).to(device)
                args.append(t.to(dtype) if t.is_floating_point() else t)
            with torch.inference_mode():
                out = m(*args).float().cpu().numpy()
            e = rel_err(out, ref)
            ok = out.shape == ref.shape and e <= tol
            log(f"verify {name:14s} {attn:5s} {device} {str(dtype).replace('torch.', ''):8s} "
                f"rel_err {e:.3g} (tol {tol:g}) {'PASS' if ok else 'FAIL'}")
            results.append((name, attn, e, ok))
    return results


def main(argv):
    if argv[:1] != ["--verify"]:
        print(__doc__)
        return 2
    res = verify(argv[1:] or None)
    bad = sum(not ok for *_, ok in res)
    print(f"{len(res) - bad} passed, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
