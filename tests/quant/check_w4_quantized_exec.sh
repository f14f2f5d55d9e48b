#!/bin/sh
# --quantize=int4-weight end to end on the CPU: a float MLP (MatMul 256 -> 192, Relu, MatMul
# 192 -> 64, MatMul 64 -> 40, its result cast to f16 or bf16: the output's dtype sets the
# tolerance) run in fp16 and bf16 at --group-size=64: drkc's graph after its passes
# (--emit=graph: three MatMulNBits in the GPU packing, the Casts of --precision) is lowered and
# every kernel runs on the CPU tile executor against the interpreter (test_lower_exec drkg).
# usage: check_w4_quantized_exec.sh DRKC TEST_LOWER_EXEC PYTHON OUTDIR
set -u
drkc=$1 tle=$2 py=$3 out=$4
fail=0
mkdir -p "$out" || exit 1
for p in fp16 bf16; do
"$py" - "$out/mlp_$p.onnx" $p <<'PY' || exit 1
import sys
import numpy as np, onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh
r = np.random.default_rng(3)
ws = [(r.standard_normal(s) * 0.05).astype(np.float32) for s in ((256, 192), (192, 64), (64, 40))]
nodes = [h.make_node("MatMul", ["x", "w0"], ["h0"]), h.make_node("Relu", ["h0"], ["r0"]),
         h.make_node("MatMul", ["r0", "w1"], ["h1"]), h.make_node("MatMul", ["h1", "w2"], ["y32"]),
         h.make_node("Cast", ["y32"], ["y"], to=T.FLOAT16 if sys.argv[2] == "fp16" else T.BFLOAT16)]
g = h.make_graph(nodes, "mlp", [h.make_tensor_value_info("x", T.FLOAT, [3, 256])],
                 [h.make_tensor_value_info("y", T.FLOAT16 if sys.argv[2] == "fp16" else T.BFLOAT16, [3, 40])],
                 [nh.from_array(w, f"w{i}") for i, w in enumerate(ws)])
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 21)], ir_version=10), sys.argv[1])
PY
  "$drkc" "$out/mlp_$p.onnx" --quantize=int4-weight --group-size=64 --precision=$p --emit=graph -o "$out/mlp_$p.drkg" ||
    { echo "FAIL: drkc --emit=graph ($p)"; fail=1; continue; }
  n=$(grep -c "MatMulNBits(" "$out/mlp_$p.drkg")
  [ "$n" -eq 3 ] || { echo "FAIL: $p: $n MatMulNBits nodes, expected 3"; fail=1; }
  grep -q "packing = 1" "$out/mlp_$p.drkg" || { echo "FAIL: $p: not in the GPU packing"; fail=1; }
  "$tle" drkg "$out/mlp_$p.drkg" || { echo "FAIL: $p: tile executor vs interpreter"; fail=1; }
done
[ $fail -eq 0 ] && echo "OK"
exit $fail
