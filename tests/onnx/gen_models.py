#!/usr/bin/env python3
"""Writes small ONNX models and tensor files for test_onnx_import, runs it, then checks the
tensor files it wrote back with numpy/onnx.  usage: gen_models.py TEST_BINARY WORKDIR"""
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

binary, work = sys.argv[1], sys.argv[2]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(os.path.join(work, "out"))
F = TensorProto.FLOAT


def save(name, nodes, inputs, outputs, inits=(), opset=17, ir=8, value_info=(), domains=()):
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits), value_info=list(value_info))
    ops = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in domains]
    m = helper.make_model(g, opset_imports=ops, ir_version=ir)
    with open(os.path.join(work, name), "wb") as f:
        f.write(m.SerializeToString())


def vi(name, t, shape):
    return helper.make_tensor_value_info(name, t, shape)


def ext_tensor(name, dtype, dims, location, offset, length):
    t = TensorProto()
    t.name, t.data_type = name, dtype
    t.dims.extend(dims)
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", str(offset)), ("length", str(length))):
        e = t.external_data.add()
        e.key, e.value = k, v
    return t


# ---- external data: W at offset 16, B at 80, U (int32) at a misaligned offset 93 ----
W = (np.arange(12, dtype=np.float32) * 0.5).reshape(4, 3)
B = np.array([100, 101, 102], dtype=np.float32)
U = np.array([-7, 123456], dtype=np.int32)
blob = bytearray(b"\xee" * 16) + W.tobytes() + b"\xee" * 16 + B.tobytes() + b"\x01" + U.tobytes() + b"\xee" * 7
with open(os.path.join(work, "weights.bin"), "wb") as f:
    f.write(blob)
ext_nodes = [helper.make_node("MatMul", ["x", "W"], ["xw"]), helper.make_node("Add", ["xw", "B"], ["y"]),
             helper.make_node("Identity", ["U"], ["u"])]
ext_io = ([vi("x", F, [2, 4]), vi("W", F, [4, 3])], [vi("y", F, [2, 3]), vi("u", TensorProto.INT32, [2])])
save("ext.onnx", ext_nodes, *ext_io, inits=[ext_tensor("W", F, [4, 3], "weights.bin", 16, 48),
                                            ext_tensor("B", F, [3], "weights.bin", 80, 12),
                                            ext_tensor("U", TensorProto.INT32, [2], "weights.bin", 93, 8)])
one = [helper.make_node("Identity", ["B"], ["y"])]
save("ext_missing.onnx", one, [], [vi("y", F, [3])], inits=[ext_tensor("B", F, [3], "nope.bin", 0, 12)])
save("ext_range.onnx", one, [], [vi("y", F, [3])], inits=[ext_tensor("B", F, [3], "weights.bin", 100, 12)])
save("ext_escape.onnx", one, [], [vi("y", F, [3])], inits=[ext_tensor("B", F, [3], "../weights.bin", 0, 12)])
save("ext_length.onnx", one, [], [vi("y", F, [3])], inits=[ext_tensor("B", F, [3], "weights.bin", 80, 16)])

# ---- typed-field initializers (no raw_data) ----
def typed(name, dtype, field, vals):
    t = TensorProto()
    t.name, t.data_type = name, dtype
    t.dims.append(len(vals))
    getattr(t, field).extend(vals)
    return t

h_bits = np.array([0.5, -2, 65504], dtype=np.float16).view(np.uint16).tolist()
bf_bits = [int(np.array([v], dtype=np.float32).view(np.uint32)[0]) >> 16 for v in (1, -0.5, 256)]
typed_inits = [
    typed("f32", F, "float_data", [1.5, -2, 3]), typed("f64", TensorProto.DOUBLE, "double_data", [0.25, 1e300, -1]),
    typed("i64", TensorProto.INT64, "int64_data", [-5, 1 << 40, 7]),
    typed("i32", TensorProto.INT32, "int32_data", [-1, 2, 2147483647]),
    typed("i16", TensorProto.INT16, "int32_data", [-300, 0, 300]),
    typed("i8", TensorProto.INT8, "int32_data", [-128, 5, 127]),
    typed("u8", TensorProto.UINT8, "int32_data", [0, 200, 255]),
    typed("b", TensorProto.BOOL, "int32_data", [1, 0, 1]),
    typed("h", TensorProto.FLOAT16, "int32_data", h_bits),
    typed("bf", TensorProto.BFLOAT16, "int32_data", bf_bits)]
save("typed.onnx", [helper.make_node("Identity", ["f32"], ["y"])], [], [vi("y", F, [3])], inits=typed_inits)

# ---- opset 11 forms ----
old11 = [
    helper.make_node("Split", ["x"], ["y_split0", "y_split1"], name="split_node", axis=1, split=[2, 3]),
    helper.make_node("Squeeze", ["s"], ["sq"], axes=[0]),
    helper.make_node("Unsqueeze", ["sq"], ["usq"], axes=[2]),
    helper.make_node("ReduceMean", ["x"], ["rm"], axes=[1], keepdims=0),
    helper.make_node("ReduceSum", ["x"], ["rs"], axes=[1]),
    helper.make_node("Softmax", ["x3"], ["sm"], axis=1),
    helper.make_node("Clip", ["x", "lo", "hi"], ["cl"]),
]
save("old11.onnx", old11, [vi("x", F, [2, 5]), vi("s", F, [1, 4]), vi("x3", F, [2, 3, 4])],
     [vi(n, F, None) for n in ("y_split0", "y_split1", "usq", "rm", "rs", "sm", "cl")],
     inits=[numpy_helper.from_array(np.array(-1, np.float32), "lo"),
            numpy_helper.from_array(np.array(1, np.float32), "hi")], opset=11, ir=6)

# ---- opset 6 forms ----
old6 = [
    helper.make_node("Clip", ["x"], ["cl"], min=-1.0, max=6.0),
    helper.make_node("Pad", ["x"], ["pd"], pads=[0, 0, 1, 1, 0, 0, 1, 1], value=2.5),
    helper.make_node("ReduceMax", ["x"], ["rmax"], axes=[2, 3]),
    helper.make_node("Add", ["x", "bias"], ["ad"], broadcast=1),
    helper.make_node("Slice", ["x"], ["sl"], starts=[1], ends=[3], axes=[2]),
]
save("old6.onnx", old6, [vi("x", F, [1, 2, 4, 4])], [vi(n, F, None) for n in ("cl", "pd", "rmax", "ad", "sl")],
     inits=[numpy_helper.from_array(np.ones(4, np.float32), "bias")], opset=6, ir=3)

# ---- Constant forms, TENSOR attributes, dtypes of node outputs ----
consts = [
    helper.make_node("Constant", [], ["c_floats"], value_floats=[1.0, 2.0]),
    helper.make_node("Constant", [], ["c_int"], value_int=7),
    helper.make_node("Constant", [], ["c_tensor"],
                     value=numpy_helper.from_array(np.arange(6, dtype=np.int32).reshape(2, 3))),
    helper.make_node("Identity", ["c_floats"], ["idf"]),
    helper.make_node("Shape", ["c_tensor"], ["shp"]),
    helper.make_node("ConstantOfShape", ["shp"], ["cos"], value=numpy_helper.from_array(np.array([3], np.int32))),
    helper.make_node("Cast", ["idf"], ["half"], to=TensorProto.FLOAT16),
]
save("consts.onnx", consts, [], [vi("idf", F, [2]), vi("cos", TensorProto.INT32, None),
                                 vi("c_int", TensorProto.INT64, []), vi("half", TensorProto.FLOAT16, None)])

# ---- dims ----
dims_nodes = [helper.make_node("Relu", ["x"], ["h"]), helper.make_node("Relu", ["h"], ["z"]),
              helper.make_node("Greater", ["z", "x"], ["y"])]
save("dims.onnx", dims_nodes, [vi("x", F, ["N", 3, None])], [vi("y", TensorProto.BOOL, None)],
     value_info=[vi("h", F, ["N", 3, "W"])])

# ---- errors ----
relus = [helper.make_node("Relu", ["x" if i == 0 else f"r{i}"], [f"r{i+1}"]) for i in range(4)]
uniq = helper.make_node("Unique", ["r4"], ["out"], name="unique_1")
save("unsupported.onnx", relus + [uniq], [vi("x", F, [1, 1, 2, 2])], [vi("out", F, None)])
r = [helper.make_node("Relu", ["x"], ["y"])]
save("opset26.onnx", r, [vi("x", F, [2])], [vi("y", F, [2])], opset=26)
save("ir15.onnx", r, [vi("x", F, [2])], [vi("y", F, [2])], ir=15)
save("domain.onnx", [helper.make_node("EmbedLayerNormalization", ["x", "x"], ["y"], name="fm", domain="com.microsoft")],
     [vi("x", F, [2, 2])], [vi("y", F, [2, 2])], domains=[("com.microsoft", 1)])
save("tile1.onnx", [helper.make_node("Tile", ["x", "x", "x"], ["y"])], [vi("x", F, [2])], [vi("y", F, None)],
     opset=1, ir=3)
then_g = helper.make_graph([helper.make_node("Identity", ["x"], ["t"])], "then", [], [vi("t", F, [2])])
save("graphattr.onnx", [helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=then_g)],
     [vi("c", TensorProto.BOOL, []), vi("x", F, [2])], [vi("y", F, [2])])
save("string.onnx", [helper.make_node("Identity", ["s"], ["y"])], [vi("s", TensorProto.STRING, [2])],
     [vi("y", TensorProto.STRING, [2])])
save("undefined.onnx", [helper.make_node("Relu", ["nope"], ["y"])], [vi("x", F, [2])], [vi("y", F, [2])])

# ---- tensor files: manifest lines "FILE ok DTYPE RANK DIMS..." or "FILE err SUBSTRING" ----
manifest = []
rng = np.random.default_rng(7)


def add_tensor(fname, arr, drk_dtype, proto=None, raw=None):
    path = os.path.join(work, fname)
    if fname.endswith(".npy"):
        np.save(path, arr)
    else:
        t = proto if proto is not None else numpy_helper.from_array(arr, "tname")
        with open(path, "wb") as f:
            f.write(t.SerializeToString())
    with open(path + ".bin", "wb") as f:
        f.write(raw if raw is not None else np.ascontiguousarray(arr).tobytes())
    manifest.append(f"{fname} ok {drk_dtype} {arr.ndim} " + " ".join(str(d) for d in arr.shape))


arrays = {"f32": rng.standard_normal((2, 3, 4)).astype(np.float32), "f64": rng.standard_normal((5,)),
          "f16": rng.standard_normal((3, 2)).astype(np.float16), "i64": np.array([[1, -2], [1 << 50, 4]], np.int64),
          "i32": np.array([-1, 7, 9], np.int32), "i16": np.array([-300, 2], np.int16),
          "i8": np.array([[-128], [127]], np.int8), "u8": np.array([0, 255, 9], np.uint8),
          "bool": np.array([True, False, True]), "scalar": np.array(3.25, np.float32),
          "empty": np.zeros((0, 3), np.float32)}
for k, a in arrays.items():
    dt = {"f32": "f32", "f64": "f64", "f16": "f16", "i64": "i64", "i32": "i32", "i16": "i16", "i8": "i8",
          "u8": "u8", "bool": "bool", "scalar": "f32", "empty": "f32"}[k]
    add_tensor(f"t_{k}.pb", a, dt)
    add_tensor(f"a_{k}.npy", a, dt)
# typed-field TensorProtos, as in older ONNX test data
add_tensor("typed_f32.pb", arrays["f32"], "f32",
           proto=helper.make_tensor("tname", F, arrays["f32"].shape, arrays["f32"].flatten().tolist()))
add_tensor("typed_i8.pb", arrays["i8"], "i8",
           proto=helper.make_tensor("tname", TensorProto.INT8, arrays["i8"].shape, arrays["i8"].flatten().tolist()))
bf = np.array([1.0, -2.5, 3.0e10], np.float32)
bf_raw = (bf.view(np.uint32) >> 16).astype(np.uint16)
t = TensorProto(name="tname", data_type=TensorProto.BFLOAT16, dims=[3], raw_data=bf_raw.tobytes())
add_tensor("t_bf16.pb", bf_raw, "bf16", proto=t)
v2 = os.path.join(work, "a_v2.npy")
with open(v2, "wb") as f:
    np.lib.format.write_array(f, arrays["i32"], version=(2, 0))
with open(v2 + ".bin", "wb") as f:
    f.write(arrays["i32"].tobytes())
manifest.append("a_v2.npy ok i32 1 3")
np.save(os.path.join(work, "bad_fortran.npy"), np.asfortranarray(rng.standard_normal((2, 3))))
manifest.append("bad_fortran.npy err fortran_order")
np.save(os.path.join(work, "bad_be.npy"), np.array([1, 2], dtype=">f4"))
manifest.append("bad_be.npy err unsupported .npy dtype")
np.save(os.path.join(work, "bad_c64.npy"), np.array([1j], dtype=np.complex64))
manifest.append("bad_c64.npy err unsupported .npy dtype")
with open(os.path.join(work, "a_f32.npy"), "rb") as f:
    data = f.read()
with open(os.path.join(work, "bad_trunc.npy"), "wb") as f:
    f.write(data[:-5])
manifest.append("bad_trunc.npy err truncated")
with open(os.path.join(work, "t_f32.pb"), "rb") as f:
    data = f.read()
with open(os.path.join(work, "bad_trunc.pb"), "wb") as f:
    f.write(data[:-7])
manifest.append("bad_trunc.pb err protobuf parse failed")
st = TensorProto(name="tname", data_type=TensorProto.STRING, dims=[1], string_data=[b"x"])
with open(os.path.join(work, "bad_string.pb"), "wb") as f:
    f.write(st.SerializeToString())
manifest.append("bad_string.pb err unsupported dtype STRING")
with open(os.path.join(work, "manifest.txt"), "w") as f:
    f.write("\n".join(manifest) + "\n")

rc = 0
for mode in ("gen", "tensors"):
    r = subprocess.run([binary, mode, work])
    rc |= r.returncode

# What drkc wrote must read back in numpy / onnx as the original.
checked = 0
for line in manifest:
    fname, kind = line.split()[:2]
    if kind != "ok":
        continue
    src = os.path.join(work, fname)
    if fname.endswith(".npy"):
        want = np.load(src)
    else:
        want = numpy_helper.to_array(onnx.load_tensor(src))
    got_pb = onnx.load_tensor(os.path.join(work, "out", fname + ".pb"))
    got = numpy_helper.to_array(got_pb)
    if got_pb.name != "back" or got.dtype != want.dtype or got.shape != want.shape or \
            got.tobytes() != want.tobytes():
        if not (fname == "t_bf16.pb" and got.shape == want.shape):
            print(f"FAIL: {fname}: drkc .pb differs: {got.dtype}{got.shape} vs {want.dtype}{want.shape}")
            rc = 1
    npy = os.path.join(work, "out", fname + ".npy")
    if os.path.exists(npy):
        got = np.load(npy)
        if got.dtype != want.dtype or got.shape != want.shape or got.tobytes() != want.tobytes():
            print(f"FAIL: {fname}: drkc .npy differs: {got.dtype}{got.shape} vs {want.dtype}{want.shape}")
            rc = 1
    checked += 1
print(f"python: {checked} drkc-written tensors checked")
sys.exit(rc)
