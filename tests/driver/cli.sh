#!/usr/bin/env bash
# Command-line behaviour of drkc: options, aliases, target validation, emit kinds, and that
# bad input gives exit status 1 with a located message (never a crash).
# usage: cli.sh DRKC SRC_DIR WORK_DIR PYTHON
set -u
DRKC=$1; SRC=$2; W=$3; PY=$4
rm -rf "$W"; mkdir -p "$W"
fails=0
# expect NAME STATUS PATTERN -- ARGS...: runs drkc, checks the exit status and that
# stdout+stderr match the extended regex PATTERN.
expect() {
  local name=$1 status=$2 pat=$3; shift 4
  "$DRKC" "$@" >"$W/out" 2>&1; local rc=$?
  if [ "$rc" != "$status" ] || { [ -n "$pat" ] && ! grep -Eq -- "$pat" "$W/out"; }; then
    echo "FAIL $name: exit $rc (want $status), output:"; sed 's/^/  | /' "$W/out"; echo "  (wanted /$pat/)"
    fails=$((fails + 1))
  else
    echo "PASS $name"
  fi
}
cat >"$W/ok.drkg" <<'G'
graph @g(%x: f32[N, 4], %y: f32[1, 4]) -> (%z) {
  %s: f32[N, 4] = Add(%x, %y)
  %z: f32[N, 4] = Relu(%s)
  return %z
}
G
printf 'graph @g(%%x: f32[2]) -> (%%z) {\n  %%z: f32[2] = Relu(%%q)\n  return %%z\n}\n' >"$W/bad.drkg"
printf 'graph @g(%%x: f32[2]) -> (%%z) {\n  %%z: f32[2] = Relu(%%x) {\n' >"$W/trunc.drkg"
head -c 300 /dev/urandom >"$W/garbage.onnx"
printf '\x0a\x05hello\x12' >"$W/trunc.onnx"

expect version 0 '^drkc [0-9]+\.[0-9]+\.[0-9]+' -- --version
expect help 0 'usage: drkc INPUT' -- --help
expect no-input 2 'no input file' --
expect unknown-option 2 "unknown option '--frobnicate'" -- "$W/ok.drkg" --frobnicate
expect unknown-target 1 "unknown target 'sm_99' \(known targets: sm_80 sm_86 sm_87 sm_89 sm_90 sm_90a gfx942\)" -- "$W/ok.drkg" --target=sm_99
expect unknown-target-in-list 1 "unknown target 'sm_75'" -- "$W/ok.drkg" --target=sm_87,sm_75
expect target-list 0 'Relu' -- "$W/ok.drkg" --emit=graph --target=sm_87,sm_90a,gfx942
expect arch-alias 0 'Relu' -- "$W/ok.drkg" --emit=graph -arch=sm_90
expect gpu-architecture-alias 0 'Relu' -- "$W/ok.drkg" --emit=graph --gpu-architecture=sm_90a
expect gpu-architecture-space 0 'Relu' -- "$W/ok.drkg" --emit=graph --gpu-architecture sm_80
expect compute-spelling 0 'Relu' -- "$W/ok.drkg" --emit=graph -arch=compute_89
expect emit-graph 0 '%z: f32\[N, 4\] = Relu\(%s\)' -- "$W/ok.drkg" --emit=graph
expect emit-unknown 2 "unknown --emit kind 'bogus'" -- "$W/ok.drkg" --emit=bogus
expect dump-after 0 '// ---- after canonicalize ----' -- "$W/ok.drkg" --emit=graph --dump-after=canonicalize
expect dump-after-unknown 2 "unknown stage 'schedule' for --dump-after" -- "$W/ok.drkg" --emit=graph --dump-after=schedule
"$PY" - "$W/conv.drkg" <<'P'
import sys
w = ", ".join("%.3f" % (((i * 7) % 11 - 5) / 8) for i in range(72))
open(sys.argv[1], "w").write(
    "graph @c(%%x: f16[1, 2, 6, 6]) -> (%%z) {\n"
    "  %%w: f16[4, 2, 3, 3] = const [%s]\n"
    "  %%y: f16[1, 4, 6, 6] = Conv(%%x, %%w) {pads = [1, 1, 1, 1]}\n"
    "  %%z: f16[1, 4, 6, 6] = Relu(%%y)\n"
    "  return %%z\n}\n" % w)
P
cat >"$W/mm.drkg" <<'G'
graph @m(%a: f16[256, 512], %b: f16[512, 256]) -> (%c) {
  %c: f16[256, 256] = MatMul(%a, %b)
  return %c
}
G
expect schedule-bad-value 2 "--schedule: mm.tile_n: a power of two in 64..256, not '96'" -- "$W/mm.drkg" --schedule=mm.tile_n=96
expect schedule-bad-key 2 "--schedule: 'mm.tile_m=64' is not KEY=VALUE with a known key" -- "$W/mm.drkg" --schedule=mm.split_k=2,mm.tile_m=64
# the heuristic (ws_cost) takes 64-wide tiles for this small grid; pinned: 128 wide, 2 splits
expect schedule-default 0 'launch @k0_MatMul .* grid\(2, 4, 1\)' -- "$W/mm.drkg" --target=sm_90a --emit=tile
expect schedule-pinned 0 'launch @k0_MatMul .* grid\(2, 2, 2\)' -- "$W/mm.drkg" --target=sm_90a --emit=tile --schedule=mm.tile_n=128,mm.split_k=2
# persistent ping-pong: one program per tile here (8 tiles of 128x64 < 132 SMs), the form in the schedule
expect schedule-persistent 0 'tile = \[128, 64, 64\].*persistent = 132, staged\}' -- "$W/mm.drkg" --target=sm_90a --emit=tile --schedule=mm.persistent=1
expect schedule-persistent-grid 0 'launch @k0_MatMul .* grid\(8, 1, 1\) block\(384\)' -- "$W/mm.drkg" --target=sm_90a --emit=tile --schedule=mm.persistent=1
expect schedule-persistent-bad 2 "--schedule: mm.persistent: 0..2, not '3'" -- "$W/mm.drkg" --schedule=mm.persistent=3
expect schedule-cooperative 0 'tile = \[128, 128, 64\].*persistent = 132 \(cooperative\), staged\}' -- "$W/mm.drkg" --target=sm_90a --emit=tile --schedule=mm.persistent=2,mm.tile_n=128
# the persistent forms stage their epilogue in buffers of their own (the ring gives up stages)
expect schedule-persistent-stages 0 'tile = \[128, 256, 64\], stages = 3, .*persistent = 132 \(cooperative\), staged\}' -- "$W/mm.drkg" --target=sm_90a --emit=tile --schedule=mm.persistent=2,mm.tile_n=256
expect schedule-persistent-unstaged 0 'tile = \[128, 64, 64\].*persistent = 132\}' -- "$W/mm.drkg" --target=sm_90a --emit=tile --schedule=mm.persistent=1,mm.staged=0
# two programs along M per cluster (4 x 128-row tiles here), B multicast; the staged epilogue is the default
expect schedule-cluster 0 'grid\(2, 2, 1\) block\(384\) cluster\(2, 1, 1\)' -- "$W/mm.drkg" --target=sm_90a --emit=tile --schedule=mm.cluster=2,mm.tile_n=128
expect schedule-cluster-multicast 0 'tma_load .*\{multicast = 3\}' -- "$W/mm.drkg" --target=sm_90a --emit=tile --schedule=mm.cluster=2,mm.tile_n=128
expect schedule-cluster-ptx 0 'multicast::cluster' -- "$W/mm.drkg" --target=sm_90a --emit=ptx --schedule=mm.cluster=2,mm.tile_n=128
expect schedule-staged 0 'mma = wgmma, staged\}' -- "$W/mm.drkg" --target=sm_90a --emit=tile --schedule=mm.tile_n=128
expect schedule-unstaged 0 'mma = wgmma\}' -- "$W/mm.drkg" --target=sm_90a --emit=tile --schedule=mm.tile_n=128,mm.staged=0
# SwiGLU: the up projection paired into the gate's kernel (two B descriptors, halves of each tile)
"$PY" "$SRC/tests/gpu/gen_swiglu.py" "$W/swiglu.drkg" 200 136 328
expect pair-fuse 0 'anchor %g, paired with %u: MatMul\(%g\) MatMul\(%u\)' -- "$W/swiglu.drkg" --target=sm_90a --emit=tile --dump-after=fuse
expect pair-kernel 0 'k[0-9]+_MatMul\(%desc_a: [^)]*%desc_b2: ' -- "$W/swiglu.drkg" --target=sm_90a --emit=tile
expect pair-schedule 0 'tile = \[128, 256, 64\], stages = 4, mma = wgmma, staged, paired\}' -- "$W/swiglu.drkg" --target=sm_90a --emit=tile --schedule=mm.tile_n=256
expect pair-off 0 'launch @k[0-9]+_MatMul node u ' -- "$W/swiglu.drkg" --target=sm_90a --emit=tile --schedule=mm.pair=0
expect pair-sm80 0 'launch @k[0-9]+_MatMul node u ' -- "$W/swiglu.drkg" --target=sm_80 --emit=tile
# (the unpaired path runs on the CPU tile executor: tests/lower/exec/swiglu_pair_fused.drkg;
# the paired kernel on the GPU: tests/gpu/matmul_schedules.sh)
expect schedule-move-block-bad 2 "--schedule: flat.move_block: a power of two in 1024..8192, not '1000'" -- "$W/mm.drkg" --schedule=flat.move_block=1000
expect layout-bad 2 "--layout: auto, nchw or nhwc, not 'nhcw'" -- "$W/conv.drkg" --layout=nhcw
expect layout-auto 0 'ConvNHWC' -- "$W/conv.drkg" --emit=graph --dump-after=layout
expect layout-nchw 0 '= Conv\(%x, %w\)' -- "$W/conv.drkg" --emit=graph --layout=nchw
expect layout-auto-amd 0 '= Conv\(%x, %w\)' -- "$W/conv.drkg" --emit=graph --target=gfx942
expect layout-run-check 0 "check output 0 'z': rel error .* PASS" -- run "$W/conv.drkg" --check --layout=nhwc
# sm_90a with conv.hopper=1 pinned: C = 2 padded to 8 for the TMA convolution (the weight
# here, a fused Pad of the input), which then takes the conv; by default (C < 64 stays on
# mma_sync: device call 38), on sm_80 and with conv.hopper=0 C is kept
H1=--schedule=conv.hopper=1
expect layout-pad-sm90a 0 'w\.nhwc\.pad: f16\[4, 3, 3, 8\]' -- "$W/conv.drkg" --emit=graph --dump-after=layout --target=sm_90a $H1
expect layout-pad-sm90a-conv-ws 0 'k[0-9]+_ConvNHWC .* conv_ws .*conv.hopper=1' -- "$W/conv.drkg" --emit=schedules --target=sm_90a $H1
expect layout-pad-sm90 0 'k[0-9]+_ConvNHWC .* conv_ws .*conv.hopper=1' -- "$W/conv.drkg" --emit=schedules --target=sm_90 $H1
expect layout-pad-default 0 'w\.nhwc: f16\[4, 3, 3, 2\] = const' -- "$W/conv.drkg" --emit=graph --dump-after=layout --target=sm_90a
expect layout-pad-default-mma 0 'report: k[0-9]+_ConvNHWC: TMA \+ wgmma convolution: C ' -- "$W/conv.drkg" --report --target=sm_90a -o "$W/c64.drkm"
expect layout-pad-sm80 0 'w\.nhwc: f16\[4, 3, 3, 2\] = const' -- "$W/conv.drkg" --emit=graph --dump-after=layout --target=sm_80
expect layout-pad-hopper0 0 'w\.nhwc: f16\[4, 3, 3, 2\] = const' -- "$W/conv.drkg" --emit=graph --dump-after=layout --target=sm_90a --schedule=conv.hopper=0
expect layout-pad-run-check 0 "check output 0 'z': rel error .* PASS" -- run "$W/conv.drkg" --check --target=sm_90a $H1
# depthwise convs (direct kernel, lower_dwconv.c) join a channels-last region but never start
# one: alone on the NCHW input they stay NCHW, after a dense conv they go NHWC; the reasons
"$PY" - "$W/dw.drkg" "$W/dw2.drkg" <<'P'
import sys
w = lambda n: ", ".join("%.3f" % (((i * 7) % 11 - 5) / 8) for i in range(n))
open(sys.argv[1], "w").write(
    "graph @d(%%x: f16[1, 8, 6, 6]) -> (%%z) {\n"
    "  %%w: f16[8, 1, 3, 3] = const [%s]\n"
    "  %%y: f16[1, 8, 6, 6] = Conv(%%x, %%w) {pads = [1, 1, 1, 1], group = 8}\n"
    "  %%z: f16[1, 8, 6, 6] = Relu(%%y)\n"
    "  return %%z\n}\n" % w(72))
open(sys.argv[2], "w").write(
    "graph @d(%%x: f16[1, 8, 6, 6]) -> (%%z) {\n"
    "  %%v: f16[8, 8, 3, 3] = const [%s]\n"
    "  %%w: f16[8, 1, 3, 3] = const [%s]\n"
    "  %%u: f16[1, 8, 6, 6] = Conv(%%x, %%v) {pads = [1, 1, 1, 1]}\n"
    "  %%y: f16[1, 8, 6, 6] = Conv(%%u, %%w) {pads = [1, 1, 1, 1], group = 8}\n"
    "  %%z: f16[1, 8, 6, 6] = Relu(%%y)\n"
    "  return %%z\n}\n" % (w(576), w(72)))
P
expect layout-dw-alone 0 '// layout: Conv %y: NCHW: depthwise/small-group conv .* on an NCHW input' -- "$W/dw.drkg" --emit=graph --dump-after=layout
expect layout-dw-alone-graph 0 '= Conv\(%x, %w\) \{pads = \[1, 1, 1, 1\], group = 8' -- "$W/dw.drkg" --emit=graph
expect layout-dw-region 0 '// layout: Conv %y: NHWC: depthwise/small-group conv on a channels-last input' -- "$W/dw2.drkg" --emit=graph --dump-after=layout
expect layout-dw-region-back 0 '// layout: %z back to the model.s layout for the graph output' -- "$W/dw2.drkg" --emit=graph --dump-after=layout
expect layout-dw-region-graph 0 'ConvNHWC\(%u.nhwc' -- "$W/dw2.drkg" --emit=graph
expect layout-dw-run-check 0 "check output 0 'z': rel error .* PASS" -- run "$W/dw2.drkg" --check
# a ConvNeXt block (channels-last LayerNorm and MLP, the model's own permutes around the NCHW
# depthwise conv, a downsampling patch conv that conv-to-matmul makes a MatMul): the depthwise
# convs start the region from the model's NHWC -> NCHW Transposes, the residual stream stays
# channels-last, one layout change is left (the graph output)
"$PY" - "$W/cnx.drkg" <<'P'
import sys
w = lambda n, s=8: ", ".join("%.3f" % (((i * 7) % 11 - 5) / s) for i in range(n))
open(sys.argv[1], "w").write(
    "graph @cnx(%%x: f16[1, 6, 6, 8]) -> (%%z) {\n"
    "  %%w: f16[8, 1, 3, 3] = const [%s]\n"
    "  %%g: f16[8] = const [%s]\n"
    "  %%b: f16[8] = const [%s]\n"
    "  %%m: f16[8, 16] = const [%s]\n"
    "  %%m2: f16[16, 8] = const [%s]\n"
    "  %%ls: f16[8, 1, 1] = const [%s]\n"
    "  %%pw: f16[16, 8, 2, 2] = const [%s]\n"
    "  %%v: f16[16, 1, 3, 3] = const [%s]\n"
    "  %%t: f16[1, 8, 6, 6] = Transpose(%%x) {perm = [0, 3, 1, 2]}\n"
    "  %%c: f16[1, 8, 6, 6] = Conv(%%t, %%w) {pads = [1, 1, 1, 1], group = 8}\n"
    "  %%p: f16[1, 6, 6, 8] = Transpose(%%c) {perm = [0, 2, 3, 1]}\n"
    "  %%l: f16[1, 6, 6, 8] = LayerNormalization(%%p, %%g, %%b) {axis = -1}\n"
    "  %%h: f16[1, 6, 6, 16] = MatMul(%%l, %%m)\n"
    "  %%e: f16[1, 6, 6, 16] = Gelu(%%h)\n"
    "  %%o: f16[1, 6, 6, 8] = MatMul(%%e, %%m2)\n"
    "  %%q: f16[1, 8, 6, 6] = Transpose(%%o) {perm = [0, 3, 1, 2]}\n"
    "  %%s: f16[1, 8, 6, 6] = Mul(%%ls, %%q)\n"
    "  %%r: f16[1, 8, 6, 6] = Add(%%s, %%t)\n"
    "  %%d: f16[1, 16, 3, 3] = Conv(%%r, %%pw) {strides = [2, 2]}\n"
    "  %%z: f16[1, 16, 3, 3] = Conv(%%d, %%v) {pads = [1, 1, 1, 1], group = 16}\n"
    "  return %%z\n}\n" % (w(72), w(8, 4), w(8, 16), w(128, 4), w(128, 4), w(8, 2), w(512, 16), w(144)))
P
expect layout-dw-model-nhwc 0 '// layout: Conv %c: NHWC: depthwise/small-group conv on a channels-last input' -- "$W/cnx.drkg" --emit=graph --dump-after=layout
expect layout-dw-model-nhwc-patch 0 '// layout: Conv %z: NHWC: depthwise' -- "$W/cnx.drkg" --emit=graph --dump-after=layout
"$DRKC" "$W/cnx.drkg" --emit=graph >"$W/cnx.txt" 2>&1
n=$(grep -c '= Transpose(' "$W/cnx.txt"); c=$(grep -c '= ConvNHWC(' "$W/cnx.txt")
if [ "$n" = 2 ] && [ "$c" = 2 ]; then echo "PASS layout-dw-model-nhwc-count"
else echo "FAIL layout-dw-model-nhwc-count: $n Transposes (want 2: the patches and the output), $c ConvNHWC (want 2)"; sed 's/^/  | /' "$W/cnx.txt" | grep -v const; fails=$((fails + 1)); fi
expect layout-dw-model-nhwc-check 0 "check output 0 'z': rel error .* PASS" -- run "$W/cnx.drkg" --check
# PoolFormer's GroupNorm(1) as the exporters write it (Reshape to [N, 1, C*H*W],
# InstanceNormalization, Reshape back) and a ReduceL2 over H, W (ConvNeXt V2's GRN) inside a
# channels-last region: computed on the channels-last tensor, no layout change back for them
"$PY" - "$W/gn1.drkg" <<'P'
import sys
w = lambda n, s=8: ", ".join("%.3f" % (((i * 7) % 11 - 5) / s) for i in range(n))
open(sys.argv[1], "w").write(
    "graph @gn1(%%x: f16[2, 8, 6, 6]) -> (%%z) {\n"
    "  %%w: f16[8, 8, 3, 3] = const [%s]\n"
    "  %%s1: i64[3] = const [2, 1, 288]\n"
    "  %%s2: i64[4] = const [2, 8, 6, 6]\n"
    "  %%one: f16[1] = const [1.25]\n"
    "  %%zero: f16[1] = const [-0.5]\n"
    "  %%g: f16[8, 1, 1] = const [%s]\n"
    "  %%b: f16[8, 1, 1] = const [%s]\n"
    "  %%c: f16[2, 8, 6, 6] = Conv(%%x, %%w) {pads = [1, 1, 1, 1]}\n"
    "  %%r: f16[2, 1, 288] = Reshape(%%c, %%s1)\n"
    "  %%n: f16[2, 1, 288] = InstanceNormalization(%%r, %%one, %%zero) {epsilon = 1e-05}\n"
    "  %%u: f16[2, 8, 6, 6] = Reshape(%%n, %%s2)\n"
    "  %%m: f16[2, 8, 6, 6] = Mul(%%u, %%g)\n"
    "  %%a: f16[2, 8, 6, 6] = Add(%%m, %%b)\n"
    "  %%p: f16[2, 8, 6, 6] = AveragePool(%%a) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], count_include_pad = 0}\n"
    "  %%q2: f16[2, 8, 1, 1] = ReduceL2(%%a) {axes = [2, 3]}\n"
    "  %%g2: f16[2, 8, 6, 6] = Mul(%%a, %%q2)\n"
    "  %%d: f16[2, 8, 6, 6] = Sub(%%p, %%g2)\n"
    "  %%z: f16[2, 8, 6, 6] = Add(%%d, %%c)\n"
    "  return %%z\n}\n" % (w(576, 16), w(8, 4), w(8, 16)))
P
expect layout-gn1-nhwc 0 'InstanceNormalization\(%r\.nhwc' -- "$W/gn1.drkg" --emit=graph --dump-after=layout
"$DRKC" "$W/gn1.drkg" --emit=graph --dump-after=layout -o "$W/gn1.txt" 2>"$W/gn1.why"
if grep -q 'back to the model.s layout for \(Reshape\|ReduceL2\)' "$W/gn1.why" || [ "$(grep -c '= Transpose(' "$W/gn1.txt")" != 2 ]; then
  echo "FAIL layout-gn1-transposes: want only the input's and the output's layout changes"; grep -v const "$W/gn1.txt" | sed 's/^/  | /'; fails=$((fails + 1))
else echo "PASS layout-gn1-transposes"; fi
expect layout-gn1-check 0 "check output 0 'z': rel error .* PASS" -- run "$W/gn1.drkg" --check
expect parse-error 1 "bad.drkg:2:[0-9]+: error: .*q" -- "$W/bad.drkg" --emit=graph
expect truncated-text 1 "trunc.drkg:[0-9]+:[0-9]+: error:" -- "$W/trunc.drkg" --emit=graph
expect garbage-onnx 1 "garbage.onnx.*error" -- "$W/garbage.onnx" --emit=graph
expect truncated-onnx 1 "trunc.onnx.*error" -- "$W/trunc.onnx" --emit=graph
expect missing-file 1 "nope.onnx.*error" -- "$W/nope.onnx" --emit=graph
expect unknown-kind 1 "unknown input kind" -- "$W/model.txt" --emit=graph
expect output-file 0 '' -- "$W/ok.drkg" --emit=graph -o "$W/ok.out.drkg"
grep -q 'Relu' "$W/ok.out.drkg" || { echo "FAIL output-file: -o wrote nothing"; fails=$((fails + 1)); }
"$PY" -c "import numpy as np; np.save('$W/x.npy', np.arange(12, dtype=np.float32).reshape(3, 4) - 5)"
expect run-named-input 0 "output 0 'z': f32\[3, 4\] sum [0-9.]+" -- run "$W/ok.drkg" --input x="$W/x.npy" --output-dir "$W/run" --npy
"$PY" -c "
import numpy as np
z = np.load('$W/run/output_0.npy'); assert z.shape == (3, 4) and z.sum() > 0, z
" || { echo "FAIL run-named-input: output_0.npy"; fails=$((fails + 1)); }
expect run-symbolic 1 "input 'x' has symbolic dim 'N'" -- run "$W/ok.drkg"
expect run-bad-device 2 "unknown device 'tpu'" -- run "$W/ok.drkg" --device=tpu
expect run-bad-input-name 1 "the model has no input of that name" -- run "$W/ok.drkg" --input nope=x.npy
expect emit-tile-symbolic 1 "GPU lowering needs static shapes" -- "$W/ok.drkg" --emit=tile
expect emit-tile-bound 0 'kernel @' -- "$W/ok.drkg" --emit=tile --bind=N=3
expect bind-unknown-dim 1 "M" -- "$W/ok.drkg" --emit=tile --bind=M=3
expect emit-ptx 0 '\.entry' -- "$W/ok.drkg" --emit=ptx --bind=N=3 --target=sm_87
expect emit-llvm 0 'ptx_kernel' -- "$W/ok.drkg" --emit=llvm --bind=N=3
expect emit-hsaco-needs-amd 1 "needs the gfx942 target" -- "$W/ok.drkg" --emit=hsaco --bind=N=3
expect emit-hsaco 0 '' -- "$W/ok.drkg" --emit=hsaco --target=gfx942 --bind=N=3 -o "$W/ok.hsaco"
expect emit-bundle 0 '' -- "$W/ok.drkg" --emit=bundle --target=gfx942 --bind=N=3 -o "$W/ok.bundle"
expect emit-ptx-needs-nv 1 "needs an NVIDIA target" -- "$W/ok.drkg" --emit=ptx --target=gfx942 --bind=N=3
expect module-mixed 0 '' -- "$W/ok.drkg" --target=sm_87,gfx942 --bind=N=3 -o "$W/ok.drkm"
expect matmul-precision-bad 2 "highest, high or medium" -- "$W/ok.drkg" --matmul-precision=low
export DRK_CUDA_DRIVER=/nonexistent/libcuda.so.1 # the same answer on machines with a GPU
expect run-cuda-no-driver 1 "no CUDA driver" -- run "$W/ok.drkg" --device=cuda --bind=N=3
unset DRK_CUDA_DRIVER
expect precision-bad 2 "auto, fp32, tf32, bf16, fp16 or fp8" -- "$W/ok.drkg" --precision=fp4
expect precision-fp16-graph 0 'Cast' -- "$W/ok.drkg" --emit=graph --precision=fp16
expect report 0 'report: .* graph nodes -> .* kernels' -- "$W/ok.drkg" --emit=tile --bind=N=3 --report
# twin kernels (a transformer's layers lower alike) are compiled once: the tile module holds the
# distinct ones, which the report counts, fewer than the launches
"$DRKC" "$SRC/tests/dynamic/exports/bert.onnx" --bind=batch=2,seq=8 --emit=tile --report -o "$W/twins.drkt" >"$W/twins.out" 2>&1
tw=$(sed -n 's/^report: .* -> \([0-9]*\) kernels .*; \([0-9]*\) distinct, .*/\1 \2/p' "$W/twins.out")
nk=$(grep -c '^kernel @' "$W/twins.drkt")
if [ -n "$tw" ] && [ "${tw#* }" = "$nk" ] && [ "$nk" -lt "${tw% *}" ]; then echo "PASS twin-kernels ($tw)"
else echo "FAIL twin-kernels: launches and distinct '$tw', $nk kernels in the tile module"; sed 's/^/  | /' "$W/twins.out"; fails=$((fails + 1)); fi
expect run-fp16 0 "output 0 'z': f32\[3, 4\]" -- run "$W/ok.drkg" --input x="$W/x.npy" --precision=fp16
expect fusion-bad 2 "0, 1, 2 or 3" -- "$W/ok.drkg" --fusion-aggressiveness=7
expect depth-bad 2 "a number >= 1" -- "$W/ok.drkg" --max-graph-depth=0
expect dump-fuse 0 'fusion: level 1' -- "$W/ok.drkg" --emit=tile --bind=N=3 --fusion-aggressiveness=1 --dump-after=fuse -o /dev/null
expect run-check-cpu 0 "check output 0 'z': rel error .* \(tolerance 1e-02\) PASS" -- run "$W/ok.drkg" --check --bind=N=3 --precision=fp16
cat >"$W/slice.drkg" <<'G'
graph @g(%x: f32[4, 6], %st: i64[2]) -> (%z) {
  %e: i64[2] = const [3, 5]
  %z: f32[*] = Slice(%x, %st, %e)
  return %z
}
G
"$PY" -c "import numpy as np; np.save('$W/st.npy', np.array([1, 2], dtype=np.int64)); np.save('$W/st32.npy', np.array([1, 2], dtype=np.int32))"
expect slice-runtime-starts 1 "dim 0 of result 'z' depends on data" -- "$W/slice.drkg" --emit=tile
expect freeze-input 0 'f32\[2, 3\]' -- "$W/slice.drkg" --emit=graph --freeze-input=st="$W/st.npy"
expect freeze-input-tile 0 'kernel' -- "$W/slice.drkg" --emit=tile --freeze-input st="$W/st.npy"
expect freeze-input-dtype 1 "cannot freeze input 'st': it is i64 of rank 1, the value is i32" -- "$W/slice.drkg" --freeze-input=st="$W/st32.npy"
expect freeze-input-name 1 "cannot freeze input 'nope'" -- "$W/slice.drkg" --freeze-input=nope="$W/st.npy"
expect freeze-input-syntax 1 "needs NAME=FILE" -- "$W/slice.drkg" --freeze-input=st
for t in "$SRC"/tests/tile/*.drkt; do
  [ -e "$t" ] || continue
  grep -q 'EXPECT-ERROR' "$t" && continue
  expect "emit-tile-$(basename "$t")" 0 'kernel' -- "$t" --emit=tile
  break
done
echo "$fails failed"
[ "$fails" = 0 ]
