#!/usr/bin/env python3
"""Times the full models against PyTorch on a GPU: eager, torch.compile, and CUDA graphs.

For each model that tests/models/gen_full_models.py wrote into MODELS_DIR (<name>/model.onnx and
<name>/test_data_set_0/input_N.pb), builds the PyTorch twin (tests/models/full_models_torch.py:
same function, same weights), casts it to float16 (--dtype) and times, batch 1, inputs already
on the GPU:
  eager            the module as it is
  compile          torch.compile(module)                         (mode "default")
  reduce-overhead  torch.compile(module, mode="reduce-overhead") (CUDA graphs)
Each: warm-up, then the median of --iters runs, each timed with CUDA events around one call and
synchronized before the next (batch-1 latency, CPU launch gaps included). With --drkrun, and
when MODELS_DIR/<name>/model.drkm exists, also runs `drkrun model.drkm --iters 50` on the same
inputs and parses its resident median (inputs and outputs kept on the GPU, like the PyTorch
timings; drkrun's time with host<->device copies is recorded too). Prints a table with drkc/peer time ratios (< 1:
drkc is faster) and writes everything to --out as JSON, rewritten after each model, so a run cut
short keeps what it measured. Also checks the numbers: eager fp16 against ONNX Runtime's
output_0.pb where the generator wrote one, and each compiled output against eager.

--verify (no MODELS_DIR needed) instead checks that each twin computes its ONNX model's
function: small configurations, twin against ONNX Runtime, f32 on the CPU (and, with a GPU,
f32 without TF32 and f16 there); prints relative errors; exit 1 if any exceeds its tolerance.

Requires python3 with torch (>= 2.1; CUDA for timing), onnx, onnxruntime (for --verify), numpy.

Usage: peers.py MODELS_DIR --out results.json [--only NAME ...] [--drkrun PATH]
                [--modes eager,compile,reduce-overhead] [--attn sdpa|math] [--iters N]
                [--dtype float16|float32] [--tf32]
       peers.py --verify [--only NAME ...]
"""

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import torch
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))
import full_models_torch as fmt  # noqa: E402

MODELS = ["resnet50", "bert_base", "gpt2_small", "vit_b16", "llama_decoder"]
MODES = ["eager", "compile", "reduce-overhead"]


def log(*a):
    print(*a, flush=True)


def load_inputs(data_dir, model):
    names = fmt.input_names(model)
    arrays = []
    for i, n in enumerate(names):
        p = os.path.join(data_dir, f"input_{i}.pb")
        if not os.path.exists(p):
            raise FileNotFoundError(f"{p} missing (gen_full_models.py writes it)")
        arrays.append(numpy_helper.to_array(onnx.load_tensor(p)))
    return names, arrays


def load_ref(data_dir):
    p = os.path.join(data_dir, "output_0.pb")
    return numpy_helper.to_array(onnx.load_tensor(p)) if os.path.exists(p) else None


def event_times(call, iters):
    """ms of `iters` calls of call(), each bracketed by CUDA events and synchronized before the
    next, in run order."""
    ms = []
    for _ in range(iters):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        call()
        e.record()
        e.synchronize()
        ms.append(s.elapsed_time(e))
    return ms


def time_calls(fn, args, iters, warmup, mark_step=False):
    """Median/min ms of single calls; each call bracketed by CUDA events, then synchronized.
    (On the CPU, only for trying this script out: wall-clock time.)"""
    cuda = args[0].is_cuda
    with torch.inference_mode():
        def call():
            if mark_step:
                torch.compiler.cudagraph_mark_step_begin()
            fn(*args)

        for _ in range(warmup):
            call()
        if cuda:
            torch.cuda.synchronize()
            ms = event_times(call, iters)
        else:
            ms = []
            for _ in range(iters):
                t = time.perf_counter()
                call()
                ms.append((time.perf_counter() - t) * 1e3)
    return float(np.median(ms)), float(np.min(ms))


def first_call(fn, args, mark_step=False):
    """Runs once (this is where torch.compile compiles); returns (seconds, output as f32 numpy)."""
    t0 = time.time()
    with torch.inference_mode():
        if mark_step:
            torch.compiler.cudagraph_mark_step_begin()
        out = fn(*args).float().cpu().numpy()  # .cpu() synchronizes
    return time.time() - t0, out


# ---- drkrun --------------------------------------------------------------------------------


def drkrun_module(drkrun, mdir, data_dir, iters, timeout):
    drkm = os.path.join(mdir, "model.drkm")
    if not os.path.exists(drkm):
        return {"skipped": f"{drkm} not found"}
    res = {"module": drkm}
    try:
        lst = subprocess.run([drkrun, drkm, "--list"], capture_output=True, text=True, timeout=60)
        m = re.search(r"command: (.*)", lst.stdout)
        res["drkc_command"] = m.group(1).strip() if m else None
    except (OSError, subprocess.SubprocessError) as e:
        res["drkc_command"] = f"drkrun --list failed: {e}"
    tmp = tempfile.mkdtemp(prefix="peers-f16-")
    try:
        # The module's inputs are f32 unless drkc compiled them as f16: try the files as they
        # are, then converted to f16, then drkrun's own random inputs (valid small indices).
        for f in sorted(glob.glob(os.path.join(data_dir, "input_*.pb"))):
            t = onnx.load_tensor(f)
            a = numpy_helper.to_array(t)
            if a.dtype == np.float32:
                a = a.astype(np.float16)
            with open(os.path.join(tmp, os.path.basename(f)), "wb") as fh:
                fh.write(numpy_helper.from_array(a, t.name).SerializeToString())
        attempts = [("test_data_set_0", ["--input-dir", data_dir]), ("test_data_set_0 as f16", ["--input-dir", tmp]),
                    ("drkrun random", [])]
        errors = []
        for label, extra in attempts:
            cmd = [drkrun, drkm, "--iters", str(iters)] + extra
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
            except subprocess.TimeoutExpired:
                return dict(res, error=f"timed out after {timeout} s: {' '.join(cmd)}")
            m = re.search(r"^latency.*?median ([0-9.eE+-]+) ms", p.stdout, re.M)
            r = re.search(r"^resident latency.*?median ([0-9.eE+-]+) ms, min ([0-9.eE+-]+) ms", p.stdout, re.M)
            if p.returncode == 0 and m and r:
                # the resident time (tensors on the GPU, kernels only) compares with PyTorch's,
                # which also keeps its tensors on the device; the time with copies is kept too
                return dict(res, median_ms=float(r.group(1)), min_ms=float(r.group(2)),
                            with_copies_median_ms=float(m.group(1)), inputs=label, cmd=" ".join(cmd))
            errors.append(f"[{label}] rc={p.returncode}: {(p.stderr or p.stdout).strip()[-400:]}")
            if "dtype" not in p.stderr and "bytes" not in p.stderr:
                break  # not an input mismatch: another input file won't help
        return dict(res, error=" | ".join(errors))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ---- one model -----------------------------------------------------------------------------


def bench_model(name, args):
    mdir = os.path.join(args.models_dir, name)
    data = os.path.join(mdir, "test_data_set_0")
    r = {"errors": {}}
    t0 = time.time()
    model = onnx.load(os.path.join(mdir, "model.onnx"))
    _, config = fmt.model_info(model)
    r["config"] = config
    names, arrays = load_inputs(data, model)
    ref = load_ref(data)
    twin = fmt.build_twin(model, args.attn)
    del model
    dt = getattr(torch, args.dtype)
    twin = twin.to(device=args.device, dtype=dt)
    dev_args = [torch.from_numpy(np.array(a)).to(args.device) for a in arrays]
    dev_args = [t.to(dt) if t.is_floating_point() else t for t in dev_args]
    r["load_s"] = round(time.time() - t0, 2)
    log(f"{name}: loaded in {r['load_s']} s, inputs "
        + ", ".join(f"{n}{list(a.shape)}" for n, a in zip(names, arrays)))

    eager_out = None
    for mode in args.modes:
        try:
            if mode == "eager":
                fn, warm, mark = twin, args.warmup, False
            else:
                torch._dynamo.reset()
                fn = torch.compile(twin, mode="reduce-overhead" if mode == "reduce-overhead" else None)
                warm, mark = min(args.warmup, 3), mode == "reduce-overhead"
            secs, out = first_call(fn, dev_args, mark)
            if not np.all(np.isfinite(out)):
                r["errors"][mode] = "output not finite"
            if mode == "eager":
                eager_out = out
                if ref is not None:
                    r["rel_err_eager_vs_ort_f32"] = fmt.rel_err(out, ref)
            else:
                r[f"{mode}_compile_s"] = round(secs, 1)
                if eager_out is not None:
                    r[f"rel_err_{mode}_vs_eager"] = fmt.rel_err(out, eager_out)
            med, mn = time_calls(fn, dev_args, args.iters, warm, mark)
            r[f"{mode}_ms"], r[f"{mode}_min_ms"] = med, mn
            log(f"  {mode:16s} median {med:8.3f} ms  min {mn:8.3f} ms"
                + (f"  (first call {secs:.1f} s)" if mode != "eager" else ""))
        except Exception as e:  # one failing mode must not lose the others
            r["errors"][mode] = f"{type(e).__name__}: {str(e)[:600]}"
            log(f"  {mode:16s} FAILED: {r['errors'][mode]}")
        finally:
            fn = None
            if args.device == "cuda":
                torch.cuda.synchronize()
    torch._dynamo.reset()
    del twin, dev_args
    if args.device == "cuda":
        torch.cuda.empty_cache()

    if args.drkrun:
        d = drkrun_module(args.drkrun, mdir, data, 50, args.drkrun_timeout)
        r["drkc"] = d
        if "median_ms" in d:
            r["drkc_ms"] = d["median_ms"]
            log(f"  {'drkc':16s} median {d['median_ms']:8.3f} ms  ({d['inputs']} inputs; tensors on the GPU; "
                f"{d['with_copies_median_ms']:.3f} ms with host copies)")
        elif "skipped" in d:
            log(f"  drkc             skipped: {d['skipped']}")
        else:
            log(f"  drkc             FAILED: {d['error'][:300]}")
    if not r["errors"]:
        del r["errors"]
    r["wall_s"] = round(time.time() - t0, 1)
    return r


def table(results):
    cols = ["eager", "compile", "reduce-overhead"]
    lines = [f"{'model':14s} {'eager':>9s} {'compile':>9s} {'red-ovh':>9s} {'drkc':>9s}   "
             f"{'drkc/eager':>10s} {'drkc/comp':>10s} {'drkc/r-o':>10s}   (ms; ratio < 1: drkc faster)"]
    for name, r in results.items():
        t = [r.get(f"{c}_ms") for c in cols]
        d = r.get("drkc_ms")
        f = lambda v: f"{v:9.3f}" if v is not None else f"{'-':>9s}"  # noqa: E731
        rat = lambda p: f"{d / p:10.3f}" if (d is not None and p) else f"{'-':>10s}"  # noqa: E731
        lines.append(f"{name:14s} {f(t[0])} {f(t[1])} {f(t[2])} {f(d)}   {rat(t[0])} {rat(t[1])} {rat(t[2])}")
        for c in cols:
            if d is not None and t[cols.index(c)]:
                r[f"ratio_drkc_over_{c.replace('-', '_')}"] = d / t[cols.index(c)]
    return "\n".join(lines)


def run_verify(args):
    res = []
    res += fmt.verify(args.only, "cpu", torch.float32, 1e-4, log=log)
    if torch.cuda.is_available():
        res += fmt.verify(args.only, "cuda", torch.float32, 1e-4, log=log)
        # fp16 against f32: a loose bound, but it catches masks that overflow, NaN, wrong casts.
        res += fmt.verify(args.only, "cuda", torch.float16, 1e-2, log=log)
    else:
        log("verify: no CUDA device, GPU checks skipped")
    bad = sum(not ok for *_, ok in res)
    log(f"{len(res) - bad} passed, {bad} failed")
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models_dir", nargs="?")
    ap.add_argument("--out", help="results JSON")
    ap.add_argument("--only", nargs="*", choices=MODELS)
    ap.add_argument("--drkrun", help="drkrun binary: also time MODELS_DIR/<name>/model.drkm")
    ap.add_argument("--modes", default=",".join(MODES), help="comma list of " + ",".join(MODES))
    ap.add_argument("--attn", choices=["sdpa", "math"], default="sdpa",
                    help="twin attention: sdpa (HF default, flash/efficient kernels) or math (op for op)")
    ap.add_argument("--dtype", choices=["float16", "float32"], default="float16",
                    help="twin and input precision (float32: TF32 off unless --tf32)")
    ap.add_argument("--tf32", action="store_true", help="let float32 matmuls and convs use TF32")
    ap.add_argument("--device", default="cuda", help=argparse.SUPPRESS)  # cpu: to try the script out
    ap.add_argument("--iters", type=int, default=30, help="timed runs per mode (>= 20)")
    ap.add_argument("--warmup", type=int, default=10, help="warm-up runs (compiled modes: at most 3)")
    ap.add_argument("--drkrun-timeout", type=int, default=300)
    ap.add_argument("--verify", action="store_true", help="check the twins against ONNX Runtime")
    args = ap.parse_args()
    if args.verify:
        return run_verify(args)
    if not args.models_dir or not args.out:
        ap.error("MODELS_DIR and --out are required (or --verify)")
    args.modes = [m for m in args.modes.split(",") if m]
    if any(m not in MODES for m in args.modes):
        ap.error(f"--modes: from {MODES}")
    if args.iters < 20:
        ap.error("--iters: at least 20")
    if args.device == "cuda" and not torch.cuda.is_available():
        log("peers.py: no CUDA device")
        return 77
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.backends.cudnn.allow_tf32 = args.tf32
    names = args.only or [m for m in MODELS if os.path.exists(os.path.join(args.models_dir, m, "model.onnx"))]
    if not names:
        log(f"peers.py: no models in {args.models_dir} (run tests/models/gen_full_models.py)")
        return 1
    out = {"device": torch.cuda.get_device_name() if args.device == "cuda" else args.device,
           "torch": torch.__version__, "precision": args.dtype, "tf32": args.tf32, "batch": 1, "attn": args.attn, "iters": args.iters,
           "timing": "median of single calls, CUDA events, synchronized between calls",
           "drkrun_timing": "drkrun --iters 50 resident median (tensors stay on the GPU: CUDA graph replay, events); with_copies_median_ms adds the host<->device copies",
           "models": {}}
    t0 = time.time()
    for name in names:
        try:
            out["models"][name] = bench_model(name, args)
        except Exception as e:
            out["models"][name] = {"errors": {"load": f"{type(e).__name__}: {str(e)[:600]}"}}
            log(f"{name}: FAILED: {out['models'][name]['errors']['load']}")
        out["total_s"] = round(time.time() - t0, 1)
        tab = table(out["models"])
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1, sort_keys=True)
    log("\n" + tab)
    log(f"\ntotal {out['total_s']} s; results in {args.out}")
    failed = [n for n, r in out["models"].items() if "errors" in r]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
