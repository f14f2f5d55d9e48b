#!/usr/bin/env python3
"""Helpers of tests/bench/dwconv.sh (the direct depthwise conv kernel's GPU run).

  dwconv.py export WORK        one ONNX model per depthwise shape of SHAPES (fp32, NCHW,
                               Conv group = C with constant weights and bias, then the
                               network's activation) and per small-group shape of SMALLG,
                               written with the onnx package alone
  dwconv.py torch WORK OUT [ONLY]  the same convs in torch (fp16, channels_last; cuDNN eager
                               with cudnn.benchmark, and torch.compile of conv + activation)
                               -> OUT/torch.json (median ms; torch.compile only for the
                               comma list ONLY when given)
  dwconv.py models WORK        torchvision MobileNetV3-Large and EfficientNet-B0 (random
                               weights, BatchNorm statistics calibrated on random batches so
                               fp16 checks mean something) -> WORK/{name}_b{1,32}.onnx
  dwconv.py zoo OUT CONFIGS    the same nn.Modules in fp16 channels_last, eager and
                               torch.compile(mode="reduce-overhead") for CONFIGS (comma list
                               of NAME_bB; eager only for the others) -> OUT/zoo_torch.json
  dwconv.py table WORK OUT     drkrun --profile logs (OUT/profile-*.log) + OUT/torch.json ->
                               the GB/s table (against 4.2 TB/s) and ratios (stdout)

Bytes of a conv: its input and output once (fp16; f32 for the NCHW f32 build; weights are
noise). Timing: median of
CUDA-event-timed calls after warm-up, inputs rotated over 4 buffers."""
import json
import os
import re
import sys

HBM = 4.2e12
# name: (N, C, H, W, K, stride, activation) (MobileNetV3-Large, EfficientNet-B0, ConvNeXt-T)
SHAPES = {
    "mnv3_112x16_k3s1_b32": (32, 16, 112, 112, 3, 1, "Relu"),
    "mnv3_112x64_k3s2_b32": (32, 64, 112, 112, 3, 2, "Relu"),
    "mnv3_56x72_k5s2_b32": (32, 72, 56, 56, 5, 2, "Relu"),
    "mnv3_28x120_k5s1_b32": (32, 120, 28, 28, 5, 1, "Relu"),
    "mnv3_14x480_k3s1_b32": (32, 480, 14, 14, 3, 1, "HardSwish"),
    "mnv3_14x672_k3s1_b32": (32, 672, 14, 14, 3, 1, "HardSwish"),
    "mnv3_7x960_k5s1_b32": (32, 960, 7, 7, 5, 1, "HardSwish"),
    "mnv3_112x16_k3s1_b1": (1, 16, 112, 112, 3, 1, "Relu"),
    "effb0_112x32_k3s1_b1": (1, 32, 112, 112, 3, 1, "Sigmoid"),
    "effb0_56x144_k3s1_b32": (32, 144, 56, 56, 3, 1, "Sigmoid"),
    "effb0_28x240_k5s1_b32": (32, 240, 28, 28, 5, 1, "Sigmoid"),
    "convnext_56x96_k7_b32": (32, 96, 56, 56, 7, 1, None),
    "convnext_28x192_k7_b32": (32, 192, 28, 28, 7, 1, None),
    "convnext_14x384_k7_b32": (32, 384, 14, 14, 7, 1, None),
    "convnext_7x768_k7_b32": (32, 768, 7, 7, 7, 1, None),
    "convnext_56x96_k7_b1": (1, 96, 56, 56, 7, 1, None),
}

# small groups (RegNet-like group widths 2, 4 and 8): the direct kernel against the grouped
# implicit GEMM (dw.direct=0); name: (N, C, H, W, K, stride, group)
SMALLG = {
    "g2_56x64_k3_b32": (32, 64, 56, 56, 3, 1, 32),
    "g4_56x64_k3_b32": (32, 64, 56, 56, 3, 1, 16),
    "g8_28x128_k3_b32": (32, 128, 28, 28, 3, 1, 16),
}


def out_hw(H, K, st):
    return (H + 2 * (K // 2) - K) // st + 1


def gbytes(N, C, H, W, K, st, act):
    OH = out_hw(H, K, st)
    return 2.0 * N * C * (H * W + OH * OH)


def export(work):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(0)
    for name, (N, C, H, W, K, st, act) in SHAPES.items():
        OH = out_hw(H, K, st)
        w = (rng.standard_normal((C, 1, K, K)) / K).astype(np.float32)
        b = (rng.standard_normal(C) * 0.1).astype(np.float32)
        nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c" if act else "y"], group=C, kernel_shape=[K, K],
                                  strides=[st, st], pads=[K // 2] * 4)]
        if act == "Sigmoid":  # SiLU as torch exports it
            nodes += [helper.make_node("Sigmoid", ["c"], ["s"]), helper.make_node("Mul", ["c", "s"], ["y"])]
        elif act:
            nodes.append(helper.make_node(act, ["c"], ["y"]))
        g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [N, C, H, W])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [N, C, OH, OH])],
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
        onnx.save(m, os.path.join(work, name + ".onnx"))
    for name, (N, C, H, W, K, st, G) in SMALLG.items():
        OH = out_hw(H, K, st)
        w = (rng.standard_normal((C, C // G, K, K)) / K).astype(np.float32)
        nodes = [helper.make_node("Conv", ["x", "w"], ["y"], group=G, kernel_shape=[K, K], strides=[st, st],
                                  pads=[K // 2] * 4)]
        g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [N, C, H, W])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [N, C, OH, OH])],
                              [numpy_helper.from_array(w, "w")])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
        onnx.save(m, os.path.join(work, name + ".onnx"))
    print(f"exported {len(SHAPES)} depthwise and {len(SMALLG)} small-group convs to {work}", flush=True)


def med_ms(torch, f, xs, iters=50, warmup=10):
    from conv_hopper import median_event_ms
    return median_event_ms(torch, lambda i: f(xs[i % len(xs)]), iters, warmup)


def act_fn(torch, act):
    F = torch.nn.functional
    return {"Relu": F.relu, "HardSwish": F.hardswish, "Sigmoid": F.silu, None: lambda t: t}[act]


def run_torch(work, out, only=None):
    import torch
    torch.backends.cudnn.benchmark = True
    res = {"torch": torch.__version__, "cudnn": torch.backends.cudnn.version(), "eager": {}, "compile": {}}
    for name, (N, C, H, W, K, st, act) in SHAPES.items():
        xs = [torch.randn(N, C, H, W, device="cuda", dtype=torch.float16).to(memory_format=torch.channels_last)
              for _ in range(4)]
        w = (torch.randn(C, 1, K, K, device="cuda", dtype=torch.float16) / K).to(memory_format=torch.channels_last)
        b = torch.randn(C, device="cuda", dtype=torch.float16) * 0.1
        a = act_fn(torch, act)
        conv = lambda x: torch.nn.functional.conv2d(x, w, b, stride=st, padding=K // 2, groups=C)
        res["eager"][name] = med_ms(torch, conv, xs)  # cuDNN alone (the activation is another kernel)
        if only and name not in only:
            continue
        try:
            fc = torch.compile(lambda x: a(conv(x)))
            res["compile"][name] = med_ms(torch, fc, xs)
        except Exception as e:  # noqa: BLE001 - report and go on
            print(f"{name}: torch.compile failed: {type(e).__name__}: {e}", flush=True)
    json.dump(res, open(os.path.join(out, "torch.json"), "w"), indent=1)
    print(f"torch {res['torch']} cudnn {res['cudnn']}: {len(res['eager'])} eager, {len(res['compile'])} compiled", flush=True)


NETS = ("mobilenet_v3_large", "efficientnet_b0")


def calibrated(torch, torchvision, name):
    torch.manual_seed(0)
    m = getattr(torchvision.models, name)(weights=None)
    for mod in m.modules():  # as tests/zoo and conv_hopper.py: running statistics from random batches
        if isinstance(mod, torch.nn.BatchNorm2d):
            mod.reset_running_stats()
            mod.momentum = None
    m.train()
    with torch.no_grad():
        for _ in range(3):
            m(torch.randn(8, 3, 224, 224))
    return m.eval()


def models(work):
    import torch
    import torchvision
    os.makedirs(work, exist_ok=True)
    for name in NETS:
        m = calibrated(torch, torchvision, name)
        for b in (1, 32):
            path = os.path.join(work, f"{name}_b{b}.onnx")
            x = torch.randn(b, 3, 224, 224)
            try:
                torch.onnx.export(m, (x,), path, dynamo=False, opset_version=17, input_names=["x"])
            except Exception as e:  # noqa: BLE001 - the TorchScript exporter is gone: the dynamo one
                print(f"torchscript export failed ({type(e).__name__}), dynamo", flush=True)
                torch.onnx.export(m, (x,), path, dynamo=True, input_names=["x"])
    print(f"exported {len(NETS)} networks at b1 and b32 to {work}", flush=True)


def zoo(out, configs):
    import torch
    import torchvision
    res = {"eager": {}, "compile": {}}
    for name in NETS:
        m = calibrated(torch, torchvision, name).half().cuda().to(memory_format=torch.channels_last)
        for b in (1, 32):
            key = f"{name}_b{b}"
            xs = [torch.randn(b, 3, 224, 224, device="cuda", dtype=torch.float16).to(memory_format=torch.channels_last)
                  for _ in range(2)]
            res["eager"][key] = med_ms(torch, m, xs, iters=30, warmup=5)
            if key not in configs:
                continue
            try:
                fc = torch.compile(m, mode="reduce-overhead")
                res["compile"][key] = med_ms(torch, fc, xs, iters=50, warmup=15)
            except Exception as e:  # noqa: BLE001
                print(f"{key}: torch.compile failed: {type(e).__name__}: {e}", flush=True)
            torch._dynamo.reset()
    json.dump(res, open(os.path.join(out, "zoo_torch.json"), "w"), indent=1)
    print("torch fp16 eager: " + ", ".join(f"{k} {v:.3f} ms" for k, v in res["eager"].items()) +
          "; torch.compile(reduce-overhead): " + ", ".join(f"{k} {v:.3f} ms" for k, v in res["compile"].items()), flush=True)


def profile(path):
    """(resident median ms, [(ms, kernel name)]) of a drkrun --profile log, or None."""
    if not os.path.exists(path):
        return None
    txt = open(path).read()
    m = re.search(r"resident latency .*?median ([0-9.]+) ms", txt)
    rows = [(float(a), b) for a, b in re.findall(r"^ +\d+ +([0-9.]+) +[0-9.]+% +(\S+)", txt, re.M)]
    return (float(m.group(1)) if m else None), rows


def table(work, out):
    tj = os.path.join(out, "torch.json")
    t = json.load(open(tj)) if os.path.exists(tj) else {"eager": {}, "compile": {}}
    print("single depthwise convs: the drkc kernel (drkrun --profile) vs cuDNN (fp16 channels_last, the conv"
          " alone) and torch.compile (conv + activation); GB/s of the fp16 input + output")
    table_form(out, t, "nhwc", "NHWC fp16 (--layout=nhwc)")
    table_form(out, t, "nchw32", "NCHW f32 (default flags; torch columns are still fp16 channels_last)")
    print("\nsmall groups (NHWC fp16): direct kernel vs grouped implicit GEMM (dw.direct=0), conv kernel ms")
    for name, (N, C, H, W, K, st, G) in SMALLG.items():
        r = []
        for form in ("nhwc", "gemm"):
            p = profile(os.path.join(out, f"profile-{name}-{form}.log"))
            conv = [x for x in (p[1] if p else []) if "Conv" in x[1]]
            r.append(max(conv)[0] if conv else None)
        d, gm = r
        by = gbytes(N, C, H, W, K, st, None)
        print(f"{name:26} direct {d if d else '-'} ms" + (f" ({by / d / 1e6:.0f} GB/s)" if d else "") +
              f", GEMM {gm if gm else '-'} ms" + (f", GEMM/direct {gm / d:.2f}" if d and gm else ""))
    zj = os.path.join(out, "zoo_torch.json")
    z = json.load(open(zj)) if os.path.exists(zj) else {"eager": {}, "compile": {}}
    print("\nnetworks: drkrun resident median (ms) vs torch fp16 channels_last")
    print(f"{'model':28} {'fp16':>8} {'f32':>8} {'eager':>8} {'compile':>8} {'comp/fp16':>9} {'f32/fp16':>8}")
    for name in NETS:
        for b in (1, 32):
            key = f"{name}_b{b}"
            p16 = profile(os.path.join(out, f"run-{key}-fp16.log"))
            p32 = profile(os.path.join(out, f"run-{key}-f32.log"))
            a, f = p16[0] if p16 else None, p32[0] if p32 else None
            e, c = z["eager"].get(key), z["compile"].get(key)
            fmt = lambda v: f"{v:8.3f}" if v else f"{'-':>8}"
            print(f"{key:28} {fmt(a)} {fmt(f)} {fmt(e)} {fmt(c)} {(c / a if a and c else 0):9.2f} {(f / a if a and f else 0):8.2f}")


def table_form(out, t, form, title):
    print(f"\n{title}")
    print(f"{'shape':26} {'drkc ms':>8} {'GB/s':>6} {'%HBM':>5} {'cuDNN ms':>8} {'GB/s':>6} {'x cuDNN':>7} "
          f"{'compile':>8} {'x comp':>6}  kernel")
    for name, shp in SHAPES.items():
        by = gbytes(*shp) * (2 if form == "nchw32" else 1)  # f32 tensors: twice the bytes
        p = profile(os.path.join(out, f"profile-{name}-{form}.log"))
        if not p and form != "nhwc":
            continue
        conv = [r for r in (p[1] if p else []) if "Conv" in r[1]]
        if not conv:
            print(f"{name:26} (no profile)")
            continue
        ms, k = max(conv)
        e, c = t["eager"].get(name), t["compile"].get(name)
        es = f"{e:8.4f} {by / e / 1e6:6.0f} {e / ms:7.2f}" if e else f"{'-':>8} {'-':>6} {'-':>7}"
        cs = f"{c:8.4f} {c / ms:6.2f}" if c else f"{'-':>8} {'-':>6}"
        print(f"{name:26} {ms:8.4f} {by / ms / 1e6:6.0f} {100 * by / ms * 1e3 / HBM:5.0f} {es} {cs}  {k}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "export":
        export(sys.argv[2])
    elif len(sys.argv) in (4, 5) and sys.argv[1] == "torch":
        run_torch(sys.argv[2], sys.argv[3], sys.argv[4].split(",") if len(sys.argv) == 5 else None)
    elif len(sys.argv) == 3 and sys.argv[1] == "models":
        models(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "zoo":
        zoo(sys.argv[2], sys.argv[3].split(","))
    elif len(sys.argv) == 4 and sys.argv[1] == "table":
        table(sys.argv[2], sys.argv[3])
    else:
        print(__doc__)
        sys.exit(2)
