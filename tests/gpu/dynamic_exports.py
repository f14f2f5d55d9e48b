#!/usr/bin/env python3
"""drkc --dynamic on the GPU over the committed real exports (tests/dynamic/exports): every bucket's
kernels as the module runs them (runtime sizes: flat kernels take their element count, row kernels
their row count, matmuls their M, attention and batched matmuls their batch count), against
exact-shape modules and the CPU reference interpreter.

For each export, at the default flags (f32) and the fast flags (`--precision=fp16
--fusion-aggressiveness=3`), all `--target=sm_90a`: one module with `--dynamic=batch=1..4,seq=2..16
--buckets=seq:4,16` (ts_wavlm: batch=1..4, its 1600 audio samples fixed), then at four points (at a
bucket size, one past the bucket below, the edges) the same inputs through the dynamic module
(`drkrun --input-dir`: the actual shapes are the files'), an exact-shape module (`--bind`) and
`drkc run --device=cpu` (the interpreter); every output's relative L2 error against the
interpreter (f32 <= 1e-4, fp16 <= 2e-2) and against the exact module.

usage: dynamic_exports.py --out DIR --drkc PATH --drkrun PATH [--models a,b,...] [--jobs N]
A line per (model, flags, point) to stdout and OUT/results.json; exit 1 when a check fails.
"""
import argparse
import concurrent.futures
import glob
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
EXPORTS = os.path.join(HERE, "..", "dynamic", "exports")
FLAGS = {"f32": ["--target=sm_90a"], "fast": ["--target=sm_90a", "--precision=fp16", "--fusion-aggressiveness=3"]}
TOL = {"f32": 1e-4, "fast": 2e-2}
POINTS = [(1, 2), (3, 5), (2, 16), (4, 16)]
AUDIO_POINTS = [(1, 0), (3, 0), (4, 0), (2, 0)]


def run(cmd, timeout=300):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {timeout} s"


def write_inputs(d, model, batch, seq, seed):
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(seed)
    names = [i.name for i in model.graph.input if i.name not in {x.name for x in model.graph.initializer}]
    if names == ["input_values"]:
        arrays = [rng.standard_normal((batch, 1600)).astype(np.float32)]
    else:
        ids = rng.integers(0, 100, size=(batch, seq), dtype=np.int64)
        mask = np.ones((batch, seq), dtype=np.int64)
        for i in range(1, batch):  # a padded sentence or two
            mask[i, seq - (i * 3) % max(seq // 2, 1):] = 0
        arrays = [ids, mask][:len(names)]
    for i, (n, a) in enumerate(zip(names, arrays)):
        with open(os.path.join(d, f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(a, n).SerializeToString())


def outputs(d):
    return [numpy_helper.to_array(onnx.load_tensor(p)).astype(np.float64)
            for p in sorted(glob.glob(os.path.join(d, "output_*.pb")))]


def worst_rel(a_dir, b_dir):
    a, b = outputs(a_dir), outputs(b_dir)
    if not a or len(a) != len(b):
        return float("inf")
    e = 0.0
    for x, y in zip(a, b):
        if x.shape != y.shape:
            return float("inf")
        e = max(e, float(np.linalg.norm(x - y) / max(np.linalg.norm(y), 1e-30)))
    return e


def check(a, path, fl):
    """One export at one flag set: the dynamic module, then each point against the exact module and
    the interpreter. The subprocesses do the work, so several of these run at once (--jobs)."""
    name = os.path.basename(path)[:-5]
    model = onnx.load(path, load_external_data=False)
    audio = name == "ts_wavlm"
    dyn = ["--dynamic=batch=1..4"] if audio else ["--dynamic=batch=1..4,seq=2..16", "--buckets=seq:4,16"]
    flags = FLAGS[fl]
    results = []
    w = os.path.join(a.out, name, fl)
    os.makedirs(w, exist_ok=True)
    dm = os.path.join(w, "dyn.drkm")
    rc, log = run([a.drkc, path, *flags, *dyn, "-o", dm, "-q"])
    if rc:
        print(name, fl, "dynamic compile failed:", log.strip()[-300:], flush=True)
        return [{"model": name, "flags": fl, "error": "dynamic compile: " + log.strip()[-300:]}]
    for k, (b, s) in enumerate(AUDIO_POINTS if audio else POINTS):
        tag = f"b{b}" + ("" if audio else f"s{s}")
        ind, od, oe, oi = (os.path.join(w, f"{x}_{tag}") for x in ("in", "dyn", "exact", "interp"))
        write_inputs(ind, model, b, s, seed=100 + k)
        bind = f"--bind=batch={b}" + ("" if audio else f",seq={s}")
        em = os.path.join(w, f"exact_{tag}.drkm")
        r = {"model": name, "flags": fl, "batch": b, "seq": s}
        steps = [([a.drkc, path, *flags, bind, "-o", em, "-q"], "exact compile"),
                 ([a.drkrun, dm, "--input-dir", ind, "--output-dir", od, "--iters", "3"], "drkrun dynamic"),
                 ([a.drkrun, em, "--input-dir", ind, "--output-dir", oe, "--iters", "3"], "drkrun exact"),
                 ([a.drkc, "run", path, "--device=cpu", "--input-dir", ind, "--output-dir", oi], "interpreter")]
        for cmd, what in steps:
            rc, log = run(cmd)
            if rc:
                r["error"] = f"{what}: " + log.strip()[-300:]
                break
        if "error" not in r:
            r["vs_interp"], r["vs_exact"] = worst_rel(od, oi), worst_rel(od, oe)
            r["exact_vs_interp"] = worst_rel(oe, oi)
            r["ok"] = r["vs_interp"] <= TOL[fl]
        results.append(r)
        print(name, fl, tag, "ok" if r.get("ok") else "FAIL", {k2: v for k2, v in r.items() if k2 not in ("model", "flags")},
              flush=True)
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--drkc", required=True)
    ap.add_argument("--drkrun", required=True)
    ap.add_argument("--models", default="")
    ap.add_argument("--jobs", type=int, default=6)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    paths = sorted(glob.glob(os.path.join(EXPORTS, "*.onnx")))
    if a.models:
        paths = [p for p in paths if os.path.basename(p)[:-5] in a.models.split(",")]
    jobs = [(path, fl) for path in paths for fl in FLAGS]
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
        done = list(pool.map(lambda j: check(a, *j), jobs))
    results = [r for rs in done for r in rs]
    fails = sum(not r.get("ok", False) for r in results)
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    print(f"dynamic_exports: {len(results) - fails} of {len(results)} checks pass")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
