#!/usr/bin/env python3
"""Runs one generated model through `drkc run` and compares its outputs with ONNX Runtime's.

Requires the model directory written by gen_models.py (model.onnx + test_data_set_0/).
The output directory is emptied first, so a stale output from an earlier run can never pass.
Exit status: 0 pass, 1 drkc failed or outputs differ.

Usage: run_model.py DRKC MODEL_DIR OUT_DIR [--tol-f32 X] [-- extra drkc args]
"""

import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_outputs import compare_dirs  # noqa: E402


def main(argv):
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    tol = 1e-4
    if "--tol-f32" in argv:
        i = argv.index("--tol-f32")
        tol = float(argv[i + 1])
        del argv[i:i + 2]
    if len(argv) != 3:
        print(__doc__)
        return 2
    drkc, model_dir, out_dir = argv
    data = os.path.join(model_dir, "test_data_set_0")
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(out_dir)
    cmd = [drkc, "run", os.path.join(model_dir, "model.onnx"), "--input-dir", data,
           "--output-dir", out_dir] + extra
    print("+", " ".join(cmd), flush=True)
    rc = subprocess.run(cmd).returncode
    if rc != 0:
        print(f"FAIL: drkc exited with status {rc}")
        return 1
    return 0 if compare_dirs(data, out_dir, tol) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
