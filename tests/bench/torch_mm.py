#!/usr/bin/env python3
"""PyTorch's matmul times on the full models' shapes (the bar drkc's matmuls meet in the peers).

For each M,N,K: f16 y = x W with x [M,K] and W stored [N,K] (torch.nn.functional.linear, what
the PyTorch twins run: cuBLAS's TN problem) and W stored [K,N] (torch.mm, the layout of an ONNX
MatMul's weight), each the median of --iters calls timed with CUDA events after a warm-up, and
the cuBLAS kernel that ran (torch.profiler). Prints one line per shape and layout.

Usage: torch_mm.py [--shapes "M,N,K ..."] [--iters 200]
"""

import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import event_times  # noqa: E402

SHAPES = "2048,2048,2048 2048,512,2048 2048,3072,2048 2048,5632,2048 2048,2048,5632 1024,2304,768 1024,3072,768 1024,768,3072 4096,4096,4096"


def bench(fn, iters):
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    ms = event_times(fn, iters)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names = [ev.name for ev in prof.events() if ev.device_type == torch.autograd.DeviceType.CUDA]
    return float(np.median(ms)), ",".join(names)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default=SHAPES)
    ap.add_argument("--iters", type=int, default=200)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("torch_mm.py: no CUDA device")
        return 77
    g = torch.Generator(device="cuda").manual_seed(0)
    for shp in args.shapes.split():
        M, N, K = map(int, shp.split(","))
        x = torch.randn(M, K, device="cuda", generator=g).half()
        wt = (torch.randn(N, K, device="cuda", generator=g) / K**0.5).half()
        w = wt.t().contiguous()
        flop = 2.0 * M * N * K
        with torch.inference_mode():
            for tag, fn in (("W [N,K] (linear)", lambda: torch.nn.functional.linear(x, wt)), ("W [K,N] (mm)", lambda: torch.mm(x, w))):
                ms, kern = bench(fn, args.iters)
                print(f"torch f16 {M}x{N}x{K} {tag:18s} {ms * 1e3:8.1f} us {flop / ms / 1e9:6.0f} TFLOP/s  {kern}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
