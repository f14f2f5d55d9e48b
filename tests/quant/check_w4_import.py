#!/usr/bin/env python3
"""W4A16 import (docs/precision.md "W4A16"): models with com.microsoft::MatMulNBits and with
opset-21 blocked DequantizeLinear (int4 / uint4) feeding MatMul, built with onnx's helper and
run by ONNX Runtime (the oracle) and by `drkc run --device=cpu` (the interpreter on the graph
after drkc's passes, where they are one MatMulNBits node). Also checks that the import made
MatMulNBits (--dump-after=quantize) and that unsupported variants are refused naming the node.

usage: check_w4_import.py DRKC WORKDIR"""
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T, helper as h, numpy_helper as nh

DRKC, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
rng = np.random.default_rng(20)
fails = []


def pack_rows(codes):
    """[R, C] codes 0..15 -> [R, ceil(C/2)] bytes, low nibble first"""
    if codes.shape[1] % 2:
        codes = np.concatenate([codes, np.zeros((codes.shape[0], 1), codes.dtype)], 1)
    return (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)


def nbits_model(name, M, K, N, bs, adt, zp, bias, extra_attrs=None, g_idx=False):
    nb = K // bs
    codes = rng.integers(0, 16, (N, K)).astype(np.uint8)
    B = pack_rows(codes).reshape(N, nb, bs // 2)
    np_t = np.float16 if adt == T.FLOAT16 else np.float32
    scales = rng.uniform(0.005, 0.05, (N, nb)).astype(np_t)
    inits = [nh.from_array(B, "B"), nh.from_array(scales.reshape(-1), "scales")]
    ins = ["a", "B", "scales"]
    if zp:
        inits.append(nh.from_array(pack_rows(rng.integers(0, 16, (N, nb)).astype(np.uint8)).reshape(-1), "zp"))
        ins.append("zp")
    if g_idx:
        ins += ["" if zp else "", "gidx"][-1:] if zp else ["", "gidx"]
        inits.append(nh.from_array((np.arange(K) // bs).astype(np.int32), "gidx"))
    if bias:
        while len(ins) < 5:
            ins.append("")
        ins.append("bias")
        inits.append(nh.from_array(rng.standard_normal(N).astype(np_t), "bias"))
    attrs = dict(K=K, N=N, bits=4, block_size=bs)
    attrs.update(extra_attrs or {})
    node = h.make_node("MatMulNBits", ins, ["y"], domain="com.microsoft", name=name, **attrs)
    g = h.make_graph([node], name, [h.make_tensor_value_info("a", adt, M)], [h.make_tensor_value_info("y", adt, None)],
                     inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 21), h.make_opsetid("com.microsoft", 1)], ir_version=10)


def dq_model(name, M, K, N, bs, qdt, zp, per_column=False):
    q = rng.integers(-8, 8, (K, N)) if qdt == T.INT4 else rng.integers(0, 16, (K, N))
    sshape = (N,) if per_column else (K // bs, N)
    scales = rng.uniform(0.005, 0.05, sshape).astype(np.float32)
    inits = [h.make_tensor("q", qdt, [K, N], q.reshape(-1).tolist()), nh.from_array(scales, "s")]
    ins = ["q", "s"]
    if zp:
        z = rng.integers(-8, 8, sshape) if qdt == T.INT4 else rng.integers(0, 16, sshape)
        inits.append(h.make_tensor("z", qdt, list(sshape), z.reshape(-1).tolist()))
        ins.append("z")
    attrs = dict(axis=1) if per_column else dict(axis=0, block_size=bs)
    nodes = [h.make_node("DequantizeLinear", ins, ["w"], name=name + "_dq", **attrs),
             h.make_node("MatMul", ["a", "w"], ["y"], name=name)]
    g = h.make_graph(nodes, name, [h.make_tensor_value_info("a", T.FLOAT, M)], [h.make_tensor_value_info("y", T.FLOAT, None)],
                     inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 21)], ir_version=10)


def drkc(*args):
    return subprocess.run([DRKC, *args], capture_output=True, text=True)


def check(name, model, M, adt=T.FLOAT, tol=1e-5):
    path = os.path.join(WORK, name + ".onnx")
    onnx.save(model, path)
    a = rng.standard_normal(M).astype(np.float16 if adt == T.FLOAT16 else np.float32)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # its DQ->MatMul fusion rounds A
    ref = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, {"a": a})[0]
    np.save(os.path.join(WORK, name + "_a.npy"), a)
    out = os.path.join(WORK, name + "_out")
    r = drkc("run", path, "--device=cpu", "--input", "a=" + os.path.join(WORK, name + "_a.npy"), "--output-dir", out, "--npy")
    if r.returncode:
        fails.append(f"{name}: drkc run failed: {r.stderr.strip()}")
        return
    y = np.load(os.path.join(out, "output_0.npy"))
    if y.shape != ref.shape:
        fails.append(f"{name}: shape {y.shape}, ONNX Runtime {ref.shape}")
        return
    err = np.linalg.norm(y.astype(np.float64) - ref) / np.linalg.norm(ref.astype(np.float64))
    d = drkc(path, "--dump-after=quantize", "--emit=graph", "-o", os.devnull)
    made = d.stderr.count("MatMulNBits(")
    print(f"{name}: rel. L2 error vs ONNX Runtime {err:.2e} (tolerance {tol:g}); MatMulNBits nodes {made}")
    if not err <= tol:
        fails.append(f"{name}: error {err:.3e} > {tol:g}")
    if made != 1 or "DequantizeLinear(" in d.stderr:
        fails.append(f"{name}: expected one MatMulNBits and no DequantizeLinear after the quantize stage")


def refused(name, model, want):
    path = os.path.join(WORK, name + ".onnx")
    onnx.save(model, path)
    r = drkc(path, "--emit=graph", "-o", os.devnull)
    ok = r.returncode != 0 and want in r.stderr and f"'{name}'" in r.stderr
    print(f"{name}: {'refused' if ok else 'NOT refused as expected'}: {r.stderr.strip()}")
    if not ok:
        fails.append(f"{name}: expected an error naming the node and saying '{want}', got: {r.stderr.strip()}")


check("nbits_zp_f32", nbits_model("nbits_zp_f32", [3, 256], 256, 96, 32, T.FLOAT, True, False), [3, 256])
check("nbits_nozp_f32_batched", nbits_model("nbits_nozp_f32_batched", [2, 5, 512], 512, 64, 128, T.FLOAT, False, False), [2, 5, 512])
check("nbits_odd_blocks_bias", nbits_model("nbits_odd_blocks_bias", [4, 192], 192, 40, 64, T.FLOAT, True, True), [4, 192])
check("nbits_f16", nbits_model("nbits_f16", [7, 256], 256, 128, 16, T.FLOAT16, True, False), [7, 256], T.FLOAT16, 2e-3)
check("dq_int4_block", dq_model("dq_int4_block", [5, 256], 256, 80, 64, T.INT4, True), [5, 256])
check("dq_int4_nozp", dq_model("dq_int4_nozp", [5, 128], 128, 48, 32, T.INT4, False), [5, 128])
check("dq_uint4_block", dq_model("dq_uint4_block", [2, 3, 256], 256, 64, 128, T.UINT4, True), [2, 3, 256])
check("dq_uint4_nozp", dq_model("dq_uint4_nozp", [3, 128], 128, 32, 16, T.UINT4, False), [3, 128])
check("dq_int4_per_column", dq_model("dq_int4_per_column", [3, 128], 128, 32, 0, T.INT4, True, per_column=True), [3, 128])
refused("nbits_8bit", nbits_model("nbits_8bit", [2, 64], 64, 16, 32, T.FLOAT, False, False, {"bits": 8}), "bits = 8")
refused("nbits_gidx", nbits_model("nbits_gidx", [2, 64], 64, 16, 32, T.FLOAT, False, False, g_idx=True), "g_idx")
refused("nbits_block8", nbits_model("nbits_block8", [2, 64], 64, 16, 16, T.FLOAT, False, False, {"block_size": 8}),
        "block_size 8")

if fails:
    print("FAIL:\n  " + "\n  ".join(fails))
    sys.exit(1)
print("OK")
