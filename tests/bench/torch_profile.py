#!/usr/bin/env python3
"""Where a PyTorch peer's time goes: the per-kernel GPU times of one generated full model.

Builds the PyTorch twin of MODELS_DIR/<name>/model.onnx (tests/models/full_models_torch.py,
the same twin peers.py times), casts it to float16, compiles it (--mode: eager, compile or
reduce-overhead) and then:
  1. times --iters single calls (CUDA events around each call, synchronized before the next)
     and writes each latency in run order to --latencies (to see drifts that a median hides);
  2. profiles --prof-iters calls with torch.profiler and prints the GPU kernels, summed over
     those calls and divided by their number (ms per model call), biggest first.
Compare with `drkrun MODULE --profile` of drkc's module of the same model. With --nvtx, only
warms up and then makes one call inside the NVTX range "drk_call", for Nsight Compute
(`ncu --nvtx --nvtx-include drk_call/ ...`: per-kernel times of exactly one call).

Usage: torch_profile.py MODELS_DIR NAME [--mode compile] [--iters 200] [--prof-iters 10]
                        [--latencies FILE] [--top 40] [--nvtx]
"""

import argparse
import os
import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))
import full_models_torch as fmt  # noqa: E402
from peers import event_times  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models_dir")
    ap.add_argument("name")
    ap.add_argument("--mode", choices=["eager", "compile", "reduce-overhead"], default="compile")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--prof-iters", type=int, default=10)
    ap.add_argument("--latencies", help="write each timed call's ms here, in run order")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--nvtx", action="store_true", help="one call in the NVTX range drk_call, nothing else")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("torch_profile.py: no CUDA device")
        return 77

    mdir = os.path.join(args.models_dir, args.name)
    model = onnx.load(os.path.join(mdir, "model.onnx"))
    names = fmt.input_names(model)
    data = os.path.join(mdir, "test_data_set_0")
    arrays = [numpy_helper.to_array(onnx.load_tensor(os.path.join(data, f"input_{i}.pb"))) for i in range(len(names))]
    twin = fmt.build_twin(model).to(device="cuda", dtype=torch.float16)
    del model
    xs = [torch.from_numpy(np.array(a)).cuda() for a in arrays]
    xs = [t.half() if t.is_floating_point() else t for t in xs]
    fn = twin if args.mode == "eager" else torch.compile(twin, mode="reduce-overhead" if args.mode == "reduce-overhead" else None)
    mark = args.mode == "reduce-overhead"

    def call():
        if mark:
            torch.compiler.cudagraph_mark_step_begin()
        return fn(*xs)

    with torch.inference_mode():
        for _ in range(5):
            call()
        torch.cuda.synchronize()
        if args.nvtx:
            torch.cuda.nvtx.range_push("drk_call")
            call()
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_pop()
            return 0
        ms = event_times(call, args.iters)
        print(f"{args.name} {args.mode}: {args.iters} calls, median {np.median(ms):.4f} ms, min {np.min(ms):.4f}, "
              f"first 20 median {np.median(ms[:20]):.4f}, last 20 median {np.median(ms[-20:]):.4f}")
        if args.latencies:
            with open(args.latencies, "w") as f:
                f.writelines(f"{v:.4f}\n" for v in ms)

        acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=acts) as prof:
            for _ in range(args.prof_iters):
                call()
            torch.cuda.synchronize()
    kern = {}
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            k = kern.setdefault(ev.name, [0.0, 0])
            k[0] += ev.device_time_total if hasattr(ev, "device_time_total") else ev.cuda_time_total
            k[1] += 1
    total = sum(v[0] for v in kern.values())
    print(f"GPU kernels per call (sum over {args.prof_iters} profiled calls / {args.prof_iters}): "
          f"{total / args.prof_iters / 1e3:.4f} ms in {sum(v[1] for v in kern.values()) // args.prof_iters} launches")
    print(f"  {'ms/call':>9s} {'launches':>8s} {'us each':>8s}  kernel")
    for name, (us, n) in sorted(kern.items(), key=lambda kv: -kv[1][0])[: args.top]:
        print(f"  {us / args.prof_iters / 1e3:9.4f} {n // args.prof_iters:8d} {us / n:8.1f}  {name[:150]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
