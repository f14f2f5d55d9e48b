#!/usr/bin/env python3
"""drkc --quantize=int4-weight --group-size=G (docs/precision.md "W4A16") on a float model of
three MatMuls: the two with K % G == 0 become MatMulNBits, the third stays float; --report
gives the count and the weight bytes before/after; `drkc run --device=cpu` of the quantized
model equals numpy's round-to-nearest asymmetric uint4 quantization written here
independently (rel. L2 <= 1e-5), and differs from the float model by about int4's error.

usage: check_w4_quantize.py DRKC WORKDIR"""
import os
import re
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh

DRKC, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
rng = np.random.default_rng(7)
G = 64
W1 = (rng.standard_normal((256, 192)) * 0.05).astype(np.float32)
W2 = (rng.standard_normal((192, 128)) * 0.05).astype(np.float32)
W3 = (rng.standard_normal((128, 72)) * 0.05).astype(np.float32)
W1[:64, 5] = 0  # an all-zero group: scale 1, zero point 0
W3_skip = (rng.standard_normal((72, 40)) * 0.05).astype(np.float32)  # K = 72: not a multiple of 64
nodes = [h.make_node("MatMul", ["x", "W1"], ["h1"], name="fc1"), h.make_node("Relu", ["h1"], ["r1"]),
         h.make_node("MatMul", ["r1", "W2"], ["h2"], name="fc2"), h.make_node("MatMul", ["h2", "W3"], ["h3"], name="fc3"),
         h.make_node("MatMul", ["h3", "W4"], ["y"], name="fc4")]
g = h.make_graph(nodes, "mlp4", [h.make_tensor_value_info("x", T.FLOAT, [6, 256])], [h.make_tensor_value_info("y", T.FLOAT, [6, 40])],
                 [nh.from_array(W1, "W1"), nh.from_array(W2, "W2"), nh.from_array(W3, "W3"), nh.from_array(W3_skip, "W4")])
path = os.path.join(WORK, "mlp4.onnx")
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 21)], ir_version=10), path)
x = rng.standard_normal((6, 256)).astype(np.float32)
np.save(os.path.join(WORK, "x.npy"), x)


def rtn(w):
    K, N = w.shape
    out = np.empty_like(w, dtype=np.float64)
    for k0 in range(0, K, G):
        blk = w[k0:k0 + G].astype(np.float64)
        lo, hi = np.minimum(blk.min(0), 0), np.maximum(blk.max(0), 0)
        s = ((hi - lo) / 15).astype(np.float32)
        s = np.where(s > 0, s, np.float32(1))
        z = np.clip(np.rint(-lo / s), 0, 15)
        q = np.clip(np.rint(blk / s) + z, 0, 15)
        out[k0:k0 + G] = ((q - z).astype(np.float32) * s).astype(np.float32)
    return out


def run(*extra):
    out = os.path.join(WORK, "out" + "".join(extra).replace("-", "_").replace("=", "_"))
    r = subprocess.run([DRKC, "run", path, "--device=cpu", "--input", "x=" + os.path.join(WORK, "x.npy"), "--output-dir", out,
                        "--npy", *extra], capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"FAIL: drkc run {' '.join(extra)}: {r.stderr}")
    return np.load(os.path.join(out, "output_0.npy")).astype(np.float64)


fails = []
r = subprocess.run([DRKC, path, "--quantize=int4-weight", f"--group-size={G}", "--report", "--emit=graph", "-o", os.devnull],
                   capture_output=True, text=True)
line = next((l for l in r.stderr.splitlines() if "--quantize=int4-weight" in l), "")
print(line)
before = (256 * 192 + 192 * 128 + 128 * 72) * 4
after = sum(k * n // 2 + (k // G) * n * 5 for k, n in [(256, 192), (192, 128), (128, 72)])
want = f"3 MatMuls quantized, weights {before} -> {after} bytes; 1 left in float"
if r.returncode or want not in line:
    fails.append(f"--report: expected '{want}', got: {r.stderr.strip()}")
yq, yf = run("--quantize=int4-weight", f"--group-size={G}"), run()
ref = np.maximum(x.astype(np.float64) @ rtn(W1), 0) @ rtn(W2) @ rtn(W3) @ W3_skip.astype(np.float64)
e_ref = np.linalg.norm(yq - ref) / np.linalg.norm(ref)
e_float = np.linalg.norm(yq - yf) / np.linalg.norm(yf)
print(f"quantized vs numpy RTN: rel. L2 {e_ref:.2e} (tolerance 1e-5); vs the float model: {e_float:.3f} (expected 0.02 .. 0.3)")
if not e_ref <= 1e-5:
    fails.append(f"quantized model differs from numpy's RTN by {e_ref:.3e}")
if not 0.02 <= e_float <= 0.3:
    fails.append(f"quantized vs float error {e_float:.3f} outside the int4 range")
# --check with --quantize: the reference is the quantized model (a note says so), so fp16 passes
r = subprocess.run([DRKC, "run", path, "--device=cpu", "--input", "x=" + os.path.join(WORK, "x.npy"), "--check",
                    "--quantize=int4-weight", f"--group-size={G}", "--precision=fp16"], capture_output=True, text=True)
print((r.stdout + r.stderr).strip().splitlines()[0] if (r.stdout + r.stderr).strip() else "")
if r.returncode or "PASS" not in r.stdout + r.stderr or "after --quantize=int4-weight" not in r.stderr:
    fails.append(f"drkc run --check --quantize (fp16): {r.stdout}{r.stderr}")
bad = subprocess.run([DRKC, path, "--quantize=int8"], capture_output=True, text=True)
if bad.returncode == 0 or "--quantize: int4-weight" not in bad.stderr:
    fails.append(f"--quantize=int8 not refused: {bad.stderr.strip()}")
bad = subprocess.run([DRKC, path, "--quantize=int4-weight", "--group-size=24"], capture_output=True, text=True)
if bad.returncode == 0 or "--group-size: a multiple of 16" not in bad.stderr:
    fails.append(f"--group-size=24 not refused: {bad.stderr.strip()}")
if fails:
    print("FAIL:\n  " + "\n  ".join(fails))
    sys.exit(1)
print("OK")
