#!/usr/bin/env bash
# The attention and rope test graphs (tests/fuse/attn_*.drkg) on a GPU against the CPU
# interpreter: `drkc run --device=cuda --check` at fusion levels 3 (one flash kernel) and 1,
# for TARGET (default sm_90a: the wgmma kernel). The two BERT-style graphs take an i64 key
# mask that the graph turns into (1 - mask) * -10000: drkc run's random i64 inputs (0..3) would
# add +10000/+20000 to scores, which the unfused graph rounds to f16 and the flash kernel keeps
# in f32 (docs/fusion.md, Rounding), so they get 0/1 masks (and their other inputs) from numpy.
#   usage: attn_graphs.sh DRKC [TARGET]        exit 1 if any check fails, 77 without a GPU
set -u
DRKC=$1; TARGET=${2:-sm_90a}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
ldconfig -p 2>/dev/null | grep -q "libcuda.so.1" || { echo "SKIP: no CUDA driver"; exit 77; }
M=$(mktemp -d); trap 'rm -rf "$M"' EXIT
python3 - "$M" <<'EOP' || exit 1
import sys, numpy as np
d = sys.argv[1]; r = np.random.default_rng(7)
m = (r.random((2, 80)) < 0.8).astype(np.int64); m[:, 0] = 1
np.save(f"{d}/mask.npy", m)
np.save(f"{d}/x.npy", r.standard_normal((2, 80, 48)).astype(np.float16))
np.save(f"{d}/w.npy", (r.standard_normal((48, 360)) * 0.15).astype(np.float16))
np.save(f"{d}/b.npy", (r.standard_normal(360) * 0.1).astype(np.float16))
for n in "qkv": np.save(f"{d}/{n}.npy", r.standard_normal((2, 80, 120)).astype(np.float16))
EOP
pass=0; fail=0
for g in "$SRC"/tests/fuse/attn_*.drkg "$SRC"/tests/fuse/rope_*.drkg; do
  ins=()
  case $(basename "$g") in
    attn_bert_f16.drkg) ins=(--input q=$M/q.npy --input k=$M/k.npy --input v=$M/v.npy --input mask=$M/mask.npy) ;;
    attn_qkv_merged_bias_f16.drkg) ins=(--input x=$M/x.npy --input w=$M/w.npy --input b=$M/b.npy --input mask=$M/mask.npy) ;;
  esac
  for lvl in 3 1; do
    out=$("$DRKC" run "$g" --device=cuda --target="$TARGET" --check --fusion-aggressiveness=$lvl "${ins[@]}" 2>&1)
    if grep -q PASS <<<"$out" && ! grep -q FAIL <<<"$out"; then
      pass=$((pass + 1)); echo "PASS $(basename "$g") level $lvl: $(grep -o 'rel error [^ ]*' <<<"$out" | tr '\n' ' ')"
    else
      fail=$((fail + 1)); echo "FAIL $(basename "$g") level $lvl:"; sed 's/^/  | /' <<<"$out" | head -10
    fi
  done
done
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
