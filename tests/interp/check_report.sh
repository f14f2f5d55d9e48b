#!/bin/sh
# `drkc run --check` on outputs whose reference is ~0 everywhere: the check says so and reports
# the absolute error instead of a relative error of 0; ordinary outputs keep the usual line.
# Usage: check_report.sh DRKC WORKDIR
set -u
DRKC=$1 W=$2
rm -rf "$W" && mkdir -p "$W" || exit 1
fails=0
cat >"$W/tiny.drkg" <<'G'
graph @tiny(%x: f32[2, 3]) -> (%y, %z, %u) {
  %c: f32[1] = const [3e-12]
  %y: f32[2, 3] = Mul(%x, %c)
  %w: f32[3, 2] = const [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
  %z: f32[2, 2] = MatMul(%x, %w)
  %k: f32[1] = const [0.0]
  %u: f32[2, 3] = Mul(%x, %k)
  return %y, %z, %u
}
G
out=$("$DRKC" run "$W/tiny.drkg" --check 2>&1)
rc=$?
echo "$out"
expect() {
  echo "$out" | grep -Eq "$1" || { echo "FAIL: no line matching: $1"; fails=$((fails + 1)); }
}
[ $rc -eq 0 ] || { echo "FAIL: exit status $rc"; fails=$((fails + 1)); }
expect "^check output 0 'y': reference is ~0 everywhere \(max \|ref\| = 2\.[0-9]+e-12\): relative error not meaningful; absolute error [0-9.e+-]+ \(tolerance 1e-04, absolute\) PASS$"
expect "^check output 1 'z': rel error [0-9.e+-]+ \(tolerance 1e-04\) PASS$"
expect "^check output 2 'u': reference is ~0 everywhere \(max \|ref\| = 0\): relative error not meaningful; absolute error 0 \(tolerance 1e-04, absolute\) PASS$"
if echo "$out" | grep -q "'y': rel error"; then echo "FAIL: a relative error printed for the ~0 output"; fails=$((fails + 1)); fi
[ $fails -eq 0 ] && echo PASS
[ $fails -eq 0 ]
