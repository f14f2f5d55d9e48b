#!/usr/bin/env python3
"""Compares output_N.pb tensors written by drkc with the expected ones (ONNX TensorProto files).

Every expected output_N.pb in EXPECTED_DIR must have a counterpart in OUT_DIR with the same
shape and dtype. Floating-point outputs pass when ||out - ref|| / ||ref|| (in f64) is within the
tolerance for their dtype (f32 1e-4 by default, as DESIGN.md allows after reordered
reductions); any NaN or Inf where the reference is finite fails. Integer and bool outputs must
match exactly. Prints one line per output. Exit status: 0 pass, 1 mismatch or missing file.

Usage: compare_outputs.py EXPECTED_DIR OUT_DIR [--tol-f32 X]
       compare_outputs.py --self-test EXPECTED_DIR   (checks that this checker can fail)
"""

import argparse
import glob
import os
import re
import shutil
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

DEFAULT_TOL = {np.dtype(np.float64): 1e-5, np.dtype(np.float32): 1e-4,
               np.dtype(np.float16): 1e-2}


def load(path):
    return numpy_helper.to_array(onnx.load_tensor(path))


def output_files(d):
    files = glob.glob(os.path.join(d, "output_*.pb"))
    return sorted(files, key=lambda p: int(re.search(r"output_(\d+)\.pb$", p).group(1)))


def compare_one(ref, out, tol_f32):
    """Returns (ok, message)."""
    if out.shape != ref.shape:
        return False, f"shape {list(out.shape)} != expected {list(ref.shape)}"
    if out.dtype != ref.dtype:
        return False, f"dtype {out.dtype} != expected {ref.dtype}"
    if ref.dtype.kind in "fc" or ref.dtype.name == "bfloat16":
        r = ref.astype(np.float64)
        o = out.astype(np.float64)
        bad = ~np.isfinite(o) & np.isfinite(r)
        if bad.any():
            first = np.unravel_index(np.argmax(bad), bad.shape)
            return False, (f"{int(bad.sum())} non-finite values (NaN/Inf), first at "
                           f"{tuple(int(i) for i in first)} = {o[first]}")
        # Non-finite reference values (sqrt of a negative, a cast of NaN) must be reproduced
        # exactly, position by position; a NaN anywhere else never passes.
        nan_r, nan_o = np.isnan(r), np.isnan(o)
        if (nan_r != nan_o).any():
            return False, f"NaN where the reference has a number or vice versa ({int((nan_r != nan_o).sum())} elements)"
        inf_r = np.isinf(r)
        if (o[inf_r] != r[inf_r]).any():
            return False, "an infinite reference value differs"
        finite = np.isfinite(r)
        r, o = np.where(finite, r, 0.0), np.where(finite, o, 0.0)
        tol = tol_f32 if ref.dtype == np.float32 else DEFAULT_TOL.get(ref.dtype, 1e-2)
        diff = o - r
        ref_norm = np.linalg.norm(r)
        err = np.linalg.norm(diff) / ref_norm if ref_norm > 0 else np.linalg.norm(diff)
        worst = np.unravel_index(np.argmax(np.abs(diff)), diff.shape) if diff.size else ()
        detail = (f"rel_err {err:.3e} (tol {tol:.0e}), max_abs {np.abs(diff).max() if diff.size else 0:.3e}"
                  + (f" at {tuple(int(i) for i in worst)}: {o[worst]:.6g} vs {r[worst]:.6g}"
                     if diff.size else ""))
        return bool(err <= tol), detail
    mismatches = int(np.count_nonzero(out != ref))
    return mismatches == 0, f"exact compare, {mismatches} of {ref.size} elements differ"


def compare_dirs(expected_dir, out_dir, tol_f32=1e-4, quiet=False):
    expected = output_files(expected_dir)
    if not expected:
        print(f"error: no output_N.pb in {expected_dir}")
        return False
    all_ok = True
    for ep in expected:
        base = os.path.basename(ep)
        ref_t = onnx.load_tensor(ep)
        op = os.path.join(out_dir, base)
        label = f"{base} ({ref_t.name})" if ref_t.name else base
        if not os.path.exists(op):
            print(f"FAIL {label}: missing {op}")
            all_ok = False
            continue
        try:
            out = load(op)
        except Exception as e:  # a malformed file is a failure of the program under test
            print(f"FAIL {label}: cannot read {op}: {e}")
            all_ok = False
            continue
        ok, msg = compare_one(numpy_helper.to_array(ref_t), out, tol_f32)
        if not quiet or not ok:
            print(f"{'ok  ' if ok else 'FAIL'} {label}: {msg}")
        all_ok &= ok
    extra = set(map(os.path.basename, output_files(out_dir))) - set(map(os.path.basename, expected))
    if extra:
        print(f"FAIL unexpected extra outputs: {', '.join(sorted(extra))}")
        all_ok = False
    return all_ok


def rewrite(src, dst, fn):
    t = onnx.load_tensor(src)
    arr = fn(numpy_helper.to_array(t).copy())
    with open(dst, "wb") as f:
        f.write(numpy_helper.from_array(arr, t.name).SerializeToString())


def self_test(expected_dir):
    """The checker must accept the reference itself and reject plausible wrong answers."""
    first = output_files(expected_dir)[0]
    base = os.path.basename(first)
    rng = np.random.default_rng(7)

    def noise(scale):
        def f(a):
            return (a + scale * np.linalg.norm(a) / np.sqrt(a.size)
                    * rng.standard_normal(a.shape)).astype(a.dtype)
        return f

    def nan(a):
        a.flat[a.size // 2] = np.nan
        return a

    cases = [  # (name, transform of output_0 or None for remove, should pass)
        ("identical", lambda a: a, True),
        ("noise 1e-6", noise(1e-6), True),
        ("noise 1e-3", noise(1e-3), False),
        ("one NaN", nan, False),
        ("zeros", lambda a: np.zeros_like(a), False),
        ("wrong shape", lambda a: a.reshape(-1), False),
        ("f64 instead of f32", lambda a: a.astype(np.float64), False),
        ("missing", None, False),
    ]
    failures = 0
    for name, fn, want in cases:
        with tempfile.TemporaryDirectory() as tmp:
            for p in output_files(expected_dir):
                shutil.copy(p, tmp)
            target = os.path.join(tmp, base)
            if fn is None:
                os.remove(target)
            else:
                rewrite(first, target, fn)
            got = compare_dirs(expected_dir, tmp, quiet=True)
        status = "ok" if got == want else "WRONG"
        failures += got != want
        print(f"self-test {status}: {name}: compare {'passed' if got else 'failed'}, "
              f"expected {'pass' if want else 'fail'}")
    return failures == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("expected_dir")
    ap.add_argument("out_dir", nargs="?")
    ap.add_argument("--tol-f32", type=float, default=1e-4)
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return 0 if self_test(args.expected_dir) else 1
    if not args.out_dir:
        ap.error("OUT_DIR is required")
    return 0 if compare_dirs(args.expected_dir, args.out_dir, args.tol_f32) else 1


if __name__ == "__main__":
    sys.exit(main())
