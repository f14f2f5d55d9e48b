#!/usr/bin/env python3
"""Which torch ops reach drkc, and right: small nn.Modules and functional calls (recurrent layers,
grid_sample, scatter, trig, norms, pads, attention layers, ...) exported by both exporters
(TorchScript at opset 17, dynamo), each run by `drkc run --device=cpu` (the reference
interpreter, after drkc's import and decompositions) and by ONNX Runtime on the same random
inputs; a line per export with the worst relative L2 error over its outputs, or why it failed
(the exporter's error, or drkc's message naming the node).

usage: op_probe.py OUT [NAME ...]   (a python with torch, onnx and onnxruntime; DRKC=path/to/drkc,
       default build/tools/drkc). Results: tests/zoo/results/*-op-probe.md.
"""
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import numpy_helper

warnings.filterwarnings("ignore")
HERE = os.path.dirname(os.path.abspath(__file__))
DRKC = os.environ.get("DRKC", os.path.join(HERE, "..", "..", "build", "tools", "drkc"))


class M(nn.Module):
    def __init__(s, f, mods=None):
        super().__init__()
        s.f = f
        s.mods = nn.ModuleList(mods or [])

    def forward(s, x):
        return s.f(s, x)


cases = {
 "lstm": (M(lambda s, x: s.mods[0](x)[0], [nn.LSTM(8, 16, num_layers=2, batch_first=True)]), torch.randn(2, 5, 8)),
 "gru": (M(lambda s, x: s.mods[0](x)[0], [nn.GRU(8, 16, batch_first=True, bidirectional=True)]), torch.randn(2, 5, 8)),
 "rnn": (M(lambda s, x: s.mods[0](x)[0], [nn.RNN(8, 16, batch_first=True)]), torch.randn(2, 5, 8)),
 "lrn": (M(lambda s, x: s.mods[0](x), [nn.LocalResponseNorm(3)]), torch.randn(2, 6, 8, 8)),
 "grid_sample": (M(lambda s, x: F.grid_sample(x, torch.tanh(x[:, :2].permute(0, 2, 3, 1)), align_corners=False)), torch.randn(2, 3, 8, 8)),
 "scatter": (M(lambda s, x: torch.zeros_like(x).scatter(1, torch.argsort(x, 1), x)), torch.randn(2, 6)),
 "tan_atan": (M(lambda s, x: torch.tan(x) + torch.atan(x) + torch.asin(x.clamp(-0.9, 0.9)) + torch.sinh(x) + torch.acos(x.clamp(-.9,.9)) + torch.cosh(x)), torch.randn(2, 6)),
 "celu_shrink": (M(lambda s, x: F.celu(x) + F.hardshrink(x) + F.softshrink(x) + F.threshold(x, 0.1, 2.0)), torch.randn(2, 6)),
 "norm_p1": (M(lambda s, x: F.normalize(x, p=1, dim=1) + torch.norm(x, p=1, dim=1, keepdim=True)), torch.randn(2, 6)),
 "cumprod": (M(lambda s, x: torch.cumprod(x, 1)), torch.randn(2, 6)),
 "sort": (M(lambda s, x: torch.sort(x, 1)[0] + torch.argsort(x, 1).float()), torch.randn(2, 6)),
 "flip_roll": (M(lambda s, x: torch.flip(x, [1]) + torch.roll(x, 2, 1)), torch.randn(2, 6)),
 "unfold": (M(lambda s, x: F.unfold(x, 3, padding=1)), torch.randn(2, 3, 8, 8)),
 "fold": (M(lambda s, x: F.fold(x, (4, 4), 2, stride=2)), torch.randn(2, 12, 4)),
 "logsumexp": (M(lambda s, x: torch.logsumexp(x, 1)), torch.randn(2, 6)),
 "atan2": (M(lambda s, x: torch.atan2(x, x + 1)), torch.randn(2, 6)),
 "upsample_nearest": (M(lambda s, x: F.interpolate(x, scale_factor=2, mode="nearest")), torch.randn(2, 3, 4, 4)),
 "bucketize": (M(lambda s, x: torch.bucketize(x, torch.tensor([-1.0, 0.0, 1.0])).float()), torch.randn(2, 6)),
 "embedding_bag": (M(lambda s, x: s.mods[0]((x.abs() * 3).long() % 10, torch.tensor([0, 3])), [nn.EmbeddingBag(10, 4, mode="mean")]), torch.randn(6)),
 "masked_fill_bool": (M(lambda s, x: x.masked_fill(x > 0, 0.5).amax(1)), torch.randn(2, 6)),
 "var_std": (M(lambda s, x: torch.var(x, 1) + torch.std(x, 1)), torch.randn(2, 6)),
 "trunc_frac": (M(lambda s, x: torch.trunc(x * 3) + torch.frac(x * 3) + torch.fmod(x, 0.3) + torch.remainder(x, 0.3)), torch.randn(2, 6)),
 "nonzero": (M(lambda s, x: torch.nonzero(x > 0).float().sum()), torch.randn(2, 6)),
 "pixel_unshuffle": (M(lambda s, x: F.pixel_unshuffle(x, 2)), torch.randn(1, 2, 4, 4)),
 "adaptive_max": (M(lambda s, x: F.adaptive_max_pool2d(x, 3)), torch.randn(1, 2, 7, 7)),
 "instnorm_affine": (M(lambda s, x: s.mods[0](x), [nn.InstanceNorm2d(3, affine=True)]), torch.randn(2, 3, 5, 5)),
 "prelu_multi": (M(lambda s, x: s.mods[0](x), [nn.PReLU(3)]), torch.randn(2, 3, 5, 5)),
 "glu": (M(lambda s, x: F.glu(x, 1)), torch.randn(2, 6)),
 "silu_hardtanh": (M(lambda s, x: F.silu(x) + F.hardtanh(x) + F.relu6(x) + F.logsigmoid(x) + F.tanhshrink(x)), torch.randn(2, 6)),
 "multinomial_like_topk": (M(lambda s, x: torch.topk(x, 3, 1, largest=False)[0]), torch.randn(2, 6)),
 "triu_mask": (M(lambda s, x: torch.triu(x) + torch.tril(x, -1)), torch.randn(4, 4)),
 "maxpool_ceil_dil": (M(lambda s, x: F.max_pool2d(x, 3, 2, 1, dilation=2, ceil_mode=True)), torch.randn(1, 2, 9, 9)),
 "conv1d_dil_groups": (M(lambda s, x: s.mods[0](x), [nn.Conv1d(4, 8, 3, dilation=2, groups=2, padding=2)]), torch.randn(2, 4, 10)),
 "conv3d": (M(lambda s, x: s.mods[0](x), [nn.Conv3d(2, 4, 3, padding=1)]), torch.randn(1, 2, 4, 6, 6)),
 "convT3d": (M(lambda s, x: s.mods[0](x), [nn.ConvTranspose3d(2, 4, 2, stride=2)]), torch.randn(1, 2, 3, 3, 3)),
 "cdist": (M(lambda s, x: torch.cdist(x, x + 1)), torch.randn(2, 5, 3)),
 "affine_grid": (M(lambda s, x: F.grid_sample(x, F.affine_grid(torch.tensor([[[0.9, 0.1, 0.0], [-0.1, 0.9, 0.1]]]).expand(2, 2, 3), (2, 3, 6, 6), align_corners=False), align_corners=False)), torch.randn(2, 3, 6, 6)),
 "pad_reflect": (M(lambda s, x: F.pad(x, (1, 2, 2, 1), mode="reflect") + 0), torch.randn(1, 2, 5, 5)),
 "pad_replicate": (M(lambda s, x: F.pad(x, (1, 2, 2, 1), mode="replicate")), torch.randn(1, 2, 5, 5)),
 "interp_bicubic": (M(lambda s, x: F.interpolate(x, scale_factor=1.5, mode="bicubic", align_corners=False)), torch.randn(1, 2, 4, 4)),
 "mha": (M(lambda s, x: s.mods[0](x, x, x, need_weights=False)[0], [nn.MultiheadAttention(8, 2, batch_first=True)]), torch.randn(2, 5, 8)),
 "tenc": (M(lambda s, x: s.mods[0](x), [nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)]), torch.randn(2, 5, 8)),
 "tdec": (M(lambda s, x: s.mods[0](x, x), [nn.TransformerDecoderLayer(8, 2, 16, batch_first=True)]), torch.randn(2, 5, 8)),
 "meshgrid": (M(lambda s, x: torch.stack(torch.meshgrid(torch.arange(4.), torch.arange(3.), indexing="ij"), -1).unsqueeze(0) * x.mean()), torch.randn(2, 3)),
 "erfinv": (M(lambda s, x: torch.erfinv(x.clamp(-0.9, 0.9))), torch.randn(2, 3)),
 "searchsorted": (M(lambda s, x: torch.searchsorted(torch.tensor([-1.0, 0.0, 1.0]), x).float()), torch.randn(6)),
 "embedding_pad": (M(lambda s, x: s.mods[0]((x.abs() * 3).long() % 10), [nn.Embedding(10, 4, padding_idx=0)]), torch.randn(2, 6)),
 "bilinear_layer": (M(lambda s, x: s.mods[0](x, x), [nn.Bilinear(4, 4, 3)]), torch.randn(2, 4)),
 "pixel_shuffle": (M(lambda s, x: F.pixel_shuffle(x, 2)), torch.randn(1, 8, 3, 3)),
 "channel_shuffle": (M(lambda s, x: F.channel_shuffle(x, 2)), torch.randn(1, 4, 3, 3)),
 "avgpool_ceil_nopad": (M(lambda s, x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False)), torch.randn(1, 2, 8, 8)),
 "lppool": (M(lambda s, x: F.lp_pool2d(x, 2, 2)), torch.randn(1, 2, 6, 6)),
 "amax_amin": (M(lambda s, x: x.amax((1, 2)) - x.amin(2).sum(1)), torch.randn(2, 3, 4)),
 "cumsum_rev": (M(lambda s, x: torch.flip(torch.cumsum(torch.flip(x, [1]), 1), [1])), torch.randn(2, 5)),
 "log_softmax_dim0": (M(lambda s, x: F.log_softmax(x, 0) + F.softmin(x, 1)), torch.randn(3, 4)),
 "hardswish_mish": (M(lambda s, x: F.hardswish(x) + F.mish(x) + F.elu(x, 0.5) + F.selu(x) + F.gelu(x, approximate="tanh")), torch.randn(2, 5)),
 "norm_layers": (M(lambda s, x: s.mods[0](x) + s.mods[1](x), [nn.GroupNorm(2, 4), nn.LayerNorm([4, 3, 3])]), torch.randn(2, 4, 3, 3)),
 "conv_transpose_out_pad": (M(lambda s, x: s.mods[0](x), [nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1, output_padding=1, dilation=1, groups=1)]), torch.randn(1, 2, 4, 4)),
 "index_select": (M(lambda s, x: x.index_select(1, torch.tensor([2, 0])) + x[:, [1, 1]]), torch.randn(3, 4)),
 "bool_mask_index": (M(lambda s, x: x[x > 0].sum().reshape(1)), torch.randn(3, 4)),
 "repeat_interleave": (M(lambda s, x: x.repeat_interleave(2, dim=1)), torch.randn(2, 3)),
 "complex_fft": (M(lambda s, x: torch.fft.rfft(x).abs()), torch.randn(2, 8)),
 "isin_any_all": (M(lambda s, x: (x > 0).any(1).float() + (x > -1).all(1).float()), torch.randn(2, 5)),
 "quantile_median": (M(lambda s, x: x.median(1)[0]), torch.randn(2, 5)),
 "std_mean": (M(lambda s, x: torch.std_mean(x, 1, unbiased=True)[0]), torch.randn(2, 5)),
}


def compare(path):
    import onnxruntime as ort
    m = onnx.load(path)
    inits = {i.name for i in m.graph.initializer}
    rng = np.random.default_rng(0)
    feeds = {}
    for i in m.graph.input:
        if i.name not in inits:
            t = onnx.helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type)
            feeds[i.name] = rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(t)
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
    d = tempfile.mkdtemp()
    for k, (n, a) in enumerate(feeds.items()):
        with open(os.path.join(d, f"input_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(a, n).SerializeToString())
    p = subprocess.run([DRKC, "run", path, "--device=cpu", "--input-dir", d, "--output-dir", d + "/out"],
                       capture_output=True, text=True)
    if p.returncode:
        return "drkc: " + (p.stderr.strip().splitlines() or ["?"])[-1]
    e = 0.0
    for k, r in enumerate(ref):
        o = numpy_helper.to_array(onnx.load_tensor(os.path.join(d, "out", f"output_{k}.pb")))
        if o.shape != r.shape:
            return f"output {k}: shape {o.shape}, ONNX Runtime {r.shape}"
        e = max(e, float(np.linalg.norm(o.astype(np.float64) - r) / max(np.linalg.norm(r.astype(np.float64)), 1e-30)))
    return f"{e:.1e}"


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for n in (sys.argv[2:] or list(cases)):
        mod, x = cases[n]
        mod.eval()
        row = [n]
        for exp in ("ts", "dynamo"):
            p = os.path.join(out, f"{n}.{exp}.onnx")
            try:
                if exp == "ts":
                    torch.onnx.export(mod, (x,), p, dynamo=False, opset_version=17)
                else:
                    torch.onnx.export(mod, (x,), dynamo=True).save(p)
            except Exception as e:  # the exporter's failure, not drkc's
                row.append("export failed: " + str(e).splitlines()[0][:100])
                continue
            row.append(compare(p))
        print(" | ".join(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
