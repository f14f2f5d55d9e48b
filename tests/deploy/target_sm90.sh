#!/usr/bin/env bash
# --target=sm_90 means Hopper at full speed (drk_target_resolve, docs/deploy.md): the module's
# fat binary holds an sm_90a cubin and compute_90a PTX and its f16 matmuls use wgmma, and the
# module carries a fallback plan for later GPUs (drk_target_fallback: an sm_90 cubin and
# compute_90 PTX of sm_80-class kernels on the same weights); --target=sm_90a has none; with
# --portable the module is that portable plan alone (no wgmma).
# --report says when f32 matmuls stay on CUDA cores (naming the flags that move them) and
# when a mixed target list keeps sm_90a off its Hopper kernels.
# usage: target_sm90.sh DRKC DRKRUN MODEL WORK_DIR
set -u
DRKC=$1; DRKRUN=$2; MODEL=$3; W=$4
rm -rf "$W"; mkdir -p "$W"
fails=0
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1"; fails=$((fails + 1)); }
# has NAME FILE REGEX want(1|0)
has() {
  local n; n=$(grep -cE -- "$3" "$2")
  if { [ "$4" = 1 ] && [ "$n" -gt 0 ]; } || { [ "$4" = 0 ] && [ "$n" = 0 ]; }; then pass "$1: /$3/ x$n"
  else fail "$1: /$3/ matched $n line(s) in $2:"; sed 's/^/  | /' "$2" | head -20; fi
}
run() { # NAME ARGS...: compile, keep the log (and drkrun --list of a module)
  local name=$1; shift
  if ! "$DRKC" "$MODEL" -q "$@" >"$W/$name.out" 2>"$W/$name.log"; then fail "$name: drkc $*"; sed 's/^/  | /' "$W/$name.log"; return 1; fi
}
run fast --target=sm_90 -o "$W/fast.drkm" --report && "$DRKRUN" "$W/fast.drkm" --list >"$W/fast.list" 2>&1 && {
  has fast.targets "$W/fast.list" 'targets sm_90a$' 1
  has fast.images "$W/fast.list" 'image 0: .*targets sm_90a,compute_90a$' 1
  has fast.elf "$W/fast.list" '^    ELF sm_90a' 1
  has fast.ptx "$W/fast.list" '^    PTX sm_90a' 1
  has fast.report "$W/fast.log" 'kernels multiply f32 matrices on CUDA cores .*--matmul-precision=high .*--precision=bf16' 1
  has fast.fallback "$W/fast.list" '^  fallback module .*targets sm_90, .*the weights above$' 1
  has fast.fallback_images "$W/fast.list" '^    image 0: .*targets sm_90,compute_90$' 1
  has fast.fallback_ptx "$W/fast.list" '^      PTX sm_90,' 1
  has fast.fallback_report "$W/fast.log" 'report: fallback plan for GPUs after Hopper: [0-9]+ kernels, sm_90,compute_90' 1
}
run only_a --target=sm_90a -o "$W/only_a.drkm" && "$DRKRUN" "$W/only_a.drkm" --list >"$W/only_a.list" 2>&1 && {
  has only_a.no_fallback "$W/only_a.list" 'fallback' 0
  # the fallback adds its code and plan, not a second copy of the weights
  a=$(stat -c %s "$W/only_a.drkm"); f=$(stat -c %s "$W/fast.drkm"); wb=$(grep -oE 'weights [0-9]+' "$W/only_a.list" | head -1 | cut -d' ' -f2)
  if [ "$f" -gt "$a" ] && [ $((f - a)) -lt "$((wb > 0 ? wb : 1))" ]; then pass "fallback.size: $a -> $f bytes (weights $wb)"
  else fail "fallback.size: sm_90a $a bytes, sm_90 $f bytes, weights $wb"; fi
}
# the same module from the same inputs (the fallback too)
cp "$W/fast.drkm" "$W/fast1.drkm"
run fast --target=sm_90 -o "$W/fast.drkm" --report && { cmp -s "$W/fast.drkm" "$W/fast1.drkm" && pass fallback.deterministic || fail fallback.deterministic; }
run portable --target=sm_90 --portable -o "$W/portable.drkm" && "$DRKRUN" "$W/portable.drkm" --list >"$W/portable.list" 2>&1 && {
  has portable.images "$W/portable.list" 'image 0: .*targets sm_90,compute_90$' 1
  has portable.no_a "$W/portable.list" 'sm_90a' 0
  has portable.no_fallback "$W/portable.list" 'fallback' 0
}
# the kernels themselves: wgmma for sm_90 (and sm_90a, and the nvcc spelling), none with --portable
for t in "sm_90" "sm_90a" "compute_90"; do
  run "ptx_$t" --target=$t --precision=fp16 --emit=ptx -o "$W/ptx_$t.ptx" && has "ptx_$t.wgmma" "$W/ptx_$t.ptx" 'wgmma.mma_async' 1
done
run ptx_portable --target=sm_90 --portable --precision=fp16 --emit=ptx -o "$W/ptx_portable.ptx" && {
  has ptx_portable.no_wgmma "$W/ptx_portable.ptx" 'wgmma' 0
  has ptx_portable.target "$W/ptx_portable.ptx" '^\.target sm_90$' 1
}
# tensor cores chosen: no CUDA-core note
run tf32 --target=sm_90 --matmul-precision=high --emit=tile -o /dev/null --report && {
  has tf32.report "$W/tf32.log" "precision mix" 1
  has tf32.no_note "$W/tf32.log" "CUDA cores" 0
}
# one plan for every target: an older target keeps sm_90a off wgmma, and --report says so
run mixed --target=sm_87,sm_90 -o "$W/mixed.drkm" --report && {
  has mixed.note "$W/mixed.log" 'lowered for the oldest target \(sm_87 class\): the sm_90a image has no wgmma/TMA' 1
  "$DRKRUN" "$W/mixed.drkm" --list >"$W/mixed.list" 2>&1
  has mixed.images "$W/mixed.list" 'targets sm_87,sm_90a,compute_87$' 1
  has mixed.no_fallback "$W/mixed.list" 'fallback' 0
}
"$DRKC" --help >"$W/help.txt"
has help.portable "$W/help.txt" '--portable' 1
has help.sm90 "$W/help.txt" 'sm_90 means Hopper at full speed' 1
echo "$fails failure(s)"
[ "$fails" = 0 ]
