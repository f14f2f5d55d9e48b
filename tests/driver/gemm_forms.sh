#!/bin/sh
# Every GEMM of an exported transformer head on the sm_90a TMA + wgmma kernel (issue 17):
# a generated ONNX graph with a tied embedding (Gather of ids from emb [1003, 128], the LM head
# MatMul by Transpose(emb)), a Gemm with bias (HF Conv1D: transB = 0) and a Gemm with transB = 1,
# alpha and beta. At --target=sm_90a --precision=fp16 --fusion-aggressiveness=3 every matmul is
# mm_ws/wgmma in --report (the Gemms through gemm-to-matmul, the LM head of N = 1003 through
# pad-matmul-n), no Transpose kernel is left (the tied weight's transpose is folded at compile
# time), and `drkc run --device=cpu --check` passes (the rewritten graph against the model).
# usage: gemm_forms.sh DRKC WORKDIR PYTHON
set -eu
DRKC=$1
W=$2
PY=$3
rm -rf "$W"
mkdir -p "$W"
if ! "$PY" -c "import onnx, numpy" 2>/dev/null; then
  echo "SKIP: Python with onnx and numpy is needed to generate the graph"
  exit 77
fi
"$PY" - "$W/head.onnx" <<'PYEOF'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
r = np.random.default_rng(7)
def c(name, a):
    return numpy_helper.from_array(np.asarray(a), name)
inits = [c("emb", (r.standard_normal((1003, 128)) * 0.1).astype(np.float32)),
         c("w1", (r.standard_normal((128, 384)) * 0.08).astype(np.float32)),
         c("b1", (r.standard_normal(384) * 0.1).astype(np.float32)),
         c("w2", (r.standard_normal((128, 384)) * 0.05).astype(np.float32)),
         c("b2", (r.standard_normal(128) * 0.1).astype(np.float32)),
         c("s2", np.array([64, 128], np.int64)), c("s3", np.array([1, 64, 128], np.int64))]
nodes = [helper.make_node("Gather", ["emb", "ids"], ["h"], axis=0),
         helper.make_node("Reshape", ["h", "s2"], ["h2"]),
         helper.make_node("Gemm", ["h2", "w1", "b1"], ["g1"]),
         helper.make_node("Gemm", ["g1", "w2", "b2"], ["g2"], transB=1, alpha=0.5, beta=2.0),
         helper.make_node("Relu", ["g2"], ["a2"]),
         helper.make_node("Reshape", ["a2", "s3"], ["a3"]),
         helper.make_node("Transpose", ["emb"], ["embT"], perm=[1, 0]),
         helper.make_node("MatMul", ["a3", "embT"], ["logits"])]
g = helper.make_graph(nodes, "head", [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 64])],
                      [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 64, 1003])], inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
onnx.save(m, sys.argv[1])
PYEOF
FAST="--target=sm_90a --precision=fp16 --fusion-aggressiveness=3"
# shellcheck disable=SC2086
"$DRKC" "$W/head.onnx" $FAST --report --emit=tile -o "$W/head.tile" 2> "$W/report.txt"
cat "$W/report.txt"
grep -q "kernel forms:.* 3 mm_ws/wgmma" "$W/report.txt" || { echo "FAIL: not 3 matmuls on mm_ws/wgmma"; exit 1; }
if grep -q "mma_sync" "$W/report.txt"; then echo "FAIL: a matmul on the general mma.sync kernel"; exit 1; fi
if grep -q "^kernel @k[0-9]*_Transpose" "$W/head.tile"; then echo "FAIL: a Transpose kernel runs"; exit 1; fi
# shellcheck disable=SC2086
"$DRKC" run "$W/head.onnx" --device=cpu --check $FAST > "$W/check.txt" 2>&1 || { cat "$W/check.txt"; exit 1; }
grep "check output" "$W/check.txt"
grep -q "PASS" "$W/check.txt" || { echo "FAIL: no passing check"; exit 1; }
echo "OK"
