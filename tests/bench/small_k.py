#!/usr/bin/env python3
"""The sm_90a matmul on short reductions (K <= 256: CNN pointwise convs as MatMuls, ConvNeXt's
MLP), where ptxas used to serialize the wgmma (C7520) and the kernels ran far from the limit.

For each shape (M, N, K, epilogue) of SHAPES, f16, --target=sm_90a:
  1. check: `drkc run --device=cuda --check` of the graph at M = 2048 under the default schedule
     and each pin of PINS (every form of the kernel: ping-pong, cooperative, cluster, split-K,
     unstaged, BN 64/256), GPU against the CPU interpreter;
  2. time: the graph at the full M compiled by DRKC (and by --old DRKC, the build before the
     change, when given), drkrun's resident median; torch's f16 matmul with the same epilogue
     (cuBLAS + eager elementwise) and the matmul alone (cuBLAS) in the same process;
     TFLOP/s and GB/s (A, B and the output once) of each.
Prints a markdown table (stdout and OUT/small_k.md); exit 1 when a check fails.

usage: small_k.py --out DIR --drkc PATH --drkrun PATH [--old PATH] [--iters N]
"""
import argparse
import concurrent.futures
import os
import re
import subprocess
import sys

SHAPES = [  # name, M, N, K, epilogue
    ("convnext_s1_fc1", 100352, 384, 96, "gelu"),
    ("convnext_s1_fc2", 100352, 96, 384, "bias"),
    ("convnext_s2_fc1", 25088, 768, 192, "gelu"),
    ("convnext_s3_fc1", 6272, 1536, 384, "gelu"),
    ("resnet_1x1_64", 200704, 64, 64, "relu"),
    ("resnet_1x1_64_256", 200704, 256, 64, "relu"),
    ("resnet_1x1_256_64", 200704, 64, 256, "relu"),
    ("mbv3_1x1_40_120", 25088, 120, 40, "relu"),
    ("bert_fc1", 1024, 3072, 768, "gelu"),
]
PINS = ["", "mm.persistent=1", "mm.persistent=2", "mm.cluster=2", "mm.split_k=2", "mm.staged=0", "mm.tile_n=64",
        "mm.tile_n=256"]


def graph(M, N, K, epi):
    w = "%w"
    lines = [f"graph @mm(%a: f16[{M}, {K}], {w}: f16[{K}, {N}], %b: f16[{N}]) -> (%y) {{",
             f"  %c: f16[{M}, {N}] = MatMul(%a, {w})",
             f"  %s: f16[{M}, {N}] = Add(%c, %b)"]
    if epi == "gelu":
        lines.append(f"  %y: f16[{M}, {N}] = Gelu(%s)")
    elif epi == "relu":
        lines.append(f"  %y: f16[{M}, {N}] = Relu(%s)")
    else:
        lines.append(f"  %y: f16[{M}, {N}] = Identity(%s)")
    lines += ["  return %y", "}"]
    return "\n".join(lines) + "\n"


def run(cmd, timeout=180):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {timeout} s"


def resident_ms(drkc, drkrun, g, out, tag, iters):
    m = os.path.join(out, f"{tag}.drkm")
    rc, log = run([drkc, g, "--target=sm_90a", "-o", m, "-q"])
    if rc:
        return None, "compile: " + log.strip()[-200:]
    rc, log = run([drkrun, m, "--iters", str(iters), "--warmup", "20"])
    os.remove(m)
    x = re.search(r"resident latency .*?median ([0-9.]+) ms", log)
    return (float(x.group(1)), "") if x else (None, log.strip()[-200:])


def torch_ms(M, N, K, epi, iters):
    import torch
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from peers import event_times
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    w = torch.randn(K, N, device="cuda", dtype=torch.float16) / K ** 0.5
    b = torch.randn(N, device="cuda", dtype=torch.float16)
    act = {"gelu": torch.nn.functional.gelu, "relu": torch.relu, "bias": lambda x: x}[epi]
    res = []
    for fn in (lambda: act(torch.addmm(b, a, w)), lambda: torch.mm(a, w)):
        with torch.inference_mode():
            for _ in range(10):
                fn()
            ms = sorted(event_times(fn, iters))
        res.append(ms[len(ms) // 2])
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--drkc", required=True)
    ap.add_argument("--drkrun", required=True)
    ap.add_argument("--old", default=None, help="drkc before the change, timed beside")
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--no-check", dest="check", action="store_false")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    fails, rows = 0, []
    if a.check:  # the checks in parallel (the interpreter's side is CPU work)
        jobs = []
        for name, M, N, K, epi in SHAPES:
            gc = os.path.join(a.out, f"{name}_check.drkg")
            open(gc, "w").write(graph(2048, N, K, epi))
            jobs += [(name, pin, [a.drkc, "run", gc, "--device=cuda", "--check", "--target=sm_90a"] +
                      ([f"--schedule={pin}"] if pin else [])) for pin in PINS]
        with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
            done = list(pool.map(lambda j: run(j[2]), jobs))
        for (name, pin, _), (rc, log) in zip(jobs, done):
            err = re.search(r"rel error ([0-9.e+-]+)", log)
            if rc == 0 and "PASS" in log and "FAIL" not in log:
                verdict = "PASS"
            elif rc == 1 and "FAIL" not in log and re.search(r"error:.*(pinned|--schedule|schedule)", log):
                verdict = "n/a (refused)"  # a pin this shape cannot take: the lowering says so
            else:
                verdict, fails = "FAIL", fails + 1
            print(f"check {name} {pin or 'default'}: {verdict} {err.group(1) if err else log.strip()[-160:]}", flush=True)
    for name, M, N, K, epi in SHAPES:
        g = os.path.join(a.out, f"{name}.drkg")
        open(g, "w").write(graph(M, N, K, epi))
        new, why = resident_ms(a.drkc, a.drkrun, g, a.out, name + "_new", a.iters)
        old, _ = resident_ms(a.old, a.drkrun, g, a.out, name + "_old", a.iters) if a.old else (None, "")
        try:
            tepi, tmm = torch_ms(M, N, K, epi, a.iters)
        except Exception as e:  # no torch / no GPU: the drkc columns still mean something
            tepi = tmm = None
            why += f" torch: {e}"
        flop, byt = 2.0 * M * N * K, 2.0 * (M * K + K * N + M * N)
        f = lambda ms: f"{ms:.4f}" if ms else "-"
        tf = lambda ms: f"{flop / ms / 1e9:.0f}" if ms else "-"
        gb = lambda ms: f"{byt / ms / 1e6:.0f}" if ms else "-"
        r = lambda x, y: f"{x / y:.2f}" if x and y else "-"
        rows.append(f"| {name} | {M}x{N}x{K} {epi} | {f(new)} | {tf(new)} | {gb(new)} | {f(old)} | {r(old, new)} | "
                    f"{f(tepi)} | {r(tepi, new)} | {f(tmm)} | {r(tmm, new)} | {why.strip()[:80]} |")
        print(rows[-1], flush=True)
    head = ["| shape | M x N x K, epilogue | drkc ms | TFLOP/s | GB/s | before ms | before / now | torch (cuBLAS + eager epilogue) ms | torch / drkc | cuBLAS matmul alone ms | cuBLAS / drkc | note |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    open(os.path.join(a.out, "small_k.md"), "w").write("\n".join(head + rows) + "\n")
    print("\n".join(head + rows))
    print(f"small_k: {fails} check(s) failed")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
