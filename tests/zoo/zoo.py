#!/usr/bin/env python3
"""Model zoo: real architectures through real exporters, then through drkc.

For each model of MODELS (torchvision, timm and Hugging Face transformers architectures, built
from code and configs with random weights: nothing is downloaded), and for each configuration of
the matrix

  init      realistic  BatchNorm running statistics calibrated (train mode on a few random
                       batches, then eval), biases and norm weights perturbed so no two are equal
            fresh      the default initialisation (all-zero biases, all-one norm weights: the
                       dynamo exporter's optimizer then keeps one initializer for identical ones)
  batch     1 and a larger one (per model)
  exporter  dynamo     torch.onnx.export(..., dynamo=True)
            torchscript torch.onnx.export(..., dynamo=False), where it still works

zoo.py exports the model (with the torch outputs as test_data_set_0/output_N.pb), compiles it
with drkc at the default flags and at --target=sm_90a --precision=fp16 --fusion-aggressiveness=3
(kernel count and compile time from --report), and then
  --local   (no GPU) `drkc run --device=cpu --check` on the smallest configurations (batch 1, and
            models whose interpreter run is cheap), and drkc's interpreter outputs against the
            torch outputs;
  otherwise `drkc run --device=cuda --check` at both flag sets, and the latencies of the fp16
            module (drkrun resident median, tests/bench/peers.py's drkrun_module) against the
            same nn.Module in float16 under eager and torch.compile(mode="reduce-overhead")
            (peers.time_calls: median of single calls bracketed by CUDA events).
Each configuration is one row of one table (OUT/results.md and OUT/results.json, rewritten after
every model): model, family, exporter, opset, init, batch, ONNX size, export time, kernels and
compile time of both builds, check errors, latencies and ratios, or the precise failure of the
first stage that failed (the stages after it are not run).

Each model runs in a child process (`--worker`) with a time limit (--timeout, per model), so a
crash or a hang costs one model. Exported files stay under OUT/<model>/<config>/ with --keep
(and are reused by a later run with --reuse); otherwise they are removed once the row is done.

Requires: torch (CPU is enough for --local; CUDA for the GPU part), torchvision, timm,
transformers, onnx, onnxscript (dynamo exporter), numpy; a built drkc (and drkrun for timing).

usage: zoo.py [--local] [--only NAME ...] [--skip NAME ...] [--out DIR] [--timeout S]
              [--drkc PATH] [--drkrun PATH] [--init LIST] [--exporter LIST] [--batch 1|big|both] [--big-batch N]
              [--cpu-check-max-gflop G] [--keep] [--reuse] [--list]
"""

import argparse
import contextlib
import fcntl
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time
import traceback
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))

FLAGS = {"default": [], "fast": ["--target=sm_90a", "--precision=fp16", "--fusion-aggressiveness=3"]}
TOL = {"default": 1e-4, "fast": 1e-2}


def log(*a):
    print(*a, flush=True)


# ---- the models -------------------------------------------------------------------------------
#
# A spec: family, build() -> nn.Module (outputs: a tensor or a tuple of tensors), inputs(batch)
# -> tuple of tensors, input names, the larger batch, and the interpreter cost (GFLOP at batch
# 1, roughly) that decides the CPU check under --local.


class Spec:
    def __init__(self, name, family, build, inputs, names, big, gflop, note=""):
        self.name, self.family, self.build, self.inputs, self.names = name, family, build, inputs, names
        self.big, self.gflop, self.note = big, gflop, note


MODELS = {}


def model(name, family, names, big, gflop, note=""):
    def deco(fn):
        build, inputs = fn()
        MODELS[name] = Spec(name, family, build, inputs, names, big, gflop, note)
        return fn
    return deco


def _torch():
    import torch
    return torch


class Outputs:
    """Wraps a module whose result is a ModelOutput / dict / list: returns a tuple of tensors."""

    def __new__(cls, inner, keys=None, fn=None):
        torch = _torch()

        class W(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.inner = inner

            def forward(self, *a):
                o = self.inner(*a)
                if fn is not None:
                    o = fn(o)
                if keys is not None:
                    return tuple(o[k] for k in keys) if len(keys) > 1 else o[keys[0]]
                if isinstance(o, (list, tuple)):
                    flat = []
                    for t in o:
                        flat += list(t) if isinstance(t, (list, tuple)) else [t]
                    return tuple(flat)
                if isinstance(o, dict):
                    return tuple(o.values())
                return o
        return W()


def image(size):
    return lambda b: (_torch().randn(b, 3, size, size),)


def tv(fn_name, size=224, **kw):
    def build():
        import torchvision
        return getattr(torchvision.models, fn_name)(weights=None, **kw)
    return build, image(size)


def timm_model(name, size=224):
    def build():
        import timm
        return timm.create_model(name, pretrained=False)
    return build, image(size)


# CNNs
@model("resnet18", "cnn", ["x"], 8, 1.8)
def _(): return tv("resnet18")
@model("resnet50", "cnn", ["x"], 8, 4.1)
def _(): return tv("resnet50")
@model("mobilenet_v2", "cnn", ["x"], 8, 0.3)
def _(): return tv("mobilenet_v2")
@model("mobilenet_v3_large", "cnn", ["x"], 8, 0.22)
def _(): return tv("mobilenet_v3_large")
@model("efficientnet_b0", "cnn", ["x"], 8, 0.4)
def _(): return tv("efficientnet_b0")
@model("convnext_tiny", "cnn", ["x"], 8, 4.5)
def _(): return tv("convnext_tiny")
@model("regnet_y_400mf", "cnn", ["x"], 8, 0.4)
def _(): return tv("regnet_y_400mf")
@model("densenet121", "cnn", ["x"], 8, 2.9)
def _(): return tv("densenet121")
@model("squeezenet1_1", "cnn", ["x"], 8, 0.35)
def _(): return tv("squeezenet1_1")
@model("shufflenet_v2_x1_0", "cnn", ["x"], 8, 0.15)
def _(): return tv("shufflenet_v2_x1_0")
@model("mnasnet0_5", "cnn", ["x"], 8, 0.11)
def _(): return tv("mnasnet0_5")
@model("googlenet", "cnn", ["x"], 8, 1.5, "aux classifiers off (inference form)")
def _(): return tv("googlenet", aux_logits=False, init_weights=True)


# vision transformers and other image models
@model("vit_b_16", "vit", ["x"], 8, 17.6)
def _(): return tv("vit_b_16")
@model("swin_t", "vit", ["x"], 8, 4.5, "shifted windows: roll, window partition, relative position bias")
def _(): return tv("swin_t")
@model("deit_tiny", "vit", ["x"], 8, 1.3, "timm deit_tiny_patch16_224")
def _(): return timm_model("deit_tiny_patch16_224")
@model("mixer_s16", "vit", ["x"], 8, 3.8, "timm mixer_s16_224")
def _(): return timm_model("mixer_s16_224")
@model("levit_128s", "vit", ["x"], 8, 0.3, "timm: BatchNorm in attention, attention biases by index")
def _(): return timm_model("levit_128s")
@model("poolformer_s12", "vit", ["x"], 8, 1.8, "timm: GroupNorm(1), AvgPool token mixer")
def _(): return timm_model("poolformer_s12")


# encoders (transformers, built from configs)
SEQ = 128


def tokens(vocab, seq=SEQ, mask=True, types=False):
    def inputs(b):
        torch = _torch()
        g = torch.Generator().manual_seed(1000 + b)
        ids = torch.randint(0, vocab, (b, seq), generator=g)
        out = [ids]
        if mask:
            m = torch.ones(b, seq, dtype=torch.int64)
            for i in range(b):  # some padding: a real batch of sentences
                m[i, seq - (i * 13) % (seq // 2):] = 0
            out.append(m)
        if types:
            out.append(torch.zeros(b, seq, dtype=torch.int64))
        return tuple(out)
    return inputs


def hf(cls_name, cfg_name, keys, **cfg):
    def build():
        import transformers
        c = getattr(transformers, cfg_name)(**cfg)
        try:
            c._attn_implementation = "sdpa"
        except Exception:
            pass
        return Outputs(getattr(transformers, cls_name)(c), keys=keys)
    return build


@model("bert_base", "encoder", ["input_ids", "attention_mask"], 4, 22.0, "BERT-base (12 x 768), seq 128, padding mask")
def _(): return hf("BertModel", "BertConfig", ["last_hidden_state", "pooler_output"]), tokens(30522)
@model("distilbert", "encoder", ["input_ids", "attention_mask"], 4, 11.0, "DistilBERT (6 x 768)")
def _(): return hf("DistilBertModel", "DistilBertConfig", ["last_hidden_state"]), tokens(30522)
@model("roberta_base", "encoder", ["input_ids", "attention_mask"], 4, 22.0, "RoBERTa-base: position ids from the mask (cumsum)")
def _(): return hf("RobertaModel", "RobertaConfig", ["last_hidden_state"], vocab_size=50265, max_position_embeddings=514, pad_token_id=1), tokens(50265)
@model("albert_base", "encoder", ["input_ids", "attention_mask"], 4, 22.0, "ALBERT: one layer's weights shared by all 12")
def _(): return hf("AlbertModel", "AlbertConfig", ["last_hidden_state"], hidden_size=768, num_attention_heads=12, intermediate_size=3072), tokens(30000)
@model("t5_encoder", "encoder", ["input_ids", "attention_mask"], 4, 2.0, "T5-small encoder: bucketed relative position bias, RMS norm")
def _(): return hf("T5EncoderModel", "T5Config", ["last_hidden_state"], d_model=512, d_ff=2048, num_layers=6, num_heads=8, vocab_size=32128), tokens(32128)


# decoders (prefill, no KV cache)
def causal(vocab):
    return tokens(vocab, mask=False)


@model("gpt2", "decoder", ["input_ids"], 4, 22.0, "GPT-2 small (12 x 768), tied LM head")
def _(): return hf("GPT2LMHeadModel", "GPT2Config", ["logits"], use_cache=False), causal(50257)
@model("llama_gqa", "decoder", ["input_ids"], 4, 1.0,
       "LLaMA-style: 4 layers, hidden 512, 8 heads, 2 KV heads (GQA), SwiGLU 1376, RoPE, RMSNorm")
def _(): return hf("LlamaForCausalLM", "LlamaConfig", ["logits"], vocab_size=8000, hidden_size=512, intermediate_size=1376,
                   num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=512,
                   use_cache=False), causal(8000)
@model("mistral_small", "decoder", ["input_ids"], 4, 1.0, "Mistral-style, small: GQA, sliding window 64 (< seq)")
def _(): return hf("MistralForCausalLM", "MistralConfig", ["logits"], vocab_size=8000, hidden_size=512, intermediate_size=1376,
                   num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2, sliding_window=64,
                   max_position_embeddings=512, use_cache=False), causal(8000)
@model("qwen2_small", "decoder", ["input_ids"], 4, 1.0, "Qwen2-style, small: q/k/v biases, GQA")
def _(): return hf("Qwen2ForCausalLM", "Qwen2Config", ["logits"], vocab_size=8000, hidden_size=512, intermediate_size=1376,
                   num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=512,
                   use_cache=False), causal(8000)


# speech encoders
@model("whisper_encoder", "speech", ["input_features"], 4, 2.0,
       "Whisper-tiny-sized encoder (4 x 384), 80 mel bins x 400 frames (max_source_positions 200)")
def _():
    def build():
        import transformers
        c = transformers.WhisperConfig(d_model=384, encoder_layers=4, encoder_attention_heads=6, decoder_layers=1,
                                       decoder_attention_heads=6, encoder_ffn_dim=1536, decoder_ffn_dim=1536,
                                       max_source_positions=200, num_mel_bins=80)
        return Outputs(transformers.WhisperModel(c).get_encoder(), keys=["last_hidden_state"])
    return build, lambda b: (_torch().randn(b, 80, 400),)


@model("wav2vec2", "speech", ["input_values"], 4, 6.0,
       "wav2vec2-base-like (conv feature encoder with GroupNorm, conv positional embedding, 6 x 768), 1 s of audio")
def _():
    def build():
        import transformers
        c = transformers.Wav2Vec2Config(num_hidden_layers=6, do_stable_layer_norm=False, feat_extract_norm="group")
        return Outputs(transformers.Wav2Vec2Model(c), keys=["last_hidden_state"])
    return build, lambda b: (_torch().randn(b, 16000),)


# segmentation
def seg(fn_name, size=256):
    def build():
        import torchvision
        m = getattr(torchvision.models.segmentation, fn_name)(weights=None, weights_backbone=None, aux_loss=None)
        return Outputs(m, keys=["out"])
    return build, image(size)


@model("deeplabv3_mobilenet", "segmentation", ["x"], 4, 2.5, "deeplabv3_mobilenet_v3_large, 256x256: ASPP, bilinear Resize")
def _(): return seg("deeplabv3_mobilenet_v3_large")
@model("lraspp_mobilenet", "segmentation", ["x"], 4, 0.6, "lraspp_mobilenet_v3_large, 256x256")
def _(): return seg("lraspp_mobilenet_v3_large")
@model("fcn_resnet50", "segmentation", ["x"], 4, 45.0, "fcn_resnet50, 256x256: dilated ResNet-50")
def _(): return seg("fcn_resnet50")


# detection heads (the full detectors' postprocessing, NMS on dynamic shapes, is out of scope)
@model("retinanet_head", "detection", ["x"], 4, 40.0,
       "RetinaNet: ResNet-50 + FPN backbone and the classification/regression heads (no anchors, no NMS), 320x320")
def _():
    def build():
        torch = _torch()
        from torchvision.models.detection import retinanet_resnet50_fpn
        det = retinanet_resnet50_fpn(weights=None, weights_backbone=None, num_classes=91)

        class Head(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.backbone, self.head = det.backbone, det.head

            def forward(self, x):
                feats = list(self.backbone(x).values())
                o = self.head(feats)
                return o["cls_logits"], o["bbox_regression"]
        return Head()
    return build, image(320)


@model("ssdlite_head", "detection", ["x"], 4, 0.6,
       "SSDLite320 MobileNetV3: backbone with extra blocks and the SSDLite heads (no anchors, no NMS)")
def _():
    def build():
        torch = _torch()
        from torchvision.models.detection import ssdlite320_mobilenet_v3_large
        det = ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None)

        class Head(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.backbone, self.head = det.backbone, det.head

            def forward(self, x):
                feats = list(self.backbone(x).values())
                o = self.head(feats)
                return o["cls_logits"], o["bbox_regression"]
        return Head()
    return build, image(320)


@model("yolo_head", "detection", ["x"], 4, 3.0,
       "YOLO-style: CSP-ish conv backbone (Conv-BN-SiLU), 3-scale detect head decoding boxes on a grid (sigmoid, "
       "grid offsets, anchor scaling, concat), 320x320")
def _():
    def build():
        torch = _torch()
        nn = torch.nn

        def cbs(i, o, k=3, s=1):
            return nn.Sequential(nn.Conv2d(i, o, k, s, k // 2, bias=False), nn.BatchNorm2d(o), nn.SiLU())

        class C2(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.a, self.b, self.m = cbs(c, c // 2, 1), cbs(c, c // 2, 1), nn.Sequential(cbs(c // 2, c // 2), cbs(c // 2, c // 2))
                self.o = cbs(c, c, 1)

            def forward(self, x):
                return self.o(torch.cat([self.m(self.a(x)) + self.a(x), self.b(x)], 1))

        class Yolo(nn.Module):
            def __init__(self, nc=80, na=3):
                super().__init__()
                self.nc, self.na, self.no = nc, na, nc + 5
                self.stem = cbs(3, 16, 3, 2)
                chans = [16, 32, 64, 128, 256]
                self.stages = nn.ModuleList([nn.Sequential(cbs(chans[i], chans[i + 1], 3, 2), C2(chans[i + 1])) for i in range(4)])
                self.up = nn.Upsample(scale_factor=2, mode="nearest")
                self.lat = cbs(384, 128, 1)  # up(p5) 256 + stage-3 128 channels
                self.det = nn.ModuleList([nn.Conv2d(c, na * self.no, 1) for c in (128, 128, 256)])
                self.register_buffer("anchors", torch.tensor([[10, 13, 16, 30, 33, 23], [30, 61, 62, 45, 59, 119],
                                                              [116, 90, 156, 198, 373, 326]], dtype=torch.float32).view(3, 3, 2))

            def forward(self, x):
                x = self.stem(x)
                feats = []
                for s in self.stages:
                    x = s(x)
                    feats.append(x)
                p5 = feats[3]
                p4 = self.lat(torch.cat([self.up(p5), feats[2]], 1))          # 384 -> 128 @ /16
                p3 = torch.cat([self.up(p4), feats[1]], 1)[:, :128]             # 192 -> 128 @ /8 (channel slice)
                outs = []
                for i, (p, stride) in enumerate(zip((p3, p4, p5), (8, 16, 32))):
                    y = self.det[i](p)
                    b, _, h, w = y.shape
                    y = y.view(b, self.na, self.no, h, w).permute(0, 1, 3, 4, 2).sigmoid()
                    gy, gx = torch.meshgrid(torch.arange(h, dtype=torch.float32), torch.arange(w, dtype=torch.float32), indexing="ij")
                    grid = torch.stack((gx, gy), 2).view(1, 1, h, w, 2)
                    xy = (y[..., :2] * 2 - 0.5 + grid) * stride
                    wh = (y[..., 2:4] * 2) ** 2 * self.anchors[i].view(1, self.na, 1, 1, 2)
                    outs.append(torch.cat((xy, wh, y[..., 4:]), -1).view(b, -1, self.no))
                return torch.cat(outs, 1)
        return Yolo()
    return build, image(320)


# ---- init ---------------------------------------------------------------------------------------


def seed_of(*parts):
    return zlib.crc32("/".join(map(str, parts)).encode()) & 0x7FFFFFFF


def is_norm(m):
    return "Norm" in type(m).__name__


def make(spec, init, calib_batch=2):
    """The module of spec with `init` weights, in eval mode."""
    torch = _torch()
    torch.manual_seed(seed_of(spec.name, "weights"))
    m = spec.build()
    if init == "realistic":
        # The weights are perturbed first and the BatchNorm statistics calibrated on the final
        # weights: calibrated before, the statistics described a network whose zero-initialised
        # residual-branch BatchNorm scales (LeViT) were still 0, so once those became ~0.2 no
        # BatchNorm downstream normalised anything and LeViT's stage-3 attention logits grew to
        # ~1e4 (softmax a near-tie argmax): an instance so ill-conditioned that f32 rounding
        # moved its output by 0.2% (torch f32 vs f64) to 4% (ONNX Runtime vs torch).
        g = torch.Generator().manual_seed(seed_of(spec.name, "perturb"))
        with torch.no_grad():
            for mod in m.modules():
                for pn, p in mod.named_parameters(recurse=False):
                    if p is None:
                        continue
                    if pn == "bias" or pn.endswith("_bias") or pn.endswith(".bias"):
                        p.add_(torch.randn(p.shape, generator=g) * 0.05)
                    elif p.numel() > 1 and not p.any():
                        # zero-initialised weights (torchvision ViT's and timm Mixer's classifier
                        # heads, LeViT's residual BatchNorm scales and attention biases): a trained
                        # model has none, and an output that ignores its input checks nothing
                        if pn == "weight" and is_norm(mod):
                            p.copy_(0.2 + 0.05 * torch.randn(p.shape, generator=g))
                        else:
                            p.normal_(0, 0.02, generator=g)
                    elif pn == "weight" and is_norm(mod):
                        p.mul_(1 + torch.randn(p.shape, generator=g) * 0.1)
        bns = [x for x in m.modules() if isinstance(x, torch.nn.modules.batchnorm._BatchNorm)]
        if bns:
            for bn in bns:
                bn.reset_running_stats()
                bn.momentum = None  # cumulative average over the calibration batches
            m.train()
            g = torch.Generator().manual_seed(seed_of(spec.name, "calib"))
            with torch.no_grad():
                for _ in range(3):
                    args = spec.inputs(calib_batch)
                    args = tuple(a.normal_(generator=g) if a.is_floating_point() else a for a in args)
                    m(*args)
    return m.eval()


# ---- exporting ----------------------------------------------------------------------------------


def parse_exporter(e):
    """"dynamo", "torchscript", with ":OPSET" and/or "+dyn" (a dynamic batch dim): (base, opset, dynamic)."""
    dyn = e.endswith("+dyn")
    base, _, op = (e[:-4] if dyn else e).partition(":")
    if base not in ("dynamo", "torchscript", "torch2drkg") or (base == "torch2drkg" and (op or dyn)):
        raise ValueError(f"unknown exporter '{e}'")
    return base, int(op) if op else None, dyn


def export(m, args, path, exporter, names, opset=None, dynamic=False):
    torch = _torch()
    import warnings
    kw = dict(input_names=names)
    if opset:
        kw["opset_version"] = opset
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "torch2drkg":
            # tools/torch2drkg.py: torch.export -> a .drkg graph + a safetensors sidecar (no ONNX)
            sys.path.insert(0, os.path.join(ROOT, "tools"))
            from torch2drkg import export_drkg
            export_drkg(m, args, path)
        elif exporter == "dynamo":
            if dynamic:
                b = torch.export.Dim("batch", min=1, max=1024)
                ds = tuple({0: b} for _ in args)
                import inspect
                params = inspect.signature(m.forward).parameters.values()
                if any(p.kind == p.VAR_POSITIONAL for p in params):
                    ds = (ds,)  # forward(*a) (the Outputs wrapper): one argument, the tuple
                kw["dynamic_shapes"] = ds
            torch.onnx.export(m, args, path, dynamo=True, external_data=True, **kw)
        else:
            kw.setdefault("opset_version", 17)
            if dynamic:
                kw["dynamic_axes"] = {n: {0: "batch"} for n in names}
            torch.onnx.export(m, args, path, dynamo=False, **kw)


def write_data(d, args, outs):
    import numpy as np
    from onnx import numpy_helper
    os.makedirs(d, exist_ok=True)
    for i, a in enumerate(args):
        t = numpy_helper.from_array(a.numpy(), f"input_{i}")
        open(os.path.join(d, f"input_{i}.pb"), "wb").write(t.SerializeToString())
    for i, o in enumerate(outs):
        t = numpy_helper.from_array(o.detach().float().numpy().astype(np.float32), f"output_{i}")
        open(os.path.join(d, f"output_{i}.pb"), "wb").write(t.SerializeToString())


def load_data(d):
    """The inputs and torch outputs write_data saved, as torch tensors."""
    import onnx
    from onnx import numpy_helper
    torch = _torch()
    def rd(kind):
        fs = sorted(glob.glob(os.path.join(d, f"{kind}_*.pb")), key=lambda f: int(re.findall(r"(\d+)\.pb$", f)[0]))
        return [torch.from_numpy(numpy_helper.to_array(onnx.load_tensor(f)).copy()) for f in fs]
    return rd("input"), rd("output")


def flat_outputs(o):
    torch = _torch()
    if isinstance(o, torch.Tensor):
        return [o]
    out = []
    for t in o:
        out += flat_outputs(t)
    return out


def onnx_facts(path):
    if path.endswith(".drkg"):  # torch2drkg: the graph dump and its weights sidecar
        text = open(path).read()
        side = os.path.splitext(path)[0] + ".safetensors"
        size = os.path.getsize(path) + (os.path.getsize(side) if os.path.exists(side) else 0)
        ops = sorted(set(re.findall(r"= ([A-Z][A-Za-z]*)\(", text)))
        return {"opset": None, "symbolic_dims": [], "nodes": len(re.findall(r"= [A-Z][A-Za-z]*\(", text)), "ops": ops,
                "initializers": text.count("const weights"), "onnx_mb": round(size / 2**20, 1), "domains": ["drkg"]}
    import onnx
    m = onnx.load(path, load_external_data=False)
    opset = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), None)
    ops = sorted({n.op_type for n in m.graph.node})
    inits = [i.name for i in m.graph.initializer]
    files = {path} | set(glob.glob(os.path.join(os.path.dirname(path), "*.data")))
    size = sum(os.path.getsize(f) for f in files)
    syms = sorted({d.dim_param for i in m.graph.input for d in i.type.tensor_type.shape.dim if d.dim_param})
    return {"opset": opset, "ir_version": m.ir_version, "symbolic_dims": syms, "nodes": len(m.graph.node), "ops": ops, "initializers": len(inits),
            "onnx_mb": round(size / 2**20, 1), "domains": sorted({o.domain or "ai.onnx" for o in m.opset_import})}


# ---- drkc -------------------------------------------------------------------------------------


def first_error(text):
    """The first error line of drkc's stderr (or its last line), trimmed."""
    lines = [l for l in text.splitlines() if l.strip()]
    for l in lines:
        if "error" in l or "Assertion" in l or "internal" in l:
            return l.strip()[:500]
    return (lines[-1].strip()[:500] if lines else "")


def run(cmd, timeout):
    t = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s", time.time() - t
    return p, None, time.time() - t


def describe_rc(p):
    if p.returncode < 0:
        import signal
        try:
            return f"crashed ({signal.Signals(-p.returncode).name})"
        except ValueError:
            return f"crashed (signal {-p.returncode})"
    return f"rc={p.returncode}"


COLD = []  # ["--no-cache"] with --cold


def compile_model(drkc, onnx_path, flags, out, timeout, extra=()):
    p, err, secs = run([drkc, onnx_path] + FLAGS[flags] + COLD + list(extra) + ["--report", "-o", out], timeout)
    r = {"compile_s": round(secs, 1)}
    if err:
        return dict(r, error=err)
    if p.returncode != 0:
        return dict(r, error=f"{describe_rc(p)}: {first_error(p.stderr)}", n_error_lines=p.stderr.count("error:"))
    m = re.search(r"-> (\d+) kernels", p.stderr)
    r["kernels"] = int(m.group(1)) if m else None
    m = re.search(r"activations ([0-9.]+) MiB planned", p.stderr)
    r["activations_mib"] = float(m.group(1)) if m else None
    m = re.search(r"weights ([0-9.]+) MiB", p.stderr)
    r["weights_mib"] = float(m.group(1)) if m else None
    return r


def torch_fp16_error(m, ins, outs, device, dtype="fp16"):
    """The module's own half-precision error (dtype "fp16" or "bf16") against its float32 outputs
    (same inputs): how much of a half build's error the model itself causes (random weights make
    some models far more sensitive than trained ones, and freshly initialised deep CNNs produce
    values below the float16 range altogether)."""
    import copy
    torch = _torch()
    dt = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    try:
        mh = copy.deepcopy(m).to(device=device, dtype=dt)
        with torch.no_grad():
            oh = flat_outputs(mh(*[a.to(device).to(dt) if a.is_floating_point() else a.to(device) for a in ins]))
        worst = 0.0
        for a, b in zip(oh, outs):
            a, b = a.detach().double().cpu(), b.detach().double()
            den = float(b.norm())
            e = float((a - b).norm() / den) if den > 0 else float((a - b).norm())
            worst = max(worst, e if e == e else float("inf"))
        del mh
        return worst
    except Exception as e:  # noqa: BLE001 (some ops have no CPU float16 kernel)
        return f"{type(e).__name__}: {str(e)[:200]}"


def fp16_verdict(r, torch_err):
    """A float16 check judged against the model's own float16 error: within max(1e-2, 2 x torch's)
    passes; where torch's float16 error is ~1 (values below the float16 range) the check says so
    and is not counted as drkc's failure."""
    if "rel_err" not in r or not isinstance(torch_err, float):
        return r
    r["torch_fp16_err"] = torch_err
    e = r["rel_err"]
    if torch_err >= 0.5 and e == e:
        r.pop("error", None)
        r["note"] = f"outside the float16 range: torch's own float16 error is {torch_err:.3g}"
    elif "error" in r and e <= max(TOL["fast"], 2 * torch_err):
        r.pop("error")
        r["note"] = f"within 2x torch's own float16 error {torch_err:.3g}"
    elif "error" in r:
        r["error"] += f" (torch's own float16 error {torch_err:.3g})"
    return r


def check_run(drkc, onnx_path, device, flags, data, outdir, timeout):
    """`drkc run --check`: the largest relative error over the outputs, or the failure."""
    p, err, secs = run([drkc, "run", onnx_path, f"--device={device}", "--check", "--input-dir", data,
                        "--output-dir", outdir] + FLAGS[flags], timeout)
    r = {"s": round(secs, 1)}
    if err:
        return dict(r, error=err)
    errs = [float(x) for x in re.findall(r"rel error (\S+)", p.stdout)]
    # a reference that is ~0 everywhere is judged by its absolute error (interp_check.c)
    errs += [float(x) for x in re.findall(r"~0 everywhere.*?absolute error (\S+) \(tolerance", p.stdout)]
    fails = [l for l in p.stdout.splitlines() if l.startswith("check output") and l.rstrip().endswith("FAIL")]
    if errs:
        r["rel_err"] = max(errs)
    if p.returncode != 0 or fails or not errs:
        r["error"] = (fails[0].strip() if fails else f"{describe_rc(p)}: {first_error(p.stderr or p.stdout)}")
    return r


def compare_with_torch(outdir, data):
    """drkc's outputs (OUT/output_N.pb) against the torch outputs of the export."""
    import numpy as np
    import onnx
    from onnx import numpy_helper
    worst = 0.0
    refs = sorted(glob.glob(os.path.join(data, "output_*.pb")))
    for ref in refs:
        got = os.path.join(outdir, os.path.basename(ref))
        if not os.path.exists(got):
            return None, f"{os.path.basename(ref)} not written"
        a = numpy_helper.to_array(onnx.load_tensor(got)).astype(np.float64)
        b = numpy_helper.to_array(onnx.load_tensor(ref)).astype(np.float64)
        if a.shape != b.shape:
            return None, f"{os.path.basename(ref)}: shape {list(a.shape)}, torch {list(b.shape)}"
        den = np.linalg.norm(b)
        e = float(np.linalg.norm(a - b) / den) if den > 0 else float(np.linalg.norm(a - b))
        if not np.isfinite(e):
            return None, f"{os.path.basename(ref)}: not finite"
        worst = max(worst, e)
    return worst, None


# ---- GPU timing -------------------------------------------------------------------------------


def torch_latencies(spec, m, batch, args, iters, warmup):
    """eager and reduce-overhead fp16 medians (ms) of the module on the GPU (peers.py's timing)."""
    torch = _torch()
    sys.path.insert(0, os.path.join(ROOT, "tests", "bench"))
    import peers  # noqa: E402  (needs tests/models/full_models_torch.py beside it; torch)
    r = {}
    mm = m.to(device="cuda", dtype=torch.float16)
    dev = [a.to("cuda") for a in args]
    dev = [a.half() if a.is_floating_point() else a for a in dev]
    for mode in ("eager", "reduce-overhead"):
        try:
            if mode == "eager":
                fn, warm, mark = mm, warmup, False
            else:
                torch._dynamo.reset()
                fn, warm, mark = torch.compile(mm, mode="reduce-overhead"), min(warmup, 3), True
            secs, _ = peers.first_call(lambda *a: flat_outputs(fn(*a))[0], dev, mark)
            med, mn = peers.time_calls(fn, dev, iters, warm, mark)
            r[f"{mode}_ms"] = round(med, 4)
            if mode != "eager":
                r[f"{mode}_compile_s"] = round(secs, 1)
        except Exception as e:
            r[f"{mode}_error"] = f"{type(e).__name__}: {str(e)[:300]}"
    torch._dynamo.reset()
    return r


@contextlib.contextmanager
def gpu_timing_lock(path):
    """--gpu-lock: several zoo.py processes (disjoint --only lists) share one GPU; exporting,
    compiling and checking overlap, the latency measurements take this lock one at a time."""
    if not path:
        yield
        return
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def drkrun_latency(drkrun, cdir, data, timeout):
    sys.path.insert(0, os.path.join(ROOT, "tests", "bench"))
    import peers  # noqa: E402
    return peers.drkrun_module(drkrun, cdir, data, 50, timeout)


# ---- one model (the worker) ---------------------------------------------------------------------


def configs(spec, args):
    out = []
    for init in args.init:
        big = args.big_batch or spec.big
        for batch in ([1] if args.batch in ("1", "both") else []) + ([big] if args.batch in ("big", "both") else []):
            for exporter in args.exporter:
                if parse_exporter(exporter)[2] and batch == 1:
                    continue  # a dynamic batch is exported from the larger batch only
                if args.matrix == "reduced" and init == "fresh" and (batch != 1 or not exporter.startswith("dynamo")):
                    continue  # what fresh weights test is the dynamo exporter's shared initializers
                out.append((init, batch, exporter))
    return out


def worker(name, args):
    import numpy as np  # noqa: F401
    torch = _torch()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    spec = MODELS[name]
    rows = []
    mdir = os.path.join(args.out, name)
    os.makedirs(mdir, exist_ok=True)
    rows_path = os.path.join(mdir, "rows.json")
    modules = {}
    timed_torch = {}
    for init, batch, exporter in configs(spec, args):
        row = {"model": name, "family": spec.family, "init": init, "batch": batch, "exporter": exporter}
        dyn = parse_exporter(exporter)[2]
        checked = (batch == 1 or dyn) and spec.gflop * batch <= args.cpu_check_max_gflop  # --local: CPU checks
        rows.append(row)
        cdir = os.path.join(mdir, f"{init}-{exporter.replace(':', '')}-b{batch}")
        onnx_path = os.path.join(cdir, "model.drkg" if exporter == "torch2drkg" else "model.onnx")
        data = os.path.join(cdir, "test_data_set_0")
        try:
            # build + export
            if not (args.reuse and os.path.exists(onnx_path) and os.path.exists(os.path.join(data, "output_0.pb"))):
                shutil.rmtree(cdir, ignore_errors=True)
                os.makedirs(cdir)
                t = time.time()
                if init not in modules:
                    modules[init] = make(spec, init)
                row["build_s"] = round(time.time() - t, 1)
                m = modules[init]
                torch.manual_seed(seed_of(name, "inputs", batch))
                ins = spec.inputs(batch)
                with torch.no_grad():
                    outs = flat_outputs(m(*ins))
                t = time.time()
                try:
                    # "dynamo:23": that exporter at that opset (--opset: every exporter's)
                    ex, op, dyn = parse_exporter(exporter)
                    export(m, ins, onnx_path, ex, spec.names, op or args.opset, dyn)
                except Exception as e:
                    # the exporters wrap the cause in boilerplate ("Failed to decompose ..."): keep
                    # the outermost type and the innermost exception's message
                    root = e
                    while root.__cause__ or (root.__context__ and not root.__suppress_context__):
                        root = root.__cause__ or root.__context__  # (raise ... from None: this one)
                    msg = [l for l in str(root).strip().splitlines() if l.strip()][:2]
                    msg = " ".join(l.strip() for l in msg)
                    if root is not e:
                        msg = f"{type(root).__name__}: {msg}"
                    row["export_s"] = round(time.time() - t, 1)
                    row["failed"] = "export"
                    row["error"] = f"{type(e).__name__}: {msg[:500]}"
                    continue
                row["export_s"] = round(time.time() - t, 1)
                json.dump({"export_s": row["export_s"], "build_s": row.get("build_s")}, open(os.path.join(cdir, "export.json"), "w"))
                write_data(data, ins, outs)
                if checked or not args.local:
                    fe = torch_fp16_error(m, ins, outs, "cpu" if args.local else "cuda")
                    json.dump({"torch_fp16_err": fe}, open(os.path.join(data, "torch_fp16.json"), "w"))
            fp16_json = os.path.join(data, "torch_fp16.json")
            if not os.path.exists(fp16_json) and (checked or not args.local):
                # a reused export from a run that did not measure it: the module and the saved data
                if init not in modules:
                    modules[init] = make(spec, init)
                ins, outs = load_data(data)
                fe = torch_fp16_error(modules[init], ins, outs, "cpu" if args.local else "cuda")
                json.dump({"torch_fp16_err": fe}, open(fp16_json, "w"))
            torch_fp16 = json.load(open(fp16_json))["torch_fp16_err"] if os.path.exists(fp16_json) else None
            if torch_fp16 is not None:
                row["torch_fp16_err"] = torch_fp16
            if "export_s" not in row and os.path.exists(os.path.join(cdir, "export.json")):  # reused: its own times
                row.update({k: v for k, v in json.load(open(os.path.join(cdir, "export.json"))).items() if v is not None})
            row.update(onnx_facts(onnx_path))
            # compile: both flag sets (a dynamic batch: the front half on the symbolic graph first,
            # then compiled for the export's batch with --bind)
            bind = []
            if dyn:
                if not row.get("symbolic_dims"):
                    row["failed"], row["error"] = "export", "no symbolic input dim in the dynamic export"
                    continue
                p, err, secs = run([args.drkc, onnx_path, "--emit=graph", "-o", os.path.join(cdir, "symbolic.drkg")],
                                   args.compile_timeout)
                row["graph_symbolic"] = {"s": round(secs, 1)}
                if err or p.returncode:
                    row["graph_symbolic"]["error"] = err or f"{describe_rc(p)}: {first_error(p.stderr)}"
                    row["failed"], row["error"] = "graph_symbolic", row["graph_symbolic"]["error"]
                bind = ["--bind=" + ",".join(f"{sym}={batch}" for sym in row["symbolic_dims"])]
            for fl in ("default", "fast"):
                r = compile_model(args.drkc, onnx_path, fl, os.path.join(cdir, f"model-{fl}.drkm"), args.compile_timeout, bind)
                row[f"compile_{fl}"] = r
            for fl in ("default", "fast"):
                if "error" in row[f"compile_{fl}"]:
                    row.setdefault("failed", f"compile_{fl}")
                    row.setdefault("error", row[f"compile_{fl}"]["error"])
            # checks
            small = checked
            if args.local:
                if small and "failed" not in row:
                    # default flags: the interpreter after the passes against the model as given, and
                    # its outputs against torch's; fast flags: the fp16 graph against the f32 one
                    r = check_run(args.drkc, onnx_path, "cpu", "default", data, os.path.join(cdir, "cpu_out"), args.check_timeout)
                    if "error" not in r:
                        e, why = compare_with_torch(os.path.join(cdir, "cpu_out"), data)
                        if why:
                            r["error"] = f"against torch: {why}"
                        else:
                            r["vs_torch"] = e
                            if e > args.torch_tol:
                                r["error"] = f"interpreter vs torch rel error {e:.3g} > {args.torch_tol:g}"
                    row["cpu_check"] = r
                    if "error" in r:
                        row["failed"], row["error"] = "cpu_check", r["error"]
                    elif args.cpu_fast:
                        r = check_run(args.drkc, onnx_path, "cpu", "fast", data, os.path.join(cdir, "cpu_out_fast"), args.check_timeout)
                        row["cpu_check_fast"] = fp16_verdict(r, torch_fp16)
                        if "error" in r:
                            row["failed"], row["error"] = "cpu_check_fast", r["error"]
                elif not small:
                    row["cpu_check"] = {"skipped": "batch > 1" if batch > 1 and not dyn else
                                        f"~{spec.gflop * batch:g} GFLOP (> --cpu-check-max-gflop)"}
            elif "failed" not in row:
                for fl in ("default", "fast"):
                    r = check_run(args.drkc, onnx_path, "cuda", fl, data, os.path.join(cdir, f"cuda_out_{fl}"), args.check_timeout)
                    if fl == "fast":
                        r = fp16_verdict(r, torch_fp16)
                    if "error" not in r and fl == "default":
                        e, why = compare_with_torch(os.path.join(cdir, f"cuda_out_{fl}"), data)
                        r["vs_torch"] = e if not why else why
                    row[f"cuda_check_{fl}"] = r
                    if "error" in r:
                        row.setdefault("failed", f"cuda_check_{fl}")
                        row.setdefault("error", r["error"])
                # latencies: the fp16 module against the same module in float16
                if "error" not in row.get("compile_fast", {"error": 1}):
                    shutil.copy(os.path.join(cdir, "model-fast.drkm"), os.path.join(cdir, "model.drkm"))
                    with gpu_timing_lock(args.gpu_lock):
                        d = drkrun_latency(args.drkrun, cdir, data, args.check_timeout)
                    row["drkc_ms"] = d.get("median_ms")
                    if "error" in d:
                        row["drkrun_error"] = d["error"][:400]
                key = (init, batch)
                if key not in timed_torch and init == "realistic" and args.peers:
                    if init not in modules:
                        modules[init] = make(spec, init)
                    torch.manual_seed(seed_of(name, "inputs", batch))
                    import copy
                    with gpu_timing_lock(args.gpu_lock):
                        timed_torch[key] = torch_latencies(spec, copy.deepcopy(modules[init]), batch, spec.inputs(batch), args.iters, 10)
                row.update(timed_torch.get((init, batch), timed_torch.get(("realistic", batch), {})))
                for k in ("eager", "reduce-overhead"):
                    if row.get("drkc_ms") and row.get(f"{k}_ms"):
                        row[f"ratio_{k.replace('-', '_')}"] = round(row["drkc_ms"] / row[f"{k}_ms"], 3)
        except Exception as e:
            row.setdefault("failed", "zoo")
            row["error"] = f"zoo.py: {type(e).__name__}: {str(e)[:400]}"
            row["traceback"] = traceback.format_exc()[-1500:]
        finally:
            for f in glob.glob(os.path.join(cdir, "*.drkm")):
                if not args.keep:
                    os.remove(f)
            if not args.keep:
                shutil.rmtree(cdir, ignore_errors=True)
            json.dump(rows, open(rows_path, "w"), indent=1)
            log(f"  {name} {init} {exporter} b{batch}: " + (f"FAILED at {row['failed']}: {row['error'][:200]}" if "failed" in row else
                 "ok " + summary_bits(row)))
    return rows


def summary_bits(r):
    b = []
    for fl in ("default", "fast"):
        c = r.get(f"compile_{fl}", {})
        if "kernels" in c:
            b.append(f"{fl}: {c['kernels']} kernels {c['compile_s']} s")
    if "cpu_check" in r and "rel_err" in r["cpu_check"]:
        b.append(f"cpu check {r['cpu_check']['rel_err']:.2g}, vs torch {r['cpu_check'].get('vs_torch', float('nan')):.2g}")
    if r.get("drkc_ms"):
        b.append(f"drkc {r['drkc_ms']:.3f} ms")
    return ", ".join(b)


# ---- the table ----------------------------------------------------------------------------------


def fmt(v, spec="{:.3g}"):
    return "-" if v is None else (spec.format(v) if isinstance(v, (int, float)) else str(v))


def table_md(results, meta):
    cols = ["model", "family", "exporter", "opset", "init", "batch", "MB", "export s", "kernels (default / fast)",
            "compile s (default / fast)", "check error", "vs torch", "drkc ms", "eager ms", "r-o ms",
            "drkc/eager", "drkc/r-o", "status"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in results:
        cd, cf = r.get("compile_default", {}), r.get("compile_fast", {})
        chk = r.get("cpu_check") or r.get("cuda_check_default") or {}
        chk2 = r.get("cuda_check_fast") or r.get("cpu_check_fast") or {}
        check = fmt(chk.get("rel_err")) + (f" / {fmt(chk2.get('rel_err'))}" if chk2 else "")
        if isinstance(r.get("torch_fp16_err"), float) and chk2:
            check += f" (torch fp16 {fmt(r['torch_fp16_err'])})"
        if "skipped" in chk:
            check = "skipped"
        status = "ok" if "failed" not in r else f"**{r['failed']}**: {r['error']}".replace("|", "\\|")
        if "failed" not in r and chk2.get("note"):
            status = f"ok ({chk2['note']})"
        vs = chk.get("vs_torch")
        lines.append("| " + " | ".join([
            r["model"], r["family"], r["exporter"], fmt(r.get("opset")), r["init"], str(r["batch"]), fmt(r.get("onnx_mb")),
            fmt(r.get("export_s")), f"{fmt(cd.get('kernels'))} / {fmt(cf.get('kernels'))}",
            f"{fmt(cd.get('compile_s'))} / {fmt(cf.get('compile_s'))}", check, fmt(vs) if not isinstance(vs, str) else vs,
            fmt(r.get("drkc_ms")), fmt(r.get("eager_ms")), fmt(r.get("reduce-overhead_ms")),
            fmt(r.get("ratio_eager")), fmt(r.get("ratio_reduce_overhead")), status]) + " |")
    return "\n".join(lines)


def counts(results):
    c = {"configurations": len(results)}
    c["exported"] = sum(r.get("failed") != "export" and "opset" in r for r in results)
    c["compiled_default"] = sum("kernels" in r.get("compile_default", {}) for r in results)
    c["compiled_fast"] = sum("kernels" in r.get("compile_fast", {}) for r in results)
    for k in ("cpu_check", "cpu_check_fast", "cuda_check_default", "cuda_check_fast"):
        ran = [r for r in results if k in r and "skipped" not in r[k]]
        if ran:
            c[f"{k}_run"] = len(ran)
            c[f"{k}_passed"] = sum("error" not in r[k] for r in ran)
    c["failed"] = sum("failed" in r for r in results)
    by = {}
    for r in results:
        if "failed" in r:
            by[r["failed"]] = by.get(r["failed"], 0) + 1
    c["failed_by_stage"] = by
    models = sorted({r["model"] for r in results})
    c["models"] = len(models)
    c["models_all_ok"] = sum(all("failed" not in r for r in results if r["model"] == m) for m in models)
    return c


def write_results(out, results, meta, name="results"):
    c = counts(results)
    meta = dict(meta, counts=c)
    json.dump({"meta": meta, "results": results}, open(os.path.join(out, f"{name}.json"), "w"), indent=1, sort_keys=True)
    head = [f"# drkc model zoo ({meta['date']}, {meta['where']})", "",
            f"torch {meta.get('torch')}, onnx {meta.get('onnx')}, drkc {meta.get('drkc_version')} ({meta.get('git')}); "
            f"flags: default = `drkc MODEL`, fast = `drkc MODEL {' '.join(FLAGS['fast'])}`.", "",
            "Counts: " + ", ".join(f"{k} {v}" for k, v in c.items() if k != "failed_by_stage")
            + "; failures by stage: " + (", ".join(f"{k} {v}" for k, v in sorted(c["failed_by_stage"].items())) or "none"), "",
            "check error: " + ("`drkc run --device=cpu --check` at default / fast flags (the interpreter on the graph after the passes against the model as given), "
                               "batch-1 configurations of models up to --cpu-check-max-gflop; vs torch: drkc's interpreter outputs "
                               "against the torch module's outputs" if meta["where"] == "local" else
                               "`drkc run --device=cuda --check` at default / fast flags; vs torch: the default build's outputs "
                               "against torch's f32 outputs; latencies: the fast module (drkrun resident median) and the nn.Module "
                               "in float16 (eager, torch.compile reduce-overhead), ms; ratio < 1: drkc faster"), "",
            table_md(results, meta), ""]
    if meta.get("notes"):
        head[-2:-2] = [meta["notes"], ""]
    open(os.path.join(out, f"{name}.md"), "w").write("\n".join(head))


def merge(args):
    """--merge DIR ...: one table from the results.json of several runs (e.g. the default matrix
    and a dynamo:23 run), written as OUT/NAME.md and OUT/NAME.json."""
    results, meta = [], None
    for d in args.merge:
        j = json.load(open(os.path.join(d, "results.json")))
        results += j["results"]
        if meta is None:
            meta = j["meta"]
        else:
            meta["exporter"] = sorted(set(meta["exporter"]) | set(j["meta"]["exporter"]))
            meta["total_s"] = round(meta.get("total_s", 0) + j["meta"].get("total_s", 0), 1)
            if j["meta"].get("git") not in meta.get("git", "").split(", "):
                meta["git"] = f"{meta.get('git')}, {j['meta'].get('git')}"
    meta["date"] = args.date  # the merge's date; each run's is in its own results.json
    order = {n: i for i, n in enumerate(MODELS)}
    exp_order = {"dynamo": 0, "torchscript": 1}
    results.sort(key=lambda r: (order.get(r["model"], 1e9), r["init"] != "realistic", str(r["batch"]),
                                exp_order.get(r["exporter"], 2), r["exporter"]))
    meta.pop("counts", None)
    if args.notes:
        meta["notes"] = open(args.notes).read().strip()
    os.makedirs(args.out, exist_ok=True)
    write_results(args.out, results, meta, args.name)
    log(json.dumps(counts(results)))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--local", action="store_true", help="no GPU: compile, and check on the CPU")
    ap.add_argument("--only", nargs="*", help="models to run (default: all)")
    ap.add_argument("--skip", nargs="*", default=[], help="models to leave out")
    ap.add_argument("--out", default="zoo-out", help="results and work directory")
    ap.add_argument("--timeout", type=int, default=3600, help="seconds per model (all its configurations)")
    ap.add_argument("--compile-timeout", type=int, default=600)
    ap.add_argument("--check-timeout", type=int, default=900)
    ap.add_argument("--drkc", default=None, help="drkc binary (default: build*/tools/drkc, newest)")
    ap.add_argument("--drkrun", default=None, help="drkrun binary (default: beside drkc)")
    ap.add_argument("--init", default="realistic,fresh")
    ap.add_argument("--exporter", default="dynamo,torchscript",
                    help="comma list of dynamo, torchscript, EXPORTER:OPSET (dynamo:23: the dynamo exporter at opset 23), "
                         "EXPORTER+dyn (a dynamic batch dim, exported from the larger batch: the front half runs on the "
                         "symbolic graph, then drkc compiles with --bind)")
    ap.add_argument("--batch", choices=["1", "big", "both"], default="both")
    ap.add_argument("--big-batch", type=int, default=None, help="the larger batch of every model (default: each model's own)")
    ap.add_argument("--matrix", choices=["full", "reduced"], default="full",
                    help="reduced: fresh weights only at batch 1 through the dynamo exporter(s) (5 of 8 configurations)")
    ap.add_argument("--opset", type=int, default=None, help="opset to ask the exporters for (default: theirs)")
    ap.add_argument("--cpu-check-max-gflop", type=float, default=50.0,
                    help="--local: CPU check only for models up to this many GFLOP at batch 1")
    ap.add_argument("--no-cpu-fast", dest="cpu_fast", action="store_false",
                    help="--local: skip the CPU check at the fast flags (fp16 graph against f32)")
    ap.add_argument("--torch-tol", type=float, default=1e-3, help="interpreter vs torch outputs")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--no-peers", dest="peers", action="store_false",
                    help="leave out the torch timings (eager, reduce-overhead): checks and drkc's latency only")
    ap.add_argument("--gpu-lock", default=None, help="a lock file shared by zoo.py processes run side by side: "
                    "their latency measurements (drkrun, eager, torch.compile) take it one at a time")
    ap.add_argument("--keep", action="store_true", help="keep exported models and modules under OUT")
    ap.add_argument("--reuse", action="store_true", help="reuse exported models found under OUT (with --keep)")
    ap.add_argument("--cold", action="store_true",
                    help="compile without drkc's kernel cache (--no-cache): every compile time a cold one; by default "
                         "the run keeps its own cache in OUT/kernel-cache, so a kernel an earlier configuration "
                         "compiled is reused")
    ap.add_argument("--list", action="store_true", help="print the models and exit")
    ap.add_argument("--merge", nargs="*", help="merge the results.json of these run directories into OUT/NAME.{md,json}")
    ap.add_argument("--name", default="results", help="--merge: file name (without extension)")
    ap.add_argument("--notes", help="--merge: a text file whose text goes above the table")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--date", default=time.strftime("%Y-%m-%d"))
    args = ap.parse_args()
    args.init = [x for x in args.init.split(",") if x]
    args.exporter = [x for x in args.exporter.split(",") if x]
    if args.merge:
        args.out = os.path.abspath(args.out)
        return merge(args)
    if args.list:
        for s in MODELS.values():
            log(f"{s.name:22s} {s.family:13s} batch 1/{s.big:<3d} ~{s.gflop:g} GFLOP  {s.note}")
        return 0
    if not args.drkc:
        cands = sorted(glob.glob(os.path.join(ROOT, "build*", "tools", "drkc")), key=os.path.getmtime)
        args.drkc = cands[-1] if cands else "drkc"
    args.drkc = os.path.abspath(args.drkc) if os.path.exists(args.drkc) else args.drkc
    if not args.drkrun:
        args.drkrun = os.path.join(os.path.dirname(args.drkc), "drkrun")
    args.out = os.path.abspath(args.out)
    os.makedirs(args.out, exist_ok=True)
    if args.cold:
        COLD.append("--no-cache")
    if args.worker:
        worker(args.worker, args)
        return 0
    os.environ["DRK_CACHE_DIR"] = os.path.join(args.out, "kernel-cache")  # the workers' drkc inherit it

    names = args.only or list(MODELS)
    bad = [n for n in names if n not in MODELS]
    if bad:
        ap.error(f"unknown models {bad}; --list shows them")
    names = [n for n in names if n not in args.skip]
    if not args.local:
        try:
            import torch
            if not torch.cuda.is_available():
                log("zoo.py: no CUDA device (use --local)")
                return 77
        except ImportError:
            log("zoo.py: no torch")
            return 77
    meta = {"date": args.date, "where": "local" if args.local else "gpu", "drkc": args.drkc,
            "kernel_cache": "off (--no-cache)" if args.cold else os.environ["DRK_CACHE_DIR"],
            "init": args.init, "exporter": args.exporter, "batch": args.batch, "matrix": args.matrix, "opset_asked": args.opset}
    try:
        import onnx
        import torch
        meta["torch"], meta["onnx"] = torch.__version__, onnx.__version__
        if not args.local:
            meta["device"] = torch.cuda.get_device_name()
    except ImportError:
        pass
    try:
        meta["drkc_version"] = (subprocess.run([args.drkc, "--version"], capture_output=True, text=True).stdout.strip() or "?").splitlines()[0]
        meta["git"] = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    results = []
    prev = os.path.join(args.out, "results.json")
    if args.only and os.path.exists(prev):  # a partial run updates the rows of its models only
        try:
            results = [r for r in json.load(open(prev))["results"] if r["model"] not in names]
        except (ValueError, KeyError):
            results = []
    t0 = time.time()
    for name in names:
        log(f"{name}:")
        rows_path = os.path.join(args.out, name, "rows.json")
        if os.path.exists(rows_path):
            os.remove(rows_path)
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", name, "--out", args.out, "--drkc", args.drkc,
               "--drkrun", args.drkrun, "--init", ",".join(args.init), "--exporter", ",".join(args.exporter),
               "--batch", args.batch, "--matrix", args.matrix, "--cpu-check-max-gflop", str(args.cpu_check_max_gflop), "--torch-tol", str(args.torch_tol),
               "--compile-timeout", str(args.compile_timeout), "--check-timeout", str(args.check_timeout),
               "--iters", str(args.iters)] + (["--local"] if args.local else []) + ([] if args.cpu_fast else ["--no-cpu-fast"]) + (["--keep"] if args.keep else []) + \
              (["--reuse"] if args.reuse else []) + (["--opset", str(args.opset)] if args.opset else []) + \
              (["--cold"] if args.cold else []) + (["--gpu-lock", args.gpu_lock] if args.gpu_lock else []) + \
              (["--big-batch", str(args.big_batch)] if args.big_batch else []) + ([] if args.peers else ["--no-peers"])
        t = time.time()
        try:
            p = subprocess.run(cmd, timeout=args.timeout, capture_output=True, text=True)
            for l in p.stdout.splitlines():
                log(l)
            why = None if p.returncode == 0 else f"worker {describe_rc(p)}: {first_error(p.stderr)}"
        except subprocess.TimeoutExpired:
            why = f"model timed out after {args.timeout} s"
        rows = json.load(open(rows_path)) if os.path.exists(rows_path) else []
        if why:
            if rows and "failed" not in rows[-1]:
                rows[-1]["failed"], rows[-1]["error"] = "timeout" if "timed out" in why else "zoo", why
            elif not rows:
                rows = [{"model": name, "family": MODELS[name].family, "init": "-", "batch": "-", "exporter": "-",
                         "failed": "timeout" if "timed out" in why else "zoo", "error": why}]
        for r in rows:
            r["model_wall_s"] = round(time.time() - t, 1)
        results += rows
        order = {n: i for i, n in enumerate(MODELS)}
        results.sort(key=lambda r: order.get(r["model"], 1e9))
        meta["total_s"] = round(time.time() - t0, 1)
        write_results(args.out, results, meta)
    c = counts(results)
    log(json.dumps(c))
    log(f"results: {os.path.join(args.out, 'results.md')}, results.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
