#!/usr/bin/env bash
# Per-kernel schedules as data: `--emit=schedules` lists every kernel with its workload key and
# knob space; editing one kernel's knobs and applying the file with `--schedules=FILE` changes
# that kernel's code and no other kernel's (compared in PTX, where names are per kernel: the
# tile IR numbers values and layouts across the module); bad files get errors located at the
# line. Needs no GPU and no ptxas (LLVM's NVPTX backend).
# usage: schedules.sh DRKC MODELS_DIR WORK
set -u
DRKC=$1; MODELS=$2; W=$3
rm -rf "$W"; mkdir -p "$W"
fail=0
bad() { echo "FAIL: $*"; fail=1; }
# kernels of a PTX file, one file per entry
split_kernels() { awk -v d="$2" '/^\.visible \.entry / { name = $3; sub(/\(.*/, "", name) } name { print > (d "/" name) }' "$1"; }
F0=(--target=sm_90a --precision=fp16 --fusion-aggressiveness=3)
for model in gpt_layer resnet_block; do
  F=("${F0[@]}"); [ $model = gpt_layer ] && F+=(--bind=batch=1,seq=128)
  m="$MODELS/$model/model.onnx"
  "$DRKC" "$m" "${F[@]}" --emit=schedules -o "$W/$model.sched" || { bad "$model: --emit=schedules failed"; continue; }
  n=$(grep -c '^k' "$W/$model.sched")
  [ "$n" -gt 1 ] || bad "$model: only $n kernels listed"
  grep -q '^# .*mm.tile_n {64,128,256}' "$W/$model.sched" || bad "$model: no sm_90a matmul knob space listed"
  # the listed schedule is the heuristic's: applying it unchanged changes nothing
  "$DRKC" "$m" "${F[@]}" --emit=tile -o "$W/$model.a.drkt" || bad "$model: --emit=tile failed"
  "$DRKC" "$m" "${F[@]}" --emit=tile --schedules="$W/$model.sched" -o "$W/$model.same.drkt" || bad "$model: the listed schedules do not apply"
  cmp -s "$W/$model.a.drkt" "$W/$model.same.drkt" || bad "$model: applying the heuristic's own schedules changed the tile IR"
  # one kernel's N tile to another legal value
  line=$(grep -m1 '^k.* mm_ws ' "$W/$model.sched")
  kname=${line%% *}
  cur=$(sed 's/.*mm\.tile_n=\([0-9]*\).*/\1/' <<<"$line")
  new=128; [ "$cur" = 128 ] && new=64
  awk -v k="$kname" -v n="$new" '$1 == k { sub(/mm\.tile_n=[0-9]+/, "mm.tile_n=" n) } { print }' "$W/$model.sched" >"$W/$model.edit.sched"
  [ "$(diff "$W/$model.sched" "$W/$model.edit.sched" | grep -c '^>')" = 1 ] || bad "$model: the edit did not change one line"
  "$DRKC" "$m" "${F[@]}" --emit=tile --schedules="$W/$model.edit.sched" -o "$W/$model.b.drkt" || { bad "$model: edited schedules rejected"; continue; }
  "$DRKC" "$m" "${F[@]}" --emit=ptx -o "$W/$model.a.ptx" && "$DRKC" "$m" "${F[@]}" --emit=ptx --schedules="$W/$model.edit.sched" -o "$W/$model.b.ptx" ||
    bad "$model: --emit=ptx failed"
  "$DRKC" "$m" "${F[@]}" --emit=schedules --schedules="$W/$model.edit.sched" -o "$W/$model.back.sched"
  cmp -s "$W/$model.edit.sched" "$W/$model.back.sched" || bad "$model: --emit=schedules under the edited file is not the edited file"
  mkdir -p "$W/$model.ka" "$W/$model.kb"
  split_kernels "$W/$model.a.ptx" "$W/$model.ka"; split_kernels "$W/$model.b.ptx" "$W/$model.kb"
  [ "$(ls "$W/$model.ka" | wc -l)" = "$(grep -c '^kernel @' "$W/$model.a.drkt")" ] || bad "$model: PTX entries and kernels differ in number"
  changed=$(for f in "$W/$model.ka"/*; do cmp -s "$f" "$W/$model.kb/$(basename "$f")" || basename "$f"; done | tr '\n' ' ')
  [ "$changed" = "$kname " ] || bad "$model: editing $kname (tile_n $cur -> $new) changed kernels: '$changed'"
  grep -A1 "^# launch @$kname " "$W/$model.b.drkt" | grep -q "tile = \[128, $new, 64\]" || bad "$model: $kname does not have tile_n $new"
  echo "ok $model: $n kernels; $kname tile_n $cur -> $new changed only $kname"
done
# located errors
m="$MODELS/gpt_layer/model.onnx"; F=("${F0[@]}" --bind=batch=1,seq=128)
kname=$(grep -m1 '^k.* mm_ws ' "$W/gpt_layer.sched" | cut -d' ' -f1)
wl=$(grep -m1 '^k.* mm_ws ' "$W/gpt_layer.sched" | sed 's/.* wl=\([0-9a-f]*\) .*/\1/')
expect_error() { # FILE-CONTENT PATTERN WHAT
  printf '%s\n' "$1" >"$W/bad.sched"
  if "$DRKC" "$m" "${F[@]}" --emit=tile --schedules="$W/bad.sched" -o "$W/bad.drkt" 2>"$W/bad.err"; then bad "$3: accepted"
  elif ! grep -q -- "$2" "$W/bad.err"; then bad "$3: error does not match '$2':"; sed 's/^/  | /' "$W/bad.err"
  elif [ "$(grep -c 'error' "$W/bad.err")" != 1 ]; then bad "$3: not exactly one error:"; sed 's/^/  | /' "$W/bad.err"
  fi
}
expect_error "# c
$kname mm.tile_x=5" "bad.sched:2:.*error: kernel '$kname': 'mm.tile_x=5' is not KEY=VALUE with a known key" "unknown knob"
expect_error "$kname mm.tile_n=96" "bad.sched:1:.*mm.tile_n: a power of two in 64..256, not '96'" "illegal value"
expect_error "$kname mm.split_k=x" "bad.sched:1:.*mm.split_k: 1..16, not 'x'" "non-number"
expect_error "k9999_MatMul mm.split_k=2" "bad.sched:1:1: error: schedule for kernel 'k9999_MatMul': the model has no such kernel" "no such kernel"
expect_error "matmul mm.split_k=2" "bad.sched:1:1: error: 'matmul' is not a kernel name" "not a name"
expect_error "$kname wl=0123456789abcdef0123456789abcdef mm.tile_n=64" "was made for workload 0123456789abcdef0123456789abcdef; this model's kernel is workload $wl" "other workload"
expect_error "$kname wl=12 mm.tile_n=64" "bad.sched:1:.*workload key '12' is not 32 hex digits" "short key"
expect_error "$kname rows.spt=2" "bad.sched:1:1: error: schedule for kernel '$kname': knob rows.spt does not apply to it (a mm_ws kernel)" "knob of another kind"
expect_error "$kname mm.tile_n=256 mm.stages=8" "error: the schedule needs [0-9]* bytes of shared memory (8 stages of 128 x 64 and 64 x 256 tiles), more than the 232448 a program has on sm_90a" "a ring past shared memory"
expect_error "$kname mm.tile_n=64
$kname mm.stages=3" "bad.sched:2:1: error: a second schedule for the kernels of '$kname' (line 1 has one)" "two lines"
"$DRKC" "$m" "${F[@]}" --emit=tile --schedules="$W/none.sched" -o "$W/x" 2>"$W/none.err" && bad "missing file accepted"
grep -q "none.sched" "$W/none.err" || bad "missing file: error does not name it"
[ $fail = 0 ] && echo "schedules: all passed"
exit $fail
