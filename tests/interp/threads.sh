#!/bin/sh
# The reference interpreter gives byte-identical outputs for every thread count and SIMD width:
# a model through every threaded path (gen_threads_model.py: Conv per image and with a split
# GEMM, folded and batched MatMul, Gemm, norms, Softmax, Transpose, reductions), in f64 (the sums' own bits)
# and f32, run by `drkc run --device=cpu` with DRK_INTERP_THREADS=1 (the reference), 4, 3 with
# the baseline micro-kernel, 2 with the AVX2 one, and --jobs=5 (the driver's thread option).
# Usage: threads.sh DRKC PYTHON WORKDIR
set -u
DRKC=$1 PY=$2 W=$3
rm -rf "$W" && mkdir -p "$W" || exit 1
fails=0
"$PY" "$(dirname "$0")/gen_threads_model.py" "$W/t32.drkg" || exit 1
sed 's/f32\[/f64[/g' "$W/t32.drkg" >"$W/t64.drkg"
run() { # run NAME MODEL [ENV...] -- [ARGS...]
  name=$1 model=$2
  shift 2
  envs=
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs="$envs $1"; shift; done
  [ $# -gt 0 ] && shift
  if ! env $envs "$DRKC" run "$model" --device=cpu --output-dir "$W/$name" "$@" >"$W/$name.log" 2>&1; then
    echo "FAIL $name: drkc run failed"; cat "$W/$name.log"; fails=$((fails + 1))
  fi
}
for dt in 32 64; do
  run ref$dt "$W/t$dt.drkg" DRK_INTERP_THREADS=1 --
  run t4_$dt "$W/t$dt.drkg" DRK_INTERP_THREADS=4 --
  run generic_$dt "$W/t$dt.drkg" DRK_INTERP_THREADS=3 DRK_INTERP_SIMD=generic --
  run avx2_$dt "$W/t$dt.drkg" DRK_INTERP_THREADS=2 DRK_INTERP_SIMD=avx2 --
  run jobs_$dt "$W/t$dt.drkg" DRK_INTERP_THREADS=1 -- --jobs=5
  for v in t4 generic avx2 jobs; do
    for i in 0 1 2 3 4 5; do
      f=output_$i.pb
      if [ ! -s "$W/ref$dt/$f" ]; then echo "FAIL ref$dt: no $f"; fails=$((fails + 1)); continue; fi
      cmp -s "$W/ref$dt/$f" "$W/${v}_$dt/$f" || { echo "FAIL ${v}_$dt: $f differs from the 1-thread run"; fails=$((fails + 1)); }
    done
  done
done
[ $fails -eq 0 ] && echo "PASS: identical outputs for 1, 2, 3, 4, 5 threads and 3 micro-kernels (f32, f64)"
[ $fails -eq 0 ]
