#!/bin/sh
# The W4A16 kernel (lower/lower_w4.c) through LLVM NVPTX and ptxas: a generated float model of
# one MatMul, quantized (--quantize=int4-weight) and run in f16 and bf16, builds a module
# (ptxas makes each cubin) for sm_90, sm_87 and sm_80; the PTX has the k16 mma.sync of the
# activation dtype and the 16-byte weight loads; an f32 model without --precision is refused
# with the reason. usage: check_w4_ptxas.sh DRKC PYTHON OUTDIR
set -u
drkc=$1 py=$2 out=$3
fail=0
bad() { echo "FAIL: $*"; fail=1; }
mkdir -p "$out" || exit 1
"$py" - "$out/mm.onnx" <<'PY' || exit 1
import sys
import numpy as np, onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh
w = (np.random.default_rng(1).standard_normal((512, 256)) * 0.05).astype(np.float32)
g = h.make_graph([h.make_node("MatMul", ["x", "w"], ["y"], name="proj")], "mm", [h.make_tensor_value_info("x", T.FLOAT, [4, 512])],
                 [h.make_tensor_value_info("y", T.FLOAT, [4, 256])], [nh.from_array(w, "w")])
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 21)], ir_version=10), sys.argv[1])
PY
m=$out/mm.onnx
for p in fp16:f16 bf16:bf16; do
  prec=${p%%:*} dt=${p##*:}
  for t in sm_90 sm_87 sm_80; do
    "$drkc" "$m" --quantize=int4-weight --precision=$prec --target=$t -o "$out/$t.$prec.drkm" -q \
      || bad "module for $t ($prec) failed"
  done
  "$drkc" "$m" --quantize=int4-weight --precision=$prec --target=sm_87 --emit=ptx -o "$out/$prec.ptx" || bad "PTX ($prec)"
  grep -q "mma.sync.aligned.m16n8k16.row.col.f32.$dt.$dt.f32" "$out/$prec.ptx" || bad "no $dt mma.sync in the PTX"
  grep -q "ld.global.v4.b32" "$out/$prec.ptx" || bad "no 16-byte weight loads in the PTX ($prec)"
done
"$drkc" "$m" --quantize=int4-weight --target=sm_90 -o "$out/f32.drkm" 2> "$out/f32.txt" && bad "f32 activations were not refused"
grep -q "W4A16 kernels take f16 or bf16 activations" "$out/f32.txt" || bad "no reason for refusing f32: $(cat "$out/f32.txt")"
[ $fail -eq 0 ] && echo "OK"
exit $fail
