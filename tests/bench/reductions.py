#!/usr/bin/env python3
"""Spatial reductions and few-long-row normalizations on the GPU: checked, then timed.

Builds one small ONNX graph per case (the onnx package, opset 21) in float16 (and float32 for
the cases of F32_CASES; the row cases of ROW_CASES in bfloat16 only, compiled with
--precision=bf16: LayerNorm, RMSNorm written as primitives (Pow, ReduceMean, Add, Sqrt, Div,
Mul, as exporters emit it) and Softmax over bf16 rows of 8192 x 8192, 4096 x 32768 and
16384 x 1024, issue 17 part 4; `--set rows` runs only those, `--set spatial` only the others):
EfficientNet-B0 SE-block ReduceMean over H, W in NCHW and NHWC (batch 1 and 32), the SE gate
x * Sigmoid(ReduceMean(x)) (one fused row group), GlobalAveragePool [32, 2048, 7, 7] (ResNet),
poolformer's GroupNorm(1 group) + Relu over [1, 64, 56, 56] and [1, 512, 7, 7], ConvNeXt's
channels-last LayerNorm, a long-row Softmax. Each is compiled with
`--target=sm_90a --precision=fp16 --fusion-aggressiveness=3` and

  1. checked: `drkc run MODEL --device=cuda --check` (the GPU module against the CPU
     interpreter, same flags); a case that fails its check is not timed;
  2. timed: `drkrun MODULE --profile` (per-kernel medians, kernels launched one by one) and the
     resident median (CUDA graph replay, inputs on the GPU);
  3. compared: the same op in PyTorch (eager; torch.compile for the f16 graphs), same dtype
     and shapes, the median of single calls with CUDA events.

Achieved GB/s = (bytes of the graph's inputs + outputs at the module's interface dtypes) / the
sum of drkc's kernel times, against 4.2 TB/s (the H200's copy bandwidth; the script also
measures a device-to-device copy of 256 MiB in the same run and prints it). Torch's GB/s uses
the same byte count over its single-call median (which includes its launch overhead: for the
microsecond kernels the ratio to drkc's resident median is the fairer one, both printed).
Inputs stay resident between runs on both sides (L2-warm for tensors under 50 MB).

Usage: reductions.py OUT_DIR --drkc DRKC --drkrun DRKRUN [--iters 100] [--only NAME ...]
Writes OUT_DIR/results.md and OUT_DIR/results.json; logs under OUT_DIR/<case>/.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FLAGS = ["--target=sm_90a", "--precision=fp16", "--fusion-aggressiveness=3"]


def flags_of(dt):
    return [f for f in FLAGS if not f.startswith("--precision")] + ["--precision=bf16"] if dt == "bf16" else FLAGS


# ---- cases: (name, builder(dtype) -> (graph nodes, inputs, outputs, initializers), torch fn) ----

def t_of(dt):
    return {"f16": TensorProto.FLOAT16, "bf16": TensorProto.BFLOAT16}.get(dt, TensorProto.FLOAT)


def np_of(dt):
    return np.float16 if dt == "f16" else np.float32


def init(name, a, dt):
    """an initializer of dtype dt from the float array a (bf16: rounded to nearest even)"""
    if dt != "bf16":
        return numpy_helper.from_array(np.asarray(a).astype(np_of(dt)), name)
    u = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    b = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return helper.make_tensor(name, TensorProto.BFLOAT16, list(np.shape(a)), b.tobytes(), raw=True)


def reduce_mean(shape, axes, keep=1):
    def build(dt):
        out = [s if i not in axes else 1 for i, s in enumerate(shape)] if keep else [s for i, s in enumerate(shape) if i not in axes]
        ax = numpy_helper.from_array(np.array(axes, np.int64), "axes")
        nodes = [helper.make_node("ReduceMean", ["x", "axes"], ["y"], keepdims=keep)]
        return nodes, [("x", shape)], [("y", out)], [ax]

    def torch_fn(torch):
        return lambda x: x.mean(dim=tuple(axes), keepdim=bool(keep))
    return build, torch_fn


def se_gate(shape):
    """x * Sigmoid(ReduceMean_HW(x)): the squeeze and the excitation's broadcast multiply."""
    def build(dt):
        ax = numpy_helper.from_array(np.array([2, 3], np.int64), "axes")
        nodes = [helper.make_node("ReduceMean", ["x", "axes"], ["m"], keepdims=1),
                 helper.make_node("Sigmoid", ["m"], ["s"]),
                 helper.make_node("Mul", ["x", "s"], ["y"])]
        return nodes, [("x", shape)], [("y", shape)], [ax]

    def torch_fn(torch):
        return lambda x: x * torch.sigmoid(x.mean(dim=(2, 3), keepdim=True))
    return build, torch_fn


def gap(shape):
    def build(dt):
        return [helper.make_node("GlobalAveragePool", ["x"], ["y"])], [("x", shape)], [("y", shape[:2] + [1, 1])], []

    def torch_fn(torch):
        return lambda x: torch.nn.functional.adaptive_avg_pool2d(x, 1)
    return build, torch_fn


def group_norm_relu(shape, groups):
    C = shape[1]

    def build(dt):
        rng = np.random.default_rng(1)
        sc = numpy_helper.from_array((1 + 0.1 * rng.standard_normal(C)).astype(np_of(dt)), "scale")
        bi = numpy_helper.from_array((0.1 * rng.standard_normal(C)).astype(np_of(dt)), "bias")
        nodes = [helper.make_node("GroupNormalization", ["x", "scale", "bias"], ["g"], num_groups=groups, epsilon=1e-5),
                 helper.make_node("Relu", ["g"], ["y"])]
        return nodes, [("x", shape)], [("y", shape)], [sc, bi]

    def torch_fn(torch):
        def f(x, _w={}):
            if "w" not in _w:
                rng = np.random.default_rng(1)
                _w["w"] = torch.tensor((1 + 0.1 * rng.standard_normal(C)), dtype=x.dtype, device=x.device)
                _w["b"] = torch.tensor(0.1 * rng.standard_normal(C), dtype=x.dtype, device=x.device)
            return torch.relu(torch.nn.functional.group_norm(x, groups, _w["w"], _w["b"], 1e-5))
        return f
    return build, torch_fn


def gn1_token_mixer(shape):
    """poolformer's block: x + (AvgPool3x3(GroupNorm(x)) - GroupNorm(x)); the GroupNorm is a
    kernel of its own (it feeds a pool)."""
    C = shape[1]

    def build(dt):
        rng = np.random.default_rng(3)
        sc = numpy_helper.from_array((1 + 0.1 * rng.standard_normal(C)).astype(np_of(dt)), "scale")
        bi = numpy_helper.from_array((0.1 * rng.standard_normal(C)).astype(np_of(dt)), "bias")
        nodes = [helper.make_node("GroupNormalization", ["x", "scale", "bias"], ["g"], num_groups=1, epsilon=1e-5),
                 helper.make_node("AveragePool", ["g"], ["p"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1],
                                  count_include_pad=0),
                 helper.make_node("Sub", ["p", "g"], ["d"]),
                 helper.make_node("Add", ["x", "d"], ["y"])]
        return nodes, [("x", shape)], [("y", shape)], [sc, bi]

    def torch_fn(torch):
        def f(x, _w={}):
            if "w" not in _w:
                _w["w"] = torch.ones(C, dtype=x.dtype, device=x.device)
                _w["b"] = torch.zeros(C, dtype=x.dtype, device=x.device)
            g = torch.nn.functional.group_norm(x, 1, _w["w"], _w["b"], 1e-5)
            return x + (torch.nn.functional.avg_pool2d(g, 3, 1, 1, count_include_pad=False) - g)
        return f
    return build, torch_fn


def layer_norm_last(shape):
    C = shape[-1]

    def build(dt):
        rng = np.random.default_rng(2)
        sc = init("scale", 1 + 0.1 * rng.standard_normal(C), dt)
        bi = init("bias", 0.1 * rng.standard_normal(C), dt)
        nodes = [helper.make_node("LayerNormalization", ["x", "scale", "bias"], ["y"], axis=-1, epsilon=1e-6)]
        return nodes, [("x", shape)], [("y", shape)], [sc, bi]

    def torch_fn(torch):
        def f(x, _w={}):
            if "w" not in _w:
                _w["w"] = torch.ones(C, dtype=x.dtype, device=x.device)
                _w["b"] = torch.zeros(C, dtype=x.dtype, device=x.device)
            return torch.nn.functional.layer_norm(x, (C,), _w["w"], _w["b"], 1e-6)
        return f
    return build, torch_fn


def softmax_last(shape):
    def build(dt):
        return [helper.make_node("Softmax", ["x"], ["y"], axis=-1)], [("x", shape)], [("y", shape)], []

    def torch_fn(torch):
        return lambda x: torch.softmax(x, dim=-1)
    return build, torch_fn


def rms_norm_prim(shape, eps=1e-6):
    """RMSNorm as exporters write it: x / Sqrt(ReduceMean(Pow(x, 2)) + eps) * w (one row group)"""
    C = shape[-1]

    def build(dt):
        rng = np.random.default_rng(4)
        w = init("w", 1 + 0.1 * rng.standard_normal(C), dt)
        ax = numpy_helper.from_array(np.array([-1], np.int64), "axes")
        nodes = [helper.make_node("Pow", ["x", "two"], ["sq"]),
                 helper.make_node("ReduceMean", ["sq", "axes"], ["ms"], keepdims=1),
                 helper.make_node("Add", ["ms", "eps"], ["mse"]),
                 helper.make_node("Sqrt", ["mse"], ["rt"]),
                 helper.make_node("Div", ["x", "rt"], ["xn"]),
                 helper.make_node("Mul", ["xn", "w"], ["y"])]
        return nodes, [("x", shape)], [("y", shape)], [w, ax, init("two", np.float32(2.0), dt), init("eps", np.float32(eps), dt)]

    def torch_fn(torch):
        def f(x, _w={}):
            if "w" not in _w:
                _w["w"] = torch.ones(C, dtype=x.dtype, device=x.device)
            return torch.nn.functional.rms_norm(x, (C,), _w["w"], eps)
        return f
    return build, torch_fn


# issue 17 part 4: bf16 row kernels at the hardware limit (bf16 graphs only)
ROW_SHAPES = [[8192, 8192], [4096, 32768], [16384, 1024]]
ROW_CASES = set()
for _s in ROW_SHAPES:
    ROW_CASES |= {f"{op}_{_s[0]}x{_s[1]}" for op in ("ln", "rms_prim", "softmax")}

CASES = {
    # the issue's two: poolformer_s12's GroupNorm(num_groups=1) as its token mixer runs it
    # (the norm a kernel of its own, feeding a pool) and with a Relu (one fused row group);
    # placeholders that keep them first in the run (their entries below fill them in)
    "gn1_token_mixer_1x64x56x56": None,
    "gn1_relu_1x64x56x56": None,
    # EfficientNet-B0 SE blocks (the squeeze), NCHW: N*C contiguous rows of H*W
    "se_mean_nchw_1x32x112x112": reduce_mean([1, 32, 112, 112], [2, 3]),
    "se_mean_nchw_1x144x56x56": reduce_mean([1, 144, 56, 56], [2, 3]),
    "se_mean_nchw_1x240x28x28": reduce_mean([1, 240, 28, 28], [2, 3]),
    "se_mean_nchw_1x672x14x14": reduce_mean([1, 672, 14, 14], [2, 3]),
    "se_mean_nchw_1x1152x7x7": reduce_mean([1, 1152, 7, 7], [2, 3]),
    "se_mean_nchw_32x32x112x112": reduce_mean([32, 32, 112, 112], [2, 3]),
    "se_mean_nchw_32x1152x7x7": reduce_mean([32, 1152, 7, 7], [2, 3]),
    # the same in NHWC: the reduced H, W axes C elements apart, C contiguous
    "se_mean_nhwc_1x112x112x32": reduce_mean([1, 112, 112, 32], [1, 2]),
    "se_mean_nhwc_1x56x56x144": reduce_mean([1, 56, 56, 144], [1, 2]),
    "se_mean_nhwc_1x7x7x1152": reduce_mean([1, 7, 7, 1152], [1, 2]),
    "se_mean_nhwc_32x112x112x32": reduce_mean([32, 112, 112, 32], [1, 2]),
    "se_mean_nhwc_32x7x7x1152": reduce_mean([32, 7, 7, 1152], [1, 2]),
    # the SE squeeze with the excitation's broadcast multiply in one row group
    "se_gate_nchw_1x32x112x112": se_gate([1, 32, 112, 112]),
    "se_gate_nchw_1x672x14x14": se_gate([1, 672, 14, 14]),
    # ResNet-50's head
    "gap_32x2048x7x7": gap([32, 2048, 7, 7]),
    "gap_1x2048x7x7": gap([1, 2048, 7, 7]),
    # poolformer_s12's GroupNorm(num_groups=1) (+ the Relu of the issue's reproduction)
    "gn1_relu_1x64x56x56": group_norm_relu([1, 64, 56, 56], 1),
    "gn1_relu_1x512x7x7": group_norm_relu([1, 512, 7, 7], 1),
    "gn1_relu_32x64x56x56": group_norm_relu([32, 64, 56, 56], 1),
    "gn1_token_mixer_1x64x56x56": gn1_token_mixer([1, 64, 56, 56]),
    # ConvNeXt's channels-last LayerNorm (many short rows: the form that was already fine)
    "ln_convnext_1x56x56x96": layer_norm_last([1, 56, 56, 96]),
    "ln_convnext_32x56x56x96": layer_norm_last([32, 56, 56, 96]),
    # a softmax over few long rows
    "softmax_4x65536": softmax_last([4, 65536]),
}
for _s in ROW_SHAPES:
    _k = f"{_s[0]}x{_s[1]}"
    CASES[f"ln_{_k}"] = layer_norm_last(_s)
    CASES[f"rms_prim_{_k}"] = rms_norm_prim(_s)
    CASES[f"softmax_{_k}"] = softmax_last(_s)


# f32 graphs (the module keeps f32 at its interface; --precision=fp16 computes in f16 inside)
# only for these, to keep the run within its time
F32_CASES = {"se_mean_nchw_1x32x112x112", "se_mean_nhwc_1x112x112x32", "se_gate_nchw_1x32x112x112",
             "gap_32x2048x7x7", "gn1_relu_1x64x56x56", "softmax_4x65536"}


def build_model(name, dt, path):
    build, _ = CASES[name]
    nodes, ins, outs, inits = build(dt)
    g = helper.make_graph(nodes, name,
                          [helper.make_tensor_value_info(n, t_of(dt), s) for n, s in ins],
                          [helper.make_tensor_value_info(n, t_of(dt), s) for n, s in outs], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    onnx.checker.check_model(m)
    onnx.save(m, path)
    nbytes = sum(int(np.prod(s)) for _, s in ins + outs) * (2 if dt in ("f16", "bf16") else 4)
    return ins, nbytes


def run(cmd, log, timeout):
    t = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        out, rc = p.stdout + p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = f"timed out after {timeout} s\n{e.stdout or ''}{e.stderr or ''}", 124
    with open(log, "w") as f:
        f.write(" ".join(cmd) + f"\n# rc={rc} {time.time() - t:.1f}s\n" + (out if isinstance(out, str) else out.decode()))
    return rc, out if isinstance(out, str) else out.decode()


def torch_times(name, dt, ins, iters):
    try:
        import torch
    except ImportError:
        return {"error": "no torch"}
    if not torch.cuda.is_available():
        return {"error": "no CUDA in torch"}
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from peers import time_calls
    _, tf = CASES[name]
    fn = tf(torch)
    dtype = {"f16": torch.float16, "bf16": torch.bfloat16}.get(dt, torch.float32)
    args = [torch.randn(*s, device="cuda", dtype=dtype) for _, s in ins]
    r = {}
    # torch.compile only for the 16-bit graphs (inductor compiles each shape anew: seconds a case)
    for mode in ("eager", "compile") if dt in ("f16", "bf16") else ("eager",):
        try:
            f = fn if mode == "eager" else torch.compile(fn)
            med, mn = time_calls(f, args, iters, 20)
            r[mode] = med
        except Exception as e:  # a torch failure is a result, not the end of the run
            r[mode + "_error"] = str(e).splitlines()[0][:200]
    return r


def copy_bandwidth():
    try:
        import torch
        if not torch.cuda.is_available():
            return None
        n = 256 << 20
        a = torch.empty(n, dtype=torch.uint8, device="cuda")
        b = torch.empty_like(a)
        for _ in range(5):
            b.copy_(a)
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(20):
            b.copy_(a)
        e.record()
        e.synchronize()
        return 2 * n * 20 / (s.elapsed_time(e) * 1e-3) / 1e9  # read + write
    except Exception:
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--drkc", default=os.environ.get("DRKC"))
    ap.add_argument("--drkrun", default=os.environ.get("DRKRUN"))
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--set", choices=("all", "rows", "spatial"), default="all",
                    help="rows: the bf16 row cases (ROW_CASES) only; spatial: the others")
    ap.add_argument("--dtypes", default="f16,f32")
    ap.add_argument("--all-f32", action="store_true", help="f32 graphs of every case (default: F32_CASES)")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--check-timeout", type=int, default=60)
    args = ap.parse_args()
    if not args.drkc or not args.drkrun:
        ap.error("--drkc/--drkrun (or DRKC/DRKRUN) are required")
    os.makedirs(args.out, exist_ok=True)
    names = args.only or [n for n in CASES if args.set == "all" or (n in ROW_CASES) == (args.set == "rows")]
    bw = None if args.no_torch else copy_bandwidth()
    rows, res = [], {"flags": FLAGS, "copy_gbs": bw, "cases": {}}
    head = ("| case | check | drkc kernels µs | drkc resident µs | GB/s | of 4.2 TB/s | torch eager µs (drkc/eager) | "
            "torch.compile µs (drkc/compile) | kernels (µs) |\n|---|---|---|---|---|---|---|---|---|\n")
    print(f"device-to-device copy: {bw:.0f} GB/s (read + write)" if bw else "device-to-device copy: not measured")
    print(head, end="", flush=True)
    for name in names:
        for dt in ["bf16"] if name in ROW_CASES else args.dtypes.split(","):
            if dt == "f32" and name not in F32_CASES and not args.all_f32:
                continue
            key = f"{name}.{dt}"
            d = os.path.join(args.out, key)
            os.makedirs(d, exist_ok=True)
            model = os.path.join(d, "model.onnx")
            ins, nbytes = build_model(name, dt, model)
            r = {"bytes": nbytes}
            res["cases"][key] = r
            rc, out = run([args.drkc, model] + flags_of(dt) + ["-o", os.path.join(d, "model.drkm")], os.path.join(d, "compile.log"), 120)
            if rc:
                r["error"] = "compile: " + out.strip().splitlines()[-1][:200] if out.strip() else f"compile rc {rc}"
            else:
                rc, out = run([args.drkc, "run", model, "--device=cuda", "--check"] + flags_of(dt), os.path.join(d, "check.log"),
                              args.check_timeout)
                r["check"] = "pass" if rc == 0 else "FAIL"
                m = re.findall(r"(rel[a-z ]*error[^\n]*)", out)
                if m:
                    r["check_detail"] = m[-1][:160]
                if rc:
                    r["error"] = f"check rc {rc}: " + (out.strip().splitlines()[-1][:200] if out.strip() else "")
            if "error" not in r:
                rc, out = run([args.drkrun, os.path.join(d, "model.drkm"), "--iters", str(args.iters), "--profile"],
                              os.path.join(d, "drkrun.log"), 120)
                m = re.search(r"^resident latency.*?median ([0-9.eE+-]+) ms", out, re.M)
                kt = re.findall(r"^\s+\d+\s+([0-9.]+)\s+[0-9.]+%\s+(\S+)", out, re.M)
                if rc or not m or not kt:
                    r["error"] = f"drkrun rc {rc}"
                else:
                    r["resident_ms"] = float(m.group(1))
                    r["kernels"] = [(k, float(t)) for t, k in kt]
                    r["kernel_ms"] = sum(float(t) for t, _ in kt)
                    r["gbs"] = nbytes / (r["kernel_ms"] * 1e-3) / 1e9
            if not args.no_torch and "error" not in r:
                r["torch"] = torch_times(name, dt, ins, args.iters)
            tr = r.get("torch", {})
            line = (f"| {key} | {r.get('check', '-')} | " +
                    (f"{r['kernel_ms'] * 1e3:.1f} | {r['resident_ms'] * 1e3:.1f} | {r['gbs']:.0f} | {100 * r['gbs'] / 4200:.0f}% | "
                     if "gbs" in r else "- | - | - | - | ") +
                    " | ".join(f"{tr[mo] * 1e3:.1f} ({r['resident_ms'] / tr[mo]:.2f})" if mo in tr and "resident_ms" in r else "-"
                               for mo in ("eager", "compile")) +
                    " | " + ", ".join(f"{k} {t * 1e3:.1f}" for k, t in r.get("kernels", [])) + " " + r.get("error", "") + " |")
            rows.append(line)
            print(line, flush=True)
            # rewritten after every case: a run cut short keeps what it measured
            with open(os.path.join(args.out, "results.json"), "w") as f:
                json.dump(res, f, indent=1)
            with open(os.path.join(args.out, "results.md"), "w") as f:
                f.write(f"flags: {' '.join(FLAGS)} (bf16 cases: --precision=bf16); copy bandwidth in this run: {bw and round(bw)} GB/s\n\n" + head +
                        "\n".join(rows) + "\n")
    bad = [k for k, r in res["cases"].items() if r.get("check") == "FAIL" or "error" in r]
    print(f"{len(res['cases']) - len(bad)}/{len(res['cases'])} cases checked and timed; failing: {' '.join(bad) or 'none'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
