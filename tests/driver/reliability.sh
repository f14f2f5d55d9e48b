#!/usr/bin/env bash
# The reliability rows of issue 24, each a reproducer that passed (wrongly) before:
# absurd sizes (Reshape wrapping int64, an input dim of INT64_MAX, --bind past 2^56), the
# attribute table on both paths (Conv strides 0 / -1, kernel_shape against W, auto_pad
# 'BOGUS', a misspelled, float-typed, duplicate or too-new attribute), the output path
# checked before compiling, the module reader refusing checksum-valid nonsense, one message
# naming --bind for unbound symbolic dims, duplicate --bind, shapes expected vs given,
# control characters escaped, no leak when an input file is refused (valgrind, when present).
# usage: reliability.sh DRKC DRKRUN WORK PYTHON
set -u
DRKC=$1; DRKRUN=$2; W=$3; PY=$4
rm -rf "$W"; mkdir -p "$W"
fail=0
bad() { echo "FAIL: $*"; fail=1; }
# expect NAME WANT_RC PATTERN -- ARGS...: run drkc, check exit code and a line of stderr/stdout
expect() {
  local name=$1 want=$2 pat=$3; shift 4
  "$DRKC" "$@" >"$W/$name.out" 2>&1; local rc=$?
  if [ $rc != "$want" ] || ! grep -qF -- "$pat" "$W/$name.out"; then
    bad "$name: exit $rc (want $want), output:"; sed 's/^/  | /' "$W/$name.out" | cat -v | head -8
    echo "  (wanted: $pat)"
  fi
}
"$PY" - "$W" <<'PYEOF' || { echo "FAIL: cannot write the models"; exit 1; }
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper
w = sys.argv[1]
def save(name, nodes, ins, outs, inits=(), opset=17):
    g = h.make_graph(nodes, name, ins, outs, list(inits))
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", opset)], ir_version=8), f"{w}/{name}.onnx")
f = lambda n, s: h.make_tensor_value_info(n, T.FLOAT, s)
save("reshape_wrap", [h.make_node("Reshape", ["x", "s"], ["y"], name="r")], [f("x", [4])], [f("y", None)],
     [h.make_tensor("s", T.INT64, [2], [2**62 + 1, 4])])
save("input_max", [h.make_node("Relu", ["x"], ["y"], name="r")], [f("x", [2**63 - 1, 2])], [f("y", None)])
save("dyn", [h.make_node("Relu", ["x"], ["t"], name="r1"), h.make_node("Relu", ["t"], ["y"], name="r2")],
     [f("x", ["batch", 8])], [f("y", None)])
W_ = numpy_helper.from_array(np.random.default_rng(1).random((4, 3, 3, 3), dtype=np.float32), "w")
xi, yo = [f("x", [1, 3, 8, 8])], [f("y", None)]
def conv(name, *extra, **kw):
    n = h.make_node("Conv", ["x", "w"], ["y"], name="c", **kw)
    n.attribute.extend(extra)
    save(name, [n], xi, yo, [W_])
conv("conv_ok", strides=[2, 2])
conv("conv_s0", strides=[0, 0])
conv("conv_sneg", strides=[-1, -1])
conv("conv_ks", kernel_shape=[5, 5])
conv("conv_autopad", auto_pad="BOGUS")
conv("conv_stridez", stridez=[2, 2])
conv("conv_fstrides", h.make_attribute("strides", [2.0, 2.0]))
conv("conv_dup", h.make_attribute("strides", [1, 1]), strides=[2, 2])
conv("conv_count", strides=[2, 2, 2])
save("split_new", [h.make_node("Split", ["x"], ["a", "b"], name="s", axis=0, num_outputs=2)],
     [f("x", [4])], [f("a", None), f("b", None)], opset=13)
save("esc", [h.make_node("Relu", ["x"], ["y"], name="\x1b[2J"), h.make_node("Foo", ["y"], ["z"], name="\x1b[31mred")],
     [f("x", [2])], [f("z", None)])
save("esc_run", [h.make_node("Relu", ["x"], ["\x1b[2Jy"], name="\x1b]0;title\x07")], [f("x", [2])],
     [f("\x1b[2Jy", [2])])
save("internal_attr", [h.make_node("MatMul", ["x", "b"], ["y"], name="mm", result_n=4)], [f("x", [2, 3])], yo,
     [numpy_helper.from_array(np.ones((3, 8), np.float32), "b")])
open(f"{w}/wrong.pb", "wb").write(numpy_helper.from_array(np.zeros((3, 5), np.float32), "x").SerializeToString())
PYEOF
m() { echo "$W/$1.onnx"; }
# -- absurd sizes: located errors, on the compile path and in drkc run
expect internal_attr 1 "attribute 'result_n' of 'MatMul' is drkc's own" -- "$(m internal_attr)" --emit=graph
expect reshape_wrap 1 "Reshape: shape [4611686018427387905,4] has more than 2^56 elements" -- "$(m reshape_wrap)" -o "$W/x.drkm"
expect reshape_wrap_run 1 "has more than 2^56 elements" -- run "$(m reshape_wrap)" --device=cpu
expect input_max 1 "value '%x' has shape [9223372036854775807, 2]: more than 2^56 elements" -- "$(m input_max)" -o "$W/x.drkm"
expect input_max_run 1 "more than 2^56 elements" -- run "$(m input_max)" --device=cpu
expect bind_huge 1 "size of 'batch' is 99999999999999999999, more than a tensor may have" -- "$(m dyn)" --bind=batch=99999999999999999999 -o "$W/x.drkm"
expect bind_2p57 1 "more than a tensor may have (2^56)" -- "$(m dyn)" --bind=batch=144115188075855872 -o "$W/x.drkm"
[ -e "$W/x.drkm" ] && bad "a module was written for an absurd shape"
# -- the attribute table, on the compile path and in drkc run alike
expect conv_ok 0 "wrote" -- "$(m conv_ok)" --target=sm_80 -o "$W/ok.drkm"
expect conv_ok_run 0 "output 0 'y': f32[1, 4, 3, 3]" -- run "$(m conv_ok)" --device=cpu
for mode in "" run; do
  dev=(); [ -n "$mode" ] && dev=(--device=cpu); out=(-o "$W/x.drkm"); [ -n "$mode" ] && out=()
  expect "conv_s0$mode" 1 "Conv: attribute 'strides' value 0 = 0 must be positive" -- $mode "$(m conv_s0)" "${dev[@]}" "${out[@]}"
  expect "conv_sneg$mode" 1 "Conv: attribute 'strides' value 0 = -1 must be positive" -- $mode "$(m conv_sneg)" "${dev[@]}" "${out[@]}"
  expect "conv_ks$mode" 1 "attribute 'kernel_shape' value 0 = 5 disagrees with W 'w' (kernel dim 3)" -- $mode "$(m conv_ks)" "${dev[@]}" "${out[@]}"
  expect "conv_autopad$mode" 1 "attribute 'auto_pad' = 'BOGUS' is not one of NOTSET|SAME_UPPER|SAME_LOWER|VALID" -- $mode "$(m conv_autopad)" "${dev[@]}" "${out[@]}"
  expect "conv_stridez$mode" 1 "attribute 'stridez' is not an attribute of Conv (it takes: auto_pad, dilations, group, kernel_shape, pads, strides)" -- $mode "$(m conv_stridez)" "${dev[@]}" "${out[@]}"
  expect "conv_fstrides$mode" 1 "attribute 'strides' must be ints, not floats" -- $mode "$(m conv_fstrides)" "${dev[@]}" "${out[@]}"
  expect "conv_dup$mode" 1 "duplicate attribute 'strides' of 'Conv'" -- $mode "$(m conv_dup)" "${dev[@]}" "${out[@]}"
  expect "conv_count$mode" 1 "attribute 'strides' has 3 values; input 'x' has 2 spatial dims, so it needs 2" -- $mode "$(m conv_count)" "${dev[@]}" "${out[@]}"
  expect "split_new$mode" 1 "attribute 'num_outputs' of 'Split' exists from opset 18; the model imports opset 13" -- $mode "$(m split_new)" "${dev[@]}" "${out[@]}"
done
[ -e "$W/x.drkm" ] && bad "a module was written for an invalid node"
# .drkg: the table gives a float attribute written as 1 its kind; unknown names are refused
printf 'graph @g(%%x: f32[2]) -> (%%y) {\n  %%y: f32[2] = LeakyRelu(%%x) {alpha = 1}\n  return %%y\n}\n' >"$W/alpha.drkg"
expect drkg_float 0 "output 0 'y': f32[2]" -- run "$W/alpha.drkg" --device=cpu
printf 'graph @g(%%x: f32[2]) -> (%%y) {\n  %%y: f32[2] = Relu(%%x) {alpah = 1.5}\n  return %%y\n}\n' >"$W/typo.drkg"
expect drkg_typo 1 "attribute 'alpah' is not an attribute of Relu (it takes: none)" -- run "$W/typo.drkg" --device=cpu
# -- the output path is checked before compiling
expect out_nodir 1 "cannot write '$W/nope/m.drkm': $W/nope: No such file or directory" -- "$(m conv_ok)" --target=sm_80 -o "$W/nope/m.drkm"
mkdir -p "$W/adir"
expect out_isdir 1 "cannot write '$W/adir': Is a directory" -- "$(m conv_ok)" --target=sm_80 -o "$W/adir"
# -- messages: unbound symbolic dims once with the flag; --bind twice; shapes expected vs given
"$DRKC" "$(m dyn)" -o "$W/x.drkm" >"$W/dyn.out" 2>&1 && bad "dyn compiled unbound"
[ "$(grep -c error "$W/dyn.out")" = 1 ] || { bad "unbound dim: not one error:"; cat "$W/dyn.out"; }
grep -qF "give their sizes with --bind=batch=1" "$W/dyn.out" || { bad "unbound dim: no --bind=batch=1"; cat "$W/dyn.out"; }
grep -q "drk_graph_bind_dims" "$W/dyn.out" && bad "unbound dim: names a C function"
expect bind_twice 1 "bad dim binding 'batch=2,batch=3': 'batch' is bound twice" -- "$(m dyn)" --bind=batch=2,batch=3 -o "$W/x.drkm"
expect bind_ok 0 "output 0 'y': f32[2, 8]" -- run "$(m dyn)" --device=cpu --bind=batch=2
expect wrong_shape 1 "/wrong.pb: input 'x' has shape [3, 5]; the model expects [batch, 8]" -- run "$(m dyn)" --device=cpu --input x="$W/wrong.pb"
# -- names escaped
"$DRKC" "$(m esc)" -o "$W/x.drkm" >"$W/esc.out" 2>&1
grep -q $'\x1b' "$W/esc.out" && bad "a raw escape character reached the terminal"
grep -qF "node '\\x1b[31mred' (#1)" "$W/esc.out" || { bad "escaped node name missing:"; cat -v "$W/esc.out"; }
"$DRKC" run "$(m esc_run)" --device=cpu >"$W/esc_run.out" 2>&1 || bad "esc_run failed"
"$DRKC" "$(m esc_run)" --target=sm_80 -o "$W/esc.drkm" 2>/dev/null && "$DRKRUN" "$W/esc.drkm" --list >>"$W/esc_run.out" 2>&1
grep -q $'\x1b' "$W/esc_run.out" && bad "drkc run / drkrun --list print a raw escape character"
grep -qF "output 0 '\x1b[2Jy': f32[2]" "$W/esc_run.out" || { bad "escaped output name missing"; cat -v "$W/esc_run.out"; }
# -- drkrun --list: inputs and outputs
"$DRKRUN" "$W/ok.drkm" --list >"$W/list.out" 2>&1 || bad "drkrun --list failed"
grep -qF "input 0 'x': f32[1, 3, 8, 8], 768 bytes at arena offset" "$W/list.out" || { bad "--list lacks the input"; cat "$W/list.out"; }
grep -qF "output 0 'y': f32[1, 4, 3, 3], 144 bytes" "$W/list.out" || { bad "--list lacks the output"; cat "$W/list.out"; }
# -- the module reader: checksum-valid nonsense (mutate.py recomputes the checksums)
mut() { "$PY" "$(dirname "$0")/mutate_module.py" "$W/ok.drkm" "$W/mut_$1.drkm" "$1"; }
for kind in dtype dims offset params; do
  mut $kind || { bad "mutate $kind failed"; continue; }
  "$DRKRUN" "$W/mut_$kind.drkm" --list >"$W/mut_$kind.out" 2>&1 && bad "reader accepted mutated $kind"
done
grep -qF "dtype 17674 is not an ONNX dtype a module holds" "$W/mut_dtype.out" || { bad "dtype"; cat "$W/mut_dtype.out"; }
grep -q "bytes for [0-9]* elements of dtype 1 " "$W/mut_dims.out" || { bad "dims"; cat "$W/mut_dims.out"; }
grep -qF "arena offset 1 is not a multiple of 256" "$W/mut_offset.out" || { bad "offset"; cat "$W/mut_offset.out"; }
grep -qF "PARAMS has" "$W/mut_params.out" || { bad "params"; cat "$W/mut_params.out"; }
# -- --version: the commit, LLVM and ptxas; --help and the summary say where the output goes
"$DRKC" --version >"$W/ver.out" 2>&1 || bad "drkc --version failed"
grep -qE "^drkc [0-9.]+ \(git ([0-9a-f]{12}(-dirty)?|unknown)\)$" "$W/ver.out" || { bad "drkc --version: no commit"; cat "$W/ver.out"; }
grep -qE "^LLVM [0-9]+\.[0-9]+\.[0-9]+$" "$W/ver.out" || { bad "drkc --version: no LLVM version"; cat "$W/ver.out"; }
grep -qE "^ptxas" "$W/ver.out" || { bad "drkc --version: no ptxas line"; cat "$W/ver.out"; }
"$DRKRUN" --version 2>&1 | grep -qE "^drkrun [0-9.]+ \(git " || bad "drkrun --version: no commit"
"$DRKC" --help | grep -qF "in the current folder: ./model.drkm" || bad "--help does not say where the module goes"
(cd "$W" && "$DRKC" conv_ok.onnx --target=sm_80) 2>"$W/dflt.err" || bad "default-output compile failed"
grep -q "^drkc: wrote ./conv_ok.drkm: 1 kernels, [0-9.]* MB, [0-9.]* s$" "$W/dflt.err" || { bad "summary line:"; cat "$W/dflt.err"; }
[ -f "$W/conv_ok.drkm" ] || bad "the default output is not ./conv_ok.drkm"
# -- no leak when an input file is refused
if command -v valgrind >/dev/null; then
  valgrind -q --leak-check=full --errors-for-leak-kinds=definite --error-exitcode=9 "$DRKC" run "$(m dyn)" --device=cpu \
    --input x="$W/wrong.pb" >"$W/vg.out" 2>&1
  [ $? = 9 ] && { bad "leak when an input file is refused:"; grep -A6 "definitely lost" "$W/vg.out" | head -20; }
else
  echo "note: valgrind not found; the leak check is skipped"
fi
[ $fail = 0 ] && echo "reliability: all passed"
exit $fail
