#!/usr/bin/env python3
"""Helpers of tests/bench/conv_hopper.sh (the sm_90a implicit-GEMM convolution's GPU run).

  conv_hopper.py export WORK        ONNX models (fp32, NCHW, torch.onnx.export) into WORK:
                                    the single convs of SINGLE (conv3x3: N64 C256 H56 K256
                                    pad 1, conv3x3_14: the same at H14, stem: ResNet-50's
                                    N64 C3 H224 K64 7x7 stride 2 pad 3), resnet50_b1/_b64,
                                    regnet_y_400mf_b1/_b32, convnext_tiny_b1/_b32
                                    (torchvision, random weights, BatchNorm statistics
                                    calibrated on random batches so activations stay O(1))
                                    and resnet50_convs.json (every conv's shape at b64)
  conv_hopper.py cudnn WORK OUT     cuDNN through torch (fp16, channels_last,
                                    cudnn.benchmark) on the same shapes: median ms of the
                                    single convs and of each ResNet-50 b64 conv -> OUT/cudnn.json
  conv_hopper.py torch WORK OUT MODEL MODES
                                    torch on the whole model MODEL (a name of MODELS: fp16,
                                    channels_last, cudnn.benchmark), MODES a comma list of
                                    eager and reduce-overhead (torch.compile, CUDA graphs):
                                    median ms added to OUT/torch-MODEL.json
  conv_hopper.py table WORK OUT     drkrun --profile logs (OUT/profile-*.log) + OUT/cudnn.json
                                    + OUT/torch-*.json -> the TFLOP/s table and ratios (stdout)

Timing: median of CUDA-event-timed single calls after warm-up, inputs rotated over 4
buffers for the single convs (ResNet-50 layer inputs are up to 51 MB, L2 is 50 MB); whole
models: one input, like drkrun's resident latency."""
import json
import os
import re
import sys
import time

SINGLE = {  # name: (N, C, H, W, K, R, S, stride, pad)
    "conv3x3": (64, 256, 56, 56, 256, 3, 3, 1, 1),
    "conv3x3_14": (64, 256, 14, 14, 256, 3, 3, 1, 1),
    "stem": (64, 3, 224, 224, 64, 7, 7, 2, 3),
}
# whole models: name -> (torchvision constructor, batch)
MODELS = {
    "resnet50_b1": ("resnet50", 1), "resnet50_b64": ("resnet50", 64),
    "regnet_y_400mf_b1": ("regnet_y_400mf", 1), "regnet_y_400mf_b32": ("regnet_y_400mf", 32),
    "convnext_tiny_b1": ("convnext_tiny", 1), "convnext_tiny_b32": ("convnext_tiny", 32),
}


def torchvision_model(torch, ctor, calibrate=True):
    import torchvision
    torch.manual_seed(0)
    m = getattr(torchvision.models, ctor)(weights=None)
    if not calibrate:  # timing only
        return m.eval()
    # BatchNorm running statistics from random batches (as tests/zoo does): with the default
    # (mean 0, var 1) deep random nets blow up or vanish, and fp16 checks mean nothing
    bns = [mod for mod in m.modules() if isinstance(mod, torch.nn.BatchNorm2d)]
    for mod in bns:
        mod.reset_running_stats()
        mod.momentum = None
    if bns:
        m.train()
        with torch.no_grad():
            for _ in range(3):
                m(torch.randn(8, 3, 224, 224))
    return m.eval()


def flops(N, C, H, W, K, R, S, st, pad):
    OH = (H + 2 * pad - R) // st + 1
    OW = (W + 2 * pad - S) // st + 1
    return 2.0 * N * OH * OW * K * C * R * S


def export(work):
    import torch
    os.makedirs(work, exist_ok=True)
    torch.manual_seed(0)

    def onnx_export(m, x, path):
        try:
            torch.onnx.export(m, (x,), path, dynamo=False, opset_version=17, input_names=["x"])
        except Exception as e:  # the TorchScript exporter is gone: the dynamo one
            print(f"torchscript export failed ({type(e).__name__}), dynamo", flush=True)
            torch.onnx.export(m, (x,), path, dynamo=True, input_names=["x"])

    for name, (N, C, H, W, K, R, S, st, pad) in SINGLE.items():
        m = torch.nn.Conv2d(C, K, (R, S), stride=st, padding=pad, bias=False).eval()
        onnx_export(m, torch.randn(N, C, H, W), os.path.join(work, name + ".onnx"))
    m = torchvision_model(torch, "resnet50")
    convs = []

    def hook(mod, inp, out):
        x = inp[0]
        convs.append([64, mod.in_channels, x.shape[2], x.shape[3], mod.out_channels, mod.kernel_size[0],
                      mod.kernel_size[1], mod.stride[0], mod.padding[0]])
    hs = [mod.register_forward_hook(hook) for mod in m.modules() if isinstance(mod, torch.nn.Conv2d)]
    with torch.no_grad():
        m(torch.randn(1, 3, 224, 224))  # the shapes at batch 64, from one image
    for h in hs:
        h.remove()
    json.dump(convs, open(os.path.join(work, "resnet50_convs.json"), "w"))
    built = {"resnet50": m}
    for name, (ctor, b) in MODELS.items():
        try:
            if ctor not in built:
                built[ctor] = torchvision_model(torch, ctor)
            onnx_export(built[ctor], torch.randn(b, 3, 224, 224), os.path.join(work, name + ".onnx"))
        except Exception as e:  # one model failing must not lose the others
            print(f"{name}: export failed: {type(e).__name__}: {str(e)[:300]}", flush=True)
    print(f"exported to {work}: {len(convs)} ResNet-50 convs", flush=True)


def time_conv(torch, shape, iters=50, warmup=10):
    N, C, H, W, K, R, S, st, pad = shape
    dev = "cuda"
    xs = [torch.randn(N, C, H, W, device=dev, dtype=torch.float16).to(memory_format=torch.channels_last) for _ in range(4)]
    w = torch.randn(K, C, R, S, device=dev, dtype=torch.float16).to(memory_format=torch.channels_last) * 0.05
    f = torch.nn.functional.conv2d
    return median_event_ms(torch, lambda i: f(xs[i % 4], w, stride=st, padding=pad), iters, warmup)


def median_event_ms(torch, call, iters, warmup):
    """Median ms of call(i) over iters runs after warmup ones, each bracketed by CUDA events
    (peers.event_times); i rotates the inputs so L2 does not hold the last run's."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from peers import event_times
    with torch.inference_mode():
        for i in range(warmup):
            call(i)
        torch.cuda.synchronize()
        it = iter(range(iters))
        ms = sorted(event_times(lambda: call(next(it)), iters))
    return ms[len(ms) // 2]


def cudnn(work, out):
    import torch
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    res = {"torch": torch.__version__, "cudnn": torch.backends.cudnn.version(), "single": {}, "resnet50": []}
    for name, shape in SINGLE.items():
        res["single"][name] = time_conv(torch, shape)
    convs = json.load(open(os.path.join(work, "resnet50_convs.json")))
    seen = {}
    for c in convs:
        k = tuple(c)
        if k not in seen:
            seen[k] = time_conv(torch, k, iters=20, warmup=5)
        res["resnet50"].append([c, seen[k]])
    json.dump(res, open(os.path.join(out, "cudnn.json"), "w"), indent=1)
    print(f"cudnn {res['cudnn']}, torch {res['torch']}: " +
          ", ".join(f"{n} {t:.4f} ms" for n, t in res["single"].items()) +
          f"; ResNet-50 b64 convs sum {sum(t for _, t in res['resnet50']):.3f} ms", flush=True)


def torch_models(work, out, name, modes):
    import torch
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    ctor, b = MODELS[name]
    path = os.path.join(out, f"torch-{name}.json")
    res = json.load(open(path)) if os.path.exists(path) else {}  # other modes' results stay
    res.update({"torch": torch.__version__, "model": name})
    m = torchvision_model(torch, ctor, calibrate=False).half().cuda().to(memory_format=torch.channels_last)
    x = torch.randn(b, 3, 224, 224, device="cuda", dtype=torch.float16).to(memory_format=torch.channels_last)
    for mode in modes:
        try:
            fn = m if mode == "eager" else torch.compile(m, mode="reduce-overhead")
            mark = mode != "eager"
            with torch.inference_mode():
                def call():
                    if mark:
                        torch.compiler.cudagraph_mark_step_begin()
                    return fn(x)
                t0 = time.time()
                call()
                torch.cuda.synchronize()
                first = time.time() - t0
                for _ in range(5):
                    call()
                torch.cuda.synchronize()
                ms = []
                for _ in range(30):
                    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    s.record()
                    call()
                    e.record()
                    e.synchronize()
                    ms.append(s.elapsed_time(e))
            ms.sort()
            res[mode] = ms[len(ms) // 2]
            print(f"torch {name} {mode}: {res[mode]:.4f} ms (first call {first:.1f} s)", flush=True)
        except Exception as e:
            res[mode + "_error"] = f"{type(e).__name__}: {str(e)[:300]}"
            print(f"torch {name} {mode}: FAILED {res[mode + '_error']}", flush=True)
        json.dump(res, open(path, "w"), indent=1)  # after each mode: a run cut short keeps it


def profile(path):
    """(resident median ms, [(ms, kernel name)]) of a drkrun --profile log, or None."""
    if not os.path.exists(path):
        return None
    txt = open(path).read()
    m = re.search(r"resident latency .*?median ([0-9.]+) ms", txt)
    rows = [(float(a), b) for a, b in re.findall(r"^ +\d+ +([0-9.]+) +[0-9.]+% +(\S+)", txt, re.M)]
    return (float(m.group(1)) if m else None), rows


def is_conv(name):
    return "Conv" in name or "MatMul" in name  # 1x1 convs become MatMuls in the layout pass


FORMS = (("mma_sync", "conv.hopper=0"), ("hopper", "default"), ("bn128", "conv3x3 under the old default BN 128 staged"))


def table(work, out):
    cd = json.load(open(os.path.join(out, "cudnn.json"))) if os.path.exists(os.path.join(out, "cudnn.json")) else None
    print(f"{'case':28} {'drkc ms':>9} {'TFLOP/s':>8} {'cuDNN ms':>9} {'TFLOP/s':>8} {'x cuDNN':>7}  kernel (+ layout kernels)")
    for name, shape in SINGLE.items():
        fl = flops(*shape)
        ref = cd["single"].get(name) if cd else None
        for form, _ in FORMS:
            p = profile(os.path.join(out, f"profile-{name}-{form}.log"))
            if not p or not p[1]:
                if form != "bn128":
                    print(f"{name + ' ' + form:28} {'(no profile)':>9}")
                continue
            ms, k = max((r for r in p[1] if is_conv(r[1])), default=max(p[1]))
            # the stem's input kernel (layout Transpose, + the channel Pad with the hopper form)
            lay = sum(t for t, n in p[1] if not is_conv(n) and ("Pad" in n or "Transpose" in n) and t < 5 * ms)
            refs = f"{ref:9.4f} {fl / ref / 1e9:8.1f} {ref / ms:7.2f}" if ref else f"{'-':>9} {'-':>8} {'-':>7}"
            print(f"{name + ' ' + form:28} {ms:9.4f} {fl / ms / 1e9:8.1f} {refs}  {k} (+{lay:.4f} ms)")
    if cd:
        tot_ref = sum(t for _, t in cd["resnet50"])
        fl_all = sum(flops(*c) for c, _ in cd["resnet50"])
        print(f"ResNet-50 b64: cuDNN convs alone {tot_ref:.3f} ms ({fl_all / tot_ref / 1e9:.0f} TFLOP/s over {len(cd['resnet50'])} convs)")
        for form in ("mma_sync", "hopper"):
            p = profile(os.path.join(out, f"profile-resnet50_b64-{form}.log"))
            if not p:
                continue
            conv = sum(ms for ms, k in p[1] if is_conv(k))
            print(f"  drkc {form:8}: conv/matmul kernels (epilogues fused) {conv:.3f} ms "
                  f"({fl_all / conv / 1e9:.0f} TFLOP/s), cuDNN/drkc {tot_ref / conv:.2f}; top:")
            for ms, k in sorted((r for r in p[1] if is_conv(r[1])), reverse=True)[:4]:
                print(f"      {ms:8.4f} ms  {k}")
    print(f"\n{'model (resident ms)':24} {'drkc':>8} {'hopper=0':>9} {'eager':>8} {'reduce-ov':>9} {'x eager':>8} {'x r-o':>6}")
    for name in MODELS:
        d = profile(os.path.join(out, f"profile-{name}-hopper.log"))
        d0 = profile(os.path.join(out, f"profile-{name}-mma_sync.log"))
        tj = os.path.join(out, f"torch-{name}.json")
        t = json.load(open(tj)) if os.path.exists(tj) else {}
        dm = d[0] if d and d[0] else None
        f = lambda v: f"{v:8.4f}" if v else f"{'-':>8}"
        ratio = lambda r: f"{r / dm:8.2f}" if r and dm else f"{'-':>8}"
        print(f"{name:24} {f(dm)} {f(d0[0] if d0 else None):>9} {f(t.get('eager'))} {f(t.get('reduce-overhead')):>9} "
              f"{ratio(t.get('eager'))} {ratio(t.get('reduce-overhead')):>6}")
    print("(x eager, x r-o: torch's time / drkc's, > 1: drkc is faster)")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "export":
        export(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "cudnn":
        cudnn(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 6 and sys.argv[1] == "torch" and sys.argv[4] in MODELS:
        torch_models(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5].split(","))
    elif len(sys.argv) == 4 and sys.argv[1] == "table":
        table(sys.argv[2], sys.argv[3])
    else:
        print(__doc__)
        sys.exit(2)
