#!/usr/bin/env python3
"""Runs one regression case of the model zoo (tests/zoo/cases/*.drkg, *.onnx.py) through drkc.

A case is a small graph that a real exporter's output broke in the front half (import, shape
inference, the graph passes). Its header lines say what must hold:

  # RUN: ARGS          `drkc CASE ARGS -o OUT` must succeed and print no error (one line per
                       configuration; ARGS may be empty)
  # CHECK-CPU: ARGS    `drkc run CASE --device=cpu --check ARGS` must succeed with every output PASS
  # CHECK-DATA: TOL ARGS
                       `drkc run CASE --device=cpu ARGS` on WORK_DIR/test_data_set_0/input_N.pb (which
                       a generator writes, with the expected output_N.pb from onnx.reference or
                       ONNX Runtime) must give outputs within relative error TOL of the expected
  # EXPECT-ERROR: ARGS | TEXT
                       `drkc CASE ARGS` must fail, and stderr must hold TEXT on exactly one line
                       (an error printed once, never a crash)

A `NAME.onnx.py` case is a Python script (the onnx package only) that writes NAME.onnx into the
directory given as its first argument; its header lines are read from the script. Modules are
compiled for the default target unless ARGS say otherwise; without ptxas the RUN lines use
--emit=tile instead of a module (the front half and the lowering still run).

usage: run_case.py DRKC CASE WORK_DIR
"""
import os
import shutil
import subprocess
import sys


def main():
    drkc, case, work = sys.argv[1], sys.argv[2], sys.argv[3]
    os.makedirs(work, exist_ok=True)
    name = os.path.basename(case)
    text = open(case).read()
    model = case
    if case.endswith(".onnx.py"):
        r = subprocess.run([sys.executable, case, work], capture_output=True, text=True)
        if r.returncode:
            print(f"FAIL {name}: generator failed\n{r.stderr}")
            return 1
        model = os.path.join(work, name[:-3])
    have_ptxas = bool(shutil.which("ptxas") or os.path.exists("/usr/local/cuda/bin/ptxas")
                      or os.environ.get("CUDA_HOME") and os.path.exists(os.path.join(os.environ["CUDA_HOME"], "bin/ptxas")))
    fails, ran = 0, 0
    for line in text.splitlines():
        line = line.lstrip("#").strip() if line.startswith("#") else ""
        for key in ("RUN:", "CHECK-CPU:", "CHECK-DATA:", "EXPECT-ERROR:"):
            if line.startswith(key):
                break
        else:
            continue
        arg = line[len(key):].strip()
        ran += 1
        if key == "RUN:":
            args = arg.split()
            out = os.path.join(work, f"out{ran}")
            if not have_ptxas and not any(a.startswith("--emit") for a in args):
                args.append("--emit=tile")
            cmd = [drkc, model] + args + ["-o", out]
            r = subprocess.run(cmd, capture_output=True, text=True)
            ok = r.returncode == 0 and "error" not in r.stderr
        elif key == "CHECK-CPU:":
            cmd = [drkc, "run", model, "--device=cpu", "--check", "--output-dir", os.path.join(work, f"run{ran}")] + arg.split()
            r = subprocess.run(cmd, capture_output=True, text=True)
            checks = [l for l in r.stdout.splitlines() if l.startswith("check output")]
            ok = r.returncode == 0 and checks and all(l.endswith("PASS") for l in checks)
        elif key == "CHECK-DATA:":
            tol, *args = arg.split()
            data, outd = os.path.join(work, "test_data_set_0"), os.path.join(work, f"data{ran}")
            cmd = [drkc, "run", model, "--device=cpu", "--input-dir", data, "--output-dir", outd] + args
            r = subprocess.run(cmd, capture_output=True, text=True)
            ok = r.returncode == 0
            if ok:
                import numpy as np
                import onnx
                from onnx import numpy_helper
                refs = sorted(f for f in os.listdir(data) if f.startswith("output_"))
                ok = bool(refs)
                for f in refs:
                    want = numpy_helper.to_array(onnx.load_tensor(os.path.join(data, f))).astype(np.float64)
                    gp = os.path.join(outd, f)
                    got = numpy_helper.to_array(onnx.load_tensor(gp)).astype(np.float64) if os.path.exists(gp) else None
                    err = (float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))
                           if got is not None and got.shape == want.shape else float("inf"))
                    r = subprocess.CompletedProcess(cmd, r.returncode, r.stdout + f"{f}: rel error {err:.3g} (tol {tol})\n", r.stderr)
                    ok = ok and err <= float(tol)
        else:
            args, _, want = arg.partition("|")
            cmd = [drkc, model] + args.split() + ["--emit=graph", "-o", os.path.join(work, f"err{ran}")]
            r = subprocess.run(cmd, capture_output=True, text=True)
            hits = [l for l in r.stderr.splitlines() if want.strip() in l]
            ok = r.returncode == 1 and len(hits) == 1
        if r.returncode < 0:
            ok = False  # a crash is never right
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {' '.join(cmd[1:])}")
        if not ok:
            fails += 1
            print("  | rc=%d\n" % r.returncode + "\n".join("  | " + l for l in (r.stdout + r.stderr).splitlines()[-20:]))
    if not ran:
        print(f"FAIL {name}: no RUN, CHECK-CPU or EXPECT-ERROR line")
        return 1
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
